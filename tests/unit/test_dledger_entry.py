"""The DLedger entry header and index unit against the bytes RocketMQ 4.9.7 wrote
(../shared/spec/DLEDGER.md §3.2, the first entry of a group: index 0, term 1, a 139-byte record)."""

from __future__ import annotations

import pytest

from pumice.dledger.dledger_entry import (
    BODY_OFFSET,
    DLedgerEntry,
    decode_entry,
    decode_header,
    decode_index_unit,
    encode_blank,
    encode_entry,
    encode_index_unit,
)
from pumice.dledger.dledger_response_code import DLedgerResponseCode

# DLEDGER.md §3.2 "seen, the first entry", header only; the body is a 139-byte record.
GOLDEN_FIRST_HEADER = bytes.fromhex(
    "00000001000000bb0000000000000000000000000000000100000000000000000000000000000000000000000000008b"
)


def test_header_matches_rocketmq_first_entry() -> None:
    body = bytes.fromhex("0000008bdaa320a7") + bytes(131)
    entry = DLedgerEntry(body=body, index=0, term=1, pos=0)
    data = encode_entry(entry)
    assert data[:BODY_OFFSET] == GOLDEN_FIRST_HEADER
    assert entry.size == 187 and len(data) == 187
    assert decode_header(data) == (1, 187, 0, 1, 0, 0, 0, 0, 139)
    back = decode_entry(data)
    assert back.body == body and back.same_as(entry)


def test_same_as_ignores_the_body_as_dledger_equals_does() -> None:
    a = decode_entry(encode_entry(DLedgerEntry(body=b"x" * 10, index=3, term=2, pos=500)))
    b = decode_entry(encode_entry(DLedgerEntry(body=b"y" * 10, index=3, term=2, pos=500)))
    c = decode_entry(encode_entry(DLedgerEntry(body=b"y" * 10, index=3, term=3, pos=500)))
    assert a.same_as(b) and not a.same_as(c)


def test_decode_refuses_a_header_whose_lengths_disagree() -> None:
    data = bytearray(encode_entry(DLedgerEntry(body=b"abc", index=0, term=1, pos=0)))
    data[4:8] = (60).to_bytes(4, "big")
    with pytest.raises(ValueError):
        decode_entry(data)
    with pytest.raises(ValueError):
        decode_entry(encode_entry(DLedgerEntry(body=b"abc", index=0, term=1, pos=0))[:50])


def test_index_unit_layout() -> None:
    unit = encode_index_unit(1, 187, 187, 1, 1)
    # int magic, long pos, int size, long index, long term: all 32 bytes (DLedgerEntryCoder.encodeIndex)
    assert unit == bytes.fromhex("0000000100000000000000bb000000bb00000000000000010000000000000001")
    assert decode_index_unit(unit) == (1, 187, 187, 1, 1)


def test_blank_is_minus_one_then_length() -> None:
    assert encode_blank(100) == bytes.fromhex("ffffffff00000064")


def test_response_codes_keep_dledger_numbers() -> None:
    assert DLedgerResponseCode.NOT_LEADER == 404 and DLedgerResponseCode.PUSH_REQUEST_IS_FULL == 421
    assert DLedgerResponseCode.of(12345) is DLedgerResponseCode.UNKNOWN
