"""A store directory seen read-only: its CommitLog segments and ConsumeQueue files, mapped.

The layout is the store's (``pumice.store.message_store``): ``commitlog/<20-digit offset>``
and ``consumequeue/<topic>/<queueId>/<20-digit offset>``. Nothing here opens a file for
writing, takes the ``lock`` or looks at ``abort``: a copy of a store, a backup or the
directory of a stopped broker reads the same. File sizes are taken as they are (a copied last
segment may be shorter than ``mapedFileSizeCommitLog``); ConsumeQueue entries are read as
the store's recovery reads them:

============================  =====================================================
entry                         meaning for a reader
============================  =====================================================
offset ≥ 0 and size > 0       an entry (the queue offset is its index in the queue)
size 0x7fffffff, offset 0     a blank filler before a queue's first real entry: skipped
anything else                 the end of the queue's valid entries
============================  =====================================================
"""

from __future__ import annotations

import json
import mmap
import os
from dataclasses import dataclass

import numpy as np

from pumice.store.consume_queue import CQ_STORE_UNIT_SIZE, ENTRY_DTYPE


@dataclass(frozen=True)
class SegmentFile:
    """One segment file: its path, the offset of its first byte (its name) and its length."""

    path: str
    base: int
    length: int


def list_segments(directory: str) -> list[SegmentFile]:
    """The segment files (20-digit names) of a directory, in offset order; [] if there is none."""
    if not os.path.isdir(directory):
        return []
    out = []
    for name in sorted(os.listdir(directory)):
        if len(name) == 20 and name.isdigit():
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                out.append(SegmentFile(path, int(name), os.path.getsize(path)))
    return out


def list_topics(consume_queue_dir: str) -> list[str]:
    if not os.path.isdir(consume_queue_dir):
        return []
    return sorted(t for t in os.listdir(consume_queue_dir) if os.path.isdir(os.path.join(consume_queue_dir, t)))


def store_topics(root: str) -> list[str]:
    """The topics a store directory has: those with a ConsumeQueue directory, and those its
    broker's ``config/topics.json`` names (created, maybe never written to); sorted. An
    unreadable topics.json counts for nothing."""
    names = set(list_topics(os.path.join(root, "consumequeue")))
    try:
        with open(os.path.join(root, "config", "topics.json"), "rb") as f:
            table = json.load(f).get("topicConfigTable")
        if isinstance(table, dict):
            names.update(str(t) for t in table)
    except (OSError, ValueError, AttributeError):
        pass
    return sorted(names)


def list_queues(consume_queue_dir: str, topic: str) -> list[int]:
    tdir = os.path.join(consume_queue_dir, topic)
    if not os.path.isdir(tdir):
        return []
    return sorted(int(q) for q in os.listdir(tdir) if q.isdigit() and os.path.isdir(os.path.join(tdir, q)))


class MappedSegment:
    """A file mapped read-only; ``data`` is a uint8 view of the whole of it."""

    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(path, os.O_RDONLY)
        try:
            length = os.fstat(fd).st_size
            self.mm: mmap.mmap | None = mmap.mmap(fd, length, access=mmap.ACCESS_READ) if length else None
        finally:
            os.close(fd)  # the map keeps its own reference to the file
        if self.mm is not None:
            self.mm.madvise(mmap.MADV_SEQUENTIAL)  # read once, front to back: let read-ahead run
            self.data = np.frombuffer(self.mm, dtype=np.uint8)
        else:
            self.data = np.zeros(0, dtype=np.uint8)

    def __enter__(self) -> MappedSegment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.data = np.zeros(0, dtype=np.uint8)
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # a caller still holds a view: the map goes with its last view
                pass
            self.mm = None


def consume_queue_entries(data: np.ndarray) -> np.ndarray:
    """The entries of a ConsumeQueue file up to the first one that is not valid (fillers included)."""
    n = len(data) // CQ_STORE_UNIT_SIZE
    entries = data[: n * CQ_STORE_UNIT_SIZE].view(ENTRY_DTYPE)
    bad = np.flatnonzero((entries["offset"] < 0) | (entries["size"] <= 0))
    return entries[: int(bad[0])] if len(bad) else entries


def valid_entry_count(path: str) -> int:
    """How many entries of a ConsumeQueue file are valid (fillers counted)."""
    with MappedSegment(path) as m:
        return len(consume_queue_entries(m.data))
