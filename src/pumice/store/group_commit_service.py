"""GroupCommitService: SYNC_FLUSH as a group commit.

A put that must be on disk hands a ``GroupCommitRequest`` (the offset its data ends at)
to this thread and waits on the request's future. The thread wakes every 10 ms or when a
request arrives, swaps the write list for the read list, flushes until the furthest
requested offset is on disk (one ``fdatasync`` per file touched, GIL released) and
completes every request the flush covered. A waiter that is not covered within
``syncFlushTimeout`` gets FLUSH_DISK_TIMEOUT from the CommitLog; its data stays stored.
A flush that fails (``StoreIOError``) completes every waiter it does not cover with False at
once (never True: the flushed position does not pass unsynced data), tells the CommitLog's
``on_io_error`` (the store stops taking writes), and the thread goes on.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from pumice.store.disk_io import StoreIOError
from pumice.store.service_thread import ServiceThread

if TYPE_CHECKING:
    from pumice.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)


class GroupCommitRequest:
    """One waiter: done when the flush reaches ``next_offset``. It is told through
    ``callback(ok)`` (called on the flush thread) when given one, else through ``future``."""

    __slots__ = ("callback", "future", "next_offset")

    def __init__(self, next_offset: int, callback: Callable[[bool], None] | None = None) -> None:
        self.next_offset = next_offset
        self.callback = callback
        self.future: Future[bool] | None = None if callback is not None else Future()

    def complete(self, ok: bool) -> None:
        if self.callback is not None:
            self.callback(ok)
        else:
            assert self.future is not None
            self.future.set_result(ok)


class GroupCommitService(ServiceThread):
    def __init__(
        self,
        mapped_file_queue: MappedFileQueue,
        buffered: bool,
        commit_caught_up: Callable[[], bool],
        on_io_error: Callable[[StoreIOError], None],
        update_checkpoint: Callable[[], None],
        on_committed: Callable[[], None] | None = None,
    ) -> None:
        """``buffered``: appends sit in transient pool buffers, committed (``commit_caught_up``)
        before each flush; then ``on_committed`` wakes dispatch, which reads committed data only."""
        super().__init__("GroupCommitService")
        self.mapped_file_queue = mapped_file_queue
        self.buffered = buffered
        self.commit_caught_up = commit_caught_up
        self.on_io_error = on_io_error
        self.update_checkpoint = update_checkpoint
        # a C queue: a put wakes the flush thread faster than an Event would
        self._queue: queue.SimpleQueue[GroupCommitRequest | None] = queue.SimpleQueue()
        self._requests_read: list[GroupCommitRequest] = []
        self.on_committed = on_committed
        # called on this thread after each group's flush: the group's requests, its seconds (pumice.metrics)
        self.on_group_commit: Callable[[int, float], None] | None = None

    def put_request(self, request: GroupCommitRequest) -> None:
        self._queue.put(request)

    def wakeup(self) -> None:
        self._queue.put(None)

    def _take_requests(self, timeout_s: float) -> None:
        """Wait for the first request (or a wakeup), then take every one queued behind it."""
        reqs = self._requests_read
        try:
            first = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return
        if first is not None:
            reqs.append(first)
        while True:
            try:
                r = self._queue.get_nowait()
            except queue.Empty:
                return
            if r is not None:
                reqs.append(r)

    def run(self) -> None:
        while not self.stopped:
            self._take_requests(0.01)
            self._commit_or_fail()
        # requests that arrived while stopping
        self._take_requests(0.01)
        self._commit_or_fail()

    def _commit_or_fail(self) -> None:
        """``do_commit``; on any error the waiters get what the flushed position says, and
        the thread lives on."""
        try:
            self.do_commit()
        except Exception as e:
            if isinstance(e, StoreIOError):
                self.on_io_error(e)
            else:
                log.exception("GroupCommitService service has exception")
            flushed = self.mapped_file_queue.flushed_where
            reqs, self._requests_read = self._requests_read, []
            for r in reqs:
                try:
                    r.complete(flushed >= r.next_offset)
                except Exception:
                    log.exception("flush waiter failed")
            self._stop.wait(0.01)  # a failing disk fails at once: do not spin on it

    def shutdown(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._queue.put(None)
        super().shutdown(timeout_s)

    def do_commit(self) -> None:
        mfq = self.mapped_file_queue
        if self.buffered:
            # transient pool: move buffered appends into the files first (here, not in the
            # putting thread, so a put never waits on a file write held up by a flush)
            for _ in range(len(mfq.mapped_files) + 2):
                if mfq.commit(0):
                    break
            self.commit_caught_up()
        reqs = self._requests_read
        if not reqs:
            # puts that did not ask to wait still get flushed here
            mfq.flush(0)
            if self.on_committed is not None:
                self.on_committed()
            return
        target = max(r.next_offset for r in reqs)
        started = time.perf_counter()
        for _ in range(len(mfq.mapped_files) + 2):
            if mfq.flushed_where >= target:
                break
            if mfq.flush(0) and mfq.flushed_where < target:
                break  # nothing more could be flushed
        flushed = mfq.flushed_where
        if self.on_group_commit is not None:
            self.on_group_commit(len(reqs), time.perf_counter() - started)
        for r in reqs:
            r.complete(flushed >= r.next_offset)
        reqs.clear()
        if self.on_committed is not None:
            self.on_committed()  # after the waiters: dispatch is not on their path
        self.update_checkpoint()
