"""End-to-end: put, dispatch, get, query, reopen."""

from __future__ import annotations

from pumice.store import DefaultMessageStore, GetMessageStatus, MessageExtBrokerInner
from tests.helpers.waiting import wait_dispatched


def test_put_dispatch_get_and_reopen(store: DefaultMessageStore) -> None:
    for i in range(300):
        r = store.put_message(
            MessageExtBrokerInner(topic="T", body=b"x" * 200, queue_id=i % 3, properties={"KEYS": f"k{i}"})
        )
        assert r.is_ok(), r
    wait_dispatched(store)
    assert [store.get_max_offset_in_queue("T", q) for q in range(3)] == [100, 100, 100]
    with store.get_message("g", "T", 1, 0, 32) as res:
        assert res.status is GetMessageStatus.FOUND
        assert res.message_count == 32
        assert res.next_begin_offset == 32
    (m,) = store.query_message("T", "k250")
    assert m.queue_offset == 250 // 3 and m.queue_id == 250 % 3
    cfg = store.config
    store.shutdown()
    with DefaultMessageStore(cfg) as again:
        assert again.get_max_offset_in_queue("T", 2) == 100
        r = again.put_message(MessageExtBrokerInner(topic="T", body=b"y", queue_id=2))
        assert r.append_message_result is not None and r.append_message_result.logics_offset == 100


def test_store_layout_follows_rocketmq(store: DefaultMessageStore) -> None:
    import os
    import re

    store.put_message(MessageExtBrokerInner(topic="TopicTest", body=b"b", queue_id=2, properties={"KEYS": "k"}))
    wait_dispatched(store)
    root = store.config.store_path_root_dir
    assert {"commitlog", "consumequeue", "index", "checkpoint", "abort", "lock", "config"} <= set(os.listdir(root))
    assert os.listdir(os.path.join(root, "commitlog"))[0] == "00000000000000000000"
    assert os.listdir(os.path.join(root, "consumequeue", "TopicTest", "2")) == ["00000000000000000000"]
    (index_name,) = os.listdir(os.path.join(root, "index"))
    assert re.fullmatch(r"20\d{15}", index_name)  # yyyyMMddHHmmssSSS
    assert os.path.getsize(os.path.join(root, "checkpoint")) == 4096
    cfg = store.config
    store.shutdown()
    assert not os.path.exists(os.path.join(root, "abort"))  # a clean stop removes it
    assert cfg.store_path_root_dir == root
