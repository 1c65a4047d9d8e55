"""POP's records in the revive topic (RocketMQ 5's ``PopCheckPoint``, ``AckMsg``, ``BatchAckMsg``,
``PopAckConstants``).

Every pop writes a checkpoint, every ack an ack record, as messages of the revive topic
``rmq_sys_REVIVE_LOG_<cluster>`` (``reviveQueueNum`` queues), on the revive queue the
handle names. The message's tag says what its body is; the body is fastjson's JSON (keys
sorted, nulls left out):

========  =========  ==============================================================
tag       class      body keys
========  =========  ==============================================================
``ck``    checkpoint ``bm`` acked bits, ``bn`` brokerName, ``c`` group, ``d`` each message's
                     offset − ``so``, ``it`` invisibleTime, ``n`` count, ``pt`` popTime,
                     ``q`` queueId, ``reviveTime`` (pt + it, a getter fastjson writes),
                     ``ro`` revive offset, ``rp`` re-put times (absent: 0), ``so`` start
                     offset, ``t`` topic (the retry topic for a retry message)
``ack``   ack        ``ao`` acked queue offset, ``bn``, ``c``, ``pt``, ``q``, ``so``, ``t``
``bAck``  batch ack  ``ao`` −1, ``aol`` the acked queue offsets, and the ack's other keys
========  =========  ==============================================================

An ack belongs to the checkpoint with the same topic, group, queueId, start offset, popTime
and brokerName (``merge_key``). The revive progress is the consumer offset of the system group
``CID_RMQ_SYS_REVIVE_GROUP`` on each revive queue: the last revive-queue offset whose
checkpoints are all settled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from pumice.common.mix_all import CID_RMQ_SYS_PREFIX, SYSTEM_TOPIC_PREFIX

REVIVE_GROUP = CID_RMQ_SYS_PREFIX + "REVIVE_GROUP"
REVIVE_TOPIC_PREFIX = SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
ACK_TIME_INTERVAL_MS = 1000  # PopAckConstants.ackTimeInterval
RETRY_QUEUE_NUM = 1  # a POP retry topic's queues (PopAckConstants.retryQueueNum)
PROPERTY_POP_CK = "POP_CK"  # MessageConst: a retry message's handle, set by the broker
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"  # MessageConst: the first checkpoint's popTime


def build_cluster_revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def _dumps(d: dict[str, Any]) -> bytes:
    return orjson.dumps({k: v for k, v in d.items() if v is not None}, option=orjson.OPT_SORT_KEYS)


@dataclass(slots=True)
class PopCheckPoint:
    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    queue_id: int
    topic: str
    cid: str
    broker_name: str | None = None
    bit_map: int = 0
    revive_offset: int = 0
    queue_offset_diff: list[int] = field(default_factory=list)
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def merge_key(self) -> str:
        return f"{self.topic}{self.cid}{self.queue_id}{self.start_offset}{self.pop_time}{self.broker_name}"

    def index_of_ack(self, ack_offset: int) -> int:
        if ack_offset < self.start_offset:
            return -1
        if not self.queue_offset_diff:  # a checkpoint of an old version: consecutive offsets
            i = ack_offset - self.start_offset
            return i if i < self.num else -1
        try:
            return self.queue_offset_diff.index(ack_offset - self.start_offset)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def to_json(self) -> bytes:
        return _dumps({
            "so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time, "bm": self.bit_map,
            "n": self.num, "q": self.queue_id, "t": self.topic, "c": self.cid, "ro": self.revive_offset,
            "d": self.queue_offset_diff, "bn": self.broker_name, "rp": self.re_put_times,
            "reviveTime": self.revive_time,
        })  # fmt: skip

    @classmethod
    def from_json(cls, raw: bytes | str) -> PopCheckPoint:
        d = orjson.loads(raw)
        rp = d.get("rp")
        return cls(
            start_offset=int(d.get("so", 0)), pop_time=int(d.get("pt", 0)), invisible_time=int(d.get("it", 0)),
            num=int(d.get("n", 0)), queue_id=int(d.get("q", 0)), topic=d.get("t"), cid=d.get("c") or d.get("cId"),
            broker_name=d.get("bn"), bit_map=int(d.get("bm", 0)), revive_offset=int(d.get("ro", 0)),
            queue_offset_diff=[int(x) for x in d.get("d") or []], re_put_times=None if rp is None else str(rp),
        )  # fmt: skip


@dataclass(slots=True)
class AckMsg:
    """An ack (``ack_offsets`` holds one offset) or a batch ack (``batch``: several)."""

    ack_offsets: list[int]
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str | None = None
    batch: bool = False

    def merge_key(self, default_broker_name: str) -> str:
        bn = self.broker_name or default_broker_name
        return f"{self.topic}{self.consumer_group}{self.queue_id}{self.start_offset}{self.pop_time}{bn}"

    @property
    def tag(self) -> str:
        return BATCH_ACK_TAG if self.batch else ACK_TAG

    def to_json(self) -> bytes:
        d: dict[str, Any] = {
            "so": self.start_offset, "c": self.consumer_group, "t": self.topic, "q": self.queue_id,
            "pt": self.pop_time, "bn": self.broker_name,
        }  # fmt: skip
        if self.batch:
            d["ao"] = -1
            d["aol"] = self.ack_offsets
        else:
            d["ao"] = self.ack_offsets[0]
        return _dumps(d)

    @classmethod
    def from_json(cls, raw: bytes | str, batch: bool) -> AckMsg:
        def pick(short: str, long: str) -> Any:
            return d[short] if short in d else d.get(long)

        d = orjson.loads(raw)
        if batch:
            offsets = [int(x) for x in pick("aol", "ackOffsetList") or []]
        else:
            offsets = [int(pick("ao", "ackOffset"))]
        return cls(
            ack_offsets=offsets, start_offset=int(pick("so", "startOffset")),
            consumer_group=pick("c", "consumerGroup"), topic=pick("t", "topic"), queue_id=int(pick("q", "queueId")),
            pop_time=int(pick("pt", "popTime")), broker_name=pick("bn", "brokerName"), batch=batch,
        )  # fmt: skip
