"""Cluster and broker commands of ``pumice admin`` (mqadmin's ``command.cluster`` and ``command.broker``).

clusterList, clusterRT (send round trips per broker), brokerStatus, dLedgerStatus (each DLedger
group's leader, term and members: Pumice's), deleteExpiredCommitLog,
cleanExpiredCQ, cleanUnusedTopic, getBrokerConfig, updateBrokerConfig, brokerConsumeStats (every
group's offsets on a broker), sendMsgStatus (send round trips to one broker).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

import click
import orjson

from pumice.client.admin import AsyncMQAdmin
from pumice.client.admin_types import BrokerInfo
from pumice.client.exceptions import MQClientError
from pumice.client.message import Message, MessageQueue, SendResult
from pumice.client.producer import AsyncProducer
from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, check_addrs, common_options, run, targets_given


def _int(rt: dict[str, str], key: str) -> int:
    try:
        return int(rt.get(key, "0"))
    except ValueError:
        return 0


def _more_stats(r: BrokerInfo) -> dict[str, Any]:
    """mqadmin clusterList -m: messages in and out yesterday and today (the runtime's midnight totals)."""
    rt = r.runtime
    return {
        "cluster": r.cluster, "brokerName": r.broker_name,
        "inTotalYest": _int(rt, "msgPutTotalTodayMorning") - _int(rt, "msgPutTotalYesterdayMorning"),
        "outTotalYest": _int(rt, "msgGetTotalTodayMorning") - _int(rt, "msgGetTotalYesterdayMorning"),
        "inTotalToday": _int(rt, "msgPutTotalTodayNow") - _int(rt, "msgPutTotalTodayMorning"),
        "outTotalToday": _int(rt, "msgGetTotalTodayNow") - _int(rt, "msgGetTotalTodayMorning"),
    }  # fmt: skip


def _print_cluster_list(opts: Common, rows: list[BrokerInfo], more: bool) -> None:
    if opts.json:
        if more:
            out.emit_json({"brokers": [_more_stats(r) for r in rows if r.broker_id == 0]})
            return
        out.emit_json({
            "brokers": [
                {"cluster": r.cluster, "brokerName": r.broker_name, "brokerId": r.broker_id, "addr": r.addr,
                 "runtime": r.runtime, "error": r.error}
                for r in rows
            ]
        })  # fmt: skip
        return
    if more:
        cols = ["#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday"]
        out.print_table(
            cols,
            [tuple(m.values()) for m in (_more_stats(r) for r in rows if r.broker_id == 0)],
            right=cols[2:],
        )
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

    def load(rt: dict[str, str], key: str, pool: str) -> str:  # mqadmin's "%.2f(queue size,head wait ms)"
        try:
            rate = float(rt[key].split(" ")[0])
        except (KeyError, ValueError, IndexError):
            return ""
        size = rt.get(f"{pool}ThreadPoolQueueSize", "0")
        wait = rt.get(f"{pool}ThreadPoolQueueHeadWaitTimeMills", "0")
        return f"{rate:.2f}({size},{wait}ms)"

    out.print_table(
        ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
         "#PCWait(ms)", "#Hour", "#SPACE"],
        [
            (r.cluster, r.broker_name, r.broker_id, r.addr, r.runtime.get("brokerVersionDesc", "") or r.error,
             load(r.runtime, "putTps", "send"), load(r.runtime, "getTransferedTps", "pull"),
             r.runtime.get("pageCacheLockTimeMills", ""), hours(r.runtime), space(r.runtime))
            for r in rows
        ],
        right=["#BID", "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE"],
    )  # fmt: skip


@click.command("clusterList")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Only this cluster.")
@click.option("-m", "--moreStats", "more", is_flag=True, help="Messages in and out, yesterday and today.")
@click.option("-i", "--interval", type=click.IntRange(1), help="Print again every this many seconds, until Ctrl-C.")
def cluster_list(opts: Common, cluster: str | None, more: bool, interval: int | None) -> None:
    """The brokers of every cluster, with their runtime figures."""
    while True:
        rows = run(opts, lambda a: a.cluster_list(cluster))
        _print_cluster_list(opts, rows, more)
        if interval is None:
            return
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return


def broker_or_cluster(
    cluster_help: str, cluster_long: tuple[str, ...] = ("--clusterName",)
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """-b brokerAddr or -c clusterName (or the command's own long names), exactly one (checked
    when the command runs)."""

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option("-c", *cluster_long, "cluster", help=cluster_help)(f)
        help_b = "Broker address (host:port)."
        return click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help=help_b)(f)

    return deco


@click.command("brokerStatus")
@common_options
@broker_or_cluster("Every broker of this cluster.")
def broker_status(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """A broker's runtime table (GET_BROKER_RUNTIME_INFO)."""
    targets_given(cluster, broker_addr)

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


@click.command("deleteExpiredCommitLog")
@common_options
@broker_or_cluster("Every master of this cluster.", ("--clusterName", "--cluster"))
def delete_expired_commit_log(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """Delete expired CommitLog files now, whatever deleteWhen says (DELETE_EXPIRED_COMMITLOG)."""
    targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> dict[str, str | None]:
        return await a.delete_expired_commit_log(cluster, broker_addr)

    _print_results(opts, run(opts, body))


@click.command("getBrokerConfig")
@common_options
@broker_or_cluster("Every broker of this cluster (masters, then their slaves).")
def get_broker_config(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """A broker's configuration (GET_BROKER_CONFIG)."""
    targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> list[tuple[str, str, dict[str, str]]]:
        if broker_addr:
            return [(broker_addr, f"============{broker_addr}============", await a.get_broker_config(broker_addr))]
        info = await a.known_cluster_info(cluster or "")
        got = []
        for name in sorted(info.cluster_addr_table[cluster or ""]):
            bd = info.broker_addr_table.get(name)
            if bd is None or bd.master_addr is None:
                continue
            master = bd.master_addr
            got.append((master, f"============Master: {master}============", await a.get_broker_config(master)))
            for bid, addr in sorted(bd.broker_addrs.items()):
                if bid != 0:
                    title = f"============My Master: {master}=====Slave: {addr}============"
                    got.append((addr, title, await a.get_broker_config(addr)))
        return got

    configs = run(opts, body)
    if opts.json:
        out.emit_json(configs[0][2] if broker_addr else {addr: props for addr, _, props in configs})
        return
    for _, title, props in configs:
        click.echo(title)
        for k, v in props.items():
            click.echo(f"{k:<50}=  {v}")
        click.echo("")


@click.command("updateBrokerConfig")
@common_options
@broker_or_cluster("Every master of this cluster.")
@click.option("-k", "--key", required=True, help="Config key.")
@click.option("-v", "--value", required=True, help="Config value.")
def update_broker_config(opts: Common, broker_addr: str | None, cluster: str | None, key: str, value: str) -> None:
    """Change a broker's configuration while it runs (UPDATE_BROKER_CONFIG)."""
    targets_given(cluster, broker_addr)
    props = {key.strip(): value.strip()}
    results = run(opts, lambda a: a.update_broker_config(props, cluster=cluster, broker_addr=broker_addr))
    if opts.json:
        out.emit_json({addr: {"ok": err is None, "error": err} for addr, err in results.items()})
    else:
        for addr, err in results.items():
            click.echo(f"update broker config success, {addr}" if err is None
                       else f"update broker config failed, {addr}: {err}")  # fmt: skip
    if any(err is not None for err in results.values()):
        raise click.exceptions.Exit(1)


def _print_results(opts: Common, results: dict[str, str | None]) -> None:
    """Each broker's answer (None: success); exit 1 when one failed."""
    if opts.json:
        out.emit_json({addr: {"ok": err is None, "error": err} for addr, err in results.items()})
    else:
        out.print_table(["#Broker", "#Result"], [(addr, err or "success") for addr, err in results.items()])
    if any(err is not None for err in results.values()):
        raise click.exceptions.Exit(1)


@click.command("cleanExpiredCQ")
@common_options
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Broker address (host:port).")
@click.option("-c", "--cluster", "cluster", help="Every master of this cluster (neither -b nor -c: every cluster's).")
def clean_expired_cq(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """Destroy the ConsumeQueues wholly below the CommitLog's first offset (CLEAN_EXPIRED_CONSUMEQUEUE)."""
    _print_results(opts, run(opts, lambda a: a.clean_expired_consume_queue(cluster, broker_addr)))


@click.command("cleanUnusedTopic")
@common_options
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Broker address (host:port).")
@click.option("-c", "--cluster", "cluster", help="Every master of this cluster (neither -b nor -c: every cluster's).")
def clean_unused_topic(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """Destroy the ConsumeQueues of topics the broker has no config for (CLEAN_UNUSED_TOPIC)."""
    _print_results(opts, run(opts, lambda a: a.clean_unused_topic(cluster, broker_addr)))


@click.command("brokerConsumeStats")
@common_options
@click.option("-b", "--brokerAddr", "broker_addr", required=True, callback=check_addrs, help="Broker address.")
@click.option("-t", "--timeoutMillis", "timeout_ms", type=click.IntRange(1), default=50000, show_default=True,
              help="Request timeout (ms).")  # fmt: skip
@click.option("-l", "--level", type=int, default=0, show_default=True, help="Only queues with at least this diff.")
@click.option("-o", "--order", type=click.BOOL, default=False, show_default=True, help="[true|false] order topics.")
def broker_consume_stats(opts: Common, broker_addr: str, timeout_ms: int, level: int, order: bool) -> None:
    """Every group's consume offsets and diff on one broker (GET_BROKER_CONSUME_STATS)."""
    stats = run(opts, lambda a: a.broker_consume_stats(broker_addr, order, timeout_ms / 1000))
    rows = []
    for by_group in stats.get("consumeStatsList") or []:
        for group, per_topic in by_group.items():
            for cs in per_topic or []:
                table = {MessageQueue.from_json(orjson.loads(k) if isinstance(k, str) else k): w
                         for k, w in (cs.get("offsetTable") or {}).items()}  # fmt: skip
                for mq in sorted(table):
                    w = table[mq]
                    broker_offset, consumer_offset = int(w.get("brokerOffset", 0)), int(w.get("consumerOffset", 0))
                    last = int(w.get("lastTimestamp", 0))
                    diff = broker_offset - consumer_offset
                    if diff < level or last <= 0:  # as mqadmin: queues never consumed are not printed
                        continue
                    rows.append({"topic": mq.topic, "group": group, "brokerName": mq.broker_name,
                                 "queueId": mq.queue_id, "brokerOffset": broker_offset,
                                 "consumerOffset": consumer_offset, "diff": diff, "lastTimestamp": last})  # fmt: skip
    total = int(stats.get("totalDiff", 0))
    if opts.json:
        out.emit_json({"brokerAddr": broker_addr, "queues": rows, "diffTotal": total})
        return
    out.print_table(
        ["#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"],
        [(r["topic"], r["group"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"],
          out.human_ms(r["lastTimestamp"], False)) for r in rows],
        right=["#QID", "#Broker Offset", "#Consumer Offset", "#Diff"],
    )  # fmt: skip
    click.echo("")
    click.echo(f"Diff Total: {total}")


def send_result_text(r: SendResult) -> str:
    """Java's SendResult.toString."""
    mq = r.message_queue
    return (f"SendResult [sendStatus={r.send_status.value}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, "
            f"messageQueue=MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}], "
            f"queueOffset={r.queue_offset}]")  # fmt: skip


def _ms_since(begin: float) -> float:
    return (time.monotonic() - begin) * 1000


@click.command("sendMsgStatus")
@common_options
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name (its own topic is sent to).")
@click.option("-s", "--messageSize", "size", type=click.IntRange(1), default=128, show_default=True,
              help="Message size (bytes).")  # fmt: skip
@click.option("-c", "--count", type=click.IntRange(1), default=50, show_default=True, help="Messages to send.")
def send_msg_status(opts: Common, broker_name: str, size: int, count: int) -> None:
    """Send messages to a broker's own topic and print each send's round trip (group PID_SMSC)."""
    name = broker_name.strip()

    def body_of(n: int) -> bytes:
        return (b"hello jodie" * ((n + 10) // 11)) or b"hello jodie"

    async def body(a: AsyncMQAdmin) -> list[tuple[float, SendResult]]:
        got = []
        async with AsyncProducer("PID_SMSC", client_instance=a.instance) as p:
            await p.send(Message(name, body_of(16)))  # a first send, as mqadmin: the route and connection
            for _ in range(count):
                begin = time.monotonic()
                r = await p.send(Message(name, body_of(size)))
                got.append((_ms_since(begin), r))
        return got

    results = run(opts, body)
    if opts.json:
        out.emit_json({
            "brokerName": name, "messageSize": size,
            "sends": [{"rtMs": round(rt, 3), "sendStatus": r.send_status.value, "msgId": r.msg_id,
                       "offsetMsgId": r.offset_msg_id, **r.message_queue.to_json(), "queueOffset": r.queue_offset}
                      for rt, r in results],
        })  # fmt: skip
        return
    for rt, r in results:
        click.echo(f"rt={round(rt)}ms, SendResult={send_result_text(r)}")


@click.command("clusterRT")
@common_options
@click.option("-a", "--amount", type=click.IntRange(1), default=100, show_default=True, help="Messages per broker.")
@click.option("-s", "--size", type=click.IntRange(0), default=128, show_default=True, help="Message size (bytes).")
@click.option("-c", "--cluster", help="Only this cluster (default: every cluster).")
@click.option("-p", "--printLog", "--print log", "print_log", type=click.BOOL, default=False, show_default=True,
              help="[true|false] tlog lines (time|machineRoom|cluster|broker|rt) instead of the table.")  # fmt: skip
@click.option(
    "-m", "--machineRoom", "--machine room", "machine_room", default="noname", show_default=True, help="For -p's lines."
)
@click.option("-i", "--interval", type=click.IntRange(1),
              help="Send again every this many seconds, until Ctrl-C (default: one round).")  # fmt: skip
def cluster_rt(opts: Common, amount: int, size: int, cluster: str | None, print_log: bool, machine_room: str,
               interval: int | None) -> None:  # fmt: skip
    """Send to each broker's own topic and print the average round trip per broker."""
    payload = b"a" * size

    async def body(a: AsyncMQAdmin) -> list[dict[str, Any]]:
        info = await a.cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            raise MQClientError(f"cluster [{cluster}] not exist")
        names = [cluster] if cluster is not None else sorted(info.cluster_addr_table)
        rows = []
        async with AsyncProducer(f"PUMICE_ADMIN_{time.time_ns()}", client_instance=a.instance) as p:
            for c in names:
                for broker in sorted(info.cluster_addr_table[c]):
                    elapsed, ok, failed = 0.0, 0, 0
                    for i in range(amount):
                        begin = time.monotonic()
                        try:
                            await p.send(Message(broker, payload))
                            ok += 1
                        except MQClientError:
                            failed += 1
                        if i:
                            elapsed += _ms_since(begin)
                    rows.append({"cluster": c, "brokerName": broker, "rt": elapsed / max(amount - 1, 1),
                                 "successCount": ok, "failCount": failed})  # fmt: skip
        return rows

    first = True
    while True:
        rows = run(opts, body)
        if opts.json:
            out.emit_json({"brokers": rows})
        elif print_log:
            now = datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=8)))  # mqadmin's GMT+8
            for r in rows:
                click.echo(f"{now:%Y-%m-%d %H:%M:%S}|{machine_room}|{r['cluster']}|{r['brokerName']}|{r['rt']:.0f}")
        else:
            cols = ["#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"]
            t = out.table(cols, [(r["cluster"], r["brokerName"], f"{r['rt']:.2f}", r["successCount"], r["failCount"])
                                 for r in rows], right=cols[2:])  # fmt: skip
            t.show_header = first
            out.console().print(t)
        first = False
        if interval is None:
            return
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return


def _dledger_groups(rows: list[BrokerInfo], group: str | None) -> list[dict[str, Any]]:
    """Each DLedger group among ``rows`` (brokers whose runtime info has Pumice's dLedger* keys,
    ``pumice.store.dledger_commit_log.dledger_runtime_info``): its leader, term and members, a
    peer the name server does not list (down) included from the others' dLedgerPeers."""
    by_name: dict[str, list[BrokerInfo]] = {}
    for r in rows:
        if group is None or r.broker_name == group:
            by_name.setdefault(r.broker_name, []).append(r)
    groups = []
    for name, brokers in sorted(by_name.items()):
        nodes: dict[str, dict[str, Any]] = {}
        peers: dict[str, str] = {}
        lag: dict[str, Any] = {}
        unknown = []
        for r in brokers:
            rt = r.runtime
            if "dLedgerRole" not in rt:
                unknown.append(
                    {
                        "addr": r.addr,
                        "brokerId": r.broker_id,
                        "error": r.error or "no DLedger status (not in DLedger mode, or not a Pumice broker)",
                    }
                )
                continue
            try:
                peers.update(orjson.loads(rt.get("dLedgerPeers") or "{}"))
                if rt.get("dLedgerMembers"):
                    lag = orjson.loads(rt["dLedgerMembers"])
            except orjson.JSONDecodeError:
                pass
            nodes[rt.get("dLedgerSelfId", "")] = {
                "selfId": rt.get("dLedgerSelfId", ""), "addr": r.addr, "brokerId": r.broker_id,
                "role": rt.get("dLedgerRole", ""), "term": _int(rt, "dLedgerTerm"),
                "leaderId": rt.get("dLedgerLeaderId") or None, "endIndex": _int(rt, "dLedgerLedgerEndIndex"),
                "committedIndex": _int(rt, "dLedgerCommittedIndex"),
            }  # fmt: skip
        if not nodes and group is None:
            continue  # not a DLedger group
        for peer, addr in peers.items():
            nodes.setdefault(peer, {"selfId": peer, "dLedgerAddr": addr, "role": "UNREACHABLE"})
        for peer, node in nodes.items():
            node["behind"] = lag.get(peer, {}).get("behind")
            node["live"] = lag.get(peer, {}).get("live")
        leaders = [n for n in nodes.values() if n.get("role") == "LEADER"]
        leader = max(leaders, key=lambda n: n["term"]) if leaders else None
        groups.append({
            "group": name, "leaderId": leader["selfId"] if leader else None,
            "term": leader["term"] if leader else max((n.get("term", -1) for n in nodes.values()), default=-1),
            "members": sorted(nodes.values(), key=lambda n: n["selfId"]), "others": unknown,
        })  # fmt: skip
    return groups


@click.command("dLedgerStatus")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Only this cluster.")
@click.option("-g", "--group", "group", help="Only this DLedger group (its brokerName).")
def dledger_status(opts: Common, cluster: str | None, group: str | None) -> None:
    """Each DLedger group's leader and term, and each member's role, last index and how far
    behind the leader it is (Pumice brokers' runtime info; a member down is UNREACHABLE)."""
    groups = _dledger_groups(run(opts, lambda a: a.cluster_list(cluster)), group)
    if opts.json:
        out.emit_json({"groups": groups})
        return
    if not groups:
        raise click.ClickException(f"no DLedger group{f' {group!r}' if group else ''} among the brokers listed")
    rows = []
    for g in groups:
        for n in g["members"]:
            behind = "" if n.get("behind") is None else n["behind"]
            addr = n.get("addr", n.get("dLedgerAddr", ""))
            figures = (n.get("term", ""), n.get("endIndex", ""), n.get("committedIndex", ""), behind)
            rows.append((g["group"], n["selfId"], addr, n.get("brokerId", ""), n["role"], *figures))
        for o in g["others"]:
            rows.append((g["group"], "", o["addr"], o["brokerId"], o["error"], "", "", "", ""))
    out.print_table(
        ["#Group", "#Node", "#Addr", "#BID", "#Role", "#Term", "#EndIndex", "#Committed", "#Behind"], rows,
        right=["#BID", "#Term", "#EndIndex", "#Committed", "#Behind"],
    )  # fmt: skip


COMMANDS: tuple[click.Command, ...] = (
    cluster_list,
    cluster_rt,
    broker_status,
    delete_expired_commit_log,
    clean_expired_cq,
    clean_unused_topic,
    broker_consume_stats,
    send_msg_status,
    get_broker_config,
    update_broker_config,
    dledger_status,
)
