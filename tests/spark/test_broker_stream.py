"""The pumice source streaming from running brokers (``spark.readStream``, ``broker_stream``).

One `pumice namesrv` + `pumice broker` pair serves the module; each test uses its own topic.
Queries write through ``foreachBatch`` into a dict (batch id → rows) and run with
``Trigger.AvailableNow``, so each one ends by itself; every query is stopped in ``finally``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client.mq_client_api import MQClientAPIImpl
from pumice.spark.broker_stream import flatten, nest, offsets_behind, share
from pumice.spark.options import OptionError, StreamReadOptions
from tests.helpers.clusters import Cluster
from tests.helpers.spark import BROKER, QUERY_TIMEOUT_S, as_bodies, create_topic, produce, run


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("stream-broker"))
    try:
        yield c
    finally:
        c.close()


def test_share_is_proportional_and_exact() -> None:
    a, b, c = ("T", "b", 0), ("T", "b", 1), ("T", "b", 2)
    assert share({a: 3, b: 4}, 10) == {a: 3, b: 4}
    got = share({a: 20, b: 5, c: 5}, 10)
    assert sum(got.values()) == 10 and got[a] > got[b] and all(got[k] <= n for k, n in {a: 20, b: 5, c: 5}.items())
    assert sum(share({a: 1, b: 1, c: 1}, 2).values()) == 2  # the remainder still moves on
    assert share({a: 0, b: 7}, 3) == {a: 0, b: 3}
    offsets = {"T": {"b": {"0": 5, "10": 1, "2": 7}}}
    assert nest(flatten(offsets)) == {"T": {"b": {"0": 5, "2": 7, "10": 1}}}


def test_stream_options() -> None:
    opts = StreamReadOptions.parse({"namesrv": "h:1", "topic": "T", "maxOffsetsPerTrigger": "7"})
    assert opts.read.starting_default == -1 and opts.max_offsets_per_trigger == 7 and opts.commit_group is None
    opts = StreamReadOptions.parse({"namesrv": "h:1", "topic": "T", "startingTimestamp": "5"})
    assert opts.read.starting_timestamp == 5
    with pytest.raises(OptionError, match="endingOffsets"):
        StreamReadOptions.parse({"namesrv": "h:1", "topic": "T", "endingOffsets": "latest"})


def test_restart_reads_each_message_once_and_finds_new_queues(spark, broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "TopicS1", 2)
    first = produce(broker, "TopicS1", {0: 6, 1: 4}, "first")
    checkpoint = tmp_path / "ckpt"
    group = "GID_stream_lag"
    got1 = as_bodies(run(spark, broker, "TopicS1", checkpoint, startingOffsets="earliest", commitOffsetsToGroup=group))
    assert sorted(got1) == sorted(first.items())
    # more messages, and a third queue, while the query is down
    create_topic(broker, "TopicS1", 3)
    second = produce(broker, "TopicS1", {0: 2, 1: 3, 2: 5}, "second")
    got2 = as_bodies(run(spark, broker, "TopicS1", checkpoint, startingOffsets="earliest", commitOffsetsToGroup=group))
    assert sorted(got2) == sorted(second.items())  # none of the first run again, queue 2 found
    assert len(got1) + len(got2) == len({m for m, _ in got1 + got2}) == 20

    async def committed() -> list[int]:
        api = MQClientAPIImpl(timeout_s=5)
        try:
            return [await api.query_consumer_offset(broker.br, group, "TopicS1", q) for q in range(3)]
        finally:
            await api.close()

    assert asyncio.run(committed()) == [8, 7, 5]


def test_starts_at_latest_by_default(spark, broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "TopicS2", 2)
    produce(broker, "TopicS2", {0: 3, 1: 3}, "old")
    checkpoint = tmp_path / "ckpt"
    assert run(spark, broker, "TopicS2", checkpoint) == []
    new = produce(broker, "TopicS2", {0: 2, 1: 1}, "new")
    assert sorted(as_bodies(run(spark, broker, "TopicS2", checkpoint))) == sorted(new.items())


def test_max_offsets_per_trigger(spark, broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "TopicS3", 3)
    sent = produce(broker, "TopicS3", {0: 20, 1: 5, 2: 5}, "m")
    progress: list = []
    batches = run(spark, broker, "TopicS3", tmp_path / "ckpt", progress, startingOffsets="earliest",
                  maxOffsetsPerTrigger="10")  # fmt: skip
    assert [len(b) for b in batches] == [10, 10, 10]
    # the lag after each batch, as Kafka's avg/max/minOffsetsBehindLatest: 20, 10, then 0 behind in all
    lags = [offsets_behind(p["sources"][0]) for p in progress if p["numInputRows"]]
    assert [sum(flatten(lag["offsetsBehindLatest"]).values()) for lag in lags] == [20, 10, 0]
    assert lags[0]["avgOffsetsBehindLatest"] == pytest.approx(20 / 3)
    assert lags[0]["maxOffsetsBehindLatest"] > lags[0]["minOffsetsBehindLatest"] >= 0
    assert lags[-1]["maxOffsetsBehindLatest"] == 0
    first_queues = [r["queueId"] for r in batches[0]]
    assert first_queues.count(0) > first_queues.count(1)  # shared by backlog
    assert sorted(as_bodies(batches)) == sorted(sent.items())


def test_processing_time_trigger_reads_while_running(spark, broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "TopicS4", 2)
    batches: dict[int, list] = {}

    def sink(df, batch_id: int) -> None:
        batches[batch_id] = df.collect()

    query = (
        spark.readStream.format("pumice")
        .option("namesrv", broker.ns)
        .option("topic", "TopicS4")
        .option("maxOffsetsPerTrigger", "4")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        while not batches and time.monotonic() < deadline:  # the first (empty) batch: the query is at latest
            assert query.exception() is None
            time.sleep(0.2)
        sent = produce(broker, "TopicS4", {0: 5, 1: 5}, "live")
        got: list = []
        while len(got) < len(sent) and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.2)
            got = as_bodies([batches[k] for k in sorted(batches)])
    finally:
        query.stop()
    assert sorted(got) == sorted(sent.items())
    assert max(len(rows) for rows in batches.values()) <= 4


def test_stream_needs_namesrv(spark, tmp_path: Path) -> None:
    df = spark.readStream.format("pumice").option("path", str(tmp_path)).load()
    with pytest.raises(Exception, match="namesrv"):
        query = (
            df.writeStream.foreachBatch(lambda df, i: None).option("checkpointLocation", str(tmp_path / "c")).start()
        )
        try:
            query.awaitTermination(QUERY_TIMEOUT_S)
        finally:
            query.stop()


def test_topic_pattern_in_batch_and_stream_reads(spark, broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "PatA", 1)
    create_topic(broker, "PatB", 1)
    create_topic(broker, "OtherPat", 1)
    a = produce(broker, "PatA", {0: 3}, "a")
    b = produce(broker, "PatB", {0: 2}, "b")
    produce(broker, "OtherPat", {0: 2}, "o")
    rows = spark.read.format("pumice").option("namesrv", broker.ns).option("topicPattern", "Pat.*").load().collect()
    assert sorted((r["msgId"], bytes(r["body"])) for r in rows) == sorted({**a, **b}.items())
    # a streaming query re-evaluates the pattern: a matching topic created while it is down is read too
    checkpoint = tmp_path / "ckpt"
    got1 = as_bodies(run(spark, broker, "", checkpoint, topicPattern="Pat.*", startingOffsets="earliest"))
    assert sorted(got1) == sorted({**a, **b}.items())
    create_topic(broker, "PatC", 1)
    c = produce(broker, "PatC", {0: 4}, "c")
    got2 = as_bodies(run(spark, broker, "", checkpoint, topicPattern="Pat.*", startingOffsets="earliest"))
    assert sorted(got2) == sorted(c.items())


def test_topic_pattern_options() -> None:
    for bad, why in (
        ({"namesrv": "h:1", "topic": "T", "topicPattern": "T.*"}, "exactly one"),
        ({"namesrv": "h:1"}, "exactly one"),
        ({"namesrv": "h:1", "topicPattern": "("}, "not a regular expression"),
    ):
        with pytest.raises(OptionError, match=why):
            StreamReadOptions.parse(bad)


def test_unknown_option_refused_by_read_stream_and_write(spark, broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "TopicS5", 1)
    stream = (
        spark.readStream.format("pumice").option("namesrv", broker.ns).option("topic", "TopicS5")
        .option("startingOffsetsByTimestmp", '{"TopicS5": {}}').load()
    )  # fmt: skip
    with pytest.raises(Exception, match="unknown option 'startingoffsetsbytimestmp'"):
        query = stream.writeStream.foreachBatch(lambda df, i: None).option("checkpointLocation", str(tmp_path)).start()
        try:
            query.awaitTermination(QUERY_TIMEOUT_S)
        finally:
            query.stop()
    read = spark.read.format("pumice").option("namesrv", broker.ns).option("topic", "TopicS5")
    with pytest.raises(Exception, match=r"unknown option 'minpartiton'.*did you mean minPartitions"):
        read.option("minPartiton", "10").load().collect()
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match=r"unknown option 'kafka\.acks'"):
        df.write.format("pumice").mode("append").option("namesrv", broker.ns).option("topic", "TopicS5") \
            .option("kafka.acks", "all").save()  # fmt: skip


def _now_ms_between_sends() -> int:
    """A time strictly between the store times of what was sent before and after it."""
    time.sleep(0.05)
    ms = int(time.time() * 1000)
    time.sleep(0.05)
    return ms


def test_offsets_by_timestamp_and_max_records_per_partition(spark, broker: Cluster) -> None:
    create_topic(broker, "TopicS6", 2)
    produce(broker, "TopicS6", {0: 3, 1: 2}, "before")
    t1 = _now_ms_between_sends()
    middle = produce(broker, "TopicS6", {0: 4}, "middle")
    t2 = _now_ms_between_sends()
    after = produce(broker, "TopicS6", {0: 2}, "after")

    def read(**options: str):
        reader = spark.read.format("pumice").option("namesrv", broker.ns).option("topic", "TopicS6")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    def at(ms: int) -> str:
        return json.dumps({"TopicS6": {BROKER: {"0": ms, "1": ms}}})

    # queue 1 has nothing at or after t1: Kafka's default strategy fails, naming the queue
    with pytest.raises(Exception, match="queue 1 has no message stored at or after"):
        read(startingOffsetsByTimestamp=at(t1)).collect()
    rows = read(startingOffsetsByTimestamp=at(t1), startingOffsetsByTimestampStrategy="latest",
                endingOffsetsByTimestamp=at(t2)).collect()  # fmt: skip
    assert sorted((r["msgId"], bytes(r["body"])) for r in rows) == sorted(middle.items())
    rows = read(startingOffsetsByTimestamp=at(t2), startingOffsetsByTimestampStrategy="latest").collect()
    assert sorted((r["msgId"], bytes(r["body"])) for r in rows) == sorted(after.items())
    # queue 0 holds 9 offsets: at most 4 a task makes 3 tasks, queue 1's 2 offsets one more
    capped = read(startingOffsets="earliest", maxRecordsPerPartition="4")
    assert capped.rdd.getNumPartitions() == 4 and capped.count() == 11
    with pytest.raises(Exception, match="name every queue"):
        read(startingOffsetsByTimestamp=json.dumps({"TopicS6": {BROKER: {"0": t1}}})).collect()


def test_min_offsets_per_trigger_holds_a_small_batch_until_max_trigger_delay(
    spark, broker: Cluster, tmp_path: Path
) -> None:
    create_topic(broker, "TopicS7", 1)
    produce(broker, "TopicS7", {0: 3}, "first")
    batches: dict[int, list] = {}

    def sink(df, batch_id: int) -> None:
        batches[batch_id] = df.collect()

    def rows() -> int:
        return sum(len(b) for b in list(batches.values()))

    def wait_rows(n: int, deadline: float) -> None:
        while rows() < n and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.2)
        assert rows() == n

    query = (
        spark.readStream.format("pumice").option("namesrv", broker.ns).option("topic", "TopicS7")
        .option("startingOffsets", "earliest").option("minOffsetsPerTrigger", "5").option("maxTriggerDelay", "10s")
        .load().writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds").start()
    )  # fmt: skip
    try:
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        wait_rows(3, deadline)  # the first batch is never held, as Kafka's
        # the delay counts from the last batch's planning, and a fresh driver's batch 0 can take
        # longer than any delay a test would wait for: a batch of the minimum's size first
        produce(broker, "TopicS7", {0: 5}, "enough")
        wait_rows(8, deadline)
        produce(broker, "TopicS7", {0: 2}, "small")
        time.sleep(2.5)
        assert rows() == 8  # 2 < minOffsetsPerTrigger: held
        wait_rows(10, deadline)  # until maxTriggerDelay has passed
    finally:
        query.stop()
    assert [len(b) for b in batches.values() if b] == [3, 5, 2]
