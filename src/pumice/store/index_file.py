"""IndexFile: a hash index from ``topic#key`` to CommitLog offsets, with time bounds.

Files live in ``index/`` and are named by their creation time, ``yyyyMMddHHmmssSSS``.
Layout, big-endian (defaults: 5,000,000 slots, 20,000,000 entries, 420,000,040 bytes):

=====================================  =============  ==================================
region                                 size           content
=====================================  =============  ==================================
header                                 40             see below
hash slots                             slots × 4      index number of the newest entry
                                                      in the slot (0 = empty)
entries                                entries × 20   appended in order; entry 0 unused
=====================================  =============  ==================================

Header: ``beginTimestamp`` (8), ``endTimestamp`` (8), ``beginPhyOffset`` (8),
``endPhyOffset`` (8), ``hashSlotCount`` (4, grows only when a put lands in an empty slot),
``indexCount`` (4, starts at 1).

Entry: ``keyHash`` (4, ``abs(String.hashCode)``), ``phyOffset`` (8), ``timeDiff`` (4,
seconds since beginTimestamp), ``prevIndex`` (4, the previous entry in the same slot; 0 ends
the chain). Only the hash is stored, so callers must check the real key of each hit.

A file is created sparse; a put first reserves the blocks it will write (the header and
slot table whole, the entries up to its own), so a full disk fails the put, never the
process.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence

import numpy as np

from pumice.common.java_hash import index_key_hash
from pumice.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0
SMALL_BATCH = 16  # below this, put keys one by one rather than vectorised
_INT_MAX = 0x7FFFFFFF

_HEADER = struct.Struct(">qqqqii")
ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev_index", ">i4")])
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


class IndexFile:
    def __init__(
        self, file_name: str, hash_slot_num: int, index_num: int, end_phy_offset: int = 0, end_timestamp: int = 0
    ) -> None:
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.mapped_file = MappedFile(file_name, index_file_size(hash_slot_num, index_num))
        self.file_name = file_name
        self._mm = self.mapped_file.mmap
        self._entries_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        self.begin_timestamp = 0
        self.end_timestamp = 0
        self.begin_phy_offset = 0
        self.end_phy_offset = 0
        self.hash_slot_count = 0
        self.index_count = 1
        if end_phy_offset > 0:
            self.begin_phy_offset = self.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            self.begin_timestamp = self.end_timestamp = end_timestamp

    def load(self) -> None:
        """Read the header back from the file."""
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = _HEADER.unpack_from(self._mm, 0)  # fmt: skip
        if self.index_count <= 0:
            self.index_count = 1

    def _write_header(self) -> None:
        _HEADER.pack_into(
            self._mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )  # fmt: skip

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        one = np.array([index_key_hash(key)], dtype=np.int64)
        return self.put_batch(one, np.array([phy_offset], np.int64), np.array([store_timestamp], np.int64)) == 1

    def put_batch(
        self,
        key_hashes: Sequence[int] | np.ndarray,
        phy_offsets: Sequence[int] | np.ndarray,
        store_timestamps: Sequence[int] | np.ndarray,
    ) -> int:
        """Put keys in order, as repeated ``putKey`` calls would; returns how many fit.

        Vectorised: entry numbers are consecutive, so each entry's ``prevIndex`` is the
        previous entry of the batch in the same slot, or the slot's value before the batch.
        """
        room = self.index_num - self.index_count
        n = min(len(key_hashes), max(room, 0))
        if n <= 0:
            log.debug("Over index file capacity: index count = %d", self.index_count)
            return 0
        # slots land anywhere in the slot table: the header, all slots and the new entries
        # get their blocks before any is written (StoreIOError, nothing written, if not)
        self.mapped_file.reserve(self._entries_base + (self.index_count + n) * INDEX_SIZE)
        done = 0
        if self.index_count <= 1:
            # the first put of a file sets beginTimestamp, which later timeDiffs use
            self._put_one(int(key_hashes[0]), int(phy_offsets[0]), int(store_timestamps[0]))
            done = 1
        if n - done >= SMALL_BATCH:
            self._put_many(  # no copy for arrays
                np.asarray(key_hashes[done:n]), np.asarray(phy_offsets[done:n]), np.asarray(store_timestamps[done:n])
            )
        else:  # numpy's per-call cost would dominate
            for h, phy, ts in zip(key_hashes[done:n], phy_offsets[done:n], store_timestamps[done:n], strict=True):
                self._put_one(int(h), int(phy), int(ts))
        self._write_header()
        return n

    def _put_one(self, key_hash: int, phy: int, ts: int) -> None:
        mm = self._mm
        count = self.index_count
        abs_slot = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        slot_value = _SLOT.unpack_from(mm, abs_slot)[0]
        if slot_value <= INVALID_INDEX or slot_value > count:
            slot_value = INVALID_INDEX
        time_diff = 0 if self.begin_timestamp <= 0 else min(max((ts - self.begin_timestamp) // 1000, 0), _INT_MAX)
        _ENTRY.pack_into(mm, self._entries_base + count * INDEX_SIZE, key_hash, phy, time_diff, slot_value)
        _SLOT.pack_into(mm, abs_slot, count)
        if count <= 1:
            self.begin_phy_offset = phy
            self.begin_timestamp = ts
        if slot_value == INVALID_INDEX:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset = phy
        self.end_timestamp = ts

    def _put_many(self, hashes: np.ndarray, phys: np.ndarray, times: np.ndarray) -> None:
        k = len(hashes)
        c0 = self.index_count
        slot_table = np.frombuffer(self._mm, dtype=">i4", count=self.hash_slot_num, offset=INDEX_HEADER_SIZE)
        slots = hashes % self.hash_slot_num
        order = np.argsort(slots, kind="stable")
        sorted_slots = slots[order]
        same_as_prev = np.empty(k, dtype=bool)
        same_as_prev[0] = False
        same_as_prev[1:] = sorted_slots[1:] == sorted_slots[:-1]
        before = slot_table[sorted_slots].astype(np.int64)
        before[(before <= INVALID_INDEX) | (before > c0)] = INVALID_INDEX
        prev_sorted = np.where(same_as_prev, c0 + np.roll(order, 1), before)
        prev = np.empty(k, dtype=np.int64)
        prev[order] = prev_sorted
        if self.begin_timestamp <= 0:
            diffs = np.zeros(k, dtype=np.int64)
        else:
            diffs = np.clip((times - self.begin_timestamp) // 1000, 0, _INT_MAX)
        entries = np.empty(k, dtype=ENTRY_DTYPE)
        entries["key_hash"] = hashes
        entries["phy_offset"] = phys
        entries["time_diff"] = diffs
        entries["prev_index"] = prev
        start = self._entries_base + c0 * INDEX_SIZE
        self._mm[start : start + k * INDEX_SIZE] = entries.tobytes()
        last_of_slot = np.ones(k, dtype=bool)
        last_of_slot[:-1] = sorted_slots[:-1] != sorted_slots[1:]
        slot_table[sorted_slots[last_of_slot]] = c0 + order[last_of_slot]
        self.hash_slot_count += int(np.count_nonzero(~same_as_prev & (before == INVALID_INDEX)))
        self.index_count = c0 + k
        self.end_phy_offset = int(phys[-1])
        self.end_timestamp = int(times[-1])
        del slot_table

    def select_phy_offset(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Offsets of entries whose hash matches ``key`` and whose time is in [begin, end]."""
        out: list[int] = []
        if not self.mapped_file.hold():
            return out
        try:
            key_hash = index_key_hash(key)
            mm = self._mm
            abs_slot = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
            slot_value = _SLOT.unpack_from(mm, abs_slot)[0]
            count = self.index_count
            if slot_value <= INVALID_INDEX or slot_value > count or count <= 1:
                return out
            nxt = slot_value
            while len(out) < max_num:
                h, phy, time_diff, prev = _ENTRY.unpack_from(mm, self._entries_base + nxt * INDEX_SIZE)
                if time_diff < 0:
                    break
                time_read = self.begin_timestamp + time_diff * 1000
                if h == key_hash and begin <= time_read <= end:
                    out.append(phy)
                if prev <= INVALID_INDEX or prev > count or prev == nxt or time_read < begin:
                    break
                nxt = prev
            return out
        finally:
            self.mapped_file.release()

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def flush(self) -> None:
        # slots and entries are written in place, so positions say nothing: always sync
        self.mapped_file.force()

    def destroy(self, interval_forcibly_ms: int) -> bool:
        return self.mapped_file.destroy(interval_forcibly_ms)

    def close(self) -> None:
        self.mapped_file.close()
