"""Differential tests: pumice._native's record walk (native/src/record_decode.rs) against its
pure-Python twins: the client's ``decode_messages_pure`` (a pull body), the store's
``scan_records_pure`` (recovery's walk) and ``string_to_message_properties_pure``, on valid and
malformed input alike (truncated bodies, lengths past the end, negative and huge lengths, bad
UTF-8, IPv6 hosts, separators in odd places, compressed bodies that do not inflate).

The native function may answer None (off its fast path): the twin then decides. Where it
answers, the answer must be the twin's exactly; where the twin raises, the public function
raises the same error on the native path. Valid bodies must stay on the native fast path.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pumice.native
from pumice.client import message as client_message
from pumice.client.message import MessageExt, decode_messages_pure
from pumice.common import message_decoder
from pumice.common.message_decoder import encode_record, string_to_message_properties_pure
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.store import message_check
from pumice.store.message_check import scan_records_pure

native = pytest.importorskip("pumice._native", reason="pumice._native is not built (no Rust toolchain)")

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
V6 = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
SEPARATED = st.text(alphabet=st.sampled_from("ab\x01\x02é\x00"), max_size=24)


def outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:
        return ("error", type(e).__name__, str(e))


def seen(msgs: list[MessageExt]) -> list[tuple[Any, ...]]:
    """Everything a decoded MessageExt shows (its lazy fields forced), types included."""
    return [
        (
            tuple((type(v).__name__, v) for v in m._h), m.topic, type(m.body), m.body, m.reconsume_times,
            m.broker_name, m._props_str, m.properties, m.msg_id, m.offset_msg_id, m.born_host, m.store_host,
            m.tags, m.keys,
        )
        for m in msgs
    ]  # fmt: skip


def on_native_path(module: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """fn as it runs on the native path (whatever PUMICE_PURE says)."""
    saved = module._native
    module._native = native
    try:
        return fn(*args, **kwargs)
    finally:
        module._native = saved


def decoded(fn: Any, body: Any, **kwargs: Any) -> Any:
    r = outcome(fn, body, **kwargs)
    return ("ok", seen(r[1])) if r[0] == "ok" else r


def check_decode(body: bytes, *, fast: bool = False, **kwargs: Any) -> None:
    twin = decoded(decode_messages_pure, body, **kwargs)
    direct = native.decode_messages(
        body, MessageExt, kwargs.get("broker_name"), kwargs.get("extra_properties")
    )  # fmt: skip
    if direct is None:
        assert not fast, "a valid pull body fell off the native fast path"
    elif kwargs.get("decompress", True) is False or not direct[1]:
        assert twin == ("ok", seen(direct[0]))
    for view in (body, bytearray(body), memoryview(body)):
        got = on_native_path(client_message, decoded, client_message.decode_messages, view, **kwargs)
        assert got == twin


@st.composite
def records(draw: Any) -> bytes:
    sys_flag = draw(st.sampled_from([0, MessageSysFlag.BORNHOST_V6_FLAG, MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, V6]))
    body = draw(st.binary(max_size=64))
    if draw(st.booleans()) and draw(st.booleans()):
        sys_flag |= MessageSysFlag.COMPRESSED_FLAG
        if draw(st.booleans()):
            body = zlib.compress(body)  # inflates; otherwise the raw bytes do not
    topic = draw(st.text(max_size=20).filter(lambda t: len(t.encode("utf-8", "surrogatepass")) <= 127))
    props = draw(
        st.one_of(SEPARATED, st.dictionaries(st.text(min_size=1, max_size=6), st.text(min_size=1, max_size=8)))
    )
    host = st.tuples(st.binary(min_size=4, max_size=4), st.integers(-(2**31), 2**31 - 1))
    host6 = st.tuples(st.binary(min_size=16, max_size=16), st.integers(0, 65535))
    i32, i64 = st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)
    try:
        return encode_record(
            body=body, topic=topic, properties=props, sys_flag=sys_flag, queue_id=draw(i32), flag=draw(i32),
            queue_offset=draw(i64), physical_offset=draw(i64), born_timestamp=draw(i64),
            store_timestamp=draw(i64), reconsume_times=draw(i32), prepared_transaction_offset=draw(i64),
            born_host=draw(host6 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else host),
            store_host=draw(host6 if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else host),
        )  # fmt: skip
    except UnicodeEncodeError:  # a lone surrogate in the topic or properties: not encodable
        return encode_record(body=body, topic="T", properties={})


pull_bodies = st.lists(records(), max_size=5).map(b"".join)


@given(pull_bodies, st.booleans(), st.sampled_from([None, "broker-a"]), st.sampled_from([None, {"MAX_OFFSET": "9"}]))
@SETTINGS
def test_valid_pull_bodies_decode_alike_natively(body: bytes, decompress: bool, broker: Any, extra: Any) -> None:
    check_decode(body, fast=True, decompress=decompress, broker_name=broker, extra_properties=extra)


@given(pull_bodies, st.data())
@SETTINGS
def test_malformed_pull_bodies_fail_alike(body: bytes, data: Any) -> None:
    b = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["cut", "byte", "int", "tail"]))
        if kind == "cut":
            del b[data.draw(st.integers(0, len(b))) :]
        elif kind == "tail":
            b += data.draw(st.binary(max_size=100))
        elif b and kind == "byte":
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
        elif len(b) >= 4:  # a length or count field: negative, huge, zero, off by a little
            i = data.draw(st.sampled_from([0, 84, 96, 108]) | st.integers(0, len(b) - 4))
            i = min(i, len(b) - 4)
            v = data.draw(st.sampled_from([-1, -(2**31), 2**31 - 1, 0, 4, 91, len(b) + 1]) | st.integers(-200, 300))
            b[i : i + 4] = struct.pack(">i", v)
    check_decode(bytes(b), decompress=data.draw(st.booleans()))


def test_common_errors_raise_the_twins_error_on_the_native_path() -> None:
    good = encode_record(body=b"hello", topic="T", properties={"TAGS": "a"})
    bad_utf8 = bytearray(good)
    bad_utf8[88 + 5 + 1] = 0xFF  # the topic's first byte
    not_inflating = encode_record(body=b"zz", topic="T", properties={}, sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    for body in (good[:50], good[:-1], good[:4] + b"\0\0\0\0" + good[8:], bytes(bad_utf8), not_inflating):
        twin = decoded(decode_messages_pure, body)
        assert twin[0] == "error" and twin[1] in ("ValueError", "UnicodeDecodeError")
        assert on_native_path(client_message, decoded, client_message.decode_messages, body) == twin


def test_a_negative_body_length_is_an_error_on_both_paths() -> None:
    # the twin's slices used to count from the end then, and decoded a message of header bytes
    good = encode_record(body=b"hello world body", topic="T", properties={"a": "b"})
    for blen in range(-88, 0):
        body = bytearray(good)
        struct.pack_into(">i", body, 84, blen)
        want = ("error", "ValueError", f"record at byte 0 has a negative body length {blen}")
        assert outcome(decode_messages_pure, bytes(body)) == want
        assert on_native_path(client_message, outcome, client_message.decode_messages, bytes(body)) == want


def test_a_consumers_batch_is_one_native_call() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "7F00000100002A9F0000000000000001", "WAIT": "true"}
    body = b"".join(
        encode_record(body=bytes([i]) * 1024, topic="BenchTopic", properties=props, physical_offset=i * 1200,
                      queue_offset=i, store_host=(b"\x0a\x00\x00\x02", 10911))
        for i in range(32)
    )  # fmt: skip
    direct = native.decode_messages(body, MessageExt, "broker-a", None)
    assert direct is not None and len(direct[0]) == 32 and direct[1] is False
    assert seen(direct[0]) == seen(decode_messages_pure(body, broker_name="broker-a"))
    assert direct[0][3].offset_msg_id == "0A00000200002A9F0000000000000E10" and direct[0][3].msg_id == props["UNIQ_KEY"]


def test_compressed_bodies_inflate_on_the_native_path() -> None:
    raw = b"abc" * 100
    body = encode_record(body=zlib.compress(raw), topic="T", properties={}, sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    body += encode_record(body=b"plain", topic="T", properties={})
    msgs = on_native_path(client_message, client_message.decode_messages, body)
    assert [m.body for m in msgs] == [raw, b"plain"]
    kept = on_native_path(client_message, client_message.decode_messages, body, decompress=False)
    assert kept[0].body == zlib.compress(raw) and kept[0].sys_flag & MessageSysFlag.COMPRESSED_FLAG


# -- properties ---------------------------------------------------------------------------


@given(st.one_of(SEPARATED, st.text(max_size=40), st.text(alphabet="\x01\x02\ud800a", max_size=10)))
@SETTINGS
def test_properties_strings_decode_alike(s: str) -> None:
    twin = outcome(string_to_message_properties_pure, s)
    got = on_native_path(message_decoder, outcome, message_decoder.string_to_message_properties, s)
    assert got == twin and (got[0] != "ok" or list(got[1].items()) == list(twin[1].items()))
    direct = native.string_to_message_properties(s)
    assert direct is None or list(direct.items()) == list(twin[1].items())


def test_properties_with_separators_in_odd_places() -> None:
    s = "\x02a\x011\x02\x02\x01x\x02b\x01\x02c\x013\x014\x02a\x012\x02d"
    assert native.string_to_message_properties(s) == {"a": "2", "c": "3\x014"} == string_to_message_properties_pure(s)
    assert list(native.string_to_message_properties(s)) == ["a", "c"]  # a keeps its first place, as a dict does


# -- the store's scan ---------------------------------------------------------------------


def crc_of(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


@given(st.lists(records(), max_size=4), st.data())
@SETTINGS
def test_store_scans_agree(recs: list[bytes], data: Any) -> None:
    b = bytearray(b"".join(recs))
    # fix each CRC so that check_crc passes unless a mutation breaks it
    pos = 0
    for r in recs:
        hsize = message_decoder.head_struct(struct.unpack_from(">i", r, 36)[0]).size
        blen = struct.unpack_from(">i", r, hsize - 4)[0]
        struct.pack_into(">I", b, pos + 8, crc_of(r[hsize : hsize + blen]))
        pos += len(r)
    if data.draw(st.booleans()):  # the blank end-of-file record, perhaps with a wrong length
        tail = data.draw(st.integers(8, 40))
        b += struct.pack(">iI", tail + data.draw(st.sampled_from([0, 0, 1, -1])), message_decoder.BLANK_MAGIC_CODE)
        b += bytes(tail - 8)
    if b and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] = data.draw(st.integers(0, 255))
    start = data.draw(st.sampled_from([0, 0, 1, len(b), -1]) | st.integers(-5, len(b) + 5))
    limit = data.draw(st.sampled_from([len(b), len(b), len(b) - 3, len(b) + 8]) | st.integers(-5, len(b) + 5))
    for check_crc in (False, True):
        twin = outcome(scan_records_pure, bytes(b), start, limit, check_crc)
        got = on_native_path(message_check, outcome, message_check.scan_records, bytes(b), start, limit, check_crc)
        assert got == twin
        if twin[0] == "ok" and 0 <= start <= limit <= len(b):
            fn = zlib.crc32 if check_crc else None
            assert native.scan_records(bytes(b), start, limit, fn) == twin[1]


def test_scan_of_a_mapped_file_stays_native(tmp_path: Any) -> None:
    import mmap

    recs = b"".join(encode_record(body=bytes(100), topic="T", properties={"a": "b"}) for _ in range(50))
    size = 16384
    blank = struct.pack(">iI", size - len(recs), message_decoder.BLANK_MAGIC_CODE)
    path = tmp_path / "00000000000000000000"
    path.write_bytes((recs + blank).ljust(size, b"\0"))
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
        for check_crc in (False, True):
            expected = scan_records_pure(mm, 0, size, check_crc)
            assert expected == (len(recs), 50, True)
            assert native.scan_records(mm, 0, size, zlib.crc32 if check_crc else None) == expected


def test_the_native_path_runs_unless_pure() -> None:
    modules = (client_message, message_decoder, message_check)
    if os.environ.get("PUMICE_PURE") == "1":
        assert pumice.native.NATIVE is None and all(m._native is None for m in modules)
    else:
        assert all(m._native is native for m in modules)
