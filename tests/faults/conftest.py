"""The fault fixtures: a store on a small loop-mounted ext4 image, and `pumice namesrv` and
`pumice broker` processes on 127.0.0.1 that a test can stop, SIGKILL and restart on it (the
classes, ``LoopDisk`` and ``FaultCluster``, and the raw requests are in tests/helpers/faults.py).

``loop_disk`` makes a sparse image under ``tmp_path`` (named ``pumice-faults-*.img``, the
name ``.ci/run``'s clean-up trap looks for), formats it ext4 (4 KiB blocks, no blocks
reserved for root, so a root broker sees the same full disk as anyone), attaches it to a
loop device and mounts it. Teardown unmounts (lazily after 5 s of EBUSY), detaches the
device and deletes the image, whatever the test did; the processes are stopped before, as
``fault_cluster`` depends on ``loop_disk``. Not root, no loop devices, or a mount that
fails: the test is skipped with the reason.

``fault_cluster(flush_disk_type)`` starts a name server (its files in ``tmp_path``) and a
broker whose ``storePathRootDir`` is on the image, with files small enough for a 256 MiB
disk; ``dir_fault_cluster`` the same with the store in ``tmp_path`` (no image, no root), for
faults injected at the store's system calls (``broker_env={"PUMICE_FAILPOINTS": ...}``).
Brokers run with ``PYTHONFAULTHANDLER=1``: a SIGBUS prints the Python stack of every
thread to the broker's log before the process dies of it, and the log's tail is in every
failure message. Every process is stopped by its pid (SIGTERM, then SIGKILL after 20 s).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.faults import FaultCluster, LoopDisk

IMAGE_MIB = 256

# -- the disk ----------------------------------------------------------------------------

_image_seq = itertools.count()


_SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _run(cmd: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a system tool (found in sbin even when PATH lacks it); its output, never raising on failure."""
    cmd = [shutil.which(cmd[0], path=_SBIN_PATH) or cmd[0], *cmd[1:]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _detach_and_unmount(disk_mount: Path, device: str | None, image: Path) -> list[str]:
    """Unmount (retrying on EBUSY for 5 s, then lazily), detach the loop device, delete the
    image. Every step is tried; what failed is returned."""
    errors: list[str] = []
    if os.path.ismount(disk_mount):
        for _ in range(10):
            r = _run(["umount", str(disk_mount)])
            if r.returncode == 0:
                break
            time.sleep(0.5)
        else:
            errors.append(f"umount {disk_mount}: {r.stderr.strip()} (unmounted lazily)")
            _run(["umount", "-l", str(disk_mount)])
    if device:
        for _ in range(10):
            r = _run(["losetup", "-d", device])
            if r.returncode == 0 or "No such device" in r.stderr:
                break
            time.sleep(0.5)
        else:
            errors.append(f"losetup -d {device}: {r.stderr.strip()}")
    with contextlib.suppress(FileNotFoundError):
        image.unlink()
    return errors


@pytest.fixture
def loop_disk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LoopDisk]:
    """A fresh IMAGE_MIB MiB ext4 file system, mounted; unmounted and detached afterwards.
    Its block size is 4 KiB, or the fixture's parameter (``indirect`` parametrization)."""
    block_size = int(getattr(request, "param", 4096))
    if not sys.platform.startswith("linux"):
        pytest.skip("loop-mounted ext4 images need Linux")
    if os.geteuid() != 0:
        pytest.skip("loop-mounting an ext4 image needs root")
    missing = [t for t in ("mkfs.ext4", "losetup", "mount", "umount") if shutil.which(t, path=_SBIN_PATH) is None]
    if missing:
        pytest.skip(f"missing tools {missing}: install e2fsprogs and mount (.ci/run does)")
    image = tmp_path / f"pumice-faults-{os.getpid()}-{next(_image_seq)}.img"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with image.open("wb") as f:
        f.truncate(IMAGE_MIB * 2**20)
    r = _run(["mkfs.ext4", "-q", "-F", "-b", str(block_size), "-m", "0", "-L", "pumice-faults", str(image)])
    if r.returncode != 0:
        image.unlink()
        pytest.skip(f"mkfs.ext4 failed: {r.stderr.strip()}")
    r = _run(["losetup", "--find", "--show", str(image)])
    if r.returncode != 0:
        image.unlink()
        pytest.skip(f"no loop device (losetup --find --show failed: {r.stderr.strip()})")
    device = r.stdout.strip()
    r = _run(["mount", "-t", "ext4", device, str(mnt)])
    if r.returncode != 0:
        errors = _detach_and_unmount(mnt, device, image)
        pytest.skip(f"mount {device} failed: {r.stderr.strip()} {errors}")
    disk = LoopDisk(image, mnt, device)
    try:
        yield disk
    finally:
        errors = _detach_and_unmount(mnt, device, image)
        if errors:
            raise AssertionError(f"the loop disk was not cleaned up: {errors}")


# -- processes ---------------------------------------------------------------------------


@contextlib.contextmanager
def _clusters(tmp_path: Path, disk: LoopDisk | None) -> Iterator[Callable[..., FaultCluster]]:
    started: list[FaultCluster] = []

    def make(
        flush_disk_type: str,
        refuse_at: float | None = 0.99,
        broker_env: dict[str, str] | None = None,
        **overrides: object,
    ) -> FaultCluster:
        c = FaultCluster(tmp_path, disk, flush_disk_type, refuse_at, broker_env=broker_env, **overrides)
        started.append(c)
        c.start()
        return c

    try:
        yield make
    finally:
        for c in started:
            c.close()


@pytest.fixture
def fault_cluster(loop_disk: LoopDisk, tmp_path: Path) -> Iterator[Callable[..., FaultCluster]]:
    """``fault_cluster(flush_disk_type, refuse_at=0.99, broker_env=None, **broker_conf_overrides)``
    starts a FaultCluster on ``loop_disk``; everything it started is stopped afterwards
    (before the disk is unmounted)."""
    with _clusters(tmp_path, loop_disk) as make:
        yield make


@pytest.fixture
def dir_fault_cluster(tmp_path: Path) -> Iterator[Callable[..., FaultCluster]]:
    """``fault_cluster`` with the store in ``tmp_path`` (no loop disk, no root): for faults
    injected at the store's system calls (``PUMICE_FAILPOINTS`` in ``broker_env``)."""
    with _clusters(tmp_path, None) as make:
        yield make
