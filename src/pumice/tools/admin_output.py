"""Output of ``pumice admin``: rich tables and mqadmin-style text for terminals, JSON documents
for ``--json``.

Text goes through a rich ``Console`` with markup, emoji and highlighting off (values such as
``[TagA]`` print as they are); off a terminal the console is 250 columns wide so piped tables
keep one row per line, and tables have no rule under the header (a script splits each line on
whitespace, as it does mqadmin's printf columns). JSON is one document per command, pretty-printed by orjson (2-space
indent, keys in camelCase as RocketMQ names them), ending with a newline.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterable, Sequence
from typing import Any

import click
import orjson
from rich import box
from rich.console import Console
from rich.table import Table

from pumice.client.message import MessageExt
from pumice.common.perm_name import perm_to_string

PIPE_WIDTH = 250
LABEL_WIDTH = 20


def console() -> Console:
    c = Console(markup=False, emoji=False, highlight=False)
    if not c.is_terminal:
        c = Console(markup=False, emoji=False, highlight=False, width=PIPE_WIDTH)
    return c


def emit_json(doc: Any) -> None:
    click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], right: Iterable[str] = ()) -> Table:
    """A table with mqadmin's ``#Column`` headers; columns named in ``right`` are right-aligned.
    Off a terminal it has no rule under the header: mqadmin's plain columns, for scripts."""
    right_set = set(right)
    rule = box.SIMPLE_HEAD if console().is_terminal else None
    t = Table(box=rule, pad_edge=False, show_edge=False, header_style="bold")
    for col in columns:
        t.add_column(col, justify="right" if col in right_set else "left", overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    return t


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], right: Iterable[str] = ()) -> None:
    console().print(table(columns, rows, right))


def human_ms(ms: int, millis: bool = True) -> str:
    """Local time of an epoch-ms timestamp: ``2024-05-01 12:00:00,123`` (mqadmin's format)."""
    if ms <= 0:
        return "N/A"
    try:
        dt = datetime.datetime.fromtimestamp(ms / 1000)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return f"{dt:%Y-%m-%d %H:%M:%S}" + (f",{ms % 1000:03d}" if millis else "")


def java_text(v: Any) -> str:
    """A value as mqadmin prints it: booleans lower case, None empty."""
    return "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def topic_config_text(config: dict[str, Any]) -> str:
    """``TopicConfig.toString()``, as mqadmin updateTopic prints it."""
    return (
        f"TopicConfig [topicName={config['topicName']}, readQueueNums={config['readQueueNums']}, "
        f"writeQueueNums={config['writeQueueNums']}, perm={perm_to_string(config['perm'])}, "
        f"topicFilterType={config['topicFilterType']}, topicSysFlag={config['topicSysFlag']}, "
        f"order={java_text(config['order'])}]"
    )


def subscription_group_text(config: dict[str, Any]) -> str:
    """``SubscriptionGroupConfig.toString()`` of its JSON form, as mqadmin updateSubGroup prints it."""
    return "SubscriptionGroupConfig [" + ", ".join(f"{k}={java_text(v)}" for k, v in config.items()) + "]"


# -- messages -----------------------------------------------------------------------------------


def body_text(body: bytes) -> tuple[str, str]:
    """(body, encoding): the text if the body is UTF-8, else base64."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode(), "base64"


def message_json(m: MessageExt) -> dict[str, Any]:
    body, encoding = body_text(m.body)
    return {
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.topic,
        "brokerName": m.broker_name,
        "tags": m.tags,
        "keys": m.keys,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset,
        "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "bornHost": m.born_host,
        "storeHost": m.store_host,
        "sysFlag": m.sys_flag,
        "flag": m.flag,
        "bodyCrc": m.body_crc,
        "storeSize": m.store_size,
        "properties": dict(m.properties),
        "body": body,
        "bodyEncoding": encoding,
    }


def message_lines(m: MessageExt) -> list[str]:
    """mqadmin's printMsg: one ``Label: value`` line per field, the body last."""
    props = ", ".join(f"{k}={v}" for k, v in m.properties.items())
    body, encoding = body_text(m.body)
    if encoding != "utf-8":
        body = f"<{len(m.body)} bytes, not UTF-8; base64> {body}"
    rows = [
        ("OffsetID:", m.offset_msg_id),
        ("MsgId:", m.msg_id),
        ("Topic:", m.topic),
        ("Broker Name:", m.broker_name or ""),
        ("Tags:", f"[{m.tags if m.tags is not None else 'null'}]"),
        ("Keys:", f"[{' '.join(m.keys) if m.keys else 'null'}]"),
        ("Queue ID:", m.queue_id),
        ("Queue Offset:", m.queue_offset),
        ("CommitLog Offset:", m.commit_log_offset),
        ("Reconsume Times:", m.reconsume_times),
        ("Born Timestamp:", human_ms(m.born_timestamp)),
        ("Store Timestamp:", human_ms(m.store_timestamp)),
        ("Born Host:", m.born_host),
        ("Store Host:", m.store_host),
        ("System Flag:", m.sys_flag),
        ("Properties:", "{" + props + "}"),
        ("Message Body:", body),
    ]
    return [f"{label:<{LABEL_WIDTH}} {value}" for label, value in rows]


def print_messages(msgs: Sequence[MessageExt]) -> None:
    for i, m in enumerate(msgs):
        if i:
            click.echo("")
        click.echo("\n".join(message_lines(m)))
