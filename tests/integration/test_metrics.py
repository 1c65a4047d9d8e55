"""Prometheus metrics (metricsExporterType=PROM) of real `pumice namesrv` and `pumice broker` processes.

One name server and broker (both exporting, metricsLabelValueLimit=3) serve the module; its
tests run on one worker, in order, and every message they send is counted in ``SENT`` so that
each scrape can be checked exactly. Each scrape goes through prometheus_client's parser.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pumice.client import ConsumeFromWhere, LitePullConsumer, Message, MessageQueue, Producer
from tests.helpers.clients import create_topic
from tests.helpers.clusters import Cluster, run, start, stop
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.xdist_group("metrics")

LIMIT = 3  # metricsLabelValueLimit
SENT: dict[str, int] = {}  # topic → messages this module sent to it
GRAFANA = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "pumice.json"

Samples = dict[str, list[tuple[dict[str, str], float]]]


class MetricsCluster(Cluster):
    def __init__(self, tmp: Path) -> None:
        self.ns_metrics_port, self.metrics_port = free_port(), free_port()
        super().__init__(
            tmp,
            f"metricsExporterType=PROM\nmetricsPromExporterPort={self.metrics_port}\nmetricsLabel=env:test\n"
            f"metricsLabelValueLimit={LIMIT}\nflushDiskType=SYNC_FLUSH\n",
            ns_conf=f"metricsExporterType=2\nmetricsPromExporterPort={self.ns_metrics_port}\n",
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsCluster]:
    c = MetricsCluster(tmp_path_factory.mktemp("metrics"))
    try:
        yield c
    finally:
        c.close()


def scrape_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        return r.read().decode()


def scrape(port: int) -> Samples:
    """Every sample by its name (``_total``, ``_bucket``… included), through prometheus_client's parser."""
    out: Samples = {}
    for family in text_string_to_metric_families(scrape_text(port)):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels``; None when there is none."""
    found = [v for lbl, v in samples.get(name, []) if all(lbl.get(k) == x for k, x in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    """How much a counter (or a histogram's count or sum) grew; a series not there yet counts 0."""
    return (value(after, name, **labels) or 0) - (value(before, name, **labels) or 0)


def send(cluster: Cluster, topic: str, sizes: list[int]) -> None:
    with Producer("MetricsPG", cluster.ns, compress_msg_body_over_howmuch=1 << 30) as p:  # sizes as sent
        for i, size in enumerate(sizes):
            p.send(Message(topic, bytes([65 + i % 26]) * size, keys=f"k{i}"))
    SENT[topic] = SENT.get(topic, 0) + len(sizes)


def poll(consumer: LitePullConsumer, n: int, seconds: float = 15) -> int:
    got, deadline = 0, time.monotonic() + seconds
    while got < n and time.monotonic() < deadline:
        got += len(consumer.poll(0.5))
    return got


def test_workload_counts_lag_and_requests(cluster: MetricsCluster) -> None:
    topic, group = "MetricsTopic", "MetricsCG"
    run(create_topic(cluster, topic, queues=1))
    consumer = LitePullConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, auto_commit=False,
                                pull_suspend_s=1.0)  # fmt: skip
    consumer.subscribe(topic)
    consumer.start()
    try:
        mq = MessageQueue(topic, "broker-t", 0)
        eventually(lambda: mq in consumer.assignment(), what="the queue assigned")
        consumer.commit({mq: 0})  # the group's place is known: lag 0 on the empty queue
        eventually(
            lambda: value(scrape(cluster.metrics_port), "rocketmq_consumer_lag_messages", consumer_group=group) == 0,
            what="the lag of a group on an empty queue: 0",
        )
        before = scrape(cluster.metrics_port)
        sizes = [100, 100, 100, 3000, 10_000]
        send(cluster, topic, sizes)
        # lag rises: 5 messages, the oldest of them some ms old
        s = scrape(cluster.metrics_port)
        lag = {"topic": topic, "consumer_group": group}
        assert value(s, "rocketmq_consumer_lag_messages", **lag, is_retry="false", is_system="false") == 5
        assert value(s, "rocketmq_consumer_lag_latency_milliseconds", **lag) >= 0
        base = {"cluster": "TestCluster", "node_type": "broker", "node_id": "broker-t", "env": "test",
                "otel_scope_name": "broker-meter"}  # fmt: skip
        mine = {**base, "topic": topic}
        assert value(s, "rocketmq_messages_in_total", **mine, message_type="normal", is_system="false") == 5
        size_in = value(s, "rocketmq_throughput_in_total", **mine)
        assert size_in is not None and sum(sizes) < size_in < sum(sizes) + 5 * 300  # records: body and header
        # the size histogram: 3 under 1 KiB, 1 under 4 KiB, 1 under 512 KiB; its sum is the bytes in
        buckets = {lbl["le"]: v for lbl, v in s["rocketmq_message_size_bucket"] if lbl["topic"] == topic}
        assert buckets == {"1024.0": 3, "4096.0": 4, "524288.0": 5, "1048576.0": 5, "2097152.0": 5,
                           "4194304.0": 5, "+Inf": 5}  # fmt: skip
        assert value(s, "rocketmq_message_size_sum", topic=topic) == size_in
        assert value(s, "rocketmq_message_size_count", topic=topic) == 5
        # each send is one request answered SUCCESS
        sends = {"request_code": "send_message_v2", "response_code": "success", "result": "success",
                 "protocol_type": "remoting"}  # fmt: skip
        assert delta(before, s, "rocketmq_rpc_latency_milliseconds_count", **sends) == 5
        # SYNC_FLUSH: each send waited for a group commit; each group's flush timed
        groups = delta(before, s, "pumice_storage_group_commit_size_count")
        assert delta(before, s, "pumice_storage_group_commit_size_sum") == 5 and 1 <= groups <= 5
        assert delta(before, s, "pumice_storage_flush_latency_milliseconds_count") == groups
        assert 1 <= delta(before, s, "pumice_storage_commitlog_flush_milliseconds_count") <= groups  # what wrote
        assert value(s, "rocketmq_consumer_connections", consumer_group=group, consume_mode="pull",
                     language="python", protocol_type="remoting", is_system="false") == 1  # fmt: skip
        # consumed and committed: out counts, lag falls to 0
        assert poll(consumer, 5) == 5
        s = scrape(cluster.metrics_port)  # pulled, not committed: in flight
        assert value(s, "rocketmq_consumer_inflight_messages", **lag) == 5
        assert value(s, "rocketmq_consumer_ready_messages", **lag) == 0
        assert value(s, "rocketmq_consumer_queueing_latency_milliseconds", **lag) == 0
        assert value(s, "rocketmq_consumer_lag_messages", **lag) == 5
        consumer.commit_sync()
        s = scrape(cluster.metrics_port)
        assert value(s, "rocketmq_consumer_inflight_messages", **lag) == 0
        out = {**base, "topic": topic, "consumer_group": group, "is_system": "false"}
        assert value(s, "rocketmq_messages_out_total", **out) == 5
        assert value(s, "rocketmq_throughput_out_total", **out) == size_in
        assert value(s, "rocketmq_consumer_lag_messages", **lag) == 0
        assert value(s, "rocketmq_consumer_lag_latency_milliseconds", **lag) == 0
        assert value(s, "rocketmq_storage_message_reserve_time_milliseconds") >= 0
        assert value(s, "rocketmq_storage_dispatch_behind_bytes") == 0
        assert value(s, "rocketmq_topic_number") >= 1 and value(s, "rocketmq_consumer_group_number") >= 1
        assert value(s, "rocketmq_processor_watermark", processor="send") == 0
        assert value(s, "pumice_ha_slave_connections") == 0
        # all consumed: the consumer's next pulls park (long polling)
        eventually(lambda: value(scrape(cluster.metrics_port), "pumice_pull_hold_requests") >= 1, what="a parked pull")
    finally:
        consumer.shutdown()


def test_unknown_lag_is_absent_not_zero(cluster: MetricsCluster) -> None:
    topic, group = "LagUnknown", "UnknownCG"
    run(create_topic(cluster, topic, queues=1))
    send(cluster, topic, [10, 10])
    consumer = LitePullConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, auto_commit=False,
                                pull_suspend_s=1.0)  # fmt: skip
    consumer.subscribe(topic)
    consumer.start()
    try:  # a member online, messages in the queue, no offset committed: where the group is is unknown
        s = eventually(lambda: _with(scrape(cluster.metrics_port), "rocketmq_consumer_connections", group),
                       what="the group's connection")  # fmt: skip
        assert value(s, "rocketmq_consumer_lag_messages", consumer_group=group) is None
        assert value(s, "rocketmq_consumer_lag_latency_milliseconds", consumer_group=group) is None
        assert value(s, "rocketmq_consumer_inflight_messages", consumer_group=group) is None
        assert poll(consumer, 2) == 2
        consumer.commit_sync()
        assert value(scrape(cluster.metrics_port), "rocketmq_consumer_lag_messages", consumer_group=group) == 0
    finally:
        consumer.shutdown()


def _with(s: Samples, name: str, group: str) -> Samples:
    assert value(s, name, consumer_group=group) == 1
    return s


def test_topic_label_values_fold_past_the_cap(cluster: MetricsCluster) -> None:
    for i in range(5):
        send(cluster, f"Fold{i}", [20] * (i + 1))
    s = scrape(cluster.metrics_port)
    ins = {lbl["topic"]: v for lbl, v in s["rocketmq_messages_in_total"] if lbl["is_system"] == "false"}
    kept = {t for t in ins if t != "__other__"}
    assert len(kept) == LIMIT and "__other__" in ins, ins
    assert all(ins[t] == SENT[t] for t in kept)
    assert ins["__other__"] == sum(n for t, n in SENT.items() if t not in kept)
    assert value(s, "pumice_metrics_label_values_folded_total", label="topic") == len(SENT) - LIMIT
    assert value(s, "pumice_metrics_label_values_folded_total", label="consumer_group") == 0


def test_name_server_endpoint(cluster: MetricsCluster) -> None:
    s = scrape(cluster.ns_metrics_port)
    ns = {"node_type": "namesrv", "node_id": f"127.0.0.1:{cluster.ns_port}"}
    assert value(s, "pumice_namesrv_brokers", **ns, cluster="TestCluster") == 1
    assert value(s, "pumice_namesrv_topics", **ns) >= len(SENT)
    assert (
        value(
            s, "rocketmq_rpc_latency_milliseconds_count", **ns, request_code="register_broker", response_code="success"
        )
        >= 1
    )
    assert (
        value(
            s, "rocketmq_rpc_latency_milliseconds_count", request_code="get_routeinfo_by_topic", response_code="success"
        )
        >= 1
    )
    banner = "".join(cluster.namesrv.output_lines)  # type: ignore[attr-defined]
    assert f"metrics on http://127.0.0.1:{cluster.ns_metrics_port}/metrics" in banner
    banner = "".join(cluster.broker.output_lines)  # type: ignore[attr-defined]
    assert f"metrics on http://127.0.0.1:{cluster.metrics_port}/metrics" in banner


def test_grafana_dashboard_names_exported_metrics(cluster: MetricsCluster) -> None:
    """Every expression of docs/grafana/pumice.json names metrics the broker or the name server export."""
    exported: set[str] = set()
    for port in (cluster.metrics_port, cluster.ns_metrics_port):
        for family in text_string_to_metric_families(scrape_text(port)):
            exported |= {family.name, *(s.name for s in family.samples)}
            if family.type == "histogram":
                exported |= {f"{family.name}_bucket", f"{family.name}_sum", f"{family.name}_count"}
            if family.type == "counter":
                exported.add(f"{family.name}_total")
    board = json.loads(GRAFANA.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15
    for expr in exprs:
        names = set(re.findall(r"\b((?:rocketmq|pumice)_[a-z_]+)\b", expr))
        assert names and names <= exported, (expr, names - exported)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its sockets' inodes in /proc/net/tcp{,6})."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def test_metrics_off_by_default(cluster: MetricsCluster, tmp_path: Path) -> None:
    """A name server and a broker (of the module's name server) without metrics keys listen on their ports only."""
    ns_port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n")
    namesrv = start(["namesrv", "-c", str(conf)], "boot success")
    try:
        assert listening_ports(namesrv.pid) == {ns_port}
    finally:
        stop(namesrv)
    port = free_port()
    lines = [ln for ln in (cluster.tmp / "broker.conf").read_text().splitlines() if not ln.startswith("metrics")]
    text = "\n".join(lines).replace(f"listenPort={cluster.broker_port}", f"listenPort={port}")
    conf = tmp_path / "broker.conf"
    conf.write_text(text.replace(str(cluster.tmp / "store"), str(tmp_path / "store")).replace("broker-t", "broker-off"))
    broker = start(["broker", "-c", str(conf)], "boot success")
    try:
        assert listening_ports(broker.pid) == {port, port + 1}  # its HA port too
        assert "metrics on" not in "".join(broker.output_lines)  # type: ignore[attr-defined]
    finally:
        stop(broker)


def pumice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pumice.cli", *args], capture_output=True, text=True, timeout=60)


def test_an_unbuilt_exporter_stops_the_start_naming_it(tmp_path: Path) -> None:
    """(every bad key: tests/unit/test_metrics_config.py)"""
    conf = tmp_path / "broker.conf"
    conf.write_text("metricsExporterType=OTLP_GRPC\n")
    r = pumice("broker", "-c", str(conf), "-p")
    want = "metricsExporterType OTLP_GRPC is not supported: only PROM (Prometheus /metrics) and DISABLE are built"
    assert r.returncode == 1 and want in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_port_in_use_is_a_clear_start_error(cluster: MetricsCluster, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = tmp_path / "namesrv.conf"
        conf.write_text(f"listenPort={free_port()}\nlistenHost=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n"
                        f"metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
                        f"metricsPromExporterPort={port}\n")  # fmt: skip
        r = pumice("namesrv", "-c", str(conf))
        want = (
            f"cannot start: metricsPromExporterPort: cannot serve /metrics on 127.0.0.1:{port}: Address already in use"
        )
        assert r.returncode == 1 and want in r.stderr and "Traceback" not in r.stderr, r.stderr
    # a broker whose metrics port is the name server's: it stops, and says why
    broker_conf = tmp_path / "broker.conf"
    conf_text = (cluster.tmp / "broker.conf").read_text()
    conf_text = conf_text.replace(f"listenPort={cluster.broker_port}", f"listenPort={free_port()}")
    conf_text = conf_text.replace(str(cluster.tmp / "store"), str(tmp_path / "store")).replace("broker-t", "broker-dup")
    ports = (f"PromExporterPort={cluster.metrics_port}", f"PromExporterPort={cluster.ns_metrics_port}")
    conf_text = conf_text.replace(*ports)
    broker_conf.write_text(conf_text)
    r = pumice("broker", "-c", str(broker_conf))
    assert r.returncode == 1, r.stderr
    assert f"metricsPromExporterPort: cannot serve /metrics on 127.0.0.1:{cluster.ns_metrics_port}" in r.stderr
    assert "Traceback" not in r.stderr
    # the failed start shut down cleanly: the store's abort file is gone
    assert not (tmp_path / "store" / "abort").exists()


def test_the_start_s_recovery_abnormal_after_a_kill_then_normal(tmp_path: Path) -> None:
    c = MetricsCluster(tmp_path)  # a store of its own: killed here
    name = "pumice_storage_recovery_duration_milliseconds"
    try:
        s = scrape(c.metrics_port)  # a new store: a normal (empty) recovery
        assert value(s, name, mode="normal") is not None and value(s, name, mode="abnormal") is None, s
        run(create_topic(c, "RecoveryTopic", queues=1))
        with Producer("RecoveryPG", c.ns) as p:
            for _ in range(20):
                p.send(Message("RecoveryTopic", b"r" * 200))
        c.broker.kill()
        c.broker.wait(10)
        c.broker = c.start_broker()  # the abort file is left: an abnormal recovery
        s = scrape(c.metrics_port)
        took = value(s, name, mode="abnormal")
        assert took is not None and took >= 0 and value(s, name, mode="normal") is None, s
        assert value(s, "pumice_storage_recovery_truncated_bytes", mode="abnormal") == 0  # nothing torn
        redispatched = value(s, "pumice_storage_recovery_redispatched_bytes", mode="abnormal")
        assert redispatched is not None and redispatched >= 0
        scanned = value(s, "pumice_storage_recovery_scanned_bytes", what="CommitLog")
        total = value(s, "pumice_storage_recovery_total_bytes", what="CommitLog")
        assert scanned is not None and total is not None and 0 < scanned <= total, s
        stop(c.broker)
        c.broker = c.start_broker()  # after a clean stop
        s = scrape(c.metrics_port)
        assert value(s, name, mode="normal") is not None and value(s, name, mode="abnormal") is None, s
    finally:
        c.close()


def test_an_async_flush_is_timed_too(tmp_path: Path) -> None:
    port = free_port()
    c = Cluster(tmp_path, f"metricsExporterType=PROM\nmetricsPromExporterPort={port}\nflushDiskType=ASYNC_FLUSH\n")
    name = "pumice_storage_commitlog_flush_milliseconds_count"
    try:
        before = value(scrape(port), name) or 0
        run(create_topic(c, "AsyncFlushTopic", queues=1))
        with Producer("AsyncFlushPG", c.ns) as p:
            for _ in range(5):
                p.send(Message("AsyncFlushTopic", b"a" * 300))
        # FlushRealTimeService flushes every 500 ms
        eventually(lambda: (value(scrape(port), name) or 0) > before, what="an ASYNC_FLUSH flush timed")
        assert value(scrape(port), "pumice_storage_flush_latency_milliseconds_count") is None  # no group commit
    finally:
        c.close()
