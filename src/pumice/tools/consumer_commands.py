"""Consumer group commands of ``pumice admin`` (mqadmin's ``command.consumer`` and ``command.offset``).

consumerProgress (offsets and lag), updateSubGroup and deleteSubGroup (a group's settings), getConsumerConfig
(a group's settings on each broker), resetOffsetByTime, skipAccumulatedMessage (offsets moved to the end),
cloneGroupOffset, consumerStatus and consumer (the clients' running info), startMonitoring (MonitorService's
rounds: each group's undone messages and its clients' agreement).

startMonitoring prints what mqadmin's DefaultMonitorListener logs (``reportUndoneMsgs: UndoneMsgs [...]``
between ``beginRound`` and ``endRound`` lines) on stdout, a round every ``-i`` seconds (20, as
MonitorService) until Ctrl-C, or ``--rounds N`` rounds; mqadmin waits 20 s before its first round
and writes to its log file.
"""

from __future__ import annotations

from typing import Any

import click
import orjson

from pumice.client.admin import AsyncMQAdmin
from pumice.client.admin_types import ConsumerProgress, RollbackStats
from pumice.client.exceptions import MQBrokerError, MQClientError
from pumice.client.message import MessageQueue
from pumice.common.mix_all import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from pumice.common.subscription_group import SubscriptionGroupConfig
from pumice.remoting.mq_version import version_desc
from pumice.remoting.response_code import ResponseCode
from pumice.tools import admin_output as out
from pumice.tools.sub_command import TIMESTAMP, Common, check_addrs, common_options, fail, run, targets_given


@click.command("consumerProgress")
@common_options
@click.option("-g", "--groupName", "group", help="Consumer group (default: every group with a retry topic or offsets).")
@click.option("-t", "--topicName", "topic", help="Only this topic (with -g).")
@click.option("-s", "--showClientIP", "show_client_ip", type=click.BOOL, default=False, show_default=True,
              help="[true|false] show which client IP holds each queue (the clients' running info).")  # fmt: skip
def consumer_progress(opts: Common, group: str | None, topic: str | None, show_client_ip: bool) -> None:
    """A group's offsets and lag per queue; without -g, a summary of every group."""
    if group is None:
        if topic is not None:
            raise click.UsageError("-t needs -g")
        _all_groups(opts)
        return

    async def body(a: AsyncMQAdmin) -> tuple[ConsumerProgress, dict[MessageQueue, str]]:
        progress = await a.consumer_progress(group, topic)
        owners = await a.queue_owners(group) if show_client_ip and progress.queues else {}
        return progress, owners

    progress, owners = run(opts, body)
    if not progress.queues:  # as mqadmin (MQAdminImpl's CONSUMER_NOT_ONLINE)
        fail(f"group {group!r}: Not found the consumer group consume stats, because return offset table is empty, "
             "maybe the consumer not consume any message")  # fmt: skip
    if opts.json:
        out.emit_json({
            "group": group,
            "queues": [
                {"topic": q.mq.topic, "brokerName": q.mq.broker_name, "queueId": q.mq.queue_id,
                 "brokerOffset": q.broker_offset, "consumerOffset": q.consumer_offset, "diff": q.lag,
                 "lastTimestamp": q.last_timestamp,
                 **({"clientIp": owners.get(q.mq)} if show_client_ip else {})}
                for q in progress.queues
            ],
            "consumeTps": progress.consume_tps,
            "diffTotal": progress.total_lag,
        })  # fmt: skip
        return
    ip = ["#Client IP"] if show_client_ip else []
    out.print_table(
        ["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", *ip, "#Diff", "#LastTime"],
        [
            (q.mq.topic, q.mq.broker_name, q.mq.queue_id, q.broker_offset, q.consumer_offset,
             *([owners.get(q.mq, "N/A")] if show_client_ip else []), q.lag, out.human_ms(q.last_timestamp, False))
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
            online = conn if conn is not None and conn.connections else None
            rows.append({
                "group": g,
                "count": len(conn.connections) if conn is not None else 0,
                "version": version_desc(max(c.version for c in online.connections)) if online else "OFFLINE",
                "consumeType": online.consume_type if online else None,
                "messageModel": online.message_model if online else None,
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


@click.command("updateSubGroup")
@common_options
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Create on this broker (host:port).")
@click.option("-c", "--clusterName", "cluster", help="Create on every master of this cluster.")
@click.option("-g", "--groupName", "group", required=True, help="Consumer group.")
@click.option("-s", "--consumeEnable", "consume_enable", type=click.BOOL, default=True, show_default=True)
# mqadmin 4.9.8 creates a group with both false (SubscriptionGroupConfig's own defaults are true)
@click.option(
    "-m", "--consumeFromMinEnable", "consume_from_min_enable", type=click.BOOL, default=False, show_default=True
)
@click.option("-d", "--consumeBroadcastEnable", "consume_broadcast_enable", type=click.BOOL, default=False,
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
    targets_given(cluster, broker_addr)
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
    shown = cfg.to_json()
    shown.pop("consumeMessageOrderly")  # a 5.x field: 4.9.8's toString has none (this tool is 4.9's mqadmin)
    click.echo(out.subscription_group_text(shown))


async def _reset(
    a: AsyncMQAdmin, group: str, topic: str, timestamp: int, force: bool, cplus: bool = False
) -> dict[MessageQueue, int] | list[RollbackStats]:
    """mqadmin's reset: through the broker and the online members; with none online
    (CONSUMER_NOT_ONLINE), mqadmin's own offsets (RollbackStats). Also when the broker finds no
    offset of the group on a queue (SYSTEM_ERROR "THe consumer group <g> not exist"), where
    mqadmin 4.9.8 fails: a group that never committed can be reset too."""
    try:
        return await a.reset_offset_by_time(group, topic, timestamp, force, cplus)
    except MQBrokerError as e:
        no_offsets = e.code == ResponseCode.SYSTEM_ERROR and f"<{group}> not exist" in (e.remark or "")
        if e.code != ResponseCode.CONSUMER_NOT_ONLINE and not no_offsets:
            raise
    return await a.reset_offset_by_time_old(group, topic, timestamp, force)


def _front(name: str) -> str:
    """``UtilAll.frontStringAtLeast(name, 32)``: at most its first 32 characters."""
    return name[:32]


def _print_reset(result: dict[MessageQueue, int] | list[RollbackStats]) -> None:
    """The table mqadmin prints, in its printf columns."""
    if isinstance(result, dict):
        click.echo(f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}")
        for mq, offset in sorted(result.items()):
            click.echo(f"{_front(mq.broker_name):<40}  {mq.queue_id:<40}  {offset:<40}")
        return
    cols = ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#rollbackOffset")
    click.echo("  ".join(f"{c:<20}" for c in cols))
    for r in result:
        values = (_front(r.broker_name), r.queue_id, r.broker_offset, r.consumer_offset, r.timestamp_offset,
                  r.rollback_offset)  # fmt: skip
        click.echo("  ".join(f"{v:<20}" for v in values))


def _reset_json(result: dict[MessageQueue, int] | list[RollbackStats]) -> dict[str, Any]:
    if isinstance(result, dict):
        rows = sorted(result.items())
        return {
            "consumerOnline": True,
            "offsets": [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o} for mq, o in rows],
        }
    return {"consumerOnline": False, "offsets": [{
        "brokerName": r.broker_name, "queueId": r.queue_id, "brokerOffset": r.broker_offset,
        "consumerOffset": r.consumer_offset, "timestampOffset": r.timestamp_offset, "rollbackOffset": r.rollback_offset,
        "offset": r.rollback_offset} for r in result]}  # fmt: skip


@click.command("resetOffsetByTime")
@common_options
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-s", "--timestamp", "timestamp_text", required=True,
              help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS (local time).")  # fmt: skip
@click.option(
    "-f",
    "--force",
    type=click.BOOL,
    default=True,
    show_default=True,
    help="[true|false] also move offsets forward (false: only back, where the time is behind the group).",
)
@click.option("-c", "--cplus", is_flag=True, help="Ask as a C++ client (its members get the offsets as a list).")
def reset_offset_by_time(opts: Common, group: str, topic: str, timestamp_text: str, force: bool, cplus: bool) -> None:
    """Move a group's offsets of a topic to the first message stored at a time (its online
    consumers are told and consume from there; with none online, the offsets are written)."""
    group, topic, text = group.strip(), topic.strip(), timestamp_text.strip()
    ctx = click.get_current_context()
    timestamp = TIMESTAMP.convert(text, next(p for p in ctx.command.params if p.name == "timestamp_text"), ctx)
    result = run(opts, lambda a: _reset(a, group, topic, timestamp, force, cplus))
    if opts.json:
        out.emit_json({"group": group, "topic": topic, "force": force, "timestamp": timestamp, **_reset_json(result)})
        return
    who = "group" if isinstance(result, dict) else "consumerGroup"
    click.echo(
        f"rollback consumer offset by specified {who}[{group}], topic[{topic}], force[{str(force).lower()}], "
        f"timestamp(string)[{text}], timestamp(long)[{timestamp}]"
    )
    _print_reset(result)


@click.command("deleteSubGroup")
@common_options
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Delete from this broker (host:port).")
@click.option("-c", "--clusterName", "cluster", help="Delete from every master of this cluster, and its retry and "
              "dead-letter topics.")  # fmt: skip
@click.option("-g", "--groupName", "group", required=True, help="Subscription group name.")
@click.option("-r", "--removeOffset", "remove_offset", type=click.BOOL, default=False, show_default=True,
              help="[true|false] also remove the group's offsets.")  # fmt: skip
def delete_sub_group(opts: Common, broker_addr: str | None, cluster: str | None, group: str,
                     remove_offset: bool) -> None:  # fmt: skip
    """Delete a subscription group (with -c, also its %RETRY% and %DLQ% topics)."""
    targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> dict[str, Any]:
        addrs = await a.targets(cluster, broker_addr)
        for addr in addrs:
            await a.delete_subscription_group(addr, group, remove_offset)
        topics: dict[str, str | None] = {}
        if cluster:  # as mqadmin: the group's retry and dead-letter topics go too
            for t in (RETRY_GROUP_TOPIC_PREFIX + group, DLQ_GROUP_TOPIC_PREFIX + group):
                try:
                    await a.delete_topic(t, cluster)
                    topics[t] = None
                except MQClientError as e:
                    topics[t] = str(e)
        return {"brokers": addrs, "topics": topics}

    done = run(opts, body)
    if opts.json:
        topics = {t: {"ok": e is None, "error": e} for t, e in done["topics"].items()}
        out.emit_json({"group": group, "cluster": cluster, "removeOffset": remove_offset, "brokers": done["brokers"],
                       "topicsDeleted": topics})  # fmt: skip
        return
    for addr in done["brokers"]:
        where = f" in cluster [{cluster}]" if cluster else ""
        click.echo(f"delete subscription group [{group}] from broker [{addr}]{where} success.")
    for t, err in done["topics"].items():
        if err is None:
            click.echo(f"delete topic [{t}] from cluster [{cluster}] success.")
            click.echo(f"delete topic [{t}] from NameServer success.")
        else:
            click.echo(f"delete topic [{t}] from cluster [{cluster}] failed: {err}")


@click.command("consumerStatus")
@common_options
@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group.")
@click.option("-i", "--clientId", "client_id", help="Print this client's running info in full.")
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Ask this broker (host:port).")
@click.option("-s", "--jstack", is_flag=True, help="Ask for the client's thread dump (Java clients only).")
def consumer_status(opts: Common, group: str, client_id: str | None, broker_addr: str | None, jstack: bool) -> None:
    """The running info of a group's online clients (GET_CONSUMER_RUNNING_INFO)."""
    if client_id:

        async def one(a: AsyncMQAdmin) -> list[dict[str, Any]]:
            info = await a.consumer_running_info(group, client_id, jstack, broker_addr)
            return [{"clientId": client_id, "version": None, "runningInfo": info}]

        infos = run(opts, one)
        if opts.json:
            out.emit_json({"group": group, "clients": infos})
        else:
            click.echo(running_info_text(infos[0]["runningInfo"]), nl=False)
        return
    _print_status(opts, group, run(opts, lambda a: _running_infos(a, group, jstack, broker_addr)))


async def _running_infos(a: AsyncMQAdmin, group: str, jstack: bool, broker_addr: str | None) -> list[dict[str, Any]]:
    """The running info of each online client of ``group`` (or the error it gave)."""
    conn = await (a.consumer_connection_at(group, broker_addr) if broker_addr else a.consumer_connection(group))
    got = []
    for c in sorted(conn.connections, key=lambda c: c.client_id):
        try:
            info = await a.consumer_running_info(group, c.client_id, jstack, broker_addr)
            got.append({"clientId": c.client_id, "version": version_desc(c.version), "runningInfo": info})
        except MQClientError as e:
            got.append({"clientId": c.client_id, "version": version_desc(c.version), "error": str(e)})
    return got


def _print_status(opts: Common, group: str, infos: list[dict[str, Any]]) -> None:
    if opts.json:
        out.emit_json({"group": group, "clients": infos})
        return
    out.print_table(
        ["#Index", "#ClientId", "#Version", "#Subscriptions", "#Queues"],
        [(i, r["clientId"], r["version"], len(r.get("runningInfo", {}).get("subscriptionSet") or []),
          len(r.get("runningInfo", {}).get("mqTable") or {}) if "runningInfo" in r else r.get("error"))
         for i, r in enumerate(infos, 1)],
    )  # fmt: skip
    ok = [r["runningInfo"] for r in infos if "runningInfo" in r]
    if not ok:
        return
    subs = [sorted((s.get("topic"), s.get("subString")) for s in info.get("subscriptionSet") or []) for info in ok]
    if all(x == subs[0] for x in subs):
        click.echo("")
        click.echo("Same subscription in the same group of consumer")
        owners = [mq for info in ok for mq in info.get("mqTable") or {}]
        click.echo("")
        click.echo(f"Rebalance {'OK' if len(owners) == len(set(owners)) else 'Failed'}")
    else:
        click.echo("")
        click.echo("WARN: Different subscription in the same group of consumer!!!")


@click.command("consumer")
@common_options
@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group.")
@click.option("-s", "--jstack", is_flag=True, help="Ask for the clients' thread dumps (Java clients only).")
def consumer(opts: Common, group: str, jstack: bool) -> None:
    """The running info of a group's online clients, and whether they agree (GET_CONSUMER_RUNNING_INFO)."""
    g = group.strip()
    _print_status(opts, g, run(opts, lambda a: _running_infos(a, g, jstack, None)))


@click.command("startMonitoring")
@common_options
@click.option("-i", "--interval", type=click.FloatRange(0), default=20.0, show_default=True,
              help="Seconds between rounds (MonitorService's roundInterval).")  # fmt: skip
@click.option("--rounds", type=click.IntRange(0), default=0, show_default=True,
              help="Stop after this many rounds (0: until Ctrl-C, as mqadmin).")  # fmt: skip
def start_monitoring(opts: Common, interval: float, rounds: int) -> None:
    """Each consumer group's undone messages and its online clients' agreement, every -i seconds."""
    import time

    done = 0
    while True:
        report = run(opts, _monitor_round)
        if opts.json:
            out.emit_json(report)
        else:
            click.echo("=========================================beginRound")
            for u in report["undoneMsgs"]:
                click.echo(
                    f"reportUndoneMsgs: UndoneMsgs [consumerGroup={u['consumerGroup']}, topic={u['topic']}, "
                    f"undoneMsgsTotal={u['undoneMsgsTotal']}, undoneMsgsSingleMQ={u['undoneMsgsSingleMQ']}, "
                    f"undoneMsgsDelayTimeMills={u['undoneMsgsDelayTimeMills']}]"
                )
            for w in report["runningInfoWarnings"]:
                click.echo(f"reportConsumerRunningInfo: ConsumerGroup: {w['consumerGroup']}, {w['warning']}")
            click.echo("=========================================endRound")
        done += 1
        if rounds and done >= rounds:
            return
        time.sleep(interval)


async def _monitor_round(a: AsyncMQAdmin) -> dict[str, Any]:
    """One MonitorService round over the groups of the %RETRY% topics."""
    groups = sorted(
        t[len(RETRY_GROUP_TOPIC_PREFIX) :] for t in await a.topic_list() if t.startswith(RETRY_GROUP_TOPIC_PREFIX)
    )
    undone: list[dict[str, Any]] = []
    warnings: list[dict[str, str]] = []
    for g in groups:
        try:
            progress = await a.consumer_progress(g)
        except MQClientError:
            continue  # no consume stats (mqadmin skips the group too)
        by_topic: dict[str, list[Any]] = {}
        for q in progress.queues:
            if not q.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                by_topic.setdefault(q.mq.topic, []).append(q)
        for topic, queues in sorted(by_topic.items()):
            total = single = delay = 0
            for q in queues:
                diff = q.broker_offset - q.consumer_offset
                single = max(single, diff)
                total += max(diff, 0)
                if q.last_timestamp > 0 and q.broker_offset > 0:
                    # the newest message's store time against the last consumed one's
                    try:
                        newest = await a.query_msg_by_offset(topic, q.mq.broker_name, q.mq.queue_id,
                                                             q.broker_offset - 1)  # fmt: skip
                        delay = max(delay, newest.store_timestamp - q.last_timestamp)
                    except MQClientError:
                        pass
            undone.append({"consumerGroup": g, "topic": topic, "undoneMsgsTotal": total,
                           "undoneMsgsSingleMQ": single, "undoneMsgsDelayTimeMills": delay})  # fmt: skip
        try:
            infos = [r["runningInfo"] for r in await _running_infos(a, g, False, None) if "runningInfo" in r]
        except MQClientError:
            continue  # offline
        subs = [sorted((s.get("topic"), s.get("subString")) for s in i.get("subscriptionSet") or []) for i in infos]
        if any(x != subs[0] for x in subs):
            warnings.append({"consumerGroup": g, "warning": "Subscription different"})
        owners = [mq for i in infos for mq in i.get("mqTable") or {}]
        if len(owners) != len(set(owners)):
            warnings.append({"consumerGroup": g, "warning": "Rebalance not OK"})
    return {"undoneMsgs": undone, "runningInfoWarnings": warnings}


# SubscriptionGroupConfig's fields in the order mqadmin getConsumerConfig prints them (Java's declaration order)
_GROUP_FIELDS = ("groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable", "retryQueueNums",
                 "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly",
                 "notifyConsumerIdsChangedEnable")  # fmt: skip


@click.command("getConsumerConfig")
@common_options
@click.option("-g", "--groupName", "group", required=True, help="Subscription group name.")
def get_consumer_config(opts: Common, group: str) -> None:
    """A subscription group's settings on each broker that has it (none printed when no broker has it)."""
    g = group.strip()

    async def body(a: AsyncMQAdmin) -> list[dict[str, Any]]:
        info = await a.cluster_info()
        got = []
        for name, bd in sorted(info.broker_addr_table.items()):
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            config = (await a.subscription_groups(addr)).get(g)
            if config is None:
                continue
            cluster = next((c for c, names in info.cluster_addr_table.items() if name in names), None)
            got.append({"cluster": cluster, "brokerName": name, "brokerAddr": addr, "config": config})
        return got

    found = run(opts, body)
    if opts.json:
        out.emit_json({"group": g, "brokers": found})
        return
    for f in found:
        click.echo(f"============================={f['cluster']}:{f['brokerName']}=============================")
        config = f["config"]
        keys = [k for k in _GROUP_FIELDS if k in config] + [k for k in config if k not in _GROUP_FIELDS]
        for k in keys:
            click.echo(f"{k:<40}=  {out.java_text(config[k])}")


@click.command("skipAccumulatedMessage")
@common_options
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-f", "--force", type=click.BOOL, default=True, show_default=True,
              help="[true|false] as resetOffsetByTime's -f.")  # fmt: skip
def skip_accumulated_message(opts: Common, group: str, topic: str, force: bool) -> None:
    """Move a group's offsets of a topic to the end of each queue (its backlog skipped), as
    resetOffsetByTime -s now."""
    g, t = group.strip(), topic.strip()
    result = run(opts, lambda a: _reset(a, g, t, -1, force))
    if opts.json:
        out.emit_json({"group": g, "topic": t, "force": force, **_reset_json(result)})
        return
    _print_reset(result)


def _mq_label(key: str) -> tuple[str, str, int]:
    try:
        mq = MessageQueue.from_json(orjson.loads(key))
        return mq.topic, mq.broker_name, mq.queue_id
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return key, "", -1


def running_info_text(info: dict[str, Any]) -> str:
    """ConsumerRunningInfo as mqadmin prints it (its formatString sections)."""
    lines = ["#Consumer Properties#"]
    lines += [f"{k:<40}: {v}" for k, v in (info.get("properties") or {}).items()]
    lines += ["", "", "#Consumer Subscription#"]
    for i, sub in enumerate(info.get("subscriptionSet") or [], 1):
        class_filter = str(bool(sub.get("classFilterMode", False))).lower()
        lines.append(f"{i:03d} Topic: {sub.get('topic', ''):<40} ClassFilter: {class_filter:<8} "
                     f"SubExpression: {sub.get('subString')}")  # fmt: skip
    mq_table = sorted(((_mq_label(k), v) for k, v in (info.get("mqTable") or {}).items()), key=lambda x: x[0])
    head = f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  "
    lines += ["", "", "#Consumer Offset#", f"{head}{'#Consumer Offset':<20}"]
    lines += [f"{t:<32}  {b:<32}  {q:<4}  {v.get('commitOffset', -1):<20}" for (t, b, q), v in mq_table]
    lines += ["", "", "#Consumer MQ Detail#", f"{head}{'#ProcessQueueInfo':<20}"]
    for (t, b, q), v in mq_table:
        detail = ", ".join(f"{k}={str(x).lower() if isinstance(x, bool) else x}" for k, x in v.items())
        lines.append(f"{t:<64}  {b:<32}  {q:<4}  ProcessQueueInfo [{detail}]")
    lines += ["", "", "#Consumer RT&TPS#", f"{'#Topic':<64}  {'#Pull RT':>14} {'#Pull TPS':>14} {'#Consume RT':>14} "
              f"{'#ConsumeOK TPS':>14} {'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}"]  # fmt: skip
    for topic, st in (info.get("statusTable") or {}).items():
        rates = [float(st.get(k, 0)) for k in ("pullRT", "pullTPS", "consumeRT", "consumeOKTPS")]
        failed_tps, failed = float(st.get("consumeFailedTPS", 0)), int(st.get("consumeFailedMsgs", 0))
        lines.append(f"{topic:<32}  " + " ".join(f"{r:14.2f}" for r in rates) + f" {failed_tps:18.2f} {failed:25d}")
    if info.get("jstack"):
        lines += ["", "", "#Consumer jstack#", str(info["jstack"])]
    return "\n".join(lines) + "\n"


@click.command("cloneGroupOffset")
@common_options
@click.option("-s", "--srcGroup", "src_group", required=True, help="Source consumer group.")
@click.option("-d", "--destGroup", "dest_group", required=True, help="Destination consumer group.")
@click.option("-t", "--topic", required=True, help="Topic whose offsets are cloned.")
@click.option("-o", "--offline", help="Accepted for mqadmin's sake (it ignores it too).")
def clone_group_offset(opts: Common, src_group: str, dest_group: str, topic: str, offline: str | None) -> None:
    """Give a group the consumer offsets another group has on a topic."""
    table = run(opts, lambda a: a.clone_group_offset(src_group, dest_group, topic))
    rows = sorted(table.items())
    if opts.json:
        out.emit_json({
            "srcGroup": src_group, "destGroup": dest_group, "topic": topic,
            "offsets": [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o} for mq, o in rows],
        })  # fmt: skip
        return
    click.echo(f"clone group offset success. srcGroup[{src_group}], destGroup=[{dest_group}], topic[{topic}]")


COMMANDS: tuple[click.Command, ...] = (
    consumer_progress,
    update_sub_group,
    reset_offset_by_time,
    delete_sub_group,
    consumer_status,
    consumer,
    start_monitoring,
    clone_group_offset,
    get_consumer_config,
    skip_accumulated_message,
)
