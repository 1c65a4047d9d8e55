"""Store lookups: offset by time, earliest message time, min/max offsets, records by offset."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from pumice.store import commit_log as commit_log_module
from tests.helpers.waiting import wait_dispatched

T0 = 1_700_000_000_000


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Store timestamps under test control: set ``now[0]`` before a put."""
    now = [T0]
    monkeypatch.setattr(commit_log_module, "_now_ms", lambda: now[0])
    yield now


def put_at(store: DefaultMessageStore, clock: list[int], ts: int, body: bytes, queue_id: int = 0, n: int = 1) -> None:
    clock[0] = ts
    msgs = [MessageExtBrokerInner(topic="T", body=body, queue_id=queue_id) for _ in range(n)]
    r = store.put_messages(msgs)
    assert r.is_ok(), r
    assert r.append_message_result is not None and r.append_message_result.store_timestamp == ts


@pytest.fixture
def timed(store: DefaultMessageStore, fake_clock: list[int]) -> DefaultMessageStore:
    """Queue T/0 holds offsets 0..4 stored at T0 + 0, 10, 20, 30, 40 s; T/1 is interleaved noise."""
    for i in range(5):
        put_at(store, fake_clock, T0 + 10_000 * i, f"m{i}".encode())
        put_at(store, fake_clock, T0 + 10_000 * i + 5_000, b"noise", queue_id=1)
    wait_dispatched(store)
    return store


def test_offset_by_time_exact_hits(timed: DefaultMessageStore) -> None:
    for i in range(5):
        assert timed.get_offset_in_queue_by_time("T", 0, T0 + 10_000 * i) == i


def test_offset_by_time_between_two_messages_picks_the_closer(timed: DefaultMessageStore) -> None:
    assert timed.get_offset_in_queue_by_time("T", 0, T0 + 10_000 + 1) == 1
    assert timed.get_offset_in_queue_by_time("T", 0, T0 + 10_000 + 4_999) == 1
    assert timed.get_offset_in_queue_by_time("T", 0, T0 + 10_000 + 5_001) == 2
    assert timed.get_offset_in_queue_by_time("T", 0, T0 + 19_999) == 2


def test_offset_by_time_tie_goes_to_the_earlier(timed: DefaultMessageStore) -> None:
    for i in range(4):
        assert timed.get_offset_in_queue_by_time("T", 0, T0 + 10_000 * i + 5_000) == i


def test_offset_by_time_outside_the_stored_range(timed: DefaultMessageStore) -> None:
    assert timed.get_offset_in_queue_by_time("T", 0, T0 - 1) == 0
    assert timed.get_offset_in_queue_by_time("T", 0, 0) == 0
    assert timed.get_offset_in_queue_by_time("T", 0, T0 + 40_001) == 4
    assert timed.get_offset_in_queue_by_time("T", 0, T0 + 10**9) == 4


def test_offset_by_time_respects_the_min_offset(timed: DefaultMessageStore) -> None:
    cq = timed.get_consume_queue("T", 0)
    assert cq is not None
    cq.correct_min_offset(timed.get_commit_log_offset_in_queue("T", 0, 2))
    assert timed.get_offset_in_queue_by_time("T", 0, T0) == 2
    assert timed.get_offset_in_queue_by_time("T", 0, T0 + 30_000) == 3


def test_offset_by_time_with_equal_timestamps(store: DefaultMessageStore, fake_clock: list[int]) -> None:
    put_at(store, fake_clock, T0, b"a", n=3)  # offsets 0..2 share one store time
    put_at(store, fake_clock, T0 + 1_000, b"b", n=3)  # offsets 3..5
    wait_dispatched(store)
    assert store.get_offset_in_queue_by_time("T", 0, T0) in (0, 1, 2)
    assert store.get_offset_in_queue_by_time("T", 0, T0 + 1_000) in (3, 4, 5)
    assert store.get_offset_in_queue_by_time("T", 0, T0 + 400) in (0, 1, 2)
    assert store.get_offset_in_queue_by_time("T", 0, T0 + 600) in (3, 4, 5)


def test_offset_by_time_with_real_clock(store: DefaultMessageStore) -> None:
    stamps = []
    for i in range(5):
        r = store.put_message(MessageExtBrokerInner(topic="T", body=f"{i}".encode()))
        assert r.append_message_result is not None
        stamps.append(r.append_message_result.store_timestamp)
        time.sleep(0.003)  # only to make store timestamps differ
    wait_dispatched(store)
    assert stamps == sorted(set(stamps))
    for i, ts in enumerate(stamps):
        assert store.get_offset_in_queue_by_time("T", 0, ts) == i
    assert store.get_offset_in_queue_by_time("T", 0, stamps[0] - 1000) == 0
    assert store.get_offset_in_queue_by_time("T", 0, stamps[-1] + 1000) == 4


def test_offset_by_time_unknown_queue(store: DefaultMessageStore) -> None:
    assert store.get_offset_in_queue_by_time("Nope", 0, T0) == 0


def test_earliest_message_time(timed: DefaultMessageStore) -> None:
    assert timed.get_earliest_message_time("T", 0) == T0
    assert timed.get_earliest_message_time("T", 1) == T0 + 5_000
    assert timed.get_earliest_message_time() == T0
    assert timed.get_earliest_message_time("Nope", 0) == -1
    cq = timed.get_consume_queue("T", 0)
    assert cq is not None
    cq.correct_min_offset(timed.get_commit_log_offset_in_queue("T", 0, 3))
    assert timed.get_earliest_message_time("T", 0) == T0 + 30_000
    assert timed.get_message_store_timestamp("T", 0, 4) == T0 + 40_000


def test_earliest_message_time_of_an_empty_store(store: DefaultMessageStore) -> None:
    assert store.get_earliest_message_time() == -1
    assert store.get_min_phy_offset() == -1
    assert store.get_max_phy_offset() == 0


def test_min_and_max_offsets(store: DefaultMessageStore) -> None:
    assert store.get_min_offset_in_queue("T", 0) == -1
    assert store.get_max_offset_in_queue("T", 0) == 0
    for i in range(7):
        assert store.put_message(MessageExtBrokerInner(topic="T", body=b"x", queue_id=i % 2)).is_ok()
    wait_dispatched(store)
    assert (store.get_min_offset_in_queue("T", 0), store.get_max_offset_in_queue("T", 0)) == (0, 4)
    assert (store.get_min_offset_in_queue("T", 1), store.get_max_offset_in_queue("T", 1)) == (0, 3)
    assert store.get_max_offset_in_queue("T", 2) == 0
    assert store.get_min_phy_offset() == 0
    assert store.get_max_phy_offset() == store.commit_log.get_max_offset() > 0


def test_look_message_by_offset_and_commit_log_offset_in_queue(store: DefaultMessageStore) -> None:
    wrote: dict[int, list[int]] = {0: [], 1: []}
    sizes: dict[int, int] = {}
    for i in range(10):
        q = i % 2
        r = store.put_message(
            MessageExtBrokerInner(topic="T", body=f"body{i}".encode(), queue_id=q, properties={"TAGS": f"t{i}"})
        )
        assert r.append_message_result is not None
        wrote[q].append(r.append_message_result.wrote_offset)
        sizes[r.append_message_result.wrote_offset] = r.append_message_result.wrote_bytes
    wait_dispatched(store)
    for q in (0, 1):
        for j, off in enumerate(wrote[q]):
            assert store.get_commit_log_offset_in_queue("T", q, j) == off
            m = store.look_message_by_offset(off)
            assert m is not None
            i = 2 * j + q
            assert (m.topic, m.queue_id, m.queue_offset, m.body) == ("T", q, j, f"body{i}".encode())
            assert m.commit_log_offset == off
            assert m.store_size == sizes[off]
            assert m.tags == f"t{i}"
    assert store.get_commit_log_offset_in_queue("T", 0, 5) == 0
    assert store.get_commit_log_offset_in_queue("Nope", 0, 0) == 0
    assert store.look_message_by_offset(store.get_max_phy_offset()) is None
    assert store.look_message_by_offset(10**9) is None
    assert store.look_message_by_offset(wrote[0][1] + 4) is None  # not the start of a record
