"""TimerCheckpoint: ``<storePathRootDir>/config/timercheck`` (5.3.3's TimerCheckpoint).

A 4 KiB file, big-endian; written and synced once a second by the timer's flush and at stop:

======  ====  ======================  ===========================================================
offset  size  field                   meaning
======  ====  ======================  ===========================================================
0       8     lastReadTimeMs          the wheel's read time: every slot before it was delivered
8       8     lastTimerLogFlushPos    the timerlog offset flushed (recovery rescans from one file
                                      before it)
16      8     lastTimerQueueOffset    next rmq_sys_wheel_timer queue offset to enqueue
24      8     masterTimerQueueOffset  the same, as the master committed it (a slave's cap)
32      8     stateVersion            DataVersion: the store's state machine version (0)
40      8     timestamp               DataVersion: when the read time or offset last changed
48      8     counter                 DataVersion: how many times they changed
======  ====  ======================  ===========================================================
"""

from __future__ import annotations

import mmap
import os
import struct
import time

LAYOUT = struct.Struct(">qqqqqqq")
FILE_SIZE = 4096
OLD_LAYOUT = struct.Struct(">qqqq")  # before the dataVersion (5.3.3's decode reads either)


class TimerCheckpoint:
    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < FILE_SIZE:
                os.posix_fallocate(fd, 0, FILE_SIZE)  # blocks, not a hole: a store into a hole may SIGBUS
            self._mm = mmap.mmap(fd, FILE_SIZE)
        finally:
            os.close(fd)
        (self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
         self.master_timer_queue_offset, self.state_version, self.timestamp, self.counter) = LAYOUT.unpack_from(
            self._mm, 0)  # fmt: skip

    @staticmethod
    def path_in(root_dir: str) -> str:
        return os.path.join(root_dir, "config", "timercheck")

    def update_data_version(self, state_version: int) -> None:
        """DataVersion.nextVersion(stateVersion)."""
        self.state_version = state_version
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    @staticmethod
    def decode(data: bytes) -> tuple[int, ...]:
        """GET_TIMER_CHECK_POINT's body (``encode``'s 56 bytes, or 32 without the dataVersion)
        as the seven fields; ValueError when it is neither."""
        if len(data) == LAYOUT.size:
            return LAYOUT.unpack(data)
        if len(data) == OLD_LAYOUT.size:
            return (*OLD_LAYOUT.unpack(data), 0, 0, 0)
        raise ValueError(f"a timer checkpoint is {LAYOUT.size} bytes, not {len(data)}")

    def encode(self) -> bytes:
        return LAYOUT.pack(
            self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
            self.master_timer_queue_offset, self.state_version, self.timestamp, self.counter,
        )  # fmt: skip

    def flush(self) -> None:
        self._mm[: LAYOUT.size] = self.encode()
        self._mm.flush()

    def shutdown(self) -> None:
        self.flush()
        self._mm.close()
