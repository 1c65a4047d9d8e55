"""DLedgerMmapFileStore: a DLedger node's log on disk (dledger 0.3.1.2,
``store/file/DLedgerMmapFileStore.java`` and ``MmapFileList.java``), byte for byte.

Files under ``DLedgerConfig.default_path`` (``<storePathRootDir>/dledger-<selfId>``):

================  =========================================================================
path              content
================  =========================================================================
data/<20 digits>  entries (``dledger_entry``: 48-byte header + body), files of
                  ``mapped_file_size_for_entry_data`` named by their first byte's offset;
                  an entry of n bytes goes in only if n + 8 bytes are left, else the rest
                  of the file is a blank (int -1, int the rest's length) and the entry
                  starts the next file
index/<20 digits> one 32-byte unit per entry at ``index * 32`` (magic, pos, size, index,
                  term), files of ``mapped_file_size_for_entry_index`` (sparse)
checkpoint        ``key=value`` lines, as ``java.util.Properties`` on Java 17 lists them:
                  ``committedIndex=<n>`` then ``endIndex=<n>``; the previous version in
                  ``checkpoint.bak``
================  =========================================================================

Positions are absolute offsets in the data files; an entry's ``pos`` is its first byte.
``committed_pos`` is the end offset of the committed entry: the broker may read and
dispatch everything before it.

Beyond DLedger, with the same bytes (docs/COMPATIBILITY.md): the checkpoint is written
through ``atomic_write`` (fsynced, then renamed, then the directory fsynced); space is
reserved before a write goes through the map, so a full disk is ``DLedgerError(DISK_FULL)``
and never a SIGBUS; a follower's entry at the wrong position is refused before anything
is written (DLedger writes it, then refuses); a failed index write takes its data entry
back; a truncation zeroes what it cuts (DLedger leaves the old bytes, which its recovery
then has to stop at); and a recovery that would cut more than a file logs and raises
instead of exiting the process.

Threads: one re-entrant lock guards appends, truncations, reads of entries and the
ledger's indexes. The flush thread flushes without it, under a second lock that
truncations also take, so an append never waits for an msync.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

from pumice.common.atomic_file import atomic_write
from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import (
    BLANK_MAGIC_CODE,
    BLANK_SIZE,
    BODY_OFFSET,
    CURRENT_MAGIC,
    HEADER_SIZE,
    INDEX_UNIT_SIZE,
    MAGIC_1,
    DLedgerEntry,
    decode_entry,
    decode_header,
    decode_index_unit,
    encode_blank,
    encode_entry,
    encode_index_unit,
)
from pumice.dledger.dledger_response_code import DLedgerError, DLedgerResponseCode
from pumice.store.clean_commit_log_service import is_it_time_to_do
from pumice.store.disk_io import StoreIOError
from pumice.store.mapped_file import MappedFile
from pumice.store.mapped_file_queue import MappedFileQueue
from pumice.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

CHECK_POINT_FILE = "checkpoint"
END_INDEX_KEY = "endIndex"
COMMITTED_INDEX_KEY = "committedIndex"
# CleanSpaceService's constants
CLEAN_INTERVAL_MS = 100
DELETE_FILES_INTERVAL_MS = 100
DESTROY_INTERVAL_FORCIBLY_MS = 120 * 1000
HOUR_MS = 3600 * 1000

AppendHook = Callable[[DLedgerEntry, bytearray], None]
AppendListener = Callable[[list[DLedgerEntry]], None]


def disk_used_ratio(path: str) -> float:
    """DLedger's ``getDiskPartitionSpaceUsedPercent``: used / (used + available to users),
    rounded up to a hundredth; -1 for a path that does not exist."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    percent = used * 100 // entire + (1 if used * 100 % entire else 0)
    return percent / 100.0


def disk_full_ratio(config: DLedgerConfig) -> float:
    """DLedgerConfig.getDiskFullRatio: force-clean ratio + 0.05, at most 0.95."""
    return min(0.95, _force_clean_ratio(config) + 0.05)


def _force_clean_ratio(config: DLedgerConfig) -> float:
    # getDiskSpaceRatioToForceClean: a ratio under 0.50 counts as 0.50
    return max(0.50, config.disk_space_ratio_to_force_clean)


def _io_error(e: OSError, what: str) -> DLedgerError:
    full = e.errno in (errno.ENOSPC, errno.EDQUOT)
    return DLedgerError(DLedgerResponseCode.DISK_FULL if full else DLedgerResponseCode.DISK_ERROR, f"{what}: {e}")


def _unlink_held(files: list[MappedFile]) -> None:
    """Files cut from a queue that a reader still maps are not deleted by ``destroy``; their
    names go now, or the next file made at the same offset would open their old entries
    (the reader keeps its map until it lets go)."""
    for mf in files:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(mf.file_name)
            log.warning("%s was cut while still read: unlinked, unmapped when the reader lets go", mf.file_name)


def parse_properties(text: str) -> dict[str, str]:
    """The ``key=value`` lines of a Properties file (``#``/``!`` comments, ``:`` too)."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            props[line] = ""
        else:
            props[line[:cut].strip()] = line[cut + 1 :].strip()
    return props


class DLedgerMmapFileStore:
    """Data and index files, checkpoint, recovery, appends, truncation, expiry.

    ``current_term`` (the member state's term) lets ``update_committed_index`` skip a
    commit of an older term, as DLedger does; without it the caller checks.
    """

    def __init__(self, config: DLedgerConfig, current_term: Callable[[], int] | None = None) -> None:
        self.config = config
        self._current_term = current_term
        self.data_file_queue = MappedFileQueue(config.data_path, config.mapped_file_size_for_entry_data)
        self.index_file_queue = MappedFileQueue(config.index_path, config.mapped_file_size_for_entry_index)
        self._lock = threading.RLock()
        self._flush_lock = threading.RLock()
        self._ledger_begin_index = -1
        self._ledger_end_index = -1
        self._ledger_end_term = -1
        self._committed_index = -1
        self._committed_pos = -1
        # where the first data file's first entry starts (not 0 after rebuild_with_pos)
        self._data_start_pos = 0
        self._append_hooks: list[AppendHook] = []
        self._append_listeners: list[AppendListener] = []
        self.is_disk_full = False
        self._loaded = False
        self._recovered = False
        self._flush_service: _FlushDataService | None = None
        self._clean_service: _CleanSpaceService | None = None
        self.enable_clean_space_service = True

    # -- properties ----------------------------------------------------------------------

    @property
    def ledger_begin_index(self) -> int:
        return self._ledger_begin_index

    @property
    def ledger_end_index(self) -> int:
        return self._ledger_end_index

    @property
    def ledger_end_term(self) -> int:
        return self._ledger_end_term

    @property
    def committed_index(self) -> int:
        return self._committed_index

    @property
    def committed_pos(self) -> int:
        return self._committed_pos

    @property
    def write_pos(self) -> int:
        """Where the next entry's bytes would start (before any blank)."""
        return self.data_file_queue.get_max_wrote_position()

    @property
    def flush_pos(self) -> int:
        return self.data_file_queue.flushed_where

    def add_append_hook(self, hook: AppendHook) -> None:
        """``hook(entry, body)`` runs for every leader append after pos is set, before the
        write; it may patch ``body`` in place (RocketMQ writes pos + 48 into the record)."""
        if hook not in self._append_hooks:
            self._append_hooks.append(hook)

    def add_append_listener(self, listener: AppendListener) -> None:
        """``listener(entries)`` runs after each leader append, outside the lock (the pusher
        wakes on it). An exception in it is logged, never raised to the appender."""
        if listener not in self._append_listeners:
            self._append_listeners.append(listener)

    # -- load and recover ----------------------------------------------------------------

    def load(self) -> None:
        """Map the data and index files (each counted full until recovery); DISK_ERROR for a
        file of the wrong size or a gap between files (DLedger exits the process)."""
        with self._lock:
            if self._loaded:
                return
            for q in (self.data_file_queue, self.index_file_queue):
                if not q.load():
                    raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"load of {q.store_path} failed, check it")
            self._loaded = True
            first = self.data_file_queue.get_first_mapped_file()
            self._data_start_pos = first.file_from_offset if first is not None else 0

    def start_data_at(self, offset: int) -> None:
        """Create the first data file at ``offset`` (a multiple of the file size): 4.9's
        DLedgerCommitLog does this when it finds an old CommitLog and no DLedger files, so
        the first entry's pos goes on from the old files' end. Call between ``load()`` and
        ``recover()``."""
        size = self.data_file_queue.mapped_file_size
        with self._lock:
            if self.data_file_queue.mapped_files:
                raise DLedgerError(DLedgerResponseCode.UNEXPECTED_ARGUMENT, "the data files are not empty")
            if offset < 0 or offset % size:
                raise DLedgerError(
                    DLedgerResponseCode.UNEXPECTED_ARGUMENT, f"offset {offset} is not a multiple of {size}"
                )
            if self.data_file_queue.get_last_mapped_file_create(offset) is None:
                raise self._create_error(self.data_file_queue)
            self._data_start_pos = offset

    def load_and_recover(self) -> None:
        self.load()
        self.recover()

    def recover(self) -> None:
        """DLedger's recovery (DLEDGER.md §3.6): walk the entries from the third-last data
        file, check each against the rules and its index unit, rebuild the index from the
        first unit that disagrees, cut data and index after the last good entry, then load
        the checkpoint's committed index (capped at the end)."""
        with self._lock, self._flush_lock:
            if self._recovered:
                return
            self.load()
            self._recovered = True
            self._check_contiguous("before recovery")
            files = self.data_file_queue.mapped_files
            if not files:
                self._truncate_queue(self.index_file_queue, 0)
                return
            process_offset, last_index, last_term = self._walk(files)
            last_file = files[-1]
            if last_file.file_from_offset - process_offset > last_file.file_size:
                raise DLedgerError(
                    DLedgerResponseCode.DISK_ERROR,
                    f"recovery ends at {process_offset}, more than a file before the last file "
                    f"{last_file.file_name}: check the data files by hand before anything is cut",
                )
            self._ledger_end_index = last_index
            self._ledger_end_term = last_term
            if last_index != -1:
                entry = self.get(last_index)
                if entry.index != last_index:
                    raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"recheck index {entry.index} != {last_index}")
                self._revise_ledger_begin_index()
            self._truncate_queue(self.data_file_queue, process_offset)
            self._truncate_queue(self.index_file_queue, (last_index + 1) * INDEX_UNIT_SIZE)
            self._check_contiguous("after recovery")
            log.info(
                "DLedger store %s recovered: begin %d, end %d (term %d), write position %d",
                self.config.default_path, self._ledger_begin_index, last_index, last_term, process_offset,
            )  # fmt: skip
            props = self.load_checkpoint()
            committed = (props or {}).get(COMMITTED_INDEX_KEY, "").strip()
            if committed:
                try:
                    value = int(committed)
                except ValueError:
                    log.error("checkpoint committedIndex %r is not a number: ignored", committed)
                    return
                term = self._current_term() if self._current_term is not None else self._ledger_end_term
                self.update_committed_index(term, value)

    def _check_contiguous(self, when: str) -> None:
        for q in (self.data_file_queue, self.index_file_queue):
            files = q.mapped_files
            for prev, cur in itertools.pairwise(files):
                if cur.file_from_offset - prev.file_from_offset != q.mapped_file_size:
                    raise DLedgerError(
                        DLedgerResponseCode.DISK_ERROR,
                        f"check file order failed {when}: {prev.file_name} then {cur.file_name}",
                    )

    def _first_entry_checks_out(self, mf: MappedFile) -> bool:
        """Does the file's first entry agree with itself and its index unit?"""
        magic, size, index, term, pos, _, _, _, body_len = decode_header(mf.mmap[:BODY_OFFSET])
        if magic == BLANK_MAGIC_CODE or magic < MAGIC_1 or size <= HEADER_SIZE:
            return False
        if pos != mf.file_from_offset or body_len + BODY_OFFSET != size:
            return False
        unit = self._read_index_unit(index)
        return unit is not None and unit == (magic, mf.file_from_offset, size, index, term)

    def _read_index_unit(self, index: int) -> tuple[int, int, int, int, int] | None:
        if index < 0:
            return None
        q = self.index_file_queue
        offset = index * INDEX_UNIT_SIZE
        mf = q.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        rel = offset - mf.file_from_offset
        if rel + INDEX_UNIT_SIZE > mf.read_position:
            return None
        return decode_index_unit(mf.mmap[rel : rel + INDEX_UNIT_SIZE])

    def _walk(self, files: list[MappedFile]) -> tuple[int, int, int]:
        """(end offset, last index, last term) of the entries that check out."""
        i = max(0, len(files) - 3)
        for j in range(i, -1, -1):
            i = j
            if self._first_entry_checks_out(files[j]):
                break
            log.warning("the first entry of %s does not check out against the index", files[j].file_name)
        mf = files[i]
        rel = 0
        last_index = last_term = -1
        process_offset = mf.file_from_offset
        write_index = False
        log.info("recover the DLedger data from %s (file %d of %d)", mf.file_name, i + 1, len(files))
        while True:
            abs_pos = mf.file_from_offset + rel
            if rel + 8 > mf.file_size:
                break
            magic = int.from_bytes(mf.mmap[rel : rel + 4], "big", signed=True)
            if magic == BLANK_MAGIC_CODE:
                process_offset = mf.file_from_offset + mf.file_size
                i += 1
                if i >= len(files):
                    break
                mf, rel = files[i], 0
                process_offset = mf.file_from_offset
                continue
            size = int.from_bytes(mf.mmap[rel + 4 : rel + 8], "big", signed=True)
            if size == 0:
                break
            why = self._entry_breaks_rules(mf, rel, abs_pos, last_index, last_term)
            if why is not None:
                log.info("recovery stops at %d in %s: %s", abs_pos, mf.file_name, why)
                break
            _, size, index, term, *_ = decode_header(mf.mmap[rel : rel + BODY_OFFSET])
            if not write_index and self._read_index_unit(index) != (magic, abs_pos, size, index, term):
                log.warning("the index disagrees with entry %d at %d: rebuilt from there", index, abs_pos)
                try:
                    self._cut_index_for(index)
                except DLedgerError as e:
                    log.error("recovery stops at entry %d: %s", index, e)
                    break
                write_index = True
            if write_index:
                try:
                    self._append_index_unit(magic, abs_pos, size, index, term)
                except DLedgerError as e:
                    log.error("recovery stops at entry %d: %s", index, e)
                    break
            last_index, last_term = index, term
            process_offset += size
            rel += size
        return process_offset, last_index, last_term

    @staticmethod
    def _entry_breaks_rules(mf: MappedFile, rel: int, abs_pos: int, last_index: int, last_term: int) -> str | None:
        if rel + BODY_OFFSET > mf.file_size:
            return "a header past the file's end"
        magic, size, index, term, pos, _, _, _, body_len = decode_header(mf.mmap[rel : rel + BODY_OFFSET])
        if pos != abs_pos:
            return f"pos {pos} != {abs_pos}"
        if body_len + BODY_OFFSET != size:
            return f"size {size} != {body_len} + {BODY_OFFSET}"
        if size < 0 or rel + size > mf.file_size:
            return f"size {size} past the file's end"
        if not MAGIC_1 <= magic <= CURRENT_MAGIC:
            return f"magic {magic}"
        if last_index != -1 and index != last_index + 1:
            return f"index {index} after {last_index}"
        if term < last_term:
            return f"term {term} after {last_term}"
        if size <= HEADER_SIZE:
            return f"size {size} <= {HEADER_SIZE}"
        return None

    def _cut_index_for(self, index: int) -> None:
        """Cut the index list at ``index`` so its next unit goes there (rebuilt if it cannot)."""
        offset = index * INDEX_UNIT_SIZE
        q = self.index_file_queue
        self._truncate_queue(q, offset)
        if q.get_max_wrote_position() != offset:
            self._rebuild_with_pos(q, offset)

    def _revise_ledger_begin_index(self) -> None:
        """The begin index is the first data file's first entry's; index files wholly before
        it go (DLedger's ``resetOffset``)."""
        first = self.data_file_queue.get_first_mapped_file()
        if first is None:
            return
        rel = max(0, self._data_start_pos - first.file_from_offset)
        if rel + 16 > first.read_position:
            return
        self._ledger_begin_index = int.from_bytes(first.mmap[rel + 8 : rel + 16], "big", signed=True)
        offset = self._ledger_begin_index * INDEX_UNIT_SIZE
        q = self.index_file_queue
        gone = [mf for mf in q.mapped_files if mf.file_from_offset + q.mapped_file_size <= offset]
        for mf in gone:
            mf.destroy(10 * 1000)
        q.delete_expired_file(gone)

    # -- queue primitives ----------------------------------------------------------------

    def _truncate_queue(self, q: MappedFileQueue, offset: int) -> None:
        """DLedger's ``truncateOffset`` (zeroing what is cut) and ``updateWherePosition``."""
        with self._flush_lock:
            before = q.mapped_files
            try:
                q.truncate_dirty_files(offset)
            except StoreIOError as e:
                raise _io_error(e, f"truncate {q.store_path} at {offset}") from e
            finally:
                kept = {id(mf) for mf in q.mapped_files}
                _unlink_held([mf for mf in before if id(mf) not in kept])
            self._revise_where(q, offset)

    @staticmethod
    def _revise_where(q: MappedFileQueue, offset: int) -> None:
        first = q.get_first_mapped_file()
        where = min(q.flushed_where, offset)
        if first is not None:
            where = max(where, first.file_from_offset)
        where = min(where, q.get_max_wrote_position())
        q.flushed_where = q.committed_where = where

    def _rebuild_with_pos(self, q: MappedFileQueue, pos: int) -> None:
        """DLedger's ``rebuildWithPos``: every file goes, one file starts at ``pos``."""
        with self._flush_lock:
            gone = list(q.mapped_files)
            for old in gone:
                old.destroy(10 * 1000)
            q.delete_expired_file(gone)
            _unlink_held(gone)
            mf = q.get_last_mapped_file_create(pos)
            if mf is None:
                raise self._create_error(q)
            mf.set_positions(pos - mf.file_from_offset)
            q.flushed_where = q.committed_where = pos
            if q is self.data_file_queue:
                self._data_start_pos = pos
            if q.get_max_wrote_position() != pos:
                raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"rebuild {q.store_path} at {pos} failed")

    @staticmethod
    def _create_error(q: MappedFileQueue) -> DLedgerError:
        e = q.last_create_error
        if e is None:
            return DLedgerError(DLedgerResponseCode.DISK_ERROR, f"no file could be created in {q.store_path}")
        return _io_error(e, f"create a file in {q.store_path}")

    def _writable_file(self, q: MappedFileQueue) -> MappedFile:
        mf = q.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = q.get_last_mapped_file_create(0)
        if mf is None:
            raise self._create_error(q)
        return mf

    def _place(self, q: MappedFileQueue, length: int, use_blank: bool) -> tuple[int, bool]:
        """(where ``length`` bytes would go, whether a blank closes the last file first),
        without changing anything (``preAppend``'s arithmetic)."""
        mf = q.get_last_mapped_file()
        size = q.mapped_file_size
        if mf is None:
            return 0, False
        if mf.is_full():
            return mf.file_from_offset + size, False
        left = size - mf.wrote_position
        if length + (BLANK_SIZE if use_blank else 0) > left:
            if not use_blank:
                raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"{length} bytes do not fit {q.store_path}")
            return mf.file_from_offset + size, True
        return mf.file_from_offset + mf.wrote_position, False

    def _pre_append(self, q: MappedFileQueue, length: int) -> int:
        """DLedger's ``preAppend`` with a blank: close the last file with a blank if the
        entry and 8 bytes do not fit; returns where the entry will start."""
        mf = self._writable_file(q)
        left = mf.file_size - mf.wrote_position
        if length + BLANK_SIZE > left:
            try:
                mf.close_with_blank(mf.wrote_position, encode_blank(left))
            except StoreIOError as e:
                raise _io_error(e, f"close {mf.file_name} with a blank") from e
            mf = self._writable_file(q)
        return mf.file_from_offset + mf.wrote_position

    def _write(self, q: MappedFileQueue, data: bytes | bytearray, at: int) -> None:
        """Write ``data`` at ``at`` (the last file's write position, checked by the caller)."""
        mf = self._writable_file(q)
        rel = at - mf.file_from_offset
        if rel != mf.wrote_position or rel + len(data) > mf.file_size:
            raise DLedgerError(
                DLedgerResponseCode.DISK_ERROR, f"write at {at} but {q.store_path} is at {q.get_max_wrote_position()}"
            )
        try:
            mf.write_at(rel, data)
        except StoreIOError as e:
            raise _io_error(e, f"write {len(data)} bytes at {at} in {mf.file_name}") from e
        mf.wrote_position = mf.committed_position = rel + len(data)

    def _take_back(self, q: MappedFileQueue, at: int) -> None:
        """Undo the last write at ``at`` (its index unit could not be written)."""
        try:
            self._truncate_queue(q, at)
        except DLedgerError:
            log.exception("could not take back the data at %d", at)

    def _append_index_unit(self, magic: int, pos: int, size: int, index: int, term: int) -> None:
        q = self.index_file_queue
        expected = index * INDEX_UNIT_SIZE
        at, _ = self._place(q, INDEX_UNIT_SIZE, use_blank=False)
        if at != expected:
            raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"index unit {index} would go at {at}, not {expected}")
        self._write(q, encode_index_unit(magic, pos, size, index, term), at)

    def _append_entry(self, data: bytes | bytearray, entry: DLedgerEntry) -> None:
        """Write a placed entry's data and index unit; the data is taken back if its unit
        cannot be written, so the two never disagree."""
        self._write(self.data_file_queue, data, entry.pos)
        try:
            self._append_index_unit(entry.magic, entry.pos, entry.size, entry.index, entry.term)
        except DLedgerError:
            self._take_back(self.data_file_queue, entry.pos)
            raise

    # -- appends -------------------------------------------------------------------------

    def append_as_leader(
        self, entries: Sequence[DLedgerEntry], term: int, hook: AppendHook | None = None
    ) -> list[DLedgerEntry]:
        """Place and write ``entries`` as the leader of ``term``: each gets index, term, magic
        and pos, the hooks patch its body, then data and index are written. An error stops
        at the failing entry; those before it stay appended (as DLedger's batch)."""
        done: list[DLedgerEntry] = []
        try:
            with self._lock:
                for entry in entries:
                    self._check_writable()
                    entry.index = self._ledger_end_index + 1
                    entry.term = term
                    entry.magic = CURRENT_MAGIC
                    size = entry.compute_size_in_bytes()
                    entry.pos = self._pre_append(self.data_file_queue, size)
                    hooks = [*self._append_hooks, hook] if hook is not None else self._append_hooks
                    if hooks:
                        body = bytearray(entry.body)
                        for h in hooks:
                            h(entry, body)
                        if len(body) != len(entry.body):
                            raise DLedgerError(DLedgerResponseCode.UNEXPECTED_ARGUMENT, "a hook resized the body")
                        entry.body = bytes(body)
                    self._append_entry(encode_entry(entry), entry)
                    self._ledger_end_index = entry.index
                    self._ledger_end_term = term
                    if self._ledger_begin_index == -1:
                        self._ledger_begin_index = entry.index
                    done.append(entry)
        finally:
            if done:
                self._notify(done)
        return done

    def _check_writable(self) -> None:
        if self.is_disk_full:
            raise DLedgerError(
                DLedgerResponseCode.DISK_FULL,
                f"the disk of {self.config.data_path} is over {disk_full_ratio(self.config):.2f} used",
            )

    def _notify(self, entries: list[DLedgerEntry]) -> None:
        for listener in self._append_listeners:
            try:
                listener(entries)
            except Exception:
                log.exception("append listener %r failed", listener)

    def append_as_follower(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> DLedgerEntry:
        """Write the leader's entry as it is: its index must be the next one
        (INCONSISTENT_INDEX) and its pos this store's write position (DISK_ERROR), checked
        before anything is written. The term and leader are the Raft node's to check."""
        with self._lock:
            self._check_writable()
            if entry.index != self._ledger_end_index + 1:
                raise DLedgerError(
                    DLedgerResponseCode.INCONSISTENT_INDEX,
                    f"entry index {entry.index} != next index {self._ledger_end_index + 1} (leader {leader_id}, "
                    f"term {leader_term})",
                )
            data = encode_entry(entry)
            at, _ = self._place(self.data_file_queue, entry.size, use_blank=True)
            if at != entry.pos:
                raise DLedgerError(
                    DLedgerResponseCode.DISK_ERROR, f"entry {entry.index} pos {entry.pos} != write position {at}"
                )
            if self._pre_append(self.data_file_queue, entry.size) != entry.pos:
                raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"entry {entry.index} pos {entry.pos} moved")
            self._append_entry(data, entry)
            self._ledger_end_index = entry.index
            self._ledger_end_term = entry.term
            if self._ledger_begin_index == -1:
                self._ledger_begin_index = entry.index
            return entry

    def truncate(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> int:
        """Make ``entry`` the last one (DLedger's ``truncate``): keep it if this store holds
        it, else cut the data at its pos and write it; the index is cut at its unit and
        the unit written. Returns the new ledger end index."""
        data = encode_entry(entry)
        with self._lock:
            try:
                existed = self.get(entry.index).same_as(entry)
            except DLedgerError:
                existed = False
            data_q = self.data_file_queue
            cut = entry.pos + entry.size if existed else entry.pos
            if cut != data_q.get_max_wrote_position():
                log.warning(
                    "[TRUNCATE] leader %s term %d index %d: cut at %d, the data ends at %d",
                    leader_id, leader_term, entry.index, cut, data_q.get_max_wrote_position(),
                )  # fmt: skip
            self._truncate_queue(data_q, cut)
            if data_q.get_max_wrote_position() != cut:
                log.warning("[TRUNCATE] the data files are rebuilt at %d", cut)
                self._rebuild_with_pos(data_q, cut)
            unit = (entry.magic, entry.pos, entry.size, entry.index, entry.term)
            try:
                if not existed:
                    at = self._pre_append(data_q, entry.size)
                    if at != entry.pos:
                        raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"truncate: {at} != entry pos {entry.pos}")
                    self._write(data_q, data, at)
                if existed and self._read_index_unit(entry.index) == unit:
                    # the unit DLedger would rewrite is there: no write, so a full disk can truncate
                    self._cut_index_for(entry.index + 1)
                else:
                    self._cut_index_for(entry.index)
                    self._append_index_unit(*unit)
            except DLedgerError:
                self._end_before(entry)
                raise
            self._ledger_end_index = entry.index
            self._ledger_end_term = entry.term
            self._revise_ledger_begin_index()
            if self._committed_index > entry.index:
                # never ahead of the log: what lies past it is gone
                self._committed_index = entry.index
                self._committed_pos = entry.pos + entry.size
            return entry.index

    def _end_before(self, entry: DLedgerEntry) -> None:
        """After a failed truncation: the log ends just before ``entry`` (data and index cut
        there), so the ledger's indexes never name what is not on disk."""
        try:
            self._truncate_queue(self.data_file_queue, entry.pos)
            self._truncate_queue(self.index_file_queue, entry.index * INDEX_UNIT_SIZE)
        except DLedgerError:
            log.exception("could not cut the log before entry %d", entry.index)
        self._ledger_end_index = entry.index - 1
        try:
            self._ledger_end_term = self.get(entry.index - 1).term
        except DLedgerError:
            self._ledger_end_term = -1
        if self._committed_index > self._ledger_end_index:
            self._committed_index = self._ledger_end_index
            self._committed_pos = entry.pos if self._ledger_end_index >= 0 else -1

    def rebuild_with_pos(self, pos: int) -> None:
        """Drop every data and index file and start the log at data offset ``pos`` (DLedger's
        ``MmapFileList.rebuildWithPos`` on both lists); the log is empty afterwards."""
        with self._lock:
            self._rebuild_with_pos(self.data_file_queue, pos)
            self._truncate_queue(self.index_file_queue, 0)
            self._ledger_begin_index = self._ledger_end_index = -1
            self._ledger_end_term = -1
            self._committed_index = self._committed_pos = -1

    # -- reads ---------------------------------------------------------------------------

    def _index_check(self, index: int) -> None:
        if index < 0:
            raise DLedgerError(DLedgerResponseCode.INDEX_OUT_OF_RANGE, f"{index} should gt 0")
        if index < self._ledger_begin_index:
            raise DLedgerError(
                DLedgerResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN,
                f"{index} should be gt {self._ledger_begin_index}, ledgerBeginIndex may be revised",
            )
        if index > self._ledger_end_index:
            raise DLedgerError(
                DLedgerResponseCode.INDEX_OUT_OF_RANGE,
                f"{index} should between {self._ledger_begin_index}-{self._ledger_end_index}",
            )

    def _pos_and_size(self, index: int) -> tuple[int, int]:
        self._index_check(index)
        unit = self._read_index_unit(index)
        if unit is None:
            raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"Get null index for {index}")
        return unit[1], unit[2]

    def get(self, index: int) -> DLedgerEntry:
        """The entry ``index``: INDEX_OUT_OF_RANGE past the end, INDEX_LESS_THAN_LOCAL_BEGIN
        before the begin, DISK_ERROR if data and index disagree."""
        with self._lock:
            pos, size = self._pos_and_size(index)
            mf = self.data_file_queue.find_mapped_file_by_offset(pos)
            rel = pos - mf.file_from_offset if mf is not None else -1
            if mf is None or size < BODY_OFFSET or rel + size > mf.read_position:
                raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"Get null data for {index}")
            try:
                entry = decode_entry(mf.mmap[rel : rel + size])
            except ValueError as e:
                raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"entry {index}: {e}") from e
            if entry.pos != pos:
                raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"{pos} != {entry.pos}")
            return entry

    # -- committed index -----------------------------------------------------------------

    def update_committed_index(self, term: int, index: int) -> None:
        """Move the committed index forward, capped at the ledger end; never back, never
        before the begin, nothing for a term older than the node's (when it is known)."""
        with self._lock:
            if index == -1 or self._ledger_end_index == -1 or index == self._committed_index:
                return
            if self._current_term is not None and term < self._current_term():
                return
            if index < self._committed_index or index < self._ledger_begin_index:
                log.warning(
                    "[MONITOR] skip the committed index %d: the old one is %d, the begin index %d",
                    index, self._committed_index, self._ledger_begin_index,
                )  # fmt: skip
                return
            index = min(index, self._ledger_end_index)
            pos, size = self._pos_and_size(index)
            self._committed_index = index
            self._committed_pos = pos + size

    # -- checkpoint ----------------------------------------------------------------------

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.config.default_path, CHECK_POINT_FILE)

    def persist_checkpoint(self) -> None:
        """Write ``committedIndex``/``endIndex`` (fsynced, renamed, directory fsynced); an
        error is logged, as DLedger's."""
        text = f"{COMMITTED_INDEX_KEY}={self._committed_index}\n{END_INDEX_KEY}={self._ledger_end_index}\n"
        try:
            atomic_write(self.checkpoint_path, text.encode())
        except OSError:
            log.exception("persist checkpoint %s failed", self.checkpoint_path)

    def load_checkpoint(self) -> dict[str, str] | None:
        try:
            with open(self.checkpoint_path, "rb") as f:
                return parse_properties(f.read().decode("latin-1"))
        except FileNotFoundError:
            return None
        except OSError:
            log.exception("load checkpoint %s failed", self.checkpoint_path)
            return None

    # -- flush, expiry, start and shutdown -----------------------------------------------

    def flush(self) -> None:
        """Flush data then index (StoreIOError from a failed sync)."""
        with self._flush_lock:
            self.data_file_queue.flush(0)
            self.index_file_queue.flush(0)

    def start(self) -> None:
        """Load and recover if not done, then the flush thread and the clean-space thread."""
        self.load_and_recover()
        if self._flush_service is None:
            self._flush_service = _FlushDataService(self)
            self._flush_service.start()
        if self.enable_clean_space_service and self._clean_service is None:
            self._clean_service = _CleanSpaceService(self)
            self._clean_service.start()

    def shutdown(self) -> None:
        """Flush, write the checkpoint, stop the threads and unmap the files."""
        for service in (self._clean_service, self._flush_service):
            if service is not None:
                service.shutdown()
        self._clean_service = self._flush_service = None
        with self._lock:
            try:
                self.flush()
            except StoreIOError:
                log.exception("the last flush of %s failed", self.config.default_path)
            self.persist_checkpoint()
            self.data_file_queue.shutdown()
            self.index_file_queue.shutdown()

    def delete_expired_files(self, now_ms: int | None = None, hour: int | None = None) -> int:
        """One round of DLedger's CleanSpaceService; returns how many data files went."""
        cfg = self.config
        base_ratio = disk_used_ratio(cfg.store_base_dir)
        data_ratio = disk_used_ratio(cfg.data_path)
        full_ratio = disk_full_ratio(cfg)
        self.is_disk_full = base_ratio > full_ratio or data_ratio > full_ratio
        reserved_ms = cfg.file_reserved_hours * HOUR_MS
        if reserved_ms < HOUR_MS:
            log.warning("fileReservedHours %d is under an hour: an hour is kept", cfg.file_reserved_hours)
            reserved_ms = HOUR_MS
        when_hour = time.localtime().tm_hour if hour is None else hour
        time_up = is_it_time_to_do(cfg.delete_when, when_hour)
        check = cfg.disk_space_ratio_to_check_expired
        check_expired = base_ratio > check or data_ratio > check
        force = _force_clean_ratio(cfg)
        force_clean = (base_ratio > force or data_ratio > force) and cfg.enable_disk_force_clean
        count = 0
        if time_up or check_expired:
            count = self._delete_files_older_than(reserved_ms, force_clean, now_ms)
            if count > 0 or force_clean or self.is_disk_full:
                log.info(
                    "clean space: %d files, timeUp=%s checkExpired=%s forceClean=%s diskFull=%s ratios %.2f/%.2f",
                    count, time_up, check_expired, force_clean, self.is_disk_full, base_ratio, data_ratio,
                )  # fmt: skip
            if count > 0:
                with self._lock:
                    self._data_start_pos = max(self._data_start_pos, self.data_file_queue.get_min_offset())
                    self._revise_ledger_begin_index()
        self.data_file_queue.retry_delete_first_file(DESTROY_INTERVAL_FORCIBLY_MS)
        return count

    def _delete_files_older_than(self, reserved_ms: int, clean_immediately: bool, now_ms: int | None) -> int:
        """``MmapFileList.deleteExpiredFileByTime``: oldest first, never the last file, at
        most 10, stopping at the first young one."""
        q = self.data_file_queue
        now = int(time.time() * 1000) if now_ms is None else now_ms
        files = q.mapped_files[:-1]
        deleted: list[MappedFile] = []
        for i, mf in enumerate(files):
            if not (now >= mf.get_last_modified_timestamp() + reserved_ms or clean_immediately):
                break
            if not mf.destroy(DESTROY_INTERVAL_FORCIBLY_MS):
                break
            deleted.append(mf)
            if len(deleted) >= 10:
                break
            if i + 1 < len(files):
                time.sleep(DELETE_FILES_INTERVAL_MS / 1000)
        q.delete_expired_file(deleted)
        return len(deleted)


class _FlushDataService(ServiceThread):
    """Flushes data and index every flush_file_interval_ms, the checkpoint every
    check_point_interval_ms."""

    def __init__(self, store: DLedgerMmapFileStore) -> None:
        super().__init__(f"DLedgerFlushDataService-{store.config.self_id}")
        self.store = store

    def run(self) -> None:
        store = self.store
        cfg = store.config
        last_checkpoint = time.monotonic()
        while not self.stopped:
            try:
                start = time.monotonic()
                store.flush()
                elapsed = time.monotonic() - start
                if elapsed > 0.5:
                    log.info("flush data cost %d ms", int(elapsed * 1000))
                if (time.monotonic() - last_checkpoint) * 1000 > cfg.check_point_interval_ms:
                    store.persist_checkpoint()
                    last_checkpoint = time.monotonic()
                self.wait_for_running(cfg.flush_file_interval_ms / 1000)
            except Exception:
                log.exception("error in %s", self.name)
                self.wait_for_running(0.2)


class _CleanSpaceService(ServiceThread):
    def __init__(self, store: DLedgerMmapFileStore) -> None:
        super().__init__(f"DLedgerCleanSpaceService-{store.config.self_id}")
        self.store = store

    def run(self) -> None:
        while not self.stopped:
            try:
                self.store.delete_expired_files()
                self.wait_for_running(CLEAN_INTERVAL_MS / 1000)
            except Exception:
                log.exception("error in %s", self.name)
                self.wait_for_running(0.2)
