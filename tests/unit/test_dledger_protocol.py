"""DLedger bodies against the bytes three RocketMQ 4.9.7 brokers exchanged
(tests/data/dledger-frames-4.9.7.log, a copy of ../shared/spec/dledger-frames-4.9.7.log): each
whole body decoded and re-encoded byte for byte, and bad bodies refused with a clear error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_protocol import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    DLedgerProtocolError,
    DLedgerRequestCode,
    GetEntriesResponse,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

LOG = Path(__file__).resolve().parents[1] / "data" / "dledger-frames-4.9.7.log"
_FRAME = re.compile(r" (REQ|RESP) (\w+) code=\d+ .* body\((\d+)\)=(\{.*)$")
_CLIENT = re.compile(r"# client (METADATA|GET) to \w+: .* body=(\{.*)$")


def _frames() -> list[tuple[str, str, bytes]]:
    """(REQ|RESP, request name, body) of every body the log holds whole."""
    out = []
    for line in LOG.read_text().splitlines():
        m = _FRAME.search(line)
        if m:
            body = m.group(4).encode()
            if len(body) == int(m.group(3)):  # bodies over 1500 characters were cut
                out.append((m.group(1), m.group(2), body))
            continue
        m = _CLIENT.search(line)
        if m:
            out.append(("RESP", m.group(1), m.group(2).encode()))
    return out


FRAMES = _frames()


def test_the_log_holds_every_kind_seen() -> None:
    kinds = {(d, n) for d, n, _ in FRAMES}
    assert {("REQ", "VOTE"), ("RESP", "VOTE"), ("REQ", "HEART_BEAT"), ("RESP", "HEART_BEAT")} <= kinds
    assert {("REQ", "PUSH"), ("RESP", "PUSH"), ("RESP", "METADATA"), ("RESP", "GET")} <= kinds
    assert len(FRAMES) >= 30


@pytest.mark.parametrize("direction,name,body", FRAMES, ids=[f"{i}-{d}-{n}" for i, (d, n, _) in enumerate(FRAMES)])
def test_body_round_trips_byte_for_byte(direction: str, name: str, body: bytes) -> None:
    code = DLedgerRequestCode[name]
    cls = (REQUEST_TYPES if direction == "REQ" else RESPONSE_TYPES)[code]
    msg = cls.decode(body)
    assert msg.encode() == body


def test_push_request_fields_and_derived_getters() -> None:
    body = next(
        b for d, n, b in FRAMES if d == "REQ" and n == "PUSH" and b'"type":"APPEND"' in b and b'"index":1,' in b
    )
    req = PushEntryRequest.decode(body)
    assert req.type is PushType.APPEND and req.entry is not None
    e = req.entry
    assert (e.index, e.term, e.pos, e.size, e.magic) == (1, 1, 187, 187, 1)
    assert len(e.body) == 139 and e.body[4:8] == bytes.fromhex("daa320a7")
    assert (req.count, req.first_entry_index, req.last_entry_index, req.is_batch) == (1, 1, 1, False)
    commit = PushEntryRequest(group="g", type=PushType.COMMIT, commit_index=2, leader_id="n0", term=1)
    assert commit.encode() == (
        b'{"batch":false,"batchEntry":[],"code":200,"commitIndex":2,"count":0,"firstEntryIndex":-1,'
        b'"group":"g","lastEntryIndex":-1,"leaderId":"n0","term":1,"totalSize":0,"type":"COMMIT"}'
    )


def test_batch_push_counts_its_entries() -> None:
    req = PushEntryRequest(group="g", term=3)
    for i in (5, 6, 7):
        req.add_entry(DLedgerEntry(b"x", index=i, term=3, pos=i * 49, size=49))
    assert (req.count, req.first_entry_index, req.last_entry_index, req.total_size, req.is_batch) == (
        3,
        5,
        7,
        147,
        True,
    )
    again = PushEntryRequest.decode(req.encode())
    assert [e.index for e in again.batch_entry] == [5, 6, 7] and again.encode() == req.encode()
    with pytest.raises(DLedgerProtocolError, match="wrong order"):
        req.add_entry(DLedgerEntry(b"x", index=9, term=3, pos=0, size=49))


def test_vote_response_keeps_the_requests_ids() -> None:
    req = VoteRequest(group="RaftNode00", leader_id="n0", local_id="n0", remote_id="n2", term=1,
                      ledger_end_index=-1, ledger_end_term=-1)  # fmt: skip
    resp = VoteResponse.answering(req, 2, VoteResult.REJECT_EXPIRED_LEDGER_TERM)
    assert resp.encode() == (
        b'{"code":200,"group":"RaftNode00","leaderId":"n0","localId":"n0","remoteId":"n2","term":2,'
        b'"voteResult":"REJECT_EXPIRED_LEDGER_TERM"}'
    )


def test_nulls_are_left_out_and_unknown_fields_ignored() -> None:
    meta = MetadataResponse(group="g", peers={"n1": "b:2", "n0": "a:1"})
    assert meta.encode() == b'{"code":200,"group":"g","peers":{"n0":"a:1","n1":"b:2"},"term":-1}'
    resp = PushEntryResponse.decode(b'{"code":406,"beginIndex":-1,"endIndex":-1,"someday":[1,{"x":2}],"term":1}')
    assert (resp.code, resp.begin_index, resp.end_index, resp.index) == (406, -1, -1, None)
    assert GetEntriesResponse.decode(b'{"group":"g"}').entries == []


@pytest.mark.parametrize(
    "body,words",
    [
        (b"", "no body"),
        (b"not json", "not JSON"),
        (b"[1,2]", "not a JSON object"),
        (b'{"term":"abc"}', "'term' is not a number"),
        (b'{"term":true}', "'term' is not a number"),
        (b'{"code":99999999999}', "'code' is out of range"),
        (b'{"type":"SHOUT"}', "unknown push type"),
        (b'{"entry":{"body":"###"}}', "not valid Base64"),
        (b'{"entry":7}', "entry is not a JSON object"),
        (b'{"batchEntry":{}}', "'batchEntry' is not a list"),
    ],
)
def test_malformed_bodies_are_clear_errors(body: bytes, words: str) -> None:
    with pytest.raises(DLedgerProtocolError, match=words):
        PushEntryRequest.decode(body)
