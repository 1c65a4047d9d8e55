"""A stream from ``latest`` whose driver is SIGKILLed before its first micro-batch (issue 36, point 3).

Spark hands a Python stream reader nothing that names the query's checkpoint, so the pumice
source keeps its resolved initial offsets only where option ``initialOffsetsPath`` points.
The kill test's driver is its own process (``tests.helpers.spark_stream_driver``), killed with its
JVM (its process group) while it waits in its first ``latestOffset``: after ``initialOffset``,
before Spark writes the first batch's offsets.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client import AsyncMQAdmin
from pumice.spark.broker_stream import BrokerStreamReader
from pumice.spark.initial_offsets import FILE_NAME
from pumice.spark.options import BrokerReadOptions, OptionError, StreamReadOptions
from tests.helpers.clusters import Cluster
from tests.helpers.spark import BROKER, as_bodies, create_topic, produce, run, short_jvm_env
from tests.helpers.waiting import ROUTE_NOT_YET, eventually

REPO = Path(__file__).resolve().parents[2]
START_S = 90  # a driver's start (JVM, Python workers) on a busy 2-core machine


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("initial-offsets-broker"))
    try:
        yield c
    finally:
        c.close()


def driver(c: Cluster, topic: str, checkpoint: Path, *extra: str) -> subprocess.Popen[str]:
    env = short_jvm_env(
        {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
    )
    args = [sys.executable, "-m", "tests.helpers.spark_stream_driver", "--namesrv", c.ns, "--topic", topic,
            "--checkpoint", str(checkpoint), *extra]  # fmt: skip
    # its own process group: the JVM it starts dies with it
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def kill_when_paused(proc: subprocess.Popen[str], marker: Path, c: Cluster, topic: str) -> tuple[dict, str]:
    """Wait for the driver's pause, send 3 + 2 messages, SIGKILL it; (what was sent, its stderr)."""
    deadline = time.monotonic() + START_S
    try:
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), f"the driver never reached its first batch (exit {proc.poll()})"
        sent = produce(c, topic, {0: 3, 1: 2}, "meanwhile")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    return sent, err


def wait_dispatched(c: Cluster, topic: str, ends: dict[int, int]) -> None:
    """Until the queues' max offsets (what ``latest`` resolves to) are ``ends``: the ConsumeQueue
    is written a moment after the send is answered."""

    async def now() -> dict[int, int]:
        async with AsyncMQAdmin(c.ns) as admin:
            return {q.mq.queue_id: q.max_offset for q in await admin.topic_status(topic)}

    eventually(lambda: asyncio.run(now()) == ends, what=f"{topic}'s queues at {ends}", retry_on=ROUTE_NOT_YET)


def test_latest_kept_across_a_kill_before_the_first_batch(spark, broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "TopicK1", 2)
    produce(broker, "TopicK1", {0: 4, 1: 4}, "before")  # before the query: not read (it starts at latest)
    wait_dispatched(broker, "TopicK1", {0: 4, 1: 4})
    checkpoint = tmp_path / "ckpt"
    kept = str(checkpoint / "pumice-initial-offsets")
    marker = tmp_path / "paused"
    first = driver(broker, "TopicK1", checkpoint, "--option", f"initialOffsetsPath={kept}", "--pause-first-batch",
                   str(marker))  # fmt: skip
    sent, err = kill_when_paused(first, marker, broker, "TopicK1")
    assert (checkpoint / "pumice-initial-offsets" / FILE_NAME).is_file(), err
    assert not list((checkpoint / "offsets").glob("[0-9]*")), "killed after Spark logged a batch"
    assert "initialOffsetsPath" not in err  # no warning: the option is given
    # the query again from its checkpoint (this process's Spark session: the killed driver's is gone)
    got = as_bodies(run(spark, broker, "TopicK1", checkpoint, initialOffsetsPath=kept))
    assert sorted(got) == sorted(sent.items())  # none skipped, none of the old ones


def reader(c: Cluster, topic: str, **options: str) -> BrokerStreamReader:
    return BrokerStreamReader(StreamReadOptions.parse({"namesrv": c.ns, "topic": topic, **options}))


def test_latest_without_the_option_warns_once_and_answers_one_start(
    broker: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(broker, "TopicK2", 2)
    produce(broker, "TopicK2", {0: 2}, "old")
    wait_dispatched(broker, "TopicK2", {0: 2, 1: 0})
    r = reader(broker, "TopicK2")
    with caplog.at_level(logging.WARNING, logger="pumice.spark.broker_stream"):
        first = r.initialOffset()
        produce(broker, "TopicK2", {0: 1, 1: 1}, "new")
        wait_dispatched(broker, "TopicK2", {0: 3, 1: 1})
        # Spark asks again when it runs the first batch it planned: the same start, or "new" is skipped
        assert r.initialOffset() == first == {"TopicK2": {BROKER: {"0": 2, "1": 0}}}
    warnings = [rec.getMessage() for rec in caplog.records if "initialOffsetsPath" in rec.getMessage()]
    assert len(warnings) == 1 and "latest" in warnings[0] and "checkpoint" in warnings[0]
    caplog.clear()
    for stable in ({"startingOffsets": "earliest"}, {"initialOffsetsPath": str(tmp_path / "kept")}):
        with caplog.at_level(logging.WARNING, logger="pumice.spark.broker_stream"):
            reader(broker, "TopicK2", **stable).initialOffset()
        assert not caplog.records, stable


def test_initial_offsets_path_refuses_what_is_not_its_own(broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "TopicK3", 1)
    kept = tmp_path / "kept"
    assert reader(broker, "TopicK3", initialOffsetsPath=str(kept)).initialOffset() == {"TopicK3": {BROKER: {"0": 0}}}
    produce(broker, "TopicK3", {0: 3}, "m")
    # a restart reads the file: still 0, not latest (3)
    assert reader(broker, "TopicK3", initialOffsetsPath=str(kept)).initialOffset() == {"TopicK3": {BROKER: {"0": 0}}}
    with pytest.raises(OptionError, match=r"reading topics TopicK3, not topics TopicK2"):
        reader(broker, "TopicK2", initialOffsetsPath=str(kept)).initialOffset()
    (kept / FILE_NAME).write_text('{"version": 1, "offsets": {"TopicK3": {"b": {"0": -1}}}}')
    with pytest.raises(OptionError, match="is not an initial offsets file"):
        reader(broker, "TopicK3", initialOffsetsPath=str(kept)).initialOffset()
    with pytest.raises(OptionError, match="absolute path"):
        StreamReadOptions.parse({"namesrv": broker.ns, "topic": "T", "initialOffsetsPath": "ckpt/kept"})
    with pytest.raises(OptionError, match="not a directory"):
        StreamReadOptions.parse({"namesrv": broker.ns, "topic": "T", "initialOffsetsPath": str(kept / FILE_NAME)})
    with pytest.raises(OptionError, match="unknown option 'initialOffsetsPath'"):
        BrokerReadOptions.parse({"namesrv": broker.ns, "topic": "T", "initialOffsetsPath": str(kept)})
