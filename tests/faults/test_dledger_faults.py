"""Faults in a three-node Pumice DLedger group (issue 32, "Tests", first bullet).

Three `pumice broker` processes in DLedger mode and a `pumice namesrv`; a producer that asks
the name server for the master before every attempt and logs every attempt
(``RouteFollowingProducer``); a consumer's view of the queue (``ConsumerView``). After each
fault, ``check_group``: every acknowledged message exactly once on the leader and on both
followers (pulled from each, ``slaveReadEnable=true``), the three DLedger data logs
byte-identical up to the committed end, and every message a consumer pulled still there at its
offset. The faults:

- SIGKILL of the leader, three rounds under a running producer, each killed node restarted;
- SIGSTOP of the leader for 30 s: a send it took while stopped is not acknowledged, it steps
  down, the others elect;
- the leader cut off by network namespaces (each node in its own, veths on a bridge,
  tests/helpers/netns.py): sends to it are never SEND_OK, the majority elects, and once healed it
  truncates the entries it appended alone;
- the "figure 8" schedule: two nodes killed in turn so that an entry of an old term reaches a
  majority under a later leader, which dies before an entry of its own term is committed;
  under DLedger's rule (commit by majority alone) the next leader would overwrite it after a
  consumer saw it; Pumice's term-start record keeps it;
- a follower's disk full (a loop-mounted ext4): the other two go on acknowledging, and the
  follower catches up once space is back.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.response_code import ResponseCode
from tests.helpers import netns
from tests.helpers.clusters import run, running_namesrv
from tests.helpers.dledger_brokers import (
    ConsumerView,
    DLedgerBrokers,
    RouteFollowingProducer,
    check_group,
    members,
    runtime_info,
    wait_members,
)
from tests.helpers.faults import LoopDisk

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

TOPIC = "DLedgerFaultTopic"
CONF = "slaveReadEnable=true\n"


@contextmanager
def dledger_group(tmp_path: Path, ns_host: str = "127.0.0.1", **kw: object) -> Iterator[DLedgerBrokers]:
    """A name server and a DLedger group; on failure each node's last lines are printed."""
    with running_namesrv(tmp_path, host=ns_host) as ns:
        group = DLedgerBrokers(tmp_path, ns, extra_conf=CONF + str(kw.pop("extra_conf", "")), **kw)  # type: ignore[arg-type]
        try:
            yield group
        except BaseException:
            for i, proc in enumerate(group.procs):
                print(f"--- n{i}", "".join(getattr(proc, "output_lines", [])[-40:]))
            raise
        finally:
            group.close()


Body = Callable[[RemotingClient, RouteFollowingProducer, ConsumerView], Awaitable[None]]


def drive(group: DLedgerBrokers, body: Body, timeout_s: float = 170) -> None:
    async def main() -> None:
        client = RemotingClient()
        try:
            await body(client, RouteFollowingProducer(client, group.ns_addr, TOPIC), ConsumerView(client, TOPIC))
        finally:
            await client.close()

    run(main(), timeout_s)


async def master_of(client: RemotingClient, group: DLedgerBrokers, timeout_s: float = 30, not_: int = -1) -> int:
    """The node the name server lists as master (other than ``not_``), waited for."""
    m = await wait_members(client, group.ns_addr, lambda m: "0" in m and m["0"] != group.addr(not_) if not_ >= 0
                           else "0" in m, timeout_s, "a master")  # fmt: skip
    return group.index_of(m["0"])


async def wait_leader(client: RemotingClient, group: DLedgerBrokers, among: list[int], timeout_s: float = 40) -> int:
    """The node of ``among`` that leads with its whole log committed (its runtime info), once the
    name server lists it as master: a killed master's registration stays until it expires."""
    deadline = time.monotonic() + timeout_s
    last: dict[int, object] = {}
    while time.monotonic() < deadline:
        for i in among:
            try:
                info = await runtime_info(client, group.addr(i))
            except Exception as e:  # down, or not answering yet
                last[i] = repr(e)
                continue
            last[i] = {k: v for k, v in info.items() if k in ("dLedgerRole", "dLedgerTerm", "dLedgerLedgerEndIndex",
                                                               "dLedgerCommittedIndex")}  # fmt: skip
            if info.get("dLedgerRole") == "LEADER" and info["dLedgerCommittedIndex"] == info["dLedgerLedgerEndIndex"]:
                if (await members(client, group.ns_addr)).get("0") == group.addr(i):
                    return i
        await asyncio.sleep(0.2)
    raise AssertionError(f"no leader among {among} within {timeout_s} s: {last}")


async def role_of(client: RemotingClient, group: DLedgerBrokers, i: int) -> str:
    return (await runtime_info(client, group.addr(i))).get("dLedgerRole", "")


async def wait_role(client: RemotingClient, group: DLedgerBrokers, i: int, role: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            last = await role_of(client, group, i)
        except Exception as e:  # not answering yet
            last = repr(e)
        if last == role:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"n{i} is not {role} after {timeout_s} s: {last}")


async def restart(group: DLedgerBrokers, i: int) -> None:
    await asyncio.to_thread(group.start, i)


def acked_keys(producer: RouteFollowingProducer) -> list[str]:
    return [a.key for a in producer.acked]


# -- 1. SIGKILL the leader, again and again ------------------------------------------------


def test_leader_killed_three_times_under_load(tmp_path: Path) -> None:
    with dledger_group(tmp_path) as group:

        async def body(client: RemotingClient, producer: RouteFollowingProducer, view: ConsumerView) -> None:
            leader = await master_of(client, group)
            await producer.send_until_acked(20, 30, "warm")
            for rnd in range(3):
                stop = asyncio.Event()
                load = asyncio.create_task(producer.produce(stop, f"r{rnd}"))
                before = len(producer.acked)
                await asyncio.sleep(0.5)
                group.kill(leader)
                new = await master_of(client, group, 40, not_=leader)
                await producer.send_until_acked(5, 30, f"r{rnd}-after")
                stop.set()
                await load
                assert len(producer.acked) > before + 5
                await view.pull_from(group.addr(new))  # a consumer reads the new leader
                await restart(group, leader)
                leader = new
            await check_group(client, group, acked_keys(producer), view)
            failed = [a for a in producer.attempts if a.code != ResponseCode.SUCCESS]
            print(f"{len(producer.acked)} acknowledged, {len(failed)} attempts failed, {len(view.seen)} seen")

        drive(group, body)


# -- 2. SIGSTOP the leader for 30 s --------------------------------------------------------


def test_leader_stopped_30s_steps_down_and_stops_acknowledging(tmp_path: Path) -> None:
    with dledger_group(tmp_path) as group:

        async def body(client: RemotingClient, producer: RouteFollowingProducer, view: ConsumerView) -> None:
            leader = await master_of(client, group)
            await producer.send_until_acked(20, 30, "warm")
            await view.pull_from(group.addr(leader))
            stop = asyncio.Event()
            load = asyncio.create_task(producer.produce(stop, "load"))
            await asyncio.sleep(0.5)
            group.pause(leader)
            # a send the stopped leader reads only when it runs again
            stale = asyncio.create_task(producer.send_to(group.addr(leader), "to-stopped", timeout_s=45))
            stopped_at = time.monotonic()
            new = await master_of(client, group, 28, not_=leader)
            await producer.send_until_acked(5, 20, "while-stopped")
            await asyncio.sleep(max(0.0, 30 - (time.monotonic() - stopped_at)))
            group.resume(leader)
            answer = await stale
            resumed_for = time.monotonic() - stopped_at - 30
            # answered (not left waiting for a quorum it no longer leads), and never SEND_OK
            assert answer.code is not None and answer.code != ResponseCode.SUCCESS, (answer, resumed_for)
            await wait_role(client, group, leader, "FOLLOWER")
            direct = await producer.send_to(group.addr(leader), "to-old-leader")
            assert direct.code != ResponseCode.SUCCESS, direct
            await producer.send_until_acked(5, 20, "after")
            stop.set()
            await load
            assert all(a.to != group.addr(leader) or a.at < stopped_at for a in producer.acked), (
                "acked by the old leader"
            )
            await view.pull_from(group.addr(new))
            await check_group(client, group, acked_keys(producer), view)
            assert "to-stopped" not in view.seen.values()
            print(f"stale send: {answer.code} {answer.remark!r}; {len(producer.acked)} acknowledged")

        drive(group, body)


# -- 3. the leader cut off by network namespaces -------------------------------------------

_SEND_IN_NETNS = """
import asyncio, json, sys
from pumice.remoting.remoting_client import RemotingClient
from tests.helpers.clusters import send
async def main():
    c = RemotingClient()
    out = []
    for key in sys.argv[3:]:
        try:
            r = await c.invoke(sys.argv[1], send(sys.argv[2], key.encode(), key), timeout_s=8)
            out.append([key, r.code, r.remark])
        except Exception as e:
            out.append([key, None, type(e).__name__])
    await c.close()
    print(json.dumps(out))
asyncio.run(main())
"""


def test_isolated_leader_stops_acknowledging_and_truncates_when_healed(tmp_path: Path) -> None:
    if (why := netns.why_not()) is not None:
        pytest.skip(why)
    bridge = netns.Bridge(3)
    try:
        with dledger_group(tmp_path, bridge.gateway, hosts=bridge.hosts,
                           prefixes=[bridge.prefix(i) for i in range(3)]) as group:  # fmt: skip

            async def body(client: RemotingClient, producer: RouteFollowingProducer, view: ConsumerView) -> None:
                leader = await master_of(client, group)
                await producer.send_until_acked(20, 30, "warm")
                await view.pull_from(group.addr(leader))
                bridge.isolate(leader)
                minority = [f"minority-{i}" for i in range(3)]
                cmd = [*bridge.prefix(leader), sys.executable, "-c", _SEND_IN_NETNS, group.addr(leader), TOPIC,
                       *minority]  # fmt: skip
                sends = asyncio.create_task(asyncio.to_thread(
                    subprocess.run, cmd, capture_output=True, text=True, timeout=40, check=False))  # fmt: skip
                new = await master_of(client, group, 30, not_=leader)
                await producer.send_until_acked(10, 30, "majority")
                done = await sends
                answers = json.loads(done.stdout or "null")
                assert answers and len(answers) == 3, (done.stdout, done.stderr[-2000:])
                # each answered (a leader that steps down answers what waits for a quorum), never SEND_OK
                assert all(code is not None and code != ResponseCode.SUCCESS for _, code, _ in answers), answers
                appended = b"".join(f.read_bytes() for f in sorted(group.data_dir(leader).iterdir()))
                assert minority[0].encode() in appended, "the isolated leader appended none of the minority's sends"
                bridge.heal(leader)
                await wait_role(client, group, leader, "FOLLOWER", 30)
                await producer.send_until_acked(5, 20, "healed")
                infos = await check_group(client, group, acked_keys(producer), view)
                assert not set(minority) & set(view.seen.values())
                # the old leader's log ends where the others' do: what it appended alone is gone
                end = int(infos[f"n{leader}"]["dLedgerLedgerEndIndex"])
                assert end == int(infos[f"n{new}"]["dLedgerLedgerEndIndex"])
                print(f"minority answers {answers}; ledger end {end}")

            drive(group, body)
    finally:
        bridge.close()


# -- 4. the "figure 8" schedule -------------------------------------------------------------


def test_figure_8_schedule_keeps_an_entry_a_consumer_saw(tmp_path: Path) -> None:
    """A leads (term t1), every entry committed everywhere. B and C killed: A appends X alone
    (not acknowledged) and is killed. B and C restarted, one leads (call it B, term t2); C
    killed: B appends Y alone and is killed. A and C restarted: A's log is the longer of the
    same last term, so A leads (t3); A replicates X to C, X is committed and a consumer pulls
    it; A is killed; B restarted. Under DLedger's rule C's last entry is X (t1) < Y's (t2): B
    would lead and overwrite X on C. Pumice's term-start record gives C an entry of t3, so C
    leads and X stays. (SIGKILL, not SIGSTOP, so that no push sits in a socket buffer.)"""
    with dledger_group(tmp_path) as group:

        async def body(client: RemotingClient, producer: RouteFollowingProducer, view: ConsumerView) -> None:
            a = await master_of(client, group)
            await producer.send_until_acked(10, 30, "warm")
            await check_group(client, group, acked_keys(producer), view)  # committed everywhere
            await asyncio.sleep(3.5)  # and in every checkpoint (3 s): restarted, B writes no term-start record
            b, c = [i for i in range(3) if i != a]
            group.kill(b)
            group.kill(c)
            x = await producer.send_to(group.addr(a), "X", timeout_s=4)
            assert x.code != ResponseCode.SUCCESS, x
            group.kill(a)
            await asyncio.gather(restart(group, b), restart(group, c))
            b = await wait_leader(client, group, [b, c])
            c = 3 - a - b
            group.kill(c)
            y = await producer.send_to(group.addr(b), "Y", timeout_s=4)
            assert y.code != ResponseCode.SUCCESS, y
            group.kill(b)
            await asyncio.gather(restart(group, a), restart(group, c))
            assert await wait_leader(client, group, [a, c]) == a
            keys = await view.pull_from(group.addr(a))
            if "X" not in keys:
                info = {
                    n: {
                        k: v
                        for k, v in (await runtime_info(client, group.addr(n))).items()
                        if "Ledger" in k or "ffset" in k
                    }
                    for n in (a, c)
                }
                raise AssertionError(f"X not committed in A's new term: {keys[-5:]} {x} {y} {info}")
            group.kill(a)
            await restart(group, b)
            leader = await wait_leader(client, group, [b, c])
            assert leader == c, f"n{b}, whose log ends in an earlier term, leads after X was committed"
            await restart(group, a)
            await producer.send_until_acked(5, 30, "after")
            await check_group(client, group, acked_keys(producer), view)
            assert "X" in view.seen.values() and "Y" not in view.seen.values()

        drive(group, body)


# -- 5. a follower's disk full --------------------------------------------------------------


def test_follower_disk_full_then_catches_up(tmp_path: Path, loop_disk: LoopDisk) -> None:
    with dledger_group(tmp_path, extra_conf="preferredLeaderId=n0\n", roots={2: loop_disk.mount / "node2"}) as group:

        async def body(client: RemotingClient, producer: RouteFollowingProducer, view: ConsumerView) -> None:
            await wait_members(client, group.ns_addr, lambda m: m.get("0") == group.addr(0), 40, "n0 as master")
            producer.body_size = 32 * 1024
            await producer.send_until_acked(10, 30, "warm")
            loop_disk.squeeze()
            await producer.send_until_acked(80, 60, "full")  # n0 and n1 a majority
            lagging = await runtime_info(client, group.addr(2))
            leading = await runtime_info(client, group.addr(0))
            behind = int(leading["dLedgerLedgerEndIndex"]) - int(lagging["dLedgerLedgerEndIndex"])
            assert behind > 20, f"n2 kept up on a full disk ({loop_disk.describe()})"
            loop_disk.release()
            await check_group(client, group, acked_keys(producer), view, timeout_s=60)
            assert (await members(client, group.ns_addr)).get("0") == group.addr(0)
            print(f"n2 was {behind} entries behind on the full disk")

        drive(group, body)
