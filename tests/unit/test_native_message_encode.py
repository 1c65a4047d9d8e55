"""Differential tests: pumice._native's CommitLog record encode and batch body walks against their
pure-Python twins (message_decoder.encode_record_bytes_pure, encode_batch_records_pure,
batch_properties_holding_pure), on valid and malformed input alike, and both held to GOLDEN.md's
records.

The native function may answer None (off its fast path): the twin then decides. Where it does
answer, the answer must be the twin's exactly; a refused batch raises the twin's ValueError with
the twin's remark. The common shapes (what brokers store) must stay on the native fast path.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pumice.common import message_decoder
from pumice.common.message_decoder import (
    HEAD_STRUCTS,
    QUEUE_OFFSET_OFFSET,
    batch_properties_holding,
    batch_properties_holding_pure,
    create_message_id,
    encode_batch_records,
    encode_batch_records_pure,
    encode_record,
    encode_record_bytes,
    encode_record_bytes_pure,
    head_struct,
    join_message_ids,
    join_message_ids_pure,
    store_timestamp_offset,
)
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.store.put_message_result import AppendMessageResult, AppendMessageStatus
from tests.helpers.golden import REC_3A, REC_3C

native = pytest.importorskip("pumice._native", reason="pumice._native is not built (no Rust toolchain)")

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
V6 = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
# mostly fitting, sometimes not: struct.error from the twin, None from the native function
ints32 = st.one_of(I32, I32, I32, st.integers(), st.booleans())
ints64 = st.one_of(I64, I64, st.integers())
addrs = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16), st.binary(max_size=20))
hosts = st.tuples(addrs, ints32)
# property names and values as producers send them: no separators, no lone surrogates
plain_values = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=10
)


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # the same error type, and for ValueError the same remark
        return ("error", type(e).__name__, str(e) if type(e) is ValueError else "")


def with_native(fn: Any, *args: Any) -> Any:
    """``fn`` as it runs on the native path (whatever PUMICE_PURE says)."""
    saved = message_decoder._native
    message_decoder._native = native
    try:
        return outcome(fn, *args)
    finally:
        message_decoder._native = saved


def v6_bits(born: tuple[bytes, int], store: tuple[bytes, int]) -> int:
    return (MessageSysFlag.BORNHOST_V6_FLAG if len(born[0]) == 16 else 0) | (
        MessageSysFlag.STOREHOSTADDRESS_V6_FLAG if len(store[0]) == 16 else 0
    )


# -- one record ---------------------------------------------------------------------------


def check_record(args: tuple[Any, ...], *, fast: bool = False) -> None:
    twin = outcome(encode_record_bytes_pure, *args)
    rec = native.encode_record_bytes(*args)
    if rec is None:
        assert not fast, f"a common record fell off the native fast path: {args!r}"
    else:
        assert twin == ("ok", rec)
    assert with_native(encode_record_bytes, *args) == twin


@SETTINGS
@given(
    topic=st.binary(min_size=1, max_size=128),
    body=st.binary(max_size=300),
    props=st.one_of(st.binary(max_size=200), st.just(b"p" * 70_000)),
    queue_id=ints32,
    flag=ints32,
    sys_flag=ints32,
    born_ts=ints64,
    born=hosts,
    store=hosts,
    reconsume=ints32,
    prepared=ints64,
    view=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_record_matches_twin(
    topic: bytes, body: bytes, props: bytes, queue_id: Any, flag: Any, sys_flag: Any, born_ts: int,
    born: Any, store: Any, reconsume: Any, prepared: int, view: Any,
) -> None:  # fmt: skip
    blob = bytes((len(topic) & 0xFF,)) + topic
    check_record((blob, view(body), props, queue_id, flag, sys_flag, born_ts, born, store, reconsume, prepared))


@SETTINGS
@given(
    topic=st.text(min_size=1, max_size=40),
    body=st.binary(max_size=2000),
    props=st.dictionaries(plain_values, plain_values, max_size=6),
    queue_id=st.integers(0, 1023),
    sys_flag=st.integers(0, 0xFFFF),
    born_ts=st.integers(0, 2**62),
    v4_born=st.booleans(),
    v4_store=st.booleans(),
)
def test_common_records_are_native_and_decode_as_encode_record_writes(
    topic: str, body: bytes, props: dict[str, str], queue_id: int, sys_flag: int, born_ts: int, v4_born: bool,
    v4_store: bool,
) -> None:  # fmt: skip
    born = (b"\x0a\x00\x00\x05" if v4_born else b"\xfe\x80" + b"\x00" * 13 + b"\x05", 51234)
    store = (b"\x7f\x00\x00\x01" if v4_store else b"\x00" * 15 + b"\x01", 10911)
    sf = (sys_flag & ~V6) | v6_bits(born, store)
    tb = topic.encode()[:127]
    ps = message_decoder.message_properties_to_string(props).encode()
    args = (bytes((len(tb),)) + tb, body, ps, queue_id, 7, sf, born_ts, born, store, 2, 99)
    check_record(args, fast=True)
    want = encode_record(
        body=body, topic=tb.decode("utf-8", "surrogateescape"),
        properties=ps.decode(), queue_id=queue_id, flag=7, sys_flag=sf, born_timestamp=born_ts, born_host=born,
        store_host=store, reconsume_times=2, prepared_transaction_offset=99,
    ) if _utf8(tb) else None  # fmt: skip
    if want is not None:
        assert native.encode_record_bytes(*args) == want


def _utf8(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("golden", [REC_3A, REC_3C], ids=["3A", "3C"])
@pytest.mark.parametrize("path", ["native", "pure"])
def test_golden_records(golden: bytes, path: str) -> None:
    """GOLDEN.md §3A/§3C, rebuilt from their fields on each path; the three fields the CommitLog
    patches under its lock are the only ones left at 0."""
    sys_flag = struct.unpack_from(">i", golden, 36)[0]
    head = head_struct(sys_flag)
    f = head.unpack_from(golden)
    (_, _, _, queue_id, flag, qoff, phys, sf, born_ts, bh0, bh1, store_ts, sh0, sh1, reconsume, prepared, bl) = f
    p = head.size
    body = golden[p : p + bl]
    tlen = golden[p + bl]
    blob = golden[p + bl : p + bl + 1 + tlen]
    props = golden[p + bl + 1 + tlen + 2 :]
    args = (blob, body, props, queue_id, flag, sf, born_ts, (bh0, bh1), (sh0, sh1), reconsume, prepared)
    rec = native.encode_record_bytes(*args) if path == "native" else encode_record_bytes_pure(*args)
    assert rec is not None
    patched = bytearray(rec)
    struct.pack_into(">qq", patched, QUEUE_OFFSET_OFFSET, qoff, phys)
    struct.pack_into(">q", patched, store_timestamp_offset(sf), store_ts)
    assert bytes(patched) == golden
    assert HEAD_STRUCTS[(sf >> 4) & 3] is head


# -- batch bodies -------------------------------------------------------------------------

NAMES = ("TAGS", "KEYS", "UNIQ_KEY", "DELAY", "WAIT", "a", "", "TAGS\x01")
prop_texts = st.text(alphabet=st.sampled_from(["\x01", "\x02", "x", "0", "é", "😀", "\ud800"]), max_size=8)


@st.composite
def properties_bytes(draw: Any) -> bytes:
    pairs = draw(st.lists(st.tuples(st.sampled_from(NAMES), prop_texts), max_size=5))
    s = "\x02".join(f"{k}\x01{v}" for k, v in pairs) + draw(st.sampled_from(["", "\x02", "\x02\x02", "\x01"]))
    raw = s.encode("utf-8", "surrogatepass")
    return draw(st.one_of(st.just(raw), st.just(raw), st.binary(max_size=12)))


@st.composite
def batch_message(draw: Any) -> bytes:
    body = draw(st.binary(max_size=64))
    props = draw(properties_bytes())
    total = 22 + len(body) + len(props)
    edges = st.sampled_from([0, -1, 1, 21, 22])  # where a walk must stop, or must not loop
    total = draw(st.one_of(st.just(total), st.just(total), st.just(total), I32, edges))
    bl = draw(st.one_of(st.just(len(body)), st.just(len(body)), st.just(len(body)), I32, edges))
    plen = draw(
        st.one_of(
            st.just(len(props)), st.just(len(props)), st.just(len(props)), st.integers(-(2**15), 2**15 - 1), edges
        )
    )
    flag = draw(I32)
    return struct.pack(">iiiii", total, 0, 0, flag, bl) + body + struct.pack(">h", plen) + props


@st.composite
def batch_bodies(draw: Any) -> bytes:
    raw = b"".join(draw(st.lists(batch_message(), min_size=1, max_size=6)))
    cut = draw(st.one_of(st.just(len(raw)), st.just(len(raw)), st.integers(0, len(raw))))
    return raw[:cut]


suffixes = st.one_of(
    st.just(""), st.just("CLUSTER\x01DefaultCluster"), st.just("WAIT\x01false\x02CLUSTER\x01c"), prop_texts
)


def check_batch(args: tuple[Any, ...], *, fast: bool = False) -> Any:
    twin = outcome(encode_batch_records_pure, *args)
    got = outcome(native.encode_batch_records, *args)
    if got == ("ok", None):
        assert not fast, f"a common batch fell off the native fast path: {args!r}"
    else:
        assert got == twin
        if twin[0] == "ok":
            assert type(twin[1][0]) is bytearray and type(got[1][0]) is bytearray  # patched in place later
    assert with_native(encode_batch_records, *args) == twin
    return twin


@SETTINGS
@given(
    raw=st.one_of(batch_bodies(), st.binary(max_size=80)),
    topic=st.binary(min_size=1, max_size=20),
    queue_id=ints32,
    sys_flag=ints32,
    born_ts=ints64,
    born=hosts,
    store=hosts,
    reconsume=ints32,
    suffix=suffixes,
    max_size=st.one_of(st.just(4 << 20), st.integers(0, 600), st.integers()),
)
def test_batch_matches_twin(
    raw: bytes, topic: bytes, queue_id: Any, sys_flag: Any, born_ts: int, born: Any, store: Any, reconsume: Any,
    suffix: str, max_size: int,
) -> None:  # fmt: skip
    blob = bytes((len(topic),)) + topic
    check_batch((raw, blob, queue_id, sys_flag, born_ts, born, store, reconsume, suffix, max_size))


@SETTINGS
@given(
    msgs=st.lists(
        st.tuples(
            st.binary(max_size=300),
            st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "b"]), plain_values),
            I32,
        ),
        min_size=1,
        max_size=8,
    ),
    v4=st.booleans(),
    suffix=st.sampled_from(["", "CLUSTER\x01DefaultCluster"]),
)
def test_common_batches_are_native(msgs: list[tuple[bytes, dict[str, str], int]], v4: bool, suffix: str) -> None:
    raw = b""
    for body, props, flag in msgs:
        pb = message_decoder.message_properties_to_string(props).encode()
        raw += (
            struct.pack(">iiiii", 22 + len(body) + len(pb), 0, 0, flag, len(body))
            + body
            + struct.pack(">h", len(pb))
            + pb
        )
    born = (b"\x0a\x00\x00\x05", 5) if v4 else (b"\x00" * 15 + b"\x01", 5)
    store = (b"\x7f\x00\x00\x01", 10911)
    args = (raw, b"\x05Topic", 1, v6_bits(born, store), 123, born, store, 0, suffix, 4 << 20)
    twin = check_batch(args, fast=True)
    assert twin[0] == "ok"
    records, metas = twin[1]
    assert len(metas) == len(msgs)
    # each record is the single-record encode of the message, with the suffix after its properties
    pos = 0
    for (body, props, flag), (size, _tags_code, keys, uniq, ps) in zip(msgs, metas, strict=True):
        assert keys == props.get("KEYS") and uniq == props.get("UNIQ_KEY")
        own = message_decoder.message_properties_to_string(props)
        assert ps == (own + "\x02" + suffix if own and suffix else own or suffix)
        one = encode_record_bytes_pure(b"\x05Topic", body, ps.encode(), 1, flag, args[3], 123, born, store, 0, 0)
        assert records[pos : pos + size] == one
        pos += size
    assert pos == len(records)


@pytest.mark.parametrize(
    ("raw", "remark"),
    [
        (b"\x00" * 21, "batch body truncated at byte 0"),
        (struct.pack(">iiiii", 30, 0, 0, 0, -1) + b"\x00\x00", "bad batch record at byte 0"),
        (struct.pack(">iiiii", 99, 0, 0, 0, 0) + b"\x00\x00", "bad batch record properties at byte 0"),
        (
            struct.pack(">iiiii", 25, 0, 0, 0, 0) + b"\x00\x03\xff\x01a",
            "batch record properties at byte 0 are not UTF-8",
        ),
        (
            struct.pack(">iiiii", 22, 0, 0, 0, 0)
            + b"\x00\x00"
            + struct.pack(">iiiii", 29, 0, 0, 0, 0)
            + b"\x00\x07DELAY\x013",
            "message 1 of the batch has a delay level; batches cannot be delayed",
        ),
    ],
    ids=["truncated", "negative-body", "bad-total", "not-utf8", "delayed"],
)
@pytest.mark.parametrize("path", ["native", "pure"])
def test_refused_batches_say_why(raw: bytes, remark: str, path: str) -> None:
    args = (raw, b"\x01T", 0, 0, 0, (b"\x7f\x00\x00\x01", 1), (b"\x7f\x00\x00\x01", 2), 0, "", 4 << 20)
    fn = native.encode_batch_records if path == "native" else encode_batch_records_pure
    with pytest.raises(ValueError) as e:
        fn(*args)
    assert type(e.value) is ValueError and str(e.value) == remark


# -- a batch's msgIds ---------------------------------------------------------------------


@SETTINGS
@given(
    prefix=st.sampled_from(["", "7F00000100002A9F", "0" * 40]),
    offsets=st.lists(st.one_of(I64, I64, st.integers(), st.booleans()), max_size=70),
)
def test_message_ids_match_twin(prefix: str, offsets: list[int]) -> None:
    twin = join_message_ids_pure(prefix, offsets)
    got = native.join_message_ids(prefix, offsets)
    fits = all(type(o) is int and -(2**63) <= o < 2**63 for o in offsets)
    assert got == (twin if fits else None)
    host = (bytes.fromhex(prefix[:8] or "7f000001"), 10911)
    assert with_native(join_message_ids, host, offsets) == outcome(
        join_message_ids_pure, create_message_id(host, 0)[:-16], offsets
    )


@pytest.mark.parametrize("path", ["native", "pure"])
def test_batch_answer_lists_each_records_msg_id(path: str) -> None:
    """As 4.9's batch answer: each record's offset msgId, comma-joined, each as create_message_id writes it."""
    host = (b"\x0a\x00\x00\x07", 10911)
    offsets = [0, 1234, 2**40 + 5]
    saved = message_decoder._native
    message_decoder._native = native if path == "native" else None
    try:
        got = AppendMessageResult(AppendMessageStatus.PUT_OK, store_host=host, wrote_offsets=offsets).msg_id
    finally:
        message_decoder._native = saved
    assert got == ",".join(create_message_id(host, o) for o in offsets)
    assert got.split(",")[1] == "0A00000700002A9F00000000000004D2"


@SETTINGS
@given(
    raw=st.one_of(batch_bodies(), st.binary(max_size=80)),
    needles=st.sampled_from([(b"KEYS",), (b"TAGS", b"WAIT"), (b"",), (b"\x01",), (b"\x02\x02",), (b"x0",)]),
)
def test_batch_properties_holding_matches_twin(raw: bytes, needles: tuple[bytes, ...]) -> None:
    twin = batch_properties_holding_pure(raw, needles)
    assert native.batch_properties_holding(raw, needles) == twin
    assert with_native(batch_properties_holding, memoryview(raw), needles) == ("ok", twin)


def message(body: bytes, props: bytes, total: int | None = None, body_len: int | None = None,
            props_len: int | None = None) -> bytes:  # fmt: skip
    """One message of a batch body; a length given is written instead of the true one."""
    total = 22 + len(body) + len(props) if total is None else total
    body_len = len(body) if body_len is None else body_len
    props_len = len(props) if props_len is None else props_len
    return struct.pack(">iiiii", total, 0, 0, 0, body_len) + body + struct.pack(">h", props_len) + props


@pytest.mark.parametrize(
    "raw",
    [
        message(b"", b"K", total=0) + message(b"", b"K"),  # a walk that did not stop here would never end
        message(b"", b"K", total=-1),
        message(b"ab", b"K", body_len=-1),
        message(b"ab", b"K", body_len=1),  # the properties' length read from the body
        message(b"ab", b"KK", props_len=-2),
        message(b"ab", b"K" * 3, props_len=-32768),
        message(b"ab", b"K", props_len=40),  # past the end: cut there
        message(b"", b"K", total=1) + message(b"", b"K"),  # the next message read from inside this one
        message(b"ab", b"K")[:21],
        message(b"ab", b"K")[:22],
        message(b"ab", b"K")[:24],
    ],
)
def test_batch_properties_holding_stops_where_the_twin_does(raw: bytes) -> None:
    for needles in ((b"K",), (b"",)):
        assert native.batch_properties_holding(raw, needles) == batch_properties_holding_pure(raw, needles)


def test_batch_properties_holding_searches_properties_not_bodies() -> None:
    needles = (b"TIMER_DEL", b"__STARTDELIVERTIME")
    raw = (
        message(b"TIMER_DELAY_SEC\x015", b"KEYS\x01k")
        + message(b"x", b"TIMER_DELIVER_MS\x011\x02WAIT\x01true")
        + message(b"y", b"__STARTDELIVERTIME\x012")
    )
    found = native.batch_properties_holding(raw, needles)
    assert found == batch_properties_holding_pure(raw, needles)
    assert [i for i, _, _ in found] == [1, 2]
    assert raw[found[0][1] : found[0][2]] == b"TIMER_DELIVER_MS\x011\x02WAIT\x01true"  # the whole properties
    assert native.batch_properties_holding(raw, (b"x", 1)) is None  # a needle that is not bytes: the twin's
