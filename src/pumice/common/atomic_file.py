"""One atomic replace of a small file (config tables, offsets), with the previous version kept.

============  ============================================================================
step          why
============  ============================================================================
write .tmp    the old file stays whole while the new one is written
fsync .tmp    the new bytes are on disk before any name points at them
old → .bak    a reader finds one whole version even if the next rename never happens
.tmp → path   the atomic switch
fsync dir     the renames themselves survive a power cut
============  ============================================================================

A crash at any step leaves ``path`` or ``path.bak`` whole. An ``OSError`` is raised to the
caller after the temporary file is removed.
"""

from __future__ import annotations

import os


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes, keep_backup: bool = True) -> None:
    """Replace ``path`` by ``data`` as the table above says; ``keep_backup=False`` leaves an
    existing ``.bak`` alone (the caller knows ``path`` itself is corrupt)."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    tmp = path + ".tmp"
    os.makedirs(directory, exist_ok=True)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if keep_backup and os.path.exists(path):
            os.replace(path, path + ".bak")
        os.replace(tmp, path)
        fsync_dir(directory)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
