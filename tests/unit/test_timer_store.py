"""The timer store (RIP-43, store/timer/) on a real DefaultMessageStore, driven by hand with a
fake clock: 5.3.3's byte layouts (golden bytes written from its TimerLog, Slot and
TimerCheckpoint code, not from Pumice's encoder), the send path's routing and refusals, due order,
rolls, and recovery of the wheel from the timerlog."""

from __future__ import annotations

import struct

import orjson
import pytest

from pumice.broker.timer_message_hook import route_timer_message
from pumice.common.message import MessageExtBrokerInner
from pumice.remoting.response_code import ResponseCode
from pumice.store import DefaultMessageStore
from pumice.store.message_store_config import MessageStoreConfig
from pumice.store.timer.timer_checkpoint import TimerCheckpoint
from pumice.store.timer.timer_log import BLANK_MAGIC_CODE
from pumice.store.timer.timer_message_store import TIMER_TOPIC, TimerMessageStore
from tests.helpers.store import read_queue, small_config
from tests.helpers.waiting import wait_dispatched

T0 = 1_700_000_000_000  # a multiple of every precision


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def config(root: str, **kw: object) -> MessageStoreConfig:
    cfg = small_config(root, timer_precision_ms=100, mapped_file_size_timer_log=4096, **kw)
    cfg.validate()
    return cfg


def timer_message(topic: str, body: bytes, props: dict[str, str], queue_id: int = 2) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id,
                                 properties={"UNIQ_KEY": f"ID-{body.decode()}", "TAGS": "T", **props})  # fmt: skip


def put_timer(store: DefaultMessageStore, now: int, *msgs: MessageExtBrokerInner) -> None:
    for m in msgs:
        assert route_timer_message(m, store.config, None, now) is None
        assert m.topic == TIMER_TOPIC
        assert store.put_messages((m,)).is_ok()
    wait_dispatched(store)


def delivered(store: DefaultMessageStore, topic: str = "Real", queue_id: int = 2) -> list[bytes]:
    """The bodies on the real queue (none while it does not exist)."""
    return read_queue(store, topic, queue_id) if store.get_max_offset_in_queue(topic, queue_id) > 0 else []


def step(timer: TimerMessageStore, clock: Clock, to_ms: int, store: DefaultMessageStore) -> None:
    """Move the clock to ``to_ms`` and let the timer enqueue and deliver what is due."""
    clock.ms = to_ms
    while timer.enqueue():
        pass
    while timer.dequeue() != -1:
        pass
    wait_dispatched(store)


def test_the_unit_slot_blank_and_checkpoint_layouts_are_5_3_3s(tmp_path) -> None:
    # TimerLog.BLANK_MAGIC_CODE = 0xBBCCDDEE ^ 1880681586 + 8 (Java: + before ^), as an int
    java = (0xBBCCDDEE ^ (1880681586 + 8)) & 0xFFFFFFFF
    assert BLANK_MAGIC_CODE == java - (1 << 32)
    cfg = config(str(tmp_path / "s"))
    clock = Clock(T0)
    with DefaultMessageStore(cfg) as store:
        timer = TimerMessageStore(store, clock)
        assert timer.load()
        timer.start(True, threads=False)
        put_timer(store, T0, timer_message("TopicA", b"a", {"TIMER_DELIVER_MS": str(T0 + 2550)}))
        assert timer.enqueue()
        phy, size, _ = store.get_consume_queue(TIMER_TOPIC, 0).get_entry(0)  # type: ignore[union-attr]
        unit = (tmp_path / "s" / "timerlog" / "00000000000000000000").read_bytes()[:52]
        # size 52 | prevPos -1 | magic 1 | currWriteTime T0 | delay 2500 (slot T0+2500) | offsetPy | sizePy
        # | "TopicA".hashCode() = -1784167150 (0x95a7c512) | reserved 0
        want = ("00000034" "ffffffffffffffff" "00000001" f"{T0:016x}" "000009c4" f"{phy:016x}" f"{size:08x}"
                "95a7c512" "0000000000000000")  # fmt: skip
        assert unit.hex() == want
        # slot of T0+2500: index (T0+2500)/100 % 1209600, time/100, first 0, last 0, num 1, magic 0
        index = (T0 + 2500) // 100 % (7 * 24 * 3600 * 2)
        wheel = (tmp_path / "s" / "timerwheel").read_bytes()
        assert len(wheel) == 38_707_200
        assert wheel[index * 32 : index * 32 + 32].hex() == (
            f"{(T0 + 2500) // 100:016x}" "0000000000000000" "0000000000000000" "00000001" "00000000"
        )  # fmt: skip
        timer.commit_read_time_ms = T0 + 700
        timer.flush()
        timer.flush()  # the checkpoint records the flushed position of the flush before (as 5.3.3's order)
        cp = (tmp_path / "s" / "config" / "timercheck").read_bytes()
        assert len(cp) == 4096
        # lastReadTimeMs, lastTimerLogFlushPos (52), lastTimerQueueOffset (1), masterTimerQueueOffset (1)
        assert cp[:32].hex() == f"{T0 + 700:016x}000000000000003400000000000000010000000000000001"
        metrics = orjson.loads((tmp_path / "s" / "config" / "timermetrics").read_bytes())
        assert metrics["timingCount"]["TopicA"]["count"] == 1 and list(metrics) == ["dataVersion", "timingCount"]
        timer.shutdown()


def test_due_messages_come_back_in_order_with_their_ids(tmp_path) -> None:
    cfg = config(str(tmp_path / "s"))
    clock = Clock(T0)
    with DefaultMessageStore(cfg) as store:
        timer = TimerMessageStore(store, clock)
        assert timer.load()
        timer.start(True, threads=False)
        put_timer(store, T0, *[timer_message("Real", b"m%d" % i, {"TIMER_DELAY_MS": str(d)})
                               for i, d in enumerate((3000, 1000, 2000, 1000))])  # fmt: skip
        step(timer, clock, T0, store)
        assert delivered(store) == []
        step(timer, clock, T0 + 999, store)  # the slot below 1000 is read once the write time passes it
        assert delivered(store) == []
        step(timer, clock, T0 + 1000, store)
        assert delivered(store) == [b"m1", b"m3"]
        step(timer, clock, T0 + 3050, store)
        assert delivered(store) == [b"m1", b"m3", b"m2", b"m0"]
        m = store.look_message_by_offset(store.get_commit_log_offset_in_queue("Real", 2, 3))
        assert m is not None and m.properties["UNIQ_KEY"] == "ID-m0"
        assert m.properties["TIMER_OUT_MS"] == str(T0 + 2900) and m.properties["TIMER_ENQUEUE_MS"] == str(T0)
        assert m.properties["REAL_TOPIC"] == "Real"  # 5.3.3 writes the map before it drops them
        assert timer.metrics.timing_count_of("Real") == 0
        timer.shutdown()


def test_a_message_beyond_the_roll_window_goes_round_again(tmp_path) -> None:
    cfg = config(str(tmp_path / "s"), timer_roll_window_slot=30)  # 3 s at 100 ms
    clock = Clock(T0)
    with DefaultMessageStore(cfg) as store:
        timer = TimerMessageStore(store, clock)
        assert timer.load()
        timer.start(True, threads=False)
        put_timer(store, T0, timer_message("Real", b"far", {"TIMER_DELAY_SEC": "10"}))
        step(timer, clock, T0, store)
        for t in range(T0, T0 + 9800, 500):
            step(timer, clock, t, store)
            assert delivered(store) == [], t
        step(timer, clock, T0 + 10_000, store)
        assert delivered(store) == [b"far"]
        m = store.look_message_by_offset(store.get_commit_log_offset_in_queue("Real", 2, 0))
        assert m is not None and int(m.properties["TIMER_ROLL_TIMES"]) >= 2
        timer.shutdown()


def test_recovery_rebuilds_the_wheel_from_the_log(tmp_path) -> None:
    root = tmp_path / "s"
    cfg = config(str(root))
    clock = Clock(T0)
    with DefaultMessageStore(cfg) as store:
        timer = TimerMessageStore(store, clock)
        assert timer.load()
        timer.start(True, threads=False)
        put_timer(store, T0, *[timer_message("Real", b"r%d" % i, {"TIMER_DELAY_MS": str(500 + 100 * i)})
                               for i in range(100)])  # fmt: skip  # 100 units: past one 4 KiB file
        step(timer, clock, T0, store)
        assert len(list((root / "timerlog").iterdir())) == 2
        timer.flush()
        timer.shutdown()
        (root / "timerwheel").write_bytes(b"")  # the wheel lost: rebuilt from the timerlog
        timer = TimerMessageStore(store, clock)
        assert timer.load()
        timer.start(True, threads=False)
        step(timer, clock, T0 + 20_000, store)
        assert delivered(store) == [b"r%d" % i for i in range(100)]
        timer.shutdown()


@pytest.mark.parametrize(
    ("props", "want"),
    [
        ({"TIMER_DELIVER_MS": str(T0 + 1000)}, T0 + 900),  # a multiple: one step less
        ({"TIMER_DELIVER_MS": str(T0 + 1050)}, T0 + 1000),  # floored
        ({"TIMER_DELAY_SEC": "2", "TIMER_DELAY_MS": "5000"}, T0 + 1900),  # seconds first
        ({"__STARTDELIVERTIME": str(T0 + 300)}, T0 + 200),
    ],
)
def test_the_send_path_files_a_message_in_its_slot(tmp_path, props: dict[str, str], want: int) -> None:
    cfg = config(str(tmp_path))
    m = timer_message("Real", b"x", props, queue_id=3)
    assert route_timer_message(m, cfg, None, T0) is None
    assert (m.topic, m.queue_id) == (TIMER_TOPIC, 0)
    assert (m.properties["TIMER_OUT_MS"], m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == (
        str(want), "Real", "3")  # fmt: skip
    assert m.properties_string is not None and "TIMER_OUT_MS\x01" in m.properties_string


def test_the_send_path_refuses_as_5_3_3(tmp_path) -> None:
    cfg = config(str(tmp_path), timer_max_delay_sec=10)
    illegal = ("timer message illegal, the delay time should not be bigger than the max delay 10000ms; or if set "
               "del msg, the delay time should be bigger than the current time")  # fmt: skip
    for props in ({"TIMER_DELAY_SEC": "11"}, {"TIMER_DELAY_MS": "1e3"}, {"TIMER_DELIVER_MS": ""},
                  {"TIMER_DELIVER_MS": str(T0 - 1), "TIMER_DEL_UNIQKEY": "Real+ID"}):  # fmt: skip
        assert route_timer_message(timer_message("Real", b"x", props), cfg, None, T0) == (
            ResponseCode.MESSAGE_ILLEGAL, illegal), props  # fmt: skip
    past = timer_message("Real", b"x", {"TIMER_DELIVER_MS": str(T0)})
    assert route_timer_message(past, cfg, None, T0) is None and past.topic == "Real"  # now: at once
    level = timer_message("Real", b"x", {"DELAY": "2", "TIMER_DELAY_SEC": "5"})
    assert route_timer_message(level, cfg, None, T0) is None
    assert level.topic == "Real" and "TIMER_DELAY_SEC" not in level.properties  # the level wins
    cfg.timer_wheel_enable = False
    assert route_timer_message(timer_message("Real", b"x", {"TIMER_DELAY_SEC": "1"}), cfg, None, T0) == (
        ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false")  # fmt: skip


@pytest.mark.parametrize(("given", "taken"), [(1, 100), (150, 100), (200, 200), (999, 500), (5000, 1000)])
def test_timer_precision_is_taken_down_as_5_3_3s_setter(tmp_path, given: int, taken: int) -> None:
    cfg = small_config(str(tmp_path), timer_precision_ms=given)
    cfg.validate()
    assert cfg.timer_precision_ms == taken


def test_a_checkpoint_reads_back(tmp_path) -> None:
    cp = TimerCheckpoint(str(tmp_path / "timercheck"))
    cp.last_read_time_ms, cp.last_timer_log_flush_pos, cp.last_timer_queue_offset = 5, 6, 7
    cp.master_timer_queue_offset = 8
    cp.update_data_version(0)
    cp.shutdown()
    again = TimerCheckpoint(str(tmp_path / "timercheck"))
    assert (again.last_read_time_ms, again.last_timer_log_flush_pos, again.last_timer_queue_offset,
            again.master_timer_queue_offset, again.counter) == (5, 6, 7, 8, 1)  # fmt: skip


def test_a_slave_enqueues_up_to_the_masters_offset_and_takes_its_read_time(tmp_path) -> None:
    cfg = config(str(tmp_path / "s"))
    clock = Clock(T0)
    with DefaultMessageStore(cfg) as store:
        timer = TimerMessageStore(store, clock)
        assert timer.load()
        timer.start(False, threads=False)  # a slave: enqueue, no dequeue
        put_timer(store, T0, *[timer_message("Real", b"m%d" % i, {"TIMER_DELAY_MS": "500"}) for i in range(3)])
        assert not timer.enqueue()  # the master has enqueued nothing yet
        master = TimerCheckpoint.decode(struct.pack(">qqqqqqq", T0 + 700, 0, 2, 2, 0, T0, 5))
        assert master == (T0 + 700, 0, 2, 2, 0, T0, 5)
        with pytest.raises(ValueError):
            TimerCheckpoint.decode(b"\0" * 40)
        timer.take_master_checkpoint(struct.pack(">qqqqqqq", T0 + 700, 0, 2, 2, 0, T0, 5))
        assert timer.enqueue() and timer.curr_queue_offset == 2  # two of three: the master's offset
        assert not timer.enqueue()
        assert timer.curr_read_time_ms == T0 + 700
        clock.ms = T0 + 5000
        assert timer.dequeue() == -1 and delivered(store) == []  # due, but a slave delivers nothing
        timer.flush()
        cp = TimerCheckpoint.decode(timer.checkpoint.encode())
        assert (cp[0], cp[2], cp[3], cp[6]) == (T0 + 700, 2, 2, 5)
        assert timer.metrics.take_master_copy(b'{"dataVersion":{"counter":9},"timingCount":{"Real":{"count":1}}}')
        assert timer.metrics.timing_count_of("Real") == 1
        assert not timer.metrics.take_master_copy(b'{"dataVersion":{"counter":9},"timingCount":{}}')  # same version
        timer.shutdown()
