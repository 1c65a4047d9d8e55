"""MappedFile: one fixed-size, memory-mapped segment file, and its reference counting.

A segment is named by the offset of its first byte in its queue, left-padded with zeros to
20 digits (``00000000001073741824``). It is created at its full size, sparse (or wholly
pre-allocated with ``posix_fallocate``), and mapped read-write, shared. The file's own
descriptor is closed once it is mapped (the map keeps one): a mapped file costs one (two
while it is written through a transient pool buffer, for the commit's ``pwrite``).

Positions inside the file:

===================  =====================================================================
reserved             bytes from 0 known to have disk blocks; writes through the map stay
                     below it, and it moves ahead in chunks (``disk_io.reserve``) before a
                     write would pass it, so no store can fault on a full disk (SIGBUS);
                     0 for a file loaded from disk (its first write reserves again, which
                     costs nothing where blocks exist)
wrote_position       bytes appended so far (the write pointer)
committed_position   bytes committed from a transient write buffer (equals wrote without one)
flushed_position     bytes known to be on disk (msync); it never passes a failed sync
===================  =====================================================================

Readers only see ``read_position`` (the committed position). With a transient store pool,
appends go to an off-map ``write_buffer`` and ``commit()`` writes them to the file. A
failed reservation or sync raises ``StoreIOError``; after a failed sync the file refuses
every later flush (``io_error``, naming the offsets that may not be on disk): the kernel may
have dropped the pages it could not write, so a later sync that succeeds proves nothing. A
``SelectMappedBufferResult``
is a zero-copy view of the map that holds a reference; ``release()`` drops it. ``destroy``
marks the file unavailable, waits for references to drop (or for ``interval_forcibly``), then
unmaps and deletes it (``ReferenceResource`` in RocketMQ). ``unlink`` removes the file's name
while readers still map it (their map stays valid, and goes when the last lets go): a file
cut from a queue's end must be gone before the next file is made at its offset.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import mmap
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING

import pumice.store.disk_io as disk_io
from pumice.store.disk_io import StoreIOError

if TYPE_CHECKING:
    from pumice.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 1024 * 4  # RocketMQ's page, in which the least-pages settings count
# the machine's page: a write through a map needs blocks for the whole page it lands in, and
# msync takes page-aligned addresses (64 KiB on some aarch64 and ppc64le kernels)
SYSTEM_PAGE_SIZE = mmap.PAGESIZE

try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _madvise = _libc.madvise
    _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
except (OSError, AttributeError):
    _madvise = None  # type: ignore[assignment]
_MADV_POPULATE_READ = 22  # Linux 5.14+
_MADV_POPULATE_WRITE = 23
_PREFAULT_CHUNK = 16 << 20
_RESERVE_CHUNK_MAX = 4 << 20
_RESERVE_CHUNK_MIN = 16 << 10


def reserve_chunk(file_size: int) -> int:
    """How far ahead of a write a file is reserved: 1/256 of it, 16 KiB to 4 MiB (a 1 GiB
    CommitLog file 4 MiB at a time, a 6 MB ConsumeQueue file 16 KiB: a broker with thousands
    of queues must not hold a large chunk per queue), in whole system pages (a reservation
    ending inside a page would leave part of it without blocks on a file system whose blocks
    are smaller than a page)."""
    chunk = min(_RESERVE_CHUNK_MAX, max(_RESERVE_CHUNK_MIN, file_size // 256), file_size)
    return max(SYSTEM_PAGE_SIZE, chunk - chunk % SYSTEM_PAGE_SIZE)


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


class ReferenceResource(ABC):
    """Reference count guarding a resource that may be destroyed while readers use it."""

    def __init__(self) -> None:
        self._ref_lock = threading.Lock()
        self.ref_count = 1
        self.available = True
        self.cleanup_over = False
        self.first_shutdown_timestamp = 0

    def hold(self) -> bool:
        with self._ref_lock:
            if self.available and self.ref_count > 0:
                self.ref_count += 1
                return True
            return False

    def release(self) -> None:
        with self._ref_lock:
            self.ref_count -= 1
            if self.ref_count > 0:
                return
        self.cleanup_over = self.cleanup(self.ref_count)

    def shutdown(self, interval_forcibly_ms: int) -> None:
        if self.available:
            self.available = False
            self.first_shutdown_timestamp = int(time.time() * 1000)
            self.release()
        elif self.ref_count > 0:
            if int(time.time() * 1000) - self.first_shutdown_timestamp >= interval_forcibly_ms:
                with self._ref_lock:
                    self.ref_count = -1000 - self.ref_count
                self.release()

    def is_cleanup_over(self) -> bool:
        return self.ref_count <= 0 and self.cleanup_over

    @abstractmethod
    def cleanup(self, current_ref: int) -> bool:
        """Free the resource once no reference is left; True when it is freed."""


class MappedFile(ReferenceResource):
    """A segment file mapped into memory."""

    def __init__(
        self,
        file_name: str,
        file_size: int,
        *,
        preallocate: bool = False,
        transient_store_pool: TransientStorePool | None = None,
    ) -> None:
        super().__init__()
        self.file_name = file_name
        self.file_size = file_size
        self.file_from_offset = int(os.path.basename(file_name))
        os.makedirs(os.path.dirname(file_name) or ".", exist_ok=True)
        self.reserved = 0
        self._chunk = reserve_chunk(file_size)
        fd = os.open(file_name, os.O_RDWR | os.O_CREAT, 0o644)
        size = 0
        try:
            size = os.fstat(fd).st_size
            if size != file_size:
                if size > file_size:
                    raise ValueError(f"{file_name}: length {size} is larger than {file_size}")
                os.ftruncate(fd, file_size)
                if preallocate:
                    disk_io.reserve(file_name, 0, file_size)  # StoreIOError: the file is removed below
                    self.reserved = file_size
            self.mmap = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if size == 0:  # made here and unusable (no space, no descriptor for the map): not left behind
                with contextlib.suppress(OSError):
                    os.unlink(file_name)
            raise
        self._address = disk_io.address_of(self.mmap)
        self.io_error: StoreIOError | None = None
        self._data_end = file_size  # where written bytes end (before file_size once closed with a blank)
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        self.first_create_in_queue = False
        self._unmapped = False
        # with a transient store pool, appends go here and commit() copies them to the file
        self.transient_store_pool = transient_store_pool
        self.write_buffer: mmap.mmap | None = (
            transient_store_pool.borrow_buffer() if transient_store_pool is not None else None
        )
        self._write_buffer_address = disk_io.address_of(self.write_buffer) if self.write_buffer is not None else 0
        # A file written through a pool buffer keeps its descriptor until it is wholly committed:
        # the commit's pwrite goes into the page cache, where a copy into the map would fault on
        # each page the last sync left write-protected and wait on the journal (measured: twice
        # the latency of a paced SYNC_FLUSH put). Any other file keeps only the map's.
        self._write_fd: int | None = fd if self.write_buffer is not None else None
        if self._write_fd is None:
            os.close(fd)

    def __repr__(self) -> str:
        return f"MappedFile({self.file_name!r}, wrote={self.wrote_position})"

    # -- positions ---------------------------------------------------------------------

    @property
    def read_position(self) -> int:
        """Readers see committed data only (all written data without a write buffer)."""
        return self.wrote_position if self.write_buffer is None else self.committed_position

    def is_full(self) -> bool:
        return self.wrote_position == self.file_size

    def set_positions(self, pos: int) -> None:
        self.wrote_position = self.committed_position = self.flushed_position = pos

    def zero_range(self, start: int, end: int) -> None:
        """Make ``[start, end)`` read as zeros, so no stale record survives a truncation.

        The range is punched out of the file (no new space needed, so a full disk can be
        truncated); its blocks are reserved again by the next write that reaches them.
        """
        end = min(end, self.file_size)
        if start >= end:
            return
        disk_io.punch(self.file_name, start, end - start)
        self.reserved = min(self.reserved, start - start % SYSTEM_PAGE_SIZE)

    def reserve(self, end: int) -> None:
        """Give ``[0, end)`` disk blocks (a chunk further, up to the file's end) before the map
        is written there; StoreIOError when the disk or the descriptors run out."""
        if end <= self.reserved:
            return
        target = min(self.file_size, -(-end // self._chunk) * self._chunk)
        disk_io.reserve(self.file_name, self.reserved, target - self.reserved)
        self.reserved = max(self.reserved, target)

    # -- write -------------------------------------------------------------------------

    def append_message(self, data: bytes | bytearray | memoryview) -> bool:
        """Append raw bytes (ConsumeQueue entries); False when they do not fit, StoreIOError
        when their space cannot be reserved (nothing is written then)."""
        pos = self.wrote_position
        n = len(data)
        if pos + n > self.file_size:
            return False
        self.write_at(pos, data)
        self.wrote_position = pos + n
        return True

    def close_with_blank(self, pos: int, blank: bytes) -> None:
        """End the file at ``pos`` with the END_OF_FILE ``blank`` record: the file counts as
        full, and what lies past the blank is never written (a commit stops at the blank's end:
        a reused pool buffer holds an earlier file's bytes there, and that range has no
        reservation)."""
        self.write_at(pos, blank)
        self._data_end = pos + len(blank)
        self.wrote_position = self.file_size

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write appended bytes: into the write buffer if there is one, else into the map.
        Their file range is reserved first either way (the commit copies into the map).

        A copy into the (pre-faulted) map beats a ``pwrite`` per put: no system call, and
        no trip through the file system's write path for each small append.
        """
        end = pos + len(data)
        if end > self.reserved:
            self.reserve(end)
        target = self.write_buffer if self.write_buffer is not None else self.mmap
        target[pos:end] = data

    # -- commit / flush ----------------------------------------------------------------

    def is_able_to_commit(self, commit_least_pages: int) -> bool:
        committed = self.committed_position
        write = self.wrote_position
        if self.is_full():
            return write > committed
        if commit_least_pages > 0:
            return (write // OS_PAGE_SIZE) - (committed // OS_PAGE_SIZE) >= commit_least_pages
        return write > committed

    def commit(self, commit_least_pages: int) -> int:
        """Copy new data from the write buffer into the file; returns the committed position.

        Without a write buffer the write pointer counts as committed. Once the whole file is
        committed the buffer goes back to the pool.
        """
        wb = self.write_buffer
        if wb is None:
            self.committed_position = self.wrote_position
            return self.committed_position
        if self.is_able_to_commit(commit_least_pages):
            if self.hold():
                try:
                    start, end = self.committed_position, self.wrote_position
                    assert self._write_fd is not None
                    # reserved by write_at; pwrite runs without the GIL; StoreIOError moves nothing
                    view = memoryview(wb)[start : max(start, min(end, self._data_end))]
                    try:
                        disk_io.write(self.file_name, self._write_fd, view, start)
                    finally:
                        view.release()  # an error's traceback must not keep the pool buffer exported
                    self.committed_position = end
                finally:
                    self.release()
            else:
                log.warning("in commit, hold failed, commit offset = %d", self.committed_position)
        if self.committed_position == self.file_size and self.transient_store_pool is not None:
            self.write_buffer = None
            self._write_buffer_address = 0
            self._close_write_fd()
            self.transient_store_pool.return_buffer(wb)
        return self.committed_position

    def _close_write_fd(self) -> None:
        fd, self._write_fd = self._write_fd, None
        if fd is not None:
            os.close(fd)

    def is_able_to_flush(self, flush_least_pages: int) -> bool:
        flush = self.flushed_position
        write = self.read_position
        if self.is_full():
            return write > flush or flush != self.file_size
        if flush_least_pages > 0:
            return (write // OS_PAGE_SIZE) - (flush // OS_PAGE_SIZE) >= flush_least_pages
        return write > flush

    def flush(self, flush_least_pages: int) -> int:
        """Sync new data to disk; returns the flushed position. StoreIOError when the sync
        fails, then and for every later call: the position never passes unsynced data. The
        error names the range that may not be on disk, as offsets in the queue."""
        if self.io_error is not None:
            raise self.io_error.again()
        if self.is_able_to_flush(flush_least_pages):
            if self.hold():
                flushed = self.flushed_position
                value = self.read_position
                start = flushed - flushed % SYSTEM_PAGE_SIZE
                try:
                    disk_io.msync(self.file_name, self._address + start, value - start)
                except StoreIOError as e:
                    self.io_error = e.again(self._unsynced(flushed, value))
                    raise self.io_error.again() from None
                finally:
                    self.release()
                self.flushed_position = value
            else:
                log.warning("in flush, hold failed, flush offset = %d", self.flushed_position)
                self.flushed_position = self.read_position
        return self.flushed_position

    def prefault(self, should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Fault the whole map in (read), so appends later find their pages present.

        The first write to a page of a fresh file costs a page fault; doing them here, in
        the allocation thread, takes them off the put path (about 4x faster copies). Read
        faults do not dirty the pages, so nothing extra is written to disk. ``madvise``
        goes through ctypes, which releases the GIL. False when the kernel cannot.
        """
        if _madvise is None or not self.hold():
            return False
        try:
            # with a pool buffer, appends go there: fault that in instead (writable, so the
            # zero-fill happens now; a buffer used before keeps its pages)
            wb = self.write_buffer
            addr, advice = (
                (self._address, _MADV_POPULATE_READ)
                if wb is None
                else (self._write_buffer_address, _MADV_POPULATE_WRITE)
            )
            for off in range(0, self.file_size, _PREFAULT_CHUNK):
                if should_stop() or not self.available:
                    return False
                if _madvise(addr + off, min(_PREFAULT_CHUNK, self.file_size - off), advice) != 0:
                    return False
            return True
        finally:
            self.release()

    def force(self) -> None:
        """Sync the whole file, whatever the positions say (files written in place);
        StoreIOError when it fails, then and for every later call."""
        if self.io_error is not None:
            raise self.io_error.again()
        if self.hold():
            try:
                disk_io.msync(self.file_name, self._address, self.file_size)
            except StoreIOError as e:
                self.io_error = e.again(f"; the whole file (bytes [0, {self.file_size})) may not be on disk")
                raise self.io_error.again() from None
            finally:
                self.release()

    def _unsynced(self, start: int, end: int) -> str:
        """What a failed sync leaves in doubt, for its error (and the store's log line)."""
        base = self.file_from_offset
        return f"; offsets [{base + start}, {base + end}) may not be on disk (bytes [{start}, {end}) of the file)"

    # -- read --------------------------------------------------------------------------

    def select_mapped_buffer(self, pos: int, size: int | None = None) -> SelectMappedBufferResult | None:
        """A zero-copy view of ``[pos, pos+size)``, or of ``[pos, read_position)``."""
        read_pos = self.read_position
        if size is None:
            if not 0 <= pos < read_pos:
                return None
            size = read_pos - pos
        elif pos < 0 or pos + size > read_pos:
            log.debug("selectMappedBuffer request pos invalid: %d+%s > %d", pos, size, read_pos)
            return None
        if not self.hold():
            log.warning("matched, but hold failed, request pos: %d", pos)
            return None
        view = memoryview(self.mmap)[pos : pos + size]
        return SelectMappedBufferResult(self.file_from_offset + pos, view, size, self)

    def get_last_modified_timestamp(self) -> int:
        try:
            return int(os.stat(self.file_name).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # -- destroy -----------------------------------------------------------------------

    def cleanup(self, current_ref: int) -> bool:
        if self.available:
            log.error("this file[REF:%d] %s have not shutdown, stop unmapping", current_ref, self.file_name)
            return False
        if self._unmapped:
            return True
        self._unmapped = True
        wb, self.write_buffer = self.write_buffer, None
        if wb is not None and self.transient_store_pool is not None:
            self.transient_store_pool.return_buffer(wb)
        self._close_write_fd()
        try:
            self.mmap.close()
        except BufferError:
            # A reader still holds a view past release(); the map goes when the view does.
            log.debug("unmap of %s deferred: views still exported", self.file_name)
        return True

    def unlink(self) -> None:
        """Remove the file's name now, whoever still maps it."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.file_name)

    def destroy(self, interval_forcibly_ms: int) -> bool:
        self.shutdown(interval_forcibly_ms)
        if self.is_cleanup_over():
            self.unlink()
            log.info(
                "destroy mapped file %s OK (W:%d M:%d)", self.file_name, self.wrote_position, self.flushed_position
            )
            return True
        log.warning(
            "destroy mapped file[REF:%d] %s Failed. cleanupOver: %s", self.ref_count, self.file_name, self.cleanup_over
        )
        return False

    def close(self) -> None:
        """Unmap without deleting (store shutdown)."""
        self.shutdown(0)
        if not self.is_cleanup_over():
            self.shutdown(0)


class SelectMappedBufferResult:
    """A view of part of a mapped file; holds a reference on it until ``release()``."""

    __slots__ = ("buffer", "mapped_file", "size", "start_offset")

    def __init__(self, start_offset: int, buffer: memoryview, size: int, mapped_file: MappedFile | None):
        self.start_offset = start_offset
        self.buffer = buffer
        self.size = size
        self.mapped_file = mapped_file

    def release(self) -> None:
        mf = self.mapped_file
        if mf is not None:
            self.mapped_file = None
            try:
                self.buffer.release()
            except BufferError:
                pass  # a caller still exports it (numpy view); the GC drops it later
            mf.release()

    def __enter__(self) -> SelectMappedBufferResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
