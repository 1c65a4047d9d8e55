"""A DLedger group of ``python -m pumice.dledger`` processes on loopback, and a client's calls
(METADATA, APPEND, GET) to its members; every wait is bounded, processes are stopped by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TypeVar

from pumice.dledger.dledger_protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    DLedgerRequestCode,
    MetadataRequest,
    MetadataResponse,
    RequestOrResponse,
)
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from tests.helpers.clusters import run
from tests.helpers.ports import free_port

M = TypeVar("M", bound=RequestOrResponse)
GROUP = "RaftNode00"


class DLedgerNode:
    def __init__(self, node_id: str, port: int, store_dir: Path) -> None:
        self.node_id = node_id
        self.port = port
        self.store_dir = store_dir
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, peers: str, store_type: str, extra: list[str]) -> None:
        args = [sys.executable, "-m", "pumice.dledger", "--group", GROUP, "--id", self.node_id, "--peers", peers,
                "--store-dir", str(self.store_dir), "--store-type", store_type, *extra]  # fmt: skip
        self.lines = []
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ})  # fmt: skip
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if "listening on" in line and "pumice.dledger:" in line:
                self.proc = proc
                threading.Thread(target=lambda: self.lines.extend(proc.stdout or []), daemon=True).start()
                return
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"{self.node_id} did not start: {''.join(self.lines)}")

    def signal(self, sig: int) -> None:
        """Sends ``sig``; for SIGSTOP, returns once every thread is stopped (kill() returns
        before that: a stopped node may still answer for a few milliseconds)."""
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        if sig == signal.SIGSTOP:
            deadline = time.monotonic() + 5
            while not _stopped(self) and time.monotonic() < deadline:
                time.sleep(0.001)
            assert _stopped(self), f"{self.node_id} did not stop"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> int | None:
        """SIGTERM; the exit code (killed after 20 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return None


class DLedgerGroup:
    def __init__(self, root: Path, size: int = 3, store_type: str = "file", extra: list[str] | None = None) -> None:
        self.nodes = {f"n{i}": DLedgerNode(f"n{i}", free_port(), root / f"n{i}") for i in range(size)}
        self.peers = ";".join(f"{n.node_id}-{n.addr}" for n in self.nodes.values())
        self.store_type = store_type
        self.extra = extra or []

    def start(self, node_id: str | None = None, extra: list[str] | None = None) -> None:
        for node in self.nodes.values() if node_id is None else [self.nodes[node_id]]:
            node.start(self.peers, self.store_type, self.extra + (extra or []))

    def stop_all(self) -> None:
        for node in self.nodes.values():
            node.kill() if node.proc is not None and node.proc.poll() is None and _stopped(node) else node.stop()

    def leader(self) -> str | None:
        """The leader a majority of live nodes name (METADATA), or None."""
        votes: dict[str, int] = {}
        for node in self.nodes.values():
            if not node.alive or _stopped(node):
                continue
            try:
                meta = metadata(node, 1.0)
            except Exception:
                continue
            if meta.leader_id:
                votes[meta.leader_id] = votes.get(meta.leader_id, 0) + 1
        for leader, n in votes.items():
            if n >= len(self.nodes) // 2 + 1 and self.nodes[leader].alive and not _stopped(self.nodes[leader]):
                return leader
        return None

    def wait_leader(self, timeout_s: float, exclude: str | None = None) -> tuple[str, float]:
        """(leader, seconds waited); AssertionError with every node's log tail after ``timeout_s``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            leader = self.leader()
            if leader is not None and leader != exclude:
                return leader, time.monotonic() - started
            time.sleep(0.1)
        tails = "\n".join(f"--- {n.node_id}\n" + "".join(n.lines[-15:]) for n in self.nodes.values())
        raise AssertionError(f"no leader within {timeout_s}s\n{tails}")


def _stopped(node: DLedgerNode) -> bool:
    """Every thread of the node's process is stopped (state T)."""
    return node.proc is not None and process_stopped(node.proc.pid)


def process_stopped(pid: int) -> bool:
    """Every thread of process ``pid`` is stopped (state T): a SIGSTOP is not immediate."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        states = []
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
    except OSError:
        return False
    return bool(states) and all(st == "T" for st in states)


def dledger_call(node: DLedgerNode, code: DLedgerRequestCode, message: RequestOrResponse, answer: type[M],
                 timeout_s: float = 10.0) -> M:  # fmt: skip
    """One request to ``node``'s DLedger port; the remoting code must be 200 (DLedger's)."""
    request = RemotingCommand(code=int(code), language="JAVA", body=message.encode())
    response = run(_invoke(node.addr, request, timeout_s), timeout_s + 5)
    assert response.code == 200, (response.code, response.remark)
    return answer.decode(response.body)


async def _invoke(addr: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
    client = RemotingClient(connect_timeout_s=timeout_s)
    try:
        return await client.invoke(addr, request, timeout_s)
    finally:
        await client.close()


def metadata(node: DLedgerNode, timeout_s: float = 10.0) -> MetadataResponse:
    return dledger_call(node, DLedgerRequestCode.METADATA, MetadataRequest(group=GROUP, remote_id=node.node_id),
                        MetadataResponse, timeout_s)  # fmt: skip


def append(node: DLedgerNode, body: bytes) -> AppendEntryResponse:
    request = AppendEntryRequest(group=GROUP, remote_id=node.node_id, body=body)
    return dledger_call(node, DLedgerRequestCode.APPEND, request, AppendEntryResponse)
