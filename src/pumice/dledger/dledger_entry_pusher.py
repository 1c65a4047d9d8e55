"""DLedgerEntryPusher: replication (dledger 0.3.1.2, ``DLedgerEntryPusher.java``; DLEDGER.md §2.4).

The leader runs one EntryDispatcher per follower and the QuorumAckChecker; a follower runs the
EntryHandler. All are coroutines on the DLedger loop; ``wait_ack`` is called by the thread that
appends as leader (the broker's), so water marks and pending appends sit under one lock.

EntryDispatcher, per follower and term::

    COMPARE (from the leader's end, down) --match at the follower's end--> APPEND
        \\--the follower holds more / nothing in common--> TRUNCATE --> APPEND
    APPEND --INCONSISTENT_STATE--> COMPARE

* APPEND pushes ``writeIndex`` upward (one entry a request, or ``enableBatchPush``: up to
  ``maxBatchPushSize`` bytes), at most 1000 unanswered; the first unanswered one is pushed
  again after ``maxPushTimeOutMs`` (1 s);
* when idle, a COMMIT carries the committed index at most every 1 s.

QuorumAckChecker: the committed index is the median of the current term's water marks (the
leader's own included, sorted descending, element ``n // 2``). Pending appends up to it are
completed SUCCESS; the first still pending after ``maxWaitAckTimeMs`` (2.5 s) and those behind
it WAIT_QUORUM_ACK_TIMEOUT; those of an earlier term TERM_CHANGED. Beyond DLedger: once the
node is no longer leader, every pending append is completed TERM_CHANGED at once (DLedger
completes them only when the node leads again, so a stepped-down leader's sends hang).

Beyond DLedger (Raft's rule): the committed index moves only to an entry of the current term;
entries of an earlier term are committed together with the first current-term entry a quorum
holds (DLedger commits them on the water marks alone). The bytes sent and stored are the same.

EntryHandler (follower): APPENDs wait in a map by index and are written strictly in order at
``ledgerEndIndex + 1``; a second push of an index waiting there answers REPEATED_PUSH; COMPARE,
TRUNCATE and COMMIT are queued and run first (COMPARE and TRUNCATE drop the waiting APPENDs);
a node that is not a follower answers NOT_FOLLOWER. Each answer carries the follower's
``beginIndex``/``endIndex``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_protocol import PushEntryRequest, PushEntryResponse, PushType
from pumice.dledger.dledger_response_code import DLedgerError, DLedgerResponseCode
from pumice.dledger.member_state import MemberState

if TYPE_CHECKING:
    from pumice.dledger.dledger_rpc_service import DLedgerRpcService

log = logging.getLogger(__name__)

MAX_PENDING_PER_PEER = 1000  # EntryDispatcher.maxPendingSize
IDLE_WAIT_S = 0.05  # a dispatcher or the checker re-checks at least this often (DLedger: 1 ms polls)
COMMIT_INTERVAL_MS = 1000
PUSH_ANSWER_TIMEOUT_S = 3.0  # the follower holds an APPEND at most this long (the leader's RPC time-out)
TRUNCATE_COMPARE_WAIT_S = 3.0


class ReplicatedStore(Protocol):
    """The part of DLedgerMmapFileStore (docs/DLEDGER.md) replication uses."""

    @property
    def ledger_begin_index(self) -> int: ...
    @property
    def ledger_end_index(self) -> int: ...
    @property
    def ledger_end_term(self) -> int: ...
    @property
    def committed_index(self) -> int: ...

    def get(self, index: int) -> DLedgerEntry: ...
    def append_as_follower(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> DLedgerEntry: ...
    def truncate(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> int: ...
    def update_committed_index(self, term: int, index: int) -> Any: ...


class LedgerStore(ReplicatedStore, Protocol):
    """What DLedgerServer needs of its store: replication's part and the leader's append
    (DLedgerMmapFileStore, DLedgerMemoryStore)."""

    def append_as_leader(
        self, entries: list[DLedgerEntry], term: int, hook: Callable[[DLedgerEntry, bytearray], None] | None = None
    ) -> list[DLedgerEntry]: ...


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class _Pending:
    __slots__ = ("deadline_ms", "future", "pos")

    def __init__(self, future: concurrent.futures.Future[DLedgerResponseCode], pos: int, deadline_ms: int) -> None:
        self.future = future
        self.pos = pos
        self.deadline_ms = deadline_ms


def _complete(p: _Pending, code: DLedgerResponseCode) -> None:
    if not p.future.done():
        try:
            p.future.set_result(code)
        except concurrent.futures.InvalidStateError:  # cancelled by the waiter meanwhile
            pass


class DLedgerEntryPusher:
    def __init__(self, config: DLedgerConfig, member_state: MemberState, store: ReplicatedStore,
                 rpc: DLedgerRpcService | None) -> None:  # fmt: skip
        self.config = config
        self.member_state = member_state
        self.store = store
        self.rpc = rpc
        self.lock = threading.Lock()
        self.water_marks_by_term: dict[int, dict[str, int]] = {}
        self.pending_by_term: dict[int, dict[int, _Pending]] = {}
        self.dispatchers = {p: EntryDispatcher(self, p) for p in member_state.peer_map if p != member_state.self_id}
        self.quorum_ack_checker = QuorumAckChecker(self)
        self.entry_handler = EntryHandler(self)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for d in self.dispatchers.values():
            d.wakeup = asyncio.Event()
            self._tasks.append(self._loop.create_task(d.run(), name=f"EntryDispatcher-{d.peer_id}"))
        self.quorum_ack_checker.wakeup = asyncio.Event()
        self.entry_handler.wakeup = asyncio.Event()
        self._tasks.append(self._loop.create_task(self.quorum_ack_checker.run(), name="QuorumAckChecker"))
        self._tasks.append(self._loop.create_task(self.entry_handler.run(), name="EntryHandler"))

    async def shutdown(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        with self.lock:
            for pending in self.pending_by_term.values():
                for p in pending.values():
                    _complete(p, DLedgerResponseCode.TERM_CHANGED)
            self.pending_by_term.clear()

    # -- water marks and pending appends (any thread) ---------------------------------------

    def _marks(self, term: int) -> dict[str, int]:
        marks = self.water_marks_by_term.get(term)
        if marks is None:
            marks = self.water_marks_by_term[term] = dict.fromkeys(self.member_state.peer_map, -1)
        return marks

    def update_peer_water_mark(self, term: int, peer_id: str, index: int) -> None:
        with self.lock:
            marks = self._marks(term)
            if marks.get(peer_id, -1) < index:
                log.debug("[%s] water mark of %s in term %d: %d -> %d", self.member_state.self_id, peer_id, term,
                          marks.get(peer_id, -1), index)  # fmt: skip
                marks[peer_id] = index

    def get_peer_water_mark(self, term: int, peer_id: str) -> int:
        with self.lock:
            return self._marks(term).get(peer_id, -1)

    def is_pending_full(self, term: int) -> bool:
        with self.lock:
            return len(self.pending_by_term.get(term, ())) > self.config.max_pending_requests_num

    def wait_ack(self, entry: DLedgerEntry) -> concurrent.futures.Future[DLedgerResponseCode]:
        """The future of a leader's append: SUCCESS once committed, WAIT_QUORUM_ACK_TIMEOUT,
        TERM_CHANGED. Called by the appending thread right after the store placed ``entry``."""
        future: concurrent.futures.Future[DLedgerResponseCode] = concurrent.futures.Future()
        with self.lock:
            marks = self._marks(entry.term)
            if marks[self.member_state.self_id] < entry.index:
                marks[self.member_state.self_id] = entry.index
            pending = self.pending_by_term.setdefault(entry.term, {})
            pending[entry.index] = _Pending(future, entry.pos, _now_ms() + self.config.max_wait_ack_time_ms)
        self.wake_up_dispatchers()
        return future

    def wake_up_dispatchers(self) -> None:
        """Thread-safe: the dispatchers and the checker look at once."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._wake_all)
        except RuntimeError:  # the loop is closing
            pass

    def _wake_all(self) -> None:
        for d in self.dispatchers.values():
            d.wakeup.set()
        self.quorum_ack_checker.wakeup.set()

    def handle_push(self, request: PushEntryRequest) -> asyncio.Future[PushEntryResponse]:
        return self.entry_handler.handle_push(request)

    def status(self) -> dict[str, int]:
        """Each member's water mark in the current term (the leader's view)."""
        with self.lock:
            return dict(self._marks(self.member_state.curr_term))


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout_s)
    except TimeoutError:
        pass
    event.clear()


class QuorumAckChecker:
    def __init__(self, pusher: DLedgerEntryPusher) -> None:
        self.pusher = pusher
        self.wakeup: asyncio.Event = None  # type: ignore[assignment]  # set by start()
        self.last_quorum_index = -1

    async def run(self) -> None:
        while True:
            try:
                self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("[%s] error in the quorum ack checker", self.pusher.member_state.self_id)
                await asyncio.sleep(0.1)
            await _wait(self.wakeup, IDLE_WAIT_S)

    def check(self) -> None:
        p = self.pusher
        ms = p.member_state
        if not ms.is_leader():
            # a leader that stepped down answers its waiting appends now (DLedger leaves them
            # until it leads again: the broker's sends went unanswered, docs/COMPATIBILITY.md)
            with p.lock:
                for pending in p.pending_by_term.values():
                    for stale in pending.values():
                        _complete(stale, DLedgerResponseCode.TERM_CHANGED)
                p.pending_by_term.clear()
            return
        term = ms.curr_term
        with p.lock:
            for old in [t for t in p.pending_by_term if t != term]:
                for stale in p.pending_by_term.pop(old).values():
                    _complete(stale, DLedgerResponseCode.TERM_CHANGED)
            for old in [t for t in p.water_marks_by_term if t != term]:
                del p.water_marks_by_term[old]
            marks = p._marks(term)
            marks[ms.self_id] = max(marks[ms.self_id], p.store.ledger_end_index)
            ordered = sorted(marks.values(), reverse=True)
            quorum_index = ordered[len(ordered) // 2]
        quorum_index = self._current_term_bound(quorum_index, term)
        if quorum_index > p.store.committed_index:
            p.store.update_committed_index(term, quorum_index)
        committed = min(quorum_index, p.store.committed_index) if quorum_index >= 0 else -1
        now = _now_ms()
        with p.lock:
            pending = p.pending_by_term.get(term, {})
            for index in [i for i in pending if i <= committed]:
                _complete(pending.pop(index), DLedgerResponseCode.SUCCESS)
            # the first one still waiting decides: past its time, it and all behind it time out
            first = min(pending) if pending else None
            if first is not None and pending[first].deadline_ms <= now:
                for index in sorted(pending):
                    if pending[index].deadline_ms > now:
                        break
                    _complete(pending.pop(index), DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT)
        self.last_quorum_index = quorum_index

    def _current_term_bound(self, quorum_index: int, term: int) -> int:
        """Raft's rule: only an entry of the current term is committed by counting; below it the
        committed index stays until one is."""
        store = self.pusher.store
        if quorum_index <= store.committed_index or quorum_index < 0:
            return quorum_index
        try:
            entry_term = store.get(quorum_index).term
        except DLedgerError:
            return store.committed_index
        return quorum_index if entry_term == term else store.committed_index


class EntryDispatcher:
    def __init__(self, pusher: DLedgerEntryPusher, peer_id: str) -> None:
        self.pusher = pusher
        self.peer_id = peer_id
        self.type = PushType.COMPARE
        self.compare_index = -1
        self.write_index = -1
        self.term = -1
        self.leader_id: str | None = None
        self.last_push_commit_ms = -1
        self.pending: dict[int, int] = {}  # index -> sent at (ms)
        self.batch_pending: dict[int, tuple[int, int]] = {}  # first index -> (sent at, count)
        self.batch = PushEntryRequest()
        self.last_check_leak_ms = _now_ms()
        self.wakeup: asyncio.Event = None  # type: ignore[assignment]  # set by start()
        self._inflight: set[asyncio.Task[None]] = set()
        self._last_error = ""

    async def run(self) -> None:
        while True:
            try:
                if self._check_and_fresh_state():
                    if self.type is PushType.APPEND:
                        if self.pusher.config.enable_batch_push:
                            self._do_batch_append()
                        else:
                            self._do_append()
                    else:
                        await self._do_compare()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                # a dead follower fails every 0.5 s: the first failure of a kind is a warning
                level = logging.DEBUG if str(e) == self._last_error else logging.WARNING
                self._last_error = str(e)
                log.log(level, "[%s] push to %s: %s (write index %d, compare index %d): compare again",
                        self.pusher.member_state.self_id, self.peer_id, e, self.write_index,
                        self.compare_index)  # fmt: skip
                self._change_state(-1, PushType.COMPARE)
                await asyncio.sleep(0.5)
            await _wait(self.wakeup, IDLE_WAIT_S)

    def _check_and_fresh_state(self) -> bool:
        ms = self.pusher.member_state
        if not ms.is_leader():
            return False
        if self.term != ms.curr_term or self.leader_id != ms.leader_id:
            self.term = ms.curr_term
            self.leader_id = ms.self_id
            self._change_state(-1, PushType.COMPARE)
        return True

    def _build(self, entry: DLedgerEntry | None, push_type: PushType) -> PushEntryRequest:
        ms = self.pusher.member_state
        return PushEntryRequest(group=ms.group, remote_id=self.peer_id, leader_id=self.leader_id,
                                local_id=ms.self_id, term=self.term, entry=entry, type=push_type,
                                commit_index=self.pusher.store.committed_index)  # fmt: skip

    def _change_state(self, index: int, target: PushType) -> None:
        if target is PushType.APPEND:
            self._last_error = ""
            self.compare_index = -1
            self.pusher.update_peer_water_mark(self.term, self.peer_id, index)
            self.pusher.quorum_ack_checker.wakeup.set()
            self.write_index = index + 1
            if self.pusher.config.enable_batch_push:
                self._reset_batch()
        elif target is PushType.COMPARE:
            if self.type is PushType.APPEND:
                self.compare_index = -1
                self.pending.clear()
                self.batch_pending.clear()
        elif target is PushType.TRUNCATE:
            self.compare_index = -1
        self.type = target

    # -- APPEND ---------------------------------------------------------------------------

    def _send(self, request: PushEntryRequest) -> None:
        assert self.pusher.rpc is not None
        task = asyncio.get_running_loop().create_task(self._push_and_handle(request))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _push_and_handle(self, request: PushEntryRequest) -> None:
        assert self.pusher.rpc is not None
        x = await self.pusher.rpc.push(request)
        code = DLedgerResponseCode.of(x.code)
        if code is DLedgerResponseCode.SUCCESS and x.index is not None:
            last = x.index + max(x.count, 1) - 1 if request.is_batch else x.index
            self.pending.pop(x.index, None)
            self.batch_pending.pop(x.index, None)
            self.pusher.update_peer_water_mark(x.term, self.peer_id, last)
            self.pusher.quorum_ack_checker.wakeup.set()
        elif code is DLedgerResponseCode.INCONSISTENT_STATE:
            log.info("[%s] %s answered INCONSISTENT_STATE at %s: compare again", self.pusher.member_state.self_id,
                     self.peer_id, x.index)  # fmt: skip
            self._change_state(-1, PushType.COMPARE)
            self.wakeup.set()
        elif code is not DLedgerResponseCode.SUCCESS:
            log.debug("[%s] push to %s answered %s", self.pusher.member_state.self_id, self.peer_id, code.name)

    def _entry_for_append(self, index: int) -> DLedgerEntry | None:
        try:
            return self.pusher.store.get(index)
        except DLedgerError as e:
            if e.code is DLedgerResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN:
                self._change_state(-1, PushType.COMPARE)
                return None
            raise

    def _append_one(self, index: int) -> None:
        entry = self._entry_for_append(index)
        if entry is None:
            return
        self.pending[index] = _now_ms()
        self._send(self._build(entry, PushType.APPEND))
        self.last_push_commit_ms = _now_ms()

    def _do_commit(self) -> None:
        if _now_ms() - self.last_push_commit_ms > COMMIT_INTERVAL_MS:
            self._send(self._build(None, PushType.COMMIT))
            self.last_push_commit_ms = _now_ms()

    def _check_append_response(self) -> None:
        mark = self.pusher.get_peer_water_mark(self.term, self.peer_id)
        sent = self.pending.get(mark + 1)
        if sent is not None and _now_ms() - sent > self.pusher.config.max_push_time_out_ms:
            log.warning("[%s] push to %s: retry %d", self.pusher.member_state.self_id, self.peer_id, mark + 1)
            self._append_one(mark + 1)

    def _drop_acked(self) -> None:
        if len(self.pending) >= MAX_PENDING_PER_PEER or _now_ms() - self.last_check_leak_ms > 1000:
            mark = self.pusher.get_peer_water_mark(self.term, self.peer_id)
            for index in [i for i in self.pending if i < mark]:
                del self.pending[index]
            for first in [f for f, (_, n) in self.batch_pending.items() if f + n - 1 <= mark]:
                del self.batch_pending[first]
            self.last_check_leak_ms = _now_ms()

    def _do_append(self) -> None:
        store = self.pusher.store
        while self._check_and_fresh_state() and self.type is PushType.APPEND:
            if self.write_index > store.ledger_end_index:
                self._do_commit()
                self._check_append_response()
                return
            self._drop_acked()
            if len(self.pending) >= MAX_PENDING_PER_PEER:
                self._check_append_response()
                return
            self._append_one(self.write_index)
            self.write_index += 1

    # -- batch APPEND ------------------------------------------------------------------------

    def _reset_batch(self) -> None:
        ms = self.pusher.member_state
        self.batch = PushEntryRequest(group=ms.group, remote_id=self.peer_id, leader_id=self.leader_id,
                                      local_id=ms.self_id, term=self.term, type=PushType.APPEND)  # fmt: skip

    def _send_batch(self) -> None:
        self.batch.commit_index = self.pusher.store.committed_index
        self.batch_pending[self.batch.first_entry_index] = (_now_ms(), self.batch.count)
        request = self.batch
        self._reset_batch()
        self._send(request)
        self.last_push_commit_ms = _now_ms()

    def _check_batch_append_response(self) -> None:
        mark = self.pusher.get_peer_water_mark(self.term, self.peer_id)
        waiting = self.batch_pending.get(mark + 1)
        if waiting is not None and _now_ms() - waiting[0] > self.pusher.config.max_push_time_out_ms:
            log.warning("[%s] push to %s: retry %d..%d", self.pusher.member_state.self_id, self.peer_id, mark + 1,
                        mark + waiting[1])  # fmt: skip
            self._reset_batch()
            for i in range(mark + 1, mark + 1 + waiting[1]):
                self.batch.add_entry(self.pusher.store.get(i))
            self._send_batch()

    def _do_batch_append(self) -> None:
        store = self.pusher.store
        while self._check_and_fresh_state() and self.type is PushType.APPEND:
            if self.write_index > store.ledger_end_index:
                if self.batch.count > 0:
                    self._send_batch()
                self._do_commit()
                self._check_batch_append_response()
                return
            self._drop_acked()
            if len(self.batch_pending) >= MAX_PENDING_PER_PEER:
                self._check_batch_append_response()
                return
            entry = self._entry_for_append(self.write_index)
            if entry is None:
                return
            self.batch.add_entry(entry)
            if self.batch.total_size >= self.pusher.config.max_batch_push_size:
                self._send_batch()
            self.write_index += 1

    # -- COMPARE and TRUNCATE ----------------------------------------------------------------

    async def _do_compare(self) -> None:
        store = self.pusher.store
        assert self.pusher.rpc is not None
        while self._check_and_fresh_state() and self.type in (PushType.COMPARE, PushType.TRUNCATE):
            if self.compare_index == -1 and store.ledger_end_index == -1:
                return
            if self.compare_index == -1 or not store.ledger_begin_index <= self.compare_index <= store.ledger_end_index:
                self.compare_index = store.ledger_end_index
            entry = store.get(self.compare_index)
            response = await self.pusher.rpc.push(self._build(entry, PushType.COMPARE))
            code = DLedgerResponseCode.of(response.code)
            if code not in (DLedgerResponseCode.SUCCESS, DLedgerResponseCode.INCONSISTENT_STATE):
                raise DLedgerError(code, f"compare at {self.compare_index} answered {code.name}")
            truncate_index = -1
            if code is DLedgerResponseCode.SUCCESS:
                if self.compare_index == response.end_index:
                    self._change_state(self.compare_index, PushType.APPEND)
                    return
                truncate_index = self.compare_index
            elif response.end_index < store.ledger_begin_index or response.begin_index > store.ledger_end_index:
                truncate_index = store.ledger_begin_index  # nothing in common (the leader expired its head)
            elif self.compare_index < response.begin_index:
                truncate_index = store.ledger_begin_index
            elif self.compare_index > response.end_index:
                self.compare_index = response.end_index
            else:
                self.compare_index -= 1
            if self.compare_index < store.ledger_begin_index:
                truncate_index = store.ledger_begin_index
            if truncate_index != -1:
                self._change_state(truncate_index, PushType.TRUNCATE)
                await self._do_truncate(truncate_index)
                return

    async def _do_truncate(self, index: int) -> None:
        assert self.pusher.rpc is not None
        entry = self.pusher.store.get(index)
        log.info("[%s] truncate %s at %d", self.pusher.member_state.self_id, self.peer_id, index)
        response = await self.pusher.rpc.push(self._build(entry, PushType.TRUNCATE))
        code = DLedgerResponseCode.of(response.code)
        if code is not DLedgerResponseCode.SUCCESS:
            raise DLedgerError(code, f"truncate at {index} answered {code.name}")
        self.last_push_commit_ms = _now_ms()
        self._change_state(index, PushType.APPEND)


class EntryHandler:
    def __init__(self, pusher: DLedgerEntryPusher) -> None:
        self.pusher = pusher
        self.write_requests: dict[int, tuple[PushEntryRequest, asyncio.Future[PushEntryResponse], int]] = {}
        self.other_requests: deque[tuple[PushEntryRequest, asyncio.Future[PushEntryResponse]]] = deque()
        self.wakeup: asyncio.Event = None  # type: ignore[assignment]  # set by start()
        self.last_check_fast_forward_ms = _now_ms()

    def build_response(self, request: PushEntryRequest, code: DLedgerResponseCode) -> PushEntryResponse:
        store = self.pusher.store
        resp = PushEntryResponse(group=request.group, code=int(code), term=request.term)
        if request.type is not PushType.COMMIT:
            resp.index = request.first_entry_index
            resp.count = request.count
        resp.begin_index = store.ledger_begin_index
        resp.end_index = store.ledger_end_index
        return resp

    def handle_push(self, request: PushEntryRequest) -> asyncio.Future[PushEntryResponse]:
        fut: asyncio.Future[PushEntryResponse] = asyncio.get_running_loop().create_future()
        if not self.pusher.member_state.is_follower():
            fut.set_result(self.build_response(request, DLedgerResponseCode.NOT_FOLLOWER))
            return fut
        if request.type is PushType.APPEND:
            if request.count == 0:
                fut.set_result(self.build_response(request, DLedgerResponseCode.UNEXPECTED_ARGUMENT))
                return fut
            index = request.first_entry_index
            if index in self.write_requests:
                log.warning("[%s] index %d already waiting: REPEATED_PUSH", self.pusher.member_state.self_id, index)
                fut.set_result(self.build_response(request, DLedgerResponseCode.REPEATED_PUSH))
                return fut
            self.write_requests[index] = (request, fut, _now_ms())
        elif request.type in (PushType.COMPARE, PushType.TRUNCATE):
            if request.entry is None:
                fut.set_result(self.build_response(request, DLedgerResponseCode.UNEXPECTED_ARGUMENT))
                return fut
            self._drop_writes()
            self.other_requests.append((request, fut))
        else:
            self.other_requests.append((request, fut))
        self.wakeup.set()
        return fut

    def _drop_writes(self) -> None:
        """COMPARE/TRUNCATE start over: DLedger clears the waiting APPENDs (their leader
        re-sends); they are answered INCONSISTENT_STATE rather than left unanswered."""
        for request, fut, _ in self.write_requests.values():
            if not fut.done():
                fut.set_result(self.build_response(request, DLedgerResponseCode.INCONSISTENT_STATE))
        self.write_requests.clear()

    async def run(self) -> None:
        while True:
            try:
                progressed = self.work()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("[%s] error in the entry handler", self.pusher.member_state.self_id)
                progressed = False
                await asyncio.sleep(0.1)
            if progressed:
                await asyncio.sleep(0)
            else:
                await _wait(self.wakeup, IDLE_WAIT_S)

    def work(self) -> bool:
        """One step; True when it did something (more may be ready)."""
        ms = self.pusher.member_state
        if not ms.is_follower():
            while self.other_requests:
                request, fut = self.other_requests.popleft()
                if not fut.done():
                    fut.set_result(self.build_response(request, DLedgerResponseCode.NOT_FOLLOWER))
            for request, fut, _ in self.write_requests.values():
                if not fut.done():
                    fut.set_result(self.build_response(request, DLedgerResponseCode.NOT_FOLLOWER))
            self.write_requests.clear()
            return False
        if self.other_requests:
            request, fut = self.other_requests.popleft()
            if request.type is PushType.TRUNCATE:
                self._do_truncate(request, fut)
            elif request.type is PushType.COMPARE:
                self._do_compare(request, fut)
            else:
                self._update_committed(request)
                if not fut.done():
                    fut.set_result(self.build_response(request, DLedgerResponseCode.SUCCESS))
            return True
        store = self.pusher.store
        next_index = store.ledger_end_index + 1
        waiting = self.write_requests.pop(next_index, None)
        if waiting is None:
            self._check_abnormal(store.ledger_end_index)
            return False
        request, fut, _ = waiting
        self._do_append(next_index, request, fut)
        return True

    def _update_committed(self, request: PushEntryRequest) -> None:
        self.pusher.store.update_committed_index(request.term, request.commit_index)

    def _do_append(self, write_index: int, request: PushEntryRequest, fut: asyncio.Future[PushEntryResponse]) -> None:
        store = self.pusher.store
        try:
            if request.first_entry_index != write_index:
                raise DLedgerError(DLedgerResponseCode.INCONSISTENT_STATE, "not the next index")
            for entry in request.entries():
                store.append_as_follower(entry, request.term, request.leader_id or "")
            code = DLedgerResponseCode.SUCCESS
        except Exception as e:
            log.warning("[%s] append at %d failed: %s", self.pusher.member_state.self_id, write_index, e)
            code = DLedgerResponseCode.INCONSISTENT_STATE
        if not fut.done():
            fut.set_result(self.build_response(request, code))
        if code is DLedgerResponseCode.SUCCESS:
            self._update_committed(request)

    def _do_compare(self, request: PushEntryRequest, fut: asyncio.Future[PushEntryResponse]) -> None:
        assert request.entry is not None
        try:
            local = self.pusher.store.get(request.entry.index)
            same = request.entry.same_as(local)
        except DLedgerError:
            same = False
        code = DLedgerResponseCode.SUCCESS if same else DLedgerResponseCode.INCONSISTENT_STATE
        if not fut.done():
            fut.set_result(self.build_response(request, code))

    def _do_truncate(self, request: PushEntryRequest, fut: asyncio.Future[PushEntryResponse]) -> None:
        assert request.entry is not None
        try:
            index = self.pusher.store.truncate(request.entry, request.term, request.leader_id or "")
            if index != request.entry.index:
                raise DLedgerError(DLedgerResponseCode.INCONSISTENT_STATE, f"truncated to {index}")
            code = DLedgerResponseCode.SUCCESS
            log.info("[%s] truncated at %d for leader %s", self.pusher.member_state.self_id, index, request.leader_id)
        except Exception as e:
            log.warning("[%s] truncate at %d failed: %s", self.pusher.member_state.self_id, request.entry.index, e)
            code = DLedgerResponseCode.INCONSISTENT_STATE
        if not fut.done():
            fut.set_result(self.build_response(request, code))
        if code is DLedgerResponseCode.SUCCESS:
            self._update_committed(request)

    def _check_abnormal(self, end_index: int) -> None:
        """Once a second: APPENDs this node already holds (a lost answer) answered SUCCESS if
        they match, INCONSISTENT_STATE if not; the lowest one waiting past its time for a gap
        answered INCONSISTENT_STATE (the leader compares again)."""
        if _now_ms() - self.last_check_fast_forward_ms < 1000 or not self.write_requests:
            return
        self.last_check_fast_forward_ms = _now_ms()
        stale_first = None
        for first in sorted(self.write_requests):
            request, fut, since = self.write_requests[first]
            if request.last_entry_index <= end_index:
                try:
                    ok = all(e.same_as(self.pusher.store.get(e.index)) for e in request.entries())
                except DLedgerError:
                    ok = False
                code = DLedgerResponseCode.SUCCESS if ok else DLedgerResponseCode.INCONSISTENT_STATE
                if not fut.done():
                    fut.set_result(self.build_response(request, code))
                del self.write_requests[first]
                continue
            if first == end_index + 1:
                return
            if _now_ms() - since > 1000 and stale_first is None:
                stale_first = first
        if stale_first is not None:
            request, fut, _ = self.write_requests.pop(stale_first)
            if not fut.done():
                fut.set_result(self.build_response(request, DLedgerResponseCode.INCONSISTENT_STATE))
