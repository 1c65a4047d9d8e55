"""ReputMessageService: follows the CommitLog and dispatches new records.

A daemon thread follows ``reput_from_offset``. When the CommitLog has left a dispatch hint
for the batch that starts there (the requests it built while encoding that batch), the
hint is used as is; otherwise (after recovery, on a slave, or when hints were dropped
because dispatch fell far behind) it reads to the CommitLog's readable end in chunks and
parses each record once (``check_message_and_return_size``) and hands the chunk's requests
to the dispatchers as a batch: ConsumeQueue entries are packed per queue and appended in one
write, index keys are hashed in one vectorised pass. After a chunk is dispatched, the
message-arrival listener is told about each record (long polling wakes on it). A blank
record moves to the next file. The loop sleeps 1 ms when there is nothing new, and is woken
at once by ``wakeup()``: by each put the caller does not dispatch itself, by a caller that
leaves data behind, by a slave's append, a pool commit and a DLedger commit. When the broker's
loop dispatches its own puts the sleep is ``IDLE_WAIT_ON_CALLER_S`` (a safety net only: each
wake of this thread takes the GIL from the loop, and at 100 a second it was a third of an
idle broker's CPU).
``dispatch_hinted_now`` lets a writer's thread (the broker's event loop) dispatch its own
hinted batches at once; a lock keeps one dispatcher at a time.

A dispatch that fails (a ConsumeQueue or index write: no space, no descriptor) leaves
``reput_from_offset`` before the failed records, never past them; the thread tries them again
every ``RETRY_INTERVAL_S`` (they are parsed from the log; the writes skip what is there).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pumice.store.dispatch_request import DispatchRequest

if TYPE_CHECKING:
    from pumice.store.commit_log import CommitLog

log = logging.getLogger(__name__)

MAX_CHUNK_BYTES = 4 * 1024 * 1024
MAX_HINT_REQUESTS = 8192
RETRY_INTERVAL_S = 0.1
IDLE_WAIT_S = 0.001
IDLE_WAIT_ON_CALLER_S = 0.1


class ReputMessageService:
    def __init__(
        self,
        commit_log: CommitLog,
        dispatch: Callable[[list[DispatchRequest]], bool],
        is_master: Callable[[], bool],
        on_caught_up: Callable[[], None],
    ) -> None:
        """``dispatch`` builds the ConsumeQueue and index entries of a chunk (False: it failed,
        retry); ``on_caught_up`` is called when a pass ends at the CommitLog's end."""
        self.commit_log = commit_log
        self.dispatch = dispatch
        self.on_caught_up = on_caught_up
        self.is_master = is_master
        # the broker's event loop dispatches its own puts (dispatch_hinted_now): poll slower
        self.dispatch_on_caller = False
        self.reput_from_offset = 0
        self.last_record_start = -1  # where the last dispatched record starts (-1: none yet)
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        # one dispatcher at a time: this thread, or a caller of dispatch_hinted_now
        self._lock = threading.Lock()
        # the last dispatch attempt failed: retry after a pause. Set when an attempt fails and
        # cleared only when one ends without failing, never while a retry is under way (start-up
        # watches it to stop waiting for a dispatch that cannot finish)
        self.failing = False
        self._attempt_failed = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        if not self._wake.is_set():  # set() takes a lock even when already set
            self._wake.set()

    def shutdown(self) -> None:
        # let dispatch finish what was written before stopping (bounded; not if never started)
        for _ in range(50 if self._thread is not None else 0):
            if self.behind() <= 0:
                break
            self._stopped.wait(0.1)
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def behind(self) -> int:
        return self.commit_log.get_max_offset() - self.reput_from_offset

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                with self._lock:
                    did = self.do_reput()
                if not self.failing and self.behind() <= 0:
                    self.on_caught_up()
                if self.failing:
                    self._stopped.wait(RETRY_INTERVAL_S)
                elif not did:
                    self._wake.wait(IDLE_WAIT_ON_CALLER_S if self.dispatch_on_caller else IDLE_WAIT_S)
                    self._wake.clear()
            except Exception:
                log.exception("ReputMessageService service has exception")
                self._stopped.wait(0.1)

    def dispatch_hinted_now(self, max_requests: int = 4096) -> bool:
        """Dispatch, on the caller's thread, batches appended since the last dispatch, from
        their hints only (bounded, never a parse of the log); False when the thread is
        dispatching right now or the next batch has no hint. The broker's event loop calls
        it after its puts, so a message reaches its ConsumeQueue and wakes held pulls in
        the same loop turn instead of after two thread hand-offs; the thread still does
        everything else (catch-up after a restart, slaves, committed pool buffers)."""
        if self._stopped.is_set() or self.failing:
            return False
        if not self._lock.acquire(blocking=False):
            self.wakeup()  # the thread may have looked just before this put: it looks again
            return False
        try:
            done = self._dispatch_hints(max_requests)
        except Exception:
            self.wakeup()  # the thread retries from reput_from_offset, by parsing
            raise
        finally:
            self._lock.release()
        if self.behind() > 0:
            self.wakeup()  # more than one call's worth, or no hint for what comes next
        return done

    def _dispatch_hints(self, max_requests: int) -> bool:
        """The batches at ``reput_from_offset`` that the CommitLog described when it appended
        them (dispatch hints): dispatched as they are, no re-parse. The lock is held."""
        commit_log = self.commit_log
        hints = commit_log.dispatch_hints
        while hints and hints[0][0] < self.reput_from_offset:
            hints.popleft()  # already dispatched by parsing
        end = self.reput_from_offset
        readable = commit_log.get_max_offset()  # with a pool, readers see committed data only
        hinted: list[DispatchRequest] = []
        while hints and len(hinted) < max_requests:
            h = hints[0]
            if h[0] != end or h[1] > readable:
                break
            # a put on another thread may evict the head of the full deque meanwhile: then
            # what is popped is not what was checked, and the parser takes over from ``end``
            if hints.popleft() is not h:
                break
            end = h[1]
            hinted.extend(h[2])
        if not hinted:
            return False
        if not self._dispatched(hinted):
            return False  # the hints are gone: the retry parses the log from reput_from_offset
        self.reput_from_offset = end
        return True

    def _dispatched(self, reqs: list[DispatchRequest]) -> bool:
        if self.dispatch(reqs):
            self.last_record_start = reqs[-1].commit_log_offset  # a slave's HA check starts there
            return True
        self._attempt_failed = self.failing = True
        return False

    def do_reput(self) -> bool:
        """Dispatch what is available; True if anything was dispatched."""
        commit_log = self.commit_log
        min_offset = commit_log.get_min_offset()
        if min_offset >= 0 and self.reput_from_offset < min_offset:
            log.warning(
                "The reputFromOffset=%d is smaller than minPyOffset=%d, this usually indicate that the dispatch "
                "behind too much and the commitlog has expired.", self.reput_from_offset, min_offset,
            )  # fmt: skip
            self.reput_from_offset = min_offset
        did = False
        self._attempt_failed = False
        hints = commit_log.dispatch_hints
        while self.reput_from_offset < commit_log.get_max_offset() and not self._stopped.is_set():
            if self._dispatch_hints(MAX_HINT_REQUESTS):
                did = True
                continue
            if self._attempt_failed:
                break
            if hints and hints[0][0] == self.reput_from_offset:
                break  # hinted but not committed yet (transient store pool): readers cannot see it
            sbr = commit_log.get_data(self.reput_from_offset)
            if sbr is None:
                break
            reqs: list[DispatchRequest] = []
            try:
                start = sbr.start_offset
                limit = min(sbr.size, MAX_CHUNK_BYTES)
                buf = sbr.buffer
                pos = 0
                rolled = False
                check = commit_log.check_message_and_return_size
                while pos < limit:
                    req, size, ok = check(buf, pos, sbr.size)
                    if ok and size > 0 and req is not None:
                        reqs.append(req)
                        pos += size
                    elif ok and size == 0:
                        rolled = True
                        break
                    elif size > 0:
                        log.error("[BUG]read total count not equals msg total size. offset=%d", start + pos)
                        pos += size
                    else:
                        if self.is_master():
                            log.error(
                                "[BUG]the master dispatch message to consume queue error, COMMITLOG OFFSET: %d",
                                start + pos,
                            )
                            pos = sbr.size
                        break
            finally:
                sbr.release()
            if reqs:
                if not self._dispatched(reqs):
                    break  # stay before them; the thread retries
                did = True
            if rolled:
                self.reput_from_offset = commit_log.roll_next_file(start + pos)
                did = True
            else:
                self.reput_from_offset = start + pos
                if pos == 0:
                    break
        self.failing = self._attempt_failed
        return did
