"""Write and sync failures injected at the store's system calls (issue 22): no acknowledgement
for unsynced data, waiters answered with an error at once, and the store not writeable until
a restart after a failed sync; a failed reservation is a clean refusal that clears itself.

The faults come from ``pumice.store.disk_io``'s seam: the broker process is started with
``PUMICE_FAILPOINTS="<call>:<ERRNO>:<switch file>"`` and that call fails while the switch
file exists, so a test turns a fault on in the middle of a run (``touch``) and off again
(``unlink``). No loop disk and no root: the store is in ``tmp_path``
(``conftest.dir_fault_cluster``), in real ``pumice namesrv`` and ``pumice broker`` processes.

Each test runs PRODUCERS raw SEND_MESSAGE_V2 producers, each on its own connection, sending
60 KiB bodies derived from their unique keys without pause (``Load``); every send is
recorded with the time it was issued and answered. Then:

``test_sync_flush_msync_failure``: SYNC_FLUSH; once WARM_ACKS sends got SEND_OK, ``msync``
fails (EIO). No send issued after the switch was created gets SEND_OK; the sends waiting for
the group commit get FLUSH_DISK_TIMEOUT (10) well under syncFlushTimeout, later sends
SERVICE_NOT_AVAILABLE (14) with a remark naming FLUSH_FAILED and a restart; runningFlags
shows FLUSH_FAILED; with the switch gone the store still refuses (sticky) while serving every
acknowledged message. Stopped (SIGTERM, which must end it, leaving the abort file) or
SIGKILLed, and started again: every acknowledged message is readable byte for byte (by msgId
and by queue offset) and new sends succeed.

``test_async_flush_msync_failure``: the same under ASYNC_FLUSH, where SEND_OK does not wait
for the disk: the flush thread's failure makes the store refuse writes within DETECT_ASYNC_S,
it serves what it acknowledged, stays refusing, and a SIGKILL and a restart restore writes.

``test_reserve_failure``: ``posix_fallocate`` fails (ENOSPC) on a running broker, ASYNC_FLUSH
and SYNC_FLUSH, for the CommitLog's reservations (the put's own: refused 14 with a remark
naming the disk, DISK_FULL) or for a new IndexFile's or ConsumeQueue file's (dispatch's, after
the put was acknowledged: refused 14, WRITE_INDEX_FILE_ERROR or WRITE_LOGICS_QUEUE_ERROR).
Once refused, refused while the fault lasts; nothing acknowledged is lost; once the switch is
gone sends succeed again within RESUME_S without a restart; every acknowledged message is
readable and each queue's acknowledged offsets run without a gap (a refused put takes none).

Every loop is bounded in count and time; every process is stopped by its pid (tests/helpers/faults.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from pumice.common.message_decoder import decode_message_id
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.faults import QUEUES, TRANSPORT_ERRORS, Ack, FaultCluster, describe_exit, send_request, verify

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

PRODUCERS = 6
WARM_ACKS = 600  # SEND_OKs before the fault is switched on: over two CommitLog files of 16 MiB
WARM_MAX_S = 15.0
MAX_SENDS_PER_PRODUCER = 3_000  # a bound; the phases end the load long before
SEND_TIMEOUT_S = 12.0  # over syncFlushTimeout (5 s): a waiter that is never answered shows as a timeout
REFUSED_PAUSE_S = 0.02  # after a refusal: ~50 a second per producer at most
DETECT_SYNC_S = 2.0  # the first refusal after an msync fault under SYNC_FLUSH (group commit: ~10 ms)
PROMPT_S = 2.0  # a waiter failed by the group commit is answered within this of its send (syncFlushTimeout 5 s)
LATE_ACK_S = 2.0  # a SEND_OK answered this long after the switch: its flush cannot have preceded the fault
DETECT_ASYNC_S = 5.0  # ASYNC_FLUSH: the flush thread runs every 0.5 s
DETECT_RESERVE_S = 5.0
HOLD_S = 1.0  # the load goes on this long with the fault on, once refusals are seen
STICKY_WAIT_S = 1.5  # with the switch gone: three disk checks (0.5 s) before sticky is checked
RESUME_S = 5.0  # writes resume this soon after a reservation fault is gone (disk check: 0.5 s)
AFTER_SENDS = 2 * PRODUCERS


@dataclass
class Sent:
    key: str
    queue_id: int
    issued: float  # time.monotonic() before the request was written
    answered: float | None = None
    code: int | None = None  # None: no answer (transport error)
    remark: str = ""
    ack: Ack | None = None


@dataclass
class Load:
    """PRODUCERS producers sending without pause, each on its own connection, until ``stop``."""

    c: FaultCluster
    tag: str
    sends: list[Sent] = field(default_factory=list)
    transport_errors: list[str] = field(default_factory=list)
    stopped: bool = False

    @property
    def acks(self) -> list[Ack]:
        return [s.ack for s in self.sends if s.ack is not None]

    def answered(self) -> list[Sent]:
        return [s for s in self.sends if s.code is not None]

    def summary(self) -> str:
        codes = Counter(s.code for s in self.sends)
        remarks = Counter((s.code, s.remark[:140]) for s in self.sends if s.code not in (None, ResponseCode.SUCCESS))
        shown = "; ".join(f"{n} x {code} {r!r}" for (code, r), n in remarks.most_common(4))
        errors = f"{len(self.transport_errors)}" + (f" ({self.transport_errors[0]})" if self.transport_errors else "")
        return f"{len(self.sends)} sends, codes {dict(codes)}, transport errors {errors}; refusals: {shown or 'none'}"

    async def send(self, client: RemotingClient, key: str, queue_id: int) -> Sent:
        s = Sent(key, queue_id, time.monotonic())
        self.sends.append(s)
        try:
            r = await client.invoke(self.c.br, send_request(key, queue_id), timeout_s=SEND_TIMEOUT_S)
        except TRANSPORT_ERRORS as e:
            self.transport_errors.append(f"{key}: {type(e).__name__}: {e}")
            return s
        s.answered, s.code, s.remark = time.monotonic(), r.code, (r.remark or "")
        if r.code == ResponseCode.SUCCESS:
            msg_id, qoff = r.ext_fields["msgId"], int(r.ext_fields["queueOffset"])
            s.ack = Ack(key, msg_id, int(r.ext_fields.get("queueId", queue_id)), qoff, decode_message_id(msg_id)[1])
        return s

    async def _producer(self, i: int) -> None:
        client = RemotingClient()
        try:
            for seq in range(MAX_SENDS_PER_PRODUCER):
                if self.stopped:
                    return
                s = await self.send(client, f"{self.tag}-p{i}-{seq}", (i + seq) % QUEUES)
                if s.code is None and not self.c.broker.alive():
                    return
                if s.code != ResponseCode.SUCCESS:
                    await asyncio.sleep(REFUSED_PAUSE_S)
        finally:
            await client.close()

    async def run(self, control: Callable[[], Awaitable[None]]) -> None:
        """The producers, and ``control`` beside them; they stop when it returns."""

        async def controlled() -> None:
            try:
                await control()
            finally:
                self.stopped = True

        await asyncio.gather(controlled(), *(self._producer(i) for i in range(PRODUCERS)))

    async def until(self, pred: Callable[[], bool], timeout_s: float) -> bool:
        """Wait (polling every 10 ms, at most ``timeout_s``) for ``pred``, or for the broker to die."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if pred():
                return True
            if not self.c.broker.alive():
                return False
            await asyncio.sleep(0.01)
        return pred()

    def n_acked(self) -> int:
        return sum(s.code == ResponseCode.SUCCESS for s in self.sends)

    def first_refusal(self) -> Sent | None:
        """The refusal answered first."""
        refused = [s for s in self.answered() if s.code != ResponseCode.SUCCESS]
        return min(refused, key=lambda s: s.answered or 0.0) if refused else None


def failpoint_env(call: str, err: str, switch: Path) -> dict[str, str]:
    return {"PUMICE_FAILPOINTS": f"{call}:{err}:{switch}"}


def context(c: FaultCluster, load: Load | None = None) -> str:
    """For failure messages: the sends, and the broker's state or its log's tail."""
    where = c.broker_state() or f"the broker's log ends:\n{c.broker.tail(15)}"
    return (f"\n{load.summary()}" if load is not None else "") + f"\n{where}"


async def _runtime_flags(c: FaultCluster) -> str:
    client = RemotingClient()
    try:
        r = await client.invoke(c.br, RemotingCommand(code=28), timeout_s=5.0)  # GET_BROKER_RUNTIME_INFO
        assert r.code == ResponseCode.SUCCESS, f"GET_BROKER_RUNTIME_INFO: code {r.code} {r.remark!r}"
        return str(orjson.loads(r.body)["table"]["runningFlags"])
    finally:
        await client.close()


def running_flags(c: FaultCluster) -> str:
    return asyncio.run(_runtime_flags(c))


def send_batch(c: FaultCluster, load: Load, tag: str, n: int) -> list[Sent]:
    """``n`` sends, PRODUCERS at a time, recorded in ``load``; their answers."""

    async def main() -> list[Sent]:
        client = RemotingClient()
        try:
            out: list[Sent] = []
            for i in range(0, n, PRODUCERS):
                out += await asyncio.gather(*(load.send(client, f"{tag}-{j}", j % QUEUES)
                                              for j in range(i, min(n, i + PRODUCERS))))  # fmt: skip
            return out
        finally:
            await client.close()

    return asyncio.run(main())


def wait_for_writes(c: FaultCluster, load: Load, tag: str, within_s: float) -> float | None:
    """One send every 0.1 s until one gets SEND_OK: the seconds it took (None: not within ``within_s``)."""

    async def main() -> float | None:
        client = RemotingClient()
        t0 = time.monotonic()
        try:
            for i in range(int(within_s / 0.1) + 1):
                if time.monotonic() - t0 > within_s or not c.broker.alive():
                    return None
                if (await load.send(client, f"{tag}-{i}", i % QUEUES)).code == ResponseCode.SUCCESS:
                    return time.monotonic() - t0
                await asyncio.sleep(0.1)
            return None
        finally:
            await client.close()

    return asyncio.run(main())


def check_verified(c: FaultCluster, acked: list[Ack], phase: str) -> None:
    problems = verify(c, acked, phase)
    assert not problems, "\n\n".join(problems) + context(c)


def is_flush_failed_refusal(s: Sent) -> bool:
    return s.code == ResponseCode.SERVICE_NOT_AVAILABLE and "FLUSH_FAILED" in s.remark and "restart" in s.remark


def check_refused_for_good(c: FaultCluster, load: Load, switch: Path, tag: str) -> None:
    """With the switch gone (and a few disk checks run), the store still refuses: a failed
    sync is not forgotten until a restart; runningFlags says so, and the broker runs on."""
    switch.unlink()
    time.sleep(STICKY_WAIT_S)
    sticky = send_batch(c, load, tag, AFTER_SENDS)
    wrong = [f"{s.key}: {s.code} {s.remark!r}" for s in sticky if not is_flush_failed_refusal(s)]
    assert not wrong, f"with the fault gone the store must still refuse (FLUSH_FAILED) until a restart: {wrong}" + (
        context(c, load)
    )
    flags = running_flags(c)
    assert "FLUSH_FAILED" in flags, f"runningFlags with the fault gone: {flags!r}" + context(c, load)
    assert c.broker.alive(), context(c, load)


def restart(c: FaultCluster, how: str) -> None:
    """SIGTERM (which must end the broker, leaving the abort file: the store was not
    writeable) or SIGKILL, then start again on the same store."""
    if how == "sigterm":
        rc = c.broker.stop(timeout_s=15.0)
        assert rc == 0, f"SIGTERM: the broker {describe_exit(rc) if rc is not None else 'did not end in 15 s'}" + (
            context(c)
        )
        assert (c.store_root / "abort").exists(), (
            "a broker whose sync failed removed its abort file at a clean stop: the next start will not recover"
            + context(c)
        )
    else:
        c.broker.kill()
    why = c.start_broker()
    assert why is None, f"restart after a {how}: {why}"


def check_writes_after_restart(c: FaultCluster, load: Load, tag: str) -> None:
    flags = running_flags(c)
    assert flags == "OK", f"runningFlags after the restart: {flags!r}" + context(c)
    after = send_batch(c, load, tag, AFTER_SENDS)
    bad = [f"{s.key}: {s.code} {s.remark!r}" for s in after if s.code != ResponseCode.SUCCESS]
    assert not bad, f"sends after the restart were refused: {bad}" + context(c, load)


# -- msync -------------------------------------------------------------------------------


def run_with_fault(c: FaultCluster, load: Load, switch: Path, detect_s: float) -> float:
    """Run the load: WARM_ACKS sends acknowledged, then the fault's switch on, then on until the
    first refusal (at most ``detect_s``) and HOLD_S more. Returns when the switch was made."""
    t_switch = 0.0

    async def control() -> None:
        nonlocal t_switch
        assert await load.until(lambda: load.n_acked() >= WARM_ACKS, WARM_MAX_S), (
            f"no {WARM_ACKS} SEND_OK before the fault" + context(c, load)
        )
        switch.touch()
        t_switch = time.monotonic()
        await load.until(lambda: load.first_refusal() is not None, detect_s)
        await asyncio.sleep(HOLD_S)

    asyncio.run(load.run(control))
    return t_switch


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_sync_flush_msync_failure(dir_fault_cluster, tmp_path: Path, how: str) -> None:
    t_start = time.monotonic()
    switch = tmp_path / "msync.fail"
    c: FaultCluster = dir_fault_cluster("SYNC_FLUSH", broker_env=failpoint_env("msync", "EIO", switch))
    load = Load(c, f"s{how[3]}")
    t_switch = run_with_fault(c, load, switch, DETECT_SYNC_S)
    print(f"\n[SYNC_FLUSH, {how}] {load.summary()}")
    first = load.first_refusal()
    assert first is not None and first.answered is not None, (
        f"no refusal within {DETECT_SYNC_S:g}s of msync failing" + context(c, load)
    )
    print(f"  first refusal {first.answered - t_switch:.3f}s after the switch: {first.code} {first.remark[:100]!r}")
    assert first.answered - t_switch < DETECT_SYNC_S, context(c, load)
    assert not load.transport_errors, f"sends not answered: {load.transport_errors[:5]}" + context(c, load)
    assert c.broker.alive(), context(c, load)

    # nothing issued after the switch existed is acknowledged: its data was appended after it,
    # so no sync that covers it can have succeeded
    late = [s for s in load.sends if s.ack is not None and s.issued >= t_switch]
    assert not late, (f"{len(late)} sends issued after msync began to fail got SEND_OK, e.g. {late[0].key} "
                      f"issued {late[0].issued - t_switch:.3f}s after the switch" + context(c, load))  # fmt: skip
    slow = [
        s for s in load.sends if s.ack is not None and s.answered is not None and s.answered > t_switch + LATE_ACK_S
    ]
    assert not slow, f"SEND_OK answered {slow[0].answered - t_switch:.2f}s after the switch" + context(c, load)

    # the waiters of the failed group commit: FLUSH_DISK_TIMEOUT at once, not after syncFlushTimeout
    waiters = [s for s in load.answered() if s.code == ResponseCode.FLUSH_DISK_TIMEOUT]
    assert waiters, "no waiting send was answered FLUSH_DISK_TIMEOUT" + context(c, load)
    worst = max(s.answered - s.issued for s in waiters)  # type: ignore[operator]
    print(f"  {len(waiters)} waiters answered FLUSH_DISK_TIMEOUT, the slowest {worst:.3f}s after its send")
    assert worst < PROMPT_S, f"a waiter was answered FLUSH_DISK_TIMEOUT only {worst:.2f}s after its send" + (
        context(c, load)
    )
    # then every send is refused, saying why
    refused = [s for s in load.answered() if s.code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT)]
    odd = [f"{s.key}: {s.code} {s.remark!r}" for s in refused if not is_flush_failed_refusal(s)]
    assert refused and not odd, f"refusals without code 14 and FLUSH_FAILED ... restart: {odd[:3]}" + context(c, load)
    first_14 = min(s.answered for s in refused)  # type: ignore[type-var]
    after_14 = [s for s in load.answered() if s.issued > first_14 and not is_flush_failed_refusal(s)]
    assert not after_14, (f"sends issued after the first FLUSH_FAILED refusal answered {after_14[0].code}"
                          + context(c, load))  # fmt: skip
    flags = running_flags(c)
    assert "FLUSH_FAILED" in flags, f"runningFlags after a failed msync: {flags!r}" + context(c, load)
    assert any("msync" in line and "restart" in line for line in c.broker.lines), (
        "the broker's log does not say that a sync failed and a restart is needed" + context(c)
    )

    # the fault is gone, the store still refuses; it serves what it acknowledged
    check_refused_for_good(c, load, switch, f"s{how[3]}-sticky")
    acked = load.acks
    check_verified(c, acked, "after the sync failed")

    restart(c, how)
    check_verified(c, acked, f"after a {how} and a restart")
    check_writes_after_restart(c, load, f"s{how[3]}-after")
    check_verified(c, load.acks, "new sends after the restart")
    print(f"  {len(acked)} acknowledged before the restart; {time.monotonic() - t_start:.1f}s")


def test_async_flush_msync_failure(dir_fault_cluster, tmp_path: Path) -> None:
    t_start = time.monotonic()
    switch = tmp_path / "msync.fail"
    c: FaultCluster = dir_fault_cluster("ASYNC_FLUSH", broker_env=failpoint_env("msync", "EIO", switch))
    load = Load(c, "a")
    t_switch = run_with_fault(c, load, switch, DETECT_ASYNC_S)
    print(f"\n[ASYNC_FLUSH] {load.summary()}")
    first = load.first_refusal()
    assert first is not None and first.answered is not None, (
        f"the store took writes for {DETECT_ASYNC_S:g}s with msync failing" + context(c, load)
    )
    print(f"  first refusal {first.answered - t_switch:.3f}s after the switch: {first.code} {first.remark[:100]!r}")
    assert not load.transport_errors, f"sends not answered: {load.transport_errors[:5]}" + context(c, load)
    assert c.broker.alive(), context(c, load)
    odd = [f"{s.key}: {s.code} {s.remark!r}" for s in load.answered()
           if s.code != ResponseCode.SUCCESS and not is_flush_failed_refusal(s)]  # fmt: skip
    assert not odd, f"refusals without code 14 and FLUSH_FAILED ... restart: {odd[:3]}" + context(c, load)
    # once refused, refused: no SEND_OK for a send made after the first refusal came back
    late = [s for s in load.sends if s.ack is not None and s.issued > first.answered]
    assert not late, f"{len(late)} SEND_OK after the store refused writes for a failed sync" + context(c, load)
    flags = running_flags(c)
    assert "FLUSH_FAILED" in flags, f"runningFlags after a failed msync: {flags!r}" + context(c, load)

    acked = load.acks
    check_verified(c, acked, "after the sync failed")
    check_refused_for_good(c, load, switch, "a-sticky")

    restart(c, "sigkill")  # ASYNC_FLUSH: what was acknowledged is in the page cache, which outlives the process
    check_verified(c, acked, "after a SIGKILL and a restart")
    check_writes_after_restart(c, load, "a-after")
    check_verified(c, load.acks, "new sends after the restart")
    print(f"  {len(acked)} acknowledged before the restart; {time.monotonic() - t_start:.1f}s")


# -- reserve -----------------------------------------------------------------------------


# Which reservation fails first. "commitlog": CommitLog files are not preallocated (their
# preallocation calls posix_fallocate outside disk_io, where no failpoint reaches it), so each
# put reserves its file's next 1 MiB chunk (every ~17 sends) through ``disk_io.reserve``; the
# ConsumeQueue and IndexFiles are big enough that none needs a reservation during the test.
# The put that cannot reserve is refused. "index": FaultCluster's small files (IndexFiles of 2,000
# entries, ConsumeQueue files of 200), so a new IndexFile or ConsumeQueue file is reserved by
# dispatch, after its put was acknowledged; dispatch stops there and retries.
BIG_CQ_AND_INDEX = {"mapedFileSizeConsumeQueue": 30_000 * 20, "maxHashSlotNum": 50_000, "maxIndexNum": 2_000_000}
RESERVE_FILES: dict[str, dict[str, object]] = {
    "commitlog": {"preallocateCommitLog": "false", **BIG_CQ_AND_INDEX},
    "index": {},
}
# A refusal names the disk (a put that could not reserve), or (dispatch's reservation failed)
# the ConsumeQueue or index write that stopped the store
DISPATCH_REFUSAL = ("WRITE_INDEX_FILE_ERROR", "WRITE_LOGICS_QUEUE_ERROR")


def is_space_refusal(s: Sent, files: str) -> bool:
    if s.code != ResponseCode.SERVICE_NOT_AVAILABLE:
        return False
    return "DISK_FULL" in s.remark or (files == "index" and any(f in s.remark for f in DISPATCH_REFUSAL))


@pytest.mark.parametrize("files", sorted(RESERVE_FILES))
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_reserve_failure(dir_fault_cluster, tmp_path: Path, flush: str, files: str) -> None:
    t_start = time.monotonic()
    switch = tmp_path / "reserve.fail"
    env = failpoint_env("reserve", "ENOSPC", switch)
    c: FaultCluster = dir_fault_cluster(flush, broker_env=env, **RESERVE_FILES[files])
    tag = f"r{flush[0].lower()}{files[0]}"
    load = Load(c, tag)
    t_switch = run_with_fault(c, load, switch, DETECT_RESERVE_S)
    print(f"\n[{flush}, reserve ENOSPC, {files}] {load.summary()}")
    first = load.first_refusal()
    assert first is not None and first.answered is not None, (
        f"no refusal within {DETECT_RESERVE_S:g}s of reservations failing" + context(c, load)
    )
    print(f"  first refusal {first.answered - t_switch:.3f}s after the switch: {first.code} {first.remark[:120]!r}")
    assert not load.transport_errors, f"sends not answered: {load.transport_errors[:5]}" + context(c, load)
    assert c.broker.alive(), context(c, load)
    refused = [s for s in load.answered() if s.code != ResponseCode.SUCCESS]
    odd = [f"{s.key}: {s.code} {s.remark!r}" for s in refused if not is_space_refusal(s, files)]
    assert not odd, f"refusals without code 14 and a remark naming the disk (DISK_FULL): {odd[:3]}" + context(c, load)
    if files == "commitlog":
        assert any("DISK_FULL" in s.remark for s in refused), "no refusal names the disk" + context(c, load)
    # with the fault on, once refused, refused (the put that could not reserve changed nothing)
    late = [s for s in load.sends if s.ack is not None and s.issued > first.answered]
    assert not late, f"{len(late)} SEND_OK while reservations fail, after a refusal" + context(c, load)

    switch.unlink()
    took = wait_for_writes(c, load, f"{tag}-resume", RESUME_S)
    assert took is not None, f"writes did not resume within {RESUME_S:g}s of the fault going away" + context(c, load)
    print(f"  writes resumed {took:.2f}s after the fault went away (no restart)")
    after = send_batch(c, load, f"{tag}-after", AFTER_SENDS)
    bad = [f"{s.key}: {s.code} {s.remark!r}" for s in after if s.code != ResponseCode.SUCCESS]
    assert not bad, f"sends after writes resumed were refused: {bad}" + context(c, load)
    assert not load.transport_errors, f"sends not answered: {load.transport_errors[:5]}" + context(c, load)

    acked = load.acks
    by_queue: dict[int, list[int]] = {}
    for a in acked:
        by_queue.setdefault(a.queue_id, []).append(a.queue_offset)
    gaps = {q: sorted(set(range(max(offs) + 1)) - set(offs))[:5] for q, offs in by_queue.items()}
    dups = {q: [o for o, n in Counter(offs).items() if n > 1][:5] for q, offs in by_queue.items()}
    assert not any(gaps.values()), f"acknowledged queue offsets with gaps (queue: missing): {gaps}" + context(c, load)
    assert not any(dups.values()), f"queue offsets acknowledged twice: {dups}" + context(c, load)
    check_verified(c, acked, "after the reservation fault")
    flags = running_flags(c)
    assert flags == "OK", f"runningFlags once writes resumed: {flags!r}" + context(c, load)
    print(f"  {len(acked)} acknowledged; {time.monotonic() - t_start:.1f}s")
