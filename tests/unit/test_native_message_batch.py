"""Differential tests: pumice._native's batch body encode (native/src/message_batch.rs) against
its pure-Python twin ``message_batch.encode_batch_pure``, on valid and odd input alike
(properties with separators, lone surrogates, non-str values, properties past 32767 bytes,
flags past an int, bodies that are not bytes). Where the native call answers, its bytes are the
twin's; where the twin raises, ``encode_batch`` raises the same error on the native path."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pumice.client import message_batch
from pumice.client.message import Message
from pumice.client.message_batch import encode_batch_pure

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
