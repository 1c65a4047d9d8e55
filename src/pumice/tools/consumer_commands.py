"""Consumer group commands of ``pumice admin`` (mqadmin's ``command.consumer`` and ``command.offset``).

consumerProgress (offsets and lag), updateSubGroup (a group's settings), resetOffsetByTime.
"""

from __future__ import annotations

from typing import Any

import click

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQBrokerError
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.common.subscription_group import SubscriptionGroupConfig
from pumice.remoting.mq_version import version_desc
from pumice.remoting.response_code import ResponseCode
from pumice.tools import admin_output as out
from pumice.tools.sub_command import TIMESTAMP, Common, check_addrs, common_options, fail, run, targets_given


@click.command("consumerProgress")
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
    click.echo(f"SubscriptionGroupConfig {cfg.to_json()}")


@click.command("resetOffsetByTime")
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


COMMANDS: tuple[click.Command, ...] = (consumer_progress, update_sub_group, reset_offset_by_time)
