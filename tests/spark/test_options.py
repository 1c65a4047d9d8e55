"""The pumice source's options, parsed without Spark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pumice.spark.options import (
    BROKER_READ_KEYS,
    EARLIEST,
    LATEST,
    STREAM_READ_KEYS,
    BrokerReadOptions,
    OptionError,
    ReadOptions,
    StreamReadOptions,
    WriteOptions,
    default_broker_name,
)


def test_broker_name_defaults_to_the_directory_name(tmp_path) -> None:
    assert default_broker_name("/data/broker-b") == "broker-b"
    assert default_broker_name("/data/broker-b/") == "broker-b"
    assert default_broker_name("/root/store") == "broker-a"  # RocketMQ's default storePathRootDir names no broker
    assert ReadOptions.parse({"path": str(tmp_path), "brokerName": "x"}).broker_name == "x"


def test_offsets(tmp_path) -> None:
    o = ReadOptions.parse(
        {
            "path": str(tmp_path),
            "brokerName": "b",
            "topics": "T1, T2,T1",
            "startingOffsets": '{"T1": {"b": {"0": 5, "1": -1}, "other": {"0": 9}}}',
            "endingOffsets": "latest",
        }
    )
    assert o.topics == ("T1", "T2") and o.ending_default == LATEST
    assert o.queue_range("T1", 0, 100) == (5, 100)
    assert o.queue_range("T1", 1, 100) == (100, 100)
    assert o.queue_range("T1", 2, 100) == (0, 100)  # not named: earliest
    assert o.queue_range("T2", 0, 7) == (0, 7)
    assert o.queue_range("T1", 0, 3) == (3, 3)  # an offset past the end reads nothing
    e = ReadOptions.parse({"path": str(tmp_path), "topic": "T", "endingOffsets": "earliest"})
    assert e.ending_default == EARLIEST and e.queue_range("T", 0, 10) == (0, 0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "T", "startingOffsets": "[1]"}, "must be an object"),
        ({"topic": "T", "startingOffsets": '{"T": {"b": {"x": 1}}}'}, "queue id"),
        ({"topic": "T", "startingOffsets": '{"T": {"b": {"0": -3}}}'}, "offset ≥ -2"),
        ({"endingOffsets": "latest"}, "give topic or topics"),
        ({"batchSize": "0"}, "batchSize"),
        ({"checkCRC": "maybe"}, "checkCRC"),
    ],
)
def test_bad_options(tmp_path, options: dict, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        ReadOptions.parse({"path": str(tmp_path), **options})


@pytest.mark.parametrize(
    ("parse", "options", "what"),
    [
        (ReadOptions.parse, {"topic": "T", "startingOffset": "earliest"}, "a store directory read"),
        (BrokerReadOptions.parse, {"namesrv": "h:1", "topic": "T", "maxRecordPerPartition": "5"}, "a batch read"),
        (StreamReadOptions.parse, {"namesrv": "h:1", "topic": "T", "maxOffsetPerTrigger": "5"}, "a streaming read"),
        (WriteOptions.parse, {"namesrv": "h:1", "topic": "T", "kafka.acks": "all"}, "a write to brokers"),
    ],
)
def test_unknown_option_refused_by_name(tmp_path, parse, options: dict, what: str) -> None:
    given = {"path": str(tmp_path), **options} if parse is ReadOptions.parse else options
    misspelt = next(k for k in options if k not in ("topic", "namesrv"))
    with pytest.raises(OptionError, match=f"unknown option '{misspelt}' for {what}") as e:
        parse(given)
    assert "topic" in str(e.value).split("known options are:")[1]  # the known ones are listed


def test_known_options_pass_whatever_their_case(tmp_path) -> None:
    assert StreamReadOptions.parse({"namesrv": "h:1", "topic": "T", "maxoffsetspertrigger": "5"}).read.namesrv == "h:1"
    assert WriteOptions.parse({"namesrv": "h:1", "checkpointLocation": "/c"}).namesrv == "h:1"  # Spark's own


def test_max_trigger_delay_and_by_timestamp_options() -> None:
    from pumice.spark.options import parse_duration_ms

    assert [parse_duration_ms(v, "d", 0) for v in ("500ms", "30s", "15m", "1h", "1d", "250")] == [
        500, 30_000, 900_000, 3_600_000, 86_400_000, 250,
    ]  # fmt: skip
    with pytest.raises(OptionError, match="maxTriggerDelay"):
        StreamReadOptions.parse({"namesrv": "h:1", "topic": "T", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "5x"})
    with pytest.raises(OptionError, match="above maxOffsetsPerTrigger"):
        StreamReadOptions.parse(
            {"namesrv": "h:1", "topic": "T", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}
        )
    base = {"namesrv": "h:1", "topic": "T", "startingOffsetsByTimestamp": '{"T": {"b": {"0": 5}}}'}
    assert BrokerReadOptions.parse(base).starting_by_timestamp == {"T": {"b": {0: 5}}}
    with pytest.raises(OptionError, match="not both"):
        BrokerReadOptions.parse({**base, "startingOffsets": "earliest"})
    with pytest.raises(OptionError, match="error or latest"):
        BrokerReadOptions.parse({**base, "startingOffsetsByTimestampStrategy": "earliest"})
    with pytest.raises(OptionError, match="does not apply to a streaming read"):
        StreamReadOptions.parse({"namesrv": "h:1", "topic": "T", "endingOffsetsByTimestamp": '{"T": {}}'})


def test_max_records_per_partition_splits_before_min_partitions() -> None:
    from pumice.spark.broker_reader import BrokerPartition, split

    parts = [BrokerPartition("T", "b", 0, 10, 19), BrokerPartition("T", "b", 1, 0, 2)]
    capped = split(parts, None, 4)
    assert [(p.queue_id, p.start, p.end) for p in capped] == [(0, 10, 13), (0, 13, 16), (0, 16, 19), (1, 0, 2)]
    assert len(split(parts, 6, 4)) >= 6


def test_readme_lists_every_read_option_with_its_kafka_counterpart() -> None:
    """The README's Spark option table has a row for each option of a read or a stream from brokers."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("| option | reads | Kafka source's | meaning |", 1)[1].split("\n\n", 1)[0]
    listed = {name for line in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    assert listed == set(BROKER_READ_KEYS) | set(STREAM_READ_KEYS)
