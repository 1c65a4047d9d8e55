"""Replication across implementations (issue 17): a `pumice broker` slave of Apache RocketMQ
4.9.7's master, and a RocketMQ slave of a Pumice master, over 4.9's HA wire protocol.

For each direction, with the master ASYNC_MASTER (with ``PUMICE_ORACLE_ALL=1``, for .ci/run's time):

* the slave's CommitLog is byte-identical to the master's over the whole written range
  (1 MiB files on both sides, so the copy crosses a file boundary: 1 224 176 bytes of messages from the
  official Java client 4.9.8, bodies from a few bytes to 20 000, compressed when over 4 KiB);
* the slave serves pulls: Pumice's pull consumer, sent to broker id 1 through the route, reads
  every acknowledged message back from the slave (same queue offsets, msgIds and bodies), and
  the slave's msgGetTotalTodayNow shows it served them.

With the master SYNC_MASTER: a send before any slave is connected answers SLAVE_NOT_AVAILABLE;
once the slave is connected, the Java client's sync sends answer SEND_OK, and the moment each
SEND_OK arrives the slave's CommitLog file already holds that message's record (at the offset
its offsetMsgId encodes), byte for byte as the master wrote it; and with the slave stopped
(SIGSTOP: still connected, acknowledging nothing) a send answers FLUSH_SLAVE_TIMEOUT.

The name server is the master's implementation. The ASYNC slaves are given haMasterAddress; the
SYNC slaves learn it from the name server (the haServerAddr the master registered). Every
process is stopped by its pid in a ``finally``; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pumice.client import AsyncPullConsumer, MessageQueue, MQAdmin, MQClientError, PullStatus
from pumice.common.message_decoder import decode_message_id
from tests.helpers.clients import create_topic
from tests.helpers.clusters import start, stop
from tests.helpers.java_driver import JavaDriver, body, sha256
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually
from tests.oracle.budget import ALL_ONLY
from tests.oracle.rocketmq_peer import JavaBroker, JavaNamesrv

CLUSTER = "HAAcross"
BROKER = "broker-ha"
TOPIC = "HAAcrossTopic"
QUEUES = 2
FILE = 1 << 20  # CommitLog file size on both sides
STORE_CONF = "flushDiskType=ASYNC_FLUSH\nmappedFileSizeCommitLog=1048576\n"  # 4.9.7 ignores "maped"
PUMICE_CONF = "listenHost=127.0.0.1\nfastListenPortEnable=true\npreallocateCommitLog=false\nprefaultCommitLog=false\n"
# (label, count, body size): 0 is "label-i"; 20 000 is compressed by the client (over 4 KiB)
FIRST = [("s", 60, 0)]
REST = [("m", 280, 4000), ("b", 20, 20000), ("t", 40, 300)]


def run(coro: Any, timeout_s: float = 60) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


class Pair:
    """A name server and master of ``master`` ("rocketmq" or "pumice") with ``role``, and (on
    ``start_slave``) a slave of the other implementation; the same brokerName."""

    def __init__(self, tmp: Path, master: str, role: str, peer_cp: str) -> None:
        self.tmp, self.master_kind, self.peer_cp = tmp, master, peer_cp
        self.slave_kind = "pumice" if master == "rocketmq" else "rocketmq"
        self.procs: list[tuple[str, Any]] = []
        self.ns_port, self.master_port, self.slave_port = free_port(), free_port(), free_port()
        try:
            if master == "rocketmq":
                self.procs.append(("namesrv", JavaNamesrv(tmp / "namesrv", self.ns_port, classpath=peer_cp)))
            else:
                conf = tmp / "namesrv.conf"
                conf.write_text(f"listenPort={self.ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp / 'kv.json'}\n")
                self.procs.append(("namesrv", start(["namesrv", "-c", str(conf)], "boot success")))
            self.master = self._broker("master", master, f"brokerId=0\nbrokerRole={role}\n", self.master_port)
        except BaseException:
            self.close()
            raise

    def _broker(self, name: str, kind: str, role_conf: str, port: int) -> Any:
        store = self.tmp / name / "store"
        conf = (
            f"brokerClusterName={CLUSTER}\nbrokerName={BROKER}\n{role_conf}listenPort={port}\n"
            f"namesrvAddr={self.ns}\nbrokerIP1=127.0.0.1\nstorePathRootDir={store}\n"
            f"storePathCommitLog={store / 'commitlog'}\n{STORE_CONF}"
        )
        if kind == "rocketmq":
            proc: Any = JavaBroker(self.tmp / name, conf, classpath=self.peer_cp)
        else:
            (self.tmp / name).mkdir(parents=True, exist_ok=True)
            (self.tmp / name / "broker.conf").write_text(conf + PUMICE_CONF)
            proc = start(["broker", "-c", str(self.tmp / name / "broker.conf")], "boot success")
        self.procs.append((name, proc))
        return proc

    def start_slave(self, fixed_ha_address: bool) -> None:
        """Given haMasterAddress (the master's listenPort + 1), or left to learn it from the name
        server's answer to its registration (the master's haServerAddr)."""
        ha = "brokerId=1\nbrokerRole=SLAVE\n"
        if fixed_ha_address:
            ha += f"haMasterAddress=127.0.0.1:{self.master_port + 1}\n"
        self.slave = self._broker("slave", self.slave_kind, ha, self.slave_port)

    @property
    def ns(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def addr(self, name: str) -> str:
        return f"127.0.0.1:{self.master_port if name == 'master' else self.slave_port}"

    def commit_log(self, name: str, start_at: int, end: int) -> bytes:
        """``name``'s CommitLog bytes [start_at, end) read from its files (missing bytes: zeros)."""
        out = b""
        while (pos := start_at + len(out)) < end:
            path = self.tmp / name / "store" / "commitlog" / f"{pos - pos % FILE:020d}"
            n = min(end - pos, FILE - pos % FILE)
            out += (path.read_bytes()[pos % FILE : pos % FILE + n] if path.exists() else b"").ljust(n, b"\0")
        return out

    def runtime(self, name: str, key: str) -> int:
        """GET_BROKER_RUNTIME_INFO's ``key``. RocketMQ answers SYSTEM_ERROR (NoSuchElementException
        in StoreStatsService.getPutTps) until its stats service has taken its first sample."""

        def ask() -> int | None:
            try:
                with MQAdmin(self.ns) as admin:
                    return int(admin.broker_status(self.addr(name))[key])
            except MQClientError:
                return None

        return eventually(lambda: (v := ask()) is not None and (v,), 15, f"{name}'s runtime info")[0]

    def describe(self) -> str:
        out = []
        for name, p in self.procs:
            if isinstance(p, JavaNamesrv | JavaBroker):
                out.append(f"=== {name} (rocketmq)\n{p.describe()}")
            else:
                out.append(f"=== {name} (pumice)\n{''.join(getattr(p, 'output_lines', []))[-4000:]}")
        return "\n".join(out)

    def close(self) -> None:
        for _, p in reversed(self.procs):
            try:
                if isinstance(p, JavaNamesrv | JavaBroker):
                    p.stop(60)
                elif p.poll() is None:
                    stop(p)
            except BaseException:
                p.kill()  # by pid (JavaBroker.kill waits for the exit)
                if not isinstance(p, JavaNamesrv | JavaBroker):
                    p.wait(10)


def produce(cp: str, pair: Pair, label: str, count: int, size: int, **args: Any) -> list[dict[str, Any]]:
    d = JavaDriver(cp, pair.tmp / "java", "produce", {"namesrv": pair.ns, "topic": TOPIC, "count": count,
                   "label": label, "size": size, "keys": label, **args}, name=f"p-{label}")  # fmt: skip
    try:
        sent = [e for e in d.wait(120) if e["event"] == "sent"]
    finally:
        d.kill()
    assert len(sent) == count, d.describe()
    return [e | {"label": label, "size": size} for e in sent]


def wait_replicated(pair: Pair) -> int:
    """Until the slave's CommitLog max offset is the master's; that offset."""

    def same() -> int | None:
        m = pair.runtime("master", "commitLogMaxOffset")
        return m if m > 0 and pair.runtime("slave", "commitLogMaxOffset") == m else None

    return eventually(same, 60, "the slave's commitLogMaxOffset at the master's")


async def pull_from_slave(pair: Pair, sent: list[dict[str, Any]]) -> dict[tuple[int, int], tuple[str, str]]:
    """Every queue up to its last acknowledged offset, each pull sent to broker id 1 (the slave):
    (queue id, queue offset) -> (msgId, body sha256)."""
    ends = {q: 1 + max((e["queueOffset"] for e in sent if e["queueId"] == q), default=-1) for q in range(QUEUES)}
    got: dict[tuple[int, int], tuple[str, str]] = {}
    async with AsyncPullConsumer("HAAcrossReader", pair.ns) as pc:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 40  # the slave copies the topic's config from the master (SlaveSynchronize)
        for q, end in ends.items():
            mq, offset = MessageQueue(TOPIC, BROKER, q), 0
            while offset < end:
                pc.instance.pull_from_which_node[(pc.group, mq)] = 1
                try:
                    res = await pc.pull(mq, "*", offset, 32)
                except MQClientError:
                    res = None
                if res is None or res.status is not PullStatus.FOUND:
                    assert loop.time() < deadline, f"queue {q} offset {offset}: {res and res.status}"
                    await asyncio.sleep(0.5)
                    continue
                got |= {(m.queue_id, m.queue_offset): (m.msg_id, sha256(m.body)) for m in res.msgs}
                offset = res.next_begin_offset
    return got


def check_same_commit_log(pair: Pair) -> int:
    end = wait_replicated(pair)
    assert end > FILE, f"only {end} bytes written: the copy should cross a file boundary"
    master, slave = pair.commit_log("master", 0, end), pair.commit_log("slave", 0, end)
    if master != slave:
        first = next(i for i in range(end) if master[i] != slave[i])
        pytest.fail(f"CommitLogs differ from byte {first} of {end}: {master[first:first + 32].hex()} (master) "
                    f"{slave[first:first + 32].hex()} (slave)")  # fmt: skip
    return end


DIRECTIONS = [
    pytest.param("rocketmq", id="rocketmq-master-pumice-slave"),
    pytest.param("pumice", id="pumice-master-rocketmq-slave"),
]
# the ASYNC_MASTER pairs run with PUMICE_ORACLE_ALL=1 (.ci/run's time budget): the SYNC_MASTER
# pairs replicate both ways by default, each record checked on the slave byte for byte


@ALL_ONLY
@pytest.mark.timeout(300)
@pytest.mark.parametrize("master", DIRECTIONS)
def test_async_master_slave_copies_the_commit_log_and_serves_reads(
    master: str, tmp_path: Path, peer_classpath: str, java_classpath: str
) -> None:
    pair = Pair(tmp_path, master, "ASYNC_MASTER", peer_classpath)
    try:
        pair.start_slave(fixed_ha_address=True)
        run(create_topic(SimpleNamespace(ns=pair.ns), TOPIC, QUEUES, CLUSTER))
        sent = [e for label, n, size in FIRST for e in produce(java_classpath, pair, label, n, size)]
        wait_replicated(pair)  # the slave is connected and caught up before the bulk of the data
        sent += [e for label, n, size in REST for e in produce(java_classpath, pair, label, n, size)]
        assert {e["status"] for e in sent} == {"SEND_OK"}
        end = check_same_commit_log(pair)

        before = pair.runtime("slave", "msgGetTotalTodayNow")
        got = run(pull_from_slave(pair, sent), 90)
        want = {(e["queueId"], e["queueOffset"]): (e["msgId"], sha256(body(e["label"], e["i"], e["size"])))
                for e in sent}  # fmt: skip
        assert got == want
        served = pair.runtime("slave", "msgGetTotalTodayNow") - before
        assert served >= len(sent), f"the slave served {served} of {len(sent)} messages"
        print(f"{master} master: {end} CommitLog bytes identical on the slave; {len(got)} messages read from it")
    except BaseException as e:
        raise AssertionError(f"{e}\n{pair.describe()}"[:30000]) from e
    finally:
        pair.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("master", DIRECTIONS)
def test_sync_master_acknowledges_once_the_slave_has_the_message(
    master: str, tmp_path: Path, peer_classpath: str, java_classpath: str
) -> None:
    pair = Pair(tmp_path, master, "SYNC_MASTER", peer_classpath)
    try:
        run(create_topic(SimpleNamespace(ns=pair.ns), TOPIC, QUEUES, CLUSTER))
        alone = produce(java_classpath, pair, "alone", 1, 0)
        assert alone[0]["status"] == "SLAVE_NOT_AVAILABLE", alone  # stored, not replicated
        pair.start_slave(fixed_ha_address=False)
        statuses: list[str] = []

        def connected() -> bool:
            statuses.append(produce(java_classpath, pair, f"c{len(statuses)}", 1, 0)[0]["status"])
            return statuses[-1] == "SEND_OK"

        eventually(connected, 60, "SEND_OK once the slave is connected")
        # until the slave's HA client connects; then, until its first report (RocketMQ's: 5 s after
        # connecting) a send waits for the slave, for at most syncFlushTimeout (5 s)
        assert set(statuses[:-1]) <= {"SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT"}, statuses

        count, checked = 12, {}

        def check(d: JavaDriver) -> bool:  # on each "sent" line, as it arrives
            for e in d.of("sent"):
                if e["i"] not in checked:
                    off = decode_message_id(e["offsetMsgId"])[1]
                    size = int.from_bytes(pair.commit_log("master", off, off + 4), "big")
                    rec = pair.commit_log("master", off, off + size)
                    checked[e["i"]] = (e["status"], size > 0 and pair.commit_log("slave", off, off + size) == rec)
            return len(checked) == count

        d = JavaDriver(java_classpath, pair.tmp / "java", "produce", {"namesrv": pair.ns, "topic": TOPIC,
                       "count": count, "label": "sync", "size": 6000, "interval-ms": 300}, name="p-sync")  # fmt: skip
        try:
            d.wait_for(check, 60, f"{count} sends")
            d.wait(30)
        finally:
            d.kill()
        assert checked == {i: ("SEND_OK", True) for i in range(count)}
        os.kill(pair.slave.pid, signal.SIGSTOP)  # connected, but it acknowledges nothing
        try:
            held = produce(java_classpath, pair, "held", 1, 0, **{"timeout-ms": 15000})[0]
        finally:
            os.kill(pair.slave.pid, signal.SIGCONT)
        assert held["status"] == "FLUSH_SLAVE_TIMEOUT", held
        end = wait_replicated(pair)  # the held message too, once the slave runs again
        assert pair.commit_log("master", 0, end) == pair.commit_log("slave", 0, end)
        print(f"{master} SYNC_MASTER: {statuses} before SEND_OK; {count} sends held by the slave when acknowledged")
    except BaseException as e:
        raise AssertionError(f"{e}\n{pair.describe()}"[:30000]) from e
    finally:
        pair.close()
