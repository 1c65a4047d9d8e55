"""ConsumeQueue: the per-(topic, queueId) index of the CommitLog that consumers read.

Files live in ``consumequeue/<topic>/<queueId>/`` and are named by their first byte's
logical offset (entry index × 20, 20 digits). Each file holds
``mapedFileSizeConsumeQueue / 20`` entries (300,000 by default). The entry index is the
queue offset that consumers commit.

One entry, big-endian, 20 bytes:

======  ====  ================  ==========================================================
offset  size  field             meaning
======  ====  ================  ==========================================================
0       8     commitLogOffset   physical offset of the record in the CommitLog
8       4     size              record size (TOTALSIZE)
12      8     tagsCode          ``(long) tags.hashCode()``; for SCHEDULE_TOPIC_XXXX the
                                delivery time in ms; 0 without a tag. With
                                ``enableConsumeQueueExt``: the address of the entry's
                                unit in the ConsumeQueueExt (``consume_queue_ext.py``),
                                which holds the tagsCode (a failed unit write leaves the
                                tagsCode here, as 4.9 does)
======  ====  ================  ==========================================================

Writes are append-only and idempotent: an entry whose record ends at or before
``max_physic_offset`` was already written and is skipped. A queue whose first file starts
mid-way (older files deleted) is padded with blank entries before the first real one.

A pull walks the entries with ``scan_units`` (native: ``pumice._native.scan_units``,
native/src/consume_queue_scan.rs; this module's function is its twin and the reference).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Collection

import numpy as np

from pumice.store.consume_queue_ext import MAX_ADDR, ConsumeQueueExt, is_ext_addr
from pumice.store.mapped_file import MappedFile, SelectMappedBufferResult
from pumice.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

CQ_STORE_UNIT_SIZE = 20
FILLER_SIZE = 0x7FFFFFFF  # size of the filler entries before a queue's first real entry (fillPreBlank)
_ENTRY = struct.Struct(">qiq")
ENTRY_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert ENTRY_DTYPE.itemsize == CQ_STORE_UNIT_SIZE

# why scan_units stopped
SCAN_END = 0  # every entry up to n walked
SCAN_FULL = 1  # a cap reached at entry cursor[0] (not taken)
SCAN_WINDOW = 2  # entry cursor[0] passed caps and filter; its record is not plainly in the held file

ScanCursor = tuple[int, int, int, int, int, int, int, int]


def scan_units(
    buf: bytes | memoryview,
    n: int,
    codes: Collection[int] | None,
    limits: tuple[int, int, int, int, int, int, int, int],
    cursor: ScanCursor,
    view: memoryview | None,
) -> tuple[int, ScanCursor, list[memoryview], list[int]]:
    """A pull's walk of ConsumeQueue entries ``cursor[0]..n`` (``getMessage``'s loop, the plain
    case: no extension lookups, no record filter).

    ``limits``: (max count, the in-memory span, the CommitLog's max offset, bytes and count in
    memory, bytes and count on disk, the request's byte cap). ``cursor``: (next entry, records
    taken, their bytes, the last entry's CommitLog offset, the start of the next CommitLog file
    after a removed one or -1, and the held CommitLog file: its first offset, its end, its
    readable bytes). An entry is kept when ``codes`` is None or holds its tagsCode, or its
    tagsCode is an extension address (unknown here: 4.9 keeps it). Returns (stop, the cursor
    after, the records taken as slices of ``view`` (the held file's map), their entries)."""
    max_count, memory, max_offset_py, bytes_mem, count_mem, bytes_disk, count_disk, byte_cap = limits
    i, count, total, max_phy_pulling, next_phy_file_start, lo, hi, readable = cursor
    n = min(n, len(buf) // CQ_STORE_UNIT_SIZE)
    records: list[memoryview] = []
    taken: list[int] = []
    stop = SCAN_END
    for offset, size, code in _ENTRY.iter_unpack(buf[i * CQ_STORE_UNIT_SIZE : max(n, i) * CQ_STORE_UNIT_SIZE]):
        max_phy_pulling = offset
        if next_phy_file_start != -1 and offset < next_phy_file_start:
            i += 1
            continue
        if count:
            if max_count <= count:
                stop = SCAN_FULL
                break
            if max_offset_py - offset > memory:  # on disk
                if total + size > bytes_disk or count > count_disk - 1:
                    stop = SCAN_FULL
                    break
            elif total + size > bytes_mem or count > count_mem - 1:
                stop = SCAN_FULL
                break
            if total + size > byte_cap:
                stop = SCAN_FULL
                break
        if codes is not None and code > MAX_ADDR and code not in codes:
            i += 1
            continue
        if size <= 0 or not lo <= offset < hi or offset - lo + size > readable or view is None:
            stop = SCAN_WINDOW
            break
        pos = offset - lo
        records.append(view[pos : pos + size])
        taken.append(i)
        total += size
        count += 1
        next_phy_file_start = -1
        i += 1
    return stop, (i, count, total, max_phy_pulling, next_phy_file_start, lo, hi, readable), records, taken


class ConsumeQueue:
    def __init__(
        self,
        topic: str,
        queue_id: int,
        root_dir: str,
        mapped_file_size: int,
        ext_root_dir: str | None = None,
        ext_file_size: int = 48 * 1024 * 1024,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        self.store_path = os.path.join(root_dir, topic, str(queue_id))
        self.mapped_file_queue = MappedFileQueue(self.store_path, mapped_file_size)
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        # enableConsumeQueueExt: each entry's tagsCode field addresses a unit there
        self.ext = ConsumeQueueExt(topic, queue_id, ext_root_dir, ext_file_size) if ext_root_dir else None

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic!r}, {self.queue_id})"

    def load(self) -> bool:
        return self.mapped_file_queue.load() and (self.ext is None or self.ext.load())

    @staticmethod
    def _last_ext_addr(codes: np.ndarray) -> int | None:
        found = np.flatnonzero(codes <= MAX_ADDR)
        return int(codes[found[-1]]) if len(found) else None

    # -- recovery ----------------------------------------------------------------------

    def recover(self, check_from_phy_offset: int | None = None) -> None:
        """Find the last valid entry in the last 3 files and truncate after it.

        ``check_from_phy_offset``: entries of records from that CommitLog offset on may have
        been lost anywhere (a power cut): the scan starts early enough to check them all."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            return
        index = max(0, len(files) - 3)
        size = self.mapped_file_size
        if check_from_phy_offset is not None:
            while index > 0:
                first = _ENTRY.unpack_from(files[index].mmap, 0)
                # a first entry on disk for a record before the durable point: earlier files hold
                # only earlier records; a zero entry is a page that never reached the disk
                if first[1] > 0 and (first[1] == FILLER_SIZE or 0 <= first[0] < check_from_phy_offset):
                    break
                index -= 1
        mf = files[index]
        process_offset = mf.file_from_offset
        file_offset = 0
        max_ext_addr = None
        while True:
            arr = np.frombuffer(mf.mmap, dtype=ENTRY_DTYPE, count=size // CQ_STORE_UNIT_SIZE)
            valid = (arr["offset"] >= 0) & (arr["size"] > 0)
            bad = np.flatnonzero(~valid)
            n_valid = int(bad[0]) if len(bad) else len(arr)
            real = np.flatnonzero(arr["size"][:n_valid] != FILLER_SIZE)  # blank fillers point nowhere
            if len(real):
                last = arr[int(real[-1])]
                self.max_physic_offset = int(last["offset"]) + int(last["size"])
                found = self._last_ext_addr(arr["tags_code"][real]) if self.ext is not None else None
                max_ext_addr = found if found is not None else max_ext_addr
            del arr, valid, real
            file_offset = n_valid * CQ_STORE_UNIT_SIZE
            if file_offset == size:
                index += 1
                if index >= len(files):
                    break
                mf = files[index]
                process_offset = mf.file_from_offset
                file_offset = 0
            else:
                break
        process_offset += file_offset
        mfq = self.mapped_file_queue
        mfq.flushed_where = mfq.committed_where = process_offset
        mfq.truncate_dirty_files(process_offset)
        if self.ext is not None:
            self.ext.recover()
            if max_ext_addr is not None:
                self.ext.truncate_by_max_address(max_ext_addr)

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop entries for records at or past ``phy_offset`` (the CommitLog's valid end).

        An entry goes when its record starts at or after the cut (RocketMQ's rule) or runs
        past it; blank filler entries (offset 0) before a queue's first real entry stay.
        max_physic_offset is left at the end of the last entry kept.
        """
        mfq = self.mapped_file_queue
        while True:
            mf = mfq.get_last_mapped_file()
            if mf is None:
                self.max_physic_offset = -1
                return
            n = mf.wrote_position // CQ_STORE_UNIT_SIZE
            arr = np.frombuffer(mf.mmap, dtype=ENTRY_DTYPE, count=n)
            sizes = arr["size"].astype(np.int64)
            past = (arr["offset"] >= phy_offset) | ((arr["offset"] + sizes > phy_offset) & (sizes != FILLER_SIZE))
            bad = np.flatnonzero(past)
            first_bad = int(bad[0]) if len(bad) else n
            real = np.flatnonzero(arr["size"][:first_bad] != FILLER_SIZE)
            last_end = int(arr["offset"][real[-1]]) + int(arr["size"][real[-1]]) if len(real) else -1
            max_ext_addr = self._last_ext_addr(arr["tags_code"][real]) if self.ext is not None else None
            del arr
            if first_bad == 0 and len(mfq.mapped_files) > 1:
                # all of it goes; an empty last file (rolled, then killed before its first
                # entry) says nothing, and the entries to check are in the file before it
                mfq.delete_last_mapped_file()
                continue
            # a sole file is emptied rather than deleted, so the queue keeps its logical
            # offset (retention may have removed the files before it)
            if first_bad < n:
                mf.zero_range(first_bad * CQ_STORE_UNIT_SIZE, mf.wrote_position)
                mf.set_positions(first_bad * CQ_STORE_UNIT_SIZE)
            self.max_physic_offset = last_end
            if self.ext is not None and max_ext_addr is not None:
                self.ext.truncate_by_max_address(max_ext_addr)
            return

    # -- offsets -----------------------------------------------------------------------

    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def roll_next_file(self, index: int) -> int:
        units = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return index + units - index % units

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """Set the min logical offset to the first entry whose record is still in the CommitLog."""
        mf = self.mapped_file_queue.get_first_mapped_file()
        if mf is None or not mf.hold():  # a file being deleted is skipped, not read
            return
        try:
            n = mf.read_position // CQ_STORE_UNIT_SIZE
            if n == 0:  # emptied by truncation, or rolled after retention: the queue starts here
                self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset)
                return
            arr = np.frombuffer(mf.mmap, dtype=ENTRY_DTYPE, count=n)
            ok = np.flatnonzero(arr["offset"] >= min_commit_log_offset)
            first_code = int(arr["tags_code"][ok[0]]) if len(ok) else 0
            del arr
        finally:
            mf.release()
        if len(ok):
            self.min_logic_offset = mf.file_from_offset + int(ok[0]) * CQ_STORE_UNIT_SIZE
            if self.ext is not None:
                self.ext.truncate_by_min_address(first_code)
        else:
            self.min_logic_offset = mf.file_from_offset + n * CQ_STORE_UNIT_SIZE

    # -- write -------------------------------------------------------------------------

    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        if offset + size <= self.max_physic_offset:
            return True  # already built (re-dispatch is idempotent)
        return self.put_entries(cq_offset, _ENTRY.pack(offset, size, tags_code), offset + size)

    def put_entries(self, cq_offset: int, entries: bytes | memoryview, max_physic_offset: int) -> bool:
        """Append packed entries whose first has logical offset ``cq_offset``."""
        mfq = self.mapped_file_queue
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        data = memoryview(entries)
        while len(data):
            mf = mfq.get_last_mapped_file_create(expect)
            if mf is None:  # the queue logged why (once); dispatch retries
                return False
            if mf.first_create_in_queue and cq_offset != 0 and mf.wrote_position == 0 and expect > mf.file_from_offset:
                self.min_logic_offset = expect
                mfq.flushed_where = mfq.committed_where = expect
                pad = expect - mf.file_from_offset
                mf.append_message(self._blank(pad))
                log.info("fill pre blank space %s %d", mf.file_name, expect)
            current = mf.file_from_offset + mf.wrote_position
            if expect < current:
                skip = current - expect
                log.warning("Build consume queue repeatedly, expect %d current %d, skip", expect, current)
                if skip >= len(data):
                    return True
                data = data[skip:]
                expect = current
            elif expect > current:
                # Records between were lost before dispatch reached them (e.g. deleted by
                # retention after a crash). RocketMQ appends here anyway, shifting every later
                # entry off its QUEUEOFFSET; pad with blank entries so offsets stay true.
                pad = min(expect - current, mf.file_size - mf.wrote_position)
                log.warning(
                    "logic queue %s:%d has a gap, expectLogicOffset: %d currentLogicOffset: %d: %d blank entries",
                    self.topic, self.queue_id, expect, current, pad // CQ_STORE_UNIT_SIZE,
                )  # fmt: skip
                mf.append_message(self._blank(pad))
                continue
            room = mf.file_size - mf.wrote_position
            chunk = data[:room]
            mf.append_message(chunk)
            expect += len(chunk)
            data = data[len(chunk) :]
        self.max_physic_offset = max_physic_offset
        return True

    @staticmethod
    def _blank(n: int) -> bytes:
        # blank entries: offset 0, size 0x7fffffff, tagsCode 0 (RocketMQ's fillPreBlank)
        return _ENTRY.pack(0, FILLER_SIZE, 0) * (n // CQ_STORE_UNIT_SIZE)

    # -- read --------------------------------------------------------------------------

    def get_index_buffer(self, start_index: int) -> SelectMappedBufferResult | None:
        """Entries from ``start_index`` to the end of that file's written data."""
        offset = start_index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.mapped_file_size)

    def get_entry(self, index: int) -> tuple[int, int, int] | None:
        """(commitLogOffset, size, tagsCode), the tagsCode read from the extension when the
        entry holds an address (left as it is when the unit is gone)."""
        sbr = self.get_index_buffer(index)
        if sbr is None:
            return None
        try:
            offset, size, code = _ENTRY.unpack_from(sbr.buffer, 0)
        finally:
            sbr.release()
        return offset, size, self.real_tags_code(code)

    def real_tags_code(self, code: int) -> int:
        if self.ext is None or not is_ext_addr(code):
            return code
        unit = self.ext.get(code)
        return code if unit is None else unit.tags_code

    def delete_expired_file(self, min_commit_log_offset: int) -> int:
        """Delete files (never the last) whose last entry points below the CommitLog's min offset.

        Then move the min logical offset to the first entry still in the CommitLog. Returns
        the number of files deleted.
        """
        mfq = self.mapped_file_queue
        count = mfq.delete_expired_file_by_offset(min_commit_log_offset, CQ_STORE_UNIT_SIZE)
        files = mfq.mapped_files
        if not files:
            return count
        first = files[0]
        if first.hold():  # keeps the map open while correct_min_offset reads it
            try:
                self.correct_min_offset(min_commit_log_offset)
            finally:
                first.release()
        else:
            # Left hanging by a reader or the flusher: every entry in it points below the min
            # (that is why it was destroyed) and its map may be gone. Start after it.
            self._correct_min_offset_in(files[1] if len(files) > 1 else None, min_commit_log_offset)
            self.min_logic_offset = max(self.min_logic_offset, first.file_from_offset + self.mapped_file_size)
        return count

    def _correct_min_offset_in(self, mf: MappedFile | None, min_commit_log_offset: int) -> None:
        """``correct_min_offset`` over ``mf`` instead of the first file (which is hanging)."""
        if mf is None or not mf.hold():
            return
        try:
            n = mf.read_position // CQ_STORE_UNIT_SIZE
            arr = np.frombuffer(mf.mmap, dtype=ENTRY_DTYPE, count=n)
            ok = np.flatnonzero(arr["offset"] >= min_commit_log_offset)
            first_code = int(arr["tags_code"][ok[0]]) if len(ok) else 0
            del arr
            self.min_logic_offset = mf.file_from_offset + (int(ok[0]) if len(ok) else n) * CQ_STORE_UNIT_SIZE
            if self.ext is not None:
                self.ext.truncate_by_min_address(first_code)
        finally:
            mf.release()

    def destroy(self) -> None:
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.mapped_file_queue.destroy()
        if self.ext is not None:
            self.ext.destroy()

    def flush(self, flush_least_pages: int) -> bool:
        # the units first: a flushed entry never addresses a unit that was not (4.9 flushes the
        # queue first)
        ext_done = self.ext.flush(flush_least_pages) if self.ext is not None else True
        return self.mapped_file_queue.flush(flush_least_pages) and ext_done

    def flush_all(self) -> None:
        """Flush every file with unflushed entries (``flush`` does one file a call: a queue
        that rolled since the last flush has two or more)."""
        files = len(self.mapped_file_queue.mapped_files)
        if self.ext is not None:
            files += len(self.ext.mapped_file_queue.mapped_files)
        for _ in range(files + 1):
            if self.flush(0):
                break

    def shutdown(self) -> None:
        """Flush and unmap; the files are unmapped even when the flush fails (StoreIOError)."""
        try:
            if self.ext is not None:
                self.ext.shutdown()
        finally:
            try:
                self.mapped_file_queue.flush(0)
            finally:
                self.mapped_file_queue.shutdown()
