"""pumice.client wire encodings: UNIQ_KEY layout, batch bodies, compression, properties, routes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import zlib

import pytest

from pumice.client.exceptions import MQBrokerError, MQClientError
from pumice.client.message import COMPRESSED_FLAG, Message, MessageQueue, decode_messages
from pumice.client.message_batch import encode_batch
from pumice.client.message_id import UniqKeyGenerator, month_start_ms, parse_uniq_key
from pumice.client.producer import check_message, compress_body
from pumice.client.route import ClusterInfo, TopicRouteData
from pumice.client.subscription import build_subscription
from pumice.common.java_hash import java_string_hash
from pumice.common.message_decoder import encode_record


def test_uniq_key_layout_is_ip_pid_hash_time_counter() -> None:
    gen = UniqKeyGenerator(ip=bytes([10, 1, 2, 3]), pid=0x12345, instance_hash=0xDEADBEEF)
    now = int(dt.datetime(2024, 3, 5, 6, 7, 8).timestamp() * 1000) + 9
    first, second = gen.next_id(now), gen.next_id(now)
    in_month = now - int(dt.datetime(2024, 3, 1).timestamp() * 1000)
    assert first == f"0A0102032345DEADBEEF{in_month:08X}0000"
    assert second[:-4] == first[:-4] and second[-4:] == "0001"
    info = parse_uniq_key(second)
    assert (info.ip, info.pid, info.instance_hash, info.time_in_month_ms, info.counter) == (
        "10.1.2.3",
        0x2345,
        0xDEADBEEF,
        in_month,
        1,
    )
    assert info.nearly_time_ms(now + 1000) == now


def test_uniq_key_counter_wraps_and_ids_are_unique() -> None:
    gen = UniqKeyGenerator(ip=b"\x7f\x00\x00\x01", pid=1, instance_hash=1)
    ids = [gen.next_id(1_700_000_000_000) for _ in range(65537)]
    assert ids[65536][-4:] == "0000" and len(set(ids[:65536])) == 65536
    assert all(len(i) == 32 and i == i.upper() for i in ids[:3])
    with pytest.raises(ValueError):
        parse_uniq_key("ABC")


def test_uniq_key_time_restarts_at_month_start() -> None:
    start = month_start_ms(int(dt.datetime(2024, 2, 29, 23, 0).timestamp() * 1000))
    assert start == int(dt.datetime(2024, 2, 1).timestamp() * 1000)
    gen = UniqKeyGenerator(ip=b"\x01\x02\x03\x04", pid=2, instance_hash=3)
    march = int(dt.datetime(2024, 3, 1, 0, 0, 1).timestamp() * 1000)
    assert parse_uniq_key(gen.next_id(march)).time_in_month_ms == 1000


def test_batch_body_matches_hand_written_bytes() -> None:
    msgs = [
        Message("T", b"ab", flag=3, wait_store_msg_ok=True),
        Message("T", b"", properties={"k": "v"}, wait_store_msg_ok=False),
    ]
    body = encode_batch(msgs, [{"WAIT": "true"}, {"k": "v", "WAIT": "false"}])
    expected = (
        bytes.fromhex("0000002100000000000000000000000300000002")
        + b"ab"
        + bytes.fromhex("0009")
        + b"WAIT\x01true"
        + bytes.fromhex("0000002400000000000000000000000000000000")
        + bytes.fromhex("000e")
        + b"k\x01v\x02WAIT\x01false"
    )
    assert body == expected
    # without explicit properties each message's own wire properties are used
    assert encode_batch([Message("T", b"x", tags="A")]).endswith(b"\x00\x10TAGS\x01A\x02WAIT\x01true")


def test_batch_rules() -> None:
    with pytest.raises(MQClientError, match="same topic"):
        encode_batch([Message("A", b"1"), Message("B", b"2")])
    with pytest.raises(MQClientError, match="delay"):
        encode_batch([Message("A", b"1", delay_time_level=2)])
    with pytest.raises(MQClientError, match="at least one"):
        encode_batch([])


def test_compression_sets_flag_only_above_threshold() -> None:
    small = b"a" * 4096
    assert compress_body(small, 4096) == (small, 0)
    big = b"abcdefgh" * 600
    body, flag = compress_body(big, 4096)
    assert flag == COMPRESSED_FLAG and len(body) < len(big) and zlib.decompress(body) == big


def test_decode_inflates_compressed_records_and_keeps_sys_flag() -> None:
    raw = b"payload " * 1000
    record = encode_record(
        body=zlib.compress(raw),
        topic="T",
        properties={"UNIQ_KEY": "U1", "TAGS": "A"},
        sys_flag=COMPRESSED_FLAG,
        queue_offset=7,
        physical_offset=0x88,
        store_host=(b"\x7f\x00\x00\x01", 10911),
    )
    plain = encode_record(body=b"p2", topic="T", properties={"KEYS": "a b"}, queue_offset=8)
    m1, m2 = decode_messages(record + plain)
    assert m1.body == raw and m1.sys_flag & COMPRESSED_FLAG and m1.queue_offset == 7
    assert m1.msg_id == "U1" and m1.offset_msg_id == "7F00000100002A9F0000000000000088"
    assert m1.store_host == "127.0.0.1:10911" and m1.tags == "A"
    assert m2.body == b"p2" and m2.keys == ["a", "b"] and m2.msg_id == m2.offset_msg_id
    with pytest.raises(ValueError):
        decode_messages(record[:-3])


def test_message_wire_properties() -> None:
    m = Message("T", b"x", tags="TagA", keys=["k1", "k2"], properties={"color": "red"}, delay_time_level=3)
    assert m.wire_properties() == {"color": "red", "TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3", "WAIT": "true"}
    assert Message("T", b"x", keys="a  b").keys == ["a", "b"]
    with pytest.raises(ValueError):
        m.put_user_property("UNIQ_KEY", "x")


def test_message_checks() -> None:
    check_message(Message("Ok_Topic-1", b"x"), 10)
    for bad, why in [(Message("bad topic", b"x"), "characters"), (Message("T", b""), "empty"),
                     (Message("T", b"x" * 11), "max_message_size"), (Message("TBW102", b"x"), "reserved"),
                     (Message("T" * 128, b"x"), "longer")]:  # fmt: skip
        with pytest.raises(MQClientError, match=why):
            check_message(bad, 10)


def test_route_parsing_accepts_unquoted_keys_and_derives_queues() -> None:
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"h1:1",1:"h1:2"},"brokerName":"b1","cluster":"C"},'
        b'{"brokerAddrs":{1:"h2:2"},"brokerName":"b2","cluster":"C"}],'
        b'"queueDatas":[{"brokerName":"b1","perm":6,"readQueueNums":2,"writeQueueNums":3,"topicSysFlag":0},'
        b'{"brokerName":"b2","perm":6,"readQueueNums":1,"writeQueueNums":1,"topicSysFlag":0}]}'
    )
    route = TopicRouteData.decode(body)
    assert route.broker("b1").broker_addrs == {0: "h1:1", 1: "h1:2"}  # type: ignore[union-attr]
    # b2 has no master: no publish queues there, but it can be read from
    assert route.publish_queues("T") == [MessageQueue("T", "b1", i) for i in range(3)]
    assert route.subscribe_queues("T") == [MessageQueue("T", "b1", 0), MessageQueue("T", "b1", 1),
                                           MessageQueue("T", "b2", 0)]  # fmt: skip
    route = dataclasses.replace(route, order_topic_conf="b2:2;b1:1")  # routes are replaced, never changed
    assert route.publish_queues("T") == [MessageQueue("T", "b2", 0), MessageQueue("T", "b2", 1),
                                         MessageQueue("T", "b1", 0)]  # fmt: skip
    info = ClusterInfo.decode(b'{"brokerAddrTable":{"b1":{"brokerAddrs":{"0":"h1:1"},"brokerName":"b1",'
                              b'"cluster":"C"}},"clusterAddrTable":{"C":["b1","bx"]}}')  # fmt: skip
    assert info.master_addrs("C") == ["h1:1"] and info.master_addrs("nope") == []


def test_subscription_expression_and_client_side_filter() -> None:
    sub = build_subscription("T", " TagA || TagB ||")
    assert sub.tags_set == ("TagA", "TagB") and sub.code_set == (java_string_hash("TagA"), java_string_hash("TagB"))
    assert sub.matches("TagB") and not sub.matches("TagC") and not sub.matches(None)
    assert build_subscription("T", "*").matches(None) and build_subscription("T", "A || *").matches_all


def test_broker_error_str_names_the_code() -> None:
    e = MQBrokerError(17, "No topic route info in name server for the topic: X")
    assert str(e) == "TOPIC_NOT_EXIST (17): No topic route info in name server for the topic: X"
    assert e.code == 17 and e.code_name == "TOPIC_NOT_EXIST"
    assert str(MQBrokerError(999, "x")) == "UNKNOWN (999): x"
