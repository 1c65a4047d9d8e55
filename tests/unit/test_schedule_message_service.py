"""ScheduleMessageService: due messages go back to their real topic; progress survives restarts."""

from __future__ import annotations

import json
import os

from pumice.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from pumice.store.schedule_message_service import ScheduleMessageService
from tests.helpers.store import read_queue, small_config
from tests.helpers.waiting import wait_dispatched


def test_due_messages_are_delivered_in_order_and_progress_is_kept(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with DefaultMessageStore(cfg) as store:
        # one batch: one store timestamp, so the due times are exact
        levels = (2, 2, 3)  # 5 s, 5 s, 10 s
        r = store.put_messages([
            MessageExtBrokerInner(topic="Real", body=b"d%d" % i, queue_id=1, properties={"DELAY": str(lv), "TAGS": "T"})
            for i, lv in enumerate(levels)
        ])  # fmt: skip
        assert r.is_ok()
        wait_dispatched(store)
        base = store.look_message_by_offset(0).store_timestamp  # type: ignore[union-attr]
        svc = ScheduleMessageService(store)
        assert svc.deliver_due(base + 4_000) == 0
        assert svc.deliver_due(base + 5_000) == 2
        wait_dispatched(store)
        assert read_queue(store, "Real", 1) == [b"d0", b"d1"]
        m = store.look_message_by_offset(store.get_commit_log_offset_in_queue("Real", 1, 0))
        # stored with every property it had, as 4.9's messageTimeup writes the original string
        assert m is not None and (m.properties["DELAY"], m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == (
            "2", "Real", "1")  # fmt: skip
        assert store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, 1) == 2  # level 2 is queue 1
        svc.persist()
        with open(svc.path) as f:
            assert json.load(f) == {"offsetTable": {"2": 2}}
        again = ScheduleMessageService(store)
        again.load()
        assert again.deliver_due(base + 6_000) == 0  # nothing delivered twice
        assert again.deliver_due(base + 10_000) == 1
        wait_dispatched(store)
        assert read_queue(store, "Real", 1) == [b"d0", b"d1", b"d2"]
        again.persist()
        assert os.path.exists(svc.path + ".bak")


def test_an_unreadable_offset_file_stops_the_start_and_a_readable_bak_is_used(tmp_path) -> None:
    """With delayOffset.json and its .bak corrupt, the service started from zero and delivered
    every delayed message still in SCHEDULE_TOPIC_XXXX again; upstream refuses to start."""
    cfg = small_config(str(tmp_path / "s"))
    with DefaultMessageStore(cfg) as store:
        svc = ScheduleMessageService(store)
        os.makedirs(os.path.dirname(svc.path), exist_ok=True)
        for main, bak in ((b"{{", None), (b"{{", b"garbage"), (b"", b'{"offsetTable": "x"}')):
            with open(svc.path, "wb") as f:
                f.write(main)
            if bak is None:
                if os.path.exists(svc.path + ".bak"):
                    os.unlink(svc.path + ".bak")
            else:
                with open(svc.path + ".bak", "wb") as f:
                    f.write(bak)
            try:
                ScheduleMessageService(store).start()
                raise AssertionError("started")
            except RuntimeError as e:
                assert "delayOffset.json nor its .bak" in str(e)
            with open(svc.path, "rb") as f:
                assert f.read() == main  # left as it was, for the operator
        with open(svc.path + ".bak", "wb") as f:
            f.write(b'{"offsetTable": {"3": 0}}')
        good = ScheduleMessageService(store)
        assert good.load() and good.offset_table == {3: 0}


def test_offsets_outside_their_queue_are_corrected_at_start(tmp_path) -> None:
    """upstream's correctDelayOffset: level 1 at 999999 stalled until its queue got there."""
    cfg = small_config(str(tmp_path / "s"))
    with DefaultMessageStore(cfg) as store:
        r = store.put_messages([MessageExtBrokerInner(topic="Real", body=b"d", queue_id=0, properties={"DELAY": "1"})])
        assert r.is_ok()
        wait_dispatched(store)
        svc = ScheduleMessageService(store)
        os.makedirs(os.path.dirname(svc.path), exist_ok=True)
        with open(svc.path, "w") as f:
            json.dump({"offsetTable": {"1": 999999, "2": -5, "5": 3}}, f)
        svc.start()
        try:
            # level 1's queue holds one entry; levels 2 and 5 have no queue yet
            assert svc.offset_table == {1: 1, 2: 0, 5: 0}
        finally:
            svc.shutdown()


def test_a_clock_stepped_back_does_not_hold_delayed_messages_for_its_length(tmp_path) -> None:
    """A due time further ahead than the level's delay (the clock went back an hour) is capped
    at the time it is seen plus the level's delay: the hour is not waited out, and the 10 s
    are (RocketMQ's correctDeliverTimestamp delivers at once)."""
    cfg = small_config(str(tmp_path / "s"))
    with DefaultMessageStore(cfg) as store:
        r = store.put_messages([
            MessageExtBrokerInner(topic="Real", body=b"d%d" % i, queue_id=0, properties={"DELAY": "3"})  # 10 s
            for i in range(3)
        ])  # fmt: skip
        assert r.is_ok()
        wait_dispatched(store)
        base = store.look_message_by_offset(0).store_timestamp  # type: ignore[union-attr]
        svc = ScheduleMessageService(store)
        assert svc.deliver_due(base + 1_000) == 0  # 9 s ahead: within the level's 10 s, it waits
        # the clock steps back an hour: the due time is now 1 h + 10 s ahead, past the level's 10 s
        back = base - 3_600_000
        assert svc.deliver_due(back) == 0
        assert svc.deliver_due(back + 9_999) == 0
        assert svc.deliver_due(back + 10_000) == 3  # one cap for the level: not 10 s each
        wait_dispatched(store)
        assert read_queue(store, "Real", 0) == [b"d0", b"d1", b"d2"]


def test_a_small_step_back_neither_releases_long_delays_nor_holds_them_past_the_step(tmp_path) -> None:
    """A 5 s step back right after 2-hour and 10-second messages were stored: upstream's
    correction delivered all of them at once. Each is due at most the step late instead, and
    never before its real due time; a later in-bounds message is not caught by the cap."""
    cfg = small_config(str(tmp_path / "s"))
    with DefaultMessageStore(cfg) as store:
        r = store.put_messages([
            MessageExtBrokerInner(topic="Real", body=b"%s" % lv.encode(), queue_id=0, properties={"DELAY": lv})
            for lv in ("18", "3")  # 2 h, 10 s
        ])  # fmt: skip
        assert r.is_ok()
        wait_dispatched(store)
        base = store.look_message_by_offset(0).store_timestamp  # type: ignore[union-attr]
        svc = ScheduleMessageService(store)
        back = base - 5_000  # the clock, 5 s back, right after they were stored
        assert svc.deliver_due(back) == 0  # upstream: 2
        assert svc.deliver_due(back + 9_999) == 0
        assert svc.deliver_due(back + 10_000) == 1  # the 10 s one, 10 s of real time after it was stored
        assert svc.deliver_due(back + 7_200_000 - 1) == 0
        assert svc.deliver_due(back + 7_200_000) == 1  # the 2 h one, 2 h of real time after
        wait_dispatched(store)
        assert read_queue(store, "Real", 0) == [b"3", b"18"]
        # a message stored later, in bounds, keeps its own due time (the cap went with the step)
        r = store.put_messages([MessageExtBrokerInner(topic="Real", body=b"later", queue_id=0,
                                                      properties={"DELAY": "3"})])  # fmt: skip
        assert r.is_ok()
        wait_dispatched(store)
        later = store.look_message_by_offset(r.append_message_result.wrote_offset).store_timestamp  # type: ignore[union-attr]
        assert svc.deliver_due(later + 9_999) == 0
        assert svc.deliver_due(later + 10_000) == 1
