"""How a producer picks the queue of a send.

* ``select_one_message_queue``: the default. Round robin over the topic's write queues,
  skipping the broker the previous attempt failed on, and (with a
  ``LatencyFaultTolerance``) brokers that are currently unavailable; when every broker is
  unavailable, the one that recovers first.
* a selector ``callable(mqs, msg, arg) -> MessageQueue`` passed to ``send``: the caller
  decides (ordered messages). ``select_by_hash(sharding_key)`` makes one that maps a key to a
  fixed queue (all messages of one key stay in order); ``by_arg_hash`` and ``by_random`` are
  RocketMQ's SelectMessageQueueByHash (with ``arg``) and SelectMessageQueueByRandom.

Hashes are Java's ``hashCode`` (strings) or the value (ints), so a key maps to the same
queue as from a Java producer: ``abs(hash % len(mqs))`` with Java's truncating ``%``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

from pumice.client.latency_fault_tolerance import LatencyFaultTolerance
from pumice.client.message import Message, MessageQueue
from pumice.common.java_hash import java_string_hash

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def java_hash(key: Any) -> int:
    if isinstance(key, bool):
        return 1231 if key else 1237
    if isinstance(key, int):
        if -(2**31) <= key < 2**31:  # Integer.hashCode
            return key
        v = key & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int) (v ^ (v >>> 32))
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    return java_string_hash(str(key))


def hash_queue_index(key: Any, n: int) -> int:
    return abs(java_hash(key)) % n


def select_by_hash(sharding_key: Any) -> QueueSelector:
    """A selector sending every message of ``sharding_key`` to the same queue."""

    def selector(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[hash_queue_index(sharding_key, len(mqs))]

    return selector


def by_arg_hash(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    return mqs[hash_queue_index(arg, len(mqs))]


def by_random(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    return random.choice(list(mqs))


class RoundRobin:
    """A counter per producer (Java keeps one per topic and thread); starts at random."""

    def __init__(self, start: int | None = None) -> None:
        self._it = itertools.count(random.randrange(1 << 16) if start is None else start)

    def next(self) -> int:
        return next(self._it)


def select_one_message_queue(
    mqs: Sequence[MessageQueue],
    counter: RoundRobin,
    last_broker_name: str | None = None,
    fault: LatencyFaultTolerance | None = None,
) -> MessageQueue:
    if not mqs:
        raise ValueError("no message queue to select from")
    n = len(mqs)
    start = counter.next()
    # 1. the next queue on an available broker other than the one that just failed
    for i in range(n):
        mq = mqs[(start + i) % n]
        if mq.broker_name != last_broker_name and (fault is None or fault.is_available(mq.broker_name)):
            return mq
    if fault is not None:
        # 2. any available broker (the last one included), 3. the one that recovers first
        for i in range(n):
            mq = mqs[(start + i) % n]
            if fault.is_available(mq.broker_name):
                return mq
        best = fault.pick_one_at_least(sorted({m.broker_name for m in mqs}))
        same = [m for m in mqs if m.broker_name == best]
        if same:
            return same[start % len(same)]
    return mqs[start % n]
