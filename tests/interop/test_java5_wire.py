"""The RocketMQ 5.x remoting client and tools (5.5.0, which parse with fastjson2) against
`pumice broker` (issue 31, point 1): fastjson2 reads a map keyed by MessageQueue only in
fastjson's form, the key object bare; a key written as a quoted string fails with
``JSONException: illegal fieldName``.

One 5.x push consumer takes 8 messages and commits its offsets; a 5.x DefaultMQAdminExt then
calls examineTopicStats, examineConsumeStats and resetOffsetByTimestamp (forced, to time 0),
and the consumer, told by the broker (RESET_CONSUMER_CLIENT_OFFSET), takes the 8 messages again.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client import Message, Producer
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from tests.helpers.interop import InteropCluster, create_topic, wait_members
from tests.helpers.java_driver import JAVA5_DIR, MAIN5, JavaDriver, build_jar

TOPIC, GROUP, N = "Java5WireT", "Java5WireG", 8


@pytest.fixture(scope="module")
def java5_classpath() -> str:
    if shutil.which("java") is None:
        pytest.fail("java is not installed: .ci/run installs a JDK and Maven for tests/interop")
    return build_jar(java_dir=JAVA5_DIR)


@pytest.fixture
def java5(java5_classpath: str, interop_cluster: InteropCluster, tmp_path: Path) -> Iterator[list[JavaDriver]]:
    started: list[JavaDriver] = []
    yield started
    for d in started:
        if d.proc.poll() is None:
            try:
                d.stop(15)
            except AssertionError:
                pass  # killed by stop()
        d.kill()


def committed(cluster: InteropCluster) -> list[int]:
    """The group's committed offset of each queue on the broker (QUERY_CONSUMER_OFFSET; -1: none)."""

    async def ask() -> list[int]:
        c = RemotingClient()
        try:
            out = []
            for q in range(4):
                fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": q}
                r = await c.invoke(cluster.br, RemotingCommand(code=14, ext_fields=fields))
                out.append(int(r.ext_fields.get("offset", -1)) if r.code == 0 else -1)
            return out
        finally:
            await c.close()

    return asyncio.run(asyncio.wait_for(ask(), 30))


def wait_committed(cluster: InteropCluster, want: list[int], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while (got := committed(cluster)) != want:
        assert time.monotonic() < deadline, f"committed offsets {got}, waited for {want}"
        time.sleep(0.5)


def test_a_5x_admin_and_consumer_read_the_mq_keyed_bodies(
    java5: list[JavaDriver], java5_classpath: str, interop_cluster: InteropCluster, tmp_path: Path
) -> None:
    create_topic(interop_cluster, TOPIC)
    with Producer("Java5WireP", interop_cluster.ns) as producer:
        for i in range(N):  # round robin: two per queue
            producer.send(Message(TOPIC, f"m-{i}".encode()))

    def driver(subcommand: str, name: str, **args: object) -> JavaDriver:
        d = JavaDriver(java5_classpath, tmp_path / "java5", subcommand, {"namesrv": interop_cluster.ns, **args}, name,
                       main=MAIN5)  # fmt: skip
        java5.append(d)
        return d

    consumer = driver("push", "push5", topic=TOPIC, group=GROUP)
    consumer.wait_event("started", 60)
    wait_members(interop_cluster, GROUP, 1)
    consumer.wait_event("received", 60, count=N)
    wait_committed(interop_cluster, [2, 2, 2, 2])

    admin = driver("admin", "admin5", topic=TOPIC, group=GROUP, resetTo=0)
    events = admin.wait(90)
    assert [e for e in events if e["event"] == "error"] == [], events
    by_event = {e["event"]: e for e in events}
    assert by_event["topicStats"]["maxOffsets"] == {str(q): 2 for q in range(4)}
    assert by_event["consumeStats"]["consumerOffsets"] == {str(q): 2 for q in range(4)}
    assert by_event["reset"]["offsets"] == {str(q): 0 for q in range(4)}

    # the broker told the consumer: it takes every message again, from offset 0
    consumer.wait_event("received", 60, count=2 * N)
    again = consumer.received()[N:]
    assert sorted(e["body"] for e in again) == sorted(f"m-{i}" for i in range(N))
    wait_committed(interop_cluster, [2, 2, 2, 2])  # committed again after the second pass, not before
