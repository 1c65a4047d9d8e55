"""Reservations on a file system whose blocks are smaller than a page (ext4 with 1 KiB blocks,
mke2fs's default under 512 MB; or 4 KiB blocks under 64 KiB pages).

A write through a map needs blocks for the whole page it lands in. A reservation that ended
inside a page left part of that page without blocks, so a store below ``reserved`` could still
fault (SIGBUS) once the disk was full. The test runs the writer in a child process, so a fault
kills the child, not pytest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.faults import LoopDisk

pytestmark = pytest.mark.faults

WRITER = r"""
import os, sys
from pumice.store.mapped_file import MappedFile
from pumice.store.disk_io import StoreIOError
d = sys.argv[1]
# a ConsumeQueue-sized file (6,000,000 bytes: 1/16 of it is not a whole number of pages)
mf = MappedFile(os.path.join(d, "00000000000000000000"), 6_000_000)
mf.append_message(b"\x01" * 20)
fd = os.open(os.path.join(d, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
try:
    while True:
        os.write(fd, b"\xff" * 1024)  # the disk fills up to its last block
except OSError:
    pass
os.close(fd)
written = 0
try:
    while mf.wrote_position + 20 <= mf.file_size:
        mf.append_message(b"\x02" * 20)  # up to the reservation, then past it
        written += 1
except StoreIOError as e:
    print("refused", e.errno, written, mf.wrote_position, mf.reserved, flush=True)
    sys.exit(0)
print("never refused", written, flush=True)
sys.exit(3)
"""


@pytest.mark.parametrize("loop_disk", [1024], indirect=True)
def test_a_full_disk_with_small_blocks_refuses_writes_and_never_faults(loop_disk: LoopDisk, tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-c", WRITER, str(loop_disk.mount)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, f"writer {r.returncode} (-7 is SIGBUS): {r.stdout} {r.stderr[-2000:]}"
    refused, errno_, _written, wrote, reserved = r.stdout.split()[:5]
    assert refused == "refused" and int(errno_) == 28  # ENOSPC, cleanly, once past the reservation
    assert int(reserved) - 20 < int(wrote) <= int(reserved)
