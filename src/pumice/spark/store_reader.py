"""Reading a store directory: the plan (input partitions) and what each task does.

Two plans, chosen by the options (``pumice.spark.options``):

===================  ===========================  =============================================
read                 one input partition per      a task
===================  ===========================  =============================================
all messages         CommitLog segment file       maps the segment read-only and walks it from
                                                  its first byte, record by record (TOTALSIZE),
                                                  until the blank end-of-file record or the
                                                  first record that is not valid (torn, cut,
                                                  zeros): there it stops, without an error
topic / topics       ConsumeQueue file of each    maps the ConsumeQueue file, takes its entries
                     queue of those topics        in the planned range up to the first invalid
                                                  one, and looks each record up in the
                                                  CommitLog by offset; an entry whose record is
                                                  gone (deleted segment) or does not match it
                                                  (size, PHYSICALOFFSET, length fields) is
                                                  skipped; queueOffset is the entry's index
===================  ===========================  =============================================

Each segment is read on its own, up to its own last valid record, so one damaged segment does
not hide the next. Records come out in CommitLog order within a partition, as Arrow batches of
``batchSize`` records (``pumice.spark.record_columns`` builds them).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from pyspark.sql.datasource import DataSourceReader, InputPartition

from pumice.spark.options import ReadOptions
from pumice.spark.record_columns import MIN_RECORD_SIZE, layout, to_record_batch
from pumice.spark.schema import arrow_schema
from pumice.spark.store_files import (
    FILLER_SIZE,
    MappedSegment,
    SegmentFile,
    consume_queue_entries,
    list_queues,
    list_segments,
    list_topics,
    valid_entry_count,
)
from pumice.store.consume_queue import CQ_STORE_UNIT_SIZE

log = logging.getLogger(__name__)

_TOTALSIZE = struct.Struct(">i").unpack_from
MAX_BATCH_BYTES = 16 << 20  # a batch also ends once its records reach this size (large messages)


@dataclass
class CommitLogPartition(InputPartition):
    """One CommitLog segment."""

    segment: SegmentFile


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
        return [CommitLogPartition(s) for s in segments if s.length >= MIN_RECORD_SIZE]
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


def walk(mm: object, pos: int, limit: int, max_records: int) -> tuple[list[int], bool]:
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
            return read_segment(partition.segment, self.opts)
        if isinstance(partition, ConsumeQueuePartition):
            return read_consume_queue(partition, self.opts)
        return iter(())  # a plan with no partition: Spark still runs one task, with a placeholder


def read_segment(segment: SegmentFile, opts: ReadOptions) -> Iterator:
    """Batches of the valid records of one CommitLog segment, from its first byte."""
    schema = arrow_schema()
    with MappedSegment(segment.path) as m:
        nb, mm, pos, limit = m.data, m.mm, 0, len(m.data)
        rows = 0
        while mm is not None:
            starts, stopped = walk(mm, pos, limit, opts.batch_size)
            if not starts:
                break
            lay = layout(nb, np.array(starts, dtype=np.int64), opts.check_crc)
            bad = np.flatnonzero(~lay.valid)
            if len(bad):
                lay, stopped = lay.take(slice(0, int(bad[0]))), True
            if len(lay.starts):
                yield to_record_batch(nb, lay, broker_name=opts.broker_name, schema=schema)
                rows += len(lay.starts)
                pos = int(lay.starts[-1] + lay.total[-1])
            if stopped:
                break
        log.debug("segment %s: %d records, valid data ends at %d of %d", segment.path, rows, pos, limit)
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
