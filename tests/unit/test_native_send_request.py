"""Differential tests: pumice._native's send header fields against their pure-Python twin
(send_message_processor.send_header_fields_pure), on valid and malformed headers alike.

The native function may answer None (a value off its fast path): the twin then decides. Where it
does answer, the renamed ext fields and the fields must be the twin's exactly (types included);
where the twin raises, the native function answers None. Headers as the Java and Python clients
send them stay on the native fast path.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pumice.broker import send_message_processor as smp
from pumice.broker.send_message_processor import (
    V2_NAMES,
    send_header_fields,
    send_header_fields_pure,
    send_properties,
    send_properties_pure,
)
from pumice.common.message_decoder import HASH_MAP_ORDERS
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode

native = pytest.importorskip("pumice._native", reason="pumice._native is not built (no Rust toolchain)")

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CODES = (
    RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2,
)  # fmt: skip
V2 = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)


def typed(v: Any) -> Any:
    """A value whose equality also compares types (True == 1 in Python, not here)."""
    if isinstance(v, dict):
        return ("dict", [(typed(k), typed(x)) for k, x in v.items()])
    if isinstance(v, tuple):
        return ("tuple", [typed(x) for x in v])
    return (type(v).__name__, v)


def outcome(fn: Any, code: int, ext: dict[str, Any], *args: Any) -> Any:
    req = RemotingCommand(code=code, ext_fields=dict(ext))
    try:
        fields = fn(req, *args)
    except Exception as e:
        return ("error", type(e).__name__, str(e))
    return ("ok", typed(req.ext_fields), typed(fields))


def with_native(code: int, ext: dict[str, Any]) -> Any:
    saved = smp._native
    smp._native = native
    try:
        return outcome(send_header_fields, code, ext)
    finally:
        smp._native = saved


def check(code: int, ext: dict[str, Any], *, fast: bool = False) -> None:
    v2 = code in V2
    twin = outcome(send_header_fields_pure, code, ext, v2)
    got = native.send_header_fields(dict(ext), v2)
    if got is None:
        assert not fast, f"a common header fell off the native fast path: {ext!r}"
    else:
        renamed, fields = got
        assert twin == ("ok", typed(renamed), typed(fields))
    assert with_native(code, ext) == twin


numbers = st.one_of(
    st.integers(-(2**31), 2**31 - 1).map(str),
    st.integers().map(str),
    st.integers(-(2**63), 2**63),
    st.sampled_from(["", " 1", "1 ", "+1", "-0", "007", "1_0", "١", "0x10", "1.0", "-", "true"]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
)
texts = st.one_of(st.text(max_size=8), st.just("\ud800"), st.none(), st.integers(), st.booleans())
bools = st.one_of(
    st.sampled_from(["true", "false", "TRUE", " true", "1", "0", "yes", ""]), st.booleans(), st.integers(), st.none()
)
KEYS = [*V2_NAMES, *V2_NAMES.values(), "zz", "UNIQ_KEY"]
# property names and values as producers send them: no separators, no lone surrogates
plain_values = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=10
)


@st.composite
def headers(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=16)):
        name = V2_NAMES.get(key, key)
        if name in ("topic", "producerGroup", "properties", "defaultTopic", "brokerName"):
            out[key] = draw(texts)
        elif name in ("batch", "unitMode"):
            out[key] = draw(bools)
        else:
            out[key] = draw(numbers)
    return out


@SETTINGS
@given(code=st.sampled_from(CODES), ext=headers())
def test_header_fields_match_twin(code: int, ext: dict[str, Any]) -> None:
    check(code, ext)


@SETTINGS
@given(
    topic=st.text(min_size=1, max_size=20),
    queue_id=st.integers(-1, 1023),
    sys_flag=st.integers(0, 0xFFFF),
    born=st.integers(0, 2**62),
    props=st.text(max_size=40),
    as_str=st.booleans(),
    batch=st.sampled_from([None, "true", "false", True, False]),
)
def test_client_headers_are_native(
    topic: str, queue_id: int, sys_flag: int, born: int, props: str, as_str: bool, batch: Any
) -> None:
    """As the Java client (every value a string) and the Python clients (ints as ints) send them."""
    conv = str if as_str else (lambda v: v)
    v2 = {"a": "PG", "b": topic, "c": "TBW102", "d": conv(4), "e": conv(queue_id), "f": conv(sys_flag),
          "g": conv(born), "h": conv(0), "i": props, "j": conv(0), "k": "false", "l": conv(16)}  # fmt: skip
    if batch is not None:
        v2["m"] = batch
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        check(code, v2, fast=True)
    v1 = {V2_NAMES[k]: v for k, v in v2.items()}
    check(RequestCode.SEND_MESSAGE, v1, fast=True)


def test_names_are_the_processors() -> None:
    assert native.SEND_HEADER_V2_NAMES == V2_NAMES


@pytest.mark.parametrize("path", ["native", "pure"])
def test_missing_or_bad_fields_are_refused_with_a_remark(path: str) -> None:
    saved = smp._native
    smp._native = native if path == "native" else None
    try:
        for ext, remark in [
            ({"a": "PG"}, "the request has no 'topic' field"),
            ({"b": "T"}, "the request has no 'producerGroup' field"),
            ({"a": "PG", "b": "T", "e": "x"}, "field 'queueId' must be an integer (int), got 'x'"),
            ({"a": "PG", "b": "T", "f": str(2**31)}, "field 'sysFlag' is out of the int range: '2147483648'"),
        ]:
            out = outcome(send_header_fields, RequestCode.SEND_MESSAGE_V2, ext)
            assert out == ("error", "MissingFieldError", remark)
    finally:
        smp._native = saved


# -- a single message's properties --------------------------------------------------------

PROP_NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "CLUSTER", "DELAY", "a", "é", ""]
prop_values = st.text(alphabet=st.sampled_from(["\x01", "\x02", "x", "1", "é", "😀"]), max_size=6)


@st.composite
def properties_strings(draw: Any) -> str:
    pairs = draw(st.lists(st.tuples(st.sampled_from(PROP_NAMES), prop_values), max_size=7))
    s = "\x02".join(f"{k}\x01{v}" for k, v in pairs)
    return s + draw(st.sampled_from(["", "\x02", "\x01", "\x02\x02"]))


def props_outcome(fn: Any, *args: Any) -> Any:
    try:
        props, stored, wait = fn(*args)
    except Exception as e:
        return ("error", type(e).__name__)
    return ("ok", list(props.items()), typed(stored), typed(wait))


def check_properties(header_props: str, cluster: str, *, fast: bool = False) -> None:
    twin = props_outcome(send_properties_pure, header_props, cluster)  # fills the HashMap order cache
    got = native.send_properties(header_props, cluster, HASH_MAP_ORDERS)
    if got is None:
        assert not fast, f"common properties fell off the native fast path: {header_props!r}"
    else:
        assert props_outcome(lambda: got) == twin
    saved = smp._native
    smp._native = native
    try:
        assert props_outcome(send_properties, header_props, cluster) == twin
    finally:
        smp._native = saved


@SETTINGS
@given(
    header_props=st.one_of(properties_strings(), st.text(max_size=20), st.just("a\x01\ud800")),
    cluster=st.sampled_from(["DefaultCluster", "", "\ud800"]),
)
def test_properties_match_twin(header_props: str, cluster: str) -> None:
    check_properties(header_props, cluster)


@SETTINGS
@given(
    props=st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "TRACE_ON", "MSG_REGION"]), plain_values)
)
def test_producer_properties_are_native(props: dict[str, str]) -> None:
    header_props = "\x02".join(f"{k}\x01{v}" for k, v in props.items())
    send_properties_pure(header_props, "DefaultCluster")  # the first message of a name set: the twin sorts it
    check_properties(header_props, "DefaultCluster", fast=True)


def test_an_unseen_name_set_goes_to_the_twin_which_learns_its_order() -> None:
    header_props = "NEVER_SEEN_1\x01x\x02NEVER_SEEN_2\x01y\x02WAIT\x01false"
    assert native.send_properties(header_props, "C", HASH_MAP_ORDERS) is None
    props, stored, wait = send_properties_pure(header_props, "C")
    assert wait == "false" and list(props)[-1] == "WAIT" and "WAIT" not in stored
    assert native.send_properties(header_props, "C", HASH_MAP_ORDERS) == (props, stored, wait)


def test_a_properties_string_of_many_pairs_costs_what_the_twins_does() -> None:
    # 100,000 distinct pairs in one send (a producer's): a search per pair (quadratic, twice) took
    # ~10x the twin's CPU at 20,000 and grows with the square; linear, about the twin's. The bound
    # is loose (x10 + 1 s): it catches the curve, not the speed
    header_props = "\x02".join(f"P{i}\x01v{i}" for i in range(100_000))
    t = time.process_time()
    expected = send_properties_pure(header_props, "C")  # the twin learns this name set's order
    twin = time.process_time() - t
    t = time.process_time()
    got = native.send_properties(header_props, "C", HASH_MAP_ORDERS)
    took = time.process_time() - t
    assert got == expected
    assert took < 10 * twin + 1.0, (took, twin)
