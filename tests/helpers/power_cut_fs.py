"""A power cut below the file system: a FUSE passthrough serving one disk image whose writes
and flushes are silently dropped once a switch is thrown (issue 30).

Run as its own process, ``python -m tests.helpers.power_cut_fs BACKING MOUNTPOINT`` (root,
/dev/fuse, libfuse 3 through ``mfusepy``), it mounts a directory of two files:

=================================  =================================================
``pumice-faults-power-cut.img``    ``BACKING``, byte for byte: reads, writes, fsync
                                   and flush forwarded (``pread``/``pwrite``) until
                                   the cut; after it, writes and fsync/flush answer
                                   success and change nothing, and reads serve the
                                   backing file (what was written before the cut)
``control``                        write ``cut`` (drop from now on) or ``restore``
                                   (forward again); read: one JSON line,
                                   ``{"cut": bool, "writes": n, "written_bytes": n,
                                   "dropped_writes": n, "dropped_bytes": n,
                                   "fsyncs": n, "dropped_fsyncs": n}``
=================================  =================================================

The mount uses ``direct_io``, so no page cache sits between a loop device attached to
the image and this process: every block the loop device writes arrives here, and its
flush (REQ_PREFLUSH, as ext4 sends for a journal commit and fsync) arrives as ``fsync``.
A write that reached the backing file before the cut is durable: the machine that holds
the backing file does not lose power, so it is not fsynced again here. A write to
``control`` is handled before the writer's ``write()`` returns, and under the lock every
disk write holds, so a cut is in force for every write that starts after it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import threading
import time
from typing import Any

import mfusepy

DISK = "/pumice-faults-power-cut.img"  # the name .ci/run's clean-up looks for
CONTROL = "/control"
CONTROL_SIZE = 4096  # direct_io: reads return what read() gives, whatever st_size says


class PowerCutFs(mfusepy.Operations):
    use_ns = True

    def __init__(self, backing: str) -> None:
        self.fd = os.open(backing, os.O_RDWR)
        self._lock = threading.Lock()
        self.cut = False
        self.counts = dict.fromkeys(
            ("writes", "written_bytes", "dropped_writes", "dropped_bytes", "fsyncs", "dropped_fsyncs"), 0
        )
        self.t0 = time.time_ns()

    def status(self) -> bytes:
        with self._lock:
            return (json.dumps({"cut": self.cut, **self.counts}) + "\n").encode()

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        times = {"st_atime": self.t0, "st_mtime": self.t0, "st_ctime": self.t0}
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, **times}
        if path == DISK:
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": os.fstat(self.fd).st_size, **times}
        if path == CONTROL:
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": CONTROL_SIZE, **times}
        raise mfusepy.FuseOSError(errno.ENOENT)

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", DISK[1:], CONTROL[1:]]

    def open(self, path: str, flags: int) -> int:
        if path not in (DISK, CONTROL):
            raise mfusepy.FuseOSError(errno.ENOENT)
        return 0

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        if path == CONTROL:
            return self.status()[offset : offset + size]
        return os.pread(self.fd, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        if path == CONTROL:
            word = data.decode(errors="replace").strip()
            if word not in ("cut", "restore"):
                raise mfusepy.FuseOSError(errno.EINVAL)
            with self._lock:
                self.cut = word == "cut"
            return len(data)
        with self._lock:
            if self.cut:
                self.counts["dropped_writes"] += 1
                self.counts["dropped_bytes"] += len(data)
                return len(data)
            n = os.pwrite(self.fd, data, offset)
            self.counts["writes"] += 1
            self.counts["written_bytes"] += n
            return n

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self._lock:
            self.counts["dropped_fsyncs" if self.cut else "fsyncs"] += 1
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        return 0

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if path == CONTROL:
            return 0
        raise mfusepy.FuseOSError(errno.EPERM)  # the image keeps its size

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": 4096, "f_frsize": 4096, "f_namemax": 255}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.helpers.power_cut_fs BACKING MOUNTPOINT", file=sys.stderr)
        return 2
    backing, mountpoint = argv
    ops = PowerCutFs(backing)
    # foreground: this process is the daemon its starter stops by pid (SIGTERM unmounts)
    try:
        mfusepy.FUSE(ops, mountpoint, foreground=True, direct_io=True, fsname="pumice-power-cut")
    except RuntimeError as e:  # fuse_main's status: SIGTERM ends the loop with one too
        print(f"power_cut_fs: libfuse ended with status {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
