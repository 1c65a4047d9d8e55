"""Message commands of ``pumice admin`` (mqadmin's ``command.message``).

queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset, queryMsgTraceById (a message's
trace records), printMsg, printMsgByQueue, sendMessage, checkMsgSendRT (send round trips), consumeMessage.
"""

from __future__ import annotations

import time
from typing import Any

import click

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQClientError
from pumice.client.message import Message, MessageExt, MessageQueue, PullStatus
from pumice.client.producer import AsyncProducer
from pumice.client.pull_consumer import AsyncPullConsumer
from pumice.common.mix_all import RMQ_SYS_TRACE_TOPIC, TOOLS_CONSUMER_GROUP
from pumice.tools import admin_output as out
from pumice.tools.sub_command import NOW, TIMESTAMP, Common, check_queue, common_options, refuse_unless, run


def _print_messages(opts: Common, msgs: list[MessageExt], **context: Any) -> None:
    if opts.json:
        out.emit_json({**context, "messages": [out.message_json(m) for m in msgs]})
    else:
        out.print_messages(msgs)


@click.command("queryMsgById")
@common_options
@click.option("-i", "--msgId", "msg_ids", required=True, help="Message id(s), comma separated: offset msgIds, or "
              "UNIQ_KEYs (client msgIds) with -t.")  # fmt: skip
@click.option("-t", "--topic", help="Topic, to look an id up as a UNIQ_KEY.")
@click.option("-g", "--consumerGroup", "group", help="With -d: have this group's client consume them again.")
@click.option(
    "-d", "--clientId", "client_id", help="With -g: the client that consumes them (CONSUME_MESSAGE_DIRECTLY)."
)
@click.option("-s", "--sendMessage", "resend", type=click.BOOL,
              callback=refuse_unless(lambda v: not v, "resending a message by id is not supported: use sendMessage"),
              help="[false] mqadmin's resend switch; only false (print the messages) is taken.")  # fmt: skip
@click.option("-u", "--unitName", "unit_name",
              callback=refuse_unless(lambda v: False, "unit names (for -s true's producer) are not supported"),
              help="Refused: mqadmin's unit name of -s true's producer.")  # fmt: skip
def query_msg_by_id(
    opts: Common, msg_ids: str, topic: str | None, group: str | None, client_id: str | None, resend: bool | None,
    unit_name: str | None,
) -> None:  # fmt: skip
    """Messages by id; with -g and -d, consume them again on a client."""
    ids = [i.strip() for i in msg_ids.split(",") if i.strip()]
    if not ids:
        raise click.BadParameter("no message id", param_hint="'-i' / '--msgId'")
    if bool(group) != bool(client_id):
        raise click.UsageError("give both -g consumerGroup and -d clientId, or neither")

    async def body(a: AsyncMQAdmin) -> list[Any]:
        msgs = [await a.query_msg_by_id(i, topic) for i in ids]
        if group and client_id:
            return [await a.consume_message_directly(group, client_id, m) for m in msgs]
        return msgs

    got = run(opts, body)
    if group and client_id:
        for result in got:
            _print_direct_result(opts, result)
        return
    _print_messages(opts, got)


@click.command("queryMsgByKey")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-k", "--msgKey", "key", required=True, help="Message key (one of the KEYS).")
@click.option("-s", "--beginTimestamp", "begin", type=TIMESTAMP, help="Stored at or after (default: any time).")
@click.option("-e", "--endTimestamp", "end", type=TIMESTAMP, help="Stored at or before (default: any time).")
@click.option("-m", "--maxNum", "max_num", type=click.IntRange(1, 1000), default=64, show_default=True)
def query_msg_by_key(opts: Common, topic: str, key: str, begin: int | None, end: int | None, max_num: int) -> None:
    """Messages of a topic indexed under a key, newest first."""
    now = int(time.time() * 1000)
    begin_ms = 0 if begin is None else (now if begin == NOW else begin)
    end_ms = 2**63 - 1 if end is None else (now if end == NOW else end)
    msgs = run(opts, lambda a: a.query_msg_by_key(topic, key, max_num, begin_ms, end_ms))
    if opts.json:
        _print_messages(opts, msgs, topic=topic, key=key)
        return
    out.print_table(
        ["#Message ID", "#QID", "#Offset"], [(m.msg_id, m.queue_id, m.queue_offset) for m in msgs], right=["#QID"]
    )
    if not msgs:
        click.echo(f"no message of {topic} has the key {key!r}")
        return
    click.echo("")
    out.print_messages(msgs)


@click.command("queryMsgByOffset")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), required=True, help="Queue id.")
@click.option("-o", "--offset", type=click.IntRange(0), required=True, help="Queue offset.")
def query_msg_by_offset(opts: Common, topic: str, broker_name: str, queue_id: int, offset: int) -> None:
    """The message at a queue offset."""

    async def body(a: AsyncMQAdmin) -> MessageExt:
        check_queue(await a.topic_route(topic), topic, broker_name, queue_id, read=True)
        return await a.query_msg_by_offset(topic, broker_name, queue_id, offset)

    m = run(opts, body)
    if opts.json:
        out.emit_json(out.message_json(m))
    else:
        out.print_messages([m])


@click.command("sendMessage")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-p", "--body", required=True, help="Message body (sent as UTF-8).")
@click.option("-k", "--key", "keys", help="Message keys (space separated).")
@click.option("-c", "--tags", help="Message tag.")
@click.option("-b", "--broker", "broker_name", help="Send to this broker (name).")
@click.option("-i", "--qid", "queue_id", type=click.IntRange(0), help="Send to this queue (needs -b).")
@click.option("-m", "--msgTraceEnable", "msg_trace", type=click.BOOL, default=False, show_default=True,
              callback=refuse_unless(lambda v: not v, "message trace is not supported by Pumice's producer"),
              help="[false] mqadmin's message trace switch; only false is taken.")  # fmt: skip
def send_message(
    opts: Common,
    topic: str,
    body: str,
    keys: str | None,
    tags: str | None,
    broker_name: str | None,
    queue_id: int | None,
    msg_trace: bool,
) -> None:
    """Send one message."""
    if queue_id is not None and broker_name is None:
        raise click.UsageError("Broker name must be set if the queue is chosen: -i needs -b")

    async def send(a: AsyncMQAdmin) -> Any:
        mq = None
        if broker_name is not None:
            route = await a.topic_route(topic)
            check_queue(route, topic, broker_name, queue_id, read=False)
            if queue_id is not None:
                mq = MessageQueue(topic, broker_name, queue_id)
        async with AsyncProducer(f"PUMICE_ADMIN_{time.time_ns()}", client_instance=a.instance) as p:
            msg = Message(topic, body.encode(), tags=tags, keys=keys)
            if mq is None and broker_name is not None:
                mqs = [q for q in await p.fetch_publish_message_queues(topic) if q.broker_name == broker_name]
                mq = mqs[time.time_ns() % len(mqs)] if mqs else None
            return await p.send(msg, mq)

    r = run(opts, send)
    if opts.json:
        out.emit_json({
            "brokerName": r.message_queue.broker_name, "queueId": r.message_queue.queue_id,
            "sendStatus": r.send_status.value, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
            "queueOffset": r.queue_offset,
        })  # fmt: skip
        return
    out.print_table(
        ["#Broker Name", "#QID", "#Send Result", "#MsgId", "#OffsetMsgId", "#Queue Offset"],
        [(r.message_queue.broker_name, r.message_queue.queue_id, r.send_status.value, r.msg_id, r.offset_msg_id,
          r.queue_offset)],
    )  # fmt: skip


@click.command("consumeMessage")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerName", "broker_name", help="Only this broker.")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), help="Only this queue (needs -b).")
@click.option("-o", "--offset", type=click.IntRange(0), help="Start at this queue offset (needs -i).")
@click.option(
    "-g", "--consumerGroup", "group", default=TOOLS_CONSUMER_GROUP, show_default=True, help="Group to pull as."
)
@click.option("-s", "--beginTimestamp", "begin", type=TIMESTAMP, help="Stored at or after this time.")
@click.option("-e", "--endTimestamp", "end", type=TIMESTAMP, help="Stored at or before this time.")
@click.option("-c", "--MessageNumber", "count", type=click.IntRange(1, 100_000), default=128, show_default=True,
              help="At most this many messages.")  # fmt: skip
def consume_message(
    opts: Common,
    topic: str,
    broker_name: str | None,
    queue_id: int | None,
    offset: int | None,
    group: str,
    begin: int | None,
    end: int | None,
    count: int,
) -> None:
    """Read messages of a topic (commits no offset), oldest first per queue."""
    if queue_id is not None and broker_name is None:
        raise click.UsageError("Please set the brokerName before queueId: -i needs -b")
    if offset is not None and queue_id is None:
        raise click.UsageError("please set queueId before offset: -o needs -i")
    now = int(time.time() * 1000)
    begin_ms = None if begin is None else (now if begin == NOW else begin)
    end_ms = None if end is None else (now if end == NOW else end)
    if begin_ms is not None and end_ms is not None and begin_ms > end_ms:
        raise click.BadParameter("the begin timestamp is after the end timestamp", param_hint="'-s' / '-e'")

    async def body(a: AsyncMQAdmin) -> list[MessageExt]:
        route = await a.topic_route(topic)
        if broker_name is not None:
            check_queue(route, topic, broker_name, queue_id, read=True)
        mqs = [
            mq
            for mq in route.subscribe_queues(topic)
            if (broker_name is None or mq.broker_name == broker_name) and (queue_id is None or mq.queue_id == queue_id)
        ]
        got: list[MessageExt] = []
        async with AsyncPullConsumer(group, client_instance=a.instance) as c:
            for mq in mqs:
                if len(got) >= count:
                    break
                lo = await c.min_offset(mq)
                hi = await c.max_offset(mq)
                if begin_ms is not None:
                    lo = max(lo, await c.search_offset(mq, begin_ms))
                if offset is not None:
                    lo = max(lo, offset)
                pos = lo
                for _ in range(count + 1):  # each round makes progress or ends the queue
                    if pos >= hi or len(got) >= count:
                        break
                    res = await c.pull(mq, "*", pos, min(32, count - len(got), hi - pos))
                    if res.status is not PullStatus.FOUND and res.status is not PullStatus.NO_MATCHED_MSG:
                        break
                    if res.next_begin_offset <= pos:
                        break
                    pos = res.next_begin_offset
                    stop = False
                    for m in res.msgs:
                        if begin_ms is not None and m.store_timestamp < begin_ms:
                            continue
                        if end_ms is not None and m.store_timestamp > end_ms:
                            stop = True
                            break
                        got.append(m)
                    if stop:
                        break
        return got[:count]

    msgs = run(opts, body)
    if opts.json:
        _print_messages(opts, msgs, topic=topic, count=len(msgs))
        return
    if msgs:
        out.print_messages(msgs)
        click.echo("")
    click.echo(f"consumed {len(msgs)} message(s) of {topic}" + (f" (the first {count})" if len(msgs) == count else ""))


@click.command("queryMsgByUniqueKey")
@common_options
@click.option("-i", "--msgId", "msg_id", required=True, help="The message's unique key (client msgId, UNIQ_KEY).")
@click.option("-t", "--topic", required=True, help="The message's topic.")
@click.option("-g", "--consumerGroup", "group", help="With -d: have this group's client consume it again.")
@click.option("-d", "--clientId", "client_id", help="With -g: the client that consumes it (CONSUME_MESSAGE_DIRECTLY).")
@click.option("-a", "--showAll", "show_all", is_flag=True, help="Print every message with the key (at most 32).")
def query_msg_by_unique_key(
    opts: Common, msg_id: str, topic: str, group: str | None, client_id: str | None, show_all: bool
) -> None:
    """Messages by unique key (the client's msgId); with -g and -d, consume it again on a client."""
    key = msg_id.strip()
    if bool(group) != bool(client_id):
        raise click.UsageError("give both -g consumerGroup and -d clientId, or neither")

    async def body(a: AsyncMQAdmin) -> Any:
        msgs = await a.query_msg_by_unique_key(topic, key)
        if not msgs:
            raise MQClientError(f"no message of {topic} has the unique key {key}")
        if group and client_id:
            return await a.consume_message_directly(group, client_id, msgs[0])
        return msgs if show_all else msgs[:1]

    got = run(opts, body)
    if isinstance(got, dict):
        _print_direct_result(opts, got)
        return
    _print_messages(opts, got, topic=topic, msgId=key)


def _print_direct_result(opts: Common, result: dict[str, Any]) -> None:
    """A ConsumeMessageDirectlyResult: JSON, or its Java toString."""
    if opts.json:
        out.emit_json(result)
        return
    fields = ", ".join(f"{k}={'null' if v is None else out.java_text(v)}" for k, v in result.items())
    click.echo(f"ConsumeMessageDirectlyResult [{fields}]")


def _message_text(m: MessageExt) -> str:
    """A message as Java's MessageExt.toString prints it (mqadmin's printMsg)."""
    props = ", ".join(f"{k}={v}" for k, v in m.properties.items())
    return (
        f"MessageExt [brokerName={m.broker_name}, queueId={m.queue_id}, storeSize={m.store_size}, "
        f"queueOffset={m.queue_offset}, sysFlag={m.sys_flag}, bornTimestamp={m.born_timestamp}, "
        f"bornHost={m.born_host}, storeTimestamp={m.store_timestamp}, storeHost={m.store_host}, "
        f"msgId={m.offset_msg_id}, commitLogOffset={m.commit_log_offset}, bodyCRC={m.body_crc}, "
        f"reconsumeTimes={m.reconsume_times}, toString()=Message{{topic='{m.topic}', flag={m.flag}, "
        f"properties={{{props}}}, body=[{len(m.body)} bytes]}}]"
    )


@click.command("printMsg")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True, help="The bodies' charset.")
@click.option("-s", "--subExpression", "sub_expression", default="*", show_default=True,
              help="Tag expression (TagA || TagB).")  # fmt: skip
@click.option("-b", "--beginTimestamp", "begin", type=TIMESTAMP, help="Stored at or after this time.")
@click.option("-e", "--endTimestamp", "end", type=TIMESTAMP, help="Up to the offset stored at this time.")
@click.option("-d", "--printBody", "print_body", type=click.BOOL, default=True, show_default=True,
              help="[true|false] print the bodies.")  # fmt: skip
def print_msg(
    opts: Common, topic: str, charset: str, sub_expression: str, begin: int | None, end: int | None,
    print_body: bool,
) -> None:  # fmt: skip
    """Every message of a topic, queue by queue (oldest first)."""
    try:
        "".encode(charset)
    except LookupError:
        raise click.BadParameter(f"unknown charset {charset!r}", param_hint="'-c' / '--charsetName'") from None
    now = int(time.time() * 1000)
    begin_ms = None if begin is None else (now if begin == NOW else begin)
    end_ms = None if end is None else (now if end == NOW else end)

    async def body(a: AsyncMQAdmin) -> list[dict[str, Any]]:
        route = await a.topic_route(topic)
        queues: list[dict[str, Any]] = []
        async with AsyncPullConsumer(TOOLS_CONSUMER_GROUP, client_instance=a.instance) as c:
            for mq in route.subscribe_queues(topic):
                lo, hi = await c.min_offset(mq), await c.max_offset(mq)
                entry: dict[str, Any] = {"mq": mq, "minOffset": lo, "maxOffset": hi, "messages": [], "end": None}
                queues.append(entry)
                if begin_ms is not None:
                    lo = await c.search_offset(mq, begin_ms)
                if end_ms is not None:
                    hi = await c.search_offset(mq, end_ms)
                pos = lo
                for _ in range(max(hi - lo, 0) + 1):  # each round moves on, or ends the queue
                    if pos >= hi:
                        break
                    res = await c.pull(mq, sub_expression, pos, min(32, hi - pos))
                    if res.status is PullStatus.FOUND:
                        entry["messages"] += res.msgs
                    elif res.status is PullStatus.NO_MATCHED_MSG:
                        entry["end"] = ("no matched msg", res.status.name, pos)
                    else:
                        entry["end"] = ("print msg finished", res.status.name, pos)
                        break
                    if res.next_begin_offset <= pos:
                        break
                    pos = res.next_begin_offset
        return queues

    queues = run(opts, body)

    def text(m: MessageExt) -> str:
        return m.body.decode(charset, "replace") if print_body else "NOT PRINT BODY"

    if opts.json:
        out.emit_json({
            "topic": topic,
            "queues": [
                {"brokerName": q["mq"].broker_name, "queueId": q["mq"].queue_id, "minOffset": q["minOffset"],
                 "maxOffset": q["maxOffset"],
                 "messages": [{**out.message_json(m), **({} if print_body else {"body": None})} for m in q["messages"]]}
                for q in queues
            ],
        })  # fmt: skip
        return
    for q in queues:
        mq = q["mq"]
        click.echo(f"minOffset={q['minOffset']}, maxOffset={q['maxOffset']}, MessageQueue [topic={mq.topic}, "
                   f"brokerName={mq.broker_name}, queueId={mq.queue_id}]")  # fmt: skip
        for m in q["messages"]:
            click.echo(f"MSGID: {m.msg_id} {_message_text(m)} BODY: {text(m)}")
        if q["end"] is not None:
            what, status, offset = q["end"]
            click.echo(f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}] {what}. "
                       f"status={status}, offset={offset}")  # fmt: skip
    click.echo("--------------------------------------------------------")


@click.command("printMsgByQueue")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), required=True, help="Queue id.")
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True, help="The bodies' charset.")
@click.option("-s", "--subExpression", "sub_expression", default="*", show_default=True,
              help="Tag expression (TagA || TagB).")  # fmt: skip
@click.option("-b", "--beginTimestamp", "begin", type=TIMESTAMP, help="From the offset stored at this time.")
@click.option("-e", "--endTimestamp", "end", type=TIMESTAMP, help="Up to the offset stored at this time.")
@click.option("-p", "--printMsg", "--print msg", "print_messages", type=click.BOOL, default=False, show_default=True,
              help="[true|false] print the messages.")  # fmt: skip
@click.option("-d", "--printBody", "print_body", type=click.BOOL, default=False, show_default=True,
              help="[true|false] print the bodies (with -p).")  # fmt: skip
@click.option("-f", "--calculate", type=click.BOOL, default=False, show_default=True,
              help="[true|false] count the messages by tag.")  # fmt: skip
def print_msg_by_queue(
    opts: Common, topic: str, broker_name: str, queue_id: int, charset: str, sub_expression: str, begin: int | None,
    end: int | None, print_messages: bool, print_body: bool, calculate: bool,
) -> None:  # fmt: skip
    """The messages of one queue (oldest first), and with -f their count per tag."""
    try:
        "".encode(charset)
    except LookupError:
        raise click.BadParameter(f"unknown charset {charset!r}", param_hint="'-c' / '--charsetName'") from None
    now = int(time.time() * 1000)
    mq = MessageQueue(topic, broker_name, queue_id)

    async def body(a: AsyncMQAdmin) -> list[MessageExt]:
        check_queue(await a.topic_route(topic), topic, broker_name, queue_id, read=True)
        msgs: list[MessageExt] = []
        async with AsyncPullConsumer(TOOLS_CONSUMER_GROUP, client_instance=a.instance) as c:
            lo, hi = await c.min_offset(mq), await c.max_offset(mq)
            if begin is not None:
                lo = await c.search_offset(mq, now if begin == NOW else begin)
            if end is not None:
                hi = await c.search_offset(mq, now if end == NOW else end)
            pos = lo
            while pos < hi:
                res = await c.pull(mq, sub_expression, pos, 32)
                if res.status is not PullStatus.FOUND or res.next_begin_offset <= pos:
                    break
                msgs += res.msgs
                pos = res.next_begin_offset
        return msgs

    msgs = run(opts, body)
    tags: dict[str, int] = {}
    for m in msgs:
        if m.tags and m.tags.strip():
            tags[m.tags] = tags.get(m.tags, 0) + 1
    by_count = sorted(tags.items(), key=lambda kv: -kv[1])
    if opts.json:
        out.emit_json({
            "topic": topic, "brokerName": broker_name, "queueId": queue_id,
            **({"messages": [{**out.message_json(m), **({} if print_body else {"body": None})} for m in msgs]}
               if print_messages else {}),
            **({"tagCounts": dict(by_count)} if calculate else {}),
        })  # fmt: skip
        return
    if print_messages:
        for m in msgs:
            text = m.body.decode(charset, "replace") if print_body else "NOT PRINT BODY"
            click.echo(f"MSGID: {m.msg_id} {_message_text(m)} BODY: {text}")
    if calculate:
        for tag, n in by_count:
            click.echo(f"Tag: {tag:<30} Count: {n}")


@click.command("checkMsgSendRT")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--amount", type=click.IntRange(1), default=100, show_default=True, help="Messages to send.")
@click.option("-s", "--size", type=click.IntRange(0), default=128, show_default=True, help="Message size (bytes).")
def check_msg_send_rt(opts: Common, topic: str, amount: int, size: int) -> None:
    """Send messages to a topic's queues in turn and print each send's round trip, then the average."""
    t = topic.strip()

    async def body(a: AsyncMQAdmin) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        picked: list[MessageQueue] = []

        def select(mqs: Any, msg: Message, arg: Any) -> MessageQueue:
            picked.append(mqs[int(arg) % len(mqs)])
            return picked[-1]

        async with AsyncProducer(f"PUMICE_ADMIN_{time.time_ns()}", client_instance=a.instance) as p:
            for i in range(amount):
                begin = time.monotonic()
                try:
                    await p.send(Message(t, b"a" * size), selector=select, arg=i)
                    ok = True
                except MQClientError:
                    ok = False
                rt = (time.monotonic() - begin) * 1000
                mq = picked[-1] if picked else None
                rows.append({"brokerName": mq.broker_name if mq else None, "queueId": mq.queue_id if mq else None,
                             "sendResult": ok, "rtMs": rt})  # fmt: skip
        return rows

    rows = run(opts, body)
    avg = sum(r["rtMs"] for r in rows[1:]) / max(len(rows) - 1, 1)  # as mqadmin: the first send not counted
    if opts.json:
        out.emit_json({"topic": t, "sends": rows, "avgRtMs": round(avg, 3)})
        return
    out.print_table(
        ["#Broker Name", "#QID", "#Send Result", "#RT"],
        [(r["brokerName"], r["queueId"], str(r["sendResult"]).lower(), round(r["rtMs"])) for r in rows],
        right=["#QID", "#RT"],
    )
    click.echo(f"Avg RT: {avg:.2f}")


_FIELD_SPLITOR, _CONTENT_SPLITOR = "\x02", "\x01"  # TraceConstants'


def _java_split(text: str, sep: str) -> list[str]:
    """Java's String.split: trailing empty strings dropped (but "" stays [""])."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def trace_views(msg_id: str, m: MessageExt) -> list[dict[str, Any]]:
    """The records of ``msg_id`` in a trace message (TraceView.decodeFromTraceTransData): Pub, SubBefore,
    SubAfter and EndTransaction contexts, as TraceDataEncoder writes them."""
    views = []
    host = m.born_host.rsplit(":", 1)[0].strip("[]/")
    for context in _java_split(m.body.decode("utf-8", "replace"), _FIELD_SPLITOR):
        line = _java_split(context, _CONTENT_SPLITOR)
        try:
            if line[0] in ("Pub", "EndTransaction"):
                view = {"type": line[0], "timestamp": int(line[1]), "groupName": line[3], "topic": line[4],
                        "msgId": line[5], "tags": line[6], "keys": line[7], "storeHost": line[8]}  # fmt: skip
                if line[0] == "Pub":
                    view["costTime"] = int(line[10])
                    view["success"] = len(line) >= 13 and line[-1 if len(line) in (13, 14) else 13].lower() == "true"
                    view["offsetMsgId"] = line[12] if len(line) >= 14 else None
                else:
                    view.update(costTime=0, success=False, offsetMsgId=None)
            elif line[0] == "SubBefore":
                view = {"type": "SubBefore", "timestamp": int(line[1]), "groupName": line[3], "msgId": line[5],
                        "keys": line[7], "costTime": 0, "success": False}  # fmt: skip
            elif line[0] == "SubAfter":
                view = {"type": "SubAfter", "msgId": line[2], "costTime": int(line[3]),
                        "success": line[4].lower() == "true", "keys": line[5],
                        "timestamp": int(line[7]) if len(line) >= 9 else 0,
                        "groupName": line[8] if len(line) >= 9 else None}  # fmt: skip
            else:
                continue
        except (IndexError, ValueError):
            continue  # not a record TraceDataEncoder would write
        if view["msgId"] != msg_id:
            continue
        view["status"] = "success" if view.pop("success") else "failed"
        view["clientHost"] = host
        views.append(view)
    return views


@click.command("queryMsgTraceById")
@common_options
@click.option("-i", "--msgId", "msg_id", required=True, help="Message id (its UNIQ_KEY).")
@click.option("-t", "--traceTopic", "trace_topic", default=RMQ_SYS_TRACE_TOPIC, show_default=True,
              help="The trace topic.")  # fmt: skip
def query_msg_trace_by_id(opts: Common, msg_id: str, trace_topic: str) -> None:
    """A message's trace: its send (Pub) and each group's consumption (Sub), from the trace topic."""
    key, t = msg_id.strip(), trace_topic.strip()

    async def body(a: AsyncMQAdmin) -> list[dict[str, Any]]:
        msgs = await a.query_msg_by_key(t, key, 64, 0, int(time.time() * 1000))
        if not msgs:
            raise MQClientError(f"no trace of {key} in {t}: query message by key finished, but no message.")
        return [v for m in msgs for v in trace_views(key, m)]

    views = run(opts, body)
    if opts.json:
        out.emit_json({"msgId": key, "traceTopic": t, "traces": views})
        return

    def row(kind: str, v: dict[str, Any]) -> str:
        when = out.human_ms(v["timestamp"], False)
        cost = f"{v['costTime']}ms"
        group = v["groupName"] or "null"
        return f"{kind:<10} {group:<20} {v['clientHost']:<20} {when:<20} {cost:<10} {v['status']:<10}"

    for v in views:
        if v["type"] == "Pub":
            click.echo(f"{'#Type':<10} {'#ProducerGroup':<20} {'#ClientHost':<20} {'#SendTime':<20} {'#CostTimes':<10} "
                       f"{'#Status':<10}")  # fmt: skip
            click.echo(row("Pub", v))
            click.echo("")
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for v in views:
        if v["type"] == "SubAfter":
            groups.setdefault(v["groupName"], []).append(v)
    for subs in groups.values():
        click.echo(f"{'#Type':<10} {'#ConsumerGroup':<20} {'#ClientHost':<20} {'#ConsumerTime':<20} "
                   f"{'#CostTimes':<10} {'#Status':<10}")  # fmt: skip
        for v in subs:
            click.echo(row("Sub", v))
        click.echo("")


COMMANDS: tuple[click.Command, ...] = (
    query_msg_by_unique_key,
    print_msg,
    print_msg_by_queue,
    check_msg_send_rt,
    query_msg_trace_by_id,
    query_msg_by_id,
    query_msg_by_key,
    query_msg_by_offset,
    send_message,
    consume_message,
)
