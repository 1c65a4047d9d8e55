"""Pure logic of the push consumer: process queues, allocation, flow control, local offsets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from pumice.client import (
    AsyncPushConsumer,
    ConsumeStatus,
    MessageExt,
    MessageQueue,
    MQClientError,
    allocate_message_queue_averagely,
    allocate_message_queue_averagely_by_circle,
)
from pumice.client.offset_store import LocalFileOffsetStore, ReadOffsetType, default_offset_file
from pumice.client.process_queue import ProcessQueue, flow_control
from pumice.client.push_consumer import reset_retry_topic

MQ = MessageQueue("T", "b", 0)


def msg(offset: int, body: bytes = b"x", topic: str = "T", props: dict[str, str] | None = None) -> MessageExt:
    return MessageExt(
        topic=topic, body=body, properties=dict(props or {}), queue_id=0, queue_offset=offset, commit_log_offset=0,
        sys_flag=0, flag=0, born_timestamp=0, born_host="", store_timestamp=0, store_host="", reconsume_times=0,
        prepared_transaction_offset=0, body_crc=0, store_size=0, msg_id=f"id{offset}", offset_msg_id="",
    )  # fmt: skip


def test_commit_offset_is_the_smallest_in_flight() -> None:
    pq = ProcessQueue(MQ, 10)
    assert pq.commit_offset() == -1 and pq.remove_messages([msg(1)]) == -1
    ms = [msg(o, b"abc") for o in range(10, 15)]
    assert pq.put_messages(ms) is True  # first put: a consume request is due
    assert pq.put_messages([msg(15)]) is False  # one is already scheduled
    assert (pq.msg_count, pq.msg_size, pq.max_span) == (6, 16, 5)
    # finishing out of order: the offset never passes an unfinished message
    assert pq.remove_messages([ms[2], ms[3]]) == 10
    assert pq.remove_messages([ms[0]]) == 11
    assert pq.remove_messages([ms[1]]) == 14
    assert pq.in_flight_offsets() == [14, 15]
    assert pq.remove_messages([ms[4], msg(15)]) == 16  # empty: one past the largest ever held
    assert pq.commit_offset() == 16 and pq.msg_size == 0
    pq.put_messages([msg(15)])  # held again (a re-pull) is fine
    pq.put_messages([msg(15)])  # duplicates are ignored
    assert pq.msg_count == 1 and pq.commit_offset() == 15


def test_orderly_take_commit_and_consume_again() -> None:
    pq = ProcessQueue(MQ)
    pq.put_messages([msg(o) for o in range(5)])
    assert pq.consuming
    first = pq.take_messages(2)
    assert [m.queue_offset for m in first] == [0, 1] and pq.consuming_count == 2
    pq.make_messages_to_consume_again(first)  # suspended: the same messages come again
    again = pq.take_messages(2)
    assert [m.queue_offset for m in again] == [0, 1]
    assert pq.commit() == 2
    assert pq.commit() == -1  # nothing taken
    rest = pq.take_messages(10)
    assert [m.queue_offset for m in rest] == [2, 3, 4]
    assert pq.commit_offset() == 2  # taken but not committed: still in flight
    assert pq.commit() == 5
    assert pq.take_messages(1) == [] and not pq.consuming  # the next put schedules a request again
    assert pq.put_messages([msg(5)]) is True


def test_orderly_partial_dlq_keeps_the_offset_at_the_retried_message() -> None:
    pq = ProcessQueue(MQ)
    pq.put_messages([msg(o) for o in range(4)])
    taken = pq.take_messages(2)
    pq.make_messages_to_consume_again([taken[1]])  # offset 0 went to the DLQ, offset 1 is retried
    assert pq.commit() == 1
    assert [m.queue_offset for m in pq.take_messages(1)] == [1]


def test_lock_and_pull_expiry() -> None:
    pq = ProcessQueue(MQ)
    pq.last_lock_time = 100.0
    assert not pq.is_lock_expired(now=129.0) and pq.is_lock_expired(now=131.0)
    pq.last_pull_time = 100.0
    assert not pq.is_pull_expired(now=200.0) and pq.is_pull_expired(now=221.0)


def test_flow_control_decisions() -> None:
    pq = ProcessQueue(MQ)
    assert flow_control(pq) is None
    pq.put_messages([msg(o, b"12345") for o in range(11)])
    assert flow_control(pq, threshold_count=11) is None
    assert "pullThresholdForQueue" in (flow_control(pq, threshold_count=10) or "")
    assert "pullThresholdSizeForQueue" in (flow_control(pq, threshold_size_bytes=54) or "")
    assert flow_control(pq, threshold_size_bytes=55) is None
    pq.put_messages([msg(3000)])
    assert "consumeConcurrentlyMaxSpan" in (flow_control(pq) or "")
    assert flow_control(pq, max_span=None) is None  # orderly: no span limit


def mqs(n: int, topic: str = "T") -> list[MessageQueue]:
    return [MessageQueue(topic, "b", i) for i in range(n)]


@pytest.mark.parametrize("n_mqs,n_cids", [(8, 3), (4, 4), (3, 5), (16, 2), (1, 1), (7, 1)])
def test_allocate_strategies_cover_every_queue_once(n_mqs: int, n_cids: int) -> None:
    cids = [f"10.0.0.{i}@{i}" for i in range(n_cids)]
    for strategy in (allocate_message_queue_averagely, allocate_message_queue_averagely_by_circle):
        parts = [strategy("G", c, list(reversed(mqs(n_mqs))), cids) for c in cids]
        flat = [mq for p in parts for mq in p]
        assert sorted(flat) == mqs(n_mqs), strategy.__name__
        assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_allocate_averagely_is_contiguous_and_by_circle_interleaves() -> None:
    cids = ["a", "b", "c"]
    assert [q.queue_id for q in allocate_message_queue_averagely("G", "a", mqs(8), cids)] == [0, 1, 2]
    assert [q.queue_id for q in allocate_message_queue_averagely("G", "b", mqs(8), cids)] == [3, 4, 5]
    assert [q.queue_id for q in allocate_message_queue_averagely("G", "c", mqs(8), cids)] == [6, 7]
    assert [q.queue_id for q in allocate_message_queue_averagely_by_circle("G", "b", mqs(8), cids)] == [1, 4, 7]
    assert allocate_message_queue_averagely("G", "z", mqs(8), cids) == []
    assert allocate_message_queue_averagely("G", "a", [], cids) == []


def test_local_file_offset_store_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "o" / "offsets.json"

    async def main() -> None:
        s = LocalFileOffsetStore("G", "1.2.3.4@x", path)
        await s.load()
        assert await s.read_offset(MQ, ReadOffsetType.STORE) == -1
        s.update_offset(MQ, 7)
        s.update_offset(MQ, 5, increase_only=True)
        assert await s.read_offset(MQ, ReadOffsetType.MEMORY) == 7
        s.update_offset(MessageQueue("%RETRY%G", "b", 0), 2)
        await s.persist_all([MQ])
        data = orjson.loads(path.read_bytes())
        key = orjson.dumps({"topic": "T", "brokerName": "b", "queueId": 0}).decode()
        assert data["offsetTable"][key] == 7
        s.update_offset(MQ, 9)
        await s.persist_all([MQ])
        assert path.with_name("offsets.json.bak").exists()
        s2 = LocalFileOffsetStore("G", "1.2.3.4@x", path)
        await s2.load()
        assert await s2.read_offset(MQ, ReadOffsetType.MEMORY) == 9
        assert await s2.read_offset(MessageQueue("%RETRY%G", "b", 0)) == 2
        path.write_text("{not json")  # a torn file: the backup is read
        s3 = LocalFileOffsetStore("G", "1.2.3.4@x", path)
        await s3.load()
        assert await s3.read_offset(MQ, ReadOffsetType.MEMORY) == 7

    asyncio.run(main())
    assert default_offset_file("1.2.3.4@x", "G") == Path.home() / ".pumice/offsets/1.2.3.4@x/G/offsets.json"


def test_retry_topic_reset_and_constructor_checks() -> None:
    m = msg(0, topic="%RETRY%G", props={"RETRY_TOPIC": "T"})
    other = msg(1, topic="%RETRY%H", props={"RETRY_TOPIC": "T"})
    reset_retry_topic([m, other], "G")
    assert m.topic == "T" and other.topic == "%RETRY%H"
    with pytest.raises(MQClientError):
        AsyncPushConsumer("G", "127.0.0.1:1", pull_suspend_s=15, pull_timeout_when_suspend_s=15)
    c = AsyncPushConsumer("G", "127.0.0.1:1")
    assert c.effective_max_reconsume_times == 16
    c.register_message_listener_orderly(lambda msgs, ctx: ConsumeStatus.SUCCESS)
    assert c.orderly and c.effective_max_reconsume_times == 2**31 - 1
    assert ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT is ConsumeStatus.RECONSUME_LATER
    with pytest.raises(MQClientError):
        c.subscribe("%RETRY%G")
