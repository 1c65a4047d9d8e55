"""Topic commands of ``pumice admin`` (mqadmin's ``command.topic``).

updateTopic, deleteTopic, topicList, topicRoute, topicStatus, updateTopicPerm, topicClusterList,
updateOrderConf (a topic's ORDER_TOPIC_CONFIG entry in the name servers' KV config), allocateMQ
(how AllocateMessageQueueAveragely would share a topic's queues among client IPs).
"""

from __future__ import annotations

from typing import Any

import click
import orjson

from pumice.client.admin import AsyncMQAdmin
from pumice.client.allocate import allocate_averagely
from pumice.common.mix_all import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from pumice.common.topic_sys_flag import build_sys_flag
from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, check_addrs, common_options, run, targets_given


@click.command("updateTopic")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Create on every master of this cluster.")
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Create on this broker (host:port).")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-r", "--readQueueNums", "read_queue_nums", type=click.IntRange(1, 65535), default=8, show_default=True)
@click.option("-w", "--writeQueueNums", "write_queue_nums", type=click.IntRange(1, 65535), default=8, show_default=True)
@click.option("-p", "--perm", type=click.IntRange(0, 7), default=6, show_default=True, help="2 write, 4 read, 6 both.")
@click.option("-o", "--order", type=click.BOOL, default=False, show_default=True, help="Ordered topic [true|false].")
@click.option("-u", "--unit", type=click.BOOL, default=False, show_default=True,
              help="[true|false] a unit topic (topicSysFlag bit 0x1).")  # fmt: skip
@click.option("-s", "--hasUnitSub", "has_unit_sub", type=click.BOOL, default=False, show_default=True,
              help="[true|false] has unit subscriptions (topicSysFlag bit 0x2).")  # fmt: skip
def update_topic(
    opts: Common,
    cluster: str | None,
    broker_addr: str | None,
    topic: str,
    read_queue_nums: int,
    write_queue_nums: int,
    perm: int,
    order: bool,
    unit: bool,
    has_unit_sub: bool,
) -> None:
    """Create or update a topic."""
    targets_given(cluster, broker_addr)
    sys_flag = build_sys_flag(unit, has_unit_sub)
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
            topic_sys_flag=sys_flag,
        ),
    )
    config = {
        "topicName": topic,
        "readQueueNums": read_queue_nums,
        "writeQueueNums": write_queue_nums,
        "perm": perm,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": sys_flag,
        "order": order,
    }
    if opts.json:
        out.emit_json({"brokers": addrs, "topicConfig": config})
        return
    for addr in addrs:
        click.echo(f"create topic to {addr} success.")
    click.echo(out.topic_config_text(config))


@click.command("deleteTopic")
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


@click.command("topicList")
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
            if t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
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


@click.command("topicRoute")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-l", "--list", "as_list", is_flag=True, help="Print a table per broker instead of the JSON.")
def topic_route(opts: Common, topic: str, as_list: bool) -> None:
    """A topic's route: its brokers and queues (pretty JSON of TopicRouteData, as mqadmin)."""
    route = run(opts, lambda a: a.topic_route(topic))
    if opts.json or not as_list:
        out.emit_json(route.to_json())
        return
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    total_read = total_write = 0
    for b in sorted(route.broker_datas, key=lambda b: b.broker_name):
        q = queues.get(b.broker_name)
        read, write, perm = (q.read_queue_nums, q.write_queue_nums, q.perm) if q else (0, 0, 0)
        total_read += read
        total_write += write
        addrs = "{" + ", ".join(f"{bid}={addr}" for bid, addr in sorted(b.broker_addrs.items())) + "}"
        rows.append((b.cluster, b.broker_name, addrs, read, write, perm))
    out.print_table(["#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"], rows)
    click.echo("")
    click.echo(f"Total: {len(rows)} {total_read} {total_write}")


@click.command("updateTopicPerm")
@common_options
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Update on this master (host:port).")
@click.option("-c", "--clusterName", "cluster", help="Update on every master of this cluster.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-p", "--perm", type=click.Choice(["2", "4", "6"]), required=True, help="2 write, 4 read, 6 both.")
def update_topic_perm(opts: Common, broker_addr: str | None, cluster: str | None, topic: str, perm: str) -> None:
    """Change a topic's permission (queue numbers kept)."""
    targets_given(cluster, broker_addr)
    new = int(perm)
    done = run(opts, lambda a: a.update_topic_perm(topic, new, cluster=cluster, broker_addr=broker_addr))
    if opts.json:
        out.emit_json({
            "topic": topic, "perm": new, "changed": bool(done),
            "brokers": [{"addr": addr, "oldPerm": old} for addr, old in done],
        })  # fmt: skip
        return
    if not done:
        click.echo("new perm equals to the old one!")
        return
    for addr, old in done:
        click.echo(f"update topic perm from {old} to {new} in {addr} success.")


@click.command("topicClusterList")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
def topic_cluster_list(opts: Common, topic: str) -> None:
    """The clusters a topic is on."""
    clusters = run(opts, lambda a: a.topic_cluster_list(topic))
    if opts.json:
        out.emit_json({"topic": topic, "clusters": clusters})
        return
    for c in clusters:
        click.echo(c)


@click.command("topicStatus")
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
            (
                q.mq.broker_name,
                q.mq.queue_id,
                q.min_offset,
                q.max_offset,
                out.human_ms(q.last_update_timestamp) if q.last_update_timestamp > 0 else "",
            )
            for q in queues
        ],
        right=["#QID", "#Min Offset", "#Max Offset"],
    )


ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG


@click.command("updateOrderConf")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-v", "--orderConf", "order_conf", help="The order conf (brokerName1:num;brokerName2:num), for put.")
@click.option("-m", "--method", type=click.Choice(["put", "get", "delete"]), required=True, help="What to do.")
def update_order_conf(opts: Common, topic: str, order_conf: str | None, method: str) -> None:
    """Get, put or delete a topic's order conf (the name servers' ORDER_TOPIC_CONFIG KV entry)."""
    t = topic.strip()
    if method == "get":
        conf = run(opts, lambda a: a.get_kv_config(ORDER_TOPIC_CONFIG, t))
        if opts.json:
            out.emit_json({"topic": t, "orderConf": conf})
        else:
            click.echo(f"get orderConf success. topic=[{t}], orderConf=[{'null' if conf is None else conf}]")
        return
    if method == "put":
        conf = (order_conf or "").strip()
        if not conf:
            raise click.UsageError("please set orderConf with option -v.")
        done = run(opts, lambda a: a.put_kv_config(ORDER_TOPIC_CONFIG, t, conf))
        if opts.json:
            out.emit_json({"topic": t, "orderConf": conf, "nameServers": done})
        else:
            click.echo(f"update orderConf success. topic=[{t}], orderConf=[{conf}]")
        return
    done = run(opts, lambda a: a.delete_kv_config(ORDER_TOPIC_CONFIG, t))
    if opts.json:
        out.emit_json({"topic": t, "deleted": True, "nameServers": done})
    else:
        click.echo(f"delete orderConf success. topic=[{t}]")


@click.command("allocateMQ")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-i", "--ipList", "ip_list", required=True, help="Client IPs, comma separated.")
def allocate_mq(opts: Common, topic: str, ip_list: str) -> None:
    """How AllocateMessageQueueAveragely shares a topic's queues among clients (RebalanceResult JSON)."""
    ips = [ip.strip() for ip in ip_list.strip().split(",") if ip.strip()]
    if not ips:
        raise click.BadParameter("no IP", param_hint="'-i' / '--ipList'")
    route = run(opts, lambda a: a.topic_route(topic.strip()))
    mqs = route.subscribe_queues(topic.strip())
    doc = {"result": {ip: [mq.to_json() for mq in allocate_averagely(ip, mqs, ips)] for ip in ips}}
    if opts.json:
        out.emit_json(doc)
    else:
        click.echo(orjson.dumps(doc).decode())


COMMANDS: tuple[click.Command, ...] = (
    update_topic,
    delete_topic,
    topic_list,
    topic_route,
    topic_status,
    update_topic_perm,
    topic_cluster_list,
    update_order_conf,
    allocate_mq,
)
