"""Concurrent writers and readers, the directory lock, and the message arrival listener."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from pumice.common.java_hash import tags_code
from pumice.common.message_decoder import decode_message
from pumice.store import (
    DefaultMessageStore,
    GetMessageStatus,
    MessageExtBrokerInner,
    MessageStoreConfig,
    StoreLockedError,
)
from tests.helpers.waiting import wait_dispatched

WRITERS = 4
PER_WRITER = 2000
SHARED_QUEUE = WRITERS  # queues 0..3 are owned by one writer each; queue 4 is shared
READERS = 2
DEADLINE_S = 30.0


def writer_plan(w: int) -> list[tuple[int, int]]:
    """(sequence, queue) for every message of writer ``w``: every 4th goes to the shared queue."""
    return [(seq, SHARED_QUEUE if seq % 4 == 3 else w) for seq in range(PER_WRITER)]


def expected_per_queue() -> dict[int, int]:
    counts = dict.fromkeys(range(WRITERS + 1), 0)
    for w in range(WRITERS):
        for _, q in writer_plan(w):
            counts[q] += 1
    return counts


def test_writers_and_readers_in_parallel(store: DefaultMessageStore) -> None:
    errors: list[BaseException] = []
    expected = expected_per_queue()
    deadline = time.monotonic() + DEADLINE_S

    def write(w: int) -> None:
        try:
            plan = writer_plan(w)
            i = 0
            while i < len(plan):
                if w % 2 == 1 and plan[i][1] == w:  # odd writers also send batches of up to 5 to their own queue
                    j = i
                    while j < len(plan) and j - i < 5 and plan[j][1] == w:
                        j += 1
                    batch = [
                        MessageExtBrokerInner(topic="C", body=f"{w}:{seq}:".encode() * 3, queue_id=q)
                        for seq, q in plan[i:j]
                    ]
                    r = store.put_messages(batch)
                    assert r.is_ok(), r
                    i = j
                else:
                    seq, q = plan[i]
                    r = store.put_message(MessageExtBrokerInner(topic="C", body=f"{w}:{seq}:".encode() * 3, queue_id=q))
                    assert r.is_ok(), r
                    i += 1
        except BaseException as e:
            errors.append(e)

    reads: list[dict[int, list[tuple[int, int, int]]]] = [{} for _ in range(READERS)]

    def read(r_idx: int) -> None:
        try:
            seen = reads[r_idx]
            for q in range(WRITERS + 1):
                seen[q] = []
            offsets = dict.fromkeys(range(WRITERS + 1), 0)
            while any(len(seen[q]) < expected[q] for q in seen):
                if time.monotonic() > deadline:
                    raise AssertionError(f"reader {r_idx} timed out: {[len(v) for v in seen.values()]}")
                progressed = False
                for q in range(WRITERS + 1):
                    if len(seen[q]) >= expected[q]:
                        continue
                    res = store.get_message(f"g{r_idx}", "C", q, offsets[q], 32)
                    assert res is not None
                    with res:
                        if res.status is GetMessageStatus.FOUND:
                            for qoff, sbr in zip(res.queue_offsets, res.buffers, strict=True):
                                m = decode_message(sbr)
                                assert m.queue_offset == qoff and m.queue_id == q
                                w, seq, _ = m.body.split(b":", 2)
                                assert m.body == f"{int(w)}:{int(seq)}:".encode() * 3
                                seen[q].append((qoff, int(w), int(seq)))
                            progressed = True
                        else:
                            assert res.status in (
                                GetMessageStatus.NO_MESSAGE_IN_QUEUE,  # queue made, first entry not yet in
                                GetMessageStatus.OFFSET_OVERFLOW_ONE,  # caught up
                            ), res.status
                    if res.status is GetMessageStatus.FOUND:
                        offsets[q] = res.next_begin_offset
                if not progressed:
                    time.sleep(0.0005)  # polling for more data, not synchronisation
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=read, args=(r,)) for r in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=DEADLINE_S + 5)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    assert not errors, errors

    wait_dispatched(store)
    for q, n in expected.items():
        assert store.get_max_offset_in_queue("C", q) == n
        assert store.commit_log.topic_queue_table[("C", q)] == n
    for seen in reads:
        for q, items in seen.items():
            assert [qoff for qoff, _, _ in items] == list(range(expected[q])), f"queue {q} not contiguous"
            pairs = [(w, seq) for _, w, seq in items]
            assert len(set(pairs)) == len(pairs) == expected[q], f"queue {q}: duplicates or gaps"
            if q < WRITERS:  # an owned queue holds its writer's messages in send order
                assert {w for w, _ in pairs} == {q}
                assert [seq for _, seq in pairs] == [seq for seq, qq in writer_plan(q) if qq == q]
            else:  # the shared queue keeps each writer's own order
                for w in range(WRITERS):
                    mine = [seq for ww, seq in pairs if ww == w]
                    assert mine == [seq for seq, qq in writer_plan(w) if qq == SHARED_QUEUE]
    assert reads[0] == reads[1]


def test_second_store_on_the_same_directory_is_locked_out(
    store: DefaultMessageStore, store_config: MessageStoreConfig
) -> None:
    assert store.put_message(MessageExtBrokerInner(topic="T", body=b"x")).is_ok()
    other = DefaultMessageStore(MessageStoreConfig(**vars(store_config)))
    try:
        with pytest.raises(StoreLockedError):
            other.load()
    finally:
        other.allocate_mapped_file_service.shutdown()
    # the first store is unharmed
    assert store.put_message(MessageExtBrokerInner(topic="T", body=b"y")).is_ok()
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("T", 0) == 2


def test_store_directory_is_free_again_after_shutdown(store_config: MessageStoreConfig) -> None:
    first = DefaultMessageStore(store_config)
    assert first.load()
    first.start()
    first.shutdown()
    with DefaultMessageStore(MessageStoreConfig(**vars(store_config))) as second:
        assert second.put_message(MessageExtBrokerInner(topic="T", body=b"x")).is_ok()


@dataclass
class Arrival:
    topic: str
    queue_id: int
    logic_offset: int
    tags_code: int
    msg_store_time: int
    filter_bit_map: bytes | None
    properties: dict[str, str]


class RecordingListener:
    def __init__(self) -> None:
        self.calls: list[Arrival] = []
        self._lock = threading.Lock()

    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        msg_store_time: int,
        filter_bit_map: bytes | None,
        properties: dict[str, str],
    ) -> None:
        with self._lock:
            self.calls.append(
                Arrival(topic, queue_id, logic_offset, tags_code, msg_store_time, filter_bit_map, properties)
            )

    def arriving_batch(self, requests) -> None:
        for r in requests:
            self.arriving(r.topic, r.queue_id, r.consume_queue_offset + 1, r.tags_code, r.store_timestamp, None, None)


def test_arrival_listener_is_told_about_every_dispatched_message(store_config: MessageStoreConfig) -> None:
    listener = RecordingListener()
    sent: list[tuple[str, int, int, str, int]] = []
    with DefaultMessageStore(store_config, listener) as s:
        for i in range(30):
            topic = "A" if i % 3 else "B"
            q = i % 2
            tag = f"tag{i % 4}"
            r = s.put_message(MessageExtBrokerInner(topic=topic, body=b"x", queue_id=q, properties={"TAGS": tag}))
            assert r.is_ok() and r.append_message_result is not None
            res = r.append_message_result
            sent.append((topic, q, res.logics_offset, tag, res.store_timestamp))
        batch = [MessageExtBrokerInner(topic="A", body=b"b", queue_id=5) for _ in range(4)]
        r = s.put_messages(batch)
        assert r.is_ok() and r.append_message_result is not None
        res = r.append_message_result
        sent += [("A", 5, qo, "", res.store_timestamp) for qo in res.logics_offsets]
        wait_dispatched(s)
        calls = list(listener.calls)
    assert len(calls) == len(sent)
    for call, (topic, q, qoff, tag, ts) in zip(calls, sent, strict=True):
        assert (call.topic, call.queue_id, call.logic_offset) == (topic, q, qoff + 1)
        assert call.tags_code == (tags_code(tag) if tag else 0)
        assert call.msg_store_time == ts
        assert call.properties is None  # not decoded per message: no SQL92 filter reads them
    for topic, q in {(t, q) for t, q, *_ in sent}:
        mine = [c.logic_offset for c in calls if (c.topic, c.queue_id) == (topic, q)]
        assert mine == list(range(1, len(mine) + 1))
