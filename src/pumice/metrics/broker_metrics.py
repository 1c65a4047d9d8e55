"""BrokerMetrics: the broker's figures as RocketMQ 5.3.3's metrics, read at each scrape.

Every series carries ``cluster`` (brokerClusterName), ``node_type="broker"``, ``node_id``
(brokerName), ``aggregation="delta"`` with metricsInDelta, and metricsLabel's pairs, as 5.x's
``BrokerMetricsManager.newAttributesBuilder``. Counters come from what the broker counts anyway
(BrokerStatsManager's TOPIC_PUT_* and GROUP_GET_*); the hot paths add only the message-size and
RPC-latency bucket counts (``histogram.observe``), and only while metrics are on. Names are those
5.3.3's Prometheus endpoint shows: OpenTelemetry's exporter (1.29) appends the unit to a name
(``rocketmq_rpc_latency`` in milliseconds is ``rocketmq_rpc_latency_milliseconds_bucket`` …) and
labels every series ``otel_scope_name="broker-meter"``.

==================================================  ==========================================  ========================
metric                                              labels (after the base ones)                from
==================================================  ==========================================  ========================
rocketmq_messages_in_total                          topic, message_type, is_system              TOPIC_PUT_NUMS (not
rocketmq_throughput_in_total                        (same; bytes)                               %RETRY%/%DLQ%, as 5.x)
rocketmq_messages_out_total                         topic, consumer_group, is_system            GROUP_GET_NUMS (same)
rocketmq_throughput_out_total                       (same; bytes)                               GROUP_GET_SIZE
rocketmq_message_size                               topic, message_type, is_system              a send's bytes / msgs
rocketmq_topic_number                               -                                           the topic table
rocketmq_consumer_group_number                      -                                           subscription groups
rocketmq_broker_permission                          -                                           brokerPermission
rocketmq_producer_connections                       language, version, protocol_type            producer heartbeats
rocketmq_consumer_connections                       consumer_group, language, version,          consumer heartbeats
                                                    consume_mode, protocol_type, is_system
rocketmq_consumer_lag_messages                      topic, consumer_group, is_retry, is_system  max offset − committed
rocketmq_consumer_lag_latency_milliseconds          (same; ms)                                  now − oldest unconsumed
                                                                                                store time
rocketmq_consumer_inflight_messages                 (same)                                      pulled − committed
rocketmq_consumer_queueing_latency_milliseconds     (same; ms)                                  now − oldest unpulled
                                                                                                store time
rocketmq_consumer_ready_messages                    (same)                                      max offset − pulled
rocketmq_processor_watermark                        processor                                   queued or running
rocketmq_rpc_latency_milliseconds                   protocol_type, request_code,                an answered request
                                                    response_code, is_long_polling, result      (ms)
rocketmq_storage_size_bytes                         storage_type, storage_medium                store disk's used bytes
rocketmq_storage_flush_behind_bytes                 (same)                                      not yet flushed
rocketmq_storage_dispatch_behind_bytes              (same)                                      not yet dispatched
rocketmq_storage_message_reserve_time_milliseconds  (same; ms)                                  now − earliest message
pumice_storage_disk_ratio                           storage_path (commitlog, consumequeue)      its disk's used ratio
pumice_ha_slave_behind_bytes                        slave_address                               max − slave's ack
pumice_ha_slave_connections                         -                                           HA connections
pumice_pull_hold_requests                           -                                           parked pulls
pumice_storage_recovery_scanned_bytes               what (CommitLog)                            its scan so far (served
                                                                                                while the store loads)
pumice_storage_recovery_total_bytes                 what                                        what the scan reads
pumice_storage_recovery_duration_milliseconds       mode (normal, abnormal) (ms)                the start's recovery
pumice_storage_recovery_truncated_bytes             mode                                        CQ entries it cut off
pumice_storage_recovery_redispatched_bytes          mode                                        what it dispatched again
pumice_storage_group_commit_size                    -                                           SYNC_FLUSH puts a flush
pumice_storage_flush_latency_milliseconds           - (ms)                                      a group commit's flush
pumice_storage_commitlog_flush_milliseconds         - (ms)                                      one CommitLog flush
                                                                                                that wrote (any mode)
pumice_metrics_label_values_folded_total            label (topic, consumer_group)               LabelCap
==================================================  ==========================================  ========================

Lag is reported for the groups with a live member and the topics they subscribe (5.x's
``ConsumerLagCalculator``), never negative. A queue that holds messages and where the group has
committed no offset makes the group's lag on that topic unknown: the series is absent (5.x
reports 0 there). "Pulled" is the next offset of the group's last pull that found messages in
the queue (kept while metrics are on; 5.x's pull offset table), else its committed offset; with
neither, in-flight, ready and queueing latency are unknown and absent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import Metric

from pumice.broker.admin_broker_processor import is_system_topic
from pumice.broker.broker_stats_manager import GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX, is_retry_or_dlq_topic, is_sys_consumer_group
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.common.topic_attributes import topic_message_type
from pumice.metrics import metrics_config
from pumice.metrics.exporter import Families, ServedMetrics
from pumice.metrics.histogram import (
    FLUSH_LATENCY_BOUNDS_MS,
    GROUP_COMMIT_SIZE_BOUNDS,
    MESSAGE_SIZE_BOUNDS,
    RPC_LATENCY_BOUNDS_MS,
    merge,
    observe,
)
from pumice.metrics.label_cap import LabelCap
from pumice.metrics.rpc_latency import RpcLatency
from pumice.remoting.mq_version import version_desc
from pumice.store.clean_commit_log_service import disk_partition_used_ratio
from pumice.store.group_commit_service import GroupCommitService

if TYPE_CHECKING:
    from pumice.broker.broker_config import BrokerConfig
    from pumice.broker.broker_stats_manager import BrokerStatsManager
    from pumice.broker.consumer_manager import ConsumerManager
    from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
    from pumice.broker.producer_manager import ProducerManager
    from pumice.broker.pull_message_processor import PullMessageProcessor
    from pumice.broker.subscription_group_manager import SubscriptionGroupManager
    from pumice.broker.topic_config_manager import TopicConfigManager
    from pumice.remoting.remoting_server import RemotingServer
    from pumice.store.message_store import DefaultMessageStore

# 5.x's processor names for the pools (BrokerMetricsManager's processorWatermark)
PROCESSOR_NAMES = {
    "SendMessageThread": "send",
    "PullMessageThread": "pull",
    "ClientManageThread": "client_manager",
    "ConsumerManageThread": "consumer_manager",
    "QueryMessageThread": "query_message",
    "AdminBrokerThread": "admin",
}
# ConsumeType.getTypeCN, lower case, by name or ordinal (a C++ heartbeat sends the ordinal)
CONSUME_MODES = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop",
                 "0": "pull", "1": "push", "2": "pop"}  # fmt: skip
STORAGE = ("local", "disk")  # 5.x's storage_type and storage_medium of the default store


class Broker(Protocol):
    """What the collector reads of the BrokerController."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> DefaultMessageStore: ...
    @property
    def topics(self) -> TopicConfigManager: ...
    @property
    def subscription_groups(self) -> SubscriptionGroupManager: ...
    @property
    def consumers(self) -> ConsumerManager: ...
    @property
    def producers(self) -> ProducerManager: ...
    @property
    def offsets(self) -> ConsumerOffsetManager: ...
    @property
    def stats(self) -> BrokerStatsManager: ...
    @property
    def server(self) -> RemotingServer: ...
    @property
    def fast_server(self) -> RemotingServer | None: ...
    @property
    def pull_processor(self) -> PullMessageProcessor | None: ...


def base_labels(
    cluster: str, node_type: str, node_id: str, label: str, in_delta: bool, scope: str = ""
) -> dict[str, str]:
    """5.x's LABEL_MAP: metricsLabel's pairs, aggregation, node_type, cluster, node_id (after the
    OpenTelemetry meter's ``otel_scope_name``, when given)."""
    base = {"otel_scope_name": scope} if scope else {}
    base.update(metrics_config.parse_labels(label))
    if in_delta:
        base["aggregation"] = "delta"
    base["node_type"] = node_type
    if cluster:
        base["cluster"] = cluster
    base["node_id"] = node_id
    return base


def _bool(b: bool) -> str:
    return "true" if b else "false"


class BrokerMetrics(ServedMetrics):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        c = broker.config
        self.base = base_labels(c.broker_cluster_name, "broker", c.broker_name, c.metrics_label, c.metrics_in_delta,
                                "broker-meter")  # fmt: skip
        self.topic_cap = LabelCap("topic", c.metrics_label_value_limit)
        self.group_cap = LabelCap("consumer_group", c.metrics_label_value_limit)
        self.rpc = RpcLatency()
        self.group_commits: dict[Hashable, list[float]] = {}  # "size" and "latency" bucket counts
        self.started = False  # before: the store is loading, only its recovery's progress is served

    def _on_flush(self, took_s: float) -> None:  # on the flushing thread: every CommitLog flush that wrote
        observe(self.group_commits, "fdatasync", took_s * 1000.0, FLUSH_LATENCY_BOUNDS_MS)

    def _on_group_commit(self, requests: int, took_s: float) -> None:  # on the flush thread
        observe(self.group_commits, "size", requests, GROUP_COMMIT_SIZE_BOUNDS)
        observe(self.group_commits, "latency", took_s * 1000.0, FLUSH_LATENCY_BOUNDS_MS)

    def serve_during_load(self) -> None:
        """Listen before the store loads (RuntimeError when it cannot): a scrape then shows how far
        the recovery's CommitLog scan has got, and nothing else."""
        c = self.broker.config
        self.serve(c.metrics_prom_exporter_host or c.broker_ip1, c.metrics_prom_exporter_port)

    def start(self) -> None:
        """Hooks the counters on; every metric is served from here on."""
        b = self.broker
        b.stats.message_sizes = {}
        b.stats.pull_offsets = {}
        for srv in (b.server, b.fast_server):
            if srv is not None:
                srv.on_rpc_done = self.rpc.record
        flush = b.store.commit_log.flush_service
        if isinstance(flush, GroupCommitService):
            flush.on_group_commit = self._on_group_commit
        b.store.commit_log.mapped_file_queue.on_flush = self._on_flush
        if self.exporter is None:
            self.serve_during_load()
        self.started = True

    # -- one scrape (on the loop) ---------------------------------------------------------

    def families(self) -> list[Metric]:
        f = Families(self.base)
        self._recovery_scan(f)
        if not self.started:
            return f.out
        self._traffic(f)
        self._tables(f)
        self._connections(f)
        self._lag(f)
        self._requests(f)
        self._storage(f)
        folded = f.counter(
            "pumice_metrics_label_values_folded_total",
            "Distinct topic or consumer_group label values reported as __other__",
            ["label"],
        )
        for cap in (self.topic_cap, self.group_cap):
            folded([cap.label], cap.folded_total)
        return f.out

    def _topic_labels(self, topic: str) -> tuple[str, str, str]:
        tc = self.broker.topics.topic_config_table.get(topic)
        message_type = topic_message_type(tc.attributes).lower() if tc is not None else "normal"
        return self.topic_cap(topic), message_type, _bool(is_system_topic(topic, self.broker.topics.system_topics))

    def _traffic(self, f: Families) -> None:
        sets = self.broker.stats.sets
        ins: dict[tuple[str, ...], list[float]] = {}
        for topic, item in list(sets[TOPIC_PUT_NUMS].items.items()):
            if is_retry_or_dlq_topic(topic):
                continue
            size = sets[TOPIC_PUT_SIZE].value(topic)
            acc = ins.setdefault(self._topic_labels(topic), [0, 0])
            acc[0] += item.value
            acc[1] += size
        msg_in = f.counter("rocketmq_messages_in_total", "Messages put", ["topic", "message_type", "is_system"])
        bytes_in = f.counter("rocketmq_throughput_in_total", "Bytes put", ["topic", "message_type", "is_system"])
        for labels, (n_in, size_in) in ins.items():
            msg_in(labels, n_in)
            bytes_in(labels, size_in)
        outs: dict[tuple[str, ...], list[float]] = {}
        for key, item in list(sets[GROUP_GET_NUMS].items.items()):
            topic, _, group = key.partition("@")
            if is_retry_or_dlq_topic(topic):
                continue
            system = is_system_topic(topic, self.broker.topics.system_topics) or is_sys_consumer_group(group)
            acc = outs.setdefault((self.topic_cap(topic), self.group_cap(group), _bool(system)), [0, 0])
            acc[0] += item.value
            acc[1] += sets[GROUP_GET_SIZE].value(key)
        msg_out = f.counter("rocketmq_messages_out_total", "Messages pulled", ["topic", "consumer_group", "is_system"])
        bytes_out = f.counter("rocketmq_throughput_out_total", "Bytes pulled",
                              ["topic", "consumer_group", "is_system"])  # fmt: skip
        for labels, (n_out, size_out) in outs.items():
            msg_out(labels, n_out)
            bytes_out(labels, size_out)
        sizes: dict[tuple[str, ...], list[float]] = {}
        for sized, counts in list((self.broker.stats.message_sizes or {}).items()):
            if not is_retry_or_dlq_topic(str(sized)):
                topic_labels = self._topic_labels(str(sized))
                sizes[topic_labels] = merge(sizes.get(topic_labels), counts)
        size_h = f.histogram("rocketmq_message_size", "Size of the messages put (bytes)",
                             ["topic", "message_type", "is_system"], MESSAGE_SIZE_BOUNDS)  # fmt: skip
        for labels, counts in sizes.items():
            size_h(labels, counts)

    def _tables(self, f: Families) -> None:
        b = self.broker
        f.gauge("rocketmq_topic_number", "Topics")((), len(b.topics.topic_config_table))
        groups = b.subscription_groups.subscription_group_table
        f.gauge("rocketmq_consumer_group_number", "Consumer groups")((), len(groups))
        f.gauge("rocketmq_broker_permission", "brokerPermission")((), b.config.broker_permission)
        watermark = f.gauge("rocketmq_processor_watermark", "Requests queued or running in a processor's pool",
                            ["processor"])  # fmt: skip
        for pool in b.server.processor_pools():
            watermark([PROCESSOR_NAMES.get(pool.name, pool.name)], pool.pending)
        hold = b.pull_processor.hold_service.pull_request_table if b.pull_processor is not None else {}
        f.gauge("pumice_pull_hold_requests", "Pulls parked by long polling")((), sum(map(len, list(hold.values()))))

    def _connections(self, f: Families) -> None:
        b = self.broker
        producers: dict[tuple[str, ...], int] = {}
        for table in list(b.producers.group_channel_table.values()):
            for producer in list(table.values()):
                pkey = (producer.language.lower(), version_desc(producer.version).lower(), "remoting")
                producers[pkey] = producers.get(pkey, 0) + 1
        add = f.gauge("rocketmq_producer_connections", "Producer connections", ["language", "version", "protocol_type"])
        for labels_p, n in producers.items():
            add(labels_p, n)
        consumers: dict[tuple[str, ...], int] = {}
        for group, info in list(b.consumers.consumer_table.items()):
            mode = CONSUME_MODES.get(str(info.consume_type), str(info.consume_type).lower())
            for ch in list(info.channels.values()):
                ckey = (self.group_cap(group), ch.language.lower(), version_desc(ch.version).lower(), mode, "remoting",
                        _bool(is_sys_consumer_group(group)))  # fmt: skip
                consumers[ckey] = consumers.get(ckey, 0) + 1
        labels = ["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"]
        add = f.gauge("rocketmq_consumer_connections", "Consumer connections", labels)
        for labels_c, n in consumers.items():
            add(labels_c, n)

    def _lag(self, f: Families) -> None:
        b = self.broker
        store, now_ms = b.store, int(time.time() * 1000)
        lags: dict[tuple[str, ...], list[int]] = {}  # labels → [messages, earliest unconsumed store time]
        for group, info in list(b.consumers.consumer_table.items()):
            for topic in list(info.subscriptions):
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    continue
                tc = b.topics.topic_config_table.get(topic)
                if tc is None or not tc.perm & b.config.broker_permission & (PERM_READ | PERM_WRITE):
                    continue
                lag = self._group_lag(store, group, topic, tc.write_queue_nums)
                if lag is None:  # unknown: no series
                    continue
                system = is_system_topic(topic, b.topics.system_topics) or is_sys_consumer_group(group)
                lkey = (self.topic_cap(topic), self.group_cap(group), "false", _bool(system))
                acc = lags.setdefault(lkey, [0, 0])
                acc[0] += lag[0]
                if lag[1] > 0 and (acc[1] == 0 or lag[1] < acc[1]):
                    acc[1] = lag[1]
        self._in_flight(f, lags)
        labels = ["topic", "consumer_group", "is_retry", "is_system"]
        messages = f.gauge("rocketmq_consumer_lag_messages", "Messages not yet consumed", labels)
        latency = f.gauge(
            "rocketmq_consumer_lag_latency_milliseconds", "Age of the oldest message not yet consumed (ms)", labels
        )
        for labels_l, (n, earliest) in lags.items():
            messages(labels_l, n)
            latency(labels_l, max(now_ms - earliest, 0) if n > 0 and earliest > 0 else 0)

    def _in_flight(self, f: Families, lags: dict[tuple[str, ...], list[int]]) -> None:
        """In-flight, ready and queueing latency of the groups whose lag is known (``lags``' keys are
        already capped: the figures of the same key add up)."""
        b = self.broker
        store, now_ms, pulled = b.store, int(time.time() * 1000), b.stats.pull_offsets or {}
        acc: dict[tuple[str, ...], list[int]] = {}  # key → [in flight, ready, earliest unpulled store time]
        for group, info in list(b.consumers.consumer_table.items()):
            for topic in list(info.subscriptions):
                tc = b.topics.topic_config_table.get(topic)
                if tc is None or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    continue
                system = is_system_topic(topic, b.topics.system_topics) or is_sys_consumer_group(group)
                key = (self.topic_cap(topic), self.group_cap(group), "false", _bool(system))
                if key not in lags:
                    continue
                figures = [0, 0, 0]
                for q in range(tc.write_queue_nums):
                    committed = b.offsets.query_offset(group, topic, q)
                    pull = pulled.get((group, topic, q), committed)
                    max_offset = max(store.get_max_offset_in_queue(topic, q), 0)
                    if pull < 0:
                        if max_offset > store.get_min_offset_in_queue(topic, q):
                            break  # unknown
                        continue
                    figures[0] += max(pull - (committed if committed >= 0 else pull), 0)
                    ready = max(max_offset - pull, 0)
                    figures[1] += ready
                    if ready:
                        ts = store.get_message_store_timestamp(topic, q, pull)
                        if ts > 0 and (figures[2] == 0 or ts < figures[2]):
                            figures[2] = ts
                else:
                    total = acc.setdefault(key, [0, 0, 0])
                    total[0] += figures[0]
                    total[1] += figures[1]
                    if figures[2] and (total[2] == 0 or figures[2] < total[2]):
                        total[2] = figures[2]
        labels = ["topic", "consumer_group", "is_retry", "is_system"]
        in_flight = f.gauge("rocketmq_consumer_inflight_messages", "Messages pulled, not yet committed", labels)
        ready_messages = f.gauge("rocketmq_consumer_ready_messages", "Messages not yet pulled", labels)
        queueing = f.gauge(
            "rocketmq_consumer_queueing_latency_milliseconds", "Age of the oldest message not yet pulled (ms)", labels
        )
        for labels_q, (n_in_flight, n_ready, earliest) in acc.items():
            in_flight(labels_q, n_in_flight)
            ready_messages(labels_q, n_ready)
            queueing(labels_q, max(now_ms - earliest, 0) if n_ready and earliest else 0)

    def _group_lag(self, store: DefaultMessageStore, group: str, topic: str, queues: int) -> tuple[int, int] | None:
        """(messages behind, earliest store time of one of them or 0), or None when unknown."""
        offsets = self.broker.offsets
        total, earliest = 0, 0
        for q in range(queues):
            max_offset = max(store.get_max_offset_in_queue(topic, q), 0)
            consumed = offsets.query_offset(group, topic, q)
            if consumed < 0:
                if max_offset > store.get_min_offset_in_queue(topic, q):
                    return None  # messages there, and nothing says where the group is
                continue
            behind = max(max_offset - consumed, 0)
            if behind:
                total += behind
                ts = store.get_message_store_timestamp(topic, q, max(consumed, store.get_min_offset_in_queue(topic, q)))
                if ts > 0 and (earliest == 0 or ts < earliest):
                    earliest = ts
        return total, earliest

    def _requests(self, f: Families) -> None:
        add = f.histogram("rocketmq_rpc_latency_milliseconds", "Time to process a request (ms)",
                          ["protocol_type", "request_code", "response_code", "is_long_polling", "result"],
                          RPC_LATENCY_BOUNDS_MS)  # fmt: skip
        for labels, counts in self.rpc.series():
            add(labels, counts)

    def _recovery_scan(self, f: Families) -> None:
        progress = self.broker.store.commit_log.recovery_progress
        if progress is None:
            return
        what = ["what"]
        f.gauge("pumice_storage_recovery_scanned_bytes", "Bytes the recovery's scan has read", what)(
            [progress.what], progress.done
        )
        f.gauge("pumice_storage_recovery_total_bytes", "Bytes the recovery's scan reads", what)(
            [progress.what], progress.total
        )

    def _recovery(self, f: Families) -> None:
        """What the start's recovery did (its progress while it ran: ``_recovery_scan``)."""
        rec = self.broker.store.last_recovery
        if rec is None:
            return
        mode, value = ["mode"], [rec.mode]
        redispatched = rec.commit_log_end - rec.redispatch_from if rec.redispatch_from >= 0 else 0
        for name, text, v in (
            ("pumice_storage_recovery_duration_milliseconds", "Time the start's recovery took (ms)", rec.millis),
            ("pumice_storage_recovery_truncated_bytes",
             "CommitLog bytes the ConsumeQueues indexed past the recovered end (their entries truncated)",
             rec.truncated_bytes),
            ("pumice_storage_recovery_redispatched_bytes", "CommitLog bytes the start's recovery dispatched again",
             redispatched),
        ):  # fmt: skip
            f.gauge(name, text, mode)(value, v)

    def _storage(self, f: Families) -> None:
        store = self.broker.store
        cfg = store.config
        labels = ["storage_type", "storage_medium"]
        try:
            st = os.statvfs(cfg.store_path_root_dir)
        except OSError:
            pass
        else:
            f.gauge("rocketmq_storage_size_bytes", "Used bytes of the store's disk", labels)(
                STORAGE, (st.f_blocks - st.f_bfree) * st.f_frsize
            )
        mfq = store.commit_log.mapped_file_queue
        f.gauge("rocketmq_storage_flush_behind_bytes", "CommitLog bytes not yet flushed", labels)(
            STORAGE, max(mfq.get_max_offset() - mfq.flushed_where, 0)
        )
        f.gauge("rocketmq_storage_dispatch_behind_bytes", "CommitLog bytes not yet dispatched", labels)(
            STORAGE, max(store.dispatch_behind_bytes(), 0)
        )
        reserve = f.gauge(
            "rocketmq_storage_message_reserve_time_milliseconds", "Age of the earliest stored message (ms)", labels
        )
        earliest = store.get_earliest_message_time()
        if earliest > 0:
            reserve(STORAGE, max(int(time.time() * 1000) - earliest, 0))
        ratio = f.gauge("pumice_storage_disk_ratio", "Used ratio of the disk holding a store path", ["storage_path"])
        for name, path in (("commitlog", cfg.commit_log_dir), ("consumequeue", cfg.consume_queue_dir)):
            r = disk_partition_used_ratio(path)
            if r >= 0:
                ratio([name], r)
        ha = store.ha_service
        behind = f.gauge("pumice_ha_slave_behind_bytes", "CommitLog bytes a slave has not acknowledged",
                         ["slave_address"])  # fmt: skip
        conns = ha.connections() if ha is not None else []
        max_phy = store.get_max_phy_offset()
        for conn in conns:
            if conn.slave_ack_offset >= 0:
                behind([conn.client_addr], max(max_phy - conn.slave_ack_offset, 0))
        f.gauge("pumice_ha_slave_connections", "Connections of slaves to this master's HA port")((), len(conns))
        self._recovery(f)
        sizes = f.histogram("pumice_storage_group_commit_size", "SYNC_FLUSH puts one flush covered", (),
                            GROUP_COMMIT_SIZE_BOUNDS)  # fmt: skip
        latency = f.histogram("pumice_storage_flush_latency_milliseconds", "Time of a group commit's flush (ms)", (),
                              FLUSH_LATENCY_BOUNDS_MS)  # fmt: skip
        fsync = f.histogram("pumice_storage_commitlog_flush_milliseconds",
                            "Time of one CommitLog flush that wrote (its msync/fdatasync), ASYNC_FLUSH's too (ms)", (),
                            FLUSH_LATENCY_BOUNDS_MS)  # fmt: skip
        for name, add in (("size", sizes), ("latency", latency), ("fdatasync", fsync)):
            counts = self.group_commits.get(name)
            if counts is not None:
                add((), list(counts))


def serve_broker_metrics(broker: Broker) -> BrokerMetrics | None:
    """metricsExporterType=PROM: the collector, serving the recovery's progress until ``start``;
    None when off."""
    if metrics_config.exporter_type(broker.config.metrics_exporter_type) != "PROM":
        return None
    metrics = BrokerMetrics(broker)
    metrics.serve_during_load()
    return metrics
