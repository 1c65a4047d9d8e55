"""`pumice namesrv` and `pumice broker` as real processes on 127.0.0.1, and the raw requests
tests send them.

``start`` runs ``pumice <args>`` until it prints its boot line (its output kept as
``proc.output_lines``), ``stop`` ends it with SIGTERM and checks it exits 0. ``Cluster`` is a
name server and a broker on free ports (``RetentionCluster``: with retention a test can set
off), ``running_cluster`` a ``cluster`` fixture of one, ``running_namesrv`` a name server alone,
``HACluster`` a name server, a master and a slave. ``send``, ``pull`` and ``register`` build
SEND_MESSAGE_V2, PULL_MESSAGE and REGISTER_BROKER commands; ``run`` runs a coroutine with a
60 s bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest

from pumice.client import MQAdmin
from pumice.common.acl_signer import SessionCredentials
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually

T = TypeVar("T")


def start(
    args: list[str], marker: str, env: dict[str, str] | None = None, prefix: Sequence[str] = ()
) -> subprocess.Popen[str]:
    """``pumice <args>`` until it prints ``marker``; ``env`` is added to this process's environment;
    ``prefix`` runs it through a command that execs it (``ip netns exec <ns>``: the pid stays its own)."""
    proc = subprocess.Popen([*prefix, sys.executable, "-m", "pumice.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **env} if env else None)  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            # keep reading: a process whose log fills the pipe (64 KiB) would block on its next
            # line; its output stays readable as proc.output_lines
            proc.output_lines = lines  # type: ignore[attr-defined]
            threading.Thread(target=_drain, args=(proc, lines), daemon=True).start()
            return proc
    proc.kill()
    raise AssertionError(f"{args[0]} did not start: {''.join(lines)}")


def _drain(proc: subprocess.Popen[str], lines: list[str]) -> None:
    assert proc.stdout is not None
    lines.extend(proc.stdout)


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, and the exit must be 0 within 20 s (killed otherwise)."""
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


class Cluster:
    """A `pumice namesrv` and `pumice broker` pair on loopback; ``extra_conf`` ends broker.conf,
    ``ns_conf`` namesrv.conf."""

    def __init__(self, tmp: Path, extra_conf: str = "", ns_conf: str = "") -> None:
        self.tmp = tmp
        self.ns_port = free_port()
        self.broker_port = free_port()
        (tmp / "namesrv.conf").write_text(
            f"listenPort={self.ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp / 'kv.json'}\n{ns_conf}"
        )
        (tmp / "broker.conf").write_text(
            f"brokerClusterName=TestCluster\nbrokerName=broker-t\nlistenPort={self.broker_port}\n"
            f"listenHost=127.0.0.1\nbrokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{self.ns_port}\n"
            f"storePathRootDir={tmp / 'store'}\nmapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n"
            "preallocateCommitLog=false\nprefaultCommitLog=false\nfastListenPortEnable=false\n" + extra_conf
        )
        self.namesrv = start(["namesrv", "-c", str(tmp / "namesrv.conf")], "boot success")
        try:
            self.broker = self.start_broker()
        except BaseException:
            stop(self.namesrv)
            raise

    def start_broker(self) -> subprocess.Popen[str]:
        return start(["broker", "-c", str(self.tmp / "broker.conf")], "boot success")

    @property
    def ns(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def br(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def close(self) -> None:
        try:
            if self.broker.poll() is None:
                stop(self.broker)
        finally:  # the name server stops even when the broker's stop fails its check
            if self.namesrv.poll() is None:
                stop(self.namesrv)


class RetentionCluster(Cluster):
    """Retention a test can set off: 4 KiB CommitLog segments, 10-entry ConsumeQueue files,
    ``fileReservedTime=0`` (whole hours, as RocketMQ parses it: every file but the last has
    expired), ``deleteWhen`` at no hour (so only the manual trigger deletes) and a clean-up
    pass every 100 ms from start (``cleanResourceInitialDelay``, RocketMQ's fixed 60 s)."""

    def start_broker(self):
        conf = self.tmp / "broker.conf"
        if "fileReservedTime" not in conf.read_text():
            with conf.open("a") as f:
                f.write("mapedFileSizeCommitLog=4096\nmapedFileSizeConsumeQueue=200\nfileReservedTime=0\n"
                        "deleteWhen=99\ndiskMaxUsedSpaceRatio=95\ncleanResourceInterval=100\n"
                        "cleanResourceInitialDelay=0\ndeleteCommitLogFilesInterval=0\n")  # fmt: skip
        return super().start_broker()


def send(topic: str, body: bytes, key: str, queue_id: int = 0) -> RemotingCommand:
    """A SEND_MESSAGE_V2 of producer group PG, tag TagA and KEYS ``key``; the topic is made from TBW102."""
    fields = {"a": "PG", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": 1, "h": 0,
              "i": f"TAGS\x01TagA\x02KEYS\x01{key}"}  # fmt: skip
    return RemotingCommand(code=310, ext_fields=fields, body=body)


def pull(topic: str, offset: int, queue_id: int = 0, sys_flag: int = 2, suspend_ms: int = 3000) -> RemotingCommand:
    """A PULL_MESSAGE carrying its subscription ("*", sysFlag 4), as the C++ and Python clients send it."""
    return RemotingCommand(code=11, ext_fields={"consumerGroup": "CG", "topic": topic, "queueId": queue_id,
                                                "queueOffset": offset, "maxMsgNums": 32, "sysFlag": sys_flag | 4,
                                                "subscription": "*", "commitOffset": 0,
                                                "suspendTimeoutMillis": suspend_ms, "subVersion": 0})  # fmt: skip


def run(coro: Coroutine[Any, Any, T], timeout_s: float = 60) -> T:
    """``asyncio.run`` of ``coro``, cancelled (TimeoutError) after ``timeout_s``."""
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


@contextlib.contextmanager
def running_namesrv(tmp_path: Path, extra_conf: str = "", host: str = "127.0.0.1") -> Iterator[str]:
    """`pumice namesrv` on a free port of ``host`` (loopback); yields "host:port", stops it with SIGTERM."""
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={port}\nlistenHost={host}\nkvConfigPath={tmp_path / 'kvConfig.json'}\n{extra_conf}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", "namesrv", "-c", str(conf)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "boot success" in line, line
        yield f"{host}:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(10) == 0, "the name server did not stop cleanly"
        finally:
            if proc.poll() is None:
                proc.kill()


def running_cluster(name: str, extra_conf: str = "", scope: str = "module") -> Any:
    """A ``cluster`` fixture of that scope: a running Cluster whose
    broker.conf ends with ``extra_conf``, stopped after."""

    @pytest.fixture(scope=scope, name="cluster")  # type: ignore[call-overload]
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
        c = Cluster(tmp_path_factory.mktemp(name), extra_conf)
        try:
            yield c
        finally:
            c.close()

    return fixture


COMMIT_LOG_FILE = "commitlog/00000000000000000000"


class HACluster:
    """A name server, a master and (on demand) a slave of broker ``broker-ha``."""

    def __init__(self, tmp: Path, role: str = "ASYNC_MASTER", extra_conf: str = "", ns_conf: str = "") -> None:
        self.tmp = tmp
        self.ns_port = free_port()
        self.master_port = free_port()
        self.slave_port = free_port()
        (tmp / "namesrv.conf").write_text(
            f"listenPort={self.ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp / 'kv.json'}\n{ns_conf}"
        )
        common = (
            "brokerClusterName=HACluster\nbrokerName=broker-ha\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\n"
            f"namesrvAddr=127.0.0.1:{self.ns_port}\nmapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n"
            "preallocateCommitLog=false\nfastListenPortEnable=false\nslaveReadEnable=true\n"
            # 0 % of memory: any consumer counts as slow, so the master always suggests the slave
            "accessMessageInMemoryMaxRatio=0\nsyncFlushTimeout=2000\n" + extra_conf
        )
        (tmp / "master.conf").write_text(
            f"{common}brokerId=0\nbrokerRole={role}\nlistenPort={self.master_port}\nstorePathRootDir={tmp / 'm'}\n"
        )
        (tmp / "slave.conf").write_text(
            f"{common}brokerId=1\nbrokerRole=SLAVE\nlistenPort={self.slave_port}\nstorePathRootDir={tmp / 's'}\n"
        )
        self.namesrv = start(["namesrv", "-c", str(tmp / "namesrv.conf")], "boot success")
        self.master: subprocess.Popen[str] | None = None
        self.slave: subprocess.Popen[str] | None = None
        try:
            self.master = start(["broker", "-c", str(tmp / "master.conf")], "boot success")
        except BaseException:
            self.close()
            raise

    def start_slave(self) -> None:
        self.slave = start(["broker", "-c", str(self.tmp / "slave.conf")], "boot success")

    @property
    def ns(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def m(self) -> str:
        return f"127.0.0.1:{self.master_port}"

    @property
    def s(self) -> str:
        return f"127.0.0.1:{self.slave_port}"

    def close(self) -> None:
        for p in (self.slave, self.master, self.namesrv):
            if p is not None and p.poll() is None:
                stop(p)

    def wait_replicated(self, topic: str | None = None) -> None:
        """Until the slave's CommitLog equals the master's and (SlaveSynchronize) its
        topics.json holds ``topic``."""
        eventually(lambda: same_commit_log(self), 20, "the slave's CommitLog equals the master's")
        if topic is not None:
            topics = self.tmp / "s" / "config" / "topics.json"
            eventually(lambda: topic in json_file(topics).get("topicConfigTable", {}), 20, f"{topic} on the slave")

    def slave_gets(self) -> int:
        """Messages the slave has returned to pulls (msgGetTotalTodayNow)."""
        with MQAdmin(self.ns) as admin:
            return int(admin.broker_status(self.s)["msgGetTotalTodayNow"])


def same_commit_log(c: HACluster) -> bool:
    """The slave's first CommitLog file holds the master's bytes (the zeros after them aside)."""
    a, b = c.tmp / "m" / COMMIT_LOG_FILE, c.tmp / "s" / COMMIT_LOG_FILE
    if not b.exists():
        return False
    # ASYNC_FLUSH: the master's pages may not be on disk yet, but a read sees the page cache.
    return a.read_bytes().rstrip(b"\0") == b.read_bytes().rstrip(b"\0") != b""


def json_file(path: Path) -> dict:
    """A broker's JSON config file, or {} while it does not exist."""
    return orjson.loads(path.read_bytes()) if path.exists() else {}


def register_body(topics: dict[str, int], counter: int = 1) -> bytes:
    """A REGISTER_BROKER body: ``topics`` (name -> queues) at data version ``counter``."""
    table = {
        t: {"topicName": t, "readQueueNums": n, "writeQueueNums": n, "perm": 6, "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0, "order": False}
        for t, n in topics.items()
    }  # fmt: skip
    wrapper = {"topicConfigTable": table, "dataVersion": {"timestamp": 1700000000000, "counter": counter}}
    return orjson.dumps({"topicConfigSerializeWrapper": wrapper, "filterServerList": []})


def register(name: str, addr: str, topics: dict[str, int], broker_id: int = 0, counter: int = 1) -> RemotingCommand:
    """A REGISTER_BROKER of ``name`` at ``addr`` (cluster DefaultCluster; its HA address: 10911 read as 10912)."""
    return RemotingCommand(
        code=RequestCode.REGISTER_BROKER,
        ext_fields={"brokerName": name, "brokerAddr": addr, "clusterName": "DefaultCluster", "brokerId": broker_id,
                    "haServerAddr": addr.replace("10911", "10912"), "compressed": "false"},
        body=register_body(topics, counter),
    )  # fmt: skip


def call(addr: str, keys: SessionCredentials | None, *requests: RemotingCommand) -> list[RemotingCommand]:
    """Each request (signed with ``keys`` when given), in order, on one connection."""

    async def main() -> list[RemotingCommand]:
        client = RemotingClient()
        if keys is not None:
            client.rpc_hook = keys.sign_request
        try:
            return [await client.invoke(addr, r, timeout_s=10) for r in requests]
        finally:
            await client.close()

    return run(main())


def req(code: int, body: bytes = b"", **fields: object) -> RemotingCommand:
    """A raw request: ``code``, ``fields`` as its ext fields, ``body``."""
    return RemotingCommand(code=code, ext_fields=dict(fields), body=body)
