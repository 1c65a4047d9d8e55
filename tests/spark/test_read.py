"""spark.read.format("pumice") over a store directory: CommitLog and ConsumeQueue reads."""

from __future__ import annotations

import fcntl
import os
import zlib

import pytest

from pumice.spark.store_files import list_segments
from tests.helpers.spark import BuiltStore
from tests.spark.expected import decoded_rows, rows_by_offset, torn_copy, ts


def read(spark, path, **options):
    reader = spark.read.format("pumice")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


def test_golden_records_decode_to_the_documented_values(spark, golden_store) -> None:
    df = read(spark, golden_store)
    rows = sorted((r.asDict() for r in df.collect()), key=lambda r: r["sysFlag"])
    assert len(rows) == 2  # the blank end-of-file record ends the segment
    props = {"KEYS": "k-1 k-2", "TAGS": "TagA", "UNIQ_KEY": "7F00000100002A9F0000000000000001"}
    common = {
        "topic": "TopicTest",
        "brokerName": "broker-g",
        "queueId": 3,
        "queueOffset": 7,
        "commitLogOffset": 1234,
        "msgId": "7F00000100002A9F0000000000000001",  # UNIQ_KEY, as RocketMQ shows a MsgId
        "offsetMsgId": "7F00000100002A9F00000000000004D2",  # the store host and CommitLog offset
        "keys": "k-1 k-2",
        "tags": "TagA",
        "body": b"hello",
        "properties": props,
        "bornTimestamp": ts(1700000000000),
        "storeTimestamp": ts(1700000000123),
        "storeHost": "127.0.0.1:10911",
        "reconsumeTimes": 0,
    }
    assert rows[0] == {**common, "bornHost": "192.168.0.10:54321", "sysFlag": 0}
    assert rows[1] == {**common, "bornHost": "[::1]:54321", "sysFlag": 0x10}


def _listing(root: str) -> dict[str, tuple[int, int]]:
    return {os.path.join(d, f): (os.stat(os.path.join(d, f)).st_size, os.stat(os.path.join(d, f)).st_mtime_ns)
            for d, _, files in os.walk(root) for f in files}  # fmt: skip


def test_commit_log_read_equals_the_store_decoder(spark, api_store: BuiltStore) -> None:
    before = _listing(api_store.root)
    fd = os.open(os.path.join(api_store.root, "lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a running broker holds it: the read takes no lock
    try:
        df = read(spark, api_store.root)
        segments = list_segments(os.path.join(api_store.root, "commitlog"))
        assert len(segments) >= 3 and df.rdd.getNumPartitions() == len(segments)
        got = rows_by_offset(df)
    finally:
        os.close(fd)
    assert got == decoded_rows(api_store.root, "broker-a")
    assert len(got) == len(api_store.puts)
    assert _listing(api_store.root) == before  # nothing written, created or touched


def test_commit_log_read_equals_what_was_put(spark, api_store: BuiltStore) -> None:
    got = rows_by_offset(read(spark, api_store.root, brokerName="b-1"))
    for p in api_store.puts:
        row = got[p.commit_log_offset]
        assert row["brokerName"] == "b-1"
        assert (row["topic"], row["queueId"], row["offsetMsgId"]) == (p.topic, p.queue_id, p.msg_id)
        assert row["msgId"] == p.properties.get("UNIQ_KEY", p.msg_id)  # the offset msgId when it has none
        assert row["body"] == p.body  # compressed ones come out inflated
        assert row["properties"] == {**row["properties"], **p.properties}
        assert row["sysFlag"] & 0x3D == p.sys_flag & 0x3D
        if p.sys_flag & 0xC in (0, 8):  # PREPARED and ROLLBACK records take no queue offset
            assert row["queueOffset"] == p.queue_offset
    assert sum(1 for r in got.values() if r["sysFlag"] & 1) == 30
    assert sum(1 for r in got.values() if r["msgId"] != r["offsetMsgId"]) == 240  # TopicA's have a UNIQ_KEY
    assert all(r["msgId"] for r in got.values())
    assert {r["bornHost"] for r in got.values() if r["topic"] == "TopicV6"} == {"[::1]:54321", "127.0.0.1:10911"}


@pytest.mark.parametrize("damage", ["truncated", "zeroed"])
def test_torn_tail_stops_before_the_torn_record(spark, api_store: BuiltStore, tmp_path, damage: str) -> None:
    copy = tmp_path / "store"
    last, pos = torn_copy(api_store.root, str(copy), damage)
    got = rows_by_offset(read(spark, copy))
    assert len(got) == len(api_store.puts) - 1
    assert max(got) < int(os.path.basename(last)) + pos


def test_topic_read_goes_through_the_consume_queues(spark, api_store: BuiltStore) -> None:
    df = read(spark, api_store.root, topic="TopicA")
    cq_files = sum(len(os.listdir(os.path.join(api_store.root, "consumequeue", "TopicA", str(q)))) for q in range(4))
    assert cq_files > 4 and df.rdd.getNumPartitions() == cq_files
    got = rows_by_offset(df)
    expected = {p.commit_log_offset: p for p in api_store.puts if p.topic == "TopicA"}
    assert set(got) == set(expected)
    reference = decoded_rows(api_store.root, "broker-a")
    for off, row in got.items():
        assert row == reference[off]
        assert row["queueOffset"] == expected[off].queue_offset
    two = rows_by_offset(read(spark, api_store.root, topics="TopicB, TopicC"))
    assert sorted({r["topic"] for r in two.values()}) == ["TopicB", "TopicC"] and len(two) == 60
    assert all(r["body"] == zlib.decompress(zlib.compress(r["body"])) for r in two.values())
    # PREPARED and ROLLBACK records are in the CommitLog but in no ConsumeQueue
    assert [r["sysFlag"] for r in rows_by_offset(read(spark, api_store.root, topic="TopicT")).values()] == [8]


def test_starting_and_ending_offsets(spark, api_store: BuiltStore) -> None:
    start = '{"TopicA": {"broker-a": {"0": 10, "1": -1}, "broker-b": {"2": 60}}}'
    end = '{"TopicA": {"broker-a": {"0": 20}}}'
    got = rows_by_offset(read(spark, api_store.root, topic="TopicA", startingOffsets=start, endingOffsets=end))
    by_queue: dict[int, list[int]] = {}
    for r in got.values():
        by_queue.setdefault(r["queueId"], []).append(r["queueOffset"])
    per_queue = {q: sum(1 for p in api_store.puts if p.topic == "TopicA" and p.queue_id == q) for q in range(4)}
    assert sorted(by_queue[0]) == list(range(10, 20))
    assert 1 not in by_queue  # starting at latest: nothing
    assert sorted(by_queue[2]) == list(range(per_queue[2]))  # another broker's offsets do not apply
    assert sorted(by_queue[3]) == list(range(per_queue[3]))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs option path"),
        ({"path": "/nonexistent/store"}, "is not a directory"),
        ({"topic": "TopicA", "startingOffsets": "{bad"}, "startingOffsets"),
        ({"startingOffsets": "earliest"}, "give topic or topics"),
    ],
)
def test_bad_options_are_reported(spark, api_store: BuiltStore, options: dict, message: str) -> None:
    reader = spark.read.format("pumice")
    options = {"path": api_store.root, **options} if "path" not in options and options else options
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=message):
        reader.load().collect()


def test_an_empty_store_reads_nothing(spark, tmp_path) -> None:
    (tmp_path / "commitlog").mkdir()
    assert read(spark, tmp_path).count() == 0
    assert read(spark, tmp_path, topic="Nothing").count() == 0
