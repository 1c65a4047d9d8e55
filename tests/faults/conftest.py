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
``power_cut_disk`` is such an image on a loop device attached to a file served by the
power-cut FUSE daemon (``PowerCutDisk``, tests/helpers/power_cut_fs.py), and
``power_cut_cluster`` a ``fault_cluster`` on it; skipped with the reason where not root or
without /dev/fuse, mfusepy or libfuse 3. Brokers run with ``PYTHONFAULTHANDLER=1``: a
SIGBUS prints the Python stack of every thread to the broker's log before the process dies
of it, and the log's tail is in every failure message. Every process is stopped by its
pid (SIGTERM, then SIGKILL after 20 s).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.faults import SBIN_PATH, FaultCluster, LoopDisk, PowerCutDisk, detach, run_tool, unmount

IMAGE_MIB = 256

# -- the disk ----------------------------------------------------------------------------

_image_seq = itertools.count()


def _detach_and_unmount(disk_mount: Path, device: str | None, image: Path) -> list[str]:
    """Unmount (retrying on EBUSY for 5 s, then lazily), detach the loop device, delete the
    image. Every step is tried; what failed is returned."""
    errors: list[str] = []
    why = unmount(disk_mount)
    if why is not None:
        errors.append(f"{why} (unmounted lazily)")
        run_tool(["umount", "-l", str(disk_mount)])
    if device and (why := detach(device)) is not None:
        errors.append(why)
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
    missing = [t for t in ("mkfs.ext4", "losetup", "mount", "umount") if shutil.which(t, path=SBIN_PATH) is None]
    if missing:
        pytest.skip(f"missing tools {missing}: install e2fsprogs and mount (.ci/run does)")
    image = tmp_path / f"pumice-faults-{os.getpid()}-{next(_image_seq)}.img"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with image.open("wb") as f:
        f.truncate(IMAGE_MIB * 2**20)
    r = run_tool(["mkfs.ext4", "-q", "-F", "-b", str(block_size), "-m", "0", "-L", "pumice-faults", str(image)])
    if r.returncode != 0:
        image.unlink()
        pytest.skip(f"mkfs.ext4 failed: {r.stderr.strip()}")
    r = run_tool(["losetup", "--find", "--show", str(image)])
    if r.returncode != 0:
        image.unlink()
        pytest.skip(f"no loop device (losetup --find --show failed: {r.stderr.strip()})")
    device = r.stdout.strip()
    r = run_tool(["mount", "-t", "ext4", device, str(mnt)])
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
def power_cut_disk(tmp_path: Path) -> Iterator[PowerCutDisk]:
    """A fresh IMAGE_MIB MiB ext4 file system on a loop device served by the power-cut FUSE
    daemon (``PowerCutDisk``), mounted; afterwards unmounted, detached, the daemon stopped by
    its pid. Skipped where not root, or without /dev/fuse, mfusepy and libfuse 3."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("the power-cut disk needs Linux and root (FUSE, loop devices, mount)")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    try:
        import mfusepy  # noqa: F401  (only whether the daemon will find it and libfuse)
    except (ImportError, OSError, AttributeError) as e:
        pytest.skip(f"mfusepy or libfuse 3 missing ({e}): install fuse3 and the test extra (.ci/run does)")
    missing = [t for t in ("mkfs.ext4", "e2fsck", "losetup", "mount", "umount") if not shutil.which(t, path=SBIN_PATH)]
    if missing:
        pytest.skip(f"missing tools {missing}: install e2fsprogs and mount (.ci/run does)")
    disk = PowerCutDisk(tmp_path, IMAGE_MIB)
    try:
        why = disk.start()
        if why is not None:
            pytest.skip(why)
        yield disk
    finally:
        errors = disk.close()
        if errors:
            raise AssertionError(f"the power-cut disk was not cleaned up: {errors}")


@pytest.fixture
def power_cut_cluster(power_cut_disk: PowerCutDisk, tmp_path: Path) -> Iterator[Callable[..., FaultCluster]]:
    """``fault_cluster`` on ``power_cut_disk``."""
    with _clusters(tmp_path, power_cut_disk) as make:
        yield make


@pytest.fixture
def dir_fault_cluster(tmp_path: Path) -> Iterator[Callable[..., FaultCluster]]:
    """``fault_cluster`` with the store in ``tmp_path`` (no loop disk, no root): for faults
    injected at the store's system calls (``PUMICE_FAILPOINTS`` in ``broker_env``)."""
    with _clusters(tmp_path, None) as make:
        yield make
