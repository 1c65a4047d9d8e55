"""Differential tests: pumice._native's batch body encode (native/src/message_batch.rs) against
its pure-Python twin ``message_batch.encode_batch_pure``, on valid and odd input alike
(properties with separators, lone surrogates, non-str values, properties past 32767 bytes,
flags past an int, bodies that are not bytes). Where the native call answers, its bytes are the
twin's; where the twin raises, ``encode_batch`` raises the same error on the native path.

The broker's look into a batch body for property names (``batch_properties_holding``, the timer
hook's) is held to ``message_decoder.batch_properties_holding_pure`` the same way, on valid bodies
and on bodies cut, patched and mis-sized at random."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pumice.client import message_batch
from pumice.client.message import Message
from pumice.client.message_batch import encode_batch_pure
from pumice.common import message_decoder
from pumice.common.message_decoder import batch_properties_holding_pure

native = pytest.importorskip("pumice._native", reason="pumice._native is not built (no Rust toolchain)")

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
texts = st.text(alphabet=st.sampled_from("ab\x01\x02é\ud800\x00"), max_size=10) | st.text(max_size=10)


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return ("error", type(e).__name__, str(e))


def on_native_path(*args: Any) -> Any:
    saved = message_batch._native
    message_batch._native = native
    try:
        return outcome(message_batch.encode_batch, *args)
    finally:
        message_batch._native = saved


@st.composite
def batches(draw: Any) -> tuple[list[Message], list[dict[str, Any]] | None]:
    n = draw(st.integers(0, 5))
    msgs = []
    for _ in range(n):
        m = Message("T", draw(st.binary(max_size=40)), tags=draw(st.none() | st.text(max_size=4)))
        m.flag = draw(st.integers(-(2**31), 2**31 - 1) | st.sampled_from([2**31, -(2**31) - 1, True]))
        m.delay_time_level = draw(st.sampled_from([0, 0, 0, 1]))
        if draw(st.integers(0, 9)) == 0:
            m.topic = "U"
        if draw(st.integers(0, 9)) == 0:
            m.body = bytearray(m.body)  # type: ignore[assignment]
        msgs.append(m)
    if draw(st.booleans()):
        return msgs, None
    props = []
    for _ in range(n + draw(st.sampled_from([0, 0, 0, -1]))):
        d: dict[str, Any] = draw(st.dictionaries(texts, texts, max_size=4))
        if draw(st.integers(0, 9)) == 0:
            d["x"] = draw(st.sampled_from([1, None, b"v"]))
        if draw(st.integers(0, 9)) == 0:
            d["long"] = "v" * draw(st.sampled_from([32767 - 6, 32767 - 5, 40000]))
        props.append(d)
    return msgs, props


@given(batches())
@SETTINGS
def test_batches_encode_alike(batch: tuple[list[Message], list[dict[str, Any]] | None]) -> None:
    msgs, props = batch
    twin = outcome(encode_batch_pure, msgs, props)
    assert on_native_path(msgs, props) == twin
    if twin[0] == "ok" and msgs and props is not None and all(type(m.body) is bytes for m in msgs):
        got = native.encode_batch_body([m.body for m in msgs], [m.flag for m in msgs], props)
        assert got is None or got == twin[1]


def test_a_producers_batch_is_one_native_call() -> None:
    msgs = [Message("T", bytes([i]) * 100, tags="A", keys=f"k{i}") for i in range(64)]
    props = [{**m.wire_properties(), "UNIQ_KEY": f"{i:032X}"} for i, m in enumerate(msgs)]
    got = native.encode_batch_body([m.body for m in msgs], [m.flag for m in msgs], props)
    assert got is not None and got == encode_batch_pure(msgs, props)


def test_the_twins_errors_on_the_native_path() -> None:
    m = Message("T", b"x")
    for props in ([{"k": "v" * 40000}], [{"k": 1}], [{"k": "\ud800"}], []):
        twin = outcome(encode_batch_pure, [m], props)
        assert twin[0] == "error" and on_native_path([m], props) == twin


def test_the_native_path_runs_unless_pure() -> None:
    assert (message_batch._native is None) == (os.environ.get("PUMICE_PURE") == "1")


NEEDLES = (b"TIMER_DEL", b"__STARTDELIVERTIME")
names = st.sampled_from(["TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "__STARTDELIVERTIME", "KEYS", "TIMER_DE", "UNIQ_KEY"])


@st.composite
def batch_bodies(draw: Any) -> bytes:
    """A broker-side batch body, then perhaps damaged: cut, a byte patched, a length field set."""
    msgs = []
    for _ in range(draw(st.integers(0, 6))):
        body = draw(st.binary(max_size=30) | st.sampled_from([b"TIMER_DELAY_SEC\x015", b"__STARTDELIVERTIME"]))
        m = Message("T", body)
        m.properties.update(draw(st.dictionaries(names, st.text(max_size=5), max_size=3)))
        msgs.append(m)
    raw = bytearray(encode_batch_pure(msgs, None)) if msgs else bytearray()
    fields = []  # (offset, size) of each message's totalSize, bodyLength and propertiesLength
    pos = 0
    while pos < len(raw):
        total, body_len = int.from_bytes(raw[pos : pos + 4], "big"), int.from_bytes(raw[pos + 16 : pos + 20], "big")
        fields += [(pos, 4), (pos + 16, 4), (pos + 20 + body_len, 2)]
        pos += total
    for _ in range(draw(st.integers(0, 2)) if fields else 0):  # a length field set to an edge or at random
        at, size = draw(st.sampled_from(fields))
        edges = [0, -1, 1, 2, 21, 22, 2 ** (8 * size - 1) - 1, -(2 ** (8 * size - 1))]
        value = draw(st.sampled_from(edges) | st.integers(-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1))
        raw[at : at + size] = value.to_bytes(size, "big", signed=True)
    if raw and draw(st.integers(0, 2)) == 0:  # cut anywhere
        del raw[draw(st.integers(0, len(raw) - 1)) :]
    return bytes(raw)


def holding_on_both_paths(raw: Any, needles: tuple[bytes, ...]) -> tuple[Any, Any]:
    saved = message_decoder._native
    message_decoder._native = native
    try:
        return message_decoder.batch_properties_holding(raw, needles), batch_properties_holding_pure(raw, needles)
    finally:
        message_decoder._native = saved


@given(batch_bodies(), st.sampled_from([NEEDLES, (b"KEYS",), (b"",), (b"\x01",)]))
@SETTINGS
def test_batch_properties_holding_alike(raw: bytes, needles: tuple[bytes, ...]) -> None:
    native_found = native.batch_properties_holding(raw, needles)
    assert native_found == batch_properties_holding_pure(raw, needles)
    on_native, twin = holding_on_both_paths(memoryview(raw), needles)
    assert on_native == twin == native_found


def test_batch_properties_holding_searches_properties_not_bodies() -> None:
    msgs = [Message("T", b"TIMER_DELAY_SEC\x015"), Message("T", b"x"), Message("T", b"y")]
    msgs[1].properties["TIMER_DELIVER_MS"] = "1"
    msgs[2].properties["__STARTDELIVERTIME"] = "2"
    raw = encode_batch_pure(msgs, None)
    native_found = native.batch_properties_holding(raw, NEEDLES)
    assert [i for i, _, _ in native_found] == [1, 2]
    assert native_found == batch_properties_holding_pure(raw, NEEDLES)
    start, end = native_found[0][1:]
    assert raw[start:end].startswith(b"TIMER_DELIVER_MS\x011\x02")  # the whole properties string
    assert native.batch_properties_holding(raw, (b"x", 1)) is None  # a needle that is not bytes: the twin's
