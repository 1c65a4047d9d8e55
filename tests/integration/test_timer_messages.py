"""Timer messages (RIP-43, issue 34's timer part) against a real `pumice broker`.

One broker for the module, with ``timerPrecisionMs=100`` (5.3.3's finest), 4 KiB timerlog
files (78 units each, so a run crosses files) and ``timerMaxDelaySec=60``:

- messages with TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS and __STARTDELIVERTIME (raw
  SEND_MESSAGE_V2 requests) and with the Pumice client's properties come back on their topic and
  queue in order of due time, with their own message id, never before their time and at most
  ``BOUND_MS`` after it (store time against due time, one clock);
- the 5.5.0 remoting Java client's ``Message.setDeliverTimeMs`` (tests/java5's Timer5) likewise;
- a time in the past is stored at once; a time past ``timerMaxDelaySec`` or not a number is
  refused MESSAGE_ILLEGAL with 5.3.3's remark; the DELAY levels keep their ScheduleMessageService
  path, and a DELAY level wins over a timer property;
- the files: each ``rmq_sys_wheel_timer`` entry has its 52-byte timerlog unit (offset and size of
  the record), ``timercheck`` is 4 KiB, and ``timermetrics`` counts nothing left once all is delivered.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
import time
from pathlib import Path

import orjson
import pytest

from pumice.client import Message, Producer
from pumice.client.message import MessageExt, MessageQueue, decode_messages
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, pull, run, running_cluster, send
from tests.helpers.java_driver import JAVA5_DIR, JavaDriver, build_jar


def now_ms() -> int:
    """The broker's clock, as its store reads it (CommitLog store timestamps)."""
    return time.time_ns() // 1_000_000


PRECISION = 100
BOUND_MS = 1000  # measured here: 100-300 ms late (one slot, the threads' 10 ms pace); CI slack
cluster = running_cluster("timer", f"timerPrecisionMs={PRECISION}\nmappedFileSizeTimerLog=4096\ntimerMaxDelaySec=60\n")
UNIT = struct.Struct(">iqiqiqiiq")


async def send_with(
    c: RemotingClient, br: str, topic: str, body: bytes, props: dict[str, str], queue_id: int = 0
) -> RemotingCommand:
    req = send(topic, body, body.decode(), queue_id)
    req.ext_fields["i"] += "".join(f"\x02{k}\x01{v}" for k, v in props.items())
    return await c.invoke(br, req)


async def pull_until(
    c: RemotingClient, br: str, topic: str, want: int, timeout_s: float, queue_id: int = 0
) -> list[MessageExt]:
    """Queue ``queue_id`` of ``topic`` from offset 0 until ``want`` messages came (or the time is up)."""
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        r = await c.invoke(br, pull(topic, len(got), queue_id, suspend_ms=500), 10)
        if r.code == ResponseCode.SUCCESS:
            got += decode_messages(r.body)
        else:
            await asyncio.sleep(0.05)
    return got


def slot(due_ms: int) -> int:
    """The wheel slot the broker files a delivery time in (one step below an exact multiple)."""
    return due_ms - PRECISION if due_ms % PRECISION == 0 else due_ms // PRECISION * PRECISION


def check_on_time(got: list[MessageExt], due: dict[bytes, tuple[int, int]]) -> list[int]:
    """Every message at or after its earliest due time and within BOUND_MS of its latest; the
    lateness of each (ms)."""
    late = []
    for m in got:
        lo, hi = due[m.body]
        assert m.store_timestamp >= lo, f"{m.body!r} delivered {lo - m.store_timestamp} ms early"
        assert m.store_timestamp <= hi + BOUND_MS, f"{m.body!r} delivered {m.store_timestamp - hi} ms late"
        late.append(m.store_timestamp - lo)
    return late


def test_timer_properties_are_delivered_in_due_order(cluster: Cluster) -> None:
    topic = "TimerOrderT"

    async def scenario() -> tuple[list[MessageExt], dict[bytes, tuple[int, int]], dict[bytes, str], list[int]]:
        c = RemotingClient()
        try:
            due: dict[bytes, tuple[int, int]] = {}
            ids: dict[bytes, str] = {}
            # (property, value, delay in ms), sent in this order; due in another one
            plan = [("TIMER_DELAY_SEC", "3", 3000), ("TIMER_DELIVER_MS", None, 1300),
                    ("TIMER_DELAY_MS", "2200", 2200), ("__STARTDELIVERTIME", None, 1700),
                    ("TIMER_DELIVER_MS", None, 2600), ("TIMER_DELAY_MS", "900", 900)]  # fmt: skip
            for i, (prop, value, delay) in enumerate(plan):
                body = b"t-%d" % i
                uniq = f"7F00000100002A9F0000000000{i:06d}"
                before = now_ms()
                v = value if value is not None else str(before + delay)
                r = await send_with(c, cluster.br, topic, body, {prop: v, "UNIQ_KEY": uniq})
                after = now_ms()
                assert r.code == ResponseCode.SUCCESS, r.remark
                due[body] = (before + delay, (before if value is None else after) + delay)
                ids[body] = uniq
            # nothing on the topic yet: held in rmq_sys_wheel_timer
            early = await c.invoke(cluster.br, pull(topic, 0, sys_flag=0, suspend_ms=0), 10)
            held = await c.invoke(cluster.br, pull("rmq_sys_wheel_timer", 0, sys_flag=0, suspend_ms=0), 10)
            got = await pull_until(c, cluster.br, topic, len(plan), 10)
            await asyncio.sleep(0.5)  # nothing more comes
            extra = await c.invoke(cluster.br, pull(topic, len(got), sys_flag=0, suspend_ms=0), 10)
            assert extra.code != ResponseCode.SUCCESS, "a timer message was delivered twice"
            assert early.code != ResponseCode.SUCCESS or not decode_messages(early.body), "delivered at once"
            assert held.code == ResponseCode.SUCCESS
            held_msgs = decode_messages(held.body)
            return got, due, ids, [len(held_msgs)]
        finally:
            await c.close()

    got, due, ids, held = run(scenario())
    assert held[0] >= 6
    assert sorted(m.body for m in got) == sorted(due)
    # in order of due time: a message never comes before one due a slot earlier (a relative
    # delay is due from when the broker took it, somewhere in its send's window)
    for i, a in enumerate(got):
        for b in got[i + 1 :]:
            assert due[a.body][0] <= due[b.body][1] + PRECISION, (
                f"not in order of due time: {a.body!r} (due {due[a.body]}) before {b.body!r} (due {due[b.body]})"
            )
    late = check_on_time(got, due)
    print(f"timer messages late by {sorted(late)} ms (precision {PRECISION} ms)")
    for m in got:
        assert m.properties["UNIQ_KEY"] == ids[m.body]  # the same message id
        assert m.queue_id == 0 and m.topic == topic
        assert "TIMER_OUT_MS" in m.properties and "TIMER_DEQUEUE_MS" in m.properties
        assert int(m.properties["TIMER_ENQUEUE_MS"]) < m.store_timestamp


def test_the_pumice_client_sends_timer_messages(cluster: Cluster) -> None:
    topic = "TimerClientT"
    run(create_routed(cluster.ns, cluster.br, topic))  # its first message in queue 0
    with Producer("TimerClientP", cluster.ns) as producer:
        mq = MessageQueue(topic, "broker-t", 1)
        due, ids = {}, {}
        plan = [("TIMER_DELAY_MS", "1500", 1500), ("TIMER_DELAY_SEC", "1", 1000), ("TIMER_DELIVER_MS", None, 2000)]
        for i, (prop, value, delay) in enumerate(plan):
            before = now_ms()
            value = value if value is not None else str(before + delay)
            r = producer.send(Message(topic, b"c-%d" % i, properties={prop: value}), mq)
            due[b"c-%d" % i] = (before + delay, now_ms() + delay)
            ids[b"c-%d" % i] = r.msg_id

    async def consume() -> list[MessageExt]:
        c = RemotingClient()
        try:
            return await pull_until(c, cluster.br, topic, 3, 10, queue_id=1)
        finally:
            await c.close()

    got = run(consume())
    assert [m.body for m in got] == [b"c-1", b"c-0", b"c-2"]
    check_on_time(got, due)
    assert all(m.properties["UNIQ_KEY"] == ids[m.body] for m in got)  # the id the producer was given


def test_a_past_time_is_stored_at_once_and_bad_times_are_refused(cluster: Cluster) -> None:
    topic = "TimerEdgeT"

    async def scenario() -> None:
        c = RemotingClient()
        try:
            past = str(now_ms() - 5000)
            r = await send_with(c, cluster.br, topic, b"past", {"TIMER_DELIVER_MS": past})
            assert r.code == ResponseCode.SUCCESS, r.remark
            now = await c.invoke(cluster.br, pull(topic, 0, sys_flag=0, suspend_ms=0), 10)
            assert now.code == ResponseCode.SUCCESS, "a past time was not stored at once"
            (m,) = decode_messages(now.body)
            assert m.properties["TIMER_DELIVER_MS"] == past and "TIMER_OUT_MS" not in m.properties
            remark = ("timer message illegal, the delay time should not be bigger than the max delay 60000ms; "
                      "or if set del msg, the delay time should be bigger than the current time")  # fmt: skip
            for props in ({"TIMER_DELAY_SEC": "61"}, {"TIMER_DELIVER_MS": str(now_ms() + 70_000)},
                          {"TIMER_DELAY_MS": "soon"}, {"TIMER_DELIVER_MS": "99999999999999999999"}):  # fmt: skip
                r = await send_with(c, cluster.br, topic, b"bad", props)
                assert (r.code, r.remark) == (ResponseCode.MESSAGE_ILLEGAL, remark), props
            # still only the one message
            again = await c.invoke(cluster.br, pull(topic, 1, sys_flag=0, suspend_ms=0), 10)
            assert again.code != ResponseCode.SUCCESS
        finally:
            await c.close()

    run(scenario())


def test_delay_levels_keep_their_path_and_win_over_timer_properties(cluster: Cluster) -> None:
    topic = "TimerLevelT"

    async def scenario() -> list[MessageExt]:
        c = RemotingClient()
        try:
            far = str(now_ms() + 30_000)
            sent = now_ms()
            r = await send_with(c, cluster.br, topic, b"level", {"DELAY": "1", "TIMER_DELIVER_MS": far})
            assert r.code == ResponseCode.SUCCESS, r.remark
            got = await pull_until(c, cluster.br, topic, 1, 10)
            assert got and got[0].store_timestamp >= sent + 1000
            return got
        finally:
            await c.close()

    (m,) = run(scenario())
    assert m.properties["REAL_TOPIC"] == topic  # by SCHEDULE_TOPIC_XXXX, not the wheel
    assert "TIMER_DELIVER_MS" not in m.properties and "TIMER_OUT_MS" not in m.properties


def test_the_5x_java_client_deliver_time(cluster: Cluster, tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.fail("java is not installed: .ci/run installs a JDK and Maven")
    classpath = build_jar(java_dir=JAVA5_DIR)
    topic = "TimerJavaT"
    run(create_routed(cluster.ns, cluster.br, topic))
    delays = [2500, 1000, 1800, 100_000]  # the last is past timerMaxDelaySec
    d = JavaDriver(classpath, tmp_path, "send", {"namesrv": cluster.ns, "topic": topic, "queue": 1,
                                                  "delaysMs": ",".join(map(str, delays))},
                   name="timer5", main="pumice.interop5.Timer5")  # fmt: skip
    events = d.wait(60)
    sent = {e["i"]: e for e in events if e["event"] == "sent"}
    refused = [e for e in events if e["event"] == "refused"]
    assert sorted(sent) == [0, 1, 2], events
    assert [(e["i"], e["code"]) for e in refused] == [(3, ResponseCode.MESSAGE_ILLEGAL)]

    async def consume() -> list[MessageExt]:
        c = RemotingClient()
        try:
            return await pull_until(c, cluster.br, topic, 3, 15, queue_id=1)
        finally:
            await c.close()

    got = run(consume())
    # in order of their slots (due times the driver set before each send; its first send also connects),
    # sent order within a slot
    assert [m.body for m in got] == [b"timer5-%d" % i for i in sorted(sent, key=lambda i: (slot(sent[i]["due"]), i))]
    check_on_time(got, {b"timer5-%d" % i: (e["due"], e["due"]) for i, e in sent.items()})
    assert {m.properties["UNIQ_KEY"] for m in got} == {e["msgId"] for e in sent.values()}


async def create_routed(ns: str, br: str, topic: str) -> None:
    """Make ``topic`` on broker ``br`` by a send to queue 0, and wait until name server ``ns`` routes it."""
    c = RemotingClient()
    try:
        r = await send_with(c, br, topic, b"first", {})
        assert r.code == ResponseCode.SUCCESS
        # the name server knows the topic once the broker registered it (at once on creation)
        for _ in range(50):
            route = await c.invoke(ns, RemotingCommand(code=105, ext_fields={"topic": topic}), 5)
            if route.code == ResponseCode.SUCCESS:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{topic} never routed")
    finally:
        await c.close()


def test_timer_files_match_the_timer_queue(cluster: Cluster) -> None:
    """Run last: every timer message of the module is delivered by now."""
    store = cluster.tmp / "store"

    async def entries() -> list[MessageExt]:
        c = RemotingClient()
        got: list[MessageExt] = []
        try:
            for _ in range(20):
                r = await c.invoke(cluster.br, pull("rmq_sys_wheel_timer", len(got), sys_flag=0, suspend_ms=0), 10)
                if r.code != ResponseCode.SUCCESS:
                    break
                got += decode_messages(r.body)
            return got
        finally:
            await c.close()

    held = run(entries())
    assert len(held) >= 9  # 6 + 3 (+ 3 from Java)
    units = []
    for f in sorted((store / "timerlog").iterdir()):
        data = f.read_bytes()
        assert len(data) == 4096
        pos = 0
        while pos + 16 <= len(data):
            size, _prev, magic = struct.unpack_from(">iqi", data, pos)
            if magic == -875286124:  # the blank that ends a file: its size is what was left
                assert size == len(data) - pos
                break
            if size == 0:
                break
            assert size == 52 and magic == 1
            units.append(UNIT.unpack_from(data, pos))
            pos += 52
    by_offset = {u[5]: u for u in units}
    for m in held:
        u = by_offset.get(m.commit_log_offset)
        if int(m.properties["TIMER_OUT_MS"]) < m.store_timestamp:  # due before it was enqueued: never in the log
            continue
        assert u is not None, f"no timerlog unit for {m.body!r}"
        assert u[6] == m.store_size and u[3] + u[4] == int(m.properties["TIMER_OUT_MS"])
    assert (store / "timerwheel").stat().st_size == 7 * 24 * 3600 * 2 * 32
    assert (store / "config" / "timercheck").stat().st_size == 4096
    time.sleep(1.2)  # one flush
    metrics = orjson.loads((store / "config" / "timermetrics").read_bytes())
    assert set(metrics) == {"dataVersion", "timingCount"}
    assert all(v["count"] == 0 for v in metrics["timingCount"].values()), metrics
