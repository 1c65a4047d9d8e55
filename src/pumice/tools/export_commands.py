"""Export commands of ``pumice admin`` (mqadmin's ``command.export``).

exportMetadata (the user topics' and subscription groups' configs of a cluster or a broker),
exportConfigs (the brokers' main settings and the cluster's size) and exportMetrics (each broker's
runtime figures and client versions): each writes one JSON file under ``-f`` (default
``/tmp/rocketmq/export``, as mqadmin) and prints ``export <file> success``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import click
import orjson

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQClientError
from pumice.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from pumice.remoting.mq_version import CURRENT_VERSION, version_desc
from pumice.tools import admin_output as out
from pumice.tools.stats_commands import minute_tps, sum_24h
from pumice.tools.sub_command import Common, check_addrs, common_options, fail, run

DEFAULT_EXPORT_PATH = "/tmp/rocketmq/export"
# the broker settings exportConfigs keeps (mqadmin's needBrokerProprties)
CONFIG_KEYS = ("brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
               "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable",
               "traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable",
               "autoCreateSubscriptionGroup")  # fmt: skip


def _write(opts: Common, path: str, doc: dict[str, Any]) -> None:
    """Write ``doc`` as pretty JSON to ``path`` (its directories made), then say so."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    except OSError as e:
        fail(f"cannot write {path}: {e}")
    if opts.json:
        out.emit_json({"file": path, "content": doc})
    else:
        click.echo(f"export {path} success")


def _file_path(base: str, name: str) -> str:
    return os.path.join(base.strip() or DEFAULT_EXPORT_PATH, name)


@click.command("exportMetadata")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Export the metadata of this cluster's masters.")
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Export one broker's (with -t or -g).")
@click.option("-f", "--filePath", "file_path", default=DEFAULT_EXPORT_PATH, show_default=True,
              help="Directory for metadata.json (topic.json with -t, subscriptionGroup.json with -g).")  # fmt: skip
@click.option("-t", "--topic", "topics_only", is_flag=True, help="Only the topics' configs.")
@click.option("-g", "--subscriptionGroup", "groups_only", is_flag=True, help="Only the subscription groups' configs.")
@click.option("-s", "--specialTopic", "special_topics", is_flag=True, help="Also the %RETRY% and %DLQ% topics.")
def export_metadata(opts: Common, cluster: str | None, broker_addr: str | None, file_path: str, topics_only: bool,
                    groups_only: bool, special_topics: bool) -> None:  # fmt: skip
    """Write the user topics' and subscription groups' configs to a JSON file (system ones left out)."""
    if broker_addr:
        if not topics_only and not groups_only:
            raise click.UsageError("with -b, give -t (topics) or -g (subscription groups)")
        addr = broker_addr.strip()
        if topics_only:
            table = run(opts, lambda a: a.user_topic_configs(addr, special_topics))
            _write(opts, _file_path(file_path, "topic.json"), {"topicConfigTable": table})
        else:
            groups = run(opts, lambda a: a.user_subscription_groups(addr))
            _write(opts, _file_path(file_path, "subscriptionGroup.json"), {"subscriptionGroupTable": groups})
        return
    if not cluster:
        raise click.UsageError("give -c clusterName or -b brokerAddr")

    async def body(a: AsyncMQAdmin) -> tuple[dict[str, Any], dict[str, Any]]:
        topics: dict[str, dict[str, Any]] = {}
        groups: dict[str, dict[str, Any]] = {}
        for addr in await a.targets(cluster.strip(), None):
            for name, tc in (await a.user_topic_configs(addr, special_topics)).items():
                tc = dict(tc)
                if name in topics:  # as mqadmin: a topic on several masters counts all their queues
                    tc["writeQueueNums"] = int(tc.get("writeQueueNums", 0)) + int(topics[name].get("writeQueueNums", 0))
                    tc["readQueueNums"] = int(tc.get("readQueueNums", 0)) + int(topics[name].get("readQueueNums", 0))
                topics[name] = tc
            for name, gc in (await a.user_subscription_groups(addr)).items():
                gc = dict(gc)
                if name in groups:
                    gc["retryQueueNums"] = int(gc.get("retryQueueNums", 0)) + int(groups[name].get("retryQueueNums", 0))
                groups[name] = gc
        return topics, groups

    topics, groups = run(opts, body)
    doc: dict[str, Any]
    if topics_only:
        doc, name = {"topicConfigTable": topics}, "topic.json"
    elif groups_only:
        doc, name = {"subscriptionGroupTable": groups}, "subscriptionGroup.json"
    else:
        doc, name = {"topicConfigTable": topics, "subscriptionGroupTable": groups}, "metadata.json"
    doc["exportTime"] = int(time.time() * 1000)
    _write(opts, _file_path(file_path, name), doc)


@click.command("exportConfigs")
@common_options
@click.option("-c", "--clusterName", "cluster", required=True, help="The cluster to export.")
@click.option("-f", "--filePath", "file_path", default=DEFAULT_EXPORT_PATH, show_default=True,
              help="Directory to write configs.json in.")  # fmt: skip
def export_configs(opts: Common, cluster: str, file_path: str) -> None:
    """Write the cluster's brokers' main settings and its size (name servers, masters, slaves) to configs.json."""

    async def body(a: AsyncMQAdmin) -> dict[str, Any]:
        name = cluster.strip()
        info = await a.known_cluster_info(name)
        configs: dict[str, dict[str, str]] = {}
        masters = slaves = 0
        for broker in sorted(info.cluster_addr_table[name]):
            bd = info.broker_addr_table.get(broker)
            if bd is None or bd.master_addr is None:
                continue
            props = await a.get_broker_config(bd.master_addr)
            masters += 1
            slaves += sum(1 for bid in bd.broker_addrs if bid != 0)
            configs[props.get("brokerName", broker)] = {k: props[k] for k in CONFIG_KEYS if k in props}
        return {
            "brokerConfigs": configs,
            "clusterScale": {"namesrvSize": len(a.instance.namesrv_addrs), "masterBrokerSize": masters,
                             "slaveBrokerSize": slaves},
        }  # fmt: skip

    _write(opts, _file_path(file_path, "configs.json"), run(opts, body))


def _number(rt: dict[str, str], key: str) -> int:
    try:
        return int(rt.get(key, "0"))
    except ValueError:
        return 0


def _first_float(text: str | None) -> float:
    try:
        return float((text or "0").split(" ")[0])
    except ValueError:
        return 0.0


async def _broker_metrics(a: AsyncMQAdmin, addr: str) -> dict[str, Any]:
    """One broker's evaluateReport entry (mqadmin exportMetrics' runtimeEnv, runtimeQuota, runtimeVersion)."""
    rt = await a.broker_status(addr)
    props = await a.get_broker_config(addr)
    groups = await a.user_subscription_groups(addr)
    topics = await a.user_topic_configs(addr, False)
    stats: dict[str, dict[str, Any]] = {}
    for topic in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_SCHEDULE_TOPIC):
        try:
            stats[topic] = await a.broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
        except MQClientError:
            stats[topic] = {}  # nothing put there yet
    clients: set[str] = set()
    for group in groups:
        try:
            conn = await a.consumer_connection(group)
        except MQClientError:
            continue
        clients.update(f"{c.language}%{version_desc(c.version)}" for c in conn.connections)
    trans, schedule = stats[RMQ_SYS_TRANS_HALF_TOPIC], stats[RMQ_SYS_SCHEDULE_TOPIC]
    day_in = _number(rt, "msgPutTotalTodayMorning") - _number(rt, "msgPutTotalYesterdayMorning")
    day_out = _number(rt, "msgGetTotalTodayMorning") - _number(rt, "msgGetTotalYesterdayMorning")
    return {
        "runtimeEnv": {"cpuNum": props.get("clientCallbackExecutorThreads"),
                       "totalMemKBytes": rt.get("totalMemKBytes")},
        "runtimeQuota": {
            "diskRatio": {"commitLogDiskRatio": rt.get("commitLogDiskRatio"),
                          "consumeQueueDiskRatio": rt.get("consumeQueueDiskRatio")},
            "tps": {"normalInTps": _first_float(rt.get("putTps")),
                    "normalOutTps": _first_float(rt.get("getTransferedTps")),
                    "transInTps": minute_tps(trans), "scheduleInTps": minute_tps(schedule)},
            "oneDayNum": {"normalOneDayInNum": day_in, "normalOneDayOutNum": day_out,
                          "transOneDayInNum": sum_24h(trans), "scheduleOneDayInNum": sum_24h(schedule)},
            "messageAverageSize": rt.get("putMessageAverageSize"),
            "topicSize": len(topics),
            "groupSize": len(groups),
        },
        "runtimeVersion": {"rocketmqVersion": version_desc(CURRENT_VERSION), "clientInfo": sorted(clients)},
    }  # fmt: skip


@click.command("exportMetrics")
@common_options
@click.option("-c", "--clusterName", "cluster", required=True, help="The cluster to export.")
@click.option("-f", "--filePath", "file_path", default=DEFAULT_EXPORT_PATH, show_default=True,
              help="Directory to write metrics.json in.")  # fmt: skip
def export_metrics(opts: Common, cluster: str, file_path: str) -> None:
    """Write each master's runtime figures (disk, TPS, a day's counts, sizes, client versions) to metrics.json."""

    async def body(a: AsyncMQAdmin) -> dict[str, Any]:
        name = cluster.strip()
        info = await a.known_cluster_info(name)
        report: dict[str, Any] = {}
        tps = dict.fromkeys(("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"), 0.0)
        day = dict.fromkeys(("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum"), 0)
        for broker in sorted(info.cluster_addr_table[name]):
            bd = info.broker_addr_table.get(broker)
            if bd is None or bd.master_addr is None:
                continue
            m = report[broker] = await _broker_metrics(a, bd.master_addr)
            q = m["runtimeQuota"]
            for key, src in (("totalNormalInTps", "normalInTps"), ("totalNormalOutTps", "normalOutTps"),
                             ("totalTransInTps", "transInTps"), ("totalScheduleInTps", "scheduleInTps")):  # fmt: skip
                tps[key] += q["tps"][src]
            for key in day:
                day[key] += q["oneDayNum"][key]
        return {"evaluateReport": report, "totalData": {"totalTps": tps, "totalOneDayNum": day}}

    _write(opts, _file_path(file_path, "metrics.json"), run(opts, body))


COMMANDS: tuple[click.Command, ...] = (export_metadata, export_configs, export_metrics)
