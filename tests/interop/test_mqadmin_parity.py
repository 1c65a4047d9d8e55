"""`pumice admin` against mqadmin 4.9.8's own output (issue 31, points 8 to 11).

Each test runs the same command through mqadmin (rocketmq-tools 4.9.8, ``tests.helpers.mqadmin``)
and through ``python3 -m pumice.cli admin`` as a real process with its stdout piped (as a script
reads it), against one ``pumice namesrv`` + ``pumice broker`` for the module, and compares what a
script would parse: the lines, split on whitespace, with the test's group or topic names swapped.

The module's topic has 16 messages: batch A (2 per queue), a pause, ``ts_split``, batch B (2 per
queue). resetOffsetByTime to ``ts_split`` with a consumer online (a Pumice push consumer and the
official Java one) must make it consume batch B again, through the broker's
INVOKE_BROKER_TO_RESET_OFFSET and the consumer's RESET_CONSUMER_CLIENT_OFFSET, with no ``-f``.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from pumice.client import ConsumeStatus, Message, MessageQueue, Producer, PushConsumer
from pumice.client.pull_consumer import ConsumeFromWhere
from tests.helpers.interop import InteropCluster, wait_members
from tests.helpers.java_driver import JavaDriver
from tests.helpers.mqadmin import MQAdmin, Out, mqadmin_classpath
from tests.helpers.waiting import eventually
from tests.interop.test_mqadmin import committed, rpc
from tests.unit.test_admin_mqadmin_options import MQADMIN_4_9_8

CLUSTER = "TestCluster"
BROKER = "broker-t"
TOPIC = "ParTopic"
PY_GROUP = "ParPyConsumer"
JAVA_GROUP = "ParJavaConsumer"
PUMICE_CALL_TIMEOUT_S = 60


@dataclass
class Env:
    cluster: InteropCluster
    mq: MQAdmin
    ts_split: int = 0
    batch_a: list[str] = field(default_factory=list)
    batch_b: list[str] = field(default_factory=list)
    offset_ids: list[str] = field(default_factory=list)
    received: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    consumer: PushConsumer | None = None

    @property
    def ns(self) -> str:
        return self.cluster.ns

    @property
    def br(self) -> str:
        return self.cluster.br

    def count(self, body: str) -> int:
        with self.lock:
            return self.received[body]

    def pumice(self, command: str, *args: str) -> Out:
        """``pumice admin <command> -n <ns> <args>`` as a process, stdout piped."""
        argv = [sys.executable, "-m", "pumice.cli", "admin", command, "-n", self.ns, *args]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=PUMICE_CALL_TIMEOUT_S,
                           env=os.environ | {"COLUMNS": "300"})  # fmt: skip
        return Out([command, *args], p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="module")
def env(interop_cluster: InteropCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = Env(interop_cluster, MQAdmin(mqadmin_classpath(), interop_cluster.ns, tmp_path_factory.mktemp("mqa")))
    e.pumice("updateTopic", "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4").ok()
    eventually(lambda: rpc(e.ns, 105, topic=TOPIC).code == 0, 20, f"{TOPIC}'s route")
    with Producer("ParProducer", e.ns) as producer:

        def send(batch: str, i: int) -> str:
            body = f"par-{batch}-{i}"
            r = producer.send(Message(TOPIC, body.encode(), tags="TagA", keys=body), MessageQueue(TOPIC, BROKER, i % 4))
            assert r.send_status.name == "SEND_OK", r
            e.offset_ids.append(r.offset_msg_id)
            return body

        e.batch_a = [send("a", i) for i in range(8)]
        time.sleep(1.5)
        e.ts_split = int(time.time() * 1000)
        time.sleep(0.01)
        e.batch_b = [send("b", i) for i in range(8)]

    def handler(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        with e.lock:
            for m in msgs:
                e.received[bytes(m.body).decode()] += 1
        return ConsumeStatus.SUCCESS

    c = PushConsumer(PY_GROUP, e.ns, consume_from_where=ConsumeFromWhere.FIRST, persist_consumer_offset_interval_s=1.0)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(handler)
    c.start()
    e.consumer = c
    try:
        eventually(lambda: all(committed(e, PY_GROUP, TOPIC, q) == 4 for q in range(4)), 30, "offsets at 4")  # type: ignore[arg-type]
        assert all(e.count(b) == 1 for b in e.batch_a + e.batch_b)
        yield e
    finally:
        c.shutdown()


def both(e: Env, command: str, mq_args: list[str], py_args: list[str]) -> tuple[Out, Out]:
    """mqadmin's and `pumice admin`'s run of a command, side by side (a JVM takes seconds); each exit 0."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        mq = pool.submit(e.mq, command, *mq_args)
        py = pool.submit(e.pumice, command, *py_args)
        return mq.result().ok(), py.result().ok()


def swapped(out: Out, *pairs: tuple[str, str]) -> list[list[str]]:
    """The stdout's non-blank lines split on whitespace, each ``old`` name made ``new``."""
    text = out.stdout
    for old, new in pairs:
        text = text.replace(old, new)
    return [line.split() for line in text.splitlines() if line.strip()]


# ---- point 9 and 11: updateSubGroup, updateTopic ----


def sub_group(e: Env, group: str) -> dict[str, Any]:
    r = rpc(e.br, 201)
    return orjson.loads(r.body)["subscriptionGroupTable"][group]


def test_update_sub_group_as_mqadmin(env: Env) -> None:
    """mqadmin 4.9.8 creates a group with consumeFromMinEnable and consumeBroadcastEnable false
    and prints SubscriptionGroupConfig's toString."""
    mq, py = both(env, "updateSubGroup", ["-b", env.br, "-g", "ParSubMq"], ["-b", env.br, "-g", "ParSubPy"])
    assert swapped(py, ("ParSubPy", "G")) == swapped(mq, ("ParSubMq", "G")), (mq.describe(), py.describe())
    mine, theirs = sub_group(env, "ParSubPy"), sub_group(env, "ParSubMq")
    assert mine | {"groupName": "G"} == theirs | {"groupName": "G"}
    assert mine["consumeFromMinEnable"] is False and mine["consumeBroadcastEnable"] is False
    more = ["-c", CLUSTER, "-m", "true", "-r", "3", "-g"]
    mq, py = both(env, "updateSubGroup", [*more, "ParSubMq"], [*more, "ParSubPy"])
    assert swapped(py, ("ParSubPy", "G")) == swapped(mq, ("ParSubMq", "G")), (mq.describe(), py.describe())


def topic_config(e: Env, topic: str) -> dict[str, Any]:
    return orjson.loads(rpc(e.br, 21).body)["topicConfigTable"][topic]


def test_update_topic_as_mqadmin(env: Env) -> None:
    """updateTopic prints TopicConfig's toString; -u and -s set the unit flags of topicSysFlag."""
    for args in (["-b", env.br, "-r", "2", "-w", "2", "-u", "true", "-s", "true"], ["-c", CLUSTER, "-p", "4"]):
        mq, py = both(env, "updateTopic", ["-t", "ParTopicMq", *args], ["-t", "ParTopicPy", *args])
        assert swapped(py, ("ParTopicPy", "T")) == swapped(mq, ("ParTopicMq", "T")), (mq.describe(), py.describe())
        mine, theirs = topic_config(env, "ParTopicPy"), topic_config(env, "ParTopicMq")
        assert mine | {"topicName": "T"} == theirs | {"topicName": "T"}, (mine, theirs)
    assert "topicSysFlag=3" in env.pumice("updateTopic", "-t", "ParTopicPy", "-b", env.br, "-u", "true", "-s",
                                          "true").stdout  # fmt: skip


# ---- point 11: tables piped, queryMsgById, timestamps ----


def test_topic_status_piped_as_mqadmin(env: Env) -> None:
    """Piped, a table is mqadmin's columns: no rule line; #Last Updated keeps its milliseconds."""
    mq, py = both(env, "topicStatus", ["-t", TOPIC], ["-t", TOPIC])
    assert swapped(py) == swapped(mq), (mq.describe(), py.describe())
    # broker, queue, min, max, date, time with milliseconds
    assert all(len(row) == 6 and re.fullmatch(r"\d\d:\d\d:\d\d,\d{3}", row[5]) for row in swapped(py)[1:]), (
        py.describe()
    )


def test_query_msg_by_offset_id_as_mqadmin(env: Env) -> None:
    offset_id = env.offset_ids[0]
    mq_out, py = both(env, "queryMsgById", ["-i", offset_id], ["-i", offset_id])
    mq, mine = mq_out.table(":"), py.table(":")
    labels = ("OffsetID", "Topic", "Tags", "Keys", "Queue ID", "Queue Offset", "CommitLog Offset", "Reconsume Times",
              "Born Timestamp", "Store Timestamp", "Born Host", "Store Host", "System Flag")  # fmt: skip
    for label in labels:
        assert mine.get(label) == mq.get(label), (label, mine, mq)
    assert mine["Broker Name"] == BROKER, py.describe()


# ---- point 8: resetOffsetByTime with consumers online ----


def reset_rows(out: Out) -> tuple[list[str], list[list[str]]]:
    lines = swapped(out)
    return lines[0], sorted(lines[1:])


def test_reset_offset_online_python_consumer(env: Env) -> None:
    """No -f (true by default, as mqadmin), then -f true: each time the broker resets, the
    Pumice push consumer consumes batch B again and commits the offsets back at the end of
    each queue (not its old ones, which would leave batch B unconsumed)."""
    for force in ([], ["-f", "true"]):
        before = {b: env.count(b) for b in env.batch_b}
        py = env.pumice("resetOffsetByTime", "-g", PY_GROUP, "-t", TOPIC, "-s", str(env.ts_split), *force).ok()
        head, rows = reset_rows(py)
        expected = (f"rollback consumer offset by specified group[{PY_GROUP}], topic[{TOPIC}], force[true], "
                    f"timestamp(string)[{env.ts_split}], timestamp(long)[{env.ts_split}]")  # fmt: skip
        assert " ".join(head) == expected, py.describe()
        assert rows == sorted([["#brokerName", "#queueId", "#offset"]] + [[BROKER, str(q), "2"] for q in range(4)])
        eventually(lambda seen=before: all(env.count(b) > seen[b] for b in env.batch_b), 30, "batch B consumed again")
        assert all(env.count(a) == 1 for a in env.batch_a), "batch A is not consumed again"
        eventually(lambda: all(committed(env, PY_GROUP, TOPIC, q) == 4 for q in range(4)), 20, "offsets back at 4")  # type: ignore[arg-type]


def test_reset_offset_online_java_consumer(env: Env, java: Callable[..., JavaDriver]) -> None:
    """The official Java push consumer, reset by `pumice admin` and then by mqadmin: both print
    the same table and the consumer consumes batch B again each time."""
    d = java("push", topic=TOPIC, group=JAVA_GROUP, persist_ms=500, name="par-java")
    wait_members(env.cluster, JAVA_GROUP, 1)
    d.wait_for(lambda j: len(j.received()) >= 16, 40, "16 messages")

    def got(body: str) -> int:
        return sum(1 for ev in d.received() if ev["bodyText"] == body)

    outs = []
    for tool in (env.pumice, env.mq):
        eventually(lambda: all(committed(env, JAVA_GROUP, TOPIC, q) == 4 for q in range(4)), 20, "offsets at 4")  # type: ignore[arg-type]
        before: dict[str, int] = {b: got(b) for b in env.batch_b}
        out = tool("resetOffsetByTime", "-g", JAVA_GROUP, "-t", TOPIC, "-s", str(env.ts_split)).ok()
        outs.append(reset_rows(out))
        d.wait_for(lambda j, seen=before: all(got(b) > seen[b] for b in env.batch_b), 30, "batch B consumed again")
        assert all(got(a) == 1 for a in env.batch_a), "batch A is not consumed again"
    assert outs[0] == outs[1]


def test_reset_offset_offline_as_mqadmin(env: Env) -> None:
    """No consumer online: CONSUMER_NOT_ONLINE, then mqadmin's own offsets and its 6-column table."""
    for group in ("ParOffMq", "ParOffPy"):
        for q in range(4):
            assert rpc(env.br, 15, consumerGroup=group, topic=TOPIC, queueId=q, commitOffset=4).code == 0
    at = ["-t", TOPIC, "-s", str(env.ts_split), "-g"]
    mq, py = both(env, "resetOffsetByTime", [*at, "ParOffMq"], [*at, "ParOffPy"])
    assert sorted(swapped(py, ("ParOffPy", "G"))) == sorted(swapped(mq, ("ParOffMq", "G"))), (
        mq.describe(), py.describe())  # fmt: skip
    assert all(committed(env, "ParOffPy", TOPIC, q) == 2 for q in range(4))  # type: ignore[arg-type]


# ---- point 10: mqadmin's options, from the jar ----


def test_option_table_is_mqadmin_4_9_8s(env: Env) -> None:
    """tests/unit/test_admin_mqadmin_options.py's table is what rocketmq-tools 4.9.8 declares."""
    src = Path(__file__).with_name("MqadminOptions.java")
    p = subprocess.run(["java", "-cp", mqadmin_classpath(), str(src)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [line.split("\t") for line in p.stdout.splitlines()]
    assert [(c, s, lo, h == "true") for c, s, lo, h, *_ in rows] == MQADMIN_4_9_8
