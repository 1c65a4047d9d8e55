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
import collections
import os
import signal
import struct
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
from tests.helpers.dledger_group import process_stopped
from tests.helpers.ports import free_port

GROUP = "RaftNode00"


class DLedgerBrokers:
    """``hosts[i]`` is node i's address (loopback by default), ``prefixes[i]`` what runs it (``ip netns
    exec``, tests/helpers/netns.py), ``roots[i]`` its storePathRootDir (a loop disk, say)."""

    def __init__(
        self,
        tmp: Path,
        ns_addr: str,
        n: int = 3,
        extra_conf: str = "",
        hosts: list[str] | None = None,
        prefixes: list[list[str]] | None = None,
        roots: dict[int, Path] | None = None,
    ) -> None:
        self.tmp = tmp
        self.ns_addr = ns_addr
        self.hosts = hosts or ["127.0.0.1"] * n
        self.prefixes = prefixes or [[] for _ in range(n)]
        self.roots = [(roots or {}).get(i, tmp / f"node{i}") for i in range(n)]
        self.ports = [free_port() for _ in range(n)]
        dledger_ports = [free_port() for _ in range(n)]
        peers = ";".join(f"n{i}-{self.hosts[i]}:{p}" for i, p in enumerate(dledger_ports))
        self.procs: list[subprocess.Popen[str] | None] = [None] * n
        for i in range(n):
            (tmp / f"broker-n{i}.conf").write_text(
                f"brokerClusterName=RaftCluster\nbrokerName={GROUP}\nlistenPort={self.ports[i]}\n"
                f"listenHost={self.hosts[i]}\nbrokerIP1={self.hosts[i]}\nnamesrvAddr={ns_addr}\n"
                f"storePathRootDir={self.roots[i]}\nstorePathCommitLog={self.roots[i] / 'commitlog'}\n"
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
        conf = str(self.tmp / f"broker-n{i}.conf")
        self.procs[i] = start(["broker", "-c", conf], "boot success", prefix=self.prefixes[i])

    def addr(self, i: int) -> str:
        return f"{self.hosts[i]}:{self.ports[i]}"

    def index_of(self, addr: str) -> int:
        return [self.addr(i) for i in range(len(self.ports))].index(addr)

    def data_dir(self, i: int) -> Path:
        """Node i's DLedger data files (``<storePathRootDir>/dledger-n<i>/data``)."""
        return self.roots[i] / f"dledger-n{i}" / "data"

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        assert proc is not None
        os.kill(proc.pid, signal.SIGCONT)  # a stopped process dies of SIGKILL too, but is reaped sooner
        proc.kill()
        proc.wait(10)

    def pause(self, i: int) -> None:
        """SIGSTOP, returning once every thread of the process is stopped."""
        proc = self.procs[i]
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not process_stopped(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert process_stopped(proc.pid), f"n{i} did not stop"

    def resume(self, i: int) -> None:
        proc = self.procs[i]
        assert proc is not None
        os.kill(proc.pid, signal.SIGCONT)

    def close(self) -> None:
        failures = []
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
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
    body_size: int = 0  # bodies are the key, padded to this size

    @property
    def acked(self) -> list[Attempt]:
        return [a for a in self.attempts if a.code == ResponseCode.SUCCESS]

    async def send_one(self, key: str) -> Attempt:
        return await self.send_to((await members(self.client, self.ns_addr)).get("0"), key)

    async def send_to(self, addr: str | None, key: str, timeout_s: float = 5) -> Attempt:
        """One attempt to ``addr`` (None: no master listed), logged."""
        attempt = Attempt(time.monotonic(), key, addr, None)
        self.attempts.append(attempt)
        if addr is None:
            return attempt
        try:
            body = key.encode().ljust(self.body_size, b".")
            r = await self.client.invoke(addr, send(self.topic, body, key), timeout_s=timeout_s)
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

    async def produce(self, stop: asyncio.Event, prefix: str, timeout_s: float = 120) -> None:
        """Sends (unique keys, at most 50 a second) until ``stop`` is set: at most ``timeout_s``
        and 3,000 attempts."""
        deadline = time.monotonic() + timeout_s
        for i in range(3000):
            if stop.is_set() or time.monotonic() > deadline:
                return
            ok = (await self.send_one(f"{prefix}-{i}")).code == ResponseCode.SUCCESS
            await asyncio.sleep(0.02 if ok else 0.1)


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


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    """The broker's GET_BROKER_RUNTIME_INFO table (Pumice's dLedger* keys among it)."""
    r = await client.invoke(addr, RemotingCommand(code=RequestCode.GET_BROKER_RUNTIME_INFO), 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return {str(k): str(v) for k, v in fastjson.loads(r.body)["table"].items()}


def committed_log(data_dir: Path, committed_index: int) -> bytes:
    """A node's DLedger data files read straight from disk, from the first file's start up to
    the end of entry ``committed_index`` (blanks at file ends included, as written)."""
    files = sorted(data_dir.iterdir(), key=lambda f: int(f.name))
    data = b"".join(f.read_bytes() for f in files)
    pos, end = 0, 0
    while pos + 16 <= len(data):
        magic, size, index = struct.unpack_from(">iiq", data, pos)
        if magic == -1:  # the blank at a file's end: its second int is the rest's length
            pos += size
            continue
        if magic != 1 or size < 48 or index > committed_index:
            break
        pos += size
        end = pos
    return data[:end]


class ConsumerView:
    """What consumers saw: {queue offset: key} pulled from a node; a later pull that serves
    another key at a seen offset (or none) is a message a consumer saw and lost."""

    def __init__(self, client: RemotingClient, topic: str) -> None:
        self.client = client
        self.topic = topic
        self.seen: dict[int, str] = {}

    async def pull_from(self, addr: str) -> list[str]:
        keys = await keys_in_queue(self.client, addr, self.topic)
        lost = {o: k for o, k in self.seen.items() if o >= len(keys) or keys[o] != k}
        assert not lost, f"{addr} no longer serves what consumers saw (offset: key): {dict(list(lost.items())[:5])}"
        self.seen.update(enumerate(keys))
        return keys


async def check_group(
    client: RemotingClient, group: DLedgerBrokers, acked: list[str], view: ConsumerView, timeout_s: float = 40
) -> dict[str, dict[str, str]]:
    """Issue 32's check after a fault: every node up agrees on its committed index (= its ledger
    end); each serves every acknowledged key exactly once (a pull from offset 0; followers serve
    pulls), and every key a consumer saw at its offset; the data files are byte-identical up to
    the committed end. Retried until it holds (followers copy topics every 10 s), at most
    ``timeout_s``; returns each node's runtime info."""
    deadline = time.monotonic() + timeout_s
    while True:
        problems: list[str] = []
        infos: dict[str, dict[str, str]] = {}
        try:
            for i in range(len(group.ports)):
                infos[f"n{i}"] = info = await runtime_info(client, group.addr(i))
                keys = await view.pull_from(group.addr(i))
                counts = collections.Counter(keys)
                missing = [k for k in acked if counts[k] == 0]
                twice = [k for k in acked if counts[k] > 1]
                if missing or twice:
                    problems.append(f"n{i} ({info.get('dLedgerRole')}): missing {missing[:5]}, twice {twice[:5]}")
            ends = {n: (int(v["dLedgerCommittedIndex"]), int(v["dLedgerLedgerEndIndex"])) for n, v in infos.items()}
            if len(set(ends.values())) != 1 or any(c != e for c, e in ends.values()):
                problems.append(f"(committedIndex, ledgerEndIndex) differ: {ends}")
            else:
                logs = {n: committed_log(group.data_dir(int(n[1:])), c) for n, (c, _) in ends.items()}
                if len(set(logs.values())) != 1:
                    problems.append(
                        f"data logs differ up to the committed end: { {n: len(b) for n, b in logs.items()} }"
                    )
        except (AssertionError, RemotingConnectError, RemotingTimeoutError, KeyError, ValueError) as e:
            problems.append(f"{type(e).__name__}: {e}")
        if not problems:
            return infos
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout_s} s: {problems}")
        await asyncio.sleep(0.5)
