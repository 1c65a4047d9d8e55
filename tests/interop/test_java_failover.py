"""The official Java client (rocketmq-client 4.9.8) against two `pumice broker` processes of one
cluster while things go wrong: a broker killed under a producer (retryTimesWhenSendFailed sends
on to the live one), a broker restarted under a push consumer (at-least-once, no gap), and
members joining and leaving a group mid-stream (nothing lost; orderly keeps each queue's order).

The module's cluster is a name server and brokers broker-a and broker-b (real processes on
127.0.0.1); a test that stops a broker starts it again before it ends.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pumice.client.admin import AsyncMQAdmin
from tests.helpers.clusters import start, stop
from tests.helpers.interop import wait_members
from tests.helpers.java_driver import JavaDriver
from tests.helpers.ports import free_port

BROKERS = ("broker-a", "broker-b")


class TwoBrokers:
    """A name server and two masters of TestCluster; ``ns`` as the ``java`` fixture needs."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ns_port = free_port()
        self.ports = {name: free_port() for name in BROKERS}
        (tmp / "namesrv.conf").write_text(
            f"listenPort={self.ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp / 'kv.json'}\n"
        )
        for name, port in self.ports.items():
            (tmp / f"{name}.conf").write_text(
                f"brokerClusterName=TestCluster\nbrokerName={name}\nlistenPort={port}\nlistenHost=127.0.0.1\n"
                f"brokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{self.ns_port}\nstorePathRootDir={tmp / name}\n"
                "mapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n"
            )
        self.namesrv = start(["namesrv", "-c", str(tmp / "namesrv.conf")], "boot success")
        self.brokers: dict[str, subprocess.Popen[str]] = {}
        self.logs: dict[str, list[str]] = collections.defaultdict(list)
        try:
            for name in BROKERS:
                self.start_broker(name)
        except BaseException:
            self.close()
            raise

    @property
    def ns(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def start_broker(self, name: str) -> None:
        self.brokers[name] = start(["broker", "-c", str(self.tmp / f"{name}.conf")], "boot success")

    def kill_broker(self, name: str) -> None:
        """SIGKILL, by pid: no shutdown, the store recovers at the next start."""
        proc = self.brokers[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        self._keep_log(name, proc)

    def stop_broker(self, name: str) -> None:
        """SIGTERM, by pid: a clean shutdown (exit status 0)."""
        proc = self.brokers[name]
        try:
            stop(proc)
        finally:
            self._keep_log(name, proc)

    def _keep_log(self, name: str, proc: subprocess.Popen[str]) -> None:
        self.logs[name].extend(getattr(proc, "output_lines", []))

    def close(self) -> None:
        try:
            for name, proc in self.brokers.items():
                if proc.poll() is None:
                    self.stop_broker(name)
        finally:
            if self.namesrv.poll() is None:
                stop(self.namesrv)
            for name, lines in self.logs.items():
                (self.tmp / f"{name}.log").write_text("".join(lines))


@pytest.fixture(scope="module")
def interop_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoBrokers]:
    """Overrides the conftest's one-broker cluster for this module (the ``java`` fixture uses it)."""
    c = TwoBrokers(tmp_path_factory.mktemp("two-brokers"))
    try:
        yield c
    finally:
        c.close()


def admin_call(cluster: TwoBrokers, call) -> Any:
    async def run() -> Any:
        async with AsyncMQAdmin(cluster.ns) as admin:
            return await call(admin)

    return asyncio.run(asyncio.wait_for(run(), 30))


def create_topic_on_both(cluster: TwoBrokers, topic: str, queues: int = 4) -> None:
    """The topic on every master of TestCluster; waits until the name server routes to both."""

    async def create(admin: AsyncMQAdmin) -> None:
        await admin.create_topic(topic, cluster="TestCluster", read_queue_nums=queues, write_queue_nums=queues)
        deadline = time.monotonic() + 20
        while {q.broker_name for q in (await admin.topic_route(topic)).queue_datas} != set(BROKERS):
            assert time.monotonic() < deadline, f"the route of {topic} never named both brokers"
            await asyncio.sleep(0.2)

    admin_call(cluster, create)


def wait_routed(cluster: TwoBrokers, topic: str, brokers: set[str], timeout_s: float = 20) -> None:
    async def check(admin: AsyncMQAdmin) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                routed = {q.broker_name for q in (await admin.topic_route(topic)).queue_datas}
            except Exception:
                routed = set()
            if routed == brokers:
                return
            assert time.monotonic() < deadline, f"{topic} routed to {routed}, not {brokers}"
            await asyncio.sleep(0.2)

    admin_call(cluster, check)


def queue_ends(cluster: TwoBrokers, topic: str) -> dict[tuple[str, int], int]:
    """(brokerName, queueId) → the queue's max offset, from both brokers."""
    statuses = admin_call(cluster, lambda admin: admin.topic_status(topic))
    return {(s.mq.broker_name, s.mq.queue_id): s.max_offset for s in statuses}


def acked(driver: JavaDriver) -> dict[str, dict[str, Any]]:
    """msgId → "sent" event of every message the broker answered SEND_OK."""
    return {e["msgId"]: e for e in driver.of("sent") if e["status"] == "SEND_OK"}


def received_ids(*drivers: JavaDriver) -> set[str]:
    return {m["msgId"] for d in drivers for m in d.received()}


def test_sync_sends_retry_on_the_live_broker_when_one_is_killed(java, interop_cluster) -> None:
    """retryTimesWhenSendFailed: broker-b is killed while two producers send, and the producers
    keep its route (pollNameServerInterval 30 s, 4.9's default). The one with retries resends
    each message the dead broker refused to broker-a (its log says so); the one without fails
    those with "BrokersSent: [broker-b]". After broker-b recovers from the kill, a consumer
    gets every message either producer had acknowledged, from both brokers."""
    c = interop_cluster
    topic = "JFailover"
    create_topic_on_both(c, topic)
    common = {"topic": topic, "mode": "sync", "count": 150, "interval_ms": 20, "timeout_ms": 3000, "poll_ms": 30_000}
    with_retry = java("produce", name="retry", group="PRetry", label="r", retries=2, **common)
    no_retry = java("produce", name="noretry", group="PNoRetry", label="n", retries=0, **common)
    for d in (with_retry, no_retry):
        d.wait_for(lambda d: len(d.of("sent")) >= 30, 30, "30 sends")
    assert {s["brokerName"] for s in with_retry.of("sent")} == set(BROKERS)
    c.kill_broker("broker-b")
    killed_at = time.time() * 1000
    with_retry.wait(90)
    no_retry.wait(90)

    # with retries: every message sent, but perhaps one in flight at the kill (its answer never
    # came: a timeout, as against a Java broker); the refused ones went to broker-a
    errors = with_retry.of("error")
    assert len(errors) <= 1 and all("timeout" in e["error"].lower() for e in errors), errors
    assert len(acked(with_retry)) >= 149
    late = [s for s in with_retry.of("sent") if s["sentAt"] > killed_at + 500]
    assert late and all(s["brokerName"] == "broker-a" for s in late)
    resends = [line for line in with_retry.client_log().splitlines() if "resend at once" in line]
    assert any("brokerName=broker-b" in line for line in resends), resends[-5:]
    # without: the sends that chose broker-b's queues failed, naming it
    refused = [e for e in no_retry.of("error") if "BrokersSent: [broker-b]" in e["error"]]
    assert refused, no_retry.describe()
    assert all(s["brokerName"] == "broker-a" for s in no_retry.of("sent") if s["sentAt"] > killed_at + 500)

    c.start_broker("broker-b")
    wait_routed(c, topic, set(BROKERS))
    expected = acked(with_retry) | acked(no_retry)
    assert {s["brokerName"] for s in expected.values() if s["sentAt"] < killed_at} == set(BROKERS)
    consumer = java("push", name="consumer", topic=topic, group="CFailover", duration=90)
    consumer.wait_for(lambda d: set(expected) <= received_ids(d), 60, "every acknowledged message")
    for m in consumer.received():
        s = expected.get(m["msgId"])
        if s is not None:
            where = ("brokerName", "queueId", "queueOffset")
            assert [m[k] for k in where] == [s[k] for k in where]


def test_a_broker_restart_mid_consumption_loses_no_message(java, interop_cluster) -> None:
    """broker-a stops (SIGTERM) and starts again while a producer sends and a push consumer
    consumes: the consumer gets every acknowledged message at least once, and every stored
    offset of every queue on both brokers (no gap), resuming broker-a's queues where it was."""
    c = interop_cluster
    topic = "JRestart"
    create_topic_on_both(c, topic)
    consumer = java("push", name="consumer", topic=topic, group="CRestart", duration=120, persist_ms=500)
    consumer.wait_event("started", 30)
    producer = java("produce", name="producer", topic=topic, mode="sync", count=300, interval_ms=20, label="rs",
                    retries=2, timeout_ms=3000)  # fmt: skip
    producer.wait_for(lambda d: len(d.of("sent")) >= 80, 30, "80 sends")
    consumer.wait_for(lambda d: len(d.received()) >= 40, 30, "40 deliveries")
    c.stop_broker("broker-a")
    producer.wait_for(lambda d: len(d.of("sent")) >= 160, 30, "160 sends")
    c.start_broker("broker-a")
    producer.wait(90)
    sent = acked(producer)
    assert len(producer.of("error")) <= 1, producer.of("error")
    assert len(sent) >= 299
    assert {s["brokerName"] for s in sent.values()} == set(BROKERS)
    consumer.wait_for(lambda d: set(sent) <= received_ids(d), 60, "every acknowledged message")
    ends = queue_ends(c, topic)
    assert sum(ends.values()) >= len(sent)

    def offsets_seen() -> dict[tuple[str, int], set[int]]:
        seen: dict[tuple[str, int], set[int]] = collections.defaultdict(set)
        for m in consumer.received():
            seen[(m["brokerName"], m["queueId"])].add(m["queueOffset"])
        return seen

    consumer.wait_for(
        lambda d: all(offsets_seen()[q] >= set(range(end)) for q, end in ends.items()), 30, "every stored offset"
    )
    assert all(offsets_seen()[q] == set(range(end)) for q, end in ends.items())


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
def test_members_joining_and_leaving_mid_stream_lose_nothing_and_orderly_keeps_order(
    java, interop_cluster, orderly: bool
) -> None:
    """A group of one member takes a stream; a second and a third join, then the second leaves,
    all while messages arrive (8 queues on two brokers, rebalanced at each change). Every
    acknowledged message is consumed; orderly, the first delivery of each message follows its
    queue's order across all members (a queue moves only once its holder has let go)."""
    c = interop_cluster
    topic = "JRebalanceOrderly" if orderly else "JRebalance"
    group = f"C{topic}"
    create_topic_on_both(c, topic)

    def member(name: str) -> JavaDriver:
        return java("push", name=name, instance=name, topic=topic, group=group, orderly=orderly, duration=120,
                    persist_ms=500)  # fmt: skip

    members = [member("a")]
    wait_members(c, group, 1)
    producer = java("produce", name="producer", topic=topic, mode="orderly" if orderly else "sync", shards=8,
                    count=400, interval_ms=15, label="rb")  # fmt: skip
    producer.wait_for(lambda d: len(d.of("sent")) >= 60, 30, "60 sends")
    members.append(member("b"))
    wait_members(c, group, 2)
    producer.wait_for(lambda d: len(d.of("sent")) >= 150, 30, "150 sends")
    members.append(member("c"))
    wait_members(c, group, 3)
    producer.wait_for(lambda d: len(d.of("sent")) >= 250, 30, "250 sends")
    members[1].stop()
    wait_members(c, group, 2)
    producer.wait(60)
    sent = acked(producer)
    assert not producer.of("error") and len(sent) == 400
    JavaDriver.wait_all(members, lambda: set(sent) <= received_ids(*members), 60, "every acknowledged message")
    assert all(m.received() for m in members), "each member consumed some"
    if orderly:
        deliveries = sorted(
            (m["receivedAt"], k, n, m) for k, d in enumerate(members) for n, m in enumerate(d.received())
        )
        first: dict[str, tuple[int, int]] = {}
        per_queue: dict[tuple[str, int], list[int]] = collections.defaultdict(list)
        for _, k, _, m in deliveries:
            if m["msgId"] not in first:
                first[m["msgId"]] = (k, m["queueOffset"])
                per_queue[(m["brokerName"], m["queueId"])].append(int(m["props"]["i"]))
        for q, seq in per_queue.items():
            assert seq == sorted(seq), (q, seq)
        keys: dict[tuple[str, int], set[int]] = collections.defaultdict(set)
        for s in sent.values():
            keys[(s["brokerName"], s["queueId"])].add(int(s["i"]) % 8)
        assert len(keys) == 8 and all(len(k) == 1 for k in keys.values())  # a queue's order is its key's
