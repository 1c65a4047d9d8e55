"""The remoting codec against GOLDEN.md §8, plus malformed input and extField coercion."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.remoting.remoting_codec import (
    FrameDecoder,
    RemotingCodecError,
    decode_frame,
    encode,
    encode_bytes,
)
from pumice.remoting.remoting_command import MissingFieldError, RemotingCommand, SerializeType
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

# GOLDEN §8A: GET_ROUTEINFO_BY_TOPIC, JSON header (131 bytes), built with the JDK
GOLDEN_8A = bytes.fromhex(
    "00000087000000837b22636f6465223a3130352c226578744669656c6473223a7b22746f706963223a22546f70696354657374227d"
    "2c22666c6167223a302c226c616e6775616765223a224a415641222c226f7061717565223a312c2273657269616c697a6554797065"
    "43757272656e74525043223a224a534f4e222c2276657273696f6e223a3430317d"
)
# GOLDEN §8B: the same request with the ROCKETMQ binary header (41 bytes)
GOLDEN_8B = bytes.fromhex(
    "0000002d010000290069000191000000010000000000000000000000140005746f70696300000009546f70696354657374"
)
GOLDEN_8B_HEADER = bytes.fromhex("0069000191000000010000000000000000000000140005746f70696300000009546f70696354657374")


def test_golden_8a_json_request_decodes() -> None:
    (cmd,) = FrameDecoder().feed(GOLDEN_8A)
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC == 105
    assert (cmd.language, cmd.version, cmd.opaque, cmd.flag) == ("JAVA", 401, 1, 0)
    assert cmd.remark is None and cmd.ext_fields == {"topic": "TopicTest"} and cmd.body == b""
    assert cmd.serialize_type is SerializeType.JSON
    assert not cmd.is_response and not cmd.is_oneway


def test_golden_8a_our_json_encoding_has_the_same_meaning() -> None:
    """§8A: key order and spacing carry no meaning, so parse and compare, and check the lengths."""
    cmd = RemotingCommand(code=105, opaque=1, language="JAVA", version=401, ext_fields={"topic": "TopicTest"})
    frame = encode_bytes(cmd)
    total, ser = struct.unpack_from(">ii", frame)
    assert total == len(frame) - 4 and ser >> 24 == 0 and ser & 0xFFFFFF == len(frame) - 8
    ours = json.loads(frame[8:])
    golden = json.loads(GOLDEN_8A[8:])
    assert ours == golden


def test_golden_8b_binary_header_both_ways() -> None:
    (cmd,) = FrameDecoder().feed(GOLDEN_8B)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, "JAVA", 401, 1, 0)
    assert cmd.remark is None and cmd.ext_fields == {"topic": "TopicTest"}
    assert cmd.serialize_type is SerializeType.ROCKETMQ
    assert encode_bytes(cmd) == GOLDEN_8B  # one extField: the byte order is fixed
    assert encode_bytes(cmd)[8:] == GOLDEN_8B_HEADER


def test_response_copies_opaque_sets_the_flag_and_writes_strings() -> None:
    (req,) = FrameDecoder().feed(GOLDEN_8A)
    resp = req.make_response(ResponseCode.SUCCESS, ext_fields={"queueId": 3, "offset": -1, "ok": True}, body=b"xy")
    frame = encode_bytes(resp)
    header = json.loads(frame[8 : 8 + (struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF)])
    assert header["opaque"] == 1 and header["flag"] & 1 and header["code"] == 0
    assert header["extFields"] == {"queueId": "3", "offset": "-1", "ok": "true"}  # strings, as C++ needs
    assert frame.endswith(b"xy")
    (back,) = FrameDecoder().feed(frame)
    assert back.is_response and back.body == b"xy"


def test_body_is_passed_through_as_a_separate_part() -> None:
    body = memoryview(b"record-bytes")
    parts = encode(RemotingCommand(code=0, body=body))
    assert parts[-1] is body  # no copy: the transport can writev / sendfile it


def test_frames_split_anywhere_and_pipelined() -> None:
    frames = b"".join(encode_bytes(RemotingCommand(code=34, opaque=i, body=bytes([i]) * i)) for i in range(20))
    dec = FrameDecoder()
    got: list[RemotingCommand] = []
    for i in range(0, len(frames), 7):
        got += dec.feed(frames[i : i + 7])
    assert [c.opaque for c in got] == list(range(20))
    assert all(c.body == bytes([c.opaque]) * c.opaque for c in got)
    assert dec.buffered == 0


def test_client_value_types_are_coerced() -> None:
    """PROTOCOL §1a: ints, bools and strings arrive; C++ writes bools as "0"/"1"."""
    raw = b'{"code":310,"opaque":7,"extFields":{"e":2,"g":"1795","k":false,"m":"1","x":"true","neg":-1}}'
    (cmd,) = FrameDecoder().feed(struct.pack(">ii", 4 + len(raw), len(raw)) + raw)
    assert cmd.ext_int("e") == 2 and cmd.ext_int("g") == 1795 and cmd.ext_int("neg") == -1
    assert cmd.ext_bool("k") is False and cmd.ext_bool("m") is True and cmd.ext_bool("x") is True
    assert cmd.ext_str("e") == "2" and cmd.ext_bool("absent", default=True) is True
    with pytest.raises(MissingFieldError, match="'topic'"):
        cmd.ext_str("topic", required=True)
    with pytest.raises(MissingFieldError, match="integer"):
        RemotingCommand(code=1, ext_fields={"q": "abc"}).ext_int("q")


@pytest.mark.parametrize(
    ("value", "int_ok", "long_ok"),
    [
        ("2147483647", 2**31 - 1, 2**31 - 1),
        ("-2147483648", -(2**31), -(2**31)),
        ("2147483648", None, 2**31),
        (2**31, None, 2**31),
        ("-9223372036854775808", None, -(2**63)),
        ("9223372036854775808", None, None),
        ("18446744073709551616", None, None),
        ("1_0", None, None),  # Python's int() reads 10; Java's parseInt refuses it
        (" 7 ", 7, 7),
        ("1.5", None, None),
    ],
)
def test_header_ints_are_javas_int_and_long(value: object, int_ok: int | None, long_ok: int | None) -> None:
    """A value out of a Java Integer's (Long's) range is refused with a remark naming the field,
    as decodeCommandCustomHeader's parseInt would: it never reaches struct packing or a loop."""
    cmd = RemotingCommand(code=1, ext_fields={"queueId": value})
    for getter, ok in ((cmd.ext_int, int_ok), (cmd.ext_long, long_ok)):
        if ok is None:
            with pytest.raises(MissingFieldError, match="'queueId'"):
                getter("queueId")
        else:
            assert getter("queueId") == ok


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (struct.pack(">i", 17 * 1024 * 1024), "frameMaxLength"),
        (struct.pack(">i", 2), "outside"),
        (struct.pack(">ii", 9, 5) + b"{nope", "not JSON"),
        (struct.pack(">ii", 6, 2) + b"[]", "not a JSON object"),
        (struct.pack(">ii", 17, 13) + b'{"opaque":12}', "no integer 'code'"),
        (struct.pack(">ii", 8, 100) + b"{}{}", "past the end"),
        (struct.pack(">ii", 6, (5 << 24) | 2) + b"{}", "serialize type"),
        (struct.pack(">ii", 8, (1 << 24) | 4) + b"\x00\x01\x00\x00", "ROCKETMQ"),
    ],
    ids=["too-large", "too-small", "bad-json", "not-object", "no-code", "header-past-end", "bad-type", "short-bin"],
)
def test_malformed_frames_raise_a_codec_error(frame: bytes, message: str) -> None:
    with pytest.raises(RemotingCodecError, match=message):
        FrameDecoder().feed(frame)


def test_header_numbers_may_be_digit_strings_as_fastjson_reads_them() -> None:
    raw = b'{"code":"28","opaque":"5","flag":"0","version":"395","language":"CPP"}'
    cmd = decode_frame(struct.pack(">i", len(raw)) + raw)
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (28, 5, 0, 395)
    for code in (rb'"\u00b2"', b'"2x"', b'"--5"', b'"-"', b"true", b"2.5", b'""'):
        raw = b'{"opaque":3,"code":' + code + b"}"
        with pytest.raises(RemotingCodecError, match="no integer 'code'") as e:
            decode_frame(struct.pack(">i", len(raw)) + raw)
        assert e.value.opaque == 3


def test_the_opaque_of_an_unanswerable_header_is_kept() -> None:
    raw = b'{"opaque":12}'
    with pytest.raises(RemotingCodecError) as e:
        decode_frame(struct.pack(">i", len(raw)) + raw)
    assert e.value.opaque == 12


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_but_codec_errors(data: bytes) -> None:
    dec = FrameDecoder(max_frame_length=1 << 16)
    try:
        dec.feed(data)
    except RemotingCodecError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    code=st.integers(0, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(max_size=30),
    ext=st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=20), max_size=5),
    body=st.binary(max_size=64),
    stype=st.sampled_from(list(SerializeType)),
)
def test_round_trip(code, opaque, flag, remark, ext, body, stype) -> None:
    cmd = RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body,
                          serialize_type=stype, language="CPP")  # fmt: skip
    (back,) = FrameDecoder().feed(encode_bytes(cmd))
    assert (back.code, back.opaque, back.flag, back.ext_fields, back.body) == (code, opaque, flag, ext, body)
    assert back.remark == (remark or None) if stype is SerializeType.ROCKETMQ else back.remark == remark
    assert back.language == "CPP"
