"""The RocketMQ 5.5.0 remoting push consumer in POP mode against `pumice broker` (issue 34, POP):
``mqadmin setConsumeMode -m POP``'s request (SET_MESSAGE_REQUEST_MODE) through DefaultMQAdminExt,
then a push consumer with clientRebalance off, which asks the broker for its queues
(QUERY_ASSIGNMENT: every queue as −1 in POP mode) and pops, acks, and changes the invisible time
of the message it fails (RECONSUME_LATER: 10 s, the client's first POP delay level), which then
comes back through the revive service with reconsumeTimes 1. Exactly N messages, each once,
and the failed one once more.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client import Message, Producer
from tests.helpers.interop import InteropCluster, create_topic
from tests.helpers.java_driver import JAVA5_DIR, JavaDriver, build_jar

TOPIC, GROUP, N = "Pop5T", "Pop5G", 10
BODIES = [f"m-{i}" for i in range(N - 1)] + ["fail-0"]
BROKER_CONF = "reviveInterval=200\n"
MAIN_POP5 = "pumice.interop5.Pop5"


@pytest.fixture(scope="module")
def java5_classpath() -> str:
    if shutil.which("java") is None:
        pytest.fail("java is not installed: .ci/run installs a JDK and Maven for tests/interop")
    return build_jar(java_dir=JAVA5_DIR)


@pytest.fixture
def pop5(java5_classpath: str, interop_cluster: InteropCluster, tmp_path: Path) -> Iterator[JavaDriver]:
    """The topic with its messages, then the driver (it sets the mode first: the topic must exist)."""
    create_topic(interop_cluster, TOPIC)
    with Producer("Pop5P", interop_cluster.ns) as producer:
        for b in BODIES:
            producer.send(Message(TOPIC, b.encode()))
    d = JavaDriver(java5_classpath, tmp_path / "java5", "push",
                   {"namesrv": interop_cluster.ns, "broker": interop_cluster.br, "topic": TOPIC, "group": GROUP,
                    "fail": "fail-"}, "pop5", main=MAIN_POP5)  # fmt: skip
    try:
        yield d
    finally:
        if d.proc.poll() is None:
            try:
                d.stop(15)
            except AssertionError:
                pass  # killed by stop()
        d.kill()


def test_a_5x_push_consumer_in_pop_mode_consumes_n_exactly_and_gets_a_failed_one_again(pop5: JavaDriver) -> None:
    pop5.wait_event("modeSet", 60)
    pop5.wait_event("started", 60)
    t0 = time.monotonic()
    pop5.wait_event("received", 60, count=N + 1)
    waited = time.monotonic() - t0
    got = [e for e in pop5.events if e["event"] == "received"]
    assert all(e["popped"] for e in got), got  # every one popped (a POP_CK handle), none pulled
    first = sorted(e["body"] for e in got if e["reconsumeTimes"] == 0)
    assert first == sorted(BODIES)
    again = [e for e in got if e["reconsumeTimes"] > 0]
    assert [(e["body"], e["reconsumeTimes"], e["topic"]) for e in again] == [("fail-0", 1, TOPIC)]
    assert waited >= 9, waited  # the client's 10 s (popDelayLevel[0]) before it came back
    time.sleep(3)  # nothing more: every other message acked, the failed one acked the second time
    assert len([e for e in pop5.events if e["event"] == "received"]) == N + 1
