"""Differential tests: pumice._native's pull-path scan and index key hashes against their
pure-Python twins (consume_queue.scan_units, java_hash.index_key_hashes_pure), on valid and malformed
input alike.

The native function may answer None (off its fast path): the twin then decides. Where it does
answer, the answer must be the twin's exactly. The common shapes (what a pull and a dispatch
pass) must stay on the native fast path.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pumice.common import java_hash
from pumice.common.java_hash import index_key_hash, index_key_hashes_pure, java_string_hash
from pumice.store.consume_queue import SCAN_END, SCAN_FULL, SCAN_WINDOW, scan_units
from pumice.store.consume_queue_ext import MAX_ADDR

native = pytest.importorskip("pumice._native", reason="pumice._native is not built (no Rust toolchain)")

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
I64 = st.integers(-(2**63), 2**63 - 1)
UNIT = struct.Struct(">qiq")


def shaped(got: tuple) -> tuple:
    stop, cursor, records, taken = got
    return ("ok", stop, cursor, [bytes(r) for r in records], taken)


def check_scan(buf: bytes, n: int, codes: Any, limits: tuple, cursor: tuple, view: Any, *, fast: bool = False) -> Any:
    try:
        twin = shaped(scan_units(buf, n, codes, limits, cursor, view))
    except Exception as e:
        twin = ("error", type(e).__name__)
    for b in (buf, bytearray(buf), memoryview(buf)):
        got = native.scan_units(b, n, codes, limits, cursor, view)
        if got is None:
            assert not fast, "a plain walk fell off the native fast path"
        else:
            assert shaped(got) == twin
    return twin


OPEN = (32, 1 << 40, 10_000, 256 * 1024, 32, 64 * 1024, 8, 1 << 62)  # the store's defaults, roughly


@st.composite
def walks(draw: Any) -> tuple:
    """A file of records 0..size and the ConsumeQueue units over it: mostly plain, some odd."""
    file_lo = draw(st.sampled_from([0, 1 << 30, 5000]))
    readable = draw(st.one_of(st.just(4096), st.integers(0, 4096)))
    entries = []
    pos = 0
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.integers(0, 9))
        size = draw(st.integers(1, 200))
        code = draw(st.one_of(st.sampled_from([0, 7, -7, 97, MAX_ADDR, MAX_ADDR + 1, MAX_ADDR - 5]), I64))
        if kind < 7:  # the next record of the file
            entries.append((file_lo + pos, size, code))
            pos += size
        elif kind == 7:  # a filler, or a record elsewhere
            entries.append((draw(st.sampled_from([0, file_lo - 100, file_lo + (1 << 30)])), 0x7FFFFFFF, 0))
        else:  # anything
            entries.append((draw(I64), draw(st.integers(-(2**31), 2**31 - 1)), code))
    buf = b"".join(UNIT.pack(*e) for e in entries)
    if draw(st.booleans()):
        buf = buf[: draw(st.integers(0, len(buf)))]  # a truncated last unit
    n = draw(st.one_of(st.just(2**40), st.integers(-3, 50), st.just(-(2**40))))
    codes = draw(st.one_of(st.none(), st.frozensets(st.sampled_from([0, 7, -7, 97, 2**63 - 1]), max_size=3)))
    limits = draw(
        st.one_of(
            st.just(OPEN),
            st.just(OPEN),
            st.tuples(*[st.integers(-5, 3000) for _ in range(8)]),
            st.tuples(*[I64 for _ in range(8)]),
        )
    )
    i = draw(st.one_of(st.just(0), st.integers(0, 45), st.just(2**40)))
    taken = draw(st.one_of(st.just((0, 0)), st.tuples(st.integers(0, 3), st.integers(0, 500))))
    start = (i, *taken, 0, draw(st.sampled_from([-1, -1, file_lo + 300])))
    cursor = (*start, file_lo, file_lo + (1 << 30), readable)
    data = bytes(range(256)) * (readable // 256 + 1)
    view = memoryview(data[:readable]) if draw(st.integers(0, 5)) else None
    return buf, n, codes, tuple(limits), cursor, view


@SETTINGS
@given(walks())
def test_scan_units_matches_its_twin(walk: tuple) -> None:
    check_scan(*walk)


def test_plain_walks_stay_on_the_fast_path_and_stop_where_they_should() -> None:
    data = bytes(range(256)) * 16
    view = memoryview(data)
    units = b"".join(UNIT.pack(o, 100, code) for o, code in ((0, 7), (100, 8), (200, 7), (300, MAX_ADDR), (5000, 7)))
    cur = (0, 0, 0, 0, -1, 0, 1 << 30, len(data))
    twin = check_scan(units, 5, frozenset({7}), OPEN, cur, view, fast=True)
    # entry 1 filtered out, entry 3's extension address kept, entry 4 past the readable end
    assert twin[1] == SCAN_WINDOW and twin[2][0] == 4 and twin[4] == [0, 2, 3]
    assert twin[3] == [data[0:100], data[200:300], data[300:400]]
    full = check_scan(units, 5, None, (2, *OPEN[1:]), cur, view, fast=True)
    assert full[1] == SCAN_FULL and full[2][:3] == (2, 2, 200)
    end = check_scan(units, 3, None, OPEN, cur, view, fast=True)
    assert end[1] == SCAN_END and end[2][0] == 3
    assert check_scan(units, 5, None, OPEN, cur, None, fast=True)[1] == SCAN_WINDOW  # no file held
    assert check_scan(units[:-3], 99, None, OPEN, cur, view, fast=True)[2][0] == 4  # a truncated unit


def test_scan_units_off_its_fast_path_answers_none() -> None:
    units = UNIT.pack(0, 10, 0)
    cur = (0, 0, 0, 0, -1, 0, 100, 100)
    view = memoryview(bytes(100))
    assert native.scan_units(units, 1, {"a"}, OPEN, cur, view) is None  # codes not ints
    assert native.scan_units(units, 1, {2**64}, OPEN, cur, view) is None  # a code past 64 bits
    assert native.scan_units(units, 1, None, OPEN[:7], cur, view) is None  # a short tuple
    assert native.scan_units(units, 1, None, OPEN, (-1, *cur[1:]), view) is None  # a negative entry
    assert native.scan_units(units, 1, None, OPEN, (*cur[:-1], 2**70), view) is None
    assert native.scan_units(memoryview(units)[::2], 1, None, OPEN, cur, view) is None  # not contiguous


# -- index key hashes ------------------------------------------------------------------

# non-BMP characters (surrogate pairs in UTF-16), lone surrogates, and the rest
KEY_CHARS = st.one_of(
    st.characters(codec="ascii"),
    st.characters(min_codepoint=0x80, max_codepoint=0xFFFF),
    st.characters(min_codepoint=0x10000),
    st.sampled_from(["\ud800", "\udfff", "\U0001f600", "é", "#", " "]),
)
keys = st.text(alphabet=KEY_CHARS, max_size=40)


def native_hashes(ks: list[str]) -> list[int]:
    """index_key_hashes as it runs on the native path (whatever PUMICE_PURE says)."""
    saved = java_hash._native
    java_hash._native = native
    try:
        return java_hash.index_key_hashes(ks).tolist()
    finally:
        java_hash._native = saved


@SETTINGS
@given(st.lists(keys, max_size=30))
def test_index_key_hashes_match_their_twins(ks: list[str]) -> None:
    twin = index_key_hashes_pure(ks).tolist()
    assert twin == [index_key_hash(k) for k in ks]
    got = native.index_key_hashes(ks)
    if got is None:
        assert any(0xD800 <= ord(c) <= 0xDFFF for k in ks for c in k), f"plain keys fell off the fast path: {ks!r}"
    else:
        assert got == twin
    assert native_hashes(ks) == twin


def test_index_key_hash_values_and_odd_input() -> None:
    assert java_string_hash("polygenelubricants") == -(2**31)
    pair = "T#\U0001f600"  # U+1F600 is the pair D83D DE00 in UTF-16, as Java hashes it
    want = (((ord("T") * 31 + ord("#")) * 31 + 0xD83D) * 31 + 0xDE00) % 2**32
    assert native.index_key_hashes(["polygenelubricants", pair, ""]) == [0, want, 0]
    assert native.index_key_hashes(["a\ud800b"]) is None  # a lone surrogate: the twin hashes it
    assert native_hashes(["a\ud800b"]) == [(97 * 31 + 0xD800) * 31 + 98]
    assert native.index_key_hashes(["a", 1]) is None and native.index_key_hashes(("a",)) is None
