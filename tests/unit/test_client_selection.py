"""pumice.client queue choice: round robin, failed-broker skipping, latency fault tolerance,
hash selectors and the averaging allocation."""

from __future__ import annotations

from collections import Counter

from pumice.client.allocate import allocate_averagely
from pumice.client.latency_fault_tolerance import LatencyFaultTolerance, not_available_duration
from pumice.client.message import Message, MessageQueue
from pumice.client.queue_selector import (
    RoundRobin,
    by_arg_hash,
    hash_queue_index,
    java_hash,
    select_by_hash,
    select_one_message_queue,
)

MQS = [MessageQueue("T", b, q) for b in ("a", "b") for q in range(2)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_round_robin_visits_every_queue_in_turn() -> None:
    rr = RoundRobin(0)
    assert [select_one_message_queue(MQS, rr) for _ in range(8)] == MQS * 2


def test_retry_skips_the_broker_that_failed_last() -> None:
    rr = RoundRobin(0)
    picks = [select_one_message_queue(MQS, rr, last_broker_name="a") for _ in range(6)]
    assert {m.broker_name for m in picks} == {"b"}
    # a single broker: nothing else to pick, so it is used again
    only_a = MQS[:2]
    assert select_one_message_queue(only_a, RoundRobin(0), last_broker_name="a").broker_name == "a"


def test_latency_durations_follow_the_java_table() -> None:
    assert [not_available_duration(x) for x in (0, 99, 549, 550, 1000, 2500, 3000, 14999, 15000)] == [
        0, 0, 0, 30_000, 60_000, 120_000, 180_000, 180_000, 600_000]  # fmt: skip


def test_fault_tolerance_avoids_failed_broker_until_it_recovers() -> None:
    clock = Clock()
    ft = LatencyFaultTolerance(clock)
    ft.update_fault_item("a", 5, isolation=True)  # a failure: 600 s
    ft.update_fault_item("b", 20)  # fast: stays available
    assert not ft.is_available("a") and ft.is_available("b") and ft.is_available("unknown")
    rr = RoundRobin(0)
    assert {select_one_message_queue(MQS, rr, None, ft).broker_name for _ in range(10)} == {"b"}
    clock.now += 600_000
    assert ft.is_available("a")
    assert {select_one_message_queue(MQS, rr, None, ft).broker_name for _ in range(10)} == {"a", "b"}


def test_slow_broker_is_avoided_for_the_latency_step() -> None:
    clock = Clock()
    ft = LatencyFaultTolerance(clock)
    ft.update_fault_item("a", 1200)  # slow: 60 s
    clock.now += 59_999
    assert not ft.is_available("a")
    clock.now += 1
    assert ft.is_available("a")


def test_when_every_broker_is_down_the_first_to_recover_is_used() -> None:
    clock = Clock()
    ft = LatencyFaultTolerance(clock)
    ft.update_fault_item("a", 0, isolation=True)  # until +600 s
    ft.update_fault_item("b", 2000)  # until +120 s
    picks = Counter(select_one_message_queue(MQS, RoundRobin(0), None, ft).broker_name for _ in range(5))
    assert picks == Counter({"b": 5})
    assert ft.pick_one_at_least() == "b"


def test_hash_selectors_are_stable_and_java_compatible() -> None:
    assert java_hash("hello") == 99162322  # Java: "hello".hashCode()
    assert java_hash(-7) == -7 and hash_queue_index(-7, 3) == 1  # Java: -7 % 3 == -1, abs → 1
    assert java_hash(2**40 + 5) == 261  # Java: Long.hashCode = (int) (v ^ (v >>> 32)) = 5 ^ 256
    h = java_hash("order-1")
    assert h < 0 and hash_queue_index("order-1", 4) == abs(h) % 4
    sel = select_by_hash("order-1")
    msg = Message("T", b"x")
    assert len({sel(MQS, msg, None) for _ in range(5)}) == 1
    assert sel(MQS, msg, None) == by_arg_hash(MQS, msg, "order-1") == MQS[hash_queue_index("order-1", 4)]
    spread = {by_arg_hash(MQS, msg, f"k{i}") for i in range(40)}
    assert spread == set(MQS)


def test_allocate_averagely_splits_contiguous_runs() -> None:
    mqs = [MessageQueue("T", "b", i) for i in range(5)]
    cids = ["c2", "c1"]
    assert allocate_averagely("c1", mqs, cids) == mqs[:3]
    assert allocate_averagely("c2", mqs, cids) == mqs[3:]
    assert allocate_averagely("c9", mqs, cids) == []
    many = [f"c{i}" for i in range(7)]
    got = [allocate_averagely(c, mqs, many) for c in sorted(many)]
    assert [len(g) for g in got] == [1, 1, 1, 1, 1, 0, 0]
    assert sorted(m for g in got for m in g) == mqs
