"""Golden vectors for Java ``String.hashCode`` (GOLDEN.md §1), tagsCode (§5) and the body CRC (§2)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.common.java_hash import index_key_hash, index_key_hashes, java_string_hash, tags_code
from pumice.common.message_decoder import crc32, encode_record

HASH_SLOT_NUM = 5_000_000

# §1 table: (string, UTF-16 code units or None when the table only says "ASCII", hashCode, hex int, keyHash, slot)
HASH_TABLE: list[tuple[str, str | None, int, str, int, int]] = [
    ("TagA", "0054 0061 0067 0041", 2598919, "0027a807", 2598919, 2598919),
    ("TagB", "0054 0061 0067 0042", 2598920, "0027a808", 2598920, 2598920),
    ("", "", 0, "00000000", 0, 0),
    ("a", "0061", 97, "00000061", 97, 97),
    ("TopicTest#k-1", None, 85126669, "0512ee0d", 85126669, 126669),
    ("TopicTest#k-2", None, 85126670, "0512ee0e", 85126670, 126670),
    ("TopicTest#order-42", None, -870421153, "cc1e6d5f", 870421153, 421153),
    ("主题#键", "4E3B 9898 0023 952E", 634204136, "25cd2fe8", 634204136, 4204136),
    (
        "TopicTest#😀",
        "0054 006f 0070 0069 0063 0054 0065 0073 0074 0023 D83D DE00",
        4515557,
        "0044e6e5",
        4515557,
        4515557,
    ),
    ("TopicTest#7F00000100002A9F0000000000000001", None, 1471913327, "57bb9d6f", 1471913327, 1913327),
    ("TopicTest#k-23157418", None, 1765126669, "6935b20d", 1765126669, 126669),
    ("polygenelubricants", None, -2147483648, "80000000", 0, 0),
    ("TopicTest#Aa", None, 2744770, "0029e1c2", 2744770, 2744770),
    ("TopicTest#BB", None, 2744770, "0029e1c2", 2744770, 2744770),
]
HASH_IDS = [repr(row[0]) for row in HASH_TABLE]


def utf16_units(s: str) -> list[int]:
    """UTF-16 code units of ``s`` (a supplementary character gives its two surrogates)."""
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 | (cp >> 10), 0xDC00 | (cp & 0x3FF)]
        else:
            units.append(cp)
    return units


def reference_java_hash(s: str) -> int:
    """Slow reference of Java ``String.hashCode``: ``h = 31*h + unit`` mod 2**32, read as signed."""
    h = 0
    for u in utf16_units(s):
        h = (31 * h + u) % (1 << 32)
    return h - (1 << 32) if h >= (1 << 31) else h


def reference_index_key_hash(s: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``Math.abs(hashCode)``, with ``Integer.MIN_VALUE`` mapped to 0."""
    h = reference_java_hash(s)
    return 0 if h == -(1 << 31) else abs(h)


# -- §1 --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("s", "units", "h", "hex_int", "key_hash", "slot"), HASH_TABLE, ids=HASH_IDS)
def test_java_string_hash_table(s: str, units: str | None, h: int, hex_int: str, key_hash: int, slot: int) -> None:
    """§1: hashCode, its hex int form, keyHash and the slot for 5,000,000 slots."""
    assert java_string_hash(s) == h
    assert f"{java_string_hash(s) & 0xFFFFFFFF:08x}" == hex_int
    assert index_key_hash(s) == key_hash
    assert index_key_hash(s) % HASH_SLOT_NUM == slot


@pytest.mark.parametrize(("s", "units", "h", "hex_int", "key_hash", "slot"), HASH_TABLE, ids=HASH_IDS)
def test_reference_hash_matches_table(
    s: str, units: str | None, h: int, hex_int: str, key_hash: int, slot: int
) -> None:
    """§1: the test's own slow reference agrees with the JDK table (it anchors the property tests)."""
    if units is not None:
        assert utf16_units(s) == [int(u, 16) for u in units.split()]
    assert reference_java_hash(s) == h
    assert reference_index_key_hash(s) == key_hash


def test_index_key_hashes_table() -> None:
    """§1: the vectorised ``index_key_hashes`` gives the keyHash column, mixed ASCII and non-ASCII keys."""
    keys = [row[0] for row in HASH_TABLE]
    assert index_key_hashes(keys).tolist() == [row[4] for row in HASH_TABLE]


def test_index_key_hashes_table_ascii_only() -> None:
    """§1: the ASCII fast path of ``index_key_hashes`` (incl. the empty key and Integer.MIN_VALUE)."""
    rows = [row for row in HASH_TABLE if row[0].isascii()]
    assert index_key_hashes([row[0] for row in rows]).tolist() == [row[4] for row in rows]


def test_hash_is_over_utf16_units_not_utf8_or_code_points() -> None:
    """§1 notes: the wrong (UTF-8 byte / code point) hashes computed in Java must not be produced."""
    assert java_string_hash("主题#键") not in (1182969048, 776367064)
    assert java_string_hash("TopicTest#😀") != 1247142974
    assert index_key_hashes(["主题#键", "TopicTest#😀"]).tolist() == [634204136, 4515557]


def test_aa_bb_full_hash_collision() -> None:
    """§1 notes: ``TopicTest#Aa`` and ``TopicTest#BB`` share the full hashCode."""
    assert java_string_hash("TopicTest#Aa") == java_string_hash("TopicTest#BB") == 2744770
    assert java_string_hash("Aa") == java_string_hash("BB")


def test_index_key_hashes_long_key_fallback() -> None:
    """§1 arithmetic on a key longer than the vectorised power table (the per-key fallback path)."""
    keys = ["x" * 70_000, "TopicTest#k-1", "键" * 70_000]
    assert index_key_hashes(keys).tolist() == [reference_index_key_hash(k) for k in keys]
    assert index_key_hashes(keys)[1] == 85126669


def test_index_key_hashes_empty_list() -> None:
    """``index_key_hashes([])`` is an empty array."""
    assert index_key_hashes([]).tolist() == []


# -- §5 tagsCode -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "code"),
    [("TagA", 2598919), ("TagB", 2598920), ("TagNeg", -1797390410), ("Tag-negative", -2123558616), ("", 0)],
)
def test_tags_code(tag: str, code: int) -> None:
    """§5: tagsCode is ``(long) tags.hashCode()`` (negative for TagNeg / Tag-negative), 0 without a tag."""
    assert tags_code(tag) == code


# -- §2 --------------------------------------------------------------------------------------

CRC_TABLE: list[tuple[str, int, int, str]] = [
    # (body hex, length, masked decimal, BODYCRC field hex)
    ("", 0, 0, "00000000"),
    ("68656c6c6f", 5, 907060870, "3610a686"),
    ("61" * 1024, 1024, 2085984185, "7c5597b9"),
    ("00010203040506070809f0f1f2f3f4f5807ffffe", 20, 488934245, "1d248b65"),
    ("313233343536373839", 9, 1274296614, "4bf43926"),
]


@pytest.mark.parametrize(
    ("body_hex", "length", "masked", "field_hex"), CRC_TABLE, ids=["empty", "hello", "a1024", "bin", "123"]
)
def test_crc32_table(body_hex: str, length: int, masked: int, field_hex: str) -> None:
    """§2: ``crc32(body)`` is CRC32 & 0x7FFFFFFF, and the record's BODYCRC field (offset 8) holds it."""
    body = bytes.fromhex(body_hex)
    assert len(body) == length
    assert crc32(body) == masked
    assert crc32(memoryview(body)) == masked
    rec = encode_record(body=body, topic="T", properties={})
    assert rec[8:12] == bytes.fromhex(field_hex)


# -- properties ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_java_string_hash_matches_reference(s: str) -> None:
    """§1 property: ``java_string_hash`` equals the UTF-16 reference for any string."""
    assert java_string_hash(s) == reference_java_hash(s)


_ascii_keys = st.text(alphabet=st.characters(max_codepoint=127), max_size=60)
_any_keys = st.text(alphabet=st.characters(codec="utf-8"), max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_ascii_keys, _any_keys), max_size=30))
def test_index_key_hashes_matches_reference(keys: list[str]) -> None:
    """§1 property: ``index_key_hashes(keys)`` equals ``index_key_hash`` and the slow reference per key."""
    got = index_key_hashes(keys).tolist()
    assert got == [index_key_hash(k) for k in keys]
    assert got == [reference_index_key_hash(k) for k in keys]


@settings(max_examples=100, deadline=None)
@given(st.lists(_ascii_keys, max_size=30))
def test_index_key_hashes_ascii_matches_reference(keys: list[str]) -> None:
    """§1 property: the all-ASCII fast path of ``index_key_hashes`` equals the reference."""
    assert index_key_hashes(keys).tolist() == [reference_index_key_hash(k) for k in keys]
