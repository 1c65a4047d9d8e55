"""ScheduleMessageService: due messages go back to their real topic; progress survives restarts."""

from __future__ import annotations

import json
import os

from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from pumice.store.message import SCHEDULE_TOPIC
from pumice.store.schedule_message_service import ScheduleMessageService
from tests.conftest import read_queue, small_config, wait_dispatched


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
        assert m is not None and "DELAY" not in m.properties and "REAL_TOPIC" not in m.properties
        assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 1) == 2  # level 2 is queue 1
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
