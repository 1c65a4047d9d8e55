"""DispatchCheckpoint: the ``dispatchcheckpoint`` file, the CommitLog offsets up to which
dispatch's outputs are durable (Pumice's own; RocketMQ has no such file and ignores it).

RocketMQ's ``checkpoint`` says how far the ConsumeQueues and the index are durable by
store *time*; recovery then picks the CommitLog file to re-dispatch from by the time of its
first record. Store times go back when the clock does, so that choice can start past
records whose ConsumeQueue entries never reached the disk. This file says the same by
CommitLog *offset*, which nothing moves back, and recovery re-dispatches from the smaller
of the two.

A 4 KiB file; the first 28 bytes are used, big-endian:

======  ====  ==================  =====================================================
offset  size  field               meaning
======  ====  ==================  =====================================================
0       4     magic               0x50434B31 (``PCK1``)
4       4     crc32               zlib CRC-32 of bytes 8..28
8       8     consumeQueueOffset  every record below it has its ConsumeQueue entries on disk
16      8     indexOffset         every record below it is in an index file on disk
24      4     reserved            0
======  ====  ==================  =====================================================

The 28 bytes sit in one sector, written with one ``pwrite`` and synced: after a power cut
the file holds either the old values or the new ones; a file whose magic or CRC does not
match is ignored (recovery then trusts ``checkpoint`` alone, as RocketMQ does). An offset is
only ever set once what it covers has been flushed.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
import zlib

from pumice.store.disk_io import StoreIOError

log = logging.getLogger(__name__)

DISPATCH_CHECKPOINT_FILE_SIZE = 4096
_MAGIC = 0x50434B31
_HEAD = struct.Struct(">II")
_BODY = struct.Struct(">qqi")


class DispatchCheckpoint:
    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        existed = os.path.exists(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.posix_fallocate(self._fd, 0, DISPATCH_CHECKPOINT_FILE_SIZE)
        except OSError as e:
            os.close(self._fd)
            raise StoreIOError(e.errno or errno.EIO, "reserve", path) from e
        # -1: not known (no file yet, or one that does not read back whole)
        self.consume_queue_offset = -1
        self.index_offset = -1
        if existed:
            raw = os.pread(self._fd, _HEAD.size + _BODY.size, 0)
            if len(raw) == _HEAD.size + _BODY.size:
                magic, crc = _HEAD.unpack_from(raw, 0)
                body = raw[_HEAD.size :]
                if magic == _MAGIC and crc == zlib.crc32(body):
                    self.consume_queue_offset, self.index_offset, _ = _BODY.unpack(body)
                elif any(raw):
                    log.warning("%s does not read back whole (magic or CRC): ignored", path)

    @property
    def known(self) -> bool:
        return self.consume_queue_offset >= 0 and self.index_offset >= 0

    def update(self, *, consume_queue_offset: int | None = None, index_offset: int | None = None) -> None:
        """Set what became durable and sync it; StoreIOError when the write or sync fails.
        An offset never moves back here (each writer flushes in CommitLog order)."""
        with self._lock:
            cq = self.consume_queue_offset if consume_queue_offset is None else consume_queue_offset
            ix = self.index_offset if index_offset is None else index_offset
            body = _BODY.pack(cq, ix, 0)
            try:
                os.pwrite(self._fd, _HEAD.pack(_MAGIC, zlib.crc32(body)) + body, 0)
                os.fdatasync(self._fd)
            except OSError as e:
                raise StoreIOError(e.errno or errno.EIO, "write", self.path) from e
            self.consume_queue_offset, self.index_offset = cq, ix

    def reset(self, offset: int) -> None:
        """Recovery cut the CommitLog at ``offset``: nothing past it can be claimed."""
        if self.consume_queue_offset > offset or self.index_offset > offset:
            self.update(
                consume_queue_offset=min(self.consume_queue_offset, offset),
                index_offset=min(self.index_offset, offset),
            )

    def close(self) -> None:
        os.close(self._fd)
