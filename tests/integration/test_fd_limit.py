"""A running broker pushed to its file-descriptor limit (issue 22, point 5), with ``prlimit``.

Found before: each mapped file held two descriptors; at the limit the first ConsumeQueue file
that could not be created set WRITE_LOGICS_QUEUE_ERROR for good (every send refused until a
restart), and ``do_dispatch`` skipped the other queues of the batch while the dispatch offset
moved on, so acknowledged messages could lose their ConsumeQueue entries.

Here a real ``pumice broker`` gets its soft RLIMIT_NOFILE lowered under it (prlimit(2), as
``prlimit --pid <pid> --nofile=N:<hard>``; the hard limit is left alone so that raising the
soft one back needs no privilege). The descriptors are counted in ``/proc/<pid>/fd``; since
the kernel hands out the lowest free number and the table has holes, N is set from the
lowest free number, so the broker can open exactly as many more descriptors as the step
wants (none, then one). The client's connections are opened before, and kept.

1. No descriptor to spare: a send whose CommitLog range must be reserved first is refused,
   with a remark naming the descriptors; small sends to a queue whose files exist are stored.
2. One descriptor to spare: sends to queues with no ConsumeQueue file yet (an admin-created
   topic's empty queues, a topic the send auto-creates) need a new mapped file each (an open
   and the map's own descriptor): each send is SEND_OK or a refusal naming the consume
   queue; runningFlags shows WRITE_LOGICS_QUEUE_ERROR; stored messages stay readable.
3. The limit back: within seconds, without a restart, sends are stored again and the flags
   are OK; every acknowledged message is in its queue at the offset its send result gave, byte
   for byte, and findable by its key; the queues have no gaps; no store file holds two
   descriptors.
"""

from __future__ import annotations

import asyncio
import collections
import os
import re
import resource
import time
from pathlib import Path

import pytest

from pumice.client import AsyncMQAdmin
from pumice.client.message import decode_messages
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, pull, run, send
from tests.helpers.waiting import eventually_async

pytestmark = pytest.mark.skipif(
    not (hasattr(resource, "prlimit") and os.path.isdir("/proc/self/fd")), reason="needs Linux prlimit and /proc"
)

TOPIC = "FdLimitTopic"  # created by the admin client, 8 queues, messages in queue 0 only
QUEUES = 8
AUTO_TOPIC = "FdLimitAuto"  # created by its first send (TBW102, 4 queues), at the limit
AUTO_QUEUES = 4
PRE = 4
BIG = 70 * 1024  # past the CommitLog's reserved chunk (64 KiB for a 1 MiB segment)
CLEAR_REMARK = re.compile(r"consume ?queue|descriptor", re.IGNORECASE)
SEGMENT_DIRS = ("commitlog", "consumequeue", "index")


def open_fds(pid: int) -> dict[int, str]:
    """The broker's descriptors and what each points at (one that closes meanwhile is left out)."""
    out = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except FileNotFoundError:
            pass
    return out


def lowest_free_fd(pid: int) -> int:
    """The number the broker's next open() gets: the lowest one not in use (the least of a
    few looks, so a descriptor open only for an instant does not count)."""
    lows = []
    for _ in range(3):
        used = set(open_fds(pid))
        lows.append(next(n for n in range(len(used) + 1) if n not in used))
        time.sleep(0.05)
    return min(lows)


def segment_fds(pid: int, store: Path) -> collections.Counter[str]:
    """How many descriptors the broker holds on each CommitLog, ConsumeQueue and IndexFile file."""
    roots = tuple(f"{store / d}/" for d in SEGMENT_DIRS)
    return collections.Counter(p for p in open_fds(pid).values() if p.startswith(roots))


def assert_one_fd_per_segment(pid: int, store: Path) -> collections.Counter[str]:
    held = segment_fds(pid, store)
    doubled = {p: n for p, n in held.items() if n != 1}
    assert not doubled, f"store files held by more than one descriptor: {doubled}"
    return held


class Sends:
    """Every send made and its answer; the acknowledged ones by (topic, queue)."""

    def __init__(self, client: RemotingClient, addr: str) -> None:
        self.client = client
        self.addr = addr
        self.n = 0
        self.log: list[tuple[str, str, int, int, str | None]] = []  # phase, topic, queue, code, remark
        self.acked: dict[tuple[str, int], dict[int, tuple[bytes, str, str]]] = collections.defaultdict(dict)

    async def send(self, phase: str, topic: str, queue: int, size: int = 0) -> RemotingCommand:
        self.n += 1
        key = f"fd-{phase}-{self.n}"
        body = f"{key}:{topic}:{queue}:".encode().ljust(size, b"x")
        r = await self.client.invoke(self.addr, send(topic, body, key, queue), timeout_s=10.0)
        self.log.append((phase, topic, queue, r.code, r.remark))
        if r.code == ResponseCode.SUCCESS:
            assert int(r.ext_fields["queueId"]) == queue, r.ext_fields
            offset = int(r.ext_fields["queueOffset"])
            where = (topic, queue)
            assert offset not in self.acked[where], f"{where} offset {offset} acknowledged twice: {r.ext_fields}"
            self.acked[where][offset] = (body, r.ext_fields["msgId"], key)
        else:  # never a silent drop: a refusal says why
            assert r.code in (ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR), self.describe(r)
            assert r.remark and CLEAR_REMARK.search(r.remark), f"a refusal that does not name its cause: {r.remark!r}"
        return r

    def describe(self, r: RemotingCommand) -> str:
        return f"code {r.code} remark {r.remark!r} ext {r.ext_fields} after {self.log[-6:]}"

    def phase_counts(self, phase: str) -> tuple[int, int]:
        codes = [code for p, _, _, code, _ in self.log if p == phase]
        return sum(c == 0 for c in codes), sum(c != 0 for c in codes)


async def max_offset(c: RemotingClient, addr: str, topic: str, queue: int) -> int:
    r = await c.invoke(addr, RemotingCommand(code=30, ext_fields={"topic": topic, "queueId": queue}))
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return int(r.ext_fields["offset"])


async def pull_queue(c: RemotingClient, addr: str, topic: str, queue: int, end: int) -> list:
    """Every message of ``topic``/``queue`` from offset 0 up to ``end``, in order."""
    msgs: list = []
    offset = 0
    for _ in range(end + 2):
        if offset >= end:
            break
        r = await c.invoke(addr, pull(topic, offset, queue_id=queue, sys_flag=0))
        assert r.code == ResponseCode.SUCCESS, f"pull {topic}/{queue} at {offset}: {r.code} {r.remark} {r.ext_fields}"
        got = decode_messages(r.body, decompress=False)
        assert got, f"pull {topic}/{queue} at {offset}: no message"
        msgs += got
        offset = int(r.ext_fields["nextBeginOffset"])
    return msgs


async def query_by_key(c: RemotingClient, addr: str, topic: str, key: str) -> list:
    q = RemotingCommand(code=12, ext_fields={"topic": topic, "key": key, "maxNum": 8, "beginTimestamp": 0,
                                             "endTimestamp": 2**62})  # fmt: skip
    r = await c.invoke(addr, q)
    return decode_messages(r.body, decompress=False) if r.code == ResponseCode.SUCCESS and r.body else []


def test_fd_limit_refuses_cleanly_loses_nothing_and_recovers_without_restart(cluster: Cluster) -> None:
    pid = cluster.broker.pid
    store = cluster.tmp / "store"
    original = resource.prlimit(pid, resource.RLIMIT_NOFILE)

    def set_soft_limit(n: int) -> None:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (n, original[1]))

    def alive() -> None:
        assert cluster.broker.poll() is None, "the broker died:\n" + "".join(cluster.broker.output_lines[-40:])

    async def main() -> None:
        c = RemotingClient()
        admin = AsyncMQAdmin(cluster.ns)
        await admin.start()
        sends = Sends(c, cluster.br)
        lowered = False

        async def flags() -> str:
            return (await admin.broker_status(cluster.br))["runningFlags"]

        try:
            # -- before: the topic, queue 0's files, and every connection this test uses -----------
            assert await admin.create_topic(TOPIC, broker_addr=cluster.br, read_queue_nums=QUEUES,
                                            write_queue_nums=QUEUES) == [cluster.br]  # fmt: skip
            for _ in range(PRE):
                r = await sends.send("before", TOPIC, 0)
                assert r.code == ResponseCode.SUCCESS, sends.describe(r)
            await eventually_async(
                lambda: _equals(max_offset(c, cluster.br, TOPIC, 0), PRE), 10, "queue 0 dispatched", retry_on=()
            )
            assert await flags() == "OK"
            assert (await c.invoke(cluster.br, pull(TOPIC, 0, sys_flag=0))).code == ResponseCode.SUCCESS
            held = assert_one_fd_per_segment(pid, store)
            assert any("/consumequeue/" in p for p in held) and any("/commitlog/" in p for p in held), held
            before = open_fds(pid)

            # -- 1: no descriptor to spare ----------------------------------------------------------
            low = lowest_free_fd(pid)
            set_soft_limit(low)
            lowered = True
            print(f"broker pid {pid}: {len(before)} fds open (highest {max(before)}), limit {original} -> {low}")
            r = await sends.send("none-spare", TOPIC, 0, size=BIG)
            assert r.code != ResponseCode.SUCCESS and "descriptor" in (r.remark or ""), sends.describe(r)
            for _ in range(3):  # files that exist need no descriptor
                r = await sends.send("none-spare", TOPIC, 0)
                assert r.code == ResponseCode.SUCCESS, sends.describe(r)
            await eventually_async(
                lambda: _equals(max_offset(c, cluster.br, TOPIC, 0), PRE + 3), 10, "dispatch", retry_on=()
            )
            assert await flags() == "OK"
            alive()

            # -- 2: one descriptor to spare: new ConsumeQueue files cannot be made -------------------
            set_soft_limit(low + 1)
            new_queues = [(AUTO_TOPIC, q) for q in range(AUTO_QUEUES)] + [(TOPIC, q) for q in range(1, QUEUES)]
            # a burst, so that appends to several new queues can be acknowledged before their dispatch
            burst = [sends.send("one-spare", t, q) for t, q in new_queues[:6]]
            await asyncio.gather(*burst)
            deadline = time.monotonic() + 10
            i = 0
            while time.monotonic() < deadline and i < 40 and sends.phase_counts("one-spare")[1] < 8:
                t, q = [*new_queues, (TOPIC, 0)][i % (len(new_queues) + 1)]
                await sends.send("one-spare", t, q)
                i += 1
                await asyncio.sleep(0.02)
            acked_low, refused_low = sends.phase_counts("one-spare")
            print(f"at the limit: {acked_low} acknowledged, {refused_low} refused; remarks:",
                  sorted({rm for p, _, _, code, rm in sends.log if p == "one-spare" and code}))  # fmt: skip
            # checked after the data (a broker that takes these sends must lose nothing either)
            for _ in range(50):  # 5 s
                flags_low = await flags()
                if "WRITE_LOGICS_QUEUE_ERROR" in flags_low:
                    break
                await asyncio.sleep(0.1)
            # reads go on: queue 0 is pullable, whole
            readable = await pull_queue(c, cluster.br, TOPIC, 0, PRE + 3)
            assert [m.queue_offset for m in readable][: PRE + 3] == list(range(PRE + 3))
            await asyncio.sleep(0.5)  # dispatch retries meanwhile (every 0.1 s): none may leak a descriptor
            alive()

            # -- 3: the limit back: writes resume by themselves -------------------------------------
            set_soft_limit(original[0])
            lowered = False
            t0 = time.monotonic()
            r = await eventually_async(
                lambda: _ok(sends.send("after", TOPIC, QUEUES - 1)), 10, "a send stored again", retry_on=()
            )
            await eventually_async(lambda: _equals(flags(), "OK"), 10, "runningFlags OK", retry_on=())
            print(f"writes resumed {time.monotonic() - t0:.2f}s after the limit was raised")
            for t, q in [*new_queues, (TOPIC, 0)]:
                r = await sends.send("after", t, q)
                assert r.code == ResponseCode.SUCCESS, sends.describe(r)
            alive()

            # -- every acknowledged message, at its offset, byte for byte; no gaps -------------------
            for (t, q), acked in sorted(sends.acked.items()):
                n = len(acked)
                assert sorted(acked) == list(range(n)), f"{t}/{q}: acknowledged offsets {sorted(acked)} have gaps"
                await eventually_async(lambda t=t, q=q, n=n: _equals(max_offset(c, cluster.br, t, q), n), 10,
                                       f"{t}/{q} dispatched up to {n}", retry_on=())  # fmt: skip
                msgs = await pull_queue(c, cluster.br, t, q, n)
                assert [m.queue_offset for m in msgs] == list(range(n)), f"{t}/{q}: {[m.queue_offset for m in msgs]}"
                for m in msgs:
                    body, msg_id, _ = acked[m.queue_offset]
                    assert (m.topic, m.queue_id, m.msg_id) == (t, q, msg_id), (t, q, m.queue_offset, m.msg_id, msg_id)
                    assert m.body == body, f"{t}/{q} offset {m.queue_offset}: {m.body[:60]!r} != {body[:60]!r}"
            # those acknowledged at the limit were indexed too
            for phase in ("none-spare", "one-spare"):
                for (t, _q), acked in sends.acked.items():
                    for body, _, key in acked.values():
                        if key.startswith(f"fd-{phase}-"):
                            found = await eventually_async(lambda t=t, key=key: query_by_key(c, cluster.br, t, key),
                                                           10, f"{key} by key", retry_on=())  # fmt: skip
                            assert [m.body for m in found] == [body], key
            # the limit was reached, and said so: refusals (above), runningFlags, the log
            assert refused_low >= 8, f"the limit refused nothing: {sends.log}"
            assert "WRITE_LOGICS_QUEUE_ERROR" in flags_low, f"runningFlags at the limit: {flags_low!r}"
            assert any("Too many open files" in line and "consume queue" in line
                       for line in cluster.broker.output_lines), "the broker's log does not say why"  # fmt: skip
            held = assert_one_fd_per_segment(pid, store)
            made = {p for p in held if p.startswith(f"{store}/consumequeue/{AUTO_TOPIC}/")}
            assert len(made) == AUTO_QUEUES, made
            alive()
        finally:
            if lowered:
                set_soft_limit(original[0])
            await admin.shutdown()
            await c.close()

    try:
        run(main())
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, original)  # whatever happened, for a clean stop


async def _equals(value, expected):
    return (await value) == expected


async def _ok(response):
    r = await response
    return r if r.code == ResponseCode.SUCCESS else None
