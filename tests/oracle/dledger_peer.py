"""Apache RocketMQ 4.9.7 brokers in DLedger mode (``enableDLegerCommitLog=true``) as processes:
one node or a whole group, for the DLedger interop tests (issue 32).

``JavaDLedgerGroup(tmp, namesrv_addr, n)`` writes one broker.conf per node, as the
distribution's ``conf/dledger/broker-n<i>.conf`` does, on 127.0.0.1 with free ports:

=====================  ===============================================================
key                    value
=====================  ===============================================================
brokerClusterName      ``cluster`` (RaftCluster)
brokerName             ``group`` (RaftNode00); ``dLegerGroup`` the same
listenPort             a free port per node (``listen_ports`` to choose them)
dLegerPeers            ``n0-127.0.0.1:<p0>;n1-127.0.0.1:<p1>;...`` (``dledger_ports``)
dLegerSelfId           ``n<i>``
storePathRootDir       ``<tmp>/n<i>/store``; the log is ``<root>/dledger-n<i>/{data,index}``
storePathCommitLog     ``<root>/commitlog`` (JavaBroker needs it; unused in this mode)
brokerIP1              127.0.0.1
=====================  ===============================================================

then ``extra_conf`` (later lines win: ``mappedFileSizeCommitLog=1048576``,
``preferredLeaderId=n1``, ...). Nodes start one after the other (``JavaBroker`` waits for
each boot line); ``start=False`` leaves that to ``start_node``. Every node is stopped by
its pid: ``stop_node`` (SIGTERM: the shutdown hook persists the checkpoint), ``kill_node``
(SIGKILL), ``close()`` for all that run. ``wait_master(admin)`` waits until the name server
lists a master (brokerId 0) for the group: a 4.9 node registers as a slave while it is a
candidate, so a route alone does not mean a leader.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from pumice.client import AsyncMQAdmin
from pumice.dledger.dledger_entry import BODY_OFFSET, decode_header
from tests.helpers.ports import free_port
from tests.oracle.rocketmq_peer import JavaBroker

DEFAULT_GROUP = "RaftNode00"
DEFAULT_CLUSTER = "RaftCluster"


def node_id(i: int) -> str:
    return f"n{i}"


def first_data_file(dledger_dir: Path, limit: int = 1 << 20) -> bytes:
    """The first ``limit`` bytes of a node's first DLedger data file (``<dledger_dir>/data``)."""
    files = sorted((dledger_dir / "data").iterdir())
    assert files, f"no data file under {dledger_dir}"
    with files[0].open("rb") as f:
        return f.read(limit)


def ledger_end(data: bytes) -> tuple[int, int]:
    """(last index, end position) of the entries at the start of ``data`` (-1, 0: none)."""
    pos, last = 0, -1
    while pos + BODY_OFFSET <= len(data):
        magic, size, index, _, epos, *_ = decode_header(data, pos)
        if magic != 1 or size <= 0 or epos != pos:
            break
        last, pos = index, pos + size
    return last, pos


def dledger_broker_conf(
    *,
    listen_port: int,
    namesrv_addr: str,
    root: Path,
    group: str,
    cluster: str,
    peers: str,
    self_id: str,
    extra_conf: str = "",
) -> str:
    """One node's broker.conf (the distribution's broker-n<i>.conf on loopback)."""
    return (
        f"brokerClusterName={cluster}\n"
        f"brokerName={group}\n"
        f"listenPort={listen_port}\n"
        f"namesrvAddr={namesrv_addr}\n"
        "brokerIP1=127.0.0.1\n"
        f"storePathRootDir={root}\n"
        f"storePathCommitLog={root / 'commitlog'}\n"
        "enableDLegerCommitLog=true\n"
        f"dLegerGroup={group}\n"
        f"dLegerPeers={peers}\n"
        f"dLegerSelfId={self_id}\n"
        "sendMessageThreadPoolNums=16\n"
        f"{extra_conf}"
    )


class JavaDLedgerGroup:
    """``n`` RocketMQ 4.9.7 brokers forming one DLedger group (see the module docstring)."""

    def __init__(
        self,
        tmp: Path,
        namesrv_addr: str,
        n: int = 3,
        *,
        group: str = DEFAULT_GROUP,
        cluster: str = DEFAULT_CLUSTER,
        extra_conf: str = "",
        node_conf: dict[str, str] | None = None,
        listen_ports: list[int] | None = None,
        dledger_ports: list[int] | None = None,
        classpath: str | None = None,
        start: bool = True,
    ) -> None:
        self.tmp = tmp
        self.namesrv_addr = namesrv_addr
        self.group = group
        self.cluster = cluster
        self.ids = [node_id(i) for i in range(n)]
        self.listen_ports = listen_ports or [free_port() for _ in self.ids]
        self.dledger_ports = dledger_ports or [free_port() for _ in self.ids]
        self.peers = ";".join(f"{i}-127.0.0.1:{p}" for i, p in zip(self.ids, self.dledger_ports, strict=True))
        self.extra_conf = extra_conf
        self.node_conf = node_conf or {}  # more lines for one node, by id
        self.classpath = classpath
        self.nodes: dict[str, JavaBroker] = {}
        if start:
            try:
                for i in self.ids:
                    self.start_node(i)
            except BaseException:
                self.close()
                raise

    def root(self, self_id: str) -> Path:
        """The node's storePathRootDir."""
        return self.tmp / self_id / "store"

    def dledger_dir(self, self_id: str) -> Path:
        """``<root>/dledger-<id>``: data/, index/, checkpoint, currterm."""
        return self.root(self_id) / f"dledger-{self_id}"

    def addr(self, self_id: str) -> str:
        return f"127.0.0.1:{self.listen_ports[self.ids.index(self_id)]}"

    def conf(self, self_id: str) -> str:
        k = self.ids.index(self_id)
        return dledger_broker_conf(
            listen_port=self.listen_ports[k],
            namesrv_addr=self.namesrv_addr,
            root=self.root(self_id),
            group=self.group,
            cluster=self.cluster,
            peers=self.peers,
            self_id=self_id,
            extra_conf=self.extra_conf + self.node_conf.get(self_id, ""),
        )

    def start_node(self, self_id: str) -> JavaBroker:
        """Start (or restart) one node; its directory and store stay from any earlier run."""
        old = self.nodes.get(self_id)
        if old is not None and old.running():
            raise AssertionError(f"{self_id} is running (pid {old.pid})")
        broker = JavaBroker(self.tmp / self_id, self.conf(self_id), self.classpath)
        self.nodes[self_id] = broker
        return broker

    def stop_node(self, self_id: str, timeout_s: float = 60) -> int:
        return self.nodes[self_id].stop(timeout_s)

    def kill_node(self, self_id: str) -> None:
        self.nodes[self_id].kill()

    def running(self) -> list[str]:
        return [i for i, b in self.nodes.items() if b.running()]

    def describe(self) -> str:
        return "\n".join(b.describe() for b in self.nodes.values())

    def close(self) -> None:
        """Stop every running node by pid (SIGTERM, then SIGKILL past the time-out)."""
        errors: list[str] = []
        for self_id in reversed(list(self.nodes)):
            try:
                self.nodes[self_id].stop()
            except AssertionError as e:
                errors.append(str(e))
        if errors:
            raise AssertionError("\n".join(errors))

    async def wait_master(self, admin: AsyncMQAdmin, timeout_s: float = 60) -> str:
        """The address the name server lists as the group's master (brokerId 0), once it does
        (``admin``: a started AsyncMQAdmin on the group's name server)."""
        deadline = time.monotonic() + timeout_s
        last: object = None
        while time.monotonic() < deadline:
            try:
                data = (await admin.cluster_info()).broker_addr_table.get(self.group)
                if data is not None and data.master_addr:
                    return data.master_addr
                last = data
            except Exception as e:  # no cluster yet: try again
                last = e
            await asyncio.sleep(0.2)
        raise AssertionError(f"no master for {self.group} within {timeout_s}s (last: {last!r})\n{self.describe()}")
