"""A DLedger group of `pumice broker` processes on loopback, and a producer that follows the route.

``DLedgerBrokers`` starts ``n`` brokers of one brokerName whose broker.conf has RocketMQ's
distribution keys (``enableDLegerCommitLog``, ``dLegerGroup``, ``dLegerPeers`` on free loopback
ports, ``dLegerSelfId``) and registers them with a name server the caller runs; ``members``
reads the name server's ids of the group ({"0": master, "1": n0, ...}). ``RouteFollowingProducer``
asks the name server for the master before each attempt and logs every attempt and every
SEND_OK (its key, msgId and queue offset); every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pumice.client.message import decode_messages
from pumice.common import fastjson
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import pull, send, start, stop
from tests.helpers.ports import free_port

GROUP = "RaftNode00"


class DLedgerBrokers:
    def __init__(self, tmp: Path, ns_addr: str, n: int = 3, extra_conf: str = "") -> None:
        self.tmp = tmp
        self.ns_addr = ns_addr
        self.ports = [free_port() for _ in range(n)]
        dledger_ports = [free_port() for _ in range(n)]
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(dledger_ports))
        self.procs: list[subprocess.Popen[str] | None] = [None] * n
        for i in range(n):
            (tmp / f"broker-n{i}.conf").write_text(
                f"brokerClusterName=RaftCluster\nbrokerName={GROUP}\nlistenPort={self.ports[i]}\n"
                f"listenHost=127.0.0.1\nbrokerIP1=127.0.0.1\nnamesrvAddr={ns_addr}\n"
                f"storePathRootDir={tmp / f'node{i}'}\nstorePathCommitLog={tmp / f'node{i}' / 'commitlog'}\n"
                f"enableDLegerCommitLog=true\ndLegerGroup={GROUP}\ndLegerPeers={peers}\ndLegerSelfId=n{i}\n"
                "mappedFileSizeCommitLog=1048576\nfastListenPortEnable=false\n" + extra_conf
            )
        try:
            for i in range(n):
                self.start(i)
        except BaseException:
            self.close()
            raise

    def start(self, i: int) -> None:
        self.procs[i] = start(["broker", "-c", str(self.tmp / f"broker-n{i}.conf")], "boot success")

    def addr(self, i: int) -> str:
        return f"127.0.0.1:{self.ports[i]}"

    def index_of(self, addr: str) -> int:
        return [self.addr(i) for i in range(len(self.ports))].index(addr)

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        assert proc is not None
        proc.kill()
        proc.wait(10)

    def close(self) -> None:
        failures = []
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                try:
                    stop(proc)
                except AssertionError as e:
                    failures.append(str(e))
        assert not failures, failures


async def members(client: RemotingClient, ns_addr: str) -> dict[str, str]:
    """The group's {brokerId: address} as the name server lists it (GET_BROKER_CLUSTER_INFO)."""
    r = await client.invoke(ns_addr, RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO), 3)
    assert r.code == ResponseCode.SUCCESS, r.remark
    table = fastjson.loads(r.body)["brokerAddrTable"]  # RocketMQ's name server writes {0:"addr"}
    return {str(k): v for k, v in table.get(GROUP, {}).get("brokerAddrs", {}).items()}


async def wait_members(client: RemotingClient, ns_addr: str, ok: object, timeout_s: float, what: str) -> dict[str, str]:
    """Poll every 100 ms until ``ok(members)`` (bounded by ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    last: dict[str, str] = {}
    while time.monotonic() < deadline:
        last = await members(client, ns_addr)
        if ok(last):  # type: ignore[operator]
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: not after {timeout_s} s, the name server lists {last}")


@dataclass
class Attempt:
    at: float
    key: str
    to: str | None
    code: int | None  # None: no answer (connection refused, time-out)
    remark: str = ""
    msg_id: str = ""
    queue_offset: int = -1


@dataclass
class RouteFollowingProducer:
    """Sends to whatever master the name server names, logging every attempt."""

    client: RemotingClient
    ns_addr: str
    topic: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def acked(self) -> list[Attempt]:
        return [a for a in self.attempts if a.code == ResponseCode.SUCCESS]

    async def send_one(self, key: str) -> Attempt:
        master = (await members(self.client, self.ns_addr)).get("0")
        attempt = Attempt(time.monotonic(), key, master, None)
        self.attempts.append(attempt)
        if master is None:
            return attempt
        try:
            r = await self.client.invoke(master, send(self.topic, key.encode(), key), timeout_s=5)
        except (RemotingConnectError, RemotingTimeoutError) as e:
            attempt.remark = str(e)
            return attempt
        attempt.code, attempt.remark = r.code, r.remark or ""
        if r.code == ResponseCode.SUCCESS:
            attempt.msg_id = r.ext_fields["msgId"]
            attempt.queue_offset = int(r.ext_fields["queueOffset"])
        return attempt

    async def send_until_acked(self, count: int, timeout_s: float, prefix: str) -> None:
        """Attempts (unique keys) until ``count`` more SEND_OK, at most ``timeout_s`` and 2,000 attempts."""
        want = len(self.acked) + count
        deadline = time.monotonic() + timeout_s
        for i in range(2000):
            if len(self.acked) >= want:
                return
            if time.monotonic() > deadline:
                break
            a = await self.send_one(f"{prefix}-{i}")
            if a.code != ResponseCode.SUCCESS:
                await asyncio.sleep(0.1)
        raise AssertionError(f"{len(self.acked)} of {want} acknowledged; last attempts: {self.attempts[-5:]}")


async def keys_in_queue(client: RemotingClient, addr: str, topic: str, queue_id: int = 0) -> list[str]:
    """Every message's KEYS in one queue of ``addr``, pulled from offset 0 (bounded)."""
    keys: list[str] = []
    offset = 0
    for _ in range(1000):
        r = await client.invoke(addr, pull(topic, offset, queue_id, sys_flag=0, suspend_ms=0), timeout_s=10)
        if r.code != ResponseCode.SUCCESS:
            break
        msgs = decode_messages(r.body, decompress=False)
        keys += [m.properties.get("KEYS", "") for m in msgs]
        offset = int(r.ext_fields["nextBeginOffset"])
    return keys
