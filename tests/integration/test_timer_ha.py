"""Timer messages on a real master and slave (RocketMQ 5.3.3's roles): the broker answers
GET_TIMER_CHECK_POINT (60, timercheck's 56 bytes) and GET_TIMER_METRICS (61, timermetrics' JSON);
the slave copies the master's read time, queue offset and metrics (SlaveSynchronize's
syncTimerCheckPoint and syncTimerMetrics), enqueues the replicated timer queue into its own
timerlog up to the master's offset, and delivers nothing (only the master does)."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import orjson
import pytest

from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import HACluster, call, req, send
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.timeout(180)

GET_TIMER_CHECK_POINT, GET_TIMER_METRICS = 60, 61
CHECKPOINT = struct.Struct(">qqqqqqq")  # lastReadTimeMs … dataVersion counter


def timer_send(topic: str, body: bytes, delay_ms: int) -> RemotingCommand:
    r = send(topic, body, body.decode())
    r.ext_fields["i"] += f"\x02TIMER_DELAY_MS\x01{delay_ms}"
    return r


def checkpoint(addr: str) -> tuple[int, ...]:
    (r,) = call(addr, None, req(GET_TIMER_CHECK_POINT))
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    assert len(r.body) == CHECKPOINT.size
    return CHECKPOINT.unpack(r.body)


def metrics(addr: str) -> dict:
    (r,) = call(addr, None, req(GET_TIMER_METRICS))
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return orjson.loads(r.body)


def test_the_slave_copies_the_masters_timer_progress_and_delivers_nothing(tmp_path: Path) -> None:
    c = HACluster(tmp_path, extra_conf="timerPrecisionMs=100\ntimerFlushIntervalMs=200\n")
    try:
        c.start_slave()
        held, due = "TimerHeldT", "TimerDueT"
        answers = call(c.m, None, *(timer_send(held, b"h-%d" % i, 120_000) for i in range(3)),
                       timer_send(due, b"d-0", 500))  # fmt: skip
        assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 4, [a.remark for a in answers]
        # the master: all four enqueued, the due one delivered, three waiting
        eventually(lambda: checkpoint(c.m)[3] == 4, 15, "the master's timer queue offset at 4")
        eventually(lambda: metrics(c.m)["timingCount"].get(held, {}).get("count") == 3, 15, "3 held on the master")
        eventually(lambda: metrics(c.m)["timingCount"].get(due, {}).get("count") == 0, 15, "the due one delivered")
        c.wait_replicated()
        master = checkpoint(c.m)
        assert master[0] > time.time() * 1000 - 10_000  # the read time follows the clock
        # the slave: the master's read time, offset and metrics (its first round 3 s after start, then every 10 s)
        eventually(lambda: checkpoint(c.s)[3] == 4, 30, "the master's timer queue offset on the slave")
        eventually(lambda: metrics(c.s)["timingCount"] == metrics(c.m)["timingCount"], 30, "the master's metrics")
        slave = checkpoint(c.s)
        assert slave[0] >= master[0] and slave[6] >= 1  # its read time is the master's, with its dataVersion
        stored = orjson.loads((tmp_path / "s" / "config" / "timermetrics").read_bytes())
        assert stored["timingCount"][held]["count"] == 3
        # it enqueued the four into its own timerlog (52-byte units), and delivered nothing: its
        # CommitLog is still the master's, byte for byte
        timerlog = tmp_path / "s" / "timerlog" / "00000000000000000000"
        eventually(lambda: timerlog.read_bytes()[: 4 * 52].count(struct.pack(">i", 52)) >= 4, 15, "4 units")
        c.wait_replicated()
    finally:
        c.close()


def test_the_checkpoint_and_metrics_codes_without_the_timer(tmp_path: Path) -> None:
    c = HACluster(tmp_path, extra_conf="timerWheelEnable=false\n")
    try:
        (cp, m) = call(c.m, None, req(GET_TIMER_CHECK_POINT), req(GET_TIMER_METRICS))
        assert (cp.code, cp.remark) == (ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        assert (m.code, m.remark) == (ResponseCode.SYSTEM_ERROR, "The timer message store is null")
    finally:
        c.close()
