"""Timer messages (RIP-43) on RocketMQ 5.3.3 and on Pumice, the same scenarios in one module, and
5.3.3's timer files read by Pumice's readers.

Each server (``server`` fixture: a `pumice broker` and RocketMQ 5.3.3 with its proxy, each once per
module, with ``timerPrecisionMs=100`` and ``timerMaxDelaySec=60``):

- the 5.5.0 remoting Java client's ``setDeliverTimeMs`` (tests/java5's Timer5): three messages come
  back on their queue in order of due time, never early and at most BOUND_MS late (the lateness is
  printed: 5.3.3's is the bound's reference), with their message ids; one 100 s ahead is refused
  MESSAGE_ILLEGAL;
- a past TIMER_DELIVER_MS is stored at once; TIMER_DELAY_SEC past the max is refused with 5.3.3's
  remark.

``test_pumice_reads_the_timer_files_5_3_3_wrote``: with three messages held 50 s in 5.3.3's wheel,
a copy of its ``timerlog``, ``timerwheel`` and ``config/timercheck`` is opened with Pumice's
TimerLog, TimerWheel and TimerCheckpoint: every unit is reached from its slot's chain and names
the CommitLog offset and size of its ``rmq_sys_wheel_timer`` record, and the checkpoint's queue
offset counts them.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from pumice.client import Message
from pumice.client.message import MessageExt, decode_messages
from pumice.client.message_batch import encode_batch
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from pumice.store.timer.timer_checkpoint import TimerCheckpoint
from pumice.store.timer.timer_log import UNIT_SIZE, TimerLog
from pumice.store.timer.timer_wheel import TimerWheel
from tests.helpers.clusters import Cluster, pull, run
from tests.helpers.java_driver import JAVA5_DIR, JavaDriver, build_jar
from tests.helpers.rocketmq5 import RocketMQ5, cached_classpath
from tests.integration.test_timer_messages import check_on_time, create_routed, now_ms, pull_until, send_with, slot
from tests.integration.test_timer_put_paths import batch_request, end_transaction, half_message, pull_now

TIMER_LOG_FILE = 65536
CONF = {
    "timerPrecisionMs": 100,
    "timerMaxDelaySec": 60,
    "mappedFileSizeTimerLog": TIMER_LOG_FILE,
    "recallMessageEnable": "true",
}


class Server:
    """What a scenario needs of either broker."""

    def __init__(self, name: str, namesrv: str, broker: str, store: Path) -> None:
        self.name, self.namesrv, self.broker, self.store = name, namesrv, broker, store
        self.rocketmq5: RocketMQ5 | None = None

    def create_topic(self, topic: str) -> None:
        if self.rocketmq5 is not None:
            self.rocketmq5.create_topic(topic, 4, "DELAY")  # and routed
        else:
            run(create_routed(self.namesrv, self.broker, topic))


@pytest.fixture(scope="module", params=["pumice", "rocketmq5"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if shutil.which("java") is None:
        pytest.fail("java is not installed: .ci/run installs a JDK and Maven")
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "pumice":
        c = Cluster(root, "".join(f"{k}={v}\n" for k, v in CONF.items()))
        try:
            yield Server("pumice", c.ns, c.br, root / "store")
        finally:
            c.close()
    else:
        r5 = RocketMQ5(root, broker_conf=CONF, classpath=cached_classpath())
        try:
            s = Server("rocketmq5", r5.namesrv, r5.broker_addr, r5.store_dir)
            s.rocketmq5 = r5
            yield s
        finally:
            r5.discard()  # its store is thrown away: no graceful stop to wait for


@pytest.fixture(scope="module")
def java5_classpath() -> str:
    return build_jar(java_dir=JAVA5_DIR)


def test_deliver_time_from_the_5x_java_client(server: Server, java5_classpath: str, tmp_path: Path) -> None:
    topic = "TimerRefJavaT"
    server.create_topic(topic)
    delays = [2500, 1000, 1800, 100_000]
    d = JavaDriver(java5_classpath, tmp_path, "send", {"namesrv": server.namesrv, "topic": topic, "queue": 1,
                                                       "delaysMs": ",".join(map(str, delays))},
                   name="timer5", main="pumice.interop5.Timer5")  # fmt: skip
    events = d.wait(60)
    sent = {e["i"]: e for e in events if e["event"] == "sent"}
    assert sorted(sent) == [0, 1, 2], events
    assert [(e["i"], e["code"]) for e in events if e["event"] == "refused"] == [(3, ResponseCode.MESSAGE_ILLEGAL)]

    async def consume() -> list[MessageExt]:
        c = RemotingClient()
        try:
            return await pull_until(c, server.broker, topic, 3, 15, queue_id=1)
        finally:
            await c.close()

    got = run(consume())
    # in order of their slots (due times the driver set before each send; its first send also connects),
    # sent order within a slot
    assert [m.body for m in got] == [b"timer5-%d" % i for i in sorted(sent, key=lambda i: (slot(sent[i]["due"]), i))]
    late = check_on_time(got, {b"timer5-%d" % i: (e["due"], e["due"]) for i, e in sent.items()})
    print(f"{server.name}: timer messages late by {sorted(late)} ms (timerPrecisionMs 100)")
    assert {m.properties["UNIQ_KEY"] for m in got} == {e["msgId"] for e in sent.values()}


def test_a_past_time_and_one_past_the_max(server: Server) -> None:
    topic = "TimerRefEdgeT"
    server.create_topic(topic)

    async def scenario() -> None:
        c = RemotingClient()
        try:
            past = str(now_ms() - 5000)
            r = await send_with(c, server.broker, topic, b"past", {"TIMER_DELIVER_MS": past}, queue_id=1)
            assert r.code == ResponseCode.SUCCESS, r.remark
            got = await pull_until(c, server.broker, topic, 1, 3, queue_id=1)
            assert [m.body for m in got] == [b"past"]
            r = await send_with(c, server.broker, topic, b"far", {"TIMER_DELAY_SEC": "61"})
            assert (r.code, r.remark) == (
                ResponseCode.MESSAGE_ILLEGAL,
                "timer message illegal, the delay time should not be bigger than the max delay 60000ms; or if set "
                "del msg, the delay time should be bigger than the current time",
            )
        finally:
            await c.close()

    run(scenario())


def test_pumice_reads_the_timer_files_5_3_3_wrote(server: Server, tmp_path: Path) -> None:
    if server.name != "rocketmq5":
        pytest.skip("5.3.3's files: the Pumice run writes its own (tests/integration/test_timer_messages.py)")
    topic = "TimerRefFilesT"
    server.create_topic(topic)

    async def scenario() -> list[MessageExt]:
        c = RemotingClient()
        try:
            for i in range(3):
                r = await send_with(c, server.broker, topic, b"h-%d" % i, {"TIMER_DELAY_SEC": "50"})
                assert r.code == ResponseCode.SUCCESS, r.remark
            held: list[MessageExt] = []
            for _ in range(20):
                r = await c.invoke(server.broker, pull("rmq_sys_wheel_timer", len(held), sys_flag=0, suspend_ms=0), 10)
                if r.code != ResponseCode.SUCCESS:
                    break
                held += decode_messages(r.body)
            return held
        finally:
            await c.close()

    held = run(scenario())

    def copied(n: int) -> tuple[TimerLog, list[tuple[int, Any]], TimerCheckpoint, Path]:
        """A copy of 5.3.3's timer files as they are now: its log, the log's units, its checkpoint."""
        copy = tmp_path / f"copy{n}"
        shutil.copytree(server.store / "timerlog", copy / "timerlog")
        shutil.copy(server.store / "timerwheel", copy / "timerwheel")
        (copy / "config").mkdir()
        shutil.copy(server.store / "config" / "timercheck", copy / "config" / "timercheck")
        log = TimerLog(str(copy / "timerlog"), TIMER_LOG_FILE)
        assert log.load()
        units, pos = [], 0
        while (u := log.read_unit(pos)) is not None and u[0] == UNIT_SIZE:
            units.append((pos, u))
            pos += UNIT_SIZE
        return log, units, TimerCheckpoint(str(copy / "config" / "timercheck")), copy

    # 5.3.3 writes its wheel and checkpoint once a second: a copy whose checkpoint has caught up
    # with the log (at most 15 s; a fixed 2.5 s ran out at a load average of 18)
    for n in range(30):
        time.sleep(0.5)
        log, units, cp, copy = copied(n)
        caught_up = cp.last_timer_log_flush_pos == len(units) * UNIT_SIZE and cp.last_timer_queue_offset == len(held)
        if caught_up or n == 29:  # the last copy is checked below either way, and fails there
            break
        log.shutdown()
        cp.shutdown()
    wheel = TimerWheel(str(copy / "timerwheel"), 7 * 24 * 3600, 100)
    by_offset = {u[5]: (p, u) for p, u in units}
    mine = [m for m in held if m.properties.get("REAL_TOPIC") == topic]
    assert len(mine) == 3
    for m in mine:
        p, u = by_offset[m.commit_log_offset]
        assert u[6] == m.store_size and u[3] + u[4] == int(m.properties["TIMER_OUT_MS"])
        slot = wheel.get_slot(u[3] + u[4])
        chain, at = [], slot.last_pos
        while at != -1 and len(chain) < 1000:
            chain.append(at)
            at = log.read_unit(at)[1]  # type: ignore[index]
        assert p in chain and slot.first_pos in chain
    assert cp.master_timer_queue_offset == cp.last_timer_queue_offset == len(held)
    assert abs(cp.last_read_time_ms - now_ms()) < 10_000
    assert cp.last_timer_log_flush_pos == len(units) * UNIT_SIZE
    wheel.shutdown()
    log.shutdown()
    cp.shutdown()


def test_timer_properties_on_a_batch_and_on_a_commit(server: Server) -> None:
    """5.3.3's hook runs on every put: a batch goes by its own properties (each message due then);
    a property inside a batch is ignored by 5.3.3 (stored at once) and refused by Pumice; a half
    with a timer property: Pumice holds it and routes the commit, 5.3.3 routes the half itself
    (its type is NOT once it is made a half), so the commit lands in RMQ_SYS_TRANS_HALF_TOPIC."""
    batch_topic, inner_topic, tx_topic = "TimerRefBatchT", "TimerRefInnerT", "TimerRefTxT"
    for t in (batch_topic, inner_topic, tx_topic):
        server.create_topic(t)
    ids = ["7F000001000000000000000000000C01", "7F000001000000000000000000000C02"]
    body = encode_batch([Message(batch_topic, b"b-0"), Message(batch_topic, b"b-1")], [{"UNIQ_KEY": i} for i in ids])
    inner = encode_batch([Message(inner_topic, b"i-0")], [{"TIMER_DELAY_MS": "1500", "UNIQ_KEY": ids[0]}])

    async def scenario() -> dict[str, object]:
        c = RemotingClient()
        try:
            seen: dict[str, object] = {}
            due = now_ms() + 1500
            # queue 1: Pumice's create_topic sent a message to queue 0
            r = await c.invoke(server.broker, batch_request(batch_topic, body, f"TIMER_DELIVER_MS\x01{due}", 1))
            assert r.code == ResponseCode.SUCCESS, r.remark
            seen["batch early"] = await pull_now(c, server.broker, batch_topic, queue_id=1)
            r = await c.invoke(server.broker, batch_request(inner_topic, inner, "", 1))
            seen["inner"] = (r.code, await pull_until(c, server.broker, inner_topic, 1, 3, queue_id=1))
            tx = half_message(tx_topic, b"tx-0", {"TIMER_DELAY_MS": "1500"}, 1)
            prepared = await c.invoke(server.broker, tx)
            assert prepared.code == ResponseCode.SUCCESS, prepared.remark
            committed_at = now_ms()
            r = await c.invoke(server.broker, end_transaction(prepared))
            seen["commit"] = r.code
            seen["batch"] = (due, await pull_until(c, server.broker, batch_topic, 2, 10, queue_id=1))
            seen["tx"] = (committed_at, await pull_until(c, server.broker, tx_topic, 1, 5, queue_id=1))
            if server.name != "pumice":  # where 5.3.3's commit went
                seen["half topic"] = await pull_until(c, server.broker, "RMQ_SYS_TRANS_HALF_TOPIC", 8, 3)
            return seen
        finally:
            await c.close()

    seen = run(scenario())
    assert seen["batch early"] == []
    due, got = seen["batch"]  # type: ignore[misc]
    # each with its own id (5.3.3's several put threads may put one slot's messages in another order)
    assert sorted((m.body, m.properties["UNIQ_KEY"]) for m in got) == [(b"b-0", ids[0]), (b"b-1", ids[1])]
    check_on_time(got, {m.body: (due, due) for m in got})
    code, stored = seen["inner"]  # type: ignore[misc]
    committed_at, tx = seen["tx"]  # type: ignore[misc]
    assert seen["commit"] == ResponseCode.SUCCESS
    if server.name == "pumice":
        assert code == ResponseCode.MESSAGE_ILLEGAL and stored == []
        assert [m.body for m in tx] == [b"tx-0"] and tx[0].store_timestamp >= committed_at + 1500
    else:
        assert code == ResponseCode.SUCCESS and [m.body for m in stored] == [b"i-0"]  # at once, time ignored
        assert tx == []  # the commit went to the half topic: never on its topic
        in_half = [m for m in seen["half topic"] if m.body == b"tx-0"]  # type: ignore[attr-defined]
        assert any(m.sys_flag & 0xC == 0x8 for m in in_half), [(m.sys_flag, m.properties) for m in in_half]


def test_the_timer_checkpoint_and_metrics_codes(server: Server) -> None:
    topic = "TimerRefCodesT"
    server.create_topic(topic)

    async def scenario() -> tuple[RemotingCommand, RemotingCommand]:
        c = RemotingClient()
        try:
            r = await send_with(c, server.broker, topic, b"held", {"TIMER_DELAY_SEC": "50"})
            assert r.code == ResponseCode.SUCCESS, r.remark
            await asyncio.sleep(2.5)  # enqueued and flushed (once a second)
            cp = await c.invoke(server.broker, RemotingCommand(code=60), 10)
            m = await c.invoke(server.broker, RemotingCommand(code=61), 10)
            return cp, m
        finally:
            await c.close()

    cp, m = run(scenario())
    assert cp.code == ResponseCode.SUCCESS and len(cp.body) == 56
    read, _, last, master, _, _, counter = TimerCheckpoint.decode(cp.body)
    assert abs(read - now_ms()) < 10_000 and master >= 1 and last == master and counter >= 1
    assert m.code == ResponseCode.SUCCESS
    doc = orjson.loads(m.body)
    assert doc["timingCount"][topic]["count"] >= 1 and set(doc["dataVersion"]) >= {"counter", "timestamp"}


def test_recall_a_timer_message(server: Server) -> None:
    topic = "TimerRefRecallT"
    server.create_topic(topic)
    kept, gone = "7F000001000000000000000000000E01", "7F000001000000000000000000000E02"

    async def scenario() -> tuple[RemotingCommand, RemotingCommand, list[MessageExt]]:
        c = RemotingClient()
        try:
            sent = []
            for body, uniq in ((b"kept", kept), (b"gone", gone)):
                r = await send_with(c, server.broker, topic, body, {"UNIQ_KEY": uniq, "TIMER_DELAY_MS": "1500"}, 1)
                assert r.code == ResponseCode.SUCCESS, r.remark
                sent.append(r)
            handle = str(sent[1].ext_fields.get("recallHandle", ""))
            recall = RemotingCommand(
                code=370, ext_fields={"producerGroup": "PG", "topic": topic, "recallHandle": handle}
            )
            done = await c.invoke(server.broker, recall, 10)
            return sent[1], done, await pull_until(c, server.broker, topic, 2, 4, queue_id=1)
        finally:
            await c.close()

    sent, done, got = run(scenario())
    fields = base64.urlsafe_b64decode(str(sent.ext_fields["recallHandle"])).decode().split(" ")
    assert fields[0] == "v1" and fields[1] == topic and fields[4] == gone
    assert int(fields[3]) % 100 == 1  # the slot's time + 1
    assert (done.code, done.ext_fields.get("msgId")) == (ResponseCode.SUCCESS, gone), done.remark
    assert [m.body for m in got] == [b"kept"]
