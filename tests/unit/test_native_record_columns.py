"""Differential tests: pumice._native's properties columns for the Spark reader
(native/src/record_columns.rs) against their twin ``record_columns._properties_pure``: the map
array and the KEYS, TAGS and UNIQ_KEY columns of a batch of properties strings, separators in
odd places, repeated names, empty names and values; and a whole RecordBatch
(``to_record_batch``) decoded both ways. No Spark session: pyarrow and numpy only."""

from __future__ import annotations

import ipaddress
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="the spark extra (pyarrow) is not installed")
native = pytest.importorskip("pumice._native", reason="pumice._native is not built (no Rust toolchain)")

import numpy as np  # noqa: E402

from pumice.common.message_decoder import encode_record  # noqa: E402
from pumice.spark import record_columns  # noqa: E402
from pumice.spark.record_columns import _properties_pure  # noqa: E402
from pumice.spark.schema import arrow_schema  # noqa: E402

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "a", "", "ключ"])
ATOMS = st.one_of(NAMES, st.text(alphabet="ab\x01\x02é", max_size=4), st.sampled_from(["\x01", "\x02"]))
props_strings = st.lists(ATOMS, max_size=8).map("".join) | st.text(max_size=12)


def native_path(fn: Any, *args: Any) -> Any:
    saved = record_columns._native
    record_columns._native = native
    try:
        return fn(*args)
    finally:
        record_columns._native = saved


def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return all(x.equals(y) for x, y in zip(a, b, strict=True))


@given(st.lists(props_strings, max_size=12), st.integers(0, 12))
@SETTINGS
def test_properties_columns_are_the_twins(strings: list[str], cut: int) -> None:
    # whole arrays, as the reader makes them (a take: offset 0), and slices of them
    a = pa.array(strings, pa.string())
    twin = _properties_pure(a)
    tail = a.slice(min(cut, len(a)))
    fresh = _properties_pure(pa.array(tail.to_pylist(), pa.string()))
    assert same(_properties_pure(tail), fresh)
    assert same(native_path(record_columns._properties, tail), fresh)
    got = native_path(record_columns._properties, a)
    assert same(got, twin), strings
    _, off, data = a.buffers()
    if data is not None:  # the fast path is taken
        bounds = np.frombuffer(off, dtype=np.int32, count=len(a) + 1)
        assert native.property_columns(np.frombuffer(data, np.uint8), bounds.view(np.uint8), [b"KEYS"]) is not None


def test_bad_offsets_are_left_to_the_twin() -> None:
    data = np.frombuffer(b"a\x011", dtype=np.uint8)
    for bounds in ([0, 4], [2, 1], [-1, 3], []):
        assert native.property_columns(data, np.array(bounds, dtype=np.int32).view(np.uint8), []) is None
    assert native.property_columns(data, np.zeros(3, dtype=np.uint8), []) is None  # not whole int32s


def test_a_record_batch_decodes_alike() -> None:
    recs, pos = [], 0
    for i in range(50):
        props = {"KEYS": f"k{i} x", "TAGS": "T" if i % 3 else "", "UNIQ_KEY": f"{i:032X}", "z": "\x01"}
        if i % 7 == 0:
            props = {"a": "b"}
        r = encode_record(body=bytes([i]) * i, topic="Topic", properties=props, physical_offset=pos, queue_offset=i)
        recs.append(r)
        pos += len(r)
    nb = np.frombuffer(b"".join(recs), dtype=np.uint8)
    starts = np.cumsum([0] + [len(r) for r in recs[:-1]]).astype(np.int64)
    lay = record_columns.layout(nb, starts)
    kw: dict[str, Any] = {"broker_name": "b", "schema": arrow_schema()}
    saved = record_columns._native
    try:
        record_columns._native = None
        twin = record_columns.to_record_batch(nb, lay, **kw)
        record_columns._native = native
        got = record_columns.to_record_batch(nb, lay, **kw)
    finally:
        record_columns._native = saved
    assert got.equals(twin) and got.num_rows == 50


def test_the_native_path_runs_unless_pure() -> None:
    assert (record_columns._native is None) == (os.environ.get("PUMICE_PURE") == "1")


# -- the whole batch from one native walk (record_batch_columns) ----------------------------

V4 = st.sampled_from([b"\x7f\x00\x00\x01", b"\x0a\x00\x00\x05", b"\xff\xff\xff\xff"])
MAPPED = bytes(10) + b"\xff\xff\x7f\x00\x00\x01"
V6 = st.sampled_from(
    [
        bytes(16),
        bytes(15) + b"\x01",
        b"\x20\x01\x0d\xb8" + bytes(10) + b"\x00\x01",
        MAPPED,  # IPv4-mapped: Python 3.11 writes it in hextets, 3.13 dotted: the twin's to say
        b"\x00\x01\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x03",  # two runs of zeros
        b"\x00\x01" * 8,
        b"\xfe\x80" + bytes(6) + b"\x02\x00\x00\x00\x00\x00\x00\x01",
    ]
)
PORTS = st.sampled_from([0, 10911, 65535, -1, 2**31 - 1, -(2**31)])
PROPS = st.dictionaries(NAMES.filter(bool), st.text(alphabet="ab\x01é", min_size=1, max_size=4), max_size=4) | st.lists(
    ATOMS, max_size=6
).map("".join)
COMPRESSION = st.sampled_from([0, 0x1, 0x101, 0x201, 0x301])  # plain, zlib (no type), zlib, lz4, zstd


@st.composite
def records(draw: Any) -> dict[str, Any]:
    born_v6, store_v6 = draw(st.booleans()), draw(st.booleans())
    body = draw(st.binary(max_size=40))
    sys_flag = draw(COMPRESSION) | (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
    if sys_flag & 1 and draw(st.booleans()):
        import zlib

        body = zlib.compress(body)  # inflates (zlib kinds); other kinds stay as stored, logged
    return {
        "body": body,
        "topic": draw(st.sampled_from(["T", "", "тема", "%RETRY%g", "a" * 127])),
        "properties": draw(PROPS),
        "queue_id": draw(st.integers(-(2**31), 2**31 - 1)),
        "queue_offset": draw(st.integers(-(2**63), 2**63 - 1)),
        "sys_flag": sys_flag,
        "born_timestamp": draw(st.integers(-(2**62), 2**62)),
        "store_timestamp": draw(st.integers(-(2**63), 2**63 - 1)),  # × 1000 wraps alike
        "born_host": (draw(V6 if born_v6 else V4), draw(PORTS)),
        "store_host": (draw(V6 if store_v6 else V4), draw(PORTS)),
        "reconsume_times": draw(st.integers(-(2**31), 2**31 - 1)),
    }


def segment(recs: list[dict[str, Any]], gap: int = 0) -> tuple[np.ndarray, np.ndarray]:
    out, starts, pos = [], [], 0
    for r in recs:
        b = encode_record(physical_offset=pos, **r)
        starts.append(pos)
        out.append(b + b"\x00" * gap)
        pos += len(b) + gap
    return np.frombuffer(b"".join(out), dtype=np.uint8), np.array(starts, dtype=np.int64)


def both_ways(nb: np.ndarray, starts: np.ndarray, **kw: Any) -> tuple[Any, Any]:
    """(twin, native) for ``to_record_batch``: a batch, or the exception type raised."""
    lay = record_columns.layout(nb, starts)
    kw = {"broker_name": "b", "schema": arrow_schema(), **kw}
    out = []
    saved = record_columns._native
    try:
        for path in (None, native):
            record_columns._native = path
            try:
                out.append(record_columns.to_record_batch(nb, lay, **kw))
            except Exception as e:  # the same type both ways
                out.append(type(e))
    finally:
        record_columns._native = saved
    return out[0], out[1]


@given(st.lists(records(), max_size=10), st.sampled_from([0, 3]), st.booleans())
@SETTINGS
def test_record_batches_are_the_twins(recs: list[dict[str, Any]], gap: int, cq: bool) -> None:
    nb, starts = segment(recs, gap)
    kw = {"queue_offsets": np.arange(7, 7 + len(recs), dtype=np.int64)} if cq else {}
    twin, got = both_ways(nb, starts, **kw)
    assert isinstance(twin, pa.RecordBatch), twin
    assert isinstance(got, pa.RecordBatch) and got.equals(twin), (recs, got.to_pylist(), twin.to_pylist())
    # and the fast path was taken: nothing in these records leaves it but an IPv4-mapped host
    fast = native.record_batch_columns(nb, starts.view(np.uint8), record_columns._PICKED_BYTES)
    mapped = any(r[h][0] == MAPPED for r in recs for h in ("born_host", "store_host"))
    assert (fast is None) == mapped


def test_an_ipv4_mapped_host_is_left_to_the_twin() -> None:
    # its text depends on the Python version (3.13 writes ::ffff:127.0.0.1), which the twin's
    # ipaddress follows and a fixed native formatter would not
    recs = [{"body": b"b", "topic": "T", "properties": {}, "sys_flag": 0x10, "born_host": (MAPPED, 1)}]
    nb, starts = segment(recs)
    assert native.record_batch_columns(nb, starts.view(np.uint8), record_columns._PICKED_BYTES) is None
    twin, got = both_ways(nb, starts)
    assert isinstance(got, pa.RecordBatch) and got.equals(twin)
    assert got.column("bornHost").to_pylist() == [f"[{ipaddress.IPv6Address(MAPPED)}]:1"]


@given(st.lists(records(), min_size=1, max_size=6), st.data())
@SETTINGS
def test_damaged_records_are_the_twins(recs: list[dict[str, Any]], data: st.DataObject) -> None:
    # bad UTF-8 in a topic or properties, a cut buffer, starts out of order, past the end or
    # negative, a length field changed: the native walk answers None (no panic) or the twin's batch
    nb, starts = segment(recs)
    raw = bytearray(nb.tobytes())
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from([0x00, 0x80, 0xFF, 0xC3, 0x02, 0x01]))
    raw = raw[: data.draw(st.integers(0, len(raw)))] if data.draw(st.booleans()) else raw
    nb = np.frombuffer(bytes(raw), dtype=np.uint8)
    starts = data.draw(st.sampled_from([starts, starts[::-1], starts + 1, starts - 1, starts * 2]))
    cols = native.record_batch_columns(nb, np.ascontiguousarray(starts).view(np.uint8), record_columns._PICKED_BYTES)
    lay = record_columns.layout(nb, starts)
    if cols is not None:
        assert lay.valid.all()
    twin, got = both_ways(nb, starts)
    if isinstance(twin, pa.RecordBatch):
        assert isinstance(got, pa.RecordBatch) and got.equals(twin)
    else:
        assert got is twin


def test_bad_utf8_topic_is_left_to_the_twin() -> None:
    nb, starts = segment([{"body": b"x", "topic": "AB", "properties": {"KEYS": "k"}}])
    raw = bytearray(nb.tobytes())
    at = raw.index(b"AB")
    raw[at] = 0xFF
    nb = np.frombuffer(bytes(raw), dtype=np.uint8)
    assert native.record_batch_columns(nb, starts.view(np.uint8), record_columns._PICKED_BYTES) is None
    twin, got = both_ways(nb, starts)
    assert isinstance(got, pa.RecordBatch) and got.equals(twin)
    assert got.column("topic").to_pylist() == ["\ufffdB"]


def test_ipv6_rows_take_no_per_row_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    # IPv6 hosts are read at their moved offsets in the same walk as the rest
    recs = [
        {
            "body": b"b",
            "topic": "T",
            "properties": {"UNIQ_KEY": "U"} if i % 2 else {},
            "sys_flag": 0x30,
            "born_host": (b"\x20\x01\x0d\xb8" + bytes(12), 1),
            "store_host": (bytes(15) + b"\x01", 10911),
            "store_timestamp": 5,
        }
        for i in range(4)
    ]
    nb, starts = segment(recs)
    monkeypatch.setattr(record_columns, "decode_message", None)  # the twin's per-row decode
    monkeypatch.setattr(record_columns, "_native", native)
    batch = record_columns.to_record_batch(
        nb, record_columns.layout(nb, starts), broker_name="b", schema=arrow_schema()
    )
    assert batch.column("bornHost").to_pylist() == ["[2001:db8::]:1"] * 4
    assert batch.column("storeHost").to_pylist() == ["[::1]:10911"] * 4
    assert batch.column("offsetMsgId")[0].as_py() == "0" * 31 + "1" + "00002A9F" + "0" * 16
    assert batch.column("msgId").to_pylist()[:2] == [batch.column("offsetMsgId")[0].as_py(), "U"]
    assert batch.column("storeTimestamp")[0].value == 5000


def test_the_twin_takes_a_slice_with_separators_before_it() -> None:
    # a slice of a bigger array: its data buffer starts with the pairs of the rows cut off
    whole = pa.array(["A\x011\x02B\x012", "\x02\x02", "KEYS\x01k\x02TAGS\x01t", "x\x01y"], pa.string())
    sliced = whole.slice(2)
    expect = _properties_pure(pa.array(sliced.to_pylist(), pa.string()))
    assert same(_properties_pure(sliced), expect)
    assert expect[1].to_pylist() == ["k", None] and expect[0].to_pylist()[1] == [("x", "y")]
    assert same(native_path(record_columns._properties, sliced), expect)
