"""DLedgerServer: one member of a DLedger group (dledger 0.3.1.2, ``DLedgerServer.java``): the
peers' port, the elector, the pusher and the store, on an asyncio loop of its own in a thread
``DLedgerServer-<selfId>`` (docs/DLEDGER.md, Threads).

Every request first passes DLedger's checks, in this order, each answered with the request's
base info, the code and this node's leader:

==========================================  =================================================
check                                       code
==========================================  =================================================
``remoteId`` is this node                   UNKNOWN_MEMBER (401)
``group`` is this group                     UNKNOWN_GROUP (400)
APPEND / GET: this node leads               NOT_LEADER (404)
APPEND: no leadership transfer under way    LEADER_TRANSFERRING (506)
APPEND: fewer than maxPendingRequestsNum    LEADER_PENDING_FULL (503)
==========================================  =================================================

A new leader whose log ends in uncommitted entries of earlier terms appends a term-start record
at once (``term_start_record.py``): Pumice commits earlier-term entries only with one of the
current term.

The local API (any thread): ``append_as_leader(bodies, hook)`` places the entries at once and
returns them with a ``concurrent.futures.Future`` of the outcome (SUCCESS once a quorum holds
the last one, WAIT_QUORUM_ACK_TIMEOUT, TERM_CHANGED); ``is_leader()``, ``leader_id``, ``term``,
``member_state``, ``add_role_change_listener(cb)`` and ``status()``.

Every second a leader that is not among ``preferredLeaderId`` hands leadership to the preferred
member that is live and least behind (if fewer than ``maxLeadershipTransferWaitIndex`` entries).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_entry_pusher import DLedgerEntryPusher, LedgerStore
from pumice.dledger.dledger_leader_elector import DLedgerLeaderElector, RoleChangeListener
from pumice.dledger.dledger_protocol import (
    RESPONSE_TYPES,
    AppendEntryRequest,
    AppendEntryResponse,
    BatchAppendEntryRequest,
    DLedgerRequestCode,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    RequestOrResponse,
    VoteRequest,
    error_response,
)
from pumice.dledger.dledger_response_code import DLedgerError, DLedgerResponseCode
from pumice.dledger.dledger_rpc_service import DLedgerRpcService
from pumice.dledger.member_state import MemberState, Role
from pumice.dledger.term_start_record import place_record, term_start_body

log = logging.getLogger(__name__)

PREFERRED_LEADER_CHECK_S = 1.0
START_TIMEOUT_S = 30.0
PUSH_ANSWER_WAIT_S = 3.0  # a follower's held APPEND: the leader stops waiting after its 3 s anyway
TAKE_LEADERSHIP_POLL_S = 0.01

AppendHook = Callable[[DLedgerEntry, Any], None]


class DLedgerServer:
    def __init__(
        self, config: DLedgerConfig, store: LedgerStore, *, host: str = "0.0.0.0", accept_client_appends: bool = True
    ) -> None:
        """``accept_client_appends=False`` (a broker's log): APPEND (50001) from the network is
        refused UNSUPPORTED; the broker appends in-process, as RocketMQ's does."""
        self.config = config
        self.accept_client_appends = accept_client_appends
        self.store = store
        self.member_state = MemberState(config)
        self.rpc = DLedgerRpcService(self.member_state, self, host)
        self.elector = DLedgerLeaderElector(config, self.member_state, self.rpc, store)
        self.pusher = DLedgerEntryPusher(config, self.member_state, store, self.rpc)
        # first of the listeners, so the broker's role change sees the term-start record placed
        self.elector.add_role_change_listener(self._start_term)
        self._append_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None

    # -- life -----------------------------------------------------------------------------

    def start(self) -> None:
        """Starts the loop thread and waits until the port listens; raises what failed."""
        self._thread = threading.Thread(target=self._run, name=f"DLedgerServer-{self.config.self_id}", daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise RuntimeError(f"DLedgerServer {self.config.self_id} did not start in {START_TIMEOUT_S:g} s")
        if self._start_error is not None:
            raise self._start_error

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            await self.rpc.start()
        except BaseException as e:
            self._start_error = e
            self._started.set()
            return
        self.pusher.start()
        self.elector.start()
        preferred = asyncio.get_running_loop().create_task(self._preferred_leader_loop())
        log.info("[%s] DLedgerServer of group %s listening on %d, peers %s", self.config.self_id,
                 self.config.group, self.rpc.port, self.config.peers)  # fmt: skip
        self._started.set()
        await self._stop.wait()
        preferred.cancel()
        await asyncio.gather(preferred, return_exceptions=True)
        await self.elector.shutdown()
        await self.pusher.shutdown()
        await self.rpc.shutdown()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        log.info("[%s] DLedgerServer stopped", self.config.self_id)

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Runs ``fn`` on the DLedger loop (any thread)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(fn)

    # -- the local API ------------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self.member_state.is_leader()

    @property
    def leader_id(self) -> str | None:
        return self.member_state.leader_id

    @property
    def term(self) -> int:
        return self.member_state.curr_term

    def add_role_change_listener(self, listener: RoleChangeListener) -> None:
        self.elector.add_role_change_listener(listener)

    def append_as_leader(
        self, bodies: list[bytes], hook: AppendHook | None = None
    ) -> tuple[list[DLedgerEntry], concurrent.futures.Future[DLedgerResponseCode]]:
        """Places ``bodies`` as entries of the current term; the future completes once a quorum
        holds the last one. Raises DLedgerError NOT_LEADER, LEADER_TRANSFERRING,
        LEADER_PENDING_FULL or REQUEST_WITH_EMPTY_BODYS before anything is written."""
        ms = self.member_state
        if not bodies:
            raise DLedgerError(DLedgerResponseCode.REQUEST_WITH_EMPTY_BODYS, "nothing to append")
        with self._append_lock:
            if not ms.is_leader():
                raise DLedgerError(DLedgerResponseCode.NOT_LEADER, f"{ms.self_id} is not the leader ({ms.leader_id})")
            if ms.transferee is not None:
                raise DLedgerError(DLedgerResponseCode.LEADER_TRANSFERRING, f"handing leadership to {ms.transferee}")
            term = ms.curr_term
            if self.pusher.is_pending_full(term):
                raise DLedgerError(DLedgerResponseCode.LEADER_PENDING_FULL,
                                   f"{self.config.max_pending_requests_num} appends wait for a quorum")  # fmt: skip
            entries = self.store.append_as_leader([DLedgerEntry(body=bytes(b)) for b in bodies], term, hook)
            return entries, self.pusher.wait_ack(entries[-1])

    def _start_term(self, term: int, role: Role) -> None:
        """A new leader whose log ends in uncommitted entries of earlier terms appends a
        term-start record: Raft's rule commits those only together with an entry of this term
        (term_start_record.py)."""
        store = self.store
        if role is not Role.LEADER or store.ledger_end_index <= store.committed_index or store.ledger_end_term >= term:
            return
        first, last = store.committed_index + 1, store.ledger_end_index
        try:
            entries, _ = self.append_as_leader([term_start_body(term, self.config.self_address)], place_record)
        except DLedgerError as e:
            log.warning("[%s] term %d: no term-start record (%s); entries %d..%d wait for the next append",
                        self.config.self_id, term, e, first, last)  # fmt: skip
            return
        log.info("[%s] term %d starts with entries %d..%d of earlier terms uncommitted: term-start record at %d",
                 self.config.self_id, term, first, last, entries[0].index)  # fmt: skip

    def status(self) -> dict[str, Any]:
        """For operators: this node's role, term, leader, ledger and, on the leader, how far each
        member is behind it."""
        ms = self.member_state
        out: dict[str, Any] = {
            "group": ms.group, "selfId": ms.self_id, "role": ms.role.name, "term": ms.curr_term,
            "leaderId": ms.leader_id, "voteFor": ms.curr_vote_for,
            "ledgerBeginIndex": self.store.ledger_begin_index, "ledgerEndIndex": self.store.ledger_end_index,
            "ledgerEndTerm": self.store.ledger_end_term, "committedIndex": self.store.committed_index,
            "peers": dict(ms.peer_map),
        }  # fmt: skip
        if ms.is_leader():
            marks = self.pusher.status()
            end = self.store.ledger_end_index
            out["members"] = {
                peer: {"endIndex": marks.get(peer, -1), "behind": end - marks.get(peer, -1),
                       "live": True if peer == ms.self_id else ms.peers_live.get(peer, False)}
                for peer in ms.peer_map
            }  # fmt: skip
        return out

    # -- requests from peers and clients ----------------------------------------------------------

    async def handle_request(self, code: int, request: RequestOrResponse) -> RequestOrResponse | None:
        ms = self.member_state
        answer_type = RESPONSE_TYPES[code]
        try:
            if request.remote_id != ms.self_id:
                raise DLedgerError(DLedgerResponseCode.UNKNOWN_MEMBER, f"{request.remote_id} != {ms.self_id}")
            if request.group != ms.group:
                raise DLedgerError(DLedgerResponseCode.UNKNOWN_GROUP, f"{request.group} != {ms.group}")
            if code == DLedgerRequestCode.VOTE:
                assert isinstance(request, VoteRequest)
                return self.elector.handle_vote(request, False)
            if code == DLedgerRequestCode.HEART_BEAT:
                assert isinstance(request, HeartBeatRequest)
                return self.elector.handle_heart_beat(request)
            if code == DLedgerRequestCode.PUSH:
                assert isinstance(request, PushEntryRequest)
                return await self._handle_push(request)
            if code == DLedgerRequestCode.METADATA:
                assert isinstance(request, MetadataRequest)
                return MetadataResponse(group=ms.group, peers=dict(ms.peer_map), leader_id=ms.leader_id)
            if code == DLedgerRequestCode.GET:
                assert isinstance(request, GetEntriesRequest)
                return self._handle_get(request)
            if code == DLedgerRequestCode.APPEND:
                assert isinstance(request, AppendEntryRequest)
                return await self._handle_append(request)
            if code == DLedgerRequestCode.LEADERSHIP_TRANSFER:
                assert isinstance(request, LeadershipTransferRequest)
                return await self._handle_leadership_transfer(request)
        except DLedgerError as e:
            log.info("[%s] %s refused: %s", ms.self_id, DLedgerRequestCode(code).name, e)
            return error_response(answer_type, request, e.code, ms.leader_id)
        return None

    async def _handle_push(self, request: PushEntryRequest) -> PushEntryResponse | None:
        fut = self.pusher.handle_push(request)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), PUSH_ANSWER_WAIT_S)
        except TimeoutError:
            return None  # as DLedger: never answered; the leader's call times out

    def _handle_get(self, request: GetEntriesRequest) -> GetEntriesResponse:
        if not self.member_state.is_leader():
            raise DLedgerError(DLedgerResponseCode.NOT_LEADER, "not the leader")
        if request.begin_index is None:
            raise DLedgerError(DLedgerResponseCode.UNEXPECTED_ARGUMENT, "no beginIndex")
        entry = self.store.get(request.begin_index)
        return GetEntriesResponse(group=self.member_state.group, entries=[entry])

    async def _handle_append(self, request: AppendEntryRequest) -> AppendEntryResponse:
        ms = self.member_state
        if not self.accept_client_appends:
            # every entry of a broker's log is a CommitLog record its dispatch reads; an
            # unauthenticated peer-port client must not write one (RocketMQ takes it)
            raise DLedgerError(DLedgerResponseCode.UNSUPPORTED, "this log takes appends from its own broker only")
        if isinstance(request, BatchAppendEntryRequest) and request.batch_msgs:
            bodies = list(request.batch_msgs)
        elif request.body is not None:
            bodies = [request.body]
        else:
            raise DLedgerError(DLedgerResponseCode.REQUEST_WITH_EMPTY_BODYS, "the append has no body")
        term = ms.curr_term
        try:
            entries, future = self.append_as_leader(bodies)
        except DLedgerError as e:
            if e.code is not DLedgerResponseCode.LEADER_PENDING_FULL:
                raise
            return AppendEntryResponse(group=ms.group, code=int(e.code), term=term, leader_id=ms.self_id)
        outcome = await asyncio.wrap_future(future)
        last = entries[-1]
        return AppendEntryResponse(group=ms.group, code=int(outcome), term=last.term, index=last.index,
                                   leader_id=ms.self_id if outcome is DLedgerResponseCode.SUCCESS else ms.leader_id,
                                   pos=last.pos if outcome is DLedgerResponseCode.SUCCESS else -1)  # fmt: skip

    async def _handle_leadership_transfer(self, request: LeadershipTransferRequest) -> LeadershipTransferResponse:
        ms = self.member_state
        if ms.self_id == request.transfer_id:
            if not ms.is_peer_member(request.transferee_id):
                raise DLedgerError(
                    DLedgerResponseCode.UNKNOWN_MEMBER, f"transferee {request.transferee_id} is not a peer"
                )
            if ms.curr_term != request.term:
                raise DLedgerError(DLedgerResponseCode.INCONSISTENT_TERM, f"{ms.curr_term} != {request.term}")
            if not ms.is_leader():
                raise DLedgerError(DLedgerResponseCode.NOT_LEADER, f"{ms.self_id} is not the leader")
            behind = self.store.ledger_end_index - self.pusher.get_peer_water_mark(
                request.term, request.transferee_id or ""
            )
            if behind >= self.config.max_leadership_transfer_wait_index:
                raise DLedgerError(DLedgerResponseCode.FALL_BEHIND_TOO_MUCH, f"transferee {behind} behind")
            return await self.elector.handle_leadership_transfer(request)
        if ms.self_id == request.transferee_id:
            if request.transfer_id != ms.leader_id:
                raise DLedgerError(DLedgerResponseCode.INCONSISTENT_LEADER, f"{request.transfer_id} is not the leader")
            started = time.monotonic()
            while request.take_leadership_ledger_index > self.store.ledger_end_index:
                if time.monotonic() - started > self.config.leadership_transfer_wait_timeout_ms / 1000:
                    raise DLedgerError(DLedgerResponseCode.TAKE_LEADERSHIP_FAILED, "transferee behind: wait timed out")
                await asyncio.sleep(TAKE_LEADERSHIP_POLL_S)
            return await self.elector.handle_take_leadership(request)
        return LeadershipTransferResponse(term=ms.curr_term, code=int(DLedgerResponseCode.UNEXPECTED_ARGUMENT))

    # -- preferred leader -------------------------------------------------------------------------

    async def _preferred_leader_loop(self) -> None:
        while True:
            await asyncio.sleep(PREFERRED_LEADER_CHECK_S)
            try:
                await self.check_preferred_leader()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("[%s] preferred leader check failed", self.config.self_id)

    async def check_preferred_leader(self) -> None:
        ms = self.member_state
        ids = self.config.preferred_leader_id
        if not ms.is_leader() or not ids or ms.transferee is not None:
            return
        preferred = [i for i in ids.split(";") if i]
        if ms.self_id in preferred:
            return
        end, term = self.store.ledger_end_index, ms.curr_term
        candidates = [
            p for p in preferred
            if ms.is_peer_member(p) and ms.peers_live.get(p)
            and end - self.pusher.get_peer_water_mark(term, p) < self.config.max_leadership_transfer_wait_index
        ]  # fmt: skip
        if not candidates:
            return
        target = min(candidates, key=lambda p: end - self.pusher.get_peer_water_mark(term, p))
        log.info("[%s] preferred leader %s is %d behind: hand leadership to it", ms.self_id, target,
                 end - self.pusher.get_peer_water_mark(term, target))  # fmt: skip
        response = await self.elector.handle_leadership_transfer(
            LeadershipTransferRequest(term=term, transferee_id=target)
        )
        log.info("[%s] leadership transfer to %s answered %d", ms.self_id, target, response.code)
