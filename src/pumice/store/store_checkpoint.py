"""StoreCheckpoint: the ``checkpoint`` file, flush time points used by recovery.

A 4 KiB file; only the first 24 bytes are used, big-endian:

======  ====  ====================  ================================================
offset  size  field                 meaning
======  ====  ====================  ================================================
0       8     physicMsgTimestamp    store time of the last CommitLog data flushed
8       8     logicsMsgTimestamp    store time of the last ConsumeQueue entry flushed
16      8     indexMsgTimestamp     store time covered by the last index file flush
======  ====  ====================  ================================================

Each field is set only once what it covers is on disk, whoever writes the file: dispatch
keeps the store time it reached in ``dispatched_logics_timestamp`` (memory only), and the
ConsumeQueue flush moves it into ``logicsMsgTimestamp`` after flushing every queue.
(RocketMQ 4.9 sets ``logicsMsgTimestamp`` at dispatch, so an index file's flush, which
writes the whole file, can claim ConsumeQueue entries that are still in memory.)
"""

from __future__ import annotations

import errno
import mmap
import os
import struct

from pumice.store.disk_io import StoreIOError

CHECKPOINT_FILE_SIZE = 4096
_LAYOUT = struct.Struct(">qqq")


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # blocks, not a hole: a store into a mapped hole on a full disk is a SIGBUS
            os.posix_fallocate(self._fd, 0, CHECKPOINT_FILE_SIZE)
        except OSError as e:
            os.close(self._fd)
            raise StoreIOError(e.errno or errno.EIO, "reserve", path) from e
        self._mm = mmap.mmap(self._fd, CHECKPOINT_FILE_SIZE)
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = _LAYOUT.unpack_from(
            self._mm, 0
        )
        # store time of the last record dispatched: logicsMsgTimestamp once its entries are flushed
        self.dispatched_logics_timestamp = self.logics_msg_timestamp

    def flush(self) -> None:
        """Write and sync the time points; StoreIOError when the sync fails."""
        _LAYOUT.pack_into(self._mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        try:
            os.fdatasync(self._fd)
        except OSError as e:
            raise StoreIOError(e.errno or errno.EIO, "msync", self.path) from e

    def get_min_timestamp(self) -> int:
        """min(physic, logics) − 3 s, floored at 0: a safe point for abnormal recovery."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def get_min_timestamp_index(self) -> int:
        return min(self.get_min_timestamp(), self.index_msg_timestamp)

    def shutdown(self) -> None:
        try:
            self.flush()
        finally:
            self._mm.close()
            os.close(self._fd)
