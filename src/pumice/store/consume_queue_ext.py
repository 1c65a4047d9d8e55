"""ConsumeQueueExt: the ConsumeQueue extension of RocketMQ 4.9 (``enableConsumeQueueExt``).

With the extension on, every ConsumeQueue entry's tagsCode field holds the address of a unit
in ``consumequeue_ext/<topic>/<queueId>/`` that carries the real tagsCode, the store time and
the message's SQL92 filter bit map (``CommitLogDispatcherCalcBitMap``). Files are
``mappedFileSizeConsumeQueueExt`` bytes (48 MiB by default), named by their first byte's
offset (20 digits), as the other queues.

An address is ``realOffset + Long.MIN_VALUE``: every value at or below ``Integer.MIN_VALUE - 1``
(``MAX_ADDR``) is an address, anything above it a plain tagsCode (``is_ext_addr``).

One unit, big-endian:

======  ==========  ============  ============================================================
offset  size        field         meaning
======  ==========  ============  ============================================================
0       2           size          the unit's length, 20 + bitMapSize (0 or less: no unit)
2       8           tagsCode      the message's tagsCode
10      8           msgStoreTime  the record's STORETIMESTAMP (ms)
18      2           bitMapSize    bytes of bit map, 0 when none was computed
20      bitMapSize  filterBitMap  the bloom-filter bit map (``bloom_filter.py``)
======  ==========  ============  ============================================================

A unit never crosses a file: when it does not fit before the last 4 bytes, the short ``-1``
is written where it would start and the next file takes it. A put that fails returns 1 (not an
address); the ConsumeQueue then stores the plain tagsCode, as 4.9 does.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass

from pumice.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

LONG_MIN = -(1 << 63)
MAX_ADDR = -(1 << 31) - 1  # Integer.MIN_VALUE - 1
MAX_REAL_OFFSET = MAX_ADDR - LONG_MIN
END_BLANK_DATA_LENGTH = 4
MIN_EXT_UNIT_SIZE = 20
MAX_EXT_UNIT_SIZE = 0x7FFF
NOT_AN_ADDRESS = 1  # what a failed put returns
_HEAD = struct.Struct(">hqqh")


def is_ext_addr(value: int) -> bool:
    return value <= MAX_ADDR


def _int64(v: int) -> int:
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)  # Java's long arithmetic wraps


def decorate(offset: int) -> int:
    return offset if is_ext_addr(offset) else _int64(offset + LONG_MIN)


def undecorate(address: int) -> int:
    return _int64(address - LONG_MIN) if is_ext_addr(address) else address


@dataclass(frozen=True)
class CqExtUnit:
    tags_code: int
    msg_store_time: int
    filter_bit_map: bytes | None = None

    @property
    def size(self) -> int:
        return MIN_EXT_UNIT_SIZE + len(self.filter_bit_map or b"")

    def encode(self) -> bytes:
        bm = self.filter_bit_map or b""
        return _HEAD.pack(self.size, self.tags_code, self.msg_store_time, len(bm)) + bm


class ConsumeQueueExt:
    def __init__(self, topic: str, queue_id: int, root_dir: str, mapped_file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        self.mapped_file_queue = MappedFileQueue(os.path.join(root_dir, topic, str(queue_id)), mapped_file_size)

    def load(self) -> bool:
        return self.mapped_file_queue.load()

    def get(self, address: int) -> CqExtUnit | None:
        """The unit at ``address``, or None (not an address, gone, or not a whole unit)."""
        if not is_ext_addr(address):
            return None
        real = undecorate(address)
        # (4.9 takes the first file for offset 0 even when that file starts later)
        mf = self.mapped_file_queue.find_mapped_file_by_offset(real)
        if mf is None or not mf.hold():
            return None
        try:
            pos = real % self.mapped_file_size
            end = mf.read_position
            if pos + MIN_EXT_UNIT_SIZE > end:
                return None
            size, tags_code, store_time, bm_size = _HEAD.unpack_from(mf.mmap, pos)
            if size < MIN_EXT_UNIT_SIZE or bm_size < 0 or pos + MIN_EXT_UNIT_SIZE + bm_size > end:
                return None
            bm = bytes(mf.mmap[pos + MIN_EXT_UNIT_SIZE : pos + MIN_EXT_UNIT_SIZE + bm_size]) if bm_size else None
            return CqExtUnit(tags_code, store_time, bm)
        finally:
            mf.release()

    def put(self, unit: CqExtUnit) -> int:
        """Append ``unit``; its address, or ``NOT_AN_ADDRESS`` (logged) when it cannot be stored.
        A file that cannot be made or reserved raises as the ConsumeQueue's own writes do."""
        data = unit.encode()
        size = len(data)
        mfq = self.mapped_file_queue
        if size > MAX_EXT_UNIT_SIZE:
            log.error("Size of cq ext unit is greater than %d, %s", MAX_EXT_UNIT_SIZE, unit)
            return NOT_AN_ADDRESS
        if mfq.get_max_offset() + size > MAX_REAL_OFFSET:
            log.warning("Capacity of ext is maximum! %d, %d", mfq.get_max_offset(), size)
            return NOT_AN_ADDRESS
        for _ in range(3):
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                log.error("Create mapped file when save consume queue extend, %s", unit)
                continue
            wrote = mf.wrote_position
            if size > self.mapped_file_size - wrote - END_BLANK_DATA_LENGTH:
                mf.close_with_blank(wrote, b"\xff\xff")  # the next file takes it
                continue
            if mf.append_message(data):
                return decorate(mf.file_from_offset + wrote)
        return NOT_AN_ADDRESS

    def recover(self) -> None:
        """Walk every file unit by unit to the first without a size; cut the queue there."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            return
        process = 0
        for mf in files:
            pos = 0
            while pos + 2 <= self.mapped_file_size:
                (size,) = struct.unpack_from(">h", mf.mmap, pos)
                if size <= 0 or pos + size > self.mapped_file_size:
                    break
                pos += size
            process = mf.file_from_offset + pos
        mfq = self.mapped_file_queue
        mfq.flushed_where = mfq.committed_where = process
        mfq.truncate_dirty_files(process)

    def truncate_by_max_address(self, max_address: int) -> None:
        """Keep the units up to and including the one at ``max_address``."""
        if not is_ext_addr(max_address):
            return
        unit = self.get(max_address)
        if unit is None:
            log.error("[BUG] address %d of consume queue extend not found!", max_address)
            return
        self.mapped_file_queue.truncate_dirty_files(undecorate(max_address) + unit.size)

    def truncate_by_min_address(self, min_address: int) -> None:
        """Delete the files wholly before the unit at ``min_address``."""
        if not is_ext_addr(min_address):
            return
        real = undecorate(min_address)
        gone = [mf for mf in self.mapped_file_queue.mapped_files if mf.file_from_offset + self.mapped_file_size < real]
        gone = [mf for mf in gone if mf.destroy(1000)]
        self.mapped_file_queue.delete_expired_file(gone)

    def get_max_address(self) -> int:
        mf = self.mapped_file_queue.get_last_mapped_file()
        return decorate(0 if mf is None else mf.file_from_offset + mf.wrote_position)

    def get_min_address(self) -> int:
        mf = self.mapped_file_queue.get_first_mapped_file()
        return decorate(0 if mf is None else mf.file_from_offset)

    def flush(self, flush_least_pages: int) -> bool:
        return self.mapped_file_queue.flush(flush_least_pages)

    def destroy(self) -> None:
        self.mapped_file_queue.destroy()

    def shutdown(self) -> None:
        try:
            self.mapped_file_queue.flush(0)
        finally:
            self.mapped_file_queue.shutdown()
