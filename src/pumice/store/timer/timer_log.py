"""TimerLog: ``<storePathRootDir>/timerlog/``, the append-only log of timer units (5.3.3's TimerLog).

Files of ``mappedFileSizeTimerLog`` bytes (100 MiB), named by their first offset (20 digits), as
the CommitLog's. Each unit is 52 bytes, big-endian:

======  ====  ==============  ==================================================================
offset  size  field           meaning
======  ====  ==============  ==================================================================
0       4     size            52 (UNIT_SIZE)
4       8     prevPos         the slot's previous unit in this log, -1 for the slot's first
12      4     magic           1 (DEFAULT), | 2 (ROLL: put back into the timer topic), | 4 (DELETE)
16      8     currWriteTime   the wheel's write time when enqueued (ms, a multiple of precision)
24      4     delayedTime     the slot's time − currWriteTime (ms)
28      8     offsetPy        the message's CommitLog offset (in rmq_sys_wheel_timer)
36      4     sizePy          its record size
40      4     topicHash       Java ``String.hashCode`` of its REAL_TOPIC (metrics)
44      8     reserved        0
======  ====  ==============  ==================================================================

A unit never crosses a file: when fewer than 52 + 16 bytes remain, the file ends with a 16-byte
blank (size = the bytes left, prevPos 0, magic BLANK_MAGIC_CODE) and the unit opens the next file.
"""

from __future__ import annotations

import os
import struct

from pumice.store.mapped_file_queue import MappedFileQueue

UNIT = struct.Struct(">iqiqiqiiq")
UNIT_SIZE = UNIT.size  # 52
UNIT_PRE_SIZE_FOR_MSG = 28  # offsetPy's position in a unit
MIN_BLANK_LEN = 16
BLANK = struct.Struct(">iqi")
BLANK_MAGIC_CODE = -875286124  # Java's 0xBBCCDDEE ^ 1880681586 + 8

MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2


def is_magic_ok(magic: int) -> bool:
    return (magic | 0xF) == 0xF


class TimerLog:
    def __init__(self, store_path: str, file_size: int) -> None:
        self.file_size = file_size
        self.mapped_file_queue = MappedFileQueue(store_path, file_size)

    @staticmethod
    def path(root_dir: str) -> str:
        return os.path.join(root_dir, "timerlog")

    def load(self) -> bool:
        return self.mapped_file_queue.load()

    def append(self, unit: bytes) -> int:
        """Append one unit; its offset, or -1 when no file could be made."""
        q = self.mapped_file_queue
        mf = q.get_last_mapped_file_create(0)
        if mf is None:
            return -1
        if len(unit) + MIN_BLANK_LEN > self.file_size - mf.wrote_position:
            mf.close_with_blank(mf.wrote_position, BLANK.pack(self.file_size - mf.wrote_position, 0, BLANK_MAGIC_CODE))
            mf = q.get_last_mapped_file_create(0)
            if mf is None:
                return -1
        pos = mf.file_from_offset + mf.wrote_position
        if not mf.append_message(unit):
            return -1
        return pos

    def read_unit(self, offset: int) -> tuple[int, int, int, int, int, int, int, int, int] | None:
        """The unit at ``offset`` (its nine fields), or None when no file holds it."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset % self.file_size
        if pos + UNIT_SIZE > self.file_size:
            return None
        return UNIT.unpack_from(mf.mmap, pos)  # type: ignore[return-value]

    def flush(self) -> None:
        self.mapped_file_queue.flush(0)

    def shutdown(self) -> None:
        self.mapped_file_queue.flush(0)
        self.mapped_file_queue.shutdown()
