"""The fault suite's harness (tests/faults): a loop-mounted disk, broker processes that can
be SIGKILLed and restarted, and the check that every acknowledged message is still there.

``LoopDisk`` is a mounted ext4 image (made by the ``loop_disk`` fixture): it takes room away
(``add_ballast``: fallocated, so the blocks are really used; ``squeeze``: fallocate what is
left, until ENOSPC) and gives it back (``release``). ``PowerCutDisk`` is one whose loop
device sits on a FUSE passthrough (tests/helpers/power_cut_fs.py) that drops every write
and flush after ``cut()``; ``power_cycle()`` reboots it. ``FaultCluster`` is a name server
and a broker whose store is on such a disk (or in a directory), with files small enough for a
256 MiB disk; ``PumiceProcess`` runs one ``pumice`` process with ``PYTHONFAULTHANDLER=1``
(a SIGBUS prints every thread's stack to its log before the process dies of it) and reads
its log in a thread. Every process is stopped by its pid (SIGTERM, then SIGKILL).

``send_request``, ``view_by_offset`` and ``get_max_offset`` are the raw requests the tests
send; ``verify`` reads every acknowledged message (``Ack``) back by msgId, by queue offset and
by key; ``consume_queue_problems`` reads the ConsumeQueue files for gaps and doubled offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pumice.common.message_decoder import decode_message
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import pull
from tests.helpers.ports import free_port

BODY_SIZE = 60 * 1024
TOPIC = "FaultTopic"
QUEUES = 4
START_TIMEOUT_S = 30.0  # a broker boots in ~2 s here, recovery of this store included
STOP_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 10.0
DISPATCH_WAIT_S = 15.0
EXAMPLES = 5
TRANSPORT_ERRORS = (RemotingConnectError, RemotingTimeoutError, ConnectionError)


# -- the disk ----------------------------------------------------------------------------


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


SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def run_tool(cmd: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a system tool (found in sbin even when PATH lacks it); its output, never raising on failure."""
    cmd = [shutil.which(cmd[0], path=SBIN_PATH) or cmd[0], *cmd[1:]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def unmount(mount: Path) -> str | None:
    """Unmount, retrying on EBUSY for 5 s; None, or why it failed (then it is still mounted)."""
    r = None
    for _ in range(10):
        if not os.path.ismount(mount):
            return None
        r = run_tool(["umount", str(mount)])
        if r.returncode == 0:
            return None
        time.sleep(0.5)
    return f"umount {mount}: {r.stderr.strip() if r else ''}"


def detach(device: str) -> str | None:
    """Detach a loop device, retrying for 5 s; None, or why it failed."""
    r = None
    for _ in range(10):
        r = run_tool(["losetup", "-d", device])
        if r.returncode == 0 or "No such device" in r.stderr:
            return None
        time.sleep(0.5)
    return f"losetup -d {device}: {r.stderr.strip() if r else ''}"


POWER_CUT_IMAGE = "pumice-faults-power-cut.img"  # the file power_cut_fs serves (.ci/run's clean-up looks for it)


class PowerCutDisk(LoopDisk):
    """ext4 on a loop device whose backing file is served by ``tests.helpers.power_cut_fs``
    (its own process): ``cut()`` makes every later write and flush of the device vanish while
    reporting success, as a power cut does to whatever was not yet on the platter.
    ``power_cycle()`` is the reboot: unmount (the dirty pages written back go nowhere), detach,
    switch the cut off, attach again, ``e2fsck -p`` as a boot does, mount.

    ``backing`` is the image on the real disk, ``fuse_dir`` where the daemon serves it,
    ``mount`` the ext4 file system."""

    def __init__(self, tmp: Path, size_mib: int) -> None:
        super().__init__(tmp / "power-cut-backing.img", tmp / "mnt", "")
        self.fuse_dir = tmp / "power-cut-fuse"
        self.daemon_log = tmp / "power-cut-fs.log"
        self.daemon: subprocess.Popen[bytes] | None = None
        self.fsck_output: list[str] = []
        self.mount.mkdir()
        self.fuse_dir.mkdir()
        with self.image.open("wb") as f:
            f.truncate(size_mib * 2**20)

    @property
    def control(self) -> Path:
        return self.fuse_dir / "control"

    def start(self) -> str | None:
        """Format, serve, attach and mount; None, or why not (the caller skips with it)."""
        r = run_tool(["mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", "-L", "pumice-power", str(self.image)])
        if r.returncode != 0:
            return f"mkfs.ext4 failed: {r.stderr.strip()}"
        repo = str(Path(__file__).parents[2])  # so that ``-m tests.helpers.power_cut_fs`` is found
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
        cmd = [sys.executable, "-m", "tests.helpers.power_cut_fs", str(self.image), str(self.fuse_dir)]
        with self.daemon_log.open("wb") as log:
            self.daemon = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 10.0
        while not os.path.ismount(self.fuse_dir):
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                return f"the FUSE daemon did not mount {self.fuse_dir}: {self.daemon_log.read_text().strip()[-600:]}"
            time.sleep(0.05)
        return self._attach_and_mount()

    def _attach_and_mount(self) -> str | None:
        r = run_tool(["losetup", "--find", "--show", str(self.fuse_dir / POWER_CUT_IMAGE)])
        if r.returncode != 0:
            return f"no loop device (losetup --find --show failed: {r.stderr.strip()})"
        self.device = r.stdout.strip()
        r = run_tool(["mount", "-t", "ext4", self.device, str(self.mount)])
        if r.returncode != 0:
            return f"mount {self.device} failed: {r.stderr.strip()}"
        return None

    def state(self) -> dict[str, int | bool]:
        """The daemon's switch and counters (writes and fsyncs forwarded and dropped)."""
        return dict(json.loads(self.control.read_text()))

    def cut(self) -> None:
        """From now on every write and flush reaching the device is dropped (and answered success)."""
        self.control.write_text("cut\n")

    def power_cycle(self) -> str:
        """After a cut (and a SIGKILL of everything writing to the disk): unmount, detach, restore,
        attach, ``e2fsck -p``, mount. Returns e2fsck's output; raises AssertionError when a step fails."""
        for why in (unmount(self.mount), detach(self.device)):
            assert why is None, why
        self.control.write_text("restore\n")
        r = run_tool(["losetup", "--find", "--show", str(self.fuse_dir / POWER_CUT_IMAGE)])
        assert r.returncode == 0, f"losetup: {r.stderr.strip()}"
        self.device = r.stdout.strip()
        fsck = run_tool(["e2fsck", "-p", self.device])
        out = (fsck.stdout + fsck.stderr).strip()
        self.fsck_output.append(out)
        assert fsck.returncode in (0, 1), f"e2fsck -p exited {fsck.returncode}: {out}"  # 1: errors corrected
        r = run_tool(["mount", "-t", "ext4", self.device, str(self.mount)])
        assert r.returncode == 0, f"mount {self.device} failed: {r.stderr.strip()}"
        return out

    def close(self) -> list[str]:
        """Unmount, detach, stop the daemon by its pid (SIGTERM unmounts it; then SIGKILL and a lazy
        fusermount), delete the backing image. Every step is tried; what failed is returned."""
        errors = [e for e in (unmount(self.mount), detach(self.device) if self.device else None) if e]
        if errors and os.path.ismount(self.mount):
            run_tool(["umount", "-l", str(self.mount)])
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(10)
            except subprocess.TimeoutExpired:
                errors.append(f"the FUSE daemon (pid {self.daemon.pid}) ignored SIGTERM")
                self.daemon.kill()
                self.daemon.wait(10)
        if os.path.ismount(self.fuse_dir):
            run_tool(["fusermount3", "-u", "-z", str(self.fuse_dir)])
        with contextlib.suppress(FileNotFoundError):
            self.image.unlink()
        return errors


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


# -- the raw protocol --------------------------------------------------------------------


def body_for(key: str, size: int = BODY_SIZE) -> bytes:
    """The body a message with this key carries: bytes that depend on every byte of the key."""
    return hashlib.shake_256(key.encode()).digest(size)


def send_request(key: str, queue_id: int, topic: str = TOPIC, body_size: int = BODY_SIZE) -> RemotingCommand:
    """SEND_MESSAGE_V2 (310) of ``body_for(key, body_size)`` to ``topic``, as a RocketMQ producer
    sends it: tag, KEYS and a UNIQ_KEY (so the broker indexes each message twice); the topic is
    created from TBW102 with QUEUES queues on its first send."""
    uniq = hashlib.md5(key.encode()).hexdigest().upper()
    fields = {"a": "FaultPG", "b": topic, "c": "TBW102", "d": QUEUES, "e": queue_id, "f": 0, "g": 0, "h": 0,
              "i": f"TAGS\x01TagA\x02KEYS\x01{key}\x02UNIQ_KEY\x01{uniq}"}  # fmt: skip
    return RemotingCommand(code=310, ext_fields=fields, body=body_for(key, body_size))


def view_by_offset(commit_log_offset: int) -> RemotingCommand:
    """VIEW_MESSAGE_BY_ID (33): the record at a CommitLog offset (an offset msgId's last 8 bytes)."""
    return RemotingCommand(code=33, ext_fields={"offset": commit_log_offset})


def query_by_key(topic: str, key: str) -> RemotingCommand:
    """QUERY_MESSAGE (12): the messages of ``topic`` indexed under ``key``, any time."""
    return RemotingCommand(code=12, ext_fields={"topic": topic, "key": key, "maxNum": 32, "beginTimestamp": 0,
                                                "endTimestamp": 2**62})  # fmt: skip


def get_max_offset(topic: str, queue_id: int) -> RemotingCommand:
    """GET_MAX_OFFSET (30): the queue's next offset, as far as dispatch has gone."""
    return RemotingCommand(code=30, ext_fields={"topic": topic, "queueId": queue_id})


# -- reading every acknowledged message back ---------------------------------------------


@dataclass(frozen=True)
class Ack:
    """A SEND_OK: the message's key, msgId, queue and queue offset, CommitLog offset, topic and body size."""

    key: str
    msg_id: str
    queue_id: int
    queue_offset: int
    offset: int  # in the CommitLog, from the msgId
    topic: str = TOPIC
    body_size: int = BODY_SIZE


def examples(items: list[str]) -> str:
    """The first EXAMPLES items, and how many more there are."""
    more = f" (and {len(items) - EXAMPLES} more)" if len(items) > EXAMPLES else ""
    return "; ".join(items[:EXAMPLES]) + more


def _check_record(raw: bytes | memoryview, pos: int, ack: Ack | None, via: str, topic: str = TOPIC) -> str | None:
    """What is wrong with the record at ``pos`` (None if it is ``ack``'s message, byte for byte)."""
    try:
        m = decode_message(raw, pos)
    except Exception as e:
        return f"{via}: undecodable record ({type(e).__name__}: {e})"
    key = m.properties.get("KEYS", "")
    if ack is None:  # a record a pull served: one of ours, or a warm-up, must match its key
        ack = Ack(key, "", m.queue_id, m.queue_offset, m.commit_log_offset, topic, len(m.body))
    elif key != ack.key:
        return f"{ack.key} {via}: a different message (KEYS {key!r}, topic {m.topic!r}, {len(m.body)} body bytes)"
    if m.topic != ack.topic or m.queue_id != ack.queue_id or m.queue_offset != ack.queue_offset:
        where = f"{m.topic}:{m.queue_id}@{m.queue_offset}"
        return f"{ack.key} {via}: stored as {where}, acked as {ack.topic}:{ack.queue_id}@{ack.queue_offset}"
    want = body_for(ack.key, ack.body_size)
    if m.body != want:
        what = "all zeros" if not any(m.body) else "different bytes"
        return f"{ack.key} {via}: body of {len(m.body)} bytes, {what} (want {len(want)})"
    return None


async def _view_all(client: RemotingClient, c: FaultCluster, acked: list[Ack]) -> list[str]:
    bad: list[str] = []

    async def view(a: Ack) -> None:
        try:
            r = await client.invoke(c.br, view_by_offset(a.offset), timeout_s=READ_TIMEOUT_S)
        except TRANSPORT_ERRORS as e:
            bad.append(f"{a.key} by msgId {a.msg_id}: no answer ({type(e).__name__})")
            return
        if r.code != ResponseCode.SUCCESS:
            bad.append(f"{a.key} by msgId {a.msg_id}: code {r.code} {r.remark!r}")
            return
        if (why := _check_record(bytes(r.body or b""), 0, a, f"by msgId {a.msg_id}")) is not None:
            bad.append(why)

    for i in range(0, len(acked), 32):
        if not c.broker.alive():
            bad.append(f"{len(acked) - i} not read by msgId: the broker died")
            break
        before = len(bad)
        await asyncio.gather(*(view(a) for a in acked[i : i + 32]))
        if len(bad) - before == len(acked[i : i + 32]) and all("no answer" in b for b in bad[before:]):
            bad.append(f"{len(acked) - i - 32} not read by msgId: the broker stopped answering")
            break
    return bad


async def _pull_all(client: RemotingClient, c: FaultCluster, acked: list[Ack]) -> list[str]:
    bad: list[str] = []
    by_queue: dict[tuple[str, int], dict[int, Ack]] = {}
    for a in acked:
        by_queue.setdefault((a.topic, a.queue_id), {})[a.queue_offset] = a
    # dispatch runs behind the appends: wait (DISPATCH_WAIT_S for all queues together) until
    # the ConsumeQueues have every acked entry
    deadline = time.monotonic() + DISPATCH_WAIT_S
    for (topic, q), wanted in sorted(by_queue.items()):
        qname = str(q) if topic == TOPIC else f"{topic}:{q}"
        need = max(wanted) + 1
        max_offset = -1
        while time.monotonic() < deadline and c.broker.alive():
            try:
                r = await client.invoke(c.br, get_max_offset(topic, q), timeout_s=READ_TIMEOUT_S)
                max_offset = int(r.ext_fields.get("offset", -1))
            except TRANSPORT_ERRORS:
                pass
            if max_offset >= need:
                break
            await asyncio.sleep(0.2)
        if max_offset < need:
            bad.append(f"queue {qname}: the ConsumeQueue ends at {max_offset}, acked up to {need - 1} "
                       f"(not dispatched within {DISPATCH_WAIT_S:g}s)")  # fmt: skip
        seen: set[int] = set()
        offset = 0
        for _ in range(need + 50):  # bounded: every pull serves at least one record or moves on
            if offset >= need or not c.broker.alive():
                break
            try:
                r = await client.invoke(c.br, pull(topic, offset, queue_id=q, sys_flag=0, suspend_ms=0),
                                        timeout_s=READ_TIMEOUT_S)  # fmt: skip
            except TRANSPORT_ERRORS as e:
                bad.append(f"pull {qname}@{offset}: no answer ({type(e).__name__})")
                break
            nxt = int(r.ext_fields.get("nextBeginOffset", offset))
            if r.code != ResponseCode.SUCCESS:
                lost = [a.key for o, a in wanted.items() if offset <= o < max(nxt, offset + 1)]
                bad.append(f"pull {qname}@{offset}: code {r.code} {r.remark!r}, next {nxt}"
                           + (f" (skips acked {examples(lost)})" if lost else ""))  # fmt: skip
                if nxt <= offset:
                    break
                offset = nxt
                continue
            body = bytes(r.body or b"")
            pos = 0
            while pos + 4 <= len(body):
                size = int.from_bytes(body[pos : pos + 4], "big")
                if size <= 0 or pos + size > len(body):
                    bad.append(f"pull {qname}@{offset}: a record of size {size} at byte {pos} of {len(body)}")
                    break
                try:
                    qoff = decode_message(body, pos).queue_offset
                except Exception as e:
                    bad.append(f"pull {qname}@{offset}: an undecodable record at byte {pos} ({type(e).__name__}: {e})")
                    break
                why = _check_record(body, pos, wanted.get(qoff), f"by pull {qname}@{qoff}", topic)
                if why is not None:
                    bad.append(why)
                seen.add(qoff)
                pos += size
            offset = max(nxt, offset + 1)
        missing = [a.key for o, a in sorted(wanted.items()) if o not in seen]
        if missing and c.broker.alive():
            bad.append(f"queue {qname}: {len(missing)} acked messages not served by pulls: {examples(missing)}")
    return bad


async def _query_all(client: RemotingClient, c: FaultCluster, acked: list[Ack]) -> list[str]:
    """Each acknowledged message found by its key (QUERY_MESSAGE), byte for byte."""
    bad: list[str] = []

    async def query(a: Ack) -> None:
        try:
            r = await client.invoke(c.br, query_by_key(a.topic, a.key), timeout_s=READ_TIMEOUT_S)
        except TRANSPORT_ERRORS as e:
            bad.append(f"{a.key} by key: no answer ({type(e).__name__})")
            return
        if r.code != ResponseCode.SUCCESS:
            bad.append(f"{a.key} by key: code {r.code} {r.remark!r}")
            return
        body = bytes(r.body or b"")
        pos = 0
        while pos + 4 <= len(body):
            size = int.from_bytes(body[pos : pos + 4], "big")
            if size <= 0 or pos + size > len(body):
                break
            try:
                found = decode_message(body, pos).commit_log_offset == a.offset
            except Exception:
                found = False
            if found:
                if (why := _check_record(body, pos, a, "by key")) is not None:
                    bad.append(why)
                return
            pos += size
        bad.append(f"{a.key} by key: not among the {len(body)} bytes of records served")

    for i in range(0, len(acked), 32):
        if not c.broker.alive():
            bad.append(f"{len(acked) - i} not queried by key: the broker died")
            break
        await asyncio.gather(*(query(a) for a in acked[i : i + 32]))
    return bad


def verify(c: FaultCluster, acked: list[Ack], phase: str, pulls: bool = True, keys: bool = False) -> list[str]:
    """Every acknowledged message, by msgId, (``pulls``) by queue offset and (``keys``) by key;
    the problems, one line each kind."""
    if not c.broker.alive():
        return [f"{phase}: cannot read the {len(acked)} acknowledged messages: {c.broker_state()}"]

    async def main() -> tuple[list[str], list[str], list[str]]:
        client = RemotingClient()
        try:
            by_id = await _view_all(client, c, acked)
            by_pull = await _pull_all(client, c, acked) if pulls else []  # waits for dispatch, so before keys
            return by_id, by_pull, (await _query_all(client, c, acked) if keys else [])
        finally:
            await client.close()

    t0 = time.monotonic()
    by_id, by_pull, by_key = asyncio.run(main())
    pulled = f"{len(by_pull)} pull problems" if pulls else "no pulls"
    queried = f", {len(by_key)} bad by key" if keys else ""
    print(f"  verify {phase}: {len(acked)} acked, {len(by_id)} bad by msgId{queried}, {pulled} "
          f"({time.monotonic() - t0:.1f}s)")  # fmt: skip
    out = []
    if by_id:
        zeros = sum("all zeros" in b for b in by_id)
        out.append(f"{phase}: {len(by_id)} of {len(acked)} acknowledged messages not readable byte for byte by "
                   f"msgId ({zeros} served as zeros): {examples(by_id)}")  # fmt: skip
    if by_pull:
        out.append(f"{phase}: pulls by queue offset: {examples(by_pull)}")
    if by_key:
        out.append(f"{phase}: {len(by_key)} of {len(acked)} acknowledged messages not found by key: {examples(by_key)}")
    if not c.broker.alive():
        out.append(f"{phase}: while reading, {c.broker_state()}")
    return out


# -- the ConsumeQueue files --------------------------------------------------------------

CQ_ENTRY = 20  # CommitLog offset (8), size (4), tags code (8), big-endian
CQ_FILLER_SIZE = 0x7FFFFFFF  # fillPreBlank's entries before a queue's first real one


def consume_queue_problems(store_root: Path) -> list[str]:
    """Every ConsumeQueue under ``store_root``, read from its files (the page cache a running
    broker writes through): a file missing between two, a blank entry before a real one (a
    gap), a CommitLog offset in two entries (of one queue or of two). One line per problem."""
    problems: list[str] = []
    owners: dict[int, str] = {}
    cq_root = store_root / "consumequeue"
    for queue_dir in sorted(p for p in cq_root.glob("*/*") if p.is_dir()):
        where = f"{queue_dir.parent.name}:{queue_dir.name}"
        files = sorted(queue_dir.iterdir(), key=lambda p: int(p.name))
        data = bytearray()
        for i, f in enumerate(files):
            if i and int(f.name) != int(files[i - 1].name) + files[i - 1].stat().st_size:
                problems.append(f"{where}: file {f.name} does not follow {files[i - 1].name}")
            data += f.read_bytes()
        first = int(files[0].name) // CQ_ENTRY if files else 0
        seen_real = False
        blanks: list[int] = []  # since the last real entry (zeros; fillers once a real entry was seen)
        for i in range(len(data) // CQ_ENTRY):
            entry = data[i * CQ_ENTRY : (i + 1) * CQ_ENTRY]
            offset, size = int.from_bytes(entry[0:8], "big"), int.from_bytes(entry[8:12], "big")
            if size == 0 or size == CQ_FILLER_SIZE:
                if size == 0 or seen_real:
                    blanks.append(first + i)
                continue
            if blanks:
                problems.append(f"{where}: a gap of {len(blanks)} blank entries at {blanks[0]}..{blanks[-1]}")
                blanks = []
            seen_real = True
            other = owners.setdefault(offset, f"{where}@{first + i}")
            if other != f"{where}@{first + i}":
                problems.append(f"{where}@{first + i}: CommitLog offset {offset} also in {other}")
    return problems
