"""Reading a store directory: the plan (input partitions) and what each task does.

Two plans, chosen by the options (``pumice.spark.options``):

===================  ===========================  =============================================
read                 one input partition per      a task
===================  ===========================  =============================================
all messages         CommitLog segment file, or   maps the segment read-only and reads its
                     byte range of one (below)    range record by record (TOTALSIZE), until
                                                  the range's end, the blank end-of-file record
                                                  or the first record that is not valid (torn,
                                                  cut, zeros): there it stops, without an error
topic / topics       ConsumeQueue file of each    maps the ConsumeQueue file, takes its entries
                     queue of those topics        in the planned range up to the first invalid
                                                  one, and looks each record up in the
                                                  CommitLog by offset; an entry whose record is
                                                  gone (deleted segment) or does not match it
                                                  (size, PHYSICALOFFSET, length fields) is
                                                  skipped; queueOffset is the entry's index
===================  ===========================  =============================================

Each segment is read on its own, up to its own last valid record, so one damaged segment does
not hide the next.

A segment that may hold more than ``maxPartitionBytes`` (or fewer segments than
``minPartitions``) is split, so that one 1 GiB segment is not one task. Record boundaries are
known only by walking the TOTALSIZE chain from the segment's first byte, so the planner walks
it (on the driver, ``segment_record_starts``: a Python loop of ``struct.unpack_from`` over the
read-only map, then the tasks' own vectorised checks, ``layout``, in batches) and cuts at
records:

=================================  ===========================================================
partition                          holds
=================================  ===========================================================
``start``                          the first byte of its first record (0 for the first range)
``end``                            the first byte of the next range's first record; ``None``
                                   for a segment's last range: it reads on to the last valid
                                   record, as an unsplit read does (a live segment may have
                                   grown since planning)
``starts``                         the planner's record positions from ``start`` (int32), so
                                   the task does not walk them again
=================================  ===========================================================

The ranges cut the valid records ``[0, last valid record's end)`` into ``ceil(valid bytes /
chunk)`` parts of about equal bytes, each starting at the first record at or after its share;
every record before the last cut passed the same checks a task applies, so each valid record
is read exactly once and the split read stops where the unsplit one does.

Records come out in CommitLog order within a partition, as Arrow batches of
``batchSize`` records (``pumice.spark.record_columns`` builds them).
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from pyspark.sql.datasource import DataSourceReader, InputPartition

from pumice.common.message_decoder import Buffer
from pumice.spark.options import ReadOptions
from pumice.spark.record_columns import MIN_RECORD_SIZE, layout, to_record_batch
from pumice.spark.schema import arrow_schema
from pumice.spark.store_files import (
    MappedSegment,
    SegmentFile,
    consume_queue_entries,
    list_queues,
    list_segments,
    list_topics,
    valid_entry_count,
)
from pumice.store.consume_queue import CQ_STORE_UNIT_SIZE, FILLER_SIZE

log = logging.getLogger(__name__)

_TOTALSIZE = struct.Struct(">i").unpack_from
MAX_BATCH_BYTES = 16 << 20  # a batch also ends once its records reach this size (large messages)
_CHECK_BATCH = 8192  # records per vectorised check in the planner's walk


@dataclass
class CommitLogPartition(InputPartition):
    """Records of one CommitLog segment from ``start``, up to ``end`` or the last valid record."""

    segment: SegmentFile
    start: int = 0
    end: int | None = None
    starts: np.ndarray | None = None  # record positions in the segment from start (int32 below 2 GiB)


@dataclass
class ConsumeQueuePartition(InputPartition):
    """Entries [start, end) (queue offsets) of one ConsumeQueue file."""

    topic: str
    queue_id: int
    file: SegmentFile
    start: int
    end: int
    segments: list[SegmentFile]  # the CommitLog as planned


def plan(opts: ReadOptions) -> list[InputPartition]:
    segments = list_segments(opts.commit_log_path)
    if not opts.topics:
        return list(plan_commit_log([s for s in segments if s.length >= MIN_RECORD_SIZE], opts))
    out: list[InputPartition] = []
    known = set(list_topics(opts.consume_queue_path))
    for topic in opts.topics:
        if topic not in known:
            log.info("topic %s has no ConsumeQueue in %s", topic, opts.path)
            continue
        for qid in list_queues(opts.consume_queue_path, topic):
            files = list_segments(os.path.join(opts.consume_queue_path, topic, str(qid)))
            if not files:
                continue
            last = files[-1]
            queue_end = last.base // CQ_STORE_UNIT_SIZE + valid_entry_count(last.path)
            start, end = opts.queue_range(topic, qid, queue_end)
            for f in files:
                first = f.base // CQ_STORE_UNIT_SIZE
                lo, hi = max(start, first), min(end, first + f.length // CQ_STORE_UNIT_SIZE)
                if lo < hi:
                    out.append(ConsumeQueuePartition(topic, qid, f, lo, hi, segments))
    return out


def plan_commit_log(segments: list[SegmentFile], opts: ReadOptions) -> list[CommitLogPartition]:
    """One partition per segment, or per range of a segment too large for one task."""
    chunk = opts.max_partition_bytes
    walked: dict[str, tuple[np.ndarray, int]] = {}
    if opts.min_partitions and opts.min_partitions > len(segments):
        for seg in segments:
            walked[seg.path] = segment_record_starts(seg, opts.check_crc)
        valid_bytes = sum(end for _, end in walked.values())
        chunk = min(chunk, max(1, -(-valid_bytes // opts.min_partitions)))
    out: list[CommitLogPartition] = []
    for seg in segments:
        if seg.path not in walked and seg.length <= chunk:
            out.append(CommitLogPartition(seg))  # the whole file fits one task: no walk needed
            continue
        starts, end = walked.get(seg.path) or segment_record_starts(seg, opts.check_crc)
        out += split_segment(seg, starts, end, chunk)
    return out


def segment_record_starts(segment: SegmentFile, check_crc: bool = False) -> tuple[np.ndarray, int]:
    """(positions of the segment's valid records, the end of the last one), as a task reads them."""
    with MappedSegment(segment.path) as m:
        nb, mm, limit = m.data, m.mm, len(m.data)
        if mm is None:
            return np.zeros(0, dtype=np.int64), 0
        chain = array("q")
        append, unpack = chain.append, _TOTALSIZE
        pos = 0
        while limit - pos >= MIN_RECORD_SIZE:
            total = unpack(mm, pos)[0]
            if total < MIN_RECORD_SIZE or total > limit - pos:
                break
            append(pos)
            pos += total
        starts = np.frombuffer(chain, dtype=np.int64)
        # the task's own checks, so that a range never ends past a record a task would stop at
        for lo in range(0, len(starts), _CHECK_BATCH):
            lay = layout(nb, starts[lo : lo + _CHECK_BATCH], check_crc)
            bad = np.flatnonzero(~lay.valid)
            if len(bad):
                starts = starts[: lo + int(bad[0])]
                break
        end = int(starts[-1]) + int(_TOTALSIZE(mm, int(starts[-1]))[0]) if len(starts) else 0
        del nb
    return starts.copy(), end


def split_segment(segment: SegmentFile, starts: np.ndarray, end: int, chunk: int) -> list[CommitLogPartition]:
    """Cut a segment's valid records (``starts``, ending at ``end``) into ranges of about ``chunk`` bytes."""
    parts = max(1, -(-end // chunk))
    targets = np.arange(1, parts, dtype=np.int64) * end // parts
    cuts = np.unique(np.searchsorted(starts, targets))  # the first record at or after each share
    bounds = [0, *(int(c) for c in cuts if 0 < c < len(starts)), len(starts)]
    out = []
    for k in range(len(bounds) - 1):
        lo, hi = bounds[k], bounds[k + 1]
        last = k == len(bounds) - 2
        out.append(
            CommitLogPartition(
                segment,
                int(starts[lo]) if lo < len(starts) else 0,
                None if last else int(starts[hi]),
                starts[lo:hi].astype(np.int32 if segment.length < 1 << 31 else np.int64),  # half the pickle
            )
        )
    return out


def walk(mm: Buffer, pos: int, limit: int, max_records: int) -> tuple[list[int], bool]:
    """Record starts from ``pos`` by TOTALSIZE alone: (starts, whether the walk hit the end).

    It stops after ``max_records`` records or ``MAX_BATCH_BYTES``. Only bounds are checked
    here; ``layout`` checks each record's fields afterwards, and a blank end-of-file record
    (whose TOTALSIZE is the rest of the file) fails its magic there.
    """
    starts: list[int] = []
    append = starts.append
    stop = min(limit, pos + MAX_BATCH_BYTES)
    for _ in range(max_records):
        if pos >= stop:
            return starts, pos >= limit
        if limit - pos < MIN_RECORD_SIZE:
            return starts, True
        total = _TOTALSIZE(mm, pos)[0]
        if total < MIN_RECORD_SIZE or total > limit - pos:
            return starts, True
        append(pos)
        pos += total
    return starts, False


class StoreDirectoryReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return plan(self.opts)

    def read(self, partition: InputPartition) -> Iterator:
        if isinstance(partition, CommitLogPartition):
            return read_segment(partition, self.opts)
        if isinstance(partition, ConsumeQueuePartition):
            return read_consume_queue(partition, self.opts)
        return iter(())  # a plan with no partition: Spark still runs one task, with a placeholder


def read_segment(p: CommitLogPartition, opts: ReadOptions) -> Iterator:
    """Batches of the valid records of one CommitLog segment's range."""
    schema = arrow_schema()
    with MappedSegment(p.segment.path) as m:
        nb, mm = m.data, m.mm
        limit = len(nb) if p.end is None else min(len(nb), p.end)
        pos, rows, stopped = p.start, 0, mm is None
        planned = np.zeros(0, dtype=np.int64) if p.starts is None else p.starts.astype(np.int64)
        lo = 0
        while not stopped:
            if lo < len(planned):  # the planner's records: no walk, only the checks
                hi = min(len(planned), lo + opts.batch_size)
                hi = max(lo + 1, min(hi, int(np.searchsorted(planned, planned[lo] + MAX_BATCH_BYTES))))
                batch, lo = planned[lo:hi], hi
            elif p.starts is None or p.end is None:  # walk on to the range's end or the last valid record
                assert mm is not None  # stopped at once without a map
                walked, stopped = walk(mm, pos, limit, opts.batch_size)
                if not walked:
                    break
                batch = np.array(walked, dtype=np.int64)
            else:
                break
            lay = layout(nb, batch, opts.check_crc)
            bad = np.flatnonzero(~lay.valid)
            if len(bad):
                lay, stopped = lay.take(slice(0, int(bad[0]))), True
            if len(lay.starts):
                yield to_record_batch(nb, lay, broker_name=opts.broker_name, schema=schema)
                rows += len(lay.starts)
                pos = int(lay.starts[-1] + lay.total[-1])
        log.debug("segment %s [%d, %s): %d records, valid data ends at %d", p.segment.path, p.start, p.end, rows, pos)
        del nb


def _batches(sizes: np.ndarray, max_records: int, first: int) -> Iterator[tuple[int, int]]:
    """[lo, hi) runs of at most ``max_records`` records and about ``MAX_BATCH_BYTES``."""
    ends = np.cumsum(sizes)
    lo = 0
    while lo < len(sizes):
        by_bytes = int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + MAX_BATCH_BYTES, side="right"))
        hi = min(len(sizes), lo + max_records, max(by_bytes, lo + 1))
        yield first + lo, first + hi
        lo = hi


def read_consume_queue(p: ConsumeQueuePartition, opts: ReadOptions) -> Iterator:
    """Batches of the records a ConsumeQueue file's entries [start, end) point to."""
    schema = arrow_schema()
    first = p.file.base // CQ_STORE_UNIT_SIZE
    with MappedSegment(p.file.path) as cq:
        entries = consume_queue_entries(cq.data)[p.start - first : p.end - first]
        queue_offsets = np.arange(p.start, p.start + len(entries), dtype=np.int64)
        real = entries["size"] != FILLER_SIZE
        offsets = entries["offset"][real].astype(np.int64)
        sizes = entries["size"][real].astype(np.int64)
        queue_offsets = queue_offsets[real]
        del entries
    # a queue's records follow each other in the CommitLog; an entry that goes back or overlaps
    # the one before is damage, and the columnar decoder needs records in order
    ordered = sizes >= MIN_RECORD_SIZE
    ordered[1:] &= offsets[1:] >= np.maximum.accumulate(offsets + sizes)[:-1]
    skipped = int(np.count_nonzero(~ordered))
    offsets, sizes, queue_offsets = offsets[ordered], sizes[ordered], queue_offsets[ordered]
    bases = np.array([s.base for s in p.segments], dtype=np.int64)
    seg_of = np.searchsorted(bases, offsets, side="right") - 1
    i = 0
    while i < len(offsets):
        # entries are in CommitLog order: take the run that falls in one segment
        k = int(seg_of[i])
        j = i + int(np.searchsorted(seg_of[i:], k, side="right"))
        if k < 0 or p.segments[k].length < MIN_RECORD_SIZE:
            skipped += j - i
            i = j
            continue
        seg = p.segments[k]
        with MappedSegment(seg.path) as m:
            nb = m.data
            for lo, hi in _batches(sizes[i:j], opts.batch_size, i):
                lay = layout(nb, offsets[lo:hi] - seg.base, opts.check_crc)
                # the entry must name this very record: its size and its PHYSICALOFFSET
                ok = lay.valid & (lay.total == sizes[lo:hi]) & (lay.head["phys"] == offsets[lo:hi])
                skipped += int(np.count_nonzero(~ok))
                if ok.any():
                    keep = np.flatnonzero(ok)
                    yield to_record_batch(
                        nb,
                        lay.take(keep),
                        broker_name=opts.broker_name,
                        schema=schema,
                        queue_offsets=queue_offsets[lo:hi][keep],
                    )
            del nb
        i = j
    if skipped:
        log.warning(
            "%s/%d file %s: %d entries skipped (their records are gone or do not match)",
            p.topic,
            p.queue_id,
            p.file.path,
            skipped,
        )
