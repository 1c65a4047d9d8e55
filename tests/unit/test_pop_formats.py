"""POP's wire and disk formats (RocketMQ 5.3.3's ExtraInfoUtil, PopCheckPoint, AckMsg, BatchAck):
the expected strings are written from 5.3.3's sources (fastjson writes fields sorted by name,
nulls left out; a BitSet as the base64 of ``toByteArray()``), not from Pumice's encoder."""

from __future__ import annotations

import pytest

from pumice.broker.ack_message_processor import bit_set_offsets
from pumice.common import extra_info_util as eiu
from pumice.common.pop_check_point import AckMsg, PopCheckPoint


def test_extra_info_as_5_3_3_builds_and_splits_it() -> None:
    handle = eiu.build_extra_info(10, 1700000000000, 60000, 3, "%RETRY%G_T", "broker-a", 0, 12)
    assert handle == "10 1700000000000 60000 3 1 broker-a 0 12"
    info = eiu.split(handle)
    assert (info.ck_queue_offset, info.pop_time, info.invisible_time, info.revive_qid) == (10, 1700000000000, 60000, 3)
    assert (info.retry, info.broker_name, info.queue_id, info.queue_offset) == ("1", "broker-a", 0, 12)
    assert eiu.real_topic("T", "G", info.retry) == "%RETRY%G_T"
    assert eiu.real_topic("T", "G", "2") == "%RETRY%G+T" and eiu.retry_flag("%RETRY%G+T") == "2"
    assert eiu.split("1 2 3 999 0 b 4").is_order and eiu.split("1 2 3 999 0 b 4").queue_offset == -1
    assert eiu.parse_normal_topic("%RETRY%G_T", "G") == "T" and eiu.parse_normal_topic("T", "G") == "T"


@pytest.mark.parametrize(
    "bad", [None, "", "1 2 3", "x 2 3 4 0 b 0 1", "1 2 3 4 7 b 0 1", "1 2 3 4 0 b q 1", "1 2 3 4 0 b 0 z"]
)
def test_a_bad_handle_is_a_value_error_naming_what(bad: str | None) -> None:
    with pytest.raises(ValueError):
        eiu.split(bad)


def test_the_header_infos() -> None:
    start = ";".join([eiu.start_offset_entry("T", 3, 10), eiu.start_offset_entry("%RETRY%G_T", 0, 4)])
    assert start == "0 3 10;1 0 4"
    assert eiu.parse_start_offset_info(start) == {"0@3": 10, "1@0": 4}
    msgs = eiu.msg_offset_entry("T", 3, [10, 11, 13])
    assert msgs == "0 3 10,11,13" and eiu.parse_msg_offset_info(msgs) == {"0@3": [10, 11, 13]}
    with pytest.raises(ValueError):
        eiu.parse_start_offset_info("0 3 10;0 3 11")


def test_checkpoint_json_as_fastjson_writes_it() -> None:
    ck = PopCheckPoint(start_offset=10, pop_time=1000, invisible_time=500, num=2, queue_id=1, topic="T", cid="G",
                       broker_name="b", queue_offset_diff=[0, 2])  # fmt: skip
    assert ck.to_json() == (
        b'{"bm":0,"bn":"b","c":"G","d":[0,2],"it":500,"n":2,"pt":1000,"q":1,"reviveTime":1500,"ro":0,"so":10,"t":"T"}'
    )
    back = PopCheckPoint.from_json(ck.to_json())
    assert (
        back == ck and back.index_of_ack(12) == 1 and back.index_of_ack(11) == -1 and back.ack_offset_by_index(1) == 12
    )
    # an old checkpoint without "d": consecutive offsets
    old = PopCheckPoint.from_json(b'{"so":5,"n":3,"pt":1,"it":1,"q":0,"t":"T","c":"G"}')
    assert old.index_of_ack(7) == 2 and old.index_of_ack(8) == -1 and old.ack_offset_by_index(2) == 7


def test_ack_and_batch_ack_json() -> None:
    ack = AckMsg([11], 10, "G", "T", 1, 1000, "b")
    assert ack.to_json() == b'{"ao":11,"bn":"b","c":"G","pt":1000,"q":1,"so":10,"t":"T"}'
    batch = AckMsg([10, 12], 10, "G", "T", 1, 1000, "b", batch=True)
    assert batch.to_json() == b'{"ao":-1,"aol":[10,12],"bn":"b","c":"G","pt":1000,"q":1,"so":10,"t":"T"}'
    assert AckMsg.from_json(batch.to_json(), batch=True) == batch
    assert AckMsg.from_json(b'{"ackOffset":3,"startOffset":1,"consumerGroup":"G","topic":"T","queueId":0,"popTime":9}',
                            batch=False).ack_offsets == [3]  # fmt: skip
    assert ack.merge_key("x") == PopCheckPoint(10, 1000, 5, 1, 1, "T", "G", "b").merge_key()


def test_batch_ack_bit_set_as_java_writes_it() -> None:
    # BitSet {0, 2, 9}.toByteArray() = [0x05, 0x02], fastjson: base64 "BQI="
    assert bit_set_offsets("BQI=") == [0, 2, 9]
    assert bit_set_offsets([5, 2]) == [0, 2, 9]
    assert bit_set_offsets(None) == []
    with pytest.raises(ValueError):
        bit_set_offsets("!!")
