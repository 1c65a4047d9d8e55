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

import numpy as np

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
_HEAD_DTYPE = np.dtype([("size", ">i2"), ("tags_code", ">i8"), ("msg_store_time", ">i8"), ("bit_map_size", ">i2")])
_HEAD_COLUMNS = np.arange(MIN_EXT_UNIT_SIZE)


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


@dataclass
class CqExtUnits:
    """Units of many entries at once (``ConsumeQueueExt.get_many``): ``found[i]`` says whether
    entry i had a unit; ``bit_maps`` is (n, L) when every found unit's map has the same L bytes
    (else None, and ``bit_map_size`` tells which have one)."""

    found: np.ndarray
    tags_code: np.ndarray
    msg_store_time: np.ndarray
    bit_map_size: np.ndarray
    bit_maps: np.ndarray | None


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
        run = self._get_run(np.array([address], np.int64))
        if run is None:
            return None
        bm = bytes(run.bit_maps[0]) if run.bit_maps is not None else None
        return CqExtUnit(int(run.tags_code[0]), int(run.msg_store_time[0]), bm)

    def get_many(self, codes: np.ndarray) -> CqExtUnits:
        """The units of the ConsumeQueue entries whose tagsCode fields are ``codes`` (int64),
        read with one reference per file: a pull's filter then needs no call per entry."""
        n = len(codes)
        run = self._get_run(codes)
        if run is not None:
            return run
        out = CqExtUnits(np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int16), None)
        is_addr = codes <= MAX_ADDR
        real = (codes.view(np.uint64) ^ np.uint64(1 << 63)).view(np.int64)  # address - Long.MIN_VALUE
        maps: list[tuple[np.ndarray, np.ndarray]] = []
        size = self.mapped_file_size
        files = np.where(is_addr, real // size, -1)
        for f in np.unique(files[is_addr]).tolist():
            mf = self.mapped_file_queue.find_mapped_file_by_offset(f * size)
            if mf is None or not mf.hold():
                continue
            buf = None
            try:
                rows = np.flatnonzero(files == f)
                pos = real[rows] % size
                end = mf.read_position
                whole = pos + MIN_EXT_UNIT_SIZE <= end
                rows, pos = rows[whole], pos[whole]
                buf = np.frombuffer(mf.mmap, np.uint8, count=end)
                head = np.ascontiguousarray(buf[pos[:, None] + _HEAD_COLUMNS]).view(_HEAD_DTYPE).reshape(-1)
                bm = head["bit_map_size"].astype(np.int64)
                ok = (head["size"] == MIN_EXT_UNIT_SIZE + bm) & (bm >= 0) & (pos + MIN_EXT_UNIT_SIZE + bm <= end)
                rows, pos, head, bm = rows[ok], pos[ok], head[ok], bm[ok]
                out.found[rows] = True
                out.tags_code[rows] = head["tags_code"]
                out.msg_store_time[rows] = head["msg_store_time"]
                out.bit_map_size[rows] = bm
                width = int(bm.max()) if len(bm) else 0
                if width:
                    cols = np.minimum(np.arange(width), bm[:, None] - 1)  # a shorter map repeats its last byte
                    maps.append((rows, buf[pos[:, None] + MIN_EXT_UNIT_SIZE + cols]))
            finally:
                del buf
                mf.release()
        sizes = out.bit_map_size[out.found]
        if maps and len(sizes) and (sizes == sizes[0]).all():
            out.bit_maps = np.zeros((n, int(sizes[0])), np.uint8)
            for rows, m in maps:
                out.bit_maps[rows] = m
        return out

    def _get_run(self, codes: np.ndarray) -> CqExtUnits | None:
        """``get_many``'s common case (and ``get``'s): the units lie back to back in one file, all
        of one size (one map length), as a queue's appends leave them; read as one array. None
        otherwise. (4.9 takes the first file for offset 0 even when that file starts later.)"""
        n = len(codes)
        if not n or codes[0] > MAX_ADDR:
            return None
        first = int(undecorate(int(codes[0])))
        mf = self.mapped_file_queue.find_mapped_file_by_offset(first)
        if mf is None or not mf.hold():
            return None
        units: np.ndarray | None = None
        try:
            pos = first % self.mapped_file_size
            end = mf.read_position
            if pos + MIN_EXT_UNIT_SIZE > end:
                return None
            step = _HEAD.unpack_from(mf.mmap, pos)[0]
            if step < MIN_EXT_UNIT_SIZE or pos + n * step > end:
                return None
            if n > 1 and not (np.diff(codes) == step).all():
                return None
            dtype = np.dtype([*_HEAD_DTYPE.descr, ("bit_map", np.uint8, (step - MIN_EXT_UNIT_SIZE,))])
            units = np.frombuffer(mf.mmap, dtype, count=n, offset=pos)
            if not ((units["size"] == step) & (units["bit_map_size"] == step - MIN_EXT_UNIT_SIZE)).all():
                return None
            width = step - MIN_EXT_UNIT_SIZE
            return CqExtUnits(np.ones(n, bool), units["tags_code"].astype(np.int64),
                              units["msg_store_time"].astype(np.int64), np.full(n, width, np.int16),
                              units["bit_map"].copy() if width else None)  # fmt: skip
        finally:
            units = None  # the view goes before the file may be unmapped
            mf.release()

    def put(self, unit: CqExtUnit) -> int:
        return self.put_many([unit])[0]

    def put_many(self, units: list[CqExtUnit]) -> list[int]:
        """Append ``units`` (one write per file they land in); their addresses, ``NOT_AN_ADDRESS``
        (logged) for one that cannot be stored. A file that cannot be made or reserved raises, as
        the ConsumeQueue's own writes do."""
        datas = [u.encode() for u in units]
        out: list[int] = []
        mfq = self.mapped_file_queue
        i = tries = 0
        while i < len(datas):
            size = len(datas[i])
            if size > MAX_EXT_UNIT_SIZE or mfq.get_max_offset() + size > MAX_REAL_OFFSET or tries == 3:
                log.error("cannot save consume queue extend unit of %d bytes (max offset %d): %s",
                          size, mfq.get_max_offset(), units[i])  # fmt: skip
                out.append(NOT_AN_ADDRESS)
                i, tries = i + 1, 0
                continue
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                tries += 1
                continue
            wrote = mf.wrote_position
            room = self.mapped_file_size - wrote - END_BLANK_DATA_LENGTH
            j, used = i, 0
            while j < len(datas) and used + len(datas[j]) <= room:
                used += len(datas[j])
                j += 1
            if j == i:
                mf.close_with_blank(wrote, b"\xff\xff")  # the next file takes it
                tries += 1
                continue
            mf.append_message(b"".join(datas[i:j]))
            pos = mf.file_from_offset + wrote
            for d in datas[i:j]:
                out.append(decorate(pos))
                pos += len(d)
            i, tries = j, 0
        return out

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
