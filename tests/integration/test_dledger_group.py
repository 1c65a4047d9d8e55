"""Three ``python -m pumice.dledger`` processes on 127.0.0.1 with file stores (small data files,
so entries cross file ends): a leader is elected; a client's APPEND (50001) is acknowledged only
once a quorum holds it; SIGKILL of the leader gives a new one within DLedger's default
time-outs; a restarted node catches up, one holding an entry that was never committed is
compared and truncated; all data files are byte-identical up to the ledger end. A leader
SIGSTOPped for 9 s stops acknowledging and the others elect; it steps down when it wakes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.dledger.dledger_entry import BODY_OFFSET, decode_header
from pumice.dledger.dledger_protocol import (
    DLedgerRequestCode,
    GetEntriesRequest,
    GetEntriesResponse,
)
from pumice.dledger.dledger_response_code import DLedgerResponseCode
from tests.helpers.dledger_group import GROUP, DLedgerGroup, DLedgerNode, append, dledger_call, metadata
from tests.helpers.waiting import eventually

DATA_FILE_SIZE = 4096  # about 25 entries of 160 bytes a file: the blank at each end is exercised
# DLedger's defaults: a follower gives up after 6 s, votes follow in 0.3-1 s (plus one retry)
FAILOVER_LIMIT_S = 15.0


@pytest.fixture
def group(tmp_path: Path) -> Iterator[DLedgerGroup]:
    g = DLedgerGroup(tmp_path, 3, "file", ["--data-file-size", str(DATA_FILE_SIZE)])
    g.start()
    try:
        yield g
    finally:
        for node in g.nodes.values():
            node.kill()


def _body(tag: str, i: int) -> bytes:
    return f"{tag}-{i:04d}-".encode().ljust(112, b".")


def _append_all(node: DLedgerNode, tag: str, n: int) -> list[tuple[int, int]]:
    """(index, pos) of ``n`` appends, each acknowledged SUCCESS."""
    out = []
    for i in range(n):
        r = append(node, _body(tag, i))
        assert r.code == DLedgerResponseCode.SUCCESS, (tag, i, r)
        out.append((r.index, r.pos))
    return out


def _end_pos(leader: DLedgerNode, last_index: int) -> int:
    got = dledger_call(leader, DLedgerRequestCode.GET,
                       GetEntriesRequest(group=GROUP, remote_id=leader.node_id, begin_index=last_index),
                       GetEntriesResponse)  # fmt: skip
    (entry,) = got.entries
    return entry.pos + entry.size


def _data(node: DLedgerNode, end: int) -> bytes:
    """The node's data files, concatenated, up to byte ``end``."""
    files = sorted((node.store_dir / f"dledger-{node.node_id}" / "data").iterdir())
    out = b"".join(f.read_bytes() for f in files)
    return out[:end]


def _same_logs(g: DLedgerGroup, leader: str, last_index: int) -> bool:
    end = _end_pos(g.nodes[leader], last_index)
    ref = _data(g.nodes[leader], end)
    return len(ref) == end and all(_data(n, end) == ref for n in g.nodes.values())


def _entries_in(data: bytes) -> list[tuple[int, int, bytes]]:
    """(index, term, body) of every entry, skipping file-end blanks."""
    out, pos = [], 0
    while pos + BODY_OFFSET <= len(data):
        magic, size = (
            int.from_bytes(data[pos : pos + 4], "big", signed=True),
            int.from_bytes(data[pos + 4 : pos + 8], "big"),
        )
        if magic == -1:
            pos += size
            continue
        if magic != 1 or size == 0:
            break
        _, _, index, term, epos, *_ = decode_header(data, pos)
        assert epos == pos
        out.append((index, term, data[pos + BODY_OFFSET : pos + size]))
        pos += size
    return out


def test_election_commit_failover_catch_up_and_truncate(group: DLedgerGroup) -> None:
    g = group
    l1, took = g.wait_leader(FAILOVER_LIMIT_S)
    placed = _append_all(g.nodes[l1], "a", 30)
    assert [i for i, _ in placed] == list(range(30))
    follower = next(n for n in g.nodes.values() if n.node_id != l1)
    refused = append(follower, b"to a follower")
    assert (refused.code, refused.leader_id) == (DLedgerResponseCode.NOT_LEADER, l1)

    # SIGKILL the leader: a new one within the default time-outs, the log kept
    g.nodes[l1].kill()
    killed_at = time.monotonic()
    l2, _ = g.wait_leader(FAILOVER_LIMIT_S, exclude=l1)
    failover_s = time.monotonic() - killed_at
    assert failover_s < FAILOVER_LIMIT_S
    placed += _append_all(g.nodes[l2], "b", 10)
    g.start(l1)  # catches up from its own files
    eventually(lambda: _same_logs(g, l2, 39), 20, f"{l1} catches up after its restart")

    # an append the followers never get is not acknowledged (they are down: nothing waits in
    # their sockets, as it would for a stopped process)
    followers = [n for n in g.nodes.values() if n.node_id != l2]
    for n in followers:
        n.kill()
    started = time.monotonic()
    lost = append(g.nodes[l2], b"never committed".ljust(112, b"!"))
    assert lost.code == DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT and lost.index == 40
    assert 2.0 <= time.monotonic() - started < 6.0
    g.nodes[l2].kill()
    for n in followers:
        g.start(n.node_id)
    l3, _ = g.wait_leader(FAILOVER_LIMIT_S, exclude=l2)
    placed += _append_all(g.nodes[l3], "c", 10)
    # l2 holds index 40 of its term; l3's index 40 differs: COMPARE, TRUNCATE, APPEND
    g.start(l2)
    eventually(lambda: _same_logs(g, l3, 49), 20, f"{l2} is truncated and catches up")
    eventually(lambda: any("truncated at 39" in line for line in g.nodes[l2].lines), 5, f"{l2} logs its truncation")

    end = _end_pos(g.nodes[l3], 49)
    entries = _entries_in(_data(g.nodes[l3], end))
    assert [e[0] for e in entries] == list(range(50))
    bodies = [e[2] for e in entries]
    assert bodies == [_body("a", i) for i in range(30)] + [_body("b", i) for i in range(10)] + [
        _body("c", i) for i in range(10)
    ]
    assert end > DATA_FILE_SIZE  # the log spans two files, a blank between them
    print(f"failover after SIGKILL: {failover_s:.2f} s (first leader after {took:.2f} s)")


def test_a_stopped_leader_stops_acknowledging_and_steps_down(group: DLedgerGroup) -> None:
    g = group
    l1, _ = g.wait_leader(FAILOVER_LIMIT_S)
    _append_all(g.nodes[l1], "a", 5)
    g.nodes[l1].signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    others = [n for n in g.nodes.values() if n.node_id != l1]
    l2, _ = g.wait_leader(FAILOVER_LIMIT_S, exclude=l1)
    elected_s = time.monotonic() - stopped_at
    _append_all(g.nodes[l2], "b", 5)
    time.sleep(max(0.0, 9.0 - (time.monotonic() - stopped_at)))
    g.nodes[l1].signal(signal.SIGCONT)
    # awake, it hears the new term and follows; it never acknowledges an append again
    eventually(lambda: metadata(g.nodes[l1]).leader_id == l2, 15, f"{l1} follows {l2}")
    r = append(g.nodes[l1], b"to the old leader")
    assert r.code == DLedgerResponseCode.NOT_LEADER
    _append_all(g.nodes[l2], "c", 5)
    eventually(lambda: _same_logs(g, l2, 14), 20, "the three logs agree")
    assert all(n.alive for n in others)
    print(f"new leader {elected_s:.2f} s after SIGSTOP")


def test_standalone_node_stops_gracefully_and_refuses_bad_arguments(tmp_path: Path) -> None:
    g = DLedgerGroup(tmp_path, 1, "file")
    g.start()
    node = g.nodes["n0"]
    try:
        leader, _ = g.wait_leader(10)
        assert leader == "n0" and append(node, b"kept").code == DLedgerResponseCode.SUCCESS
        assert node.stop() == 0
        assert any("DLedgerServer stopped" in line for line in node.lines)
        g.start("n0")  # the entry and the term survive the restart
        leader, _ = g.wait_leader(10)
        assert append(node, b"next").index == 1
    finally:
        node.kill()
    bad = subprocess.run([sys.executable, "-m", "pumice.dledger", "--group", GROUP, "--id", "n5", "--peers",
                          "n0-127.0.0.1:1", "--store-dir", str(tmp_path / "x")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "dLegerSelfId 'n5' is not among dLegerPeers" in bad.stderr
