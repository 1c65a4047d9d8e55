"""DLedgerEntryPusher's rules: the follower's EntryHandler (in-order APPEND, REPEATED_PUSH,
COMPARE/TRUNCATE/COMMIT, NOT_FOLLOWER), the QuorumAckChecker (median water mark, time-outs,
TERM_CHANGED, and Raft's current-term rule beyond DLedger), and the leader's EntryDispatcher
bringing a diverged follower back (COMPARE -> TRUNCATE -> APPEND), over in-process calls."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_entry_pusher import DLedgerEntryPusher
from pumice.dledger.dledger_memory_store import DLedgerMemoryStore
from pumice.dledger.dledger_protocol import PushEntryRequest, PushEntryResponse, PushType
from pumice.dledger.dledger_response_code import DLedgerResponseCode
from pumice.dledger.member_state import MemberState

PEERS = "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3"


def _pusher(tmp_path: Path, self_id: str, rpc: Any = None, **cfg: Any) -> DLedgerEntryPusher:
    config = DLedgerConfig(group="g", self_id=self_id, peers=PEERS, store_base_dir=str(tmp_path / self_id), **cfg)
    return DLedgerEntryPusher(config, MemberState(config), DLedgerMemoryStore(), rpc)


def _as_follower(p: DLedgerEntryPusher, term: int, leader: str = "n0") -> None:
    ms = p.member_state
    ms.change_to_candidate(term)
    ms.next_term()
    ms.change_to_follower(term, leader)


def _as_leader(p: DLedgerEntryPusher, term: int) -> None:
    ms = p.member_state
    ms.change_to_candidate(term)
    ms.next_term()
    ms.change_to_leader(term)


def _entries(
    term: int, n: int, start_index: int = 0, start_pos: int = 0, body: bytes = b"x" * 10
) -> list[DLedgerEntry]:
    out = []
    pos = start_pos
    for i in range(n):
        e = DLedgerEntry(body, start_index + i, term, pos)
        e.compute_size_in_bytes()
        pos += e.size
        out.append(e)
    return out


def _push(type_: PushType, entry: DLedgerEntry | None = None, term: int = 1, commit: int = -1) -> PushEntryRequest:
    return PushEntryRequest(group="g", remote_id="n1", local_id="n0", leader_id="n0", term=term, type=type_,
                            entry=entry, commit_index=commit)  # fmt: skip


async def _settle(p: DLedgerEntryPusher) -> None:
    for _ in range(100):
        if not p.entry_handler.work():
            break


def test_follower_applies_appends_in_index_order(tmp_path: Path) -> None:
    p = _pusher(tmp_path, "n1")
    _as_follower(p, 1)
    e0, e1, e2 = _entries(1, 3)

    async def scenario() -> list[PushEntryResponse]:
        p.entry_handler.wakeup = asyncio.Event()
        futs = [p.handle_push(_push(PushType.APPEND, e, commit=c)) for e, c in ((e2, 1), (e0, -1), (e1, 0))]
        dup = p.handle_push(_push(PushType.APPEND, e2))
        assert dup.done() and dup.result().code == DLedgerResponseCode.REPEATED_PUSH
        await _settle(p)
        return [f.result() for f in futs]

    r2, r0, r1 = asyncio.run(scenario())
    assert [r.code for r in (r0, r1, r2)] == [200, 200, 200]
    assert (r2.index, r2.count, r2.begin_index, r2.end_index) == (2, 1, 0, 2)
    assert p.store.ledger_end_index == 2 and p.store.committed_index == 1


def test_compare_truncate_commit_and_not_follower(tmp_path: Path) -> None:
    p = _pusher(tmp_path, "n1")
    _as_follower(p, 2)
    for e in _entries(1, 3):
        p.store.append_as_follower(e, 1, "n0")
    leader_view = _entries(2, 2, start_index=1, start_pos=58)  # index 1 and 2 are term 2 on the leader

    async def scenario() -> None:
        p.entry_handler.wakeup = asyncio.Event()
        same = p.handle_push(_push(PushType.COMPARE, _entries(1, 1)[0], term=2))
        other = p.handle_push(_push(PushType.COMPARE, leader_view[0], term=2))
        await _settle(p)
        assert same.result().code == 200 and other.result().code == DLedgerResponseCode.INCONSISTENT_STATE
        assert (other.result().begin_index, other.result().end_index) == (0, 2)
        cut = p.handle_push(_push(PushType.TRUNCATE, leader_view[0], term=2, commit=0))
        await _settle(p)
        assert cut.result().code == 200 and p.store.ledger_end_index == 1
        assert p.store.get(1).term == 2 and p.store.committed_index == 0
        commit = p.handle_push(_push(PushType.COMMIT, term=2, commit=1))
        await _settle(p)
        r = commit.result()
        assert r.code == 200 and r.index is None and p.store.committed_index == 1
        p.member_state.change_to_candidate(3)
        refused = p.handle_push(_push(PushType.COMPARE, leader_view[0], term=2))
        assert refused.result().code == DLedgerResponseCode.NOT_FOLLOWER

    asyncio.run(scenario())


def test_quorum_is_the_median_water_mark(tmp_path: Path) -> None:
    p = _pusher(tmp_path, "n0")
    _as_leader(p, 1)
    placed = p.store.append_as_leader([DLedgerEntry(b"m") for _ in range(5)], 1)
    futures = [p.wait_ack(e) for e in placed]
    checker = p.quorum_ack_checker
    checker.check()
    assert p.store.committed_index == -1 and not any(f.done() for f in futures)
    p.update_peer_water_mark(1, "n2", 2)
    checker.check()
    assert p.store.committed_index == 2
    assert [f.done() for f in futures] == [True, True, True, False, False]
    assert futures[2].result() is DLedgerResponseCode.SUCCESS


def test_unacked_appends_time_out_and_term_change_ends_them(tmp_path: Path) -> None:
    p = _pusher(tmp_path, "n0", max_wait_ack_time_ms=50)
    _as_leader(p, 1)
    placed = p.store.append_as_leader([DLedgerEntry(b"m") for _ in range(2)], 1)
    futures = [p.wait_ack(e) for e in placed]
    time.sleep(0.08)
    p.quorum_ack_checker.check()
    assert [f.result() for f in futures] == [DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT] * 2
    more = p.wait_ack(p.store.append_as_leader([DLedgerEntry(b"m")], 1)[0])
    p.member_state.change_to_candidate(2)
    p.member_state.next_term()
    p.member_state.change_to_leader(2)
    p.quorum_ack_checker.check()
    assert more.result() is DLedgerResponseCode.TERM_CHANGED


def test_earlier_term_entries_commit_only_with_a_current_term_entry(tmp_path: Path) -> None:
    """Beyond DLedger (Raft's rule): DLedger would commit index 0..1 (term 1) as soon as a
    quorum of term 2's water marks holds them."""
    p = _pusher(tmp_path, "n0")
    p.store.append_as_leader([DLedgerEntry(b"old") for _ in range(2)], 1)
    _as_leader(p, 2)
    p.update_peer_water_mark(2, "n1", 1)
    p.quorum_ack_checker.check()
    assert p.store.committed_index == -1
    new = p.store.append_as_leader([DLedgerEntry(b"new")], 2)[0]
    fut = p.wait_ack(new)
    p.quorum_ack_checker.check()
    assert p.store.committed_index == -1 and not fut.done()
    p.update_peer_water_mark(2, "n1", 2)
    p.quorum_ack_checker.check()
    assert p.store.committed_index == 2 and fut.result() is DLedgerResponseCode.SUCCESS


class LocalRpc:
    """PUSH straight into other pushers' handlers, on the same loop."""

    def __init__(self) -> None:
        self.nodes: dict[str, DLedgerEntryPusher] = {}
        self.types: list[PushType] = []

    async def push(self, request: PushEntryRequest) -> PushEntryResponse:
        self.types.append(request.type)
        target = self.nodes[request.remote_id or ""]
        copy = PushEntryRequest.decode(request.encode())  # over the wire's bytes
        fut = target.handle_push(copy)
        return await asyncio.wait_for(fut, 3)


@pytest.mark.parametrize("batch", [False, True])
def test_dispatcher_brings_a_diverged_follower_back(tmp_path: Path, batch: bool) -> None:
    rpc = LocalRpc()
    leader = _pusher(tmp_path, "n0", rpc, enable_batch_push=batch)
    f1 = _pusher(tmp_path, "n1", rpc)
    f2 = _pusher(tmp_path, "n2", rpc)
    rpc.nodes.update(n1=f1, n2=f2)
    common = _entries(1, 2)
    for store in (leader.store, f1.store, f2.store):
        for e in common:
            store.append_as_follower(e, 1, "n0")
    # n1 holds two entries of a term-2 leader that never committed them; n2 is empty beyond the common part
    for e in _entries(2, 2, start_index=2, start_pos=116, body=b"y" * 10):
        f1.store.append_as_follower(e, 2, "n2")
    _as_leader(leader, 3)
    _as_follower(f1, 3)
    _as_follower(f2, 3)

    async def scenario() -> None:
        for p in (leader, f1, f2):
            p.start()
        try:
            placed = leader.store.append_as_leader([DLedgerEntry(b"new-%d" % i) for i in range(5)], 3)
            fut = leader.wait_ack(placed[-1])
            assert await asyncio.wait_for(asyncio.wrap_future(fut), 10) is DLedgerResponseCode.SUCCESS
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and (f1.store.ledger_end_index, f2.store.ledger_end_index) != (6, 6):
                await asyncio.sleep(0.02)
        finally:
            for p in (leader, f1, f2):
                await p.shutdown()

    asyncio.run(scenario())
    want = [leader.store.get(i) for i in range(7)]
    for f in (f1, f2):
        got = [f.store.get(i) for i in range(f.store.ledger_end_index + 1)]
        assert [(e.index, e.term, e.pos, e.body) for e in got] == [(e.index, e.term, e.pos, e.body) for e in want]
    assert PushType.COMPARE in rpc.types and PushType.TRUNCATE in rpc.types and PushType.APPEND in rpc.types
    assert leader.store.committed_index == 6
