"""``pumice admin``: mqadmin's everyday commands, with mqadmin's names and flags.

Every command takes ``-n`` (name servers, ``host:port;host:port``; default ``$NAMESRV_ADDR``,
else ``127.0.0.1:9876``), ``--json`` (one pretty-printed JSON document on stdout instead of
the table) and ``--debug`` (a traceback for an unexpected error).

Exit codes: 0 done; 1 the broker or name server refused (``error: TOPIC_NOT_EXIST (17):
<remark>`` on stderr), could not be reached (the address is named), or the request failed;
2 a usage error (a missing or bad flag, a bad timestamp, a broker name or queue id the topic
does not have), as click reports them. Expected failures print one line, never a traceback.

Timestamps (``-s``/``-e``) are epoch milliseconds, ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time,
or ``now`` (for resetOffsetByTime: each queue's max offset, as mqadmin).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click

from pumice.client import admin_output as out
from pumice.client.admin import AsyncMQAdmin
from pumice.client.admin_types import Connection, SubscriptionGroupConfig
from pumice.client.exceptions import MQBrokerError, MQClientError, RemotingError, RemotingTimeoutError
from pumice.client.message import Message, MessageExt, MessageQueue, PullStatus
from pumice.client.producer import AsyncProducer
from pumice.client.pull_consumer import AsyncPullConsumer
from pumice.client.route import TopicRouteData
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.config import is_host_port
from pumice.remoting.mq_version import version_desc
from pumice.remoting.response_code import ResponseCode

T = TypeVar("T")
DEFAULT_NAMESRV = "127.0.0.1:9876"
NOW = -1
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})$")


# -- plumbing -------------------------------------------------------------------------------------


@dataclass
class Common:
    namesrv_addr: str
    json: bool
    debug: bool


def common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """-n, --json and --debug on a command; the command gets them as one ``Common`` (``opts``)."""

    @click.option(
        "-n",
        "--namesrvAddr",
        "namesrv_addr",
        envvar="NAMESRV_ADDR",
        default=DEFAULT_NAMESRV,
        show_default=True,
        show_envvar=True,
        metavar="HOST:PORT[;HOST:PORT]",
        callback=check_addrs,
        help="Name server address list; defaults to $NAMESRV_ADDR, else 127.0.0.1:9876.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document (pretty, orjson) on stdout.")
    @click.option("--debug", is_flag=True, help="Print a traceback for an unexpected error.")
    @functools.wraps(f)
    def wrapper(namesrv_addr: str, as_json: bool, debug: bool, **kwargs: Any) -> Any:
        return f(Common(namesrv_addr, as_json, debug), **kwargs)

    return wrapper


def check_addrs(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """host:port[;host:port], each port 1 to 65535 (an OverflowError from connect() before)."""
    if value is None:
        return None
    for addr in (a.strip() for a in value.split(";")):
        if addr and not is_host_port(addr):
            raise click.BadParameter(f"{addr!r} is not host:port with a port of 1 to 65535", ctx, param)
    return value


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(1)


def _remoting_message(e: RemotingError, namesrv_addrs: list[str]) -> str:
    addr = e.addr or "?"
    role = "name server" if addr in namesrv_addrs else "broker"
    text = str(e)
    prefix = f"cannot connect to {addr}: "
    if text.startswith(prefix):
        return f"cannot connect to the {role} {addr}: {text[len(prefix) :]}"
    if isinstance(e, RemotingTimeoutError):
        return f"the {role} {addr} did not answer: {text}"
    return f"the {role} {addr} failed: {text}"


def run(opts: Common, body: Callable[[AsyncMQAdmin], Awaitable[T]]) -> T:
    """``body(admin)`` on a started AsyncMQAdmin; expected failures end the command with one line."""

    async def main() -> T:
        async with AsyncMQAdmin(opts.namesrv_addr) as admin:
            return await body(admin)

    namesrv_addrs = [a.strip() for a in opts.namesrv_addr.split(";") if a.strip()]
    pumice_log = logging.getLogger("pumice")
    saved_level = pumice_log.level
    if not opts.debug and logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # the client logs what it retries or drops; the command reports the outcome in one line
        pumice_log.setLevel(logging.ERROR)
    try:
        return asyncio.run(main())
    except (click.ClickException, click.exceptions.Exit):
        raise
    except MQBrokerError as e:
        fail(f"{e.code_name} ({e.code}): {e.remark}")
    except RemotingError as e:
        fail(_remoting_message(e, namesrv_addrs))
    except MQClientError as e:
        fail(str(e))
    except Exception as e:
        if opts.debug:
            raise
        fail(f"unexpected {type(e).__name__}: {e} (run again with --debug for the traceback)")
    finally:
        pumice_log.setLevel(saved_level)


class Timestamp(click.ParamType):
    """Epoch milliseconds, ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time) or ``now`` (-1)."""

    name = "timestamp"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text == "now":
            return NOW
        if text.isdigit():
            return int(text)
        m = _DATE.match(text)
        if m:
            y, mo, d, h, mi, s, ms = (int(g) for g in m.groups())
            try:
                dt = datetime.datetime(y, mo, d, h, mi, s, ms * 1000)
            except ValueError as e:
                self.fail(f"{text!r} is not a valid date: {e}", param, ctx)
            return int(dt.timestamp() * 1000)
        self.fail(f"{text!r} is not a timestamp: give epoch milliseconds, yyyy-MM-dd#HH:mm:ss:SSS or now", param, ctx)


TIMESTAMP = Timestamp()


def check_queue(route: TopicRouteData, topic: str, broker_name: str, queue_id: int | None, read: bool) -> None:
    """BadParameter (exit 2) unless ``topic``'s route has ``broker_name`` (and ``queue_id``)."""
    names = sorted({q.broker_name for q in route.queue_datas})
    qd = next((q for q in route.queue_datas if q.broker_name == broker_name), None)
    if qd is None:
        raise click.BadParameter(
            f"the topic {topic} has no broker {broker_name!r} (its brokers: {', '.join(names) or 'none'})",
            param_hint="'-b' / '--brokerName'",
        )
    nums = qd.read_queue_nums if read else qd.write_queue_nums
    if queue_id is not None and not 0 <= queue_id < nums:
        raise click.BadParameter(
            f"{topic} has queues 0..{nums - 1} on {broker_name}, not {queue_id}", param_hint="'-i' / '--queueId'"
        )


def _targets_given(cluster: str | None, broker_addr: str | None) -> None:
    if bool(cluster) == bool(broker_addr):
        raise click.UsageError("give exactly one of -c clusterName and -b brokerAddr")


# -- the group ------------------------------------------------------------------------------------


@click.group(name="admin")
def admin() -> None:
    """mqadmin's commands against a Pumice (or RocketMQ 4.x) cluster.

    Names and flags are mqadmin's. -n defaults to $NAMESRV_ADDR, else 127.0.0.1:9876; --json
    prints one pretty JSON document instead of the table. Errors print one line on stderr
    (exit 1; usage errors exit 2).
    """


# -- topics ---------------------------------------------------------------------------------------


@admin.command("updateTopic")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Create on every master of this cluster.")
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Create on this broker (host:port).")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-r", "--readQueueNums", "read_queue_nums", type=click.IntRange(1, 65535), default=8, show_default=True)
@click.option("-w", "--writeQueueNums", "write_queue_nums", type=click.IntRange(1, 65535), default=8, show_default=True)
@click.option("-p", "--perm", type=click.IntRange(0, 7), default=6, show_default=True, help="2 write, 4 read, 6 both.")
@click.option("-o", "--order", type=click.BOOL, default=False, show_default=True, help="Ordered topic [true|false].")
def update_topic(
    opts: Common,
    cluster: str | None,
    broker_addr: str | None,
    topic: str,
    read_queue_nums: int,
    write_queue_nums: int,
    perm: int,
    order: bool,
) -> None:
    """Create or update a topic."""
    _targets_given(cluster, broker_addr)
    addrs = run(
        opts,
        lambda a: a.create_topic(
            topic,
            cluster=cluster,
            broker_addr=broker_addr,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            order=order,
        ),
    )
    config = {
        "topicName": topic,
        "readQueueNums": read_queue_nums,
        "writeQueueNums": write_queue_nums,
        "perm": perm,
        "order": order,
    }
    if opts.json:
        out.emit_json({"brokers": addrs, "topicConfig": config})
        return
    for addr in addrs:
        click.echo(f"create topic to {addr} success.")
    click.echo(f"TopicConfig {config}")


@admin.command("deleteTopic")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Delete from every master of this cluster (default: the route's).")
@click.option("-t", "--topic", required=True, help="Topic name.")
def delete_topic(opts: Common, cluster: str | None, topic: str) -> None:
    """Delete a topic from the brokers and the name servers."""
    addrs = run(opts, lambda a: a.delete_topic(topic, cluster))
    if opts.json:
        out.emit_json({"topic": topic, "cluster": cluster, "brokers": addrs, "nameServerDeleted": True})
        return
    click.echo(
        f"delete topic [{topic}] from {'cluster [' + cluster + ']' if cluster else 'brokers ' + str(addrs)} success."
    )
    click.echo(f"delete topic [{topic}] from NameServer success.")


@admin.command("topicList")
@common_options
@click.option("-c", "--clusterModel", "cluster_model", is_flag=True, help="Also print each topic's cluster and groups.")
def topic_list(opts: Common, cluster_model: bool) -> None:
    """Every topic the name servers know."""

    async def body(a: AsyncMQAdmin) -> list[dict[str, Any]]:
        topics = sorted(await a.topic_list())
        if not cluster_model:
            return [{"topic": t} for t in topics]
        info = await a.cluster_info()
        clusters: dict[str, set[str]] = {}
        groups: dict[str, set[str]] = {}
        for cluster, names in info.cluster_addr_table.items():
            for name in names:
                bd = info.broker_addr_table.get(name)
                if bd is None or bd.master_addr is None:
                    continue
                configs = (await a.api.get_all_topic_config(bd.master_addr)).get("topicConfigTable") or {}
                for t in configs:
                    clusters.setdefault(t, set()).add(cluster)
                for key in await a.api.get_all_consumer_offset(bd.master_addr):
                    t, _, g = key.rpartition("@")
                    groups.setdefault(t, set()).add(g)
        rows = []
        for t in topics:
            if t.startswith((RETRY_GROUP_TOPIC_PREFIX, "%DLQ%")):
                continue
            rows.append(
                {"topic": t, "clusters": sorted(clusters.get(t, ())), "consumerGroups": sorted(groups.get(t, ()))}
            )
        return rows

    rows = run(opts, body)
    if opts.json:
        out.emit_json({"topics": rows if cluster_model else [r["topic"] for r in rows]})
    elif cluster_model:
        out.print_table(
            ["#Cluster Name", "#Topic", "#Consumer Group"],
            [(",".join(r["clusters"]), r["topic"], ",".join(r["consumerGroups"])) for r in rows],
        )
    else:
        for r in rows:
            click.echo(r["topic"])


@admin.command("topicRoute")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
def topic_route(opts: Common, topic: str) -> None:
    """A topic's route: its brokers and queues."""
    route = run(opts, lambda a: a.topic_route(topic))
    if opts.json:
        out.emit_json(route.to_json())
        return
    out.print_table(
        ["#Cluster Name", "#Broker Name", "#BID", "#Addr"],
        [
            (b.cluster, b.broker_name, bid, addr)
            for b in route.broker_datas
            for bid, addr in sorted(b.broker_addrs.items())
        ],
    )
    out.print_table(
        ["#Broker Name", "#Read Queues", "#Write Queues", "#Perm", "#Sys Flag"],
        [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag) for q in route.queue_datas],
    )
    if route.order_topic_conf:
        click.echo(f"orderTopicConf: {route.order_topic_conf}")


@admin.command("topicStatus")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
def topic_status(opts: Common, topic: str) -> None:
    """Min and max offsets of every queue of a topic."""
    queues = run(opts, lambda a: a.topic_status(topic))
    if opts.json:
        out.emit_json({
            "topic": topic,
            "queues": [
                {"brokerName": q.mq.broker_name, "queueId": q.mq.queue_id, "minOffset": q.min_offset,
                 "maxOffset": q.max_offset, "lastUpdateTimestamp": q.last_update_timestamp}
                for q in queues
            ],
        })  # fmt: skip
        return
    out.print_table(
        ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
        [
            (q.mq.broker_name, q.mq.queue_id, q.min_offset, q.max_offset, out.human_ms(q.last_update_timestamp, False))
            for q in queues
        ],
        right=["#QID", "#Min Offset", "#Max Offset"],
    )


# -- brokers --------------------------------------------------------------------------------------


@admin.command("clusterList")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Only this cluster.")
def cluster_list(opts: Common, cluster: str | None) -> None:
    """The brokers of every cluster, with their runtime figures."""
    rows = run(opts, lambda a: a.cluster_list(cluster))
    if opts.json:
        out.emit_json({
            "brokers": [
                {"cluster": r.cluster, "brokerName": r.broker_name, "brokerId": r.broker_id, "addr": r.addr,
                 "runtime": r.runtime, "error": r.error}
                for r in rows
            ]
        })  # fmt: skip
        return
    now = time.time() * 1000

    def hours(rt: dict[str, str]) -> str:
        try:
            earliest = int(rt.get("earliestMessageTimeStamp", "-1"))
        except ValueError:
            return ""
        return f"{(now - earliest) / 3_600_000:.2f}" if earliest > 0 else "0.00"

    def space(rt: dict[str, str]) -> str:
        try:
            return f"{float(rt['commitLogDiskRatio']):.4f}"
        except (KeyError, ValueError):
            return ""

    def tps(rt: dict[str, str], key: str) -> str:  # the 10 s rate, as mqadmin shows it
        try:
            return f"{float(rt[key].split(' ')[0]):.2f}"
        except (KeyError, ValueError, IndexError):
            return ""

    out.print_table(
        ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS", "#OutTPS", "#InTotalToday",
         "#OutTotalToday", "#PCWait(ms)", "#Hour", "#SPACE", "#Status"],
        [
            (r.cluster, r.broker_name, r.broker_id, r.addr, r.runtime.get("brokerVersionDesc", ""),
             tps(r.runtime, "putTps"), tps(r.runtime, "getTransferedTps"), r.runtime.get("msgPutTotalTodayNow", ""),
             r.runtime.get("msgGetTotalTodayNow", ""), r.runtime.get("pageCacheLockTimeMills", ""), hours(r.runtime),
             space(r.runtime), r.error or r.runtime.get("runningFlags", ""))
            for r in rows
        ],
        right=["#BID", "#InTPS", "#OutTPS", "#InTotalToday", "#OutTotalToday", "#PCWait(ms)", "#Hour", "#SPACE"],
    )  # fmt: skip


def broker_or_cluster(cluster_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """-b brokerAddr or -c clusterName, exactly one (checked when the command runs)."""

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option("-c", "--clusterName", "cluster", help=cluster_help)(f)
        help_b = "Broker address (host:port)."
        return click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help=help_b)(f)

    return deco


@admin.command("brokerStatus")
@common_options
@broker_or_cluster("Every broker of this cluster.")
def broker_status(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """A broker's runtime table (GET_BROKER_RUNTIME_INFO)."""
    _targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> dict[str, dict[str, str]]:
        if broker_addr:
            return {broker_addr: await a.broker_status(broker_addr)}
        rows = await a.cluster_list(cluster)
        if not rows:
            raise MQClientError(f"the cluster {cluster!r} is unknown to the name server")
        return {r.addr: r.runtime if r.error is None else {"error": r.error} for r in rows}

    tables = run(opts, body)
    if opts.json:
        out.emit_json(tables[broker_addr] if broker_addr else tables)
        return
    if broker_addr:
        out.print_table(["#Key", "#Value"], sorted(tables[broker_addr].items()))
    else:
        out.print_table(
            ["#Addr", "#Key", "#Value"], [(addr, k, v) for addr, t in tables.items() for k, v in sorted(t.items())]
        )


@admin.command("deleteExpiredCommitLog")
@common_options
@broker_or_cluster("Every master of this cluster.")
def delete_expired_commit_log(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """Delete expired CommitLog files now, whatever deleteWhen says (DELETE_EXPIRED_COMMITLOG)."""
    _targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> dict[str, str | None]:
        return await a.delete_expired_commit_log(cluster, broker_addr)

    results = run(opts, body)
    if opts.json:
        out.emit_json({addr: {"ok": err is None, "error": err} for addr, err in results.items()})
    else:
        out.print_table(["#Broker", "#Result"], [(addr, err or "success") for addr, err in results.items()])
    if any(err is not None for err in results.values()):
        raise click.exceptions.Exit(1)


# -- consumers ------------------------------------------------------------------------------------


@admin.command("consumerProgress")
@common_options
@click.option("-g", "--groupName", "group", help="Consumer group (default: every group with a retry topic or offsets).")
@click.option("-t", "--topicName", "topic", help="Only this topic (with -g).")
def consumer_progress(opts: Common, group: str | None, topic: str | None) -> None:
    """A group's offsets and lag per queue; without -g, a summary of every group."""
    if group is None:
        if topic is not None:
            raise click.UsageError("-t needs -g")
        _all_groups(opts)
        return
    progress = run(opts, lambda a: a.consumer_progress(group, topic))
    if not progress.queues:  # as mqadmin (MQAdminImpl's CONSUMER_NOT_ONLINE)
        fail(f"group {group!r}: Not found the consumer group consume stats, because return offset table is empty, "
             "maybe the consumer not consume any message")  # fmt: skip
    if opts.json:
        out.emit_json({
            "group": group,
            "queues": [
                {"topic": q.mq.topic, "brokerName": q.mq.broker_name, "queueId": q.mq.queue_id,
                 "brokerOffset": q.broker_offset, "consumerOffset": q.consumer_offset, "diff": q.lag,
                 "lastTimestamp": q.last_timestamp}
                for q in progress.queues
            ],
            "consumeTps": progress.consume_tps,
            "diffTotal": progress.total_lag,
        })  # fmt: skip
        return
    out.print_table(
        ["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Client IP", "#Diff", "#LastTime"],
        [
            (q.mq.topic, q.mq.broker_name, q.mq.queue_id, q.broker_offset, q.consumer_offset, "N/A", q.lag,
             out.human_ms(q.last_timestamp, False))
            for q in progress.queues
        ],
        right=["#QID", "#Broker Offset", "#Consumer Offset", "#Diff"],
    )  # fmt: skip
    click.echo("")
    click.echo(f"Consume TPS: {progress.consume_tps:.2f}")
    click.echo(f"Diff Total: {progress.total_lag}")


_TYPE_DESC = {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH"}
_MODEL_DESC = {"CLUSTERING": "CLUSTER", "BROADCASTING": "BROADCAST"}


def _all_groups(opts: Common) -> None:
    async def body(a: AsyncMQAdmin) -> list[dict[str, Any]]:
        groups = {
            t[len(RETRY_GROUP_TOPIC_PREFIX) :] for t in await a.topic_list() if t.startswith(RETRY_GROUP_TOPIC_PREFIX)
        }
        for addr in (await a.cluster_info()).master_addrs():
            groups.update(key.rpartition("@")[2] for key in await a.api.get_all_consumer_offset(addr))
        rows = []
        for g in sorted(groups):
            progress = await a.consumer_progress(g)
            try:
                conn = await a.consumer_connection(g)
            except MQBrokerError as e:
                if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                conn = None
            online = conn is not None and bool(conn.connections)
            rows.append({
                "group": g,
                "count": len(conn.connections) if conn is not None else 0,
                "version": version_desc(max(c.version for c in conn.connections)) if online else "OFFLINE",
                "consumeType": conn.consume_type if online else None,
                "messageModel": conn.message_model if online else None,
                "consumeTps": progress.consume_tps,
                "diffTotal": progress.total_lag,
            })  # fmt: skip
        return rows

    rows = run(opts, body)
    if opts.json:
        out.emit_json({"groups": rows})
        return
    out.print_table(
        ["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"],
        [(r["group"], r["count"], r["version"], _TYPE_DESC.get(r["consumeType"], r["consumeType"] or ""),
          _MODEL_DESC.get(r["messageModel"], r["messageModel"] or ""), f"{r['consumeTps']:.0f}", r["diffTotal"])
         for r in rows],
        right=["#Count", "#TPS", "#Diff Total"],
    )  # fmt: skip


def _connections_json(conns: list[Connection]) -> list[dict[str, Any]]:
    return [
        {"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language, "version": c.version,
         "versionDesc": version_desc(c.version)}
        for c in conns
    ]  # fmt: skip


def _print_connections(conns: list[Connection]) -> None:
    out.print_table(
        ["#", "#ClientId", "#ClientAddr", "#Language", "#Version"],
        [(f"{i:03d}", c.client_id, c.client_addr, c.language, version_desc(c.version))
         for i, c in enumerate(conns, 1)],
    )  # fmt: skip


@admin.command("consumerConnection")
@common_options
@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group.")
def consumer_connection(opts: Common, group: str) -> None:
    """A group's online clients and subscriptions."""
    conn = run(opts, lambda a: a.consumer_connection(group))
    subs = {t: str((s or {}).get("subString", "")) for t, s in sorted(conn.subscriptions.items())}
    if opts.json:
        out.emit_json({
            "group": group,
            "connections": _connections_json(conn.connections),
            "subscriptions": subs,
            "consumeType": conn.consume_type,
            "messageModel": conn.message_model,
            "consumeFromWhere": conn.consume_from_where,
        })  # fmt: skip
        return
    _print_connections(conn.connections)
    click.echo("Below is subscription:")
    out.print_table(["#", "#Topic", "#SubExpression"], [(f"{i:03d}", t, s) for i, (t, s) in enumerate(subs.items(), 1)])
    click.echo(f"ConsumeType: {conn.consume_type}")
    click.echo(f"MessageModel: {conn.message_model}")
    click.echo(f"ConsumeFromWhere: {conn.consume_from_where}")


@admin.command("producerConnection")
@common_options
@click.option("-g", "--producerGroup", "group", required=True, help="Producer group.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to (its brokers are asked).")
def producer_connection(opts: Common, group: str, topic: str) -> None:
    """A producer group's connections to the brokers of a topic."""
    conns = run(opts, lambda a: a.producer_connection(group, topic))
    if opts.json:
        out.emit_json({"group": group, "connections": _connections_json(conns)})
        return
    _print_connections(conns)


@admin.command("updateSubGroup")
@common_options
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Create on this broker (host:port).")
@click.option("-c", "--clusterName", "cluster", help="Create on every master of this cluster.")
@click.option("-g", "--groupName", "group", required=True, help="Consumer group.")
@click.option("-s", "--consumeEnable", "consume_enable", type=click.BOOL, default=True, show_default=True)
@click.option(
    "-m", "--consumeFromMinEnable", "consume_from_min_enable", type=click.BOOL, default=True, show_default=True
)
@click.option("-d", "--consumeBroadcastEnable", "consume_broadcast_enable", type=click.BOOL, default=True,
              show_default=True)  # fmt: skip
@click.option("-q", "--retryQueueNums", "retry_queue_nums", type=click.IntRange(0, 65535), default=1, show_default=True)
@click.option("-r", "--retryMaxTimes", "retry_max_times", type=click.IntRange(-1, 65535), default=16, show_default=True)
@click.option("-i", "--brokerId", "broker_id", type=click.IntRange(0), default=0, show_default=True)
@click.option("-w", "--whichBrokerWhenConsumeSlowly", "which_broker", type=click.IntRange(0), default=1,
              show_default=True)  # fmt: skip
@click.option("-a", "--notifyConsumerIdsChanged", "notify", type=click.BOOL, default=True, show_default=True)
def update_sub_group(
    opts: Common,
    broker_addr: str | None,
    cluster: str | None,
    group: str,
    consume_enable: bool,
    consume_from_min_enable: bool,
    consume_broadcast_enable: bool,
    retry_queue_nums: int,
    retry_max_times: int,
    broker_id: int,
    which_broker: int,
    notify: bool,
) -> None:
    """Create or update a subscription group."""
    _targets_given(cluster, broker_addr)
    cfg = SubscriptionGroupConfig(
        group,
        consume_enable=consume_enable,
        consume_from_min_enable=consume_from_min_enable,
        consume_broadcast_enable=consume_broadcast_enable,
        retry_queue_nums=retry_queue_nums,
        retry_max_times=retry_max_times,
        broker_id=broker_id,
        which_broker_when_consume_slowly=which_broker,
        notify_consumer_ids_changed_enable=notify,
    )
    addrs = run(opts, lambda a: a.update_subscription_group(cfg, cluster=cluster, broker_addr=broker_addr))
    if opts.json:
        out.emit_json({"brokers": addrs, "subscriptionGroupConfig": cfg.to_json()})
        return
    for addr in addrs:
        click.echo(f"create subscription group to {addr} success.")
    click.echo(f"SubscriptionGroupConfig {cfg.to_json()}")


@admin.command("resetOffsetByTime")
@common_options
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-s", "--timestamp", type=TIMESTAMP, required=True,
              help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS (local time).")  # fmt: skip
@click.option("-f", "--force", type=click.BOOL, default=False, show_default=True,
              help="[true|false] reset even while the group has consumers online (they would write their old "
                   "offsets back: Pumice cannot yet tell them to reset).")  # fmt: skip
def reset_offset_by_time(opts: Common, group: str, topic: str, timestamp: int, force: bool) -> None:
    """Move a group's offsets of a topic to the first message stored at a time."""
    table = run(opts, lambda a: a.reset_offset_by_time(group, topic, timestamp, force))
    rows = sorted(table.items())
    if opts.json:
        out.emit_json({
            "group": group, "topic": topic, "force": force, "timestamp": timestamp,
            "offsets": [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o} for mq, o in rows],
        })  # fmt: skip
        return
    click.echo(
        f"rollback consumer offset by specified group[{group}], topic[{topic}], force[{str(force).lower()}], "
        f"timestamp(long)[{timestamp}]"
    )
    out.print_table(["#brokerName", "#queueId", "#offset"], [(mq.broker_name, mq.queue_id, o) for mq, o in rows],
                    right=["#queueId", "#offset"])  # fmt: skip


# -- messages -------------------------------------------------------------------------------------


def _print_messages(opts: Common, msgs: list[MessageExt], **context: Any) -> None:
    if opts.json:
        out.emit_json({**context, "messages": [out.message_json(m) for m in msgs]})
    else:
        out.print_messages(msgs)


@admin.command("queryMsgById")
@common_options
@click.option("-i", "--msgId", "msg_ids", required=True, help="Message id(s), comma separated: offset msgIds, or "
              "UNIQ_KEYs (client msgIds) with -t.")  # fmt: skip
@click.option("-t", "--topic", help="Topic, to look an id up as a UNIQ_KEY.")
def query_msg_by_id(opts: Common, msg_ids: str, topic: str | None) -> None:
    """Messages by id."""
    ids = [i.strip() for i in msg_ids.split(",") if i.strip()]
    if not ids:
        raise click.BadParameter("no message id", param_hint="'-i' / '--msgId'")

    async def body(a: AsyncMQAdmin) -> list[MessageExt]:
        return [await a.query_msg_by_id(i, topic) for i in ids]

    _print_messages(opts, run(opts, body))


@admin.command("queryMsgByKey")
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


@admin.command("queryMsgByOffset")
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


@admin.command("sendMessage")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-p", "--body", required=True, help="Message body (sent as UTF-8).")
@click.option("-k", "--key", "keys", help="Message keys (space separated).")
@click.option("-c", "--tags", help="Message tag.")
@click.option("-b", "--broker", "broker_name", help="Send to this broker (name).")
@click.option("-i", "--qid", "queue_id", type=click.IntRange(0), help="Send to this queue (needs -b).")
def send_message(
    opts: Common,
    topic: str,
    body: str,
    keys: str | None,
    tags: str | None,
    broker_name: str | None,
    queue_id: int | None,
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


@admin.command("consumeMessage")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerName", "broker_name", help="Only this broker.")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), help="Only this queue (needs -b).")
@click.option("-o", "--offset", type=click.IntRange(0), help="Start at this queue offset (needs -i).")
@click.option("-g", "--consumerGroup", "group", default="TOOLS_CONSUMER", show_default=True, help="Group to pull as.")
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
