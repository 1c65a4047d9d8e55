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
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable

from pumice.store.java_hash import index_key_hash
from pumice.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0
_INT_MAX = 0x7FFFFFFF

_HEADER = struct.Struct(">qqqqii")
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
        return self.put_hashed([(index_key_hash(key), phy_offset, store_timestamp)]) == 1

    def put_hashed(self, items: Iterable[tuple[int, int, int]]) -> int:
        """Put (keyHash, phyOffset, storeTimestamp) items in order; returns how many fit."""
        mm = self._mm
        slots = self.hash_slot_num
        index_num = self.index_num
        base = self._entries_base
        count = self.index_count
        slot_count = self.hash_slot_count
        begin_ts = self.begin_timestamp
        begin_phy = self.begin_phy_offset
        end_ts = self.end_timestamp
        end_phy = self.end_phy_offset
        done = 0
        slot_unpack = _SLOT.unpack_from
        slot_pack = _SLOT.pack_into
        entry_pack = _ENTRY.pack_into
        for key_hash, phy, ts in items:
            if count >= index_num:
                log.debug("Over index file capacity: index count = %d; index max num = %d", count, index_num)
                break
            abs_slot = INDEX_HEADER_SIZE + (key_hash % slots) * HASH_SLOT_SIZE
            slot_value = slot_unpack(mm, abs_slot)[0]
            if slot_value <= INVALID_INDEX or slot_value > count:
                slot_value = INVALID_INDEX
            if begin_ts <= 0:
                time_diff = 0
            else:
                time_diff = (ts - begin_ts) // 1000
                if time_diff > _INT_MAX:
                    time_diff = _INT_MAX
                elif time_diff < 0:
                    time_diff = 0
            entry_pack(mm, base + count * INDEX_SIZE, key_hash, phy, time_diff, slot_value)
            slot_pack(mm, abs_slot, count)
            if count <= 1:
                begin_phy = phy
                begin_ts = ts
            if slot_value == INVALID_INDEX:
                slot_count += 1
            count += 1
            end_phy = phy
            end_ts = ts
            done += 1
        self.index_count = count
        self.hash_slot_count = slot_count
        self.begin_timestamp = begin_ts
        self.begin_phy_offset = begin_phy
        self.end_timestamp = end_ts
        self.end_phy_offset = end_phy
        self._write_header()
        return done

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
        self.mapped_file.flush(0)

    def destroy(self, interval_forcibly_ms: int) -> bool:
        return self.mapped_file.destroy(interval_forcibly_ms)

    def close(self) -> None:
        self.mapped_file.close()
