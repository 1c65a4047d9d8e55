"""The fault harness: a store on a small loop-mounted ext4 image, and `pumice namesrv` and
`pumice broker` processes on 127.0.0.1 that a test can stop, SIGKILL and restart on it.

``loop_disk`` makes a sparse image under ``tmp_path`` (named ``pumice-faults-*.img``, the
name ``.ci/run``'s clean-up trap looks for), formats it ext4 (4 KiB blocks, no blocks
reserved for root, so a root broker sees the same full disk as anyone), attaches it to a
loop device and mounts it. Teardown unmounts (lazily after 5 s of EBUSY), detaches the
device and deletes the image, whatever the test did; the processes are stopped before, as
``fault_cluster`` depends on ``loop_disk``. Not root, no loop devices, or a mount that
fails: the test is skipped with the reason.

``LoopDisk`` takes room away (``add_ballast``: fallocated, so the blocks are really used;
``squeeze``: fallocate what is left, until ENOSPC) and gives it back (``release``).

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
import errno
import hashlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bench.processes import free_port

from pumice.remoting.remoting_command import RemotingCommand

IMAGE_MIB = 256
BODY_SIZE = 60 * 1024
TOPIC = "FaultTopic"
QUEUES = 4
START_TIMEOUT_S = 30.0  # a broker boots in ~2 s here, recovery of this store included
STOP_TIMEOUT_S = 30.0

# -- the disk ----------------------------------------------------------------------------

_image_seq = itertools.count()


_SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _run(cmd: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a system tool (found in sbin even when PATH lacks it); its output, never raising on failure."""
    cmd = [shutil.which(cmd[0], path=_SBIN_PATH) or cmd[0], *cmd[1:]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


class LoopDisk:
    """A mounted ext4 image: ``mount`` is its root directory."""

    def __init__(self, image: Path, mount: Path, device: str) -> None:
        self.image = image
        self.mount = mount
        self.device = device
        self._room_takers: list[Path] = []

    def free_bytes(self) -> int:
        st = os.statvfs(self.mount)
        return st.f_bavail * st.f_frsize

    def used_ratio(self) -> float:
        u = shutil.disk_usage(self.mount)
        return u.used / u.total

    def describe(self) -> str:
        return f"{self.free_bytes() / 2**20:.1f} MiB free, {self.used_ratio():.1%} used"

    def add_ballast(self, size: int, name: str = "ballast") -> Path:
        """A file of ``size`` bytes whose blocks are allocated (not sparse)."""
        path = self.mount / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, size)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._room_takers.append(path)
        return path

    def squeeze(self, name: str = "squeeze") -> int:
        """Allocate every block left (fallocate, halving the request on ENOSPC down to one
        block), so the file system is full to the last block. Returns the bytes taken."""
        path = self.mount / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._room_takers.append(path)
        taken = os.fstat(fd).st_size
        start = taken
        try:
            chunk = max(self.free_bytes(), 4096)
            for _ in range(200):  # bounded: the chunk halves on each ENOSPC, ~30 halvings to 4 KiB
                try:
                    os.posix_fallocate(fd, taken, chunk)
                    taken += chunk
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    if chunk <= 4096:
                        break
                    chunk //= 2
            with contextlib.suppress(OSError):
                os.fsync(fd)
        finally:
            os.close(fd)
        return taken - start

    def release(self) -> int:
        """Delete the ballast and squeeze files; sync, so the freed blocks are reusable at once
        (ext4 reuses a deleted file's blocks only once its transaction commits). Returns the bytes freed."""
        freed = 0
        for path in self._room_takers:
            with contextlib.suppress(FileNotFoundError):
                freed += path.stat().st_blocks * 512
                path.unlink()
        self._room_takers.clear()
        os.sync()
        return freed


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


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-returncode} ({name})"
    return f"exited with status {returncode}"


class PumiceProcess:
    """``python -m pumice.cli <args>``: its output (stdout and stderr) read by a thread into
    ``lines``, so a chatty process never blocks on a full pipe and its log is there for
    failure messages."""

    def __init__(self, args: list[str], what: str, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.what = what
        self.log_path = log_path
        self.lines: list[str] = []
        self._booted = threading.Event()
        env = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "pumice.cli", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace", env=env)  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.log_path.open("w") as log:  # the whole log, kept with the test's tmp_path
            for line in self.proc.stdout:
                self.lines.append(line)
                log.write(line)
                if "boot success" in line:
                    self._booted.set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_booted(self, timeout_s: float = START_TIMEOUT_S) -> str | None:
        """None once it printed "boot success"; else why not (it died, or no boot within the time)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._booted.wait(0.1):
                return None
            if not self.alive():
                self._reader.join(2)
                if self._booted.is_set():
                    return None
                return f"{self.what} {describe_exit(self.proc.returncode)} before it booted"
        return f"{self.what} did not boot within {timeout_s:g}s"

    def tail(self, n: int = 40) -> str:
        return ("".join(self.lines[-n:]) or "(no output)\n") + f"(the whole log: {self.log_path})\n"

    def fault_trace(self) -> str:
        """From the faulthandler dump of a process that died of a signal: the error and the
        stack of the thread it hit (the other threads' stacks are in ``log_path``)."""
        lines = self.lines
        start = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), None)
        if start is None:
            return ""
        cur = next((i for i in range(start, len(lines)) if lines[i].startswith("Current thread")), None)
        if cur is None:
            return "".join(lines[start : start + 30])
        end = cur + 1
        while end < len(lines) and end < cur + 13 and lines[end].startswith("  "):
            end += 1
        return "".join([lines[start], *lines[cur:end]]) + f"(every thread's stack: {self.log_path})\n"

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait; SIGKILL if it is still there after ``timeout_s``. Returns the
        status of the SIGTERM'd exit (None if it had to be killed)."""
        if not self.alive():
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self._reader.join(2)


class FaultCluster:
    """A name server and a broker whose store is on ``disk`` (None: in ``tmp``, on whatever
    disk holds it). ``broker_env``: environment variables the broker process gets on top of
    ours, at every start (``PUMICE_FAILPOINTS``, say)."""

    def __init__(
        self,
        tmp: Path,
        disk: LoopDisk | None,
        flush_disk_type: str,
        refuse_at: float | None = 0.99,
        *,
        broker_env: dict[str, str] | None = None,
        **overrides: object,
    ) -> None:
        self.tmp = tmp
        self.disk = disk
        self.flush_disk_type = flush_disk_type
        self.broker_env = dict(broker_env or {})
        self.ns_port = free_port()
        self.broker_port = free_port()
        self.store_root = (disk.mount if disk is not None else tmp) / "store"
        (tmp / "namesrv.conf").write_text(
            f"listenPort={self.ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp / 'kv.json'}\n"
        )
        # Small files for a 256 MiB disk, so that every kind is created again and again while
        # the disk fills (~2,400 messages): 16 MiB CommitLog files, ConsumeQueue files of 200
        # entries (a new one every ~800 messages), IndexFiles of 2,000 entries (22 KiB; each
        # message takes two, its UNIQ_KEY and its KEYS). The forced clean-up is off, so no
        # acknowledged message is deleted to make room. ``refuse_at`` raises the refuse-writes
        # mark (diskSpaceWarningLevelRatio, 0.90) so that the writer itself meets ENOSPC: a
        # full ext4 reads as ~98 % used (its reserved clusters), so 0.99 is never reached;
        # None keeps RocketMQ's marks (0.90 refuse, 0.85 resume).
        conf = {
            "brokerClusterName": "FaultCluster", "brokerName": "broker-f", "listenPort": self.broker_port,
            "listenHost": "127.0.0.1", "brokerIP1": "127.0.0.1", "namesrvAddr": f"127.0.0.1:{self.ns_port}",
            "fastListenPortEnable": "false", "storePathRootDir": self.store_root, "flushDiskType": flush_disk_type,
            "mapedFileSizeCommitLog": 16 * 2**20, "mapedFileSizeConsumeQueue": 200 * 20,
            "maxHashSlotNum": 500, "maxIndexNum": 2000,
            "diskMaxUsedSpaceRatio": 95, "cleanFileForciblyEnable": "false",
        }  # fmt: skip
        if refuse_at is not None:
            conf["diskSpaceWarningLevelRatio"] = refuse_at
            conf["diskSpaceCleanForciblyRatio"] = round(refuse_at - 0.01, 2)
        conf.update(overrides)
        (tmp / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.namesrv: PumiceProcess | None = None
        self.broker: PumiceProcess | None = None
        self.previous_brokers: list[PumiceProcess] = []

    def start(self) -> None:
        self.namesrv = PumiceProcess(["namesrv", "-c", str(self.tmp / "namesrv.conf")], "the name server",
                                     self.tmp / "namesrv.log")  # fmt: skip
        why = self.namesrv.wait_booted()
        assert why is None, f"{why}:\n{self.namesrv.tail()}"
        why = self.start_broker()
        assert why is None, why

    def start_broker(self) -> str | None:
        """Start the broker; None once it booted, else why not with its log's tail."""
        if self.broker is not None:
            assert not self.broker.alive(), "a broker is already running"
            self.previous_brokers.append(self.broker)
        n = len(self.previous_brokers) + 1
        self.broker = PumiceProcess(["broker", "-c", str(self.tmp / "broker.conf")], "the broker",
                                    self.tmp / f"broker-{n}.log", self.broker_env)  # fmt: skip
        why = self.broker.wait_booted()
        if why is None:
            return None
        self.broker.kill()
        return f"{why}; its log ends:\n{self.broker.fault_trace() or self.broker.tail()}"

    @property
    def br(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def broker_state(self) -> str:
        """Empty while the broker runs; else how it ended, with its faulthandler dump or log tail."""
        b = self.broker
        if b is None or b.alive():
            return ""
        b._reader.join(2)
        return f"the broker {describe_exit(b.proc.returncode)}; its log ends:\n{b.fault_trace() or b.tail()}"

    def close(self) -> None:
        for p in (self.broker, self.namesrv):
            if p is not None and p.stop() is None:
                p.kill()


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


# -- the raw protocol --------------------------------------------------------------------


def body_for(key: str, size: int = BODY_SIZE) -> bytes:
    """The body a message with this key carries: bytes that depend on every byte of the key."""
    return hashlib.shake_256(key.encode()).digest(size)


def send_request(key: str, queue_id: int) -> RemotingCommand:
    """SEND_MESSAGE_V2 (310) of ``body_for(key)`` to TOPIC, as a RocketMQ producer sends it:
    tag, KEYS and a UNIQ_KEY (so the broker indexes each message twice); the topic is created
    from TBW102 with QUEUES queues on its first send."""
    uniq = hashlib.md5(key.encode()).hexdigest().upper()
    fields = {"a": "FaultPG", "b": TOPIC, "c": "TBW102", "d": QUEUES, "e": queue_id, "f": 0, "g": 0, "h": 0,
              "i": f"TAGS\x01TagA\x02KEYS\x01{key}\x02UNIQ_KEY\x01{uniq}"}  # fmt: skip
    return RemotingCommand(code=310, ext_fields=fields, body=body_for(key))


def view_by_offset(commit_log_offset: int) -> RemotingCommand:
    """VIEW_MESSAGE_BY_ID (33): the record at a CommitLog offset (an offset msgId's last 8 bytes)."""
    return RemotingCommand(code=33, ext_fields={"offset": commit_log_offset})


def get_max_offset(topic: str, queue_id: int) -> RemotingCommand:
    """GET_MAX_OFFSET (30): the queue's next offset, as far as dispatch has gone."""
    return RemotingCommand(code=30, ext_fields={"topic": topic, "queueId": queue_id})
