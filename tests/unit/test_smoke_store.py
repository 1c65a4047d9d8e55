"""End-to-end: put, dispatch, get, query, reopen."""

from __future__ import annotations

from pumice.store import DefaultMessageStore, GetMessageStatus, MessageExtBrokerInner
from tests.conftest import wait_dispatched


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
