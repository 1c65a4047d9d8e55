"""Mixed DLedger groups of real brokers (issue 32, "Mixed groups"): Apache RocketMQ 4.9.7
brokers and `pumice broker` processes of one brokerName and dLegerGroup, one dLegerPeers list,
registered with one (RocketMQ) name server, with the official Java client 4.9.8 sending and
consuming through a SIGKILL of the leader.

==========================  =========  ========  =================  ======================
case                        RocketMQ   Pumice    preferredLeaderId  after the kill
==========================  =========  ========  =================  ======================
``pumice_leads``            n0, n1     n2        n2 (Pumice)        RocketMQ leads, Pumice
                                                                    rejoins as a follower
``rocketmq_leads``          n0         n1, n2    n0 (RocketMQ)      Pumice leads, RocketMQ
                                                                    rejoins as a follower
==========================  =========  ========  =================  ======================

Each case: the preferred node becomes the master the name server lists; a push consumer and a
sync producer (Java) run; the leader is SIGKILLed once 15 sends are SEND_OK; the producer goes
on through the new leader; the killed node is started again. Every SEND_OK'd message must be
consumed at least once, and the three nodes' data files must end up byte-identical up to the
common ledger end (every entry committed: the producer has stopped and all three are up).
"""

from __future__ import annotations

import asyncio
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client import AsyncMQAdmin
from pumice.dledger.dledger_entry import BODY_OFFSET, decode_header
from tests.helpers.clusters import start, stop
from tests.helpers.java_driver import JavaDriver
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually
from tests.oracle.dledger_peer import JavaDLedgerGroup, first_data_file, ledger_end
from tests.oracle.rocketmq_peer import JavaBroker, JavaNamesrv

TOPIC = "DLedgerMixedBrokers"
KILL_AFTER = 15  # SEND_OKs before the leader dies
COUNT = 130  # sends in all, 200 ms apart: the failover happens well inside them
# a 4.9 follower learns the master's address (for SlaveSynchronize) only from its next
# registration's answer: every 10 s (4.9's least) rather than 30 s
FAST_REGISTER = "registerNameServerPeriod=10000\n"


class PumiceNode:
    """A `pumice broker` node of the group, with JavaBroker's interface (pid, addr, kill, stop)."""

    def __init__(self, conf: Path, port: int) -> None:
        self.proc: subprocess.Popen[str] = start(["broker", "-c", str(conf)], "boot success")
        self.pid = self.proc.pid
        self.addr = f"127.0.0.1:{port}"

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout_s: float = 60) -> int:
        if self.proc.poll() is None:
            stop(self.proc)
        return self.proc.returncode

    def describe(self) -> str:
        return "--- pumice broker:\n" + "".join(getattr(self.proc, "output_lines", [])[-40:])


class MixedGroup(JavaDLedgerGroup):
    """JavaDLedgerGroup whose ``pumice`` ids run `pumice broker` with the same broker.conf."""

    def __init__(self, tmp: Path, namesrv_addr: str, pumice: set[str], **kw: object) -> None:
        self.pumice = pumice
        super().__init__(tmp, namesrv_addr, 3, start=False, **kw)  # type: ignore[arg-type]

    def start_node(self, self_id: str) -> JavaBroker:
        if self_id not in self.pumice:
            return super().start_node(self_id)
        old = self.nodes.get(self_id)
        assert old is None or not old.running(), f"{self_id} is running"
        conf = self.tmp / f"{self_id}.conf"
        # with its fast port (listenPort-2) as the RocketMQ nodes: a 4.9 follower's
        # SlaveSynchronize calls the master there (BrokerOuterAPI's VIP channel)
        conf.write_text(self.conf(self_id))
        node = PumiceNode(conf, self.listen_ports[self.ids.index(self_id)])
        self.nodes[self_id] = node  # type: ignore[assignment]
        return node  # type: ignore[return-value]

    def id_of(self, addr: str) -> str:
        return next(i for i in self.ids if self.addr(i) == addr)

    def master(self, timeout_s: float = 60, not_: str | None = None) -> str:
        """The node id the name server lists as master (other than ``not_``)."""

        async def ask() -> str:
            async with AsyncMQAdmin(self.namesrv_addr) as admin:
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline:
                    addr = await self.wait_master(admin, max(1.0, deadline - time.monotonic()))
                    if addr != (not_ and self.addr(not_)):
                        return self.id_of(addr)
                    await asyncio.sleep(0.2)
            raise AssertionError(f"no master other than {not_} within {timeout_s}s\n{self.describe()}")

        return asyncio.run(ask())

    def create_topic(self, master: str) -> None:
        """The topic on the master (a follower refuses it), then on each follower by its copy
        of the leader's topics (SlaveSynchronize, every 10 s), so any node can lead with it."""

        async def create() -> None:
            async with AsyncMQAdmin(self.namesrv_addr) as admin:
                await admin.create_topic(TOPIC, broker_addr=self.addr(master), read_queue_nums=4, write_queue_nums=4)
                deadline = time.monotonic() + 45
                for i in self.ids:
                    while TOPIC not in (await admin.api.get_all_topic_config(self.addr(i)))["topicConfigTable"]:
                        assert time.monotonic() < deadline, f"{i} has no {TOPIC} after 45 s"
                        await asyncio.sleep(0.5)

        asyncio.run(create())


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory, peer_classpath: str) -> Iterator[JavaNamesrv]:
    ns = JavaNamesrv(tmp_path_factory.mktemp("namesrv"), free_port(), classpath=peer_classpath)
    try:
        yield ns
    finally:
        ns.stop()


def _same_logs(group: MixedGroup) -> tuple[int, bytes] | None:
    """(last index, the log) when the three data files hold the same entries, byte for byte."""
    datas = [first_data_file(group.dledger_dir(i)) for i in group.ids]
    ends = {ledger_end(d) for d in datas}
    if len(ends) != 1:
        return None
    (last, end) = ends.pop()
    return (last, datas[0][:end]) if last >= 0 and len({d[:end] for d in datas}) == 1 else None


def _records(log: bytes) -> dict[int, bytes]:
    """{CommitLog physical offset (entry position + 48): the entry's body} of a data file's entries."""
    out, pos = {}, 0
    while pos < len(log):
        size = decode_header(log, pos)[1]
        out[pos + BODY_OFFSET] = log[pos + BODY_OFFSET : pos + size]
        pos += size
    return out


@pytest.mark.parametrize(
    ("pumice", "preferred"),
    [({"n2"}, "n2"), ({"n1", "n2"}, "n0")],
    ids=["pumice_leads", "rocketmq_leads"],
)
def test_java_clients_through_a_leader_kill(
    tmp_path: Path, namesrv: JavaNamesrv, peer_classpath: str, java_classpath: str, pumice: set[str], preferred: str
) -> None:
    group = MixedGroup(tmp_path, namesrv.addr, pumice, group=f"Mixed{preferred}{len(pumice)}",
                       extra_conf=f"mappedFileSizeCommitLog=1048576\npreferredLeaderId={preferred}\n{FAST_REGISTER}",
                       classpath=peer_classpath)  # fmt: skip
    drivers: list[JavaDriver] = []
    try:
        for i in group.ids:
            group.start_node(i)
        assert eventually(lambda: group.master(5) == preferred, 60, f"{preferred} (preferred) leads", every=0.5)
        group.create_topic(preferred)
        work = tmp_path / "java"
        consumer = JavaDriver(java_classpath, work, "push", {"namesrv": namesrv.addr, "topic": TOPIC,
                              "group": f"C{group.group}", "duration": 170}, name="push")  # fmt: skip
        drivers.append(consumer)
        consumer.wait_event("started", 30)
        producer = JavaDriver(java_classpath, work, "produce", {"namesrv": namesrv.addr, "topic": TOPIC,
                              "group": f"P{group.group}", "count": COUNT, "label": "m", "interval-ms": 200,
                              "timeout-ms": 3000}, name="produce")  # fmt: skip
        drivers.append(producer)
        producer.wait_for(lambda d: len(d.of("sent")) >= KILL_AFTER, 60, f"{KILL_AFTER} SEND_OK")
        group.kill_node(preferred)
        killed_at, sent_before = time.monotonic(), len(producer.of("sent"))
        new = group.master(60, not_=preferred)
        print(f"{preferred} killed; {new} is master {time.monotonic() - killed_at:.1f} s later")
        events = producer.wait(120)
        sent = [e for e in events if e["event"] == "sent"]
        assert all(e["status"] == "SEND_OK" for e in sent), [e for e in sent if e["status"] != "SEND_OK"]
        assert len(sent) - sent_before >= 20, f"only {len(sent) - sent_before} SEND_OK after the kill"
        group.start_node(preferred)  # it rejoins (and, being preferred, may take leadership back)

        want = {f"m-{e['i']}" for e in sent}
        consumer.wait_for(lambda d: want <= {m["bodyText"] for m in d.received()}, 90, "every SEND_OK consumed")
        last, log = eventually(lambda: _same_logs(group), 60, "the three data files byte-identical")
        # every SEND_OK's record is in the common log, at the offset its offsetMsgId names
        # (ip, port, then the 8-byte physical offset)
        records = _records(log)
        for e in sent:
            body = f"m-{e['i']}".encode()
            record = records.get(int(e["offsetMsgId"][16:], 16), b"")
            assert struct.pack(">i", len(body)) + body in record, (e, record[:200])
        print(f"{len(sent)} SEND_OK of {COUNT}; logs identical up to index {last} ({len(log)} bytes)")
    finally:
        for d in drivers:
            d.kill()
        group.close()
