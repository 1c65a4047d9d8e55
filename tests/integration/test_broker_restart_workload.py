"""A broker restart in the middle of a workload: acknowledged messages and committed offsets survive.

A producer sends SEND_MESSAGE_V2 (310) one message at a time, round-robin over the topic's 4
queues, and records every attempt (acknowledged with its queueId/queueOffset/msgId, or failed
with the error). A consumer pulls each queue with long polling, commits its position with the
pull's commitOffset and with UPDATE_CONSUMER_OFFSET (15), and records every commit and every
message it receives. Both run in this process on the RemotingClient while the broker process is
stopped (SIGTERM, or SIGKILL under ASYNC_FLUSH) and started again on the same store and port.

The consumer models a client that notices the restart: once the old broker process has exited
it asks QUERY_CONSUMER_OFFSET (14) again for every queue and resumes from the answer, so the
offsets the broker recovered are the offsets it consumes from.

Afterwards every queue is pulled back by offset and checked: offsets 0..max without a gap, each
record's QUEUEOFFSET its position, every body at most once, every acknowledged send exactly once
at the queue, offset and msgId its acknowledgement named, and every message the consumer saw
at the same place; the consumer saw every stored offset at least once.

The last test does the same with the Apache C++ client (tests/integration/cpp_client.py): its
producer sends through a SIGTERM restart, its push consumer commits through it, and a second
push consumer resumes the group from the offsets the new broker loaded.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from pumice.common.message import MessageExt
from pumice.common.message_decoder import create_message_id, decode_message
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, send
from tests.integration.cpp_client import CppClientProcess, consume, missing_reason, platform_supported, start_consumer

TOPIC = "RestartTopic"
GROUP = "RestartCG"
BODY_PREFIX = "restart-"  # bodies are BODY_PREFIX + the send's index (as cpp_client.py's --body-prefix makes them)
QUEUES = 4
MAX_SENDS = 20_000  # the producer's hard bound on attempts (it sends for a few seconds)
SEND_PAUSE_S = 0.003  # between acknowledged sends (about 250 msg/s with the round trip)
FAIL_PAUSE_S = 0.05  # after a failed send (broker down)
PERSIST_INTERVAL_S = 5.0  # flushConsumerOffsetInterval (default)
PERSIST_SLACK_S = 2.0  # a loaded machine may start the 5 s persist a little late

CLIENT_ERRORS = (RemotingConnectError, RemotingTimeoutError, OSError)


class LoggedCluster(Cluster):
    """Cluster that keeps every broker it started, for their output (``start`` drains it)."""

    def __init__(self, tmp: Path) -> None:
        self.brokers: list[subprocess.Popen[str]] = []
        super().__init__(tmp)

    def start_broker(self) -> subprocess.Popen[str]:
        proc = super().start_broker()
        self.brokers.append(proc)
        return proc

    def log_tail(self, n: int = 40) -> str:
        lines = [line for p in self.brokers for line in [f"--- broker pid {p.pid}\n", *p.output_lines]]  # type: ignore[attr-defined]
        return "".join(lines[-n:])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LoggedCluster]:
    c = LoggedCluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


@dataclass
class Attempt:
    i: int
    queue_id: int
    t_sent: float
    ok: bool = False
    epoch: int = 0  # the epoch when the answer (or the error) came
    offset: int = -1
    msg_id: str = ""
    error: str = ""


@dataclass
class Commit:
    queue_id: int
    value: int
    epoch: int  # the epoch the consumer was in when it sent the commit
    t_acked: float | None = None  # None: no answer (the broker may or may not have applied it)


@dataclass
class Received:
    queue_id: int
    offset: int
    body: bytes
    epoch: int


def body_of(i: int) -> bytes:
    return b"%s%d" % (BODY_PREFIX.encode(), i)


def index_of(body: bytes) -> int:
    assert body.startswith(BODY_PREFIX.encode()), body
    return int(body[len(BODY_PREFIX) :])


def pull_req(topic: str, group: str, queue_id: int, offset: int, *, commit: int = -1,
             suspend_ms: int = 0) -> RemotingCommand:  # fmt: skip
    sys_flag = (1 if commit >= 0 else 0) | (2 if suspend_ms else 0) | 4  # 4: the subscription is in the pull
    return RemotingCommand(code=11, ext_fields={"consumerGroup": group, "topic": topic, "queueId": queue_id,
                                                "queueOffset": offset, "maxMsgNums": 32, "sysFlag": sys_flag,
                                                "subscription": "*", "commitOffset": max(commit, 0),
                                                "suspendTimeoutMillis": suspend_ms, "subVersion": 0})  # fmt: skip


def query_offset_req(queue_id: int, topic: str = TOPIC, group: str = GROUP) -> RemotingCommand:
    return RemotingCommand(code=14, ext_fields={"consumerGroup": group, "topic": topic, "queueId": queue_id})


def update_offset_req(queue_id: int, offset: int) -> RemotingCommand:
    return RemotingCommand(code=15, ext_fields={"consumerGroup": GROUP, "topic": TOPIC, "queueId": queue_id,
                                                "commitOffset": offset})  # fmt: skip


def decode_all(body: bytes) -> list[MessageExt]:
    out, pos = [], 0
    while pos < len(body):
        m = decode_message(body, pos)
        out.append(m)
        pos += m.store_size
    return out


@dataclass
class Workload:
    addr: str
    epoch: int = 1  # 2 once the first broker process has exited
    attempts: list[Attempt] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    resyncs: list[tuple[int, int, int]] = field(default_factory=list)  # (queue, epoch, offset answered)
    anomalies: list[str] = field(default_factory=list)
    stop_producing: asyncio.Event = field(default_factory=asyncio.Event)
    targets: dict[int, int] | None = None  # set at the end: the consumer stops once it committed these

    async def produce(self) -> None:
        c = RemotingClient()
        try:
            for i in range(MAX_SENDS):
                if self.stop_producing.is_set():
                    break
                a = Attempt(i, i % QUEUES, time.monotonic())
                try:
                    r = await c.invoke(self.addr, send(TOPIC, body_of(i), f"rk{i}", a.queue_id), timeout_s=3)
                    if r.code == ResponseCode.SUCCESS:
                        a.ok, a.offset, a.msg_id = True, int(r.ext_fields["queueOffset"]), r.ext_fields["msgId"]
                        if int(r.ext_fields["queueId"]) != a.queue_id:
                            self.anomalies.append(f"send {i} to queue {a.queue_id} answered {r.ext_fields}")
                    else:
                        a.error = f"code {r.code}: {r.remark}"
                except CLIENT_ERRORS as e:
                    a.error = f"{type(e).__name__}: {e}"
                a.epoch = self.epoch
                self.attempts.append(a)
                await asyncio.sleep(SEND_PAUSE_S if a.ok else FAIL_PAUSE_S)
        finally:
            await c.close()

    def _done(self, q: int, committed: int | None) -> bool:
        return self.targets is not None and committed is not None and committed >= self.targets[q]

    async def consume_queue(self, c: RemotingClient, q: int) -> None:
        synced_epoch = 0
        offset = 0
        committed: int | None = None  # the last commit the broker answered, in this epoch
        for _ in range(100_000):  # bounded; the caller's wait_for bounds the time
            if synced_epoch != self.epoch:
                # a new broker process: resume from the offset it recovered
                ep = self.epoch
                try:
                    r = await c.invoke(self.addr, query_offset_req(q), timeout_s=3)
                except CLIENT_ERRORS:
                    await asyncio.sleep(0.1)
                    continue
                if r.code == ResponseCode.SUCCESS:
                    offset = int(r.ext_fields["offset"])
                elif r.code == ResponseCode.QUERY_NOT_FOUND and ep == 1:
                    offset = 0  # the topic does not exist yet
                else:
                    self.anomalies.append(f"queue {q}: QUERY_CONSUMER_OFFSET in epoch {ep}: {r.code} {r.remark}")
                    await asyncio.sleep(0.1)
                    continue
                self.resyncs.append((q, ep, offset))
                synced_epoch, committed = ep, None
            if self._done(q, committed):
                return
            ep = synced_epoch
            commit = Commit(q, offset, ep)
            self.commits.append(commit)
            try:
                req = pull_req(TOPIC, GROUP, q, offset, commit=offset, suspend_ms=500)
                r = await c.invoke(self.addr, req, timeout_s=5)
            except CLIENT_ERRORS:
                await asyncio.sleep(0.1)
                continue
            if r.code == ResponseCode.TOPIC_NOT_EXIST:  # refused before the commit was applied
                await asyncio.sleep(0.05)  # the first send creates it
                continue
            commit.t_acked = time.monotonic()
            committed = offset
            if r.code == ResponseCode.SUCCESS:
                for m in decode_all(bytes(r.body)):
                    self.received.append(Received(q, m.queue_offset, m.body, ep))
                    if m.queue_id != q:
                        self.anomalies.append(f"queue {q} pull at {offset} returned queue {m.queue_id}")
                nxt = int(r.ext_fields["nextBeginOffset"])
                if nxt <= offset:
                    self.anomalies.append(f"queue {q}: FOUND at {offset} but nextBeginOffset {nxt}")
                offset = nxt
                # the consumer processed the batch: commit it at once, as well as with the next pull
                commit = Commit(q, offset, ep)
                self.commits.append(commit)
                try:
                    u = await c.invoke(self.addr, update_offset_req(q, offset), timeout_s=3)
                except CLIENT_ERRORS:
                    continue
                if u.code == ResponseCode.SUCCESS:
                    commit.t_acked = time.monotonic()
                    committed = offset
            elif r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                nxt = int(r.ext_fields.get("nextBeginOffset", offset))
                if nxt != offset:
                    self.anomalies.append(f"queue {q}: {r.code} at {offset} moved to {nxt}")
            else:
                self.anomalies.append(f"queue {q}: pull at {offset} in epoch {ep}: {r.code} {r.remark} {r.ext_fields}")
                await asyncio.sleep(0.1)
        self.anomalies.append(f"queue {q}: the consumer loop ran out")

    async def consume(self) -> None:
        c = RemotingClient()
        try:
            await asyncio.gather(*(self.consume_queue(c, q) for q in range(QUEUES)))
        finally:
            await c.close()

    def max_commit(self, q: int, epoch: int, *, acked_before: float | None = None, acked: bool = True) -> int:
        values = [
            c.value
            for c in self.commits
            if c.queue_id == q
            and c.epoch == epoch
            and (not acked or c.t_acked is not None)
            and (acked_before is None or (c.t_acked is not None and c.t_acked <= acked_before))
        ]
        return max(values, default=-1)


async def get_max_offsets(c: RemotingClient, addr: str, topic: str = TOPIC) -> dict[int, int]:
    out = {}
    for q in range(QUEUES):
        r = await c.invoke(addr, RemotingCommand(code=30, ext_fields={"topic": topic, "queueId": q}))
        assert r.code == ResponseCode.SUCCESS, r.remark
        out[q] = int(r.ext_fields["offset"])
    return out


async def read_back(c: RemotingClient, addr: str, max_offsets: dict[int, int],
                    topic: str = TOPIC) -> dict[int, list[MessageExt]]:  # fmt: skip
    """Every record of every queue, pulled by offset from 0 (no commit, no suspend)."""
    queues: dict[int, list[MessageExt]] = {}
    for q in range(QUEUES):
        records: list[MessageExt] = []
        offset = 0
        for _ in range(max_offsets[q] + 2):  # at least one record a pull, and one last NOT_FOUND
            r = await c.invoke(addr, pull_req(topic, "RestartVerifyCG", q, offset), timeout_s=5)
            if r.code != ResponseCode.SUCCESS:
                assert r.code == ResponseCode.PULL_NOT_FOUND and offset == max_offsets[q], (q, offset, r.code)
                break
            batch = decode_all(bytes(r.body))
            assert batch and int(r.ext_fields["nextBeginOffset"]) == offset + len(batch), (q, offset)
            records += batch
            offset += len(batch)
        queues[q] = records
    return queues


def read_offsets_file(store: Path, topic: str = TOPIC, group: str = GROUP) -> dict[int, int] | None:
    path = store / "config" / "consumerOffset.json"
    if not path.exists():
        return None
    table = orjson.loads(path.read_bytes())["offsetTable"]
    return {int(q): int(o) for q, o in table.get(f"{topic}@{group}", {}).items()}


def stop_broker(cluster: Cluster, sig: signal.Signals) -> int:
    proc = cluster.broker
    proc.send_signal(sig)
    try:
        return proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()


async def run_workload(cluster: LoggedCluster, sig: signal.Signals, before_s: float, down_s: float,
                       after_s: float) -> dict:  # fmt: skip
    """Produce and consume, stop the broker with ``sig`` after ``before_s``, start it again after ``down_s``,
    go on for ``after_s``, then let the consumer catch up. Returns what the checks need."""
    w = Workload(cluster.br)
    producer = asyncio.create_task(w.produce())
    consumer = asyncio.create_task(w.consume())
    info: dict = {"w": w}
    try:
        await asyncio.sleep(before_s)
        assert not producer.done() and not consumer.done(), w.anomalies
        info["t_stop"] = time.monotonic()
        info["exit_code"] = await asyncio.to_thread(stop_broker, cluster, sig)
        info["t_exited"] = time.monotonic()
        w.epoch = 2  # the old process is gone: whatever answers now is the new one
        store = cluster.tmp / "store"
        info["abort_after_stop"] = (store / "abort").exists()
        info["offsets_file"] = read_offsets_file(store)
        await asyncio.sleep(down_s)
        cluster.broker = await asyncio.to_thread(cluster.start_broker)
        info["t_restarted"] = time.monotonic()
        await asyncio.sleep(after_s)
        w.stop_producing.set()
        await asyncio.wait_for(producer, 10)
        c = RemotingClient()
        try:
            # dispatch runs behind the appends: wait until every acknowledged offset is in its ConsumeQueue
            want = {q: 1 + max((a.offset for a in w.attempts if a.ok and a.queue_id == q), default=-1)
                    for q in range(QUEUES)}  # fmt: skip
            for _ in range(100):
                max_offsets = await get_max_offsets(c, cluster.br)
                if all(max_offsets[q] >= want[q] for q in range(QUEUES)):
                    break
                await asyncio.sleep(0.05)
            info["max_offsets"] = max_offsets
            w.targets = max_offsets
            await asyncio.wait_for(consumer, 15)
            info["final_offsets"] = {q: int((await c.invoke(cluster.br, query_offset_req(q))).ext_fields["offset"])
                                     for q in range(QUEUES)}  # fmt: skip
            info["queues"] = await read_back(c, cluster.br, max_offsets)
        finally:
            await c.close()
    finally:
        w.stop_producing.set()
        for t in (producer, consumer):
            t.cancel()
        await asyncio.gather(producer, consumer, return_exceptions=True)
    return info


def check_queues(queues: dict[int, list[MessageExt]], max_offsets: dict[int, int], topic: str,
                 ctx: str = "") -> dict[bytes, list[MessageExt]]:  # fmt: skip
    """Every queue holds offsets 0..max-1 without a gap or a duplicate, each record where its QUEUEOFFSET says, in
    the producer's order; returns body -> the records with that body."""
    by_body: dict[bytes, list[MessageExt]] = {}
    for q in range(QUEUES):
        records = queues[q]
        assert len(records) == max_offsets[q]
        assert [m.queue_offset for m in records] == list(range(len(records))), f"queue {q}\n{ctx}"
        indices = [index_of(m.body) for m in records]
        assert indices == sorted(indices), f"queue {q} out of order: {indices}"
        for m in records:
            assert m.queue_id == q and m.topic == topic
            by_body.setdefault(m.body, []).append(m)
    return by_body


def check_store_and_consumer(info: dict, cluster: LoggedCluster) -> None:
    """The checks both stops share: the store holds every acknowledged message once, in order, without a gap,
    and the consumer saw every offset at least once, each with the body the store has there."""
    w: Workload = info["w"]
    ctx = f"anomalies={w.anomalies[:10]}\nbroker log:\n{cluster.log_tail()}"
    assert not w.anomalies, ctx
    acked = [a for a in w.attempts if a.ok]
    failed = [a for a in w.attempts if not a.ok]
    # the restart really was in the middle of the workload: sends were acknowledged by both processes, and
    # sends failed while the broker was down (recorded, not retried)
    assert sum(a.epoch == 1 for a in acked) >= 100 and sum(a.epoch == 2 for a in acked) >= 100, ctx
    assert failed, f"no send failed while the broker was down\n{ctx}"
    assert all(a.error for a in failed)
    by_index = {a.i: a for a in w.attempts}
    copies = check_queues(info["queues"], info["max_offsets"], TOPIC, ctx)
    twice = [b for b, ms in copies.items() if len(ms) > 1]
    assert not twice, f"stored twice (this producer never resends): {twice[:5]}"
    stored = {b: ms[0] for b, ms in copies.items()}
    seen_bodies = set(stored)
    stored_at = {(m.queue_id, m.queue_offset): m.body for m in stored.values()}
    for body, m in stored.items():
        i = index_of(body)
        assert i in by_index and by_index[i].queue_id == m.queue_id, f"{body!r} was never sent there"
        a = by_index[i]
        if a.ok:  # exactly where the acknowledgement said, with the same msgId
            assert m.queue_offset == a.offset, (a, m.queue_offset)
            assert create_message_id(m.store_host, m.commit_log_offset) == a.msg_id, a
    missing = [a for a in acked if body_of(a.i) not in seen_bodies]
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}\n{ctx}"
    # sends failed only around the restart (from a send timeout before the stop until the new broker was up);
    # such an unacknowledged send may or may not be stored
    window = (info["t_stop"] - 3.5, info["t_restarted"] + 1.0)
    outside = [a for a in failed if not window[0] <= a.t_sent <= window[1]]
    assert not outside, f"sends failed outside the restart window: {outside[:5]}\n{ctx}"
    # the consumer: every offset at least once, each with the body stored there (before and after the restart)
    got: dict[int, set[int]] = {q: set() for q in range(QUEUES)}
    for r in w.received:
        assert stored_at.get((r.queue_id, r.offset)) == r.body, (r, stored_at.get((r.queue_id, r.offset)))
        got[r.queue_id].add(r.offset)
    for q in range(QUEUES):
        gap = sorted(set(range(info["max_offsets"][q])) - got[q])
        assert not gap, f"queue {q}: the consumer never received offsets {gap[:20]}\n{ctx}"
    # and it committed all of it, on the new broker
    assert info["final_offsets"] == info["max_offsets"]


def resumed_offsets(w: Workload) -> dict[int, int]:
    """The offset the new broker answered for each queue, the first time the consumer asked it."""
    out: dict[int, int] = {}
    for q, ep, off in w.resyncs:
        if ep == 2 and q not in out:
            out[q] = off
    assert sorted(out) == list(range(QUEUES)), w.resyncs
    return out


def test_sigterm_restart_mid_workload(cluster: LoggedCluster) -> None:
    info = asyncio.run(asyncio.wait_for(run_workload(cluster, signal.SIGTERM, 3.0, 0.5, 3.0), 60))
    w: Workload = info["w"]
    assert info["exit_code"] == 0, cluster.log_tail()
    assert not info["abort_after_stop"], "a clean stop left the abort file"
    check_store_and_consumer(info, cluster)
    # the shutdown persisted the group's offsets: the file holds, and the new broker answers, at least the last
    # commit the old broker acknowledged, and at most the last the consumer sent it
    resumed = resumed_offsets(w)
    assert info["offsets_file"] == resumed, (info["offsets_file"], resumed)
    for q in range(QUEUES):
        low, high = w.max_commit(q, 1), w.max_commit(q, 1, acked=False)
        assert low > 0, f"queue {q}: nothing committed before the stop"
        assert low <= resumed[q] <= high, (q, low, resumed[q], high)


def test_sigkill_restart_mid_workload(cluster: LoggedCluster) -> None:
    # more than PERSIST_INTERVAL_S + PERSIST_SLACK_S of work before the kill, so offsets were persisted
    info = asyncio.run(asyncio.wait_for(run_workload(cluster, signal.SIGKILL, 8.0, 0.3, 3.0), 60))
    w: Workload = info["w"]
    assert info["exit_code"] == -signal.SIGKILL
    assert info["abort_after_stop"], "SIGKILL left no abort file: recovery was not the unclean one"
    # ASYNC_FLUSH: acknowledged messages not yet flushed were in the page cache, which a process kill keeps,
    # so none may be lost; the checks are the same as for a clean stop
    check_store_and_consumer(info, cluster)
    # offsets: the new broker answers exactly what was persisted last (the timer, every 5 s), which is at
    # least every commit acknowledged PERSIST_INTERVAL_S (+ slack) before the kill, never more than the
    # consumer committed, and never past the messages the recovered queue holds
    resumed = resumed_offsets(w)
    assert info["offsets_file"] == resumed, (info["offsets_file"], resumed)
    persisted_by = info["t_stop"] - PERSIST_INTERVAL_S - PERSIST_SLACK_S
    for q in range(QUEUES):
        low = w.max_commit(q, 1, acked_before=persisted_by)
        high = w.max_commit(q, 1, acked=False)
        assert low > 0, f"queue {q}: nothing committed {PERSIST_INTERVAL_S + PERSIST_SLACK_S}s before the kill"
        assert low <= resumed[q] <= high, (q, low, resumed[q], high)
        assert resumed[q] <= info["max_offsets"][q]


# -- the Apache C++ client (PyPI rocketmq==0.4.4) through a SIGTERM restart --------------------------------------

CPP_TOPIC = "CppRestartTopic"
CPP_GROUP = "CppRestartCG"


def broker_offsets(addr: str, topic: str, group: str) -> dict[int, int]:
    """QUERY_CONSUMER_OFFSET for every queue (-1: none)."""

    async def main() -> dict[int, int]:
        c = RemotingClient()
        try:
            out = {}
            for q in range(QUEUES):
                r = await c.invoke(addr, query_offset_req(q, topic, group))
                out[q] = int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1
            return out
        finally:
            await c.close()

    return asyncio.run(asyncio.wait_for(main(), 20))


def stored_queues(addr: str, topic: str, at_least: int) -> tuple[dict[int, int], dict[int, list[MessageExt]]]:
    """The max offsets once the ConsumeQueues hold ``at_least`` messages in all, and every record."""

    async def main() -> tuple[dict[int, int], dict[int, list[MessageExt]]]:
        c = RemotingClient()
        try:
            for _ in range(100):  # dispatch runs behind the appends
                max_offsets = await get_max_offsets(c, addr, topic)
                if sum(max_offsets.values()) >= at_least:
                    break
                await asyncio.sleep(0.05)
            return max_offsets, await read_back(c, addr, max_offsets, topic)
        finally:
            await c.close()

    return asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.skipif(not platform_supported(), reason="the rocketmq wheel is x86_64 Linux only")
def test_cpp_clients_through_sigterm_restart(cluster: LoggedCluster, tmp_path: Path) -> None:
    """The C++ producer sends all along; a C++ push consumer consumes and commits (every 5 s, and at its shutdown)
    through the stop; a second one then resumes the group from the offsets the new broker has. (The C++ 1.x push
    consumer itself pulls again only after its next heartbeat, 30 s on, which is longer than this test.)"""
    reason = missing_reason()
    if reason:
        pytest.fail(f"the C++ client cannot run: {reason}")
    ns, br = cluster.ns, cluster.br
    producer = CppClientProcess(
        ["produce", "--namesrv", ns, "--topic", CPP_TOPIC, "--group", "CppRestartPG", "--count", "600",
         "--interval-ms", "20", "--body-prefix", BODY_PREFIX, "--keys-prefix", "ck", "--deadline-s", "40"],
        tmp_path / "p", timeout_s=50,
    )  # fmt: skip
    with producer:
        time.sleep(1.5)  # the first sends create the topic: the consumer finds its route at once
        with start_consumer("push", ns, CPP_TOPIC, CPP_GROUP, 0, tmp_path / "c1", wait_s=9, deadline_s=30) as first:
            time.sleep(6.5)  # past the consumer's first offset commit (5 s after its start)
            before = broker_offsets(br, CPP_TOPIC, CPP_GROUP)
            t_stop = time.time()
            exit_code = stop_broker(cluster, signal.SIGTERM)
            offsets_file = read_offsets_file(cluster.tmp / "store", CPP_TOPIC, CPP_GROUP)
            abort = (cluster.tmp / "store" / "abort").exists()
            time.sleep(0.5)
            cluster.broker = cluster.start_broker()
            t_restarted = time.time()
            reloaded = broker_offsets(br, CPP_TOPIC, CPP_GROUP)
            run1 = first.wait()
        sent = producer.wait()
    assert exit_code == 0 and not abort, cluster.log_tail()
    assert sent.returncode in (0, 1) and len(sent.of("sent")) == 600, sent.describe()
    acked = {e["i"]: e for e in sent.of("sent") if e["ok"]}
    failed = [e for e in sent.of("sent") if not e["ok"]]
    # sends went through both broker processes, and failed (recorded, with the error) while it was down
    assert sum(e["time"] < t_stop for e in acked.values()) >= 50, sent.describe()
    assert sum(e["time"] > t_restarted for e in acked.values()) >= 50, sent.describe()
    # (a send may also wait out the stop in the client's own retries and succeed on the new broker)
    assert all(e["error"] for e in failed), sent.describe()

    # the group's offsets: committed before the stop, persisted by the shutdown, loaded by the new broker
    assert offsets_file is not None and all(before[q] > 0 for q in range(QUEUES)), (before, offsets_file)
    for q in range(QUEUES):
        assert before[q] <= offsets_file[q] <= reloaded[q], (q, before, offsets_file, reloaded)
    # the first consumer is gone (its shutdown committed its last offsets): read them once they settle
    resume = broker_offsets(br, CPP_TOPIC, CPP_GROUP)
    for _ in range(10):
        time.sleep(0.3)
        again = broker_offsets(br, CPP_TOPIC, CPP_GROUP)
        if again == resume:
            break
        resume = again
    assert all(resume[q] >= reloaded[q] for q in range(QUEUES)), (reloaded, resume)

    # the store: every acknowledged message exactly once, where its acknowledgement said, offsets without a gap
    max_offsets, queues = stored_queues(br, CPP_TOPIC, len(acked))
    stored = check_queues(queues, max_offsets, CPP_TOPIC, cluster.log_tail())
    failed_indices = {e["i"] for e in failed}
    for body, ms in stored.items():
        i = index_of(body)
        if i not in acked:
            assert i in failed_indices, f"{body!r} stored but never sent"
            continue
        # the acknowledged copy is where the acknowledgement said; the client resends a message whose answer the
        # stop cut off, so another copy (the same UNIQ_KEY) may be there, stored by the old broker
        ack = acked[i]
        assert all(m.properties.get("UNIQ_KEY") == ack["msg_id"] for m in ms), (ack, ms)
        assert [m.queue_offset for m in ms].count(ack["offset"]) >= 1, (ack, ms)
        if len(ms) > 1:
            assert sum(m.store_timestamp < t_restarted * 1000 for m in ms) >= len(ms) - 1, (ack, ms, t_restarted)
    missing = sorted(i for i in acked if body_of(i) not in stored)
    assert not missing, f"acknowledged but not stored: {missing[:20]}\n{cluster.log_tail()}"

    # a second consumer resumes exactly at the group's offsets and gets the rest
    expect = sum(max_offsets[q] - resume[q] for q in range(QUEUES))
    assert expect > 0, (resume, max_offsets)
    run2 = consume("push", ns, CPP_TOPIC, CPP_GROUP, expect, tmp_path / "c2", wait_s=15, deadline_s=25)
    assert run2.returncode == 0, run2.describe()
    got: dict[int, set[int]] = {q: set() for q in range(QUEUES)}
    for n, run in ((1, run1), (2, run2)):
        offsets: dict[int, set[int]] = {q: set() for q in range(QUEUES)}
        for msg in run.of("message"):
            q, off = msg["queue_id"], msg["queue_offset"]
            assert msg["topic"] == CPP_TOPIC and queues[q][off].body.decode() == msg["body"], (n, msg)
            offsets[q].add(off)
            got[q].add(off)
        for q in range(QUEUES):
            if n == 1:  # it committed only what it had consumed
                assert set(range(resume[q])) <= offsets[q], (q, resume[q], sorted(offsets[q])[-5:])
            else:  # it started where the group's offset said
                assert offsets[q] == set(range(resume[q], max_offsets[q])), (q, resume[q], max_offsets[q])
    for q in range(QUEUES):
        assert got[q] == set(range(max_offsets[q])), q
