"""GroupTransferService: SYNC_MASTER puts wait here until a slave has acknowledged them.

A put's request carries ``next_offset`` (its wrote offset + wrote bytes). It completes with
True once ``push2SlaveMaxOffset`` (the highest offset any slave acknowledged) reaches it,
and with False once it has waited ``syncFlushTimeout``; the put then answers
FLUSH_SLAVE_TIMEOUT.

RocketMQ runs a thread that re-checks the pending requests every 10 ms. Here the
acknowledgement itself completes them: ``notify_transfer_some`` runs on the HA read thread
that received the slave's offset, so a waiter is woken by that read, with no polling hop.
Requests expire lazily: each new request and each acknowledgement fails the ones whose
time is up, and ``expire`` does it for callers that stopped putting (the HA service's
housekeeping). Requests are kept in the order they were made, which is offset order for a
store with one writer.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable


class TransferRequest:
    __slots__ = ("callback", "deadline", "next_offset")

    def __init__(self, next_offset: int, deadline: float, callback: Callable[[bool], None]) -> None:
        self.next_offset = next_offset
        self.deadline = deadline
        self.callback = callback


class GroupTransferService:
    def __init__(self, timeout_ms: int) -> None:
        self.timeout_s = timeout_ms / 1000
        self.push2_slave_max_offset = 0
        self._lock = threading.Lock()
        self._requests: collections.deque[TransferRequest] = collections.deque()

    def put_request(self, next_offset: int, callback: Callable[[bool], None]) -> None:
        """Call ``callback(True)`` once a slave has acknowledged ``next_offset``, or
        ``callback(False)`` after the timeout."""
        now = time.monotonic()
        done: list[tuple[Callable[[bool], None], bool]] = []
        with self._lock:
            if self.push2_slave_max_offset >= next_offset:
                done.append((callback, True))
            else:
                self._requests.append(TransferRequest(next_offset, now + self.timeout_s, callback))
            self._take_expired(now, done)
        for cb, ok in done:
            cb(ok)

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset``: raise push2SlaveMaxOffset (it only grows) and
        complete the requests it covers."""
        done: list[tuple[Callable[[bool], None], bool]] = []
        with self._lock:
            if offset <= self.push2_slave_max_offset:
                return
            self.push2_slave_max_offset = offset
            reqs = self._requests
            while reqs and reqs[0].next_offset <= offset:
                done.append((reqs.popleft().callback, True))
            # requests out of offset order (several writers) are rare: check the rest too
            if reqs and any(r.next_offset <= offset for r in reqs):
                keep: collections.deque[TransferRequest] = collections.deque()
                for r in reqs:
                    if r.next_offset <= offset:
                        done.append((r.callback, True))
                    else:
                        keep.append(r)
                self._requests = keep
            self._take_expired(time.monotonic(), done)
        for cb, ok in done:
            cb(ok)

    def expire(self) -> None:
        done: list[tuple[Callable[[bool], None], bool]] = []
        with self._lock:
            self._take_expired(time.monotonic(), done)
        for cb, ok in done:
            cb(ok)

    def _take_expired(self, now: float, done: list[tuple[Callable[[bool], None], bool]]) -> None:
        reqs = self._requests
        while reqs and reqs[0].deadline <= now:
            done.append((reqs.popleft().callback, False))

    def shutdown(self) -> None:
        """Fail everything still waiting."""
        with self._lock:
            reqs, self._requests = self._requests, collections.deque()
        for r in reqs:
            r.callback(False)

    @property
    def pending(self) -> int:
        return len(self._requests)
