"""DLedger mode end to end (issue 32): three `pumice broker` processes of one brokerName with
4.9's keys (dLegerPeers on loopback) and a `pumice namesrv`. The name server lists the roles
(master 0, followers node number + 1); a producer that follows the route gets SEND_OK; a
follower refuses sends; SIGKILL of the leader: another node registers as master and sends
succeed again; every acknowledged message is on the new leader exactly once."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from pumice.cli import main as pumice_cli
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import run, running_namesrv, send
from tests.helpers.dledger_brokers import (
    GROUP,
    DLedgerBrokers,
    RouteFollowingProducer,
    keys_in_queue,
    wait_members,
)

TOPIC = "DLedgerTopic"


async def _dledger_status(ns: str, ok: Callable[[dict[str, Any]], bool], timeout_s: float = 15) -> dict[str, Any]:
    """`pumice admin dLedgerStatus --json`'s one group, polled until ``ok`` (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = await asyncio.to_thread(CliRunner().invoke, pumice_cli, ["admin", "dLedgerStatus", "-n", ns, "--json"])
        assert r.exit_code == 0, r.output
        (g,) = orjson.loads(r.stdout)["groups"]
        assert g["group"] == GROUP
        if ok(g) or time.monotonic() > deadline:
            assert ok(g), g
            return g
        await asyncio.sleep(0.5)


def test_three_nodes_elect_take_sends_and_survive_a_leader_kill(tmp_path: Path) -> None:
    with running_namesrv(tmp_path) as ns:
        group = DLedgerBrokers(tmp_path, ns)
        try:

            async def main() -> None:
                client = RemotingClient()
                try:
                    formed = await wait_members(client, ns, lambda m: len(m) == 3 and "0" in m, 30, "a formed group")
                    leader = group.index_of(formed["0"])
                    assert formed == {"0": group.addr(leader)} | {
                        str(i + 1): group.addr(i) for i in range(3) if i != leader
                    }
                    # pumice admin clusterList: each node with its role's id
                    r = await asyncio.to_thread(
                        CliRunner().invoke, pumice_cli, ["admin", "clusterList", "-n", ns, "--json"]
                    )
                    assert r.exit_code == 0, r.output
                    listed = {(b["brokerName"], b["brokerId"], b["addr"]) for b in orjson.loads(r.stdout)["brokers"]}
                    assert listed == {(GROUP, int(i), a) for i, a in formed.items()}
                    follower = (leader + 1) % 3
                    r = await client.invoke(group.addr(follower), send(TOPIC, b"x", "to-follower"), timeout_s=5)
                    assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE, (r.code, r.remark)

                    producer = RouteFollowingProducer(client, ns, TOPIC)
                    await producer.send_until_acked(40, 30, "before")
                    # pumice admin dLedgerStatus: the leader, its term, every member caught up
                    status = await _dledger_status(ns, lambda g: all(m.get("behind") == 0 for m in g["members"]))
                    assert status["leaderId"] == f"n{leader}" and status["term"] >= 0
                    assert {m["selfId"]: m["role"] for m in status["members"]} == {
                        f"n{i}": "LEADER" if i == leader else "FOLLOWER" for i in range(3)
                    }
                    assert len({m["endIndex"] for m in status["members"]}) == 1
                    killed_at = time.monotonic()
                    group.kill(leader)
                    await producer.send_until_acked(1, 40, "after")
                    failover_s = producer.acked[-1].at - killed_at
                    await producer.send_until_acked(20, 30, "after-more")
                    now = await wait_members(client, ns, lambda m: "0" in m, 5, "a new master")
                    new_leader = group.index_of(now["0"])
                    assert new_leader != leader and group.addr(leader) not in now.values()
                    status = await _dledger_status(ns, lambda g: g["leaderId"] == f"n{new_leader}")
                    roles = {m["selfId"]: m["role"] for m in status["members"]}
                    assert roles[f"n{leader}"] == "UNREACHABLE" and roles[f"n{new_leader}"] == "LEADER"
                    keys = collections.Counter(await keys_in_queue(client, now["0"], TOPIC))
                    acked = [a.key for a in producer.acked]
                    missing = [k for k in acked if keys[k] == 0]
                    twice = [k for k in acked if keys[k] > 1]
                    assert not missing and not twice, (missing[:5], twice[:5])
                    failed = [a for a in producer.attempts if a.code != ResponseCode.SUCCESS]
                    print(f"failover {failover_s:.1f} s; {len(acked)} acknowledged, {len(failed)} attempts failed")
                finally:
                    await client.close()

            try:
                run(main(), 150)
            except BaseException:  # what each node said last (its WARNING and ERROR lines)
                for i, proc in enumerate(group.procs):
                    print(f"--- n{i}", "".join(getattr(proc, "output_lines", [])[-30:]))
                raise
        finally:
            group.close()
