"""The pumice source against running brokers: batch reads (``namesrv``) and batch writes.

One `pumice namesrv` + `pumice broker` pair (tests/helpers/clusters.py's Cluster) serves the module;
each test uses its own topics. What a broker read returns is checked against what the
producer sent and, column for column, against a store read of the broker's own store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pumice.client import Message, MessageQueue, Producer
from pumice.client.mq_client_api import MQClientAPIImpl
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.spark.broker_reader import BrokerPartition, DataLossError, read_range, resolve_start, split
from pumice.spark.options import EARLIEST, LATEST, BrokerReadOptions, OptionError
from tests.helpers.clusters import Cluster, RetentionCluster
from tests.helpers.spark import BROKER, create_topic, read


class SmallQueueCluster(Cluster):
    """ConsumeQueue files of 10 entries, so a queue spans several files."""

    def start_broker(self):
        conf = self.tmp / "broker.conf"
        if "mapedFileSizeConsumeQueue" not in conf.read_text():
            with conf.open("a") as f:
                f.write("mapedFileSizeConsumeQueue=200\n")
        return super().start_broker()


@dataclass
class Sent:
    topic: str
    queue_id: int
    queue_offset: int
    offset_msg_id: str
    uniq_key: str
    body: bytes
    tags: str | None
    keys: str | None
    user_properties: dict[str, str]


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[Cluster]:
    c = SmallQueueCluster(tmp_path_factory.mktemp("broker"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def produced(broker: Cluster) -> list[Sent]:
    """TopicR (2 queues): plain messages with tags and keys, a compressed >4 KiB body, one batch."""
    create_topic(broker, "TopicR", 2)
    out: list[Sent] = []
    with Producer("PG_spark_test", broker.ns) as p:
        for i in range(12):
            msg = Message(
                "TopicR",
                f"body-{i}".encode() + bytes([i, 0, 255]),
                tags="TagA" if i % 2 == 0 else "TagB",
                keys=[f"k{i}", "shared"],
                properties={"n": str(i)},
            )
            r = p.send(msg, MessageQueue("TopicR", BROKER, i % 2))
            out.append(Sent("TopicR", i % 2, r.queue_offset, r.offset_msg_id, r.msg_id, msg.body, msg.tags,
                            f"k{i} shared", {"n": str(i)}))  # fmt: skip
        big = (b"compress me " * 600)[:7000]
        r = p.send(Message("TopicR", big, tags="Big"), MessageQueue("TopicR", BROKER, 0))
        out.append(Sent("TopicR", 0, r.queue_offset, r.offset_msg_id, r.msg_id, big, "Big", None, {}))
        batch = [Message("TopicR", f"batch-{j}".encode(), keys=f"b{j}") for j in range(5)]
        r = p.send_batch(batch, MessageQueue("TopicR", BROKER, 1))
        for j, (off_id, uniq) in enumerate(zip(r.offset_msg_id.split(","), r.msg_id.split(","), strict=True)):
            out.append(Sent("TopicR", 1, r.queue_offset + j, off_id, uniq, batch[j].body, None, f"b{j}", {}))
    return out


def by_position(rows) -> dict[tuple[int, int], object]:
    return {(r["queueId"], r["queueOffset"]): r for r in rows}


def test_read_equals_what_was_produced(spark, broker: Cluster, produced: list[Sent]) -> None:
    df = read(spark, broker, topic="TopicR")
    rows = by_position(df.collect())
    assert len(rows) == len(produced)
    for s in produced:
        r = rows[(s.queue_id, s.queue_offset)]
        assert (r["topic"], r["brokerName"], r["msgId"]) == ("TopicR", BROKER, s.uniq_key)
        assert r["offsetMsgId"] == s.offset_msg_id and r["msgId"] != r["offsetMsgId"]
        assert bytes(r["body"]) == s.body
        assert (r["tags"], r["keys"]) == (s.tags, s.keys)
        assert r["properties"]["UNIQ_KEY"] == s.uniq_key
        for k, v in s.user_properties.items():
            assert r["properties"][k] == v
    big = next(r for r in rows.values() if r["tags"] == "Big")
    assert big["sysFlag"] & 1  # stored compressed, read inflated
    # every column as the broker's own store holds it
    store = (
        spark.read.format("pumice")
        .option("path", str(broker.tmp / "store"))
        .option("brokerName", BROKER)
        .option("topic", "TopicR")
        .load()
    )
    assert sorted(df.collect(), key=lambda r: r["commitLogOffset"]) == sorted(
        store.collect(), key=lambda r: r["commitLogOffset"]
    )


def test_offsets_and_partitions(spark, broker: Cluster, produced: list[Sent]) -> None:
    start = json.dumps({"TopicR": {BROKER: {"0": 3, "1": 10}, "other-broker": {"0": 0}}})
    end = json.dumps({"TopicR": {BROKER: {"0": 5}}})
    rows = read(spark, broker, topic="TopicR", startingOffsets=start, endingOffsets=end).collect()
    assert sorted((r["queueId"], r["queueOffset"]) for r in rows) == [(0, 3), (0, 4), (1, 10)]
    assert read(spark, broker, topics="TopicR", startingOffsets="latest").count() == 0
    assert read(spark, broker, topic="TopicR", endingOffsets="earliest").count() == 0
    df = read(spark, broker, topic="TopicR", minPartitions="5")
    assert df.rdd.getNumPartitions() >= 5
    assert sorted((r["queueId"], r["queueOffset"]) for r in df.collect()) == sorted(
        (s.queue_id, s.queue_offset) for s in produced
    )
    assert read(spark, broker, topic="TopicR").rdd.getNumPartitions() == 2


def test_timestamps(spark, broker: Cluster, produced: list[Sent]) -> None:
    rows = read(spark, broker, topic="TopicR").collect()
    times = sorted({int(r["storeTimestamp"].timestamp() * 1000) for r in rows})
    lo, hi = times[len(times) // 3], times[2 * len(times) // 3]
    got = read(spark, broker, topic="TopicR", startingTimestamp=str(lo), endingTimestamp=str(hi)).collect()
    want = [r for r in rows if lo <= int(r["storeTimestamp"].timestamp() * 1000) < hi]
    assert want and sorted(got, key=lambda r: r["commitLogOffset"]) == sorted(want, key=lambda r: r["commitLogOffset"])


def test_sub_expression_and_include_properties(spark, broker: Cluster, produced: list[Sent]) -> None:
    rows = read(spark, broker, topic="TopicR", subExpression="TagA || Big").collect()
    assert sorted(r["tags"] for r in rows) == ["Big"] + ["TagA"] * 6
    # sqlFilter: RocketMQ's SQL92 on each row's properties (also with includeProperties=false)
    rows = read(spark, broker, topic="TopicR", sqlFilter="TAGS = 'TagA' AND KEYS IS NOT NULL").collect()
    want = sorted(s.keys for s in produced if s.tags == "TagA" and s.keys is not None)
    assert want and sorted(r["keys"] for r in rows) == want
    rows = read(spark, broker, topic="TopicR", sqlFilter="TAGS = 'Big'", includeProperties="false").collect()
    assert [r["tags"] for r in rows] == ["Big"] and rows[0]["properties"] is None
    df = read(spark, broker, topic="TopicR", includeProperties="false")
    assert df.schema["properties"].nullable
    rows = df.collect()
    assert len(rows) == len(produced) and all(r["properties"] is None for r in rows)
    assert {r["keys"] for r in rows} >= {"k0 shared", "b4"}
    assert sorted(r["msgId"] for r in rows) == sorted(s.uniq_key for s in produced)  # UNIQ_KEY still there


def test_bad_read_options(spark, broker: Cluster, produced: list[Sent]) -> None:
    with pytest.raises(Exception, match="no route"):
        read(spark, broker, topic="NoSuchTopic").collect()
    with pytest.raises(OptionError, match="exactly one of the options topic, topics and topicPattern"):
        BrokerReadOptions.parse({"namesrv": broker.ns})
    with pytest.raises(OptionError, match="option sqlFilter: Invalid syntax: a >"):
        BrokerReadOptions.parse({"namesrv": broker.ns, "topic": "T", "sqlFilter": "a >"})
    with pytest.raises(OptionError, match="not both"):
        BrokerReadOptions.parse({"namesrv": broker.ns, "topic": "T", "startingOffsets": "latest",
                                 "startingTimestamp": "1"})  # fmt: skip


def min_offset(c: Cluster, topic: str, queue_id: int) -> int:
    async def ask() -> int:
        api = MQClientAPIImpl()
        try:
            return await api.get_min_offset(c.br, topic, queue_id)
        finally:
            await api.close()

    return asyncio.run(ask())


def trigger_delete_files(c: Cluster) -> int:
    """DELETE_EXPIRED_COMMITLOG, as mqadmin deleteExpiredCommitLog sends it: the response code."""

    async def ask() -> int:
        client = RemotingClient()
        try:
            return (await client.invoke(c.br, RemotingCommand(code=RequestCode.DELETE_EXPIRED_COMMITLOG), 5)).code
        finally:
            await client.close()

    return asyncio.run(ask())


def test_fail_on_data_loss_after_retention(spark, tmp_path: Path, caplog) -> None:
    """The broker's own retention deletes the oldest CommitLog and ConsumeQueue files; a read that starts
    below the queue's new min offset fails naming the queue and offsets, or skips to it."""
    c = RetentionCluster(tmp_path)
    try:
        create_topic(c, "TopicLoss", 1)
        with Producer("PG_spark_loss", c.ns) as p:
            for i in range(60):
                p.send(Message("TopicLoss", f"m{i}-".encode() * 40), MessageQueue("TopicLoss", BROKER, 0))
        commit_log = tmp_path / "store" / "commitlog"
        files = sorted(commit_log.iterdir())
        assert len(files) >= 4 and min_offset(c, "TopicLoss", 0) == 0  # nothing expires by the hour
        assert trigger_delete_files(c) == ResponseCode.SUCCESS
        deadline = time.monotonic() + 20
        while (low := min_offset(c, "TopicLoss", 0)) == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert 2 < low < 60 and not files[0].exists()  # CommitLog files gone, then ConsumeQueue files
        start = json.dumps({"TopicLoss": {BROKER: {"0": 2}}})
        with pytest.raises(Exception, match=rf"data loss: topic TopicLoss, broker broker-t, queue 0: starting offset 2 "
                                            rf"is below the queue's min offset {low}"):  # fmt: skip
            read(spark, c, topic="TopicLoss", startingOffsets=start).collect()
        rows = read(spark, c, topic="TopicLoss", startingOffsets=start, failOnDataLoss="false").collect()
        assert sorted(r["queueOffset"] for r in rows) == list(range(low, 60))
        assert sorted(bytes(r["body"]) for r in rows) == sorted(f"m{i}-".encode() * 40 for i in range(low, 60))
        # a range planned before the deletion: the task's pull finds its start below the min offset
        part = BrokerPartition("TopicLoss", BROKER, 0, 2, 60, {0: c.br})
        strict = BrokerReadOptions.parse({"namesrv": c.ns, "topic": "TopicLoss"})
        with pytest.raises(DataLossError, match=f"starting offset 2 is below the queue's min offset {low}"):
            list(read_range(part, strict))
        lenient = BrokerReadOptions.parse({"namesrv": c.ns, "topic": "TopicLoss", "failOnDataLoss": "false"})
        with caplog.at_level(logging.WARNING, logger="pumice.spark.broker_reader"):
            batches = list(read_range(part, lenient))
        assert [o for b in batches for o in b.column("queueOffset").to_pylist()] == list(range(low, 60))
        assert f"queue 0: starting offset 2 is below the queue's min offset {low}" in caplog.text
        assert f"going on from {low}" in caplog.text
    finally:
        c.close()


def test_data_loss_decision_and_split() -> None:
    opts = BrokerReadOptions.parse({"namesrv": "x:1", "topic": "T"})
    assert resolve_start(opts, "T", "b", 0, EARLIEST, 4, 9) == 4
    assert resolve_start(opts, "T", "b", 0, LATEST, 4, 9) == 9
    assert resolve_start(opts, "T", "b", 0, 20, 4, 9) == 9
    with pytest.raises(DataLossError, match="queue 0: starting offset 1 is below the queue's min offset 4"):
        resolve_start(opts, "T", "b", 0, 1, 4, 9)
    lenient = BrokerReadOptions.parse({"namesrv": "x:1", "topic": "T", "failOnDataLoss": "false"})
    assert resolve_start(lenient, "T", "b", 0, 1, 4, 9) == 4
    parts = split([BrokerPartition("T", "b", 0, 0, 100), BrokerPartition("T", "b", 1, 0, 2)], 6)
    assert len(parts) >= 6
    assert [(p.start, p.end) for p in parts if p.queue_id == 1] == [(0, 2)]  # each range in proportion to its size
    assert [(p.start, p.end) for p in parts if p.queue_id == 0] == [(0, 16), (16, 33), (33, 50), (50, 66), (66, 83),
                                                                     (83, 100)]  # fmt: skip
    assert split(parts[:1], 1) == parts[:1]


def test_write_round_trip(spark, broker: Cluster) -> None:
    create_topic(broker, "TopicW", 2)
    create_topic(broker, "TopicW2", 1)
    data = [
        (b"w0", None, "TagX", "a b", {"p": "1"}, 0),
        (b"w1", "TopicW2", None, None, None, None),
        (b"w2" * 3000, None, "TagY", "c", {}, 1),
        (b"", None, None, None, None, None),
    ]
    data[3] = (bytes(range(256)), None, "TagX", None, {"q": "x y"}, None)
    df = spark.createDataFrame(
        data, "body binary, topic string, tags string, keys string, properties map<string,string>, queueId int"
    ).repartition(2)
    df.write.format("pumice").option("namesrv", broker.ns).option("topic", "TopicW").mode("append").save()
    got = read(spark, broker, topics="TopicW,TopicW2").collect()
    assert len(got) == 4
    by_body = {bytes(r["body"]): r for r in got}
    assert by_body[b"w0"]["queueId"] == 0 and by_body[b"w0"]["tags"] == "TagX" and by_body[b"w0"]["keys"] == "a b"
    assert by_body[b"w0"]["properties"]["p"] == "1"
    assert by_body[b"w1"]["topic"] == "TopicW2"
    assert by_body[b"w2" * 3000]["queueId"] == 1
    assert by_body[bytes(range(256))]["properties"]["q"] == "x y"
    # array keys and string bodies; a read DataFrame's extra columns are ignored
    df2 = spark.createDataFrame([("s0", ["k1", "k2"])], "body string, keys array<string>")
    df2.write.format("pumice").option("namesrv", broker.ns).option("topic", "TopicW2").mode("append").save()
    with pytest.raises(Exception, match="appends to topics"):
        df2.write.format("pumice").option("namesrv", broker.ns).option("topic", "TopicW2").mode("overwrite").save()
    back = read(spark, broker, topic="TopicW2")
    assert {(bytes(r["body"]), r["keys"]) for r in back.collect()} == {(b"w1", None), (b"s0", "k1 k2")}
    back.select("topic", "body", "tags", "keys").write.format("pumice").option("namesrv", broker.ns).mode(
        "append"
    ).save()
    assert read(spark, broker, topic="TopicW2").count() == 4


@pytest.mark.parametrize(
    ("rows", "schema", "message"),
    [
        ([(b"ok",), (None,)], "body binary", r"partition \d+, row 1, column body: is null"),
        ([(b"ok",), (b"",)], "body binary", r"row 1, column body: is empty"),
        ([(b"ok", {"TAGS": "x"})], "body binary, properties map<string,string>", "column properties: 'TAGS'"),
        ([(b"ok", 5)], "body binary, tags int", "column tags: type int is not supported"),
        ([("x", 1)], "body string, queueId int", "no writable queue 1"),
    ],
)
def test_write_bad_rows(spark, broker: Cluster, rows: list, schema: str, message: str) -> None:
    create_topic(broker, "TopicBad", 1)
    df = spark.createDataFrame(rows, schema).coalesce(1)
    with pytest.raises(Exception, match=message):
        df.write.format("pumice").option("namesrv", broker.ns).option("topic", "TopicBad").mode("append").save()


def test_store_path_not_needed(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="not both"):
        BrokerReadOptions.parse({"namesrv": "x:1", "topic": "T", "path": str(tmp_path)})
