"""Crash tests: store processes killed with SIGKILL at random points while writers run.

Each scenario runs a bounded number of cycles on ONE store directory, so recovery runs
again and again over a growing store. A cycle:

1. start ``tests.crash.store_worker`` on the directory, wait for ``READY``;
2. let the writers run a random 0.05–1.0 s, then ``SIGKILL`` the process;
3. collect the ``ACK`` lines (each printed only after its put returned PUT_OK);
4. (power-loss scenario) damage the tail of the last CommitLog file;
5. open the store in this process (``load()`` + ``start()``, wait for dispatch) and check
   the invariants below, put one new message and read it back, shut down cleanly.

Invariants checked after every restart:

* every ACKed message (still expected, see below) is in its ConsumeQueue at the ACKed
  queue offset and CommitLog offset, found by key with ``query_message``, and its bytes
  are the body its key defines;
* every record that ``get_message`` serves decodes, passes its body CRC, belongs to the
  queue it was served from, has ``queue_offset`` equal to its position (the queue is
  contiguous from its min to its max offset), carries a body matching its key, and no key
  appears twice;
* ``abort`` exists after the kill and is gone after the verifier's clean shutdown;
* the store accepts a new write and serves it.

Expected set: a process kill loses nothing that was ACKed (page cache survives). After the
simulated power loss, ACKed records that lie entirely before the first damaged byte are
still expected; the rest are dropped, and recovery must end the CommitLog exactly at the
start of the first damaged record. With clean-up running, records below the CommitLog's
min offset are expired.

``PUMICE_CRASH_CYCLES`` (default 3) sets the cycles per scenario, ``PUMICE_CRASH_SEED``
the base seed. Each scenario prints ``crash scenario X: N cycles, M acked messages
verified`` (straight to the terminal, with or without ``-s``); ``pytest -m crash`` runs only these.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pumice.common.message_decoder import decode_message, head_struct
from pumice.store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig, PutMessageStatus
from pumice.store.message_check import check_message_and_return_size
from tests.crash.store_worker import body_for_key, make_config, make_key, properties_for
from tests.helpers.waiting import wait_dispatched

CYCLES = max(1, int(os.environ.get("PUMICE_CRASH_CYCLES", "3")))
BASE_SEED = int(os.environ.get("PUMICE_CRASH_SEED", "4909"))
REPO_ROOT = Path(__file__).resolve().parents[2]

READY_TIMEOUT_S = 120.0  # a long run's store takes a while to recover at start
RUN_S = (0.05, 1.0)
KILL_WAIT_S = 10.0
DISPATCH_TIMEOUT_S = 120.0
CUT_WINDOW = 32 * 1024  # the power-loss cut lands in the last 32 KiB of written data
FLIP_WINDOW = 4 * 1024  # bits are flipped in records overlapping the 4 KiB before the cut
MAX_EXAMPLES = 4

pytestmark = [pytest.mark.crash, pytest.mark.timeout(max(300, 120 * CYCLES))]


# -- scenarios ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    flush: str
    commit_log_size: int
    worker_args: tuple[str, ...] = ()
    power_loss: bool = False
    cleanup: bool = False
    max_messages: int = 12_000  # per cycle; keeps CI short and the store bounded

    def config(self, root: str) -> MessageStoreConfig:
        return make_config(root, self.flush, self.commit_log_size)


# big bodies in 64 KiB files, half the single puts sized to end right at the file's end
ROLLOVER_ARGS = (
    "--body-min", "2048", "--body-max", "30000", "--near-end-prob", "0.5", "--near-end-max", "60000",
    "--batch-prob", "0.2", "--batch-max", "3",
)  # fmt: skip
# many tiny messages in big batches, dispatch slowed to ~3,300 messages/s so it lags far behind
DISPATCH_ARGS = (
    "--writers", "6", "--body-min", "1", "--body-max", "64", "--batch-prob", "0.9", "--batch-max", "64",
    "--topics", "6", "--queues", "8", "--near-end-prob", "0", "--dispatch-delay-us", "300",
)  # fmt: skip
# 64 KiB files, every file but the last expired at once, a manual clean-up pass every 2 ms;
# dispatch slowed, so clean-up also deletes CommitLog files dispatch has not reached yet
CLEANUP_ARGS = (
    "--body-min", "256", "--body-max", "8192", "--near-end-prob", "0.2", "--cleanup", "--cleanup-interval-ms", "2",
    "--dispatch-delay-us", "300",
)  # fmt: skip

SCENARIOS = {
    "sync_flush_kill": Scenario("sync_flush_kill", "sync", 256 * 1024),
    "async_flush_kill": Scenario("async_flush_kill", "async", 256 * 1024),
    "kill_during_rollover": Scenario(
        "kill_during_rollover",
        "sync",
        64 * 1024,
        ROLLOVER_ARGS,
    ),
    "kill_during_dispatch": Scenario(
        "kill_during_dispatch",
        "async",
        256 * 1024,
        DISPATCH_ARGS,
        max_messages=15_000,
    ),
    "kill_during_cleanup": Scenario(
        "kill_during_cleanup",
        "async",
        64 * 1024,
        CLEANUP_ARGS,
        cleanup=True,
    ),
    "power_loss": Scenario("power_loss", "async", 256 * 1024, ("--near-end-prob", "0.1"), power_loss=True),
}


# -- worker runs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ack:
    key: str
    topic: str
    queue_id: int
    queue_offset: int
    phys: int


@dataclass
class WorkerRun:
    acks: list[Ack] = field(default_factory=list)
    nacks: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    last_stat: str = ""
    max_behind: int = 0
    killed: bool = False
    stdout_path: str = ""
    stderr_path: str = ""


def _read_lines(path: Path) -> list[str]:
    data = path.read_bytes()
    end = data.rfind(b"\n")
    return data[: end + 1].decode(errors="replace").splitlines() if end >= 0 else []


def run_worker(sc: Scenario, store_dir: Path, log_dir: Path, cycle: int, seed: int, run_s: float) -> WorkerRun:
    """Start a worker, wait for READY, let it write ``run_s`` seconds, SIGKILL it."""
    out_path = log_dir / f"cycle{cycle}.stdout"
    err_path = log_dir / f"cycle{cycle}.stderr"
    cmd = [
        sys.executable, "-m", "tests.crash.store_worker", "--store", str(store_dir), "--flush", sc.flush,
        "--seed", str(seed), "--commit-log-size", str(sc.commit_log_size), "--key-prefix", f"c{cycle}",
        "--max-messages", str(sc.max_messages), "--max-seconds", "60", *sc.worker_args,
    ]  # fmt: skip
    run = WorkerRun(stdout_path=str(out_path), stderr_path=str(err_path))
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while b"READY\n" not in out_path.read_bytes():
            if proc.poll() is not None:
                raise AssertionError(f"worker exited with {proc.returncode} before READY: {err_path.read_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"worker not READY after {READY_TIMEOUT_S}s: {err_path.read_text()}")
            time.sleep(0.01)
        time.sleep(run_s)
        if proc.poll() is not None:
            raise AssertionError(f"worker exited with {proc.returncode} before the kill: {err_path.read_text()}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=KILL_WAIT_S)
        run.killed = proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=KILL_WAIT_S)
    for line in _read_lines(out_path):
        parts = line.split(" ")
        if parts[0] == "ACK" and len(parts) == 6:
            run.acks.append(Ack(parts[1], parts[2], int(parts[3]), int(parts[4]), int(parts[5])))
        elif parts[0] == "NACK" and len(parts) == 3:
            run.nacks[parts[2]] += 1
        elif parts[0] == "STAT":
            run.last_stat = line
            behind = int(parts[1].split("=")[1])
            run.max_behind = max(run.max_behind, behind)
        elif parts[0] == "ERROR":
            run.errors.append(line)
    return run


# -- violations --------------------------------------------------------------------------


class Violations:
    """Invariant violations, by category, with the cycles they were seen in and a few examples."""

    def __init__(self) -> None:
        self.cycle = 0
        self.counts: Counter[str] = Counter()
        self.cycles: dict[str, list[int]] = {}
        self.examples: dict[str, list[str]] = {}

    def add(self, category: str, detail: str) -> None:
        self.counts[category] += 1
        cycles = self.cycles.setdefault(category, [])
        if not cycles or cycles[-1] != self.cycle:
            cycles.append(self.cycle)
        ex = self.examples.setdefault(category, [])
        if len(ex) < MAX_EXAMPLES:
            ex.append(f"cycle {self.cycle}: {detail}")

    def __bool__(self) -> bool:
        return bool(self.counts)

    def summary(self) -> str:
        lines = []
        for cat, n in self.counts.most_common():
            lines.append(f"  [{n}x, cycles {self.cycles[cat]}] {cat}")
            lines.extend(f"        e.g. {d}" for d in self.examples[cat])
        return "\n".join(lines)


# -- power loss --------------------------------------------------------------------------


@dataclass
class Damage:
    file_name: str
    file_from: int
    used_end: int  # absolute end of the valid records in the file before damage
    cut: int  # absolute: zeros from here to the end of the file
    flips: list[int]  # absolute byte offsets with one bit flipped
    first_damaged: int  # absolute first damaged byte (== used_end when nothing was)
    damaged_record_start: int  # absolute start of the record holding it (where recovery must end)
    records: dict[int, int]  # absolute offset → size of every record of the file before damage

    def describe(self) -> str:
        return (
            f"{os.path.basename(self.file_name)}: used to {self.used_end}, cut at {self.cut}, "
            f"flips at {self.flips}, first damaged byte {self.first_damaged}, "
            f"damaged record starts at {self.damaged_record_start}"
        )


def _parse_records(data: bytes | bytearray) -> tuple[list[tuple[int, int]], int]:
    """(pos, size) of each valid record from the file start, and where valid data ends."""
    records: list[tuple[int, int]] = []
    pos = 0
    while True:
        _, size, ok = check_message_and_return_size(data, pos, len(data), True)
        if ok and size > 0:
            records.append((pos, size))
            pos += size
        elif ok and size == 0:  # blank end-of-file record: the file is full
            return records, len(data)
        else:
            return records, pos


def simulate_power_loss(cfg: MessageStoreConfig, rng: random.Random) -> Damage | None:
    """Zero the last written CommitLog file from a random byte to its end (length kept),
    and flip bits in records in the few KiB before that byte.

    The 4.9 record format protects the body with a CRC and the frame with TOTALSIZE and
    MAGICCODE; nothing protects the other header fields, so a flip there cannot be told
    from data by any 4.9 recovery. Flips are aimed at TOTALSIZE, MAGICCODE, BODYCRC and
    the body.
    """
    cl_dir = cfg.commit_log_dir
    names = sorted(n for n in os.listdir(cl_dir) if n.isdigit() and len(n) == 20)
    for name in reversed(names):  # the newest file with data (a fresh empty one may follow)
        path = os.path.join(cl_dir, name)
        with open(path, "rb") as f:
            data = bytearray(f.read())
        records, used = _parse_records(data)
        if used > 0:
            break
    else:
        return None
    base = int(name)
    cut = rng.randint(max(0, used - CUT_WINDOW), used)
    candidates = [(p, s) for p, s in records if p < cut and p + s > cut - FLIP_WINDOW]
    flips: list[int] = []
    for _ in range(rng.randint(1, 3)):
        if not candidates:
            break
        p, s = rng.choice(candidates)
        blen = int.from_bytes(data[p + head_struct(0).size - 4 : p + head_struct(0).size], "big")
        region = rng.choice(("size", "magic", "crc", "body", "body", "body"))
        if region == "body" and blen > 0:
            b = p + head_struct(0).size + rng.randrange(blen)
        else:
            b = p + {"size": 0, "magic": 4, "crc": 8}.get(region, 8) + rng.randrange(4)
        if b >= cut:
            continue
        data[b] ^= 1 << rng.randrange(8)
        flips.append(base + b)
    data[cut:] = bytes(len(data) - cut)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes(data), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    damaged = sorted(flips + ([base + cut] if cut < used else []))
    first = damaged[0] if damaged else base + used
    start = base + used
    for p, s in records:
        if base + p <= first < base + p + s:
            start = base + p
            break
    return Damage(path, base, base + used, base + cut, sorted(flips), first, start,
                  {base + p: s for p, s in records})  # fmt: skip


# -- verification ------------------------------------------------------------------------


@contextmanager
def opened_store(cfg: MessageStoreConfig) -> Iterator[DefaultMessageStore]:
    store = DefaultMessageStore(cfg)
    try:
        assert store.load(), "load() failed"
        store.start()
        wait_dispatched(store, DISPATCH_TIMEOUT_S)
        yield store
    finally:
        store.shutdown()


@dataclass
class Found:
    topic: str
    queue_id: int
    queue_offset: int
    phys: int


@dataclass
class ScanResult:
    found: dict[str, Found] = field(default_factory=dict)
    served: int = 0
    expired_skipped: int = 0  # entries inside [min, max) whose record is below the CommitLog min (clean-up lag)


def scan_queues(store: DefaultMessageStore, v: Violations) -> ScanResult:
    """Page every ConsumeQueue from its min offset with get_message and check every record.

    An entry that get_message skips is a hole unless its record lies below the CommitLog's
    min offset (deleted by clean-up before the ConsumeQueue's min offset caught up).
    """
    out = ScanResult()
    min_phy = store.get_min_phy_offset()
    for topic, qmap in sorted(store.consume_queue_table.items()):
        for qid in sorted(qmap):
            lo = store.get_min_offset_in_queue(topic, qid)
            hi = store.get_max_offset_in_queue(topic, qid)
            where = f"{topic}/{qid}"
            offset = lo
            for _ in range(hi - lo + 1):  # at least one record or one step per iteration
                if offset >= hi:
                    break
                res = store.get_message("crash-verifier", topic, qid, offset, 32)
                if res is None:
                    v.add("get_message returned None", f"{where} offset {offset}")
                    break
                with res:
                    expect = offset
                    for buf, qo in zip(res.buffers, res.queue_offsets, strict=True):
                        _check_skipped(store, topic, qid, expect, qo, min_phy, res.status.value, out, v)
                        expect = qo + 1
                        out.served += 1
                        _check_record(bytes(buf), topic, qid, qo, out.found, v)
                    nxt = res.next_begin_offset if res.next_begin_offset > offset else offset + 1
                    _check_skipped(store, topic, qid, expect, min(nxt, hi), min_phy, res.status.value, out, v)
                offset = nxt
    return out


def _check_skipped(
    store: DefaultMessageStore,
    topic: str,
    qid: int,
    start: int,
    stop: int,
    min_phy: int,
    status: str,
    out: ScanResult,
    v: Violations,
) -> None:
    cq = store.get_consume_queue(topic, qid)
    for i in range(start, stop):
        e = cq.get_entry(i) if cq is not None else None
        if e is not None and e[0] < min_phy:
            out.expired_skipped += 1
        else:
            v.add(
                "hole in a ConsumeQueue (an entry inside [min, max) is not served)",
                f"{topic}/{qid}@{i}: entry {e}, CommitLog min {min_phy}, get_message status {status}",
            )


def _check_record(buf: bytes, topic: str, qid: int, qo: int, found: dict[str, Found], v: Violations) -> None:
    where = f"{topic}/{qid}@{qo}"
    try:
        m = decode_message(buf)
    except Exception as e:
        v.add("served record does not decode", f"{where}: {e!r}")
        return
    if m.store_size != len(buf):
        v.add("served record size differs from its TOTALSIZE", f"{where}: {m.store_size} vs {len(buf)}")
    if zlib.crc32(m.body) & 0x7FFFFFFF != m.body_crc:
        v.add("served record fails its body CRC", f"{where} phys {m.commit_log_offset}")
    if m.topic != topic or m.queue_id != qid:
        v.add("served record belongs to another queue", f"{where}: record says {m.topic}/{m.queue_id}")
    if m.queue_offset != qo:
        v.add("ConsumeQueue not contiguous (QUEUEOFFSET != position)", f"{where}: QUEUEOFFSET {m.queue_offset}")
    key = m.properties.get("KEYS")
    try:
        body_ok = key is not None and body_for_key(key) == m.body
    except (ValueError, IndexError):
        body_ok = False
    if not body_ok:
        v.add("served record's bytes differ from what its key defines", f"{where} key {key!r}")
    if key is None:
        return
    if key in found:
        f = found[key]
        first = f"{f.topic}/{f.queue_id}@{f.queue_offset}"
        v.add("message appears twice in the ConsumeQueues", f"{key} at {where} and {first}")
        return
    found[key] = Found(topic, qid, qo, m.commit_log_offset)


def check_acked(store: DefaultMessageStore, acks: list[Ack], found: dict[str, Found], v: Violations) -> None:
    for a in acks:
        f = found.get(a.key)
        if f is None:
            v.add("ACKed message missing from its ConsumeQueue", f"{a.key} {a.topic}/{a.queue_id}@{a.queue_offset}")
        elif (f.topic, f.queue_id, f.queue_offset, f.phys) != (a.topic, a.queue_id, a.queue_offset, a.phys):
            v.add(
                "ACKed message found somewhere else",
                f"{a.key}: ACK {a.topic}/{a.queue_id}@{a.queue_offset} phys {a.phys}, "
                f"found {f.topic}/{f.queue_id}@{f.queue_offset} phys {f.phys}",
            )
        hits = store.query_message(a.topic, a.key)
        at = [m for m in hits if m.commit_log_offset == a.phys]
        if not at:
            v.add("ACKed message not found by key (query_message)", f"{a.key} phys {a.phys} ({len(hits)} other hits)")
        elif at[0].body != body_for_key(a.key):
            v.add("ACKed message found by key has other bytes", f"{a.key} phys {a.phys}")
        offsets = [m.commit_log_offset for m in hits]
        if len(set(offsets)) > 1:
            v.add("key stored more than once in the CommitLog (query_message)", f"{a.key}: {offsets}")
        elif len(offsets) > 1:
            v.add("query_message returns one record several times (duplicate index entries)", f"{a.key}: {offsets}")


def probe_write(store: DefaultMessageStore, cycle: int, v: Violations) -> Ack | None:
    """A new put after recovery must succeed and be readable by queue and by key."""
    key = make_key(f"c{cycle}", "probe", 0, 100 + cycle)
    topic, qid = "CrashTopic0", 0
    r = store.put_message(
        MessageExtBrokerInner(topic=topic, body=body_for_key(key), queue_id=qid, properties=properties_for(key, qid))
    )
    ar = r.append_message_result
    if r.status is not PutMessageStatus.PUT_OK or ar is None:
        v.add("new put after recovery fails", f"{key}: {r.status.value} {r.remark}")
        return None
    ack = Ack(key, topic, qid, ar.logics_offset, ar.wrote_offset)
    wait_dispatched(store, DISPATCH_TIMEOUT_S)
    res = store.get_message("crash-verifier", topic, qid, ack.queue_offset, 1)
    m = None
    if res is not None:
        with res:
            m = decode_message(bytes(res.buffers[0])) if res.buffers else None
    if m is None or m.body != body_for_key(key) or m.commit_log_offset != ack.phys:
        v.add("new put after recovery is not readable by queue", f"{key} at {topic}/{qid}@{ack.queue_offset}")
    if not any(x.commit_log_offset == ack.phys for x in store.query_message(topic, key)):
        v.add("new put after recovery is not found by key", key)
    return ack


# -- the scenario loop -------------------------------------------------------------------


@dataclass
class Tally:
    cycles: int = 0
    acked: int = 0
    verified: int = 0
    served: int = 0
    lost_to_damage: int = 0
    expired: int = 0
    expired_skipped: int = 0
    max_behind: int = 0
    kill_stats: list[str] = field(default_factory=list)
    damages: list[str] = field(default_factory=list)

    def line(self, name: str, seed: int) -> str:
        extra = [f"seed {seed}", f"{self.acked} acked in all", f"{self.served} records served and checked"]
        if self.lost_to_damage:
            extra.append(f"{self.lost_to_damage} acked lost to simulated power loss (allowed)")
        if self.expired:
            extra.append(f"{self.expired} acked expired by clean-up")
        if self.expired_skipped:
            extra.append(f"{self.expired_skipped} expired ConsumeQueue entries skipped above a queue's min offset")
        extra.append(f"max dispatch lag seen {self.max_behind} bytes")
        head = f"crash scenario {name}: {self.cycles} cycles, {self.verified} acked messages verified"
        return f"{head} ({'; '.join(extra)})"


@dataclass
class ScenarioRun:
    sc: Scenario
    cfg: MessageStoreConfig
    store_dir: Path
    log_dir: Path
    rng: random.Random
    expected: dict[str, Ack] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)
    v: Violations = field(default_factory=Violations)
    notes: list[str] = field(default_factory=list)

    def cycle(self, cycle: int) -> None:
        sc, cfg, v, tally, expected = self.sc, self.cfg, self.v, self.tally, self.expected
        v.cycle = cycle
        worker_seed = self.rng.randrange(2**31)
        run_s = self.rng.uniform(*RUN_S)
        run = run_worker(sc, self.store_dir, self.log_dir, cycle, worker_seed, run_s)
        tally.cycles += 1
        tally.acked += len(run.acks)
        tally.max_behind = max(tally.max_behind, run.max_behind)
        tally.kill_stats.append(
            f"cycle {cycle}: worker seed {worker_seed}, killed after {run_s:.2f}s, {len(run.acks)} acked, "
            f"last {run.last_stat or 'no STAT'}"
        )
        if not run.killed:
            v.add("worker not killed by SIGKILL", run.stderr_path)
        for e in run.errors:
            v.add("worker error", e[:500])
        if run.nacks:
            self.notes.append(f"cycle {cycle}: puts not PUT_OK: {dict(run.nacks)}")
        for a in run.acks:
            if a.key in expected:
                v.add("worker ACKed a key twice", a.key)
            expected[a.key] = a
        if not os.path.exists(cfg.abort_path):
            v.add("abort file missing after SIGKILL (an unclean stop cannot be detected)", cfg.abort_path)

        damage = simulate_power_loss(cfg, self.rng) if sc.power_loss else None
        if damage is not None:
            tally.damages.append(f"cycle {cycle}: {damage.describe()}")
            for key, a in list(expected.items()):
                if a.phys < damage.file_from:
                    continue  # in an older file: untouched
                size = damage.records.get(a.phys)
                if size is None:  # not a valid record of the file even before the damage
                    v.add("ACKed record not in the CommitLog after the kill", f"{a.key} phys {a.phys}")
                    del expected[key]
                elif a.phys + size > damage.first_damaged:
                    del expected[key]
                    tally.lost_to_damage += 1

        with opened_store(cfg) as store:
            if damage is not None:
                end = store.get_max_phy_offset()
                if end > damage.damaged_record_start:
                    v.add(
                        "recovery kept CommitLog data past the first damaged record",
                        f"max offset {end} > {damage.damaged_record_start}; {damage.describe()}",
                    )
                elif end < damage.damaged_record_start:
                    v.add(
                        "recovery dropped intact records before the damage",
                        f"max offset {end} < {damage.damaged_record_start}; {damage.describe()}",
                    )
            min_phy = store.get_min_phy_offset()
            if sc.cleanup:
                for key, a in list(expected.items()):
                    if a.phys < min_phy:
                        del expected[key]
                        tally.expired += 1
            elif min_phy > 0:
                v.add("CommitLog files deleted without clean-up", f"min offset {min_phy}")
            scan = scan_queues(store, v)
            tally.served += scan.served
            tally.expired_skipped += scan.expired_skipped
            required = list(expected.values())
            check_acked(store, required, scan.found, v)
            tally.verified += len(required)
            probe = probe_write(store, cycle, v)
            if probe is not None:
                expected[probe.key] = probe
        if os.path.exists(cfg.abort_path):
            v.add("abort file left after a clean shutdown", cfg.abort_path)


def run_scenario(sc: Scenario, tmp_path: Path) -> tuple[ScenarioRun, int]:
    """All cycles on one store directory; a cycle that raises ends the run (reported as a violation)."""
    seed = BASE_SEED + sum(map(ord, sc.name))
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    store_dir = tmp_path / "store"
    run = ScenarioRun(sc, sc.config(str(store_dir)), store_dir, log_dir, random.Random(seed))
    run.notes.append(f"store {store_dir}, worker output in {log_dir}")
    for cycle in range(CYCLES):
        try:
            run.cycle(cycle)
        except Exception as e:
            run.v.add("cycle aborted by an exception", f"{type(e).__name__}: {str(e)[:1000]}")
            break
    return run, seed


def _report(run: ScenarioRun, seed: int) -> str:
    lines = [run.tally.line(run.sc.name, seed)]
    lines += [f"  {s}" for s in run.tally.kill_stats]
    lines += [f"  damage {d}" for d in run.tally.damages]
    lines += [f"  note {n}" for n in run.notes]
    if run.v:
        lines.append("VIOLATIONS:")
        lines.append(run.v.summary())
    return "\n".join(lines)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_crash(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = SCENARIOS[name]
    if sc.cleanup and not hasattr(DefaultMessageStore, "execute_delete_files_manually"):
        pytest.skip("DefaultMessageStore.execute_delete_files_manually() does not exist yet")
    run, seed = run_scenario(sc, tmp_path)
    report = _report(run, seed)
    with capsys.disabled():
        print("\n" + report, flush=True)
    assert not run.v, report
