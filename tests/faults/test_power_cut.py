"""Power cuts below the file system under SYNC_FLUSH (issue 30, point 1): nothing acknowledged
may be lost, and the ConsumeQueues must come back whole.

The store is on ext4 on a loop device whose backing file is served by a FUSE passthrough
(``PowerCutDisk``, tests/helpers/power_cut_fs.py). At the cut the daemon silently drops
every later write and flush; then the broker is SIGKILLed, the ext4 unmounted (its dirty
pages, written back then, go nowhere), the loop detached, the cut switched off, the loop
attached again, ``e2fsck -p`` run as a boot would, the ext4 mounted and the broker started
on the same store. Only SEND_OKs read before the cut count as acknowledged: a powerless
broker answers nothing, so a later one cannot have been durable.

The broker (BROKER_CONF): SYNC_FLUSH, 1 MiB CommitLog files, ConsumeQueue files of 50
entries, IndexFiles of 100 entries (two per message, its KEYS and its UNIQ_KEY: a new one
every 50 messages), so that every kind of file rolls over between cuts.

After each restart, every acknowledged message must be readable byte for byte by msgId, by
pull at its queue offset and by key; each queue's max offset must cover it (``verify``); no
ConsumeQueue may hold a blank entry before a real one nor a CommitLog offset twice
(``consume_queue_problems``, read from the files).

``test_the_harness_drops_writes_after_the_cut``: a file fsynced before the cut is there after
the power cycle; a file written and fsynced after it is gone, and an overwrite is undone.

``test_power_cut_after_index_file_rolls``: the issue's first case, made deterministic: 150
messages of 12 KiB, one at a time, to one busy queue (whose full ConsumeQueue files the 1 s
flush makes durable) and one sparse queue (whose one file it never flushes); a pause of
ISSUE_PAUSE_S once the second CommitLog file has begun, then the rest, whose IndexFile roll
flushes the checkpoint; the cut at once after the 150th SEND_OK. Recovery then trusts the
checkpoint past the start of the second CommitLog file, whose ConsumeQueue entries were
never on disk.

``test_power_cut_at_random_points``: ROUNDS rounds on one store, each PRODUCERS concurrent
producers over TOPICS x QUEUES queues with keys and bodies of random sizes, cut after a
random time (CUT_WINDOWS_S: half before, half after the checkpoint's 3 s slack; seeded:
PUMICE_POWER_CUT_SEED, else a fresh seed, printed and in every failure message), the load
going on into the dead disk for a random moment after the cut.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pumice.common.message_decoder import decode_message_id
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.response_code import ResponseCode
from tests.helpers.faults import (
    QUEUES,
    TRANSPORT_ERRORS,
    Ack,
    FaultCluster,
    PowerCutDisk,
    consume_queue_problems,
    send_request,
    verify,
)

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

BROKER_CONF = {
    "mapedFileSizeCommitLog": 2**20,
    "mapedFileSizeConsumeQueue": 20 * 20,
    "maxIndexNum": 100,
    "maxHashSlotNum": 50,
}
SEND_TIMEOUT_S = 10.0
ISSUE_MESSAGES = 150
ISSUE_BODY = 12 * 1024  # 83 to a CommitLog file: the second begins before the third IndexFile (at the 101st)
ISSUE_BUSY_QUEUE, ISSUE_SPARSE_QUEUE, ISSUE_SPARSE_EVERY = 0, 1, 8  # one queue fills its ConsumeQueue files
ISSUE_PAUSE_AFTER = 5  # SEND_OKs in the second CommitLog file before the pause
ISSUE_PAUSE_S = 4.5  # over the checkpoint's 3 s slack, and the 1 s ConsumeQueue flush (full files) meanwhile
TOPICS = ("PcT0", "PcT1", "PcT2")
PRODUCERS = 4
ROUNDS = 4
# the random cut points, in seconds of load: half the rounds within the checkpoint's 3 s slack
# (recovery replays the whole last files), half past it (recovery trusts the checkpoint)
CUT_WINDOWS_S = ((0.3, 3.0), (3.5, 7.0))
AFTER_CUT_S = (0.0, 0.3)  # how long the load goes on into the dead disk
BODY_SIZES = (256, 12 * 1024)
HOT_SHARE = 0.5  # of the sends go to one queue (TOPICS[0]:0), which fills ConsumeQueue files fastest
PACE_S = 0.01  # between a producer's sends: ~300 SEND_OK a second in all, so that verifying stays quick
MAX_SENDS_PER_PRODUCER = 1_000  # a bound: a round lasts at most 7 s


def pick(rng: random.Random) -> tuple[str, int, int]:
    """A send's topic, queue and body size: the hot queue HOT_SHARE of the time, else any."""
    size = rng.randint(*BODY_SIZES)
    if rng.random() < HOT_SHARE:
        return TOPICS[0], 0, size
    return rng.choice(TOPICS), rng.randrange(QUEUES), size


LOG_MARKS = ("redo", "gap", "blank", "recover", "abnormal", "truncat", "checkpoint", "ERROR", "Traceback")


@dataclass
class Round:
    """One load up to a cut: the SEND_OKs read before it, and what happened."""

    seq: int
    acks: list[Ack] = field(default_factory=list)
    sends: int = 0
    late_acks: int = 0  # SEND_OKs read after the cut: not acknowledged (the power was off)
    errors: list[str] = field(default_factory=list)
    cut_at: float | None = None
    stopped: bool = False


async def send(
    client: RemotingClient, c: FaultCluster, rnd: Round, topic: str, queue_id: int, key: str, size: int
) -> bool:
    """One send; the ack recorded in ``rnd`` if it was read before the cut. False on a transport error."""
    rnd.sends += 1
    try:
        r = await client.invoke(c.br, send_request(key, queue_id, topic, size), timeout_s=SEND_TIMEOUT_S)
    except TRANSPORT_ERRORS as e:
        if rnd.cut_at is None:
            rnd.errors.append(f"{key}: {type(e).__name__}: {e}")
        return False
    if r.code != ResponseCode.SUCCESS:
        if rnd.cut_at is None:
            rnd.errors.append(f"{key}: code {r.code} {r.remark!r}")
        return True
    if rnd.cut_at is not None:
        rnd.late_acks += 1
        return True
    msg_id = r.ext_fields["msgId"]
    qid, qoff = int(r.ext_fields.get("queueId", queue_id)), int(r.ext_fields["queueOffset"])
    rnd.acks.append(Ack(key, msg_id, qid, qoff, decode_message_id(msg_id)[1], topic, size))
    return True


def cut(disk: PowerCutDisk, rnd: Round) -> None:
    """The cut; the acknowledgements counted end here (called in the event loop's thread, so
    every answer read later is seen as after it)."""
    rnd.cut_at = time.monotonic()
    disk.cut()


def reboot(disk: PowerCutDisk, c: FaultCluster) -> str:
    """SIGKILL the broker, power-cycle the disk, start the broker on the same store; e2fsck's output."""
    c.broker.kill()
    fsck = disk.power_cycle()
    why = c.start_broker()
    assert why is None, why
    return fsck


def check(c: FaultCluster, disk: PowerCutDisk, acked: list[Ack], phase: str, context: str) -> None:
    """Every acknowledged message by msgId, pull and key; the ConsumeQueue files whole."""
    problems = verify(c, acked, phase, pulls=True, keys=True)
    problems += [f"{phase}: {p}" for p in consume_queue_problems(c.store_root)]
    if problems:
        log_file = c.tmp / "logs" / "store.log"
        lines = log_file.read_text(errors="replace").splitlines(keepends=True) if log_file.exists() else []
        marked = [line for line in lines if any(m in line for m in LOG_MARKS)]
        raise AssertionError(
            "\n".join(problems)
            + f"\n{context}\ndisk: {disk.state()}; e2fsck: {disk.fsck_output[-1:]}"
            + "\nthe store log's lines about recovery:\n"
            + ("".join(marked[-25:]) or "(none)\n")
            + f"(the whole log: {log_file})"
        )


def test_the_harness_drops_writes_after_the_cut(power_cut_disk: PowerCutDisk) -> None:
    disk = power_cut_disk

    def write_synced(name: str, data: bytes) -> None:
        fd = os.open(disk.mount / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        dfd = os.open(disk.mount, os.O_RDONLY)  # the directory entry too
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    write_synced("before", b"durable" * 1000)
    forwarded = disk.state()
    assert forwarded["writes"] and forwarded["fsyncs"], f"nothing reached the daemon before the cut: {forwarded}"
    disk.cut()
    write_synced("after", b"lost" * 1000)
    write_synced("before", b"overwritten" * 1000)
    assert (disk.mount / "after").read_bytes() == b"lost" * 1000  # the page cache above still has it
    dropped = disk.state()
    assert dropped["cut"] and dropped["dropped_writes"] and dropped["dropped_fsyncs"], dropped
    assert dropped["writes"] == forwarded["writes"], f"a write was forwarded after the cut: {forwarded} -> {dropped}"
    disk.power_cycle()
    assert not disk.state()["cut"]
    assert (disk.mount / "before").read_bytes() == b"durable" * 1000
    after = disk.mount / "after"
    assert not after.exists() or after.read_bytes() != b"lost" * 1000, "a write made after the cut survived it"


def test_power_cut_after_index_file_rolls(
    power_cut_disk: PowerCutDisk, power_cut_cluster: Callable[..., FaultCluster], tmp_path: Path
) -> None:
    disk = power_cut_disk
    c = power_cut_cluster("SYNC_FLUSH", logDir=tmp_path / "logs", **BROKER_CONF)
    rnd = Round(1)
    index_files_at_pause: list[str] = []

    async def load() -> None:
        client = RemotingClient()
        try:
            paused = False
            for i in range(ISSUE_MESSAGES):
                queue_id = ISSUE_SPARSE_QUEUE if i % ISSUE_SPARSE_EVERY == 0 else ISSUE_BUSY_QUEUE
                ok = await send(client, c, rnd, "PcT", queue_id, f"issue-{i}", ISSUE_BODY)
                assert ok, f"send {i}: {rnd.errors[-1:]}"
                in_second_file = sum(a.offset >= 2**20 for a in rnd.acks)
                if not paused and in_second_file >= ISSUE_PAUSE_AFTER:
                    paused = True
                    index_files_at_pause.extend(p.name for p in (c.store_root / "index").iterdir())
                    await asyncio.sleep(ISSUE_PAUSE_S)
            cut(disk, rnd)
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(load(), 60))
    assert len(rnd.acks) == ISSUE_MESSAGES, f"{len(rnd.acks)} SEND_OK of {ISSUE_MESSAGES}: {rnd.errors[:3]}"
    index_files = sorted(p.name for p in (c.store_root / "index").iterdir())
    commit_log_files = sorted(p.name for p in (c.store_root / "commitlog").iterdir())
    assert len(commit_log_files) >= 2, commit_log_files
    assert index_files_at_pause and len(index_files) > len(index_files_at_pause), (index_files_at_pause, index_files)
    fsck = reboot(disk, c)
    context = (f"{ISSUE_MESSAGES} SEND_OK to PcT, a {ISSUE_PAUSE_S:g}s pause once {ISSUE_PAUSE_AFTER} were in the "
               f"second CommitLog file, an IndexFile roll after it, the cut after the last SEND_OK; index files "
               f"{index_files_at_pause} -> {index_files}; e2fsck: {fsck!r}")  # fmt: skip
    check(c, disk, rnd.acks, "after the power cut", context)


def test_power_cut_at_random_points(
    power_cut_disk: PowerCutDisk, power_cut_cluster: Callable[..., FaultCluster], tmp_path: Path
) -> None:
    disk = power_cut_disk
    seed = int(os.environ.get("PUMICE_POWER_CUT_SEED") or random.SystemRandom().randrange(2**32))
    rng = random.Random(seed)
    print(f"  power cut seed {seed} (PUMICE_POWER_CUT_SEED={seed} repeats it)")
    c = power_cut_cluster("SYNC_FLUSH", logDir=tmp_path / "logs", **BROKER_CONF)
    acked: list[Ack] = []
    history: list[str] = []
    windows = [CUT_WINDOWS_S[i % len(CUT_WINDOWS_S)] for i in range(ROUNDS)]
    rng.shuffle(windows)
    for seq, window in enumerate(windows, 1):
        rnd = Round(seq)
        cut_after = rng.uniform(*window)
        go_on_s = rng.uniform(*AFTER_CUT_S)
        # each producer's own sequence of (topic, queue, body size), drawn up front from the seed
        plans = [[pick(rng) for _ in range(MAX_SENDS_PER_PRODUCER)] for _ in range(PRODUCERS)]

        async def producer(i: int, rnd: Round = rnd, plans: list[list[tuple[str, int, int]]] = plans) -> None:
            client = RemotingClient()
            try:
                for n, (topic, queue_id, size) in enumerate(plans[i]):  # bounded; the cut ends it long before
                    if rnd.stopped:
                        return
                    key = f"r{rnd.seq}-p{i}-{n}"
                    if not await send(client, c, rnd, topic, queue_id, key, size):
                        if rnd.cut_at is not None:
                            return
                        await asyncio.sleep(0.05)
                    await asyncio.sleep(PACE_S)
            finally:
                await client.close()

        async def controller(rnd: Round = rnd, cut_after: float = cut_after, go_on_s: float = go_on_s) -> None:
            deadline = time.monotonic() + cut_after
            while time.monotonic() < deadline and c.broker.alive():
                await asyncio.sleep(0.01)
            cut(disk, rnd)
            await asyncio.sleep(go_on_s)
            c.broker.kill()  # the power is off: the broker dies with it
            rnd.stopped = True

        async def round_load(controller: Callable[[], object] = controller) -> None:
            await asyncio.gather(controller(), *(producer(i) for i in range(PRODUCERS)))  # type: ignore[arg-type]

        t0 = time.monotonic()
        asyncio.run(asyncio.wait_for(round_load(), cut_after + 30))
        load_s = time.monotonic() - t0
        assert not rnd.errors, f"round {seq} (seed {seed}): sends refused before the cut: {rnd.errors[:5]}"
        assert rnd.acks, f"round {seq} (seed {seed}): no SEND_OK before the cut"
        acked += rnd.acks
        fsck = reboot(disk, c)
        state = disk.state()
        history.append(f"round {seq}: cut after {cut_after:.2f}s, {len(rnd.acks)} SEND_OK of {rnd.sends} "
                       f"sends, {rnd.late_acks} SEND_OK after the cut, load went on {go_on_s:.2f}s, "
                       f"{load_s:.1f}s; e2fsck: {fsck!r}")  # fmt: skip
        print(f"  {history[-1]}; disk {state}")
        context = f"seed {seed}, {len(acked)} acknowledged in {seq} rounds:\n" + "\n".join(history)
        check(c, disk, acked, f"round {seq}", context)
