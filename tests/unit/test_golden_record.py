"""Golden vectors for the CommitLog record (GOLDEN.md §3A/3B/3C), the blank record (§4) and the msgId (§7)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.common.java_hash import tags_code
from pumice.common.message import HostAddress
from pumice.common.message_decoder import (
    cal_msg_length,
    crc32,
    create_message_id,
    decode_message,
    decode_message_id,
    encode_blank_into,
    encode_record,
    encode_record_into,
    message_properties_to_string,
    pickup_store_timestamp,
    record_properties,
    string_to_message_properties,
)
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.store.message_check import CheckKind, check_kind, check_message_and_return_size
from tests.helpers.golden import BLANK_8, REC_3A, REC_3C

# -- golden literals, copied from GOLDEN.md ---------------------------------------------------

# §3A, §3C and §4 (REC_3A, REC_3C, BLANK_8): tests/helpers/golden.py, shared with the store tests
# §3A, the same record 32 bytes per line
REC_3A_LINES = bytes.fromhex(
    "000000a9daa320a73610a6860000000300000000000000000000000700000000"
    "000004d2000000000000018bcfe56800c0a8000a0000d4310000018bcfe5687b"
    "7f00000100002a9f0000000000000000000000000000000568656c6c6f09546f"
    "7069635465737400404b455953016b2d31206b2d320254414753015461674102"
    "554e49515f4b4559013746303030303031303030303241394630303030303030"
    "303030303030303031"
)
# §3B, trailing \u0002 form
REC_3B = bytes.fromhex(
    "000000aadaa320a73610a6860000000300000000000000000000000700000000000004d2000000000000018bcfe56800c0a8000a0000d431"
    "0000018bcfe5687b7f00000100002a9f0000000000000000000000000000000568656c6c6f09546f7069635465737400414b455953016b2d"
    "31206b2d320254414753015461674102554e49515f4b455901374630303030303130303030324139463030303030303030303030303030"
    "303102"
)
# §3A PROPERTIES field (64 bytes)
PROPS_3A_HEX = (
    "4b455953016b2d31206b2d320254414753015461674102554e49515f4b4559013746303030303031303030303241394630303030303030"
    "303030303030303031"
)
PROPS_STR = "KEYS\u0001k-1 k-2\u0002TAGS\u0001TagA\u0002UNIQ_KEY\u00017F00000100002A9F0000000000000001"

# §3 inputs
UNIQ = "7F00000100002A9F0000000000000001"
PROPS = {"KEYS": "k-1 k-2", "TAGS": "TagA", "UNIQ_KEY": UNIQ}
BORN_V4: HostAddress = (bytes([192, 168, 0, 10]), 54321)
BORN_V6: HostAddress = (bytes(15) + b"\x01", 54321)
STORE_HOST: HostAddress = (bytes([127, 0, 0, 1]), 10911)
BORN_TS = 1700000000000
STORE_TS = 1700000000123


def _encode_3(born_host: HostAddress, sys_flag: int, properties: dict[str, str] | str = PROPS) -> bytes:
    return encode_record(
        body=b"hello",
        topic="TopicTest",
        properties=properties,
        queue_id=3,
        flag=0,
        queue_offset=7,
        physical_offset=1234,
        sys_flag=sys_flag,
        born_timestamp=BORN_TS,
        born_host=born_host,
        store_timestamp=STORE_TS,
        store_host=STORE_HOST,
        reconsume_times=0,
        prepared_transaction_offset=0,
    )


def test_golden_literals_consistent() -> None:
    """§3A: the one-line and 32-per-line listings agree; lengths match TOTALSIZE (guards the copied literals)."""
    assert REC_3A == REC_3A_LINES
    assert (len(REC_3A), len(REC_3B), len(REC_3C)) == (169, 170, 181)
    assert REC_3A[105:] == bytes.fromhex(PROPS_3A_HEX) == PROPS_STR.encode()


# -- §3 properties string --------------------------------------------------------------------


def test_message_properties_to_string_3a() -> None:
    """§3/§0.1: 4.9.1+ form, pairs in the given order, no trailing \\u0002 (64 UTF-8 bytes)."""
    s = message_properties_to_string(PROPS)
    assert s == PROPS_STR
    assert s.encode() == bytes.fromhex(PROPS_3A_HEX)


@pytest.mark.parametrize("s", [PROPS_STR, PROPS_STR + "\u0002"], ids=["4.9.1+", "trailing-sep"])
def test_string_to_message_properties_both_forms(s: str) -> None:
    """§0.1/§3B: the decoder accepts both forms and ignores the empty trailing segment."""
    assert string_to_message_properties(s) == PROPS


def test_string_to_message_properties_order_independent() -> None:
    """§3: pair order carries no meaning (HashMap order KEYS, UNIQ_KEY, TAGS decodes the same)."""
    s = f"KEYS\u0001k-1 k-2\u0002UNIQ_KEY\u0001{UNIQ}\u0002TAGS\u0001TagA"
    assert string_to_message_properties(s) == PROPS
    assert string_to_message_properties("") == {}


# -- §3 encode -------------------------------------------------------------------------------


def test_cal_msg_length() -> None:
    """§3A/3B/3C: 91 fixed bytes (+12 for an IPv6 host) + body + topic + properties."""
    assert cal_msg_length(0, 5, 9, 64) == 169
    assert cal_msg_length(0, 5, 9, 65) == 170
    assert cal_msg_length(MessageSysFlag.BORNHOST_V6_FLAG, 5, 9, 64) == 181
    assert cal_msg_length(MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, 5, 9, 64) == 181
    assert cal_msg_length(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, 0, 0, 0) == 115


def test_encode_record_3a() -> None:
    """§3A: ``encode_record`` gives the 169 golden bytes."""
    assert _encode_3(BORN_V4, 0) == REC_3A


def test_encode_record_3b_from_properties_string() -> None:
    """§3B: a properties string with the trailing \\u0002, passed through verbatim, gives the 170 golden bytes."""
    assert _encode_3(BORN_V4, 0, PROPS_STR + "\u0002") == REC_3B


def test_encode_record_3c() -> None:
    """§3C: IPv6 born host with sysFlag 0x10 gives the 181 golden bytes."""
    assert _encode_3(BORN_V6, MessageSysFlag.BORNHOST_V6_FLAG) == REC_3C


def test_encode_record_into_at_offset() -> None:
    """§3A: ``encode_record_into`` writes exactly the 169 golden bytes at ``pos`` and nothing around them."""
    buf = bytearray(b"\xee" * 400)
    encode_record_into(
        buf, 100, msg_len=169, body_crc=907060870, queue_id=3, flag=0, queue_offset=7, physical_offset=1234,
        sys_flag=0, born_timestamp=BORN_TS, born_host=BORN_V4, store_timestamp=STORE_TS, store_host=STORE_HOST,
        reconsume_times=0, prepared_transaction_offset=0, body=b"hello", topic=b"TopicTest",
        properties=PROPS_STR.encode(),
    )  # fmt: skip
    assert bytes(buf[100:269]) == REC_3A
    assert buf[:100] == b"\xee" * 100
    assert buf[269:] == b"\xee" * 131


# -- §3 decode -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rec", "size", "sys_flag", "born"),
    [(REC_3A, 169, 0, BORN_V4), (REC_3B, 170, 0, BORN_V4), (REC_3C, 181, 0x10, BORN_V6)],
    ids=["3A", "3B", "3C"],
)
def test_decode_message_golden(rec: bytes, size: int, sys_flag: int, born: HostAddress) -> None:
    """§3A/3B/3C: ``decode_message`` on the golden bytes gives every input field back."""
    m = decode_message(rec)
    assert m.store_size == size
    assert m.body_crc == 907060870
    assert m.queue_id == 3
    assert m.flag == 0
    assert m.queue_offset == 7
    assert m.commit_log_offset == 1234
    assert m.sys_flag == sys_flag
    assert m.born_timestamp == BORN_TS
    assert m.born_host == born
    assert m.store_timestamp == STORE_TS
    assert m.store_host == STORE_HOST
    assert m.reconsume_times == 0
    assert m.prepared_transaction_offset == 0
    assert m.body == b"hello"
    assert m.topic == "TopicTest"
    assert m.properties == PROPS
    assert m.tags == "TagA"
    assert m.keys == "k-1 k-2"
    assert m.msg_id == "7F00000100002A9F00000000000004D2"


def test_decode_message_at_offset() -> None:
    """§3A/3C: records decode at a non-zero position inside a larger buffer (e.g. a mapped file)."""
    buf = b"\x00" * 13 + REC_3A + REC_3C + b"\x00" * 7
    assert decode_message(buf, 13).queue_offset == 7
    assert decode_message(memoryview(buf), 13 + 169).born_host == BORN_V6


def test_record_properties_reads_the_golden_properties_only() -> None:
    """§3A/3C: the properties string alone (the SQL92 pull filter's read), at any position."""
    buf = b"\x00" * 13 + REC_3A + REC_3C
    for pos in (13, 13 + 169):
        assert string_to_message_properties(record_properties(buf, pos)) == PROPS
    with pytest.raises(ValueError):
        record_properties(BLANK_8 + bytes(29))


def test_decode_message_rejects_blank_magic() -> None:
    """§3/§4: a record with the blank magic code is not a message."""
    with pytest.raises(ValueError):
        decode_message(BLANK_8 + bytes(29))


@pytest.mark.parametrize(("rec", "size"), [(REC_3A, 169), (REC_3B, 170), (REC_3C, 181)], ids=["3A", "3B", "3C"])
def test_check_message_and_return_size_golden(rec: bytes, size: int) -> None:
    """§3/§5: the dispatch parse of the golden bytes (CRC checked) gives what ConsumeQueue and IndexFile need."""
    req, n, ok = check_message_and_return_size(rec, 0, len(rec), check_crc=True)
    assert ok and n == size
    assert req is not None
    assert req.topic == "TopicTest"
    assert req.queue_id == 3
    assert req.commit_log_offset == 1234
    assert req.msg_size == size
    assert req.tags_code == 2598919
    assert req.store_timestamp == STORE_TS
    assert req.consume_queue_offset == 7
    assert req.keys == "k-1 k-2"
    assert req.uniq_key == UNIQ
    assert req.properties == PROPS


def test_check_message_no_tags_code_zero() -> None:
    """§5: a message without TAGS has tagsCode 0 (and no KEYS / UNIQ_KEY to index)."""
    rec = encode_record(body=b"hello", topic="TopicTest", properties={}, queue_id=3, physical_offset=1234)
    req, n, ok = check_message_and_return_size(rec, 0, len(rec))
    assert ok and req is not None and n == 91 + 5 + 9
    assert (req.tags_code, req.keys, req.uniq_key) == (0, None, None)


def test_check_message_crc_mismatch() -> None:
    """§2/§3A: a corrupted body fails the CRC check; without the check the record still parses."""
    bad = bytearray(REC_3A)
    bad[88] ^= 0x01  # first BODY byte
    assert check_message_and_return_size(bytes(bad), 0, 169, check_crc=True)[2] is False
    assert check_message_and_return_size(bytes(bad), 0, 169, check_crc=False)[1:] == (169, True)


@pytest.mark.parametrize(("rec", "pos"), [(REC_3A, 56), (REC_3B, 56), (REC_3C, 68)], ids=["3A", "3B", "3C"])
def test_pickup_store_timestamp(rec: bytes, pos: int) -> None:
    """§3C: STORETIMESTAMP sits at 56 with an IPv4 born host and at 68 with an IPv6 one."""
    assert rec[pos : pos + 8] == bytes.fromhex("0000018bcfe5687b")
    assert pickup_store_timestamp(rec) == STORE_TS
    assert pickup_store_timestamp(b"\xff" * 5 + rec, 5) == STORE_TS


# -- §4 blank --------------------------------------------------------------------------------


def test_encode_blank_into() -> None:
    """§4: the blank for 37 remaining bytes is ``00000025cbd43194``; the other 29 bytes are left as they were."""
    buf = bytearray(b"\xee" * 60)
    encode_blank_into(buf, 10, 37)
    assert bytes(buf[10:18]) == BLANK_8
    assert buf[:10] == b"\xee" * 10
    assert buf[18:] == b"\xee" * 42


@pytest.mark.parametrize("rest", [bytes(29), b"\xab" * 29], ids=["zeros", "garbage"])
def test_check_message_blank(rest: bytes) -> None:
    """§4: a reader treats the golden blank as end-of-file (size 0, success) without checking the rest."""
    buf = REC_3A + BLANK_8 + rest
    assert check_message_and_return_size(buf, 169, len(buf)) == (None, 0, True)


# -- §7 msgId --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "msg_id"),
    [(1234, "7F00000100002A9F00000000000004D2"), (2**40 + 5, "7F00000100002A9F0000010000000005")],
)
def test_message_id(offset: int, msg_id: str) -> None:
    """§7: store host address + port int + offset long, upper-case hex; and its inverse."""
    assert create_message_id(STORE_HOST, offset) == msg_id
    assert decode_message_id(msg_id) == (STORE_HOST, offset)
    assert decode_message_id(msg_id.lower()) == (STORE_HOST, offset)


def test_message_id_ipv6() -> None:
    """§7: an IPv6 store host gives 28 bytes, 56 hex characters."""
    host: HostAddress = (bytes(15) + b"\x01", 10911)
    msg_id = create_message_id(host, 1234)
    assert len(msg_id) == 56
    assert msg_id.endswith("00002A9F00000000000004D2")
    assert decode_message_id(msg_id) == (host, 1234)


@pytest.mark.parametrize("bad", ["", "7F00000100002A9F00000000000004D", "7F00000100002A9F00000000000004D2" + "00"])
def test_decode_message_id_bad_length(bad: str) -> None:
    """§7: only 32 (IPv4) or 56 (IPv6) hex characters are a msgId."""
    with pytest.raises(ValueError):
        decode_message_id(bad)


# -- properties ------------------------------------------------------------------------------

_prop_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=24)
_properties = st.dictionaries(_prop_text, _prop_text, max_size=6)
# properties that dispatch picks out (TAGS, KEYS, UNIQ_KEY) mixed with arbitrary ones
_record_properties = st.dictionaries(
    st.one_of(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "XTAGS", "TAGSX"]), _prop_text), _prop_text, max_size=6
)


def _truncate_utf8(s: str, limit: int) -> str:
    while len(s.encode()) > limit:
        s = s[:-1]
    return s


_topic = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=127).map(lambda t: _truncate_utf8(t, 127))
_host = st.tuples(
    st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16)), st.integers(0, 65535)
)
_int32 = st.integers(-(2**31), 2**31 - 1)
_uint31 = st.integers(0, 2**31 - 1)
_long = st.integers(-(2**63), 2**63 - 1)
_ulong = st.integers(0, 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(_properties)
def test_properties_round_trip(d: dict[str, str]) -> None:
    """§3 property: ``string_to_message_properties(message_properties_to_string(d)) == d``, also with a trailing sep."""
    s = message_properties_to_string(d)
    assert not s.endswith("\u0002")
    assert string_to_message_properties(s) == d
    assert string_to_message_properties(s + "\u0002") == d


@settings(max_examples=200, deadline=None)
@given(
    topic=_topic,
    body=st.binary(max_size=2048),
    props=_record_properties,
    born_host=_host,
    store_host=_host,
    low_flags=st.sampled_from([0, 0x1, 0x2, 0x4, 0x8, 0xC, 0x3]),
    queue_id=_uint31,
    flag=_int32,
    queue_offset=_ulong,
    physical_offset=_ulong,
    born_ts=_long,
    store_ts=_long,
    reconsume_times=_uint31,
    prepared=_ulong,
)
def test_record_round_trip(
    topic: str,
    body: bytes,
    props: dict[str, str],
    born_host: HostAddress,
    store_host: HostAddress,
    low_flags: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    born_ts: int,
    store_ts: int,
    reconsume_times: int,
    prepared: int,
) -> None:
    """§3 property: encode → ``decode_message`` / dispatch parse gives every field back, IPv4 and IPv6 hosts."""
    sys_flag = low_flags
    if len(born_host[0]) == 16:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store_host[0]) == 16:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    rec = encode_record(
        body=body, topic=topic, properties=props, queue_id=queue_id, flag=flag, queue_offset=queue_offset,
        physical_offset=physical_offset, sys_flag=sys_flag, born_timestamp=born_ts, born_host=born_host,
        store_timestamp=store_ts, store_host=store_host, reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared,
    )  # fmt: skip
    plen = len(message_properties_to_string(props).encode())
    assert len(rec) == cal_msg_length(sys_flag, len(body), len(topic.encode()), plen)
    assert struct.unpack_from(">iI", rec) == (len(rec), 0xDAA320A7)
    m = decode_message(rec)
    assert (m.store_size, m.body_crc, m.queue_id, m.flag) == (len(rec), crc32(body), queue_id, flag)
    assert (m.queue_offset, m.commit_log_offset, m.sys_flag) == (queue_offset, physical_offset, sys_flag)
    assert (m.born_timestamp, m.born_host, m.store_timestamp, m.store_host) == (
        born_ts,
        born_host,
        store_ts,
        store_host,
    )
    assert (m.reconsume_times, m.prepared_transaction_offset) == (reconsume_times, prepared)
    assert (m.body, m.topic, m.properties) == (body, topic, props)
    assert m.msg_id == create_message_id(store_host, physical_offset)
    assert pickup_store_timestamp(rec) == store_ts
    req, n, ok = check_message_and_return_size(rec, 0, len(rec), check_crc=True)
    assert ok and n == len(rec) and req is not None
    assert (req.topic, req.queue_id, req.commit_log_offset, req.store_timestamp) == (
        topic,
        queue_id,
        physical_offset,
        store_ts,
    )
    assert (req.msg_size, req.consume_queue_offset, req.sys_flag) == (len(rec), queue_offset, sys_flag)
    assert req.tags_code == tags_code(props.get("TAGS", ""))
    assert (req.keys, req.uniq_key) == (props.get("KEYS"), props.get("UNIQ_KEY"))
    assert req.properties == props


# -- the client's lazy decoder (pumice.client.message.decode_messages) on the same vectors ----


@pytest.mark.parametrize(
    "rec, sys_flag, born_host",
    [(REC_3A, 0, "192.168.0.10:54321"), (REC_3B, 0, "192.168.0.10:54321"), (REC_3C, 0x10, "[::1]:54321")],
)
def test_client_decode_messages_golden(rec: bytes, sys_flag: int, born_host: str) -> None:
    from pumice.client.message import decode_messages

    msgs = decode_messages(rec + REC_3A, broker_name="b", extra_properties={"MIN_OFFSET": "0", "MAX_OFFSET": "8"})
    assert len(msgs) == 2
    m = msgs[0]
    assert (m.topic, m.body, m.queue_id, m.flag) == ("TopicTest", b"hello", 3, 0)
    assert (m.queue_offset, m.commit_log_offset, m.sys_flag) == (7, 1234, sys_flag)
    assert (m.born_timestamp, m.store_timestamp, m.reconsume_times) == (1700000000000, 1700000000123, 0)
    assert (m.body_crc, m.store_size, m.prepared_transaction_offset) == (907060870, len(rec), 0)
    assert (m.born_host, m.store_host, m.broker_name) == (born_host, "127.0.0.1:10911", "b")
    assert m.offset_msg_id == "7F00000100002A9F00000000000004D2"  # §7
    assert m.msg_id == "7F00000100002A9F0000000000000001"  # the UNIQ_KEY
    assert (m.tags, m.keys) == ("TagA", ["k-1", "k-2"])
    assert m.properties == {
        "KEYS": "k-1 k-2", "TAGS": "TagA", "UNIQ_KEY": "7F00000100002A9F0000000000000001",
        "MIN_OFFSET": "0", "MAX_OFFSET": "8",
    }  # fmt: skip
    assert msgs[1].store_size == 169 and msgs[1].body == b"hello"


def test_client_decode_messages_rejects_bad_records() -> None:
    from pumice.client.message import decode_messages

    assert decode_messages(b"") == []
    for bad, why in [
        (REC_3A[:-1], "truncated"),  # TOTALSIZE past the end
        (REC_3A + REC_3A[:50], "truncated"),  # a second record cut inside its header
        (REC_3A[:4] + b"\xcb\xd4\x31\x94" + REC_3A[8:], "magic"),  # a blank record's magic
        (struct.pack(">i", 100) + REC_3A[4:100], "shorter"),  # TOTALSIZE ends inside the topic
        (REC_3A[:84] + struct.pack(">i", 200) + REC_3A[88:], "shorter"),  # BODYLENGTH past the record
    ]:
        with pytest.raises(ValueError, match=why):
            decode_messages(bad)


def test_client_message_keeps_what_is_set_on_it() -> None:
    from pumice.client.message import decode_messages

    (m,) = decode_messages(REC_3A)
    assert m.tags == "TagA"  # properties decoded now, and kept
    m.properties["RECONSUME_TIME"] = "1"
    m.reconsume_times = 2
    m.topic = "Other"
    assert m.properties["RECONSUME_TIME"] == "1" and m.reconsume_times == 2 and m.topic == "Other"
    assert "TopicTest" not in repr(m) and "queue_offset=7" in repr(m)


def test_check_kinds_of_a_record_a_blank_a_bad_body_and_zeros() -> None:
    assert check_kind(check_message_and_return_size(REC_3A, 0, len(REC_3A))) is CheckKind.VALID
    assert check_kind(check_message_and_return_size(BLANK_8, 0, len(BLANK_8))) is CheckKind.BLANK
    # TOTALSIZE and magic sane, the body length past the record: skip the record's size
    bad = bytearray(REC_3A)
    struct.pack_into(">i", bad, 84, len(REC_3A))
    result = check_message_and_return_size(bytes(bad), 0, len(bad))
    assert check_kind(result) is CheckKind.SKIP and result[1] == len(REC_3A)
    assert check_kind(check_message_and_return_size(b"\x00" * 200, 0, 200)) is CheckKind.END
