"""DLedgerLeaderElector's rules (dledger 0.3.1.2): the vote rules in their order (log before
term), the heartbeat rules, the candidate's outcomes and back-offs, the leader's step-down,
role-change listeners and taking leadership."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_leader_elector import DLedgerLeaderElector
from pumice.dledger.dledger_memory_store import DLedgerMemoryStore
from pumice.dledger.dledger_protocol import (
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from pumice.dledger.dledger_response_code import DLedgerResponseCode
from pumice.dledger.member_state import MemberState, Role

PEERS = "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3"


class ScriptedRpc:
    """Answers votes and heartbeats from per-peer scripts (a function of the request)."""

    def __init__(self) -> None:
        self.votes: dict[str, Any] = {}
        self.beats: dict[str, Any] = {}
        self.sent: list[Any] = []

    async def vote(self, req: VoteRequest) -> VoteResponse:
        self.sent.append(req)
        answer = self.votes.get(req.remote_id or "")
        return answer(req) if answer else VoteResponse()

    async def heart_beat(self, req: HeartBeatRequest) -> HeartBeatResponse:
        self.sent.append(req)
        answer = self.beats.get(req.remote_id or "")
        return answer(req) if answer else HeartBeatResponse(code=int(DLedgerResponseCode.NETWORK_ERROR))


def _node(
    tmp_path: Path, self_id: str = "n1", **cfg: Any
) -> tuple[DLedgerLeaderElector, DLedgerMemoryStore, ScriptedRpc]:
    config = DLedgerConfig(group="g", self_id=self_id, peers=PEERS, store_base_dir=str(tmp_path), **cfg)
    store = DLedgerMemoryStore()
    rpc = ScriptedRpc()
    return DLedgerLeaderElector(config, MemberState(config), rpc, store), store, rpc  # type: ignore[arg-type]


def _vote(candidate: str = "n0", term: int = 1, end_index: int = -1, end_term: int = -1) -> VoteRequest:
    return VoteRequest(group="g", leader_id=candidate, local_id=candidate, remote_id="n1", term=term,
                       ledger_end_index=end_index, ledger_end_term=end_term)  # fmt: skip


def _fill(store: DLedgerMemoryStore, term: int, n: int) -> None:
    store.append_as_leader([DLedgerEntry(b"m") for _ in range(n)], term)


def test_vote_rules_in_dledgers_order(tmp_path: Path) -> None:
    e, _, _ = _node(tmp_path)
    ms = e.member_state
    assert e.handle_vote(_vote("n9"), False).vote_result is VoteResult.REJECT_UNKNOWN_LEADER
    assert e.handle_vote(_vote("n1"), False).vote_result is VoteResult.REJECT_UNEXPECTED_LEADER
    # a larger term first makes this node a candidate at it: TERM_NOT_READY
    r = e.handle_vote(_vote("n0", term=1), False)
    assert r.vote_result is VoteResult.REJECT_TERM_NOT_READY and e.need_increase_term_immediately
    assert ms.role is Role.CANDIDATE and ms.known_max_term_in_group == 1
    ms.next_term()
    assert ms.curr_term == 1
    ok = e.handle_vote(_vote("n0", term=1), False)
    assert ok.vote_result is VoteResult.ACCEPT and ok.term == 1
    assert (tmp_path / "dledger-n1" / "currterm").read_bytes() == b"voteLeader=n0\ncurrTerm=1\n"
    assert e.handle_vote(_vote("n0", term=1), False).vote_result is VoteResult.ACCEPT  # the same candidate again
    assert e.handle_vote(_vote("n2", term=1), False).vote_result is VoteResult.REJECT_ALREADY_VOTED
    ms.leader_id = "n0"
    assert e.handle_vote(_vote("n2", term=1), False).vote_result is VoteResult.REJECT_ALREADY_HAS_LEADER
    assert e.handle_vote(_vote("n2", term=0), False).vote_result is VoteResult.REJECT_EXPIRED_VOTE_TERM


def test_the_log_is_checked_before_the_term(tmp_path: Path) -> None:
    e, store, _ = _node(tmp_path)
    _fill(store, 2, 3)  # this node's log ends at index 2, term 2
    # a restarted node with a larger term but an older log cannot depose anyone
    r = e.handle_vote(_vote("n0", term=9, end_index=5, end_term=1), False)
    assert r.vote_result is VoteResult.REJECT_EXPIRED_LEDGER_TERM and r.term == 0
    assert not e.need_increase_term_immediately and e.member_state.known_max_term_in_group == -1
    r = e.handle_vote(_vote("n0", term=9, end_index=1, end_term=2), False)
    assert r.vote_result is VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    # the response keeps the request's ids (not swapped)
    assert (r.local_id, r.remote_id, r.leader_id) == ("n0", "n1", "n0")


def test_term_below_the_ledger_end_term_is_refused(tmp_path: Path) -> None:
    e, store, _ = _node(tmp_path)
    _fill(store, 5, 1)
    e.member_state.change_to_candidate(3)
    e.member_state.next_term()
    r = e.handle_vote(_vote("n0", term=3, end_index=0, end_term=5), False)
    assert r.vote_result is VoteResult.REJECT_TERM_SMALL_THAN_LEDGER and r.term == 5


def test_heartbeat_rules(tmp_path: Path) -> None:
    e, _, _ = _node(tmp_path)
    ms = e.member_state
    roles: list[tuple[int, Role]] = []
    e.add_role_change_listener(lambda term, role: roles.append((term, role)))

    def beat(leader: str, term: int) -> HeartBeatResponse:
        return e.handle_heart_beat(HeartBeatRequest(group="g", leader_id=leader, local_id=leader, remote_id="n1",
                                                    term=term))  # fmt: skip

    assert beat("n9", 0).code == DLedgerResponseCode.UNKNOWN_MEMBER
    assert beat("n1", 0).code == DLedgerResponseCode.UNEXPECTED_MEMBER
    r = beat("n0", 2)
    assert r.code == DLedgerResponseCode.TERM_NOT_READY and ms.role is Role.CANDIDATE
    ms.next_term()  # the maintainer adopts term 2
    assert beat("n0", 2).encode() == b'{"code":200,"term":-1}' and ms.role is Role.FOLLOWER
    assert roles[-1] == (2, Role.FOLLOWER)
    assert beat("n0", 2).code == 200
    r = beat("n0", 1)
    assert (r.code, r.term) == (DLedgerResponseCode.EXPIRED_TERM, 2)
    assert beat("n2", 2).code == DLedgerResponseCode.INCONSISTENT_LEADER


def test_candidate_outcomes_and_back_offs(tmp_path: Path) -> None:
    e, _, rpc = _node(tmp_path)

    def accept(req: VoteRequest) -> VoteResponse:
        return VoteResponse.answering(req, req.term, VoteResult.ACCEPT)

    def has_leader(req: VoteRequest) -> VoteResponse:
        return VoteResponse.answering(req, req.term, VoteResult.REJECT_ALREADY_HAS_LEADER)

    async def scenario() -> None:
        # first vote of term 1: n0 and n2 silent -> fewer than a quorum answered: 300..1000 ms
        e.last_parse_result = "WAIT_TO_VOTE_NEXT"
        before = time.monotonic() * 1000
        await e.maintain_state()
        assert e.member_state.curr_term == 1 and e.last_parse_result == "WAIT_TO_REVOTE"
        assert 300 <= e.next_time_to_request_vote - before <= 1100
        # a peer already has a leader: + 6000 ms
        rpc.votes["n0"] = has_leader
        e.next_time_to_request_vote = -1
        await e.maintain_state()
        assert e.next_time_to_request_vote - time.monotonic() * 1000 >= 6000
        # a quorum accepts: LEADER in the same term
        rpc.votes["n0"] = accept
        e.next_time_to_request_vote = -1
        await e.maintain_state()
        assert e.member_state.role is Role.LEADER and e.member_state.curr_term == 1
        assert all(v.term == 1 and v.leader_id == "n1" and v.local_id == "n1" for v in rpc.sent)

    asyncio.run(scenario())


def test_split_vote_moves_to_the_next_term_and_larger_term_is_adopted(tmp_path: Path) -> None:
    e, _, rpc = _node(tmp_path)
    rpc.votes["n0"] = lambda req: VoteResponse.answering(req, req.term, VoteResult.REJECT_ALREADY_VOTED)
    rpc.votes["n2"] = lambda req: VoteResponse.answering(req, 7, VoteResult.REJECT_EXPIRED_VOTE_TERM)

    async def scenario() -> None:
        e.next_time_to_request_vote = -1
        await e.maintain_state()
        assert e.last_parse_result == "WAIT_TO_VOTE_NEXT" and e.member_state.known_max_term_in_group == 7
        e.next_time_to_request_vote = -1
        await e.maintain_state()  # the next vote asks for the largest term known
        assert e.member_state.curr_term == 7

    asyncio.run(scenario())


def test_leader_steps_down_without_a_heartbeat_quorum(tmp_path: Path) -> None:
    e, _, rpc = _node(tmp_path, heart_beat_time_interval_ms=50)
    ms = e.member_state
    ms.next_term()
    e.change_role_to_leader(1)
    ok = {"n0": lambda req: HeartBeatResponse(), "n2": lambda req: HeartBeatResponse()}
    rpc.beats.update(ok)

    async def scenario() -> None:
        await e.maintain_state()
        assert ms.is_leader()
        rpc.beats.clear()  # both followers gone: 3 x 50 ms later it steps down
        deadline = time.monotonic() + 5
        while ms.is_leader() and time.monotonic() < deadline:
            e.last_send_heart_beat_time = -1
            await e.maintain_state()
            await asyncio.sleep(0.02)
        assert ms.role is Role.CANDIDATE and ms.curr_term == 1

    asyncio.run(scenario())


def test_leader_steps_down_on_a_larger_term(tmp_path: Path) -> None:
    e, _, rpc = _node(tmp_path)
    e.member_state.next_term()
    e.change_role_to_leader(1)
    rpc.beats["n0"] = lambda req: HeartBeatResponse(code=int(DLedgerResponseCode.EXPIRED_TERM), term=4)
    asyncio.run(e.maintain_state())
    assert e.member_state.role is Role.CANDIDATE and e.member_state.known_max_term_in_group == 4


def test_follower_becomes_candidate_after_three_missed_heartbeats(tmp_path: Path) -> None:
    e, _, _ = _node(tmp_path, heart_beat_time_interval_ms=40)
    e.member_state.next_term()
    e.change_role_to_follower(1, "n0")
    asyncio.run(e.maintain_state())
    assert e.member_state.is_follower()
    time.sleep(0.15)
    asyncio.run(e.maintain_state())
    assert e.member_state.role is Role.CANDIDATE and e.member_state.leader_id is None


def test_taking_leadership_votes_fast_and_answers_once_leader(tmp_path: Path) -> None:
    e, _, rpc = _node(tmp_path, preferred_leader_id="n1")
    ms = e.member_state
    ms.next_term()
    e.change_role_to_follower(1, "n0")
    rpc.votes["n0"] = lambda req: VoteResponse.answering(req, req.term, VoteResult.ACCEPT)

    async def scenario() -> None:
        fut = e.handle_take_leadership(LeadershipTransferRequest(term=1, transfer_id="n0", transferee_id="n1"))
        assert ms.role is Role.CANDIDATE and e.is_taking_leadership() is False  # term 2 not reached yet
        await e.maintain_state()  # adopts term 2
        assert ms.curr_term == 2 and e.is_taking_leadership()
        assert 25 <= e.next_time_to_request_vote - time.monotonic() * 1000 <= 110
        # while taking leadership it refuses an equal log
        r = e.handle_vote(_vote("n2", term=2), False)
        assert r.vote_result is VoteResult.REJECT_TAKING_LEADERSHIP
        e.next_time_to_request_vote = -1
        await e.maintain_state()
        assert ms.is_leader()
        assert (await fut).code == DLedgerResponseCode.SUCCESS

    asyncio.run(scenario())


@pytest.mark.parametrize("term", [0, 2])
def test_take_leadership_at_another_term_is_refused(tmp_path: Path, term: int) -> None:
    e, _, _ = _node(tmp_path)
    e.member_state.next_term()

    async def scenario() -> int:
        return (await e.handle_take_leadership(LeadershipTransferRequest(term=term))).code

    assert asyncio.run(scenario()) == DLedgerResponseCode.INCONSISTENT_TERM
