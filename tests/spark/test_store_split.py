"""CommitLog segments split into several read tasks: the planner's cuts (without Spark) and
split reads against unsplit ones (with Spark)."""

from __future__ import annotations

import dataclasses
import itertools
import os

import numpy as np
import pytest

from pumice.spark.options import OptionError, ReadOptions
from pumice.spark.store_files import SegmentFile, list_segments
from pumice.spark.store_reader import CommitLogPartition, plan, read_segment, split_segment
from pumice.store.message_check import check_message_and_return_size
from tests.helpers.spark import BuiltStore
from tests.spark.expected import rows_by_offset, torn_copy


def record_chain(path: str) -> tuple[list[int], int]:
    """The store decoder's valid records of a segment: their positions and where the last ends."""
    data = open(path, "rb").read()
    pos, starts = 0, []
    while True:
        _, size, ok = check_message_and_return_size(data, pos, len(data))
        if not ok or size <= 0:
            return starts, pos
        starts.append(pos)
        pos += size


def offsets_read(opts: ReadOptions, parts: list) -> list[int]:
    return [o for p in parts for b in read_segment(p, opts) for o in b.column("commitLogOffset").to_pylist()]


def check_cuts(parts: list[CommitLogPartition]) -> None:
    """Per segment: ranges that tile its valid records, each cut at a record the decoder finds."""
    by_segment: dict[str, list[CommitLogPartition]] = {}
    for p in parts:
        by_segment.setdefault(p.segment.path, []).append(p)
    for path, ps in by_segment.items():
        starts, _ = record_chain(path)
        assert ps[0].start == 0 and ps[-1].end is None
        for a, b in itertools.pairwise(ps):
            assert a.end == b.start and a.end in starts
        planned = [int(x) for p in ps if p.starts is not None for x in p.starts]
        if any(p.starts is not None for p in ps):
            assert planned == starts  # every record once, in order, none past the last valid one


def test_planner_cuts_segments_at_records(api_store: BuiltStore) -> None:
    whole = ReadOptions.parse({"path": api_store.root})
    segments = list_segments(os.path.join(api_store.root, "commitlog"))
    assert len(plan(whole)) == len(segments)  # 64 KiB files: nothing to split by default
    opts = ReadOptions.parse({"path": api_store.root, "maxPartitionBytes": "10000"})
    parts = plan(opts)
    assert len(parts) > 4 * len(segments)
    check_cuts(parts)
    assert offsets_read(opts, parts) == offsets_read(whole, plan(whole))
    # minPartitions alone: the valid bytes of all segments shared out
    parts = plan(ReadOptions.parse({"path": api_store.root, "minPartitions": str(3 * len(segments))}))
    assert len(parts) >= 3 * len(segments)
    check_cuts(parts)


def test_split_points_without_a_store() -> None:
    seg = SegmentFile("/nowhere/00000000000000000000", 0, 1200)  # split_segment opens no file
    starts = np.array([0, 100, 250, 400, 520, 700, 1000], dtype=np.int64)
    parts = split_segment(seg, starts, 1200, 400)  # 3 shares of 400 bytes: cut at ≥ 400 and ≥ 800
    assert [(p.start, p.end, list(p.starts)) for p in parts] == [
        (0, 400, [0, 100, 250]),
        (400, 1000, [400, 520, 700]),
        (1000, None, [1000]),
    ]
    # one huge record: shares that fall inside it collapse into one cut
    parts = split_segment(seg, np.array([0, 10, 4000], dtype=np.int64), 5000, 1000)
    assert [(p.start, p.end) for p in parts] == [(0, 4000), (4000, None)]
    parts = split_segment(seg, np.zeros(0, dtype=np.int64), 0, 100)  # no valid record at all
    assert [(p.start, p.end, len(p.starts)) for p in parts] == [(0, None, 0)]


@pytest.mark.parametrize("damage", ["magic", "lengths", "zeros"])
def test_split_read_stops_at_a_damaged_record(api_store: BuiltStore, tmp_path, damage: str) -> None:
    """A record in the middle of a segment that is not valid ends the segment's read, split or not."""
    src = list_segments(os.path.join(api_store.root, "commitlog"))[0]
    starts, _ = record_chain(src.path)
    bad = starts[len(starts) // 2]
    data = bytearray(open(src.path, "rb").read())
    if damage == "magic":
        data[bad + 4 : bad + 8] = b"\0\0\0\1"
    elif damage == "lengths":  # TOTALSIZE and magic intact, BODYLENGTH one byte longer
        data[bad + 84 : bad + 88] = (int.from_bytes(data[bad + 84 : bad + 88], "big") + 1).to_bytes(4, "big")
    else:
        data[bad : bad + 4096] = bytes(4096)
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / os.path.basename(src.path)).write_bytes(bytes(data))
    whole = ReadOptions.parse({"path": str(tmp_path)})
    split = ReadOptions.parse({"path": str(tmp_path), "maxPartitionBytes": "4000"})
    parts = plan(split)
    assert len(parts) > 1 and all(p.start < bad for p in parts)
    want = [src.base + s for s in starts if s < bad]
    assert offsets_read(whole, plan(whole)) == want
    assert offsets_read(split, parts) == want


def test_split_options_are_checked(api_store: BuiltStore) -> None:
    for key, value in (("maxPartitionBytes", "0"), ("minPartitions", "x")):
        with pytest.raises(OptionError, match=key):
            ReadOptions.parse({"path": api_store.root, key: value})
    opts = ReadOptions.parse({"path": api_store.root})
    assert (opts.max_partition_bytes, opts.min_partitions) == (128 << 20, None)
    assert dataclasses.replace(opts, min_partitions=2).min_partitions == 2


def read(spark, path, **options):
    reader = spark.read.format("pumice")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


def test_split_read_equals_the_unsplit_read(spark, api_store: BuiltStore) -> None:
    segments = list_segments(os.path.join(api_store.root, "commitlog"))
    whole = read(spark, api_store.root)
    split = read(spark, api_store.root, maxPartitionBytes="8192")
    assert whole.rdd.getNumPartitions() == len(segments)
    assert split.rdd.getNumPartitions() > 4 * len(segments)
    got = split.collect()
    assert len(got) == len(api_store.puts)  # each record once, the blank end-of-file records none
    assert rows_by_offset(split) == rows_by_offset(whole)
    assert read(spark, api_store.root, minPartitions="40").rdd.getNumPartitions() >= 40


@pytest.mark.parametrize("damage", ["truncated", "zeroed"])
def test_split_read_of_a_torn_tail(spark, api_store: BuiltStore, tmp_path, damage: str) -> None:
    copy = tmp_path / "store"
    last, pos = torn_copy(api_store.root, str(copy), damage)
    whole = rows_by_offset(read(spark, copy))
    split_df = read(spark, copy, maxPartitionBytes="4096")
    assert split_df.rdd.getNumPartitions() > 2 * len(list_segments(str(copy / "commitlog")))
    split = rows_by_offset(split_df)
    assert split == whole and len(split) == len(api_store.puts) - 1
    assert max(split) < int(os.path.basename(last)) + pos
