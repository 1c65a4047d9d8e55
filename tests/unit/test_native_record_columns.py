"""Differential tests: pumice._native's properties columns for the Spark reader
(native/src/record_columns.rs) against their twin ``record_columns._properties_pure``: the map
array and the KEYS, TAGS and UNIQ_KEY columns of a batch of properties strings, separators in
odd places, repeated names, empty names and values; and a whole RecordBatch
(``to_record_batch``) decoded both ways. No Spark session: pyarrow and numpy only."""

from __future__ import annotations

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


def test_the_twin_takes_a_slice_with_separators_before_it() -> None:
    # a slice of a bigger array: its data buffer starts with the pairs of the rows cut off
    whole = pa.array(["A\x011\x02B\x012", "\x02\x02", "KEYS\x01k\x02TAGS\x01t", "x\x01y"], pa.string())
    sliced = whole.slice(2)
    expect = _properties_pure(pa.array(sliced.to_pylist(), pa.string()))
    assert same(_properties_pure(sliced), expect)
    assert expect[1].to_pylist() == ["k", None] and expect[0].to_pylist()[1] == [("x", "y")]
    assert same(native_path(record_columns._properties, sliced), expect)
