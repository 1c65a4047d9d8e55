"""DLedger failover time: from SIGKILL of the leader to the first SEND_OK from the new one,
Pumice and Apache RocketMQ 4.9.7 in the same run (issue 32).

    python3 -m bench.dledger_failover [--kills 3] [--systems pumice,rocketmq] [--seed N]

Each system runs its own name server and a three-node group of one brokerName (RaftNode00,
``dLegerPeers`` on loopback, DLedger's default time-outs: both sides use dledger 0.3.1.2's). A
producer asks the name server for the master before every attempt
(``tests.helpers.dledger_brokers.RouteFollowingProducer``: each attempt bounded, 100 ms apart
after a failure). Per kill: 20 SEND_OK, SIGKILL the master, the time to the first SEND_OK
after it, and when the name server first listed a new master; then the killed node is started
again, and the group is whole and has had 4 s (two heartbeats) before the next kill. The
systems alternate kill by kill, so a busy moment of the machine falls on both. Prints each
figure and the medians.

RocketMQ needs Java 17 and Maven (``bash bench/peers/install.sh``, or the test suite's
``tests/java-rocketmq`` build).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from tests.helpers.dledger_brokers import RouteFollowingProducer, members, wait_members

from pumice.remoting.remoting_client import RemotingClient

TOPIC = "FailoverBench"
BEFORE = 20  # SEND_OK before each kill
LIMIT_S = 60.0  # per failover; a longer one is reported as a failure
SETTLE_S = 4.0  # two heartbeat intervals


class Group(Protocol):
    name: str
    ns_addr: str

    def kill(self, addr: str) -> None: ...

    def restart_killed(self) -> None: ...


class PumiceGroup:
    name = "Pumice"

    def __init__(self, tmp: Path, stack: contextlib.ExitStack) -> None:
        from tests.helpers.clusters import running_namesrv
        from tests.helpers.dledger_brokers import DLedgerBrokers

        self.ns_addr = stack.enter_context(running_namesrv(tmp))
        self.brokers = DLedgerBrokers(tmp, self.ns_addr)
        stack.callback(self.brokers.close)
        self.killed: int | None = None

    def kill(self, addr: str) -> None:
        self.killed = self.brokers.index_of(addr)
        self.brokers.kill(self.killed)

    def restart_killed(self) -> None:
        assert self.killed is not None
        self.brokers.start(self.killed)


class RocketMQGroup:
    name = "RocketMQ 4.9.7"

    def __init__(self, tmp: Path, stack: contextlib.ExitStack) -> None:
        from tests.helpers.ports import free_port
        from tests.oracle.dledger_peer import JavaDLedgerGroup
        from tests.oracle.rocketmq_peer import JavaNamesrv

        ns = JavaNamesrv(tmp / "namesrv", free_port())
        stack.callback(ns.stop)
        self.ns_addr = ns.addr
        self.group = JavaDLedgerGroup(tmp / "group", self.ns_addr, 3)
        stack.callback(self.group.close)
        self.killed: str | None = None

    def kill(self, addr: str) -> None:
        self.killed = next(i for i in self.group.ids if self.group.addr(i) == addr)
        self.group.kill_node(self.killed)

    def restart_killed(self) -> None:
        assert self.killed is not None
        self.group.start_node(self.killed)


async def _one_failover(group: Group, client: RemotingClient, round_no: int) -> tuple[float, float]:
    """(seconds to the first SEND_OK, seconds until the name server listed a new master)."""
    await wait_members(client, group.ns_addr, lambda m: len(m) == 3 and "0" in m, LIMIT_S, "a whole group")
    # a restarted node registers as a slave while still a candidate (4.9 does so too): give it two
    # heartbeats to follow the leader, or the next kill finds it behind and the vote takes longer
    await asyncio.sleep(SETTLE_S)
    producer = RouteFollowingProducer(client, group.ns_addr, TOPIC)
    await producer.send_until_acked(BEFORE, LIMIT_S, f"r{round_no}-before")
    old = (await members(client, group.ns_addr))["0"]
    killed_at = time.monotonic()
    group.kill(old)
    listed_at: float | None = None

    async def watch() -> None:
        nonlocal listed_at
        while listed_at is None:
            m = await members(client, group.ns_addr)
            if m.get("0") not in (None, old):
                listed_at = time.monotonic()
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    try:
        await producer.send_until_acked(1, LIMIT_S, f"r{round_no}-after")
    finally:
        await asyncio.sleep(0.1)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    first_ok = producer.acked[-1].at - killed_at
    listed = (listed_at - killed_at) if listed_at is not None else float("nan")
    await asyncio.to_thread(group.restart_killed)
    return first_ok, listed


@contextlib.contextmanager
def _groups(names: list[str], tmp: Path) -> Iterator[list[Any]]:
    with contextlib.ExitStack() as stack:
        out: list[Any] = []
        for name in names:
            (tmp / name).mkdir()
            out.append(PumiceGroup(tmp / name, stack) if name == "pumice" else RocketMQGroup(tmp / name, stack))
        yield out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=3, help="leader kills per system")
    ap.add_argument("--systems", default="pumice,rocketmq")
    ap.add_argument("--seed", type=int, default=None, help="the order of the systems in each round")
    args = ap.parse_args()
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    if not names or any(n not in ("pumice", "rocketmq") for n in names):
        raise SystemExit("--systems: pumice, rocketmq or both")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"seed {seed}; {args.kills} kills per system; DLedger's default time-outs")
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="dledger-failover-") as d, _groups(names, Path(d)) as groups:

        async def run() -> None:
            client = RemotingClient()
            try:
                for r in range(args.kills):
                    for g in rng.sample(groups, len(groups)):
                        ok, listed = await _one_failover(g, client, r)
                        results.setdefault(g.name, []).append((ok, listed))
                        print(f"{g.name:15s} kill {r + 1}: first SEND_OK after {ok:.2f} s "
                              f"(name server listed the new master after {listed:.2f} s)", flush=True)  # fmt: skip
            finally:
                await client.close()

        asyncio.run(run())
    print()
    for name, rows in results.items():
        oks = [ok for ok, _ in rows]
        print(
            f"{name:15s} median {statistics.median(oks):.2f} s, range {min(oks):.2f}-{max(oks):.2f} s over {len(oks)}"
        )


if __name__ == "__main__":
    main()
