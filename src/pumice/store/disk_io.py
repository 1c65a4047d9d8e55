"""The system calls the store makes on its segment files, in one place, checked, and failable.

==========  ============================================================================
call        what it is for
==========  ============================================================================
reserve     ``posix_fallocate`` a range before its pages are written through a map: a
            store into a mapped page with no disk block behind it kills the process with
            SIGBUS when the disk is full; a failed reservation is a clean error instead,
            and so is one that leaves under ``RESERVE_HEADROOM`` (1 MiB) free
punch       ``FALLOC_FL_PUNCH_HOLE``: make a range read as zeros (truncation) without
            needing new space; a full disk can still be truncated
msync       ``msync(MS_SYNC)`` over a mapped range: the flush of a segment (Linux runs
            ``fdatasync`` over that range of the file); the GIL is released
write       ``pwrite`` from a transient pool buffer into a file (the commit), all of it or
            an error (a short write is continued); GIL released
==========  ============================================================================

Every call raises ``StoreIOError`` (an ``OSError`` naming the call and the file) on failure;
none returns a status to be forgotten. ``reserve`` and ``punch`` open the file only for the
call: a mapped file keeps no descriptor of its own (the map keeps one), except while it is
written through a transient pool buffer, when ``write`` uses the one it keeps.

Faults, for tests: ``FAULTS.fail("msync", errno.EIO)`` makes every later ``msync`` fail
until ``FAULTS.clear()``; ``times=`` limits it, ``match=`` picks files by a part of their path. A process started with
``PUMICE_FAILPOINTS="msync:EIO:/path/switch,reserve:ENOSPC"`` fails those calls (while the
switch file exists, when one is given), so tests of real processes can turn a fault on and
off.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import mmap
import os
import threading
from collections.abc import Iterator

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_MS_SYNC = 4

try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _fallocate = _libc.fallocate
    _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    _msync = _libc.msync
    _msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
except (OSError, AttributeError):  # not Linux/glibc
    _fallocate = None  # type: ignore[assignment]
    _msync = None  # type: ignore[assignment]

OPS = ("reserve", "punch", "msync", "write")
# free space a reservation must leave: the file system's own blocks for writes into it
RESERVE_HEADROOM = 1 << 20


class StoreIOError(OSError):
    """A reservation, write or sync of a store file failed; ``op`` names the call."""

    def __init__(self, err: int, op: str, path: str, detail: str = "") -> None:
        super().__init__(err, f"{op} of {path} failed: {os.strerror(err)}{detail}", path)
        self.op = op
        self.detail = detail

    def __str__(self) -> str:
        return str(self.strerror)

    def again(self, more: str = "") -> StoreIOError:
        """The same failure as a new exception, ``more`` added to its detail. A kept error is
        raised again through this: raising one object over and over chains a traceback that
        grows by each raise's frames (and keeps those frames' locals alive)."""
        return StoreIOError(self.errno or errno.EIO, self.op, str(self.filename), self.detail + more)

    @property
    def disk_full(self) -> bool:
        return self.errno in (errno.ENOSPC, errno.EDQUOT)

    @property
    def fd_limit(self) -> bool:
        return self.errno in (errno.EMFILE, errno.ENFILE)


class _Rule:
    """Fail with ``err``, ``times`` more times (-1: until cleared), while ``switch`` exists (if
    given), for paths containing ``match`` (if given)."""

    __slots__ = ("err", "match", "switch", "times")

    def __init__(self, err: int, times: int, switch: str | None, match: str | None = None) -> None:
        self.err = err
        self.times = times
        self.switch = switch
        self.match = match


class Faults:
    """Injected failures of the calls above (tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: dict[str, _Rule] = {}
        self._from_env(os.environ.get("PUMICE_FAILPOINTS", ""))

    def _from_env(self, spec: str) -> None:
        for item in filter(None, (s.strip() for s in spec.split(","))):
            op, _, rest = item.partition(":")
            name, _, switch = rest.partition(":")
            code = getattr(errno, name or "EIO", None)
            if op not in OPS or not isinstance(code, int):
                raise ValueError(f"PUMICE_FAILPOINTS: {item!r} is not op:ERRNO[:switch-file] with op one of {OPS}")
            self._rules[op] = _Rule(code, -1, switch or None)

    def fail(
        self, op: str, err: int = errno.EIO, times: int = -1, switch: str | None = None, match: str | None = None
    ) -> None:
        if op not in OPS:
            raise ValueError(f"unknown store call {op!r}; one of {OPS}")
        with self._lock:
            self._rules[op] = _Rule(err, times, switch, match)

    def clear(self, op: str | None = None) -> None:
        with self._lock:
            if op is None:
                self._rules.clear()
            else:
                self._rules.pop(op, None)

    def check(self, op: str, path: str) -> None:
        if not self._rules:
            return
        with self._lock:
            rule = self._rules.get(op)
            if rule is None:
                return
            if rule.match is not None and rule.match not in path:
                return
            if rule.switch is not None and not os.path.exists(rule.switch):
                return
            if rule.times == 0:
                return
            if rule.times > 0:
                rule.times -= 1
        raise StoreIOError(rule.err, op, path, " (injected)")


FAULTS = Faults()


def address_of(buf: mmap.mmap) -> int:
    """The address of a writable map (for msync and madvise); valid until it is closed."""
    anchor = ctypes.c_char.from_buffer(buf)
    try:
        return ctypes.addressof(anchor)
    finally:
        del anchor


@contextlib.contextmanager
def _opened(op: str, path: str) -> Iterator[int]:
    """``path`` opened for the one call ``op``; any OSError becomes a StoreIOError."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError as e:
        raise StoreIOError(e.errno or errno.EIO, op, path, " (open)") from e
    try:
        yield fd
    except StoreIOError:
        raise
    except OSError as e:
        raise StoreIOError(e.errno or errno.EIO, op, path) from e
    finally:
        os.close(fd)


def reserve(path: str, offset: int, length: int) -> None:
    """Give ``[offset, offset+length)`` of ``path`` disk blocks (already there: unchanged).

    ENOSPC also when the blocks were given but under ``RESERVE_HEADROOM`` is left: writing
    through the map into fallocated (unwritten) blocks can still need the file system's own
    blocks (ext4 splits the extent), and with none left that write faults with SIGBUS."""
    FAULTS.check("reserve", path)
    if length > 0:
        with _opened("reserve", path) as fd:
            os.posix_fallocate(fd, offset, length)  # glibc writes zeros where the fs cannot fallocate
            st = os.fstatvfs(fd)
            left = st.f_bavail * st.f_frsize
            if left < RESERVE_HEADROOM:
                kept = f" ({left} bytes left, under the {RESERVE_HEADROOM} kept for the file system)"
                raise StoreIOError(errno.ENOSPC, "reserve", path, kept)


def punch(path: str, offset: int, length: int) -> None:
    """Make ``[offset, offset+length)`` of ``path`` read as zeros, freeing its whole blocks.

    A range that needs no new space: where the file system cannot punch holes, zeros are
    written over the range instead (that can need space, and then fails cleanly).
    """
    FAULTS.check("punch", path)
    if length <= 0:
        return
    with _opened("punch", path) as fd:
        if _fallocate is not None and _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
            return
        zeros = bytes(min(length, 1 << 20))
        end = offset + length
        pos = offset
        while pos < end:
            n = os.pwrite(fd, memoryview(zeros)[: min(len(zeros), end - pos)], pos)
            if n <= 0:
                raise StoreIOError(errno.EIO, "punch", path, f" (short write at {pos})")
            pos += n


def msync(path: str, address: int, length: int) -> None:
    """Write a mapped range to disk and wait (``address`` page-aligned)."""
    FAULTS.check("msync", path)
    if length <= 0:
        return
    if _msync is None:
        raise StoreIOError(errno.ENOSYS, "msync", path, " (no libc msync)")
    if _msync(address, length, _MS_SYNC) != 0:
        raise StoreIOError(ctypes.get_errno() or errno.EIO, "msync", path)


def write(path: str, fd: int, data: memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (its range reserved beforehand)."""
    FAULTS.check("write", path)
    done = 0
    while done < len(data):
        try:
            n = os.pwrite(fd, data[done:], offset + done)
        except OSError as e:
            raise StoreIOError(
                e.errno or errno.EIO, "write", path, f" ({len(data) - done} bytes at {offset + done})"
            ) from e
        if n <= 0:
            raise StoreIOError(errno.EIO, "write", path, f" (nothing written at {offset + done})")
        done += n
