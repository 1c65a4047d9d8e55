"""TimerWheel: ``<storePathRootDir>/timerwheel``, one slot per precision step (5.3.3's TimerWheel).

``slotsTotal`` is 7 days of seconds (604,800) whatever the precision; the file holds twice that
many 32-byte slots (38,707,200 bytes). A time's slot is ``timeMs / precisionMs % (2 *
slotsTotal)``; a slot is valid for a time only when its first field equals ``timeMs /
precisionMs`` (5.3.3's Slot, big-endian):

======  ====  =========  ==========================================================
offset  size  field      meaning
======  ====  =========  ==========================================================
0       8     time       timeMs / precisionMs (seconds at the 1000 ms default)
8       8     firstPos   TimerLog offset of the slot's first unit
16      8     lastPos    TimerLog offset of its last unit (the chain runs backwards)
24      4     num        units enqueued into it
28      4     magic      0 (unused)
======  ====  =========  ==========================================================

RocketMQ keeps a copy in memory and copies changed bytes to the mapped file once a second;
here the slots are written in the map itself (the page cache keeps them through a SIGKILL) and
``flush`` syncs it. The bytes on disk are the same.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

SLOT = struct.Struct(">qqqii")
SLOT_SIZE = SLOT.size  # 32
_HEAD = struct.Struct(">qqq")
_TIME = struct.Struct(">q")
CHUNK = 1 << 16  # slots per numpy scan step (2 MiB of rows)
BLANK = -1
IGNORE = -2


class Slot(NamedTuple):
    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


_NO_SLOT = Slot(-1, -1, -1)


class TimerWheel:
    def __init__(self, file_name: str, slots_total: int, precision_ms: int) -> None:
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.file_name = file_name
        self.wheel_length = slots_total * 2 * SLOT_SIZE
        os.makedirs(os.path.dirname(file_name) or ".", exist_ok=True)
        fd = os.open(file_name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, self.wheel_length):
                raise ValueError(f"Timer wheel length:{size} != expected:{self.wheel_length} ({file_name})")
            if size == 0:
                os.ftruncate(fd, self.wheel_length)  # sparse: blocks only where slots are written
            self.mmap = mmap.mmap(fd, self.wheel_length)
        finally:
            os.close(fd)

    @staticmethod
    def path(root_dir: str) -> str:
        return os.path.join(root_dir, "timerwheel")

    def slot_index(self, time_ms: int) -> int:
        return time_ms // self.precision_ms % (self.slots_total * 2)

    def get_raw_slot(self, time_ms: int) -> Slot:
        t, first, last, num, magic = SLOT.unpack_from(self.mmap, self.slot_index(time_ms) * SLOT_SIZE)
        return Slot(t * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        """The slot of ``time_ms``, or Slot(-1, -1, -1) when its bytes belong to another time."""
        slot = self.get_raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return _NO_SLOT
        return slot

    def is_empty(self, time_ms: int) -> bool:
        (t,) = _TIME.unpack_from(self.mmap, self.slot_index(time_ms) * SLOT_SIZE)
        return t != time_ms // self.precision_ms

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int | None = None, magic: int = 0) -> None:
        pos = self.slot_index(time_ms) * SLOT_SIZE
        if num is None:  # 5.3.3's three-argument putSlot leaves num and magic as they were
            _HEAD.pack_into(self.mmap, pos, time_ms // self.precision_ms, first_pos, last_pos)
        else:
            SLOT.pack_into(self.mmap, pos, time_ms // self.precision_ms, first_pos, last_pos, num, magic)

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, force: bool) -> None:
        """Recovery: set the slot's positions (IGNORE keeps one); a slot of another time is
        replaced only with ``force``."""
        pos = self.slot_index(time_ms) * SLOT_SIZE
        t, first, last = _HEAD.unpack_from(self.mmap, pos)
        if t != time_ms // self.precision_ms:
            if force:
                self.put_slot(time_ms, first_pos if first_pos != IGNORE else last_pos, last_pos)
            return
        _HEAD.pack_into(self.mmap, pos, t, first if first_pos == IGNORE else first_pos,
                        last if last_pos == IGNORE else last_pos)  # fmt: skip

    def _chunks(self, time_start_ms: int, count: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """The slots of ``count`` steps from ``time_start_ms``, in time order and in chunks of at
        most CHUNK (a few MiB at a time): (the chunk's first step, whether each slot holds its own
        time, the slots' rows as four longs)."""
        base = time_start_ms // self.precision_ms
        rows = np.frombuffer(self.mmap, dtype=">i8").reshape(-1, 4)
        try:
            for first in range(0, count, CHUNK):
                steps = np.arange(first, min(count, first + CHUNK), dtype=np.int64) + base
                picked = rows[steps % (self.slots_total * 2)]
                yield first, picked[:, 0] == steps, picked
        finally:
            del rows  # no export left on the map: it can be closed

    def next_slot_time(self, from_ms: int, to_ms: int) -> int:
        """The first time in [from_ms, to_ms) whose slot is its own (holds units), else the end
        of what was scanned (to_ms, or one chunk further on)."""
        p = self.precision_ms
        count = min(max(0, (to_ms - from_ms) // p), CHUNK)
        for first, own, _ in self._chunks(from_ms, count):
            hit = np.flatnonzero(own)
            if hit.size:
                return from_ms + (first + int(hit[0])) * p
        return from_ms + count * p if count else to_ms

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """The smallest firstPos of a slot from ``time_start_ms`` on whose lastPos is past
        ``max_offset`` (a wheel ahead of a damaged log); 2**63-1 when none is."""
        min_first = 2**63 - 1
        for _, own, picked in self._chunks(time_start_ms, self.slots_total * 2):
            ahead = own & (picked[:, 2] > max_offset)
            if ahead.any():
                min_first = min(min_first, int(picked[ahead, 1].min()))
        return min_first

    def all_num(self, time_start_ms: int) -> int:
        """Units in the slots from ``time_start_ms`` on (getAllNum: the messages still held)."""
        return sum(
            int((picked[own, 3] >> 32).sum()) for _, own, picked in self._chunks(time_start_ms, self.slots_total * 2)
        )

    def flush(self) -> None:
        self.mmap.flush()

    def shutdown(self) -> None:
        self.mmap.flush()
        self.mmap.close()
