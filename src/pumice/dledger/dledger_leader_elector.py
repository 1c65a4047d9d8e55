"""DLedgerLeaderElector: votes, heartbeats, role changes and leadership transfer (dledger
0.3.1.2, ``DLedgerLeaderElector.java``; DLEDGER.md §2.4 and §6).

One coroutine (DLedger's StateMaintainer, every 10 ms) acts by role:

* LEADER: heartbeats to every peer each ``heartBeatTimeIntervalMs`` (2 s), waiting up to that
  long for a quorum of answers; without a quorum of successes for more than
  ``maxHeartBeatLeak`` x interval (6 s), or on an answer with a larger term or
  INCONSISTENT_LEADER, it steps down to CANDIDATE;
* FOLLOWER: once 2 x interval has passed without a heartbeat it checks; past 3 x interval it
  becomes CANDIDATE;
* CANDIDATE: votes at ``nextTimeToRequestVote`` (or at once after TERM_NOT_READY):

  ====================================================  ========================================
  outcome of a vote                                     next vote
  ====================================================  ========================================
  a peer knows a larger term                            that term, in 300..1000 ms
  a peer already has a leader                           300..1000 ms + 6000 ms
  fewer than a quorum of answers                        300..1000 ms
  a quorum only counting peers with a bigger ledger     300..1000 ms + 1000 ms
  a quorum of ACCEPT                                    LEADER
  a quorum of ACCEPT + REJECT_TERM_NOT_READY            at once, same term
  otherwise (split vote)                                next term, in 300..1000 ms
  ====================================================  ========================================

  A node taking leadership (LEADERSHIP_TRANSFER, preferredLeaderId) votes every 30..100 ms.

The vote rules, in DLedger's order (the log before the term): unknown candidate; its own id
from another node; ``ledgerEndTerm`` smaller, or equal with a smaller ``ledgerEndIndex``;
``term`` smaller; same term and a vote for another (REJECT_ALREADY_HAS_LEADER with a leader,
else REJECT_ALREADY_VOTED); larger term (become CANDIDATE at it, REJECT_TERM_NOT_READY);
``term`` below our ledger end term; taking leadership; else the vote is written to ``currterm``
and then ACCEPT.

Every role change, new term and vote is logged once at INFO; role-change listeners
(``add_role_change_listener``, the broker's handler) are called on the DLedger loop with
(term, role) and must not block.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_protocol import (
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from pumice.dledger.dledger_response_code import DLedgerResponseCode
from pumice.dledger.member_state import MemberState, Role

if TYPE_CHECKING:
    from pumice.dledger.dledger_rpc_service import DLedgerRpcService

log = logging.getLogger(__name__)

MAINTAIN_INTERVAL_S = 0.01

RoleChangeListener = Callable[[int, Role], None]


class LedgerEnd(Protocol):
    @property
    def ledger_end_index(self) -> int: ...

    @property
    def ledger_end_term(self) -> int: ...


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class DLedgerLeaderElector:
    def __init__(self, config: DLedgerConfig, member_state: MemberState, rpc: DLedgerRpcService | None,
                 ledger: LedgerEnd) -> None:  # fmt: skip
        self.config = config
        self.member_state = member_state
        self.rpc = rpc
        self.ledger = ledger
        self.last_leader_heart_beat_time = -1
        self.last_send_heart_beat_time = -1
        self.last_succ_heart_beat_time = -1
        self.next_time_to_request_vote = -1
        self.need_increase_term_immediately = False
        self.last_parse_result = "WAIT_TO_REVOTE"
        self.listeners: list[RoleChangeListener] = []
        self._take_leadership: tuple[LeadershipTransferRequest, asyncio.Future[LeadershipTransferResponse]] | None
        self._take_leadership = None
        self._random = random.Random()
        self._task: asyncio.Task[None] | None = None

    # -- life -----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._maintain_loop(), name="DLedgerStateMaintainer")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def add_role_change_listener(self, listener: RoleChangeListener) -> None:
        if listener not in self.listeners:
            self.listeners.append(listener)

    async def _maintain_loop(self) -> None:
        while True:
            try:
                if self.config.enable_leader_elector:
                    await self.maintain_state()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("[%s] error in the state maintainer", self.member_state.self_id)
            await asyncio.sleep(MAINTAIN_INTERVAL_S)

    async def maintain_state(self) -> None:
        ms = self.member_state
        if ms.is_leader():
            await self._maintain_as_leader()
        elif ms.is_follower():
            self._maintain_as_follower()
        else:
            await self._maintain_as_candidate()

    # -- role changes ------------------------------------------------------------------------

    def _role_changed(self, term: int, role: Role) -> None:
        log.info("[%s] role %s in term %d (leader %s)", self.member_state.self_id, role.name, term,
                 self.member_state.leader_id)  # fmt: skip
        self._check_take_leadership(term, role)
        for listener in list(self.listeners):
            try:
                listener(term, role)
            except Exception:
                log.exception("[%s] role change listener %r failed", self.member_state.self_id, listener)

    def change_role_to_leader(self, term: int) -> None:
        ms = self.member_state
        if ms.curr_term != term:
            log.warning("[%s] not leader in term %d: the term is now %d", ms.self_id, term, ms.curr_term)
            return
        ms.change_to_leader(term)
        self.last_send_heart_beat_time = -1
        self._role_changed(term, Role.LEADER)

    def change_role_to_candidate(self, term: int) -> None:
        ms = self.member_state
        if term < ms.curr_term:
            return
        was = (ms.role, ms.curr_term)
        ms.change_to_candidate(term)
        if was != (Role.CANDIDATE, term):
            self._role_changed(term, Role.CANDIDATE)

    def change_role_to_follower(self, term: int, leader_id: str) -> None:
        self.last_parse_result = "WAIT_TO_REVOTE"
        self.member_state.change_to_follower(term, leader_id)
        self.last_leader_heart_beat_time = _now_ms()
        self._role_changed(term, Role.FOLLOWER)

    # -- the follower's and voter's side -------------------------------------------------------

    def handle_heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        ms = self.member_state

        def answer(code: DLedgerResponseCode, term: int = -1) -> HeartBeatResponse:
            return HeartBeatResponse(code=int(code), term=term)

        if not ms.is_peer_member(request.leader_id):
            log.warning("[%s] heartbeat from unknown member %s", ms.self_id, request.leader_id)
            return answer(DLedgerResponseCode.UNKNOWN_MEMBER, ms.curr_term)
        if ms.self_id == request.leader_id:
            return answer(DLedgerResponseCode.UNEXPECTED_MEMBER, ms.curr_term)
        if request.term < ms.curr_term:
            return answer(DLedgerResponseCode.EXPIRED_TERM, ms.curr_term)
        if request.term == ms.curr_term:
            if ms.leader_id is None:
                self.change_role_to_follower(request.term, request.leader_id)  # type: ignore[arg-type]
                return answer(DLedgerResponseCode.SUCCESS)
            if request.leader_id == ms.leader_id:
                self.last_leader_heart_beat_time = _now_ms()
                return answer(DLedgerResponseCode.SUCCESS)
            log.error("[%s] term %d has leader %s, but heard from %s", ms.self_id, ms.curr_term, ms.leader_id,
                      request.leader_id)  # fmt: skip
            return answer(DLedgerResponseCode.INCONSISTENT_LEADER)
        # a larger term: candidate first, the maintainer adopts it at once
        self.change_role_to_candidate(request.term)
        self.need_increase_term_immediately = True
        return answer(DLedgerResponseCode.TERM_NOT_READY)

    def handle_vote(self, request: VoteRequest, self_vote: bool) -> VoteResponse:
        ms = self.member_state

        def answer(result: VoteResult, term: int | None = None) -> VoteResponse:
            return VoteResponse.answering(request, ms.curr_term if term is None else term, result)

        candidate = request.leader_id
        if not ms.is_peer_member(candidate):
            return answer(VoteResult.REJECT_UNKNOWN_LEADER)
        if not self_vote and ms.self_id == candidate:
            return answer(VoteResult.REJECT_UNEXPECTED_LEADER)
        end_term, end_index = self.ledger.ledger_end_term, self.ledger.ledger_end_index
        if request.ledger_end_term < end_term:
            return answer(VoteResult.REJECT_EXPIRED_LEDGER_TERM)
        if request.ledger_end_term == end_term and request.ledger_end_index < end_index:
            return answer(VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
        if request.term < ms.curr_term:
            return answer(VoteResult.REJECT_EXPIRED_VOTE_TERM)
        if request.term == ms.curr_term:
            if ms.curr_vote_for is not None and ms.curr_vote_for != candidate:
                if ms.leader_id is not None:
                    return answer(VoteResult.REJECT_ALREADY_HAS_LEADER)
                return answer(VoteResult.REJECT_ALREADY_VOTED)
        else:
            self.change_role_to_candidate(request.term)
            self.need_increase_term_immediately = True
            return answer(VoteResult.REJECT_TERM_NOT_READY)
        if request.term < end_term:
            return answer(VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, end_term)
        if (
            not self_vote
            and self.is_taking_leadership()
            and request.ledger_end_term == end_term
            and end_index >= request.ledger_end_index
        ):
            return answer(VoteResult.REJECT_TAKING_LEADERSHIP)
        if ms.curr_vote_for != candidate:
            ms.set_curr_vote_for(candidate)  # on disk before the ACCEPT leaves
        return answer(VoteResult.ACCEPT)

    # -- the leader's side --------------------------------------------------------------------

    async def _maintain_as_leader(self) -> None:
        ms = self.member_state
        if _now_ms() - self.last_send_heart_beat_time > self.config.heart_beat_time_interval_ms:
            if not ms.is_leader():
                return
            term, leader_id = ms.curr_term, ms.leader_id
            self.last_send_heart_beat_time = _now_ms()
            await self._send_heartbeats(term, leader_id)

    async def _send_heartbeats(self, term: int, leader_id: str | None) -> None:
        ms = self.member_state
        assert self.rpc is not None
        succ, not_ready, max_term, inconsistent = 1, 0, -1, False
        interval_ms = self.config.heart_beat_time_interval_ms
        calls = {}
        for peer in ms.peer_map:
            if peer == ms.self_id:
                continue
            req = HeartBeatRequest(group=ms.group, local_id=ms.self_id, remote_id=peer, leader_id=leader_id, term=term)
            calls[asyncio.ensure_future(self.rpc.heart_beat(req))] = peer
        pending = set(calls)
        deadline = time.monotonic() + interval_ms / 1000
        while pending:
            done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - time.monotonic()),
                                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if not done:
                break
            for fut in done:
                x = fut.result()
                code = DLedgerResponseCode.of(x.code)
                if code is DLedgerResponseCode.SUCCESS:
                    succ += 1
                elif code is DLedgerResponseCode.EXPIRED_TERM:
                    max_term = max(max_term, x.term)
                elif code is DLedgerResponseCode.INCONSISTENT_LEADER:
                    inconsistent = True
                elif code is DLedgerResponseCode.TERM_NOT_READY:
                    not_ready += 1
                ms.peers_live[calls[fut]] = code is not DLedgerResponseCode.NETWORK_ERROR
            if ms.is_quorum(succ) or ms.is_quorum(succ + not_ready):
                break
        for fut in pending:  # answers after the wait still mark the peer live (as DLedger's callbacks)
            fut.add_done_callback(self._late_heartbeat(calls[fut]))
        if ms.is_quorum(succ):
            self.last_succ_heart_beat_time = _now_ms()
            return
        log.info("[%s] term %d: heartbeats answered by %d of %d (not ready %d, max term %d, inconsistent %s)",
                 ms.self_id, term, succ, ms.peer_size(), not_ready, max_term, inconsistent)  # fmt: skip
        if ms.is_quorum(succ + not_ready):
            self.last_send_heart_beat_time = -1
        elif max_term > term:
            self.change_role_to_candidate(max_term)
        elif inconsistent:
            self.change_role_to_candidate(term)
        elif _now_ms() - self.last_succ_heart_beat_time > self.config.max_heart_beat_leak * interval_ms:
            self.change_role_to_candidate(term)

    def _late_heartbeat(self, peer: str) -> Callable[[asyncio.Future[HeartBeatResponse]], None]:
        def done(f: asyncio.Future[HeartBeatResponse]) -> None:
            if not f.cancelled():
                live = f.result().code != DLedgerResponseCode.NETWORK_ERROR
                self.member_state.peers_live[peer] = live

        return done

    def _maintain_as_follower(self) -> None:
        interval = self.config.heart_beat_time_interval_ms
        elapsed = _now_ms() - self.last_leader_heart_beat_time
        if (
            elapsed > 2 * interval
            and self.member_state.is_follower()
            and elapsed > self.config.max_heart_beat_leak * interval
        ):
            log.info("[%s] no heartbeat from leader %s for %d ms", self.member_state.self_id,
                     self.member_state.leader_id, elapsed)  # fmt: skip
            self.change_role_to_candidate(self.member_state.curr_term)

    # -- the candidate's side -----------------------------------------------------------------

    def is_taking_leadership(self) -> bool:
        ids = self.config.preferred_leader_id
        if ids and self.member_state.term_to_take_leadership == self.member_state.curr_term:
            return self.member_state.self_id in ids.split(";")
        return False

    def _next_time_to_request_vote(self) -> int:
        c = self.config
        if self.is_taking_leadership():
            lo, hi = c.min_take_leadership_vote_interval_ms, c.max_take_leadership_vote_interval_ms
        else:
            lo, hi = c.min_vote_interval_ms, c.max_vote_interval_ms
        return _now_ms() + lo + self._random.randrange(max(1, hi - lo))

    async def _maintain_as_candidate(self) -> None:
        ms = self.member_state
        if _now_ms() < self.next_time_to_request_vote and not self.need_increase_term_immediately:
            return
        if not ms.is_candidate():
            return
        if self.last_parse_result == "WAIT_TO_VOTE_NEXT" or self.need_increase_term_immediately:
            term = ms.next_term()
            self.last_parse_result = "WAIT_TO_REVOTE"
        else:
            term = ms.curr_term
        end_index, end_term = self.ledger.ledger_end_index, self.ledger.ledger_end_term
        if self.need_increase_term_immediately:
            self.next_time_to_request_vote = self._next_time_to_request_vote()
            self.need_increase_term_immediately = False
            return
        result = await self._vote(term, end_term, end_index)
        if result == "PASSED":
            self.change_role_to_leader(term)

    async def _vote(self, term: int, end_term: int, end_index: int) -> str:
        ms = self.member_state
        known_max_term, valid, accepted, not_ready, bigger_ledger = term, 0, 0, 0, 0
        already_has_leader = False
        futures = []
        for peer in ms.peer_map:
            req = VoteRequest(group=ms.group, ledger_end_index=end_index, ledger_end_term=end_term,
                              leader_id=ms.self_id, term=term, remote_id=peer, local_id=ms.self_id)  # fmt: skip
            if peer == ms.self_id:
                fut: asyncio.Future[VoteResponse] = asyncio.get_running_loop().create_future()
                fut.set_result(self.handle_vote(req, True))
                futures.append(fut)
            else:
                assert self.rpc is not None
                futures.append(asyncio.ensure_future(self.rpc.vote(req)))
        pending = set(futures)
        deadline = time.monotonic() + (2000 + self._random.randrange(self.config.max_vote_interval_ms)) / 1000
        while pending:
            done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - time.monotonic()),
                                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if not done:
                break
            for f in done:
                x = f.result()
                if x.vote_result is not VoteResult.UNKNOWN:
                    valid += 1
                r = x.vote_result
                if r is VoteResult.ACCEPT:
                    accepted += 1
                elif r is VoteResult.REJECT_ALREADY_HAS_LEADER:
                    already_has_leader = True
                elif r in (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, VoteResult.REJECT_EXPIRED_VOTE_TERM):
                    known_max_term = max(known_max_term, x.term)
                elif r in (VoteResult.REJECT_EXPIRED_LEDGER_TERM, VoteResult.REJECT_SMALL_LEDGER_END_INDEX):
                    bigger_ledger += 1
                elif r is VoteResult.REJECT_TERM_NOT_READY:
                    not_ready += 1
            if already_has_leader or ms.is_quorum(accepted) or ms.is_quorum(accepted + not_ready):
                break
        for f in pending:
            f.cancel()
        extra = self.config.heart_beat_time_interval_ms * self.config.max_heart_beat_leak
        if known_max_term > term:
            result = "WAIT_TO_VOTE_NEXT"
            self.next_time_to_request_vote = self._next_time_to_request_vote()
            self.change_role_to_candidate(known_max_term)
        elif already_has_leader:
            result = "WAIT_TO_REVOTE"
            self.next_time_to_request_vote = self._next_time_to_request_vote() + extra
        elif not ms.is_quorum(valid):
            result = "WAIT_TO_REVOTE"
            self.next_time_to_request_vote = self._next_time_to_request_vote()
        elif not ms.is_quorum(valid - bigger_ledger):
            result = "WAIT_TO_REVOTE"
            self.next_time_to_request_vote = self._next_time_to_request_vote() + self.config.max_vote_interval_ms
        elif ms.is_quorum(accepted):
            result = "PASSED"
        elif ms.is_quorum(accepted + not_ready):
            result = "REVOTE_IMMEDIATELY"
        else:
            result = "WAIT_TO_VOTE_NEXT"
            self.next_time_to_request_vote = self._next_time_to_request_vote()
        self.last_parse_result = result
        log.info("[%s] vote in term %d: %d members, %d valid, %d accepted, %d not ready, %d bigger ledger, "
                 "has leader %s, max term %d: %s", ms.self_id, term, ms.peer_size(), valid, accepted, not_ready,
                 bigger_ledger, already_has_leader, known_max_term, result)  # fmt: skip
        return result

    # -- leadership transfer ----------------------------------------------------------------

    async def handle_leadership_transfer(self, request: LeadershipTransferRequest) -> LeadershipTransferResponse:
        """The leader's side: mark the transferee (appends are refused meanwhile), ask it to take
        leadership, clear the mark if it failed."""
        ms = self.member_state

        def refuse(code: DLedgerResponseCode) -> LeadershipTransferResponse:
            return LeadershipTransferResponse(term=ms.curr_term, code=int(code))

        log.info("[%s] leadership transfer to %s in term %d", ms.self_id, request.transferee_id, request.term)
        if ms.curr_term != request.term:
            return refuse(DLedgerResponseCode.INCONSISTENT_TERM)
        if not ms.is_leader():
            return refuse(DLedgerResponseCode.NOT_LEADER)
        if ms.transferee is not None:
            return refuse(DLedgerResponseCode.LEADER_TRANSFERRING)
        ms.transferee = request.transferee_id
        take = LeadershipTransferRequest(
            group=ms.group, leader_id=ms.leader_id, local_id=ms.self_id, remote_id=request.transferee_id,
            term=request.term, take_leadership_ledger_index=self.ledger.ledger_end_index,
            transfer_id=ms.self_id, transferee_id=request.transferee_id,
        )  # fmt: skip
        assert self.rpc is not None
        response = await self.rpc.leadership_transfer(take)
        if response.code != DLedgerResponseCode.SUCCESS or (ms.curr_term == request.term and ms.transferee is not None):
            log.warning("[%s] leadership transfer to %s failed (%d)", ms.self_id, request.transferee_id, response.code)
            if ms.is_leader():
                ms.transferee = None
        return response

    def handle_take_leadership(self, request: LeadershipTransferRequest) -> asyncio.Future[LeadershipTransferResponse]:
        """The transferee's side: become CANDIDATE at term + 1 and vote every 30..100 ms; the
        answer waits for the outcome."""
        ms = self.member_state
        fut: asyncio.Future[LeadershipTransferResponse] = asyncio.get_running_loop().create_future()
        if ms.curr_term != request.term:
            fut.set_result(
                LeadershipTransferResponse(term=ms.curr_term, code=int(DLedgerResponseCode.INCONSISTENT_TERM))
            )
            return fut
        target = request.term + 1
        ms.term_to_take_leadership = target
        self._take_leadership = (request, fut)
        self.change_role_to_candidate(target)
        self.need_increase_term_immediately = True
        return fut

    def _check_take_leadership(self, term: int, role: Role) -> None:
        ms = self.member_state
        if ms.term_to_take_leadership == -1 or self._take_leadership is None:
            return
        target = ms.term_to_take_leadership
        if term > target:
            code = DLedgerResponseCode.EXPIRED_TERM
        elif term == target:
            if role is Role.LEADER:
                code = DLedgerResponseCode.SUCCESS
            elif role is Role.FOLLOWER:
                code = DLedgerResponseCode.TAKE_LEADERSHIP_FAILED
            else:
                return
        else:
            code = (
                DLedgerResponseCode.TAKE_LEADERSHIP_FAILED
                if role is Role.FOLLOWER
                else DLedgerResponseCode.INTERNAL_ERROR
            )
        _, fut = self._take_leadership
        if not fut.done():
            fut.set_result(LeadershipTransferResponse(term=term, code=int(code)))
        log.info("[%s] take leadership for term %d: %s as %s in term %d", ms.self_id, target, code.name, role.name,
                 term)  # fmt: skip
        ms.term_to_take_leadership = -1
        self._take_leadership = None
