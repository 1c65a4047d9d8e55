"""ProcessQueue: the messages a push consumer pulled from one queue and has not finished yet.

RocketMQ's ProcessQueue keeps the in-flight messages of a queue in a TreeMap keyed by queue
offset. The offset a consumer may commit for the queue is the smallest offset still in flight
(or, when nothing is, one past the largest offset it ever held), so a crash never skips a
message that was pulled but not processed: it is pulled again (at-least-once).

* concurrent consumption: ``put_messages`` when a pull returns, ``remove_messages`` when a
  handler call is over (whatever its result, once the message is acknowledged or given back
  to the broker); its return value is the offset to store (-1: nothing to store);
* orderly consumption: ``take_messages(n)`` hands out the next ``n`` messages in offset order
  (they stay in flight while "consuming"), ``commit()`` finishes the taken ones and returns the
  offset to store, ``make_messages_to_consume_again`` puts taken messages back for a retry;
  ``consuming`` tells whether a consume request for this queue is already scheduled;
* ``dropped`` is set when a rebalance takes the queue away (its pull loop stops, late consume
  results are not stored); ``locked`` / ``last_lock_time`` track the broker lock of orderly
  consumers (the lock counts as expired after ``LOCK_MAX_LIVE_TIME_S``, 30 s, as in Java).

``flow_control`` is the pull loop's decision: whether to delay the next pull because too many
messages (``pullThresholdForQueue``), too many bytes (``pullThresholdSizeForQueue``) or, for
concurrent consumption, too wide an offset span (``consumeConcurrentlyMaxSpan``) are cached.

Everything runs on one event loop; there is no locking here.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Iterable

from pumice.client.message import MessageExt, MessageQueue

LOCK_MAX_LIVE_TIME_S = 30.0  # Java's rocketmq.client.rebalance.lockMaxLiveTime
PULL_MAX_IDLE_TIME_S = 120.0


class ProcessQueue:
    def __init__(self, mq: MessageQueue, pull_offset: int = 0) -> None:
        self.mq = mq
        self.pull_offset = pull_offset  # where the next pull starts
        self._msgs: dict[int, MessageExt] = {}
        self._offsets: list[int] = []  # sorted keys of _msgs
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.msg_size = 0  # body bytes in flight
        self.queue_offset_max = -1
        self.consuming = False  # a consume request is scheduled or running
        self.dropped = False
        self.locked = False
        self.last_lock_time = 0.0
        self.last_pull_time = time.monotonic()
        self.last_consume_time = time.monotonic()
        self.consume_lock = asyncio.Lock()  # orderly: one handler call at a time for this queue
        self.pull_task: asyncio.Task[None] | None = None

    # -- state ------------------------------------------------------------------------------

    @property
    def msg_count(self) -> int:
        return len(self._offsets)

    @property
    def max_span(self) -> int:
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    def has_messages(self) -> bool:
        return bool(self._offsets)

    def in_flight_offsets(self) -> list[int]:
        return list(self._offsets)

    def commit_offset(self) -> int:
        """The offset safe to store now: the smallest in flight, else one past the largest
        ever held (-1 if the queue never held a message)."""
        if self._offsets:
            return self._offsets[0]
        return self.queue_offset_max + 1 if self.queue_offset_max >= 0 else -1

    def is_lock_expired(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) - self.last_lock_time > LOCK_MAX_LIVE_TIME_S

    def is_pull_expired(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) - self.last_pull_time > PULL_MAX_IDLE_TIME_S

    # -- concurrent -------------------------------------------------------------------------

    def put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        """Add pulled messages (offsets already held are ignored); True when a consume request
        should be scheduled for an orderly consumer (messages there and none scheduled)."""
        added = 0
        for m in msgs:
            off = m.queue_offset
            if off in self._msgs:
                continue
            self._msgs[off] = m
            if not self._offsets or off > self._offsets[-1]:
                self._offsets.append(off)
            else:
                bisect.insort(self._offsets, off)
            self.msg_size += len(m.body)
            self.queue_offset_max = max(self.queue_offset_max, off)
            added += 1
        dispatch = False
        if self._offsets and not self.consuming:
            dispatch = True
            self.consuming = True
        return dispatch

    def _remove(self, off: int) -> MessageExt | None:
        m = self._msgs.pop(off, None)
        if m is None:
            return None
        i = bisect.bisect_left(self._offsets, off)
        del self._offsets[i]
        self.msg_size -= len(m.body)
        self._consuming.pop(off, None)
        return m

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Finish messages; the offset to store (see ``commit_offset``), -1 if there was
        nothing in flight."""
        if not self._offsets:
            return -1
        self.last_consume_time = time.monotonic()
        for m in msgs:
            self._remove(m.queue_offset)
        return self.commit_offset()

    def clear(self) -> None:
        self._msgs.clear()
        self._offsets.clear()
        self._consuming.clear()
        self.msg_size = 0
        self.consuming = False

    # -- orderly ----------------------------------------------------------------------------

    def take_messages(self, n: int) -> list[MessageExt]:
        """The next ``n`` messages after the ones already taken, in offset order; when none is
        left, ``consuming`` goes back to False (the next put schedules a request again)."""
        self.last_consume_time = time.monotonic()
        out: list[MessageExt] = []
        i = len(self._consuming)  # taken messages are always the smallest offsets
        while len(out) < n and i < len(self._offsets):
            m = self._msgs[self._offsets[i]]
            self._consuming[m.queue_offset] = m
            out.append(m)
            i += 1
        if not out and len(self._consuming) == len(self._offsets):
            self.consuming = False
        return out

    def commit(self) -> int:
        """Finish every taken message; the offset to store (-1 if none was taken)."""
        if not self._consuming:
            return -1
        for off in list(self._consuming):
            self._remove(off)
        return self.commit_offset()

    def make_messages_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        for m in msgs:
            self._consuming.pop(m.queue_offset, None)

    @property
    def consuming_count(self) -> int:
        return len(self._consuming)


def flow_control(
    pq: ProcessQueue,
    threshold_count: int = 1000,
    threshold_size_bytes: int = 100 * 1024 * 1024,
    max_span: int | None = 2000,
) -> str | None:
    """Why the next pull of ``pq`` must wait (None: pull now). ``max_span`` None disables the
    span check (orderly consumers, which consume in order anyway)."""
    if pq.msg_count > threshold_count:
        return f"{pq.msg_count} messages cached (pullThresholdForQueue {threshold_count})"
    if pq.msg_size > threshold_size_bytes:
        return f"{pq.msg_size} bytes cached (pullThresholdSizeForQueue {threshold_size_bytes})"
    if max_span is not None and pq.max_span > max_span:
        return f"offset span {pq.max_span} cached (consumeConcurrentlyMaxSpan {max_span})"
    return None
