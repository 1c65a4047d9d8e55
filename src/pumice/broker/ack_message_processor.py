"""AckMessageProcessor: ACK_MESSAGE (200051) and BATCH_ACK_MESSAGE (200151), RocketMQ 5's acks of popped messages.

An ack is a record in the revive queue of the message's checkpoint (``pop_revive_log.py``):
the revive service then leaves that message out when the invisible time ends. The answer
goes out once the record is stored as the store's flush says.

ACK_MESSAGE's header (AckMessageRequestHeader): consumerGroup, topic (the retry topic for a
retry message), queueId, extraInfo (the handle), offset, all required.

BATCH_ACK_MESSAGE's body (BatchAckMessageRequestBody, JSON): ``brokerName`` and ``acks``, each
a BatchAck:

=====  =============  ============================================================
key    field          meaning
=====  =============  ============================================================
c      consumerGroup
t      topic          the topic (never its retry topic: ``r`` says which)
r      retry          ``0``, ``1`` or ``2`` (extra_info_util.py)
so     startOffset    the checkpoint's start offset
q      queueId
rq     reviveQueueId
pt     popTime
it     invisibleTime
b      bitSet         Java's ``BitSet.toByteArray()`` in base64 (bit i: offset so + i)
=====  =============  ============================================================

=========================================  =================  ===================================
condition (ACK_MESSAGE)                    code               remark (5.3.3's)
=========================================  =================  ===================================
no such topic                              TOPIC_NOT_EXIST    topic[t] not exist, apply first
                                                              please!
queueId < 0 or ≥ readQueueNums             MESSAGE_ILLEGAL    queueId[q] is illegal, …
offset outside the queue's min..max        NO_MESSAGE         offset is illegal, key:t@q,
                                                              commit:o, store:min~max
a handle that does not parse               SYSTEM_ERROR       what is wrong with it
a handle's reviveQid not a revive queue    MESSAGE_ILLEGAL    (Pumice: 5.3.3 writes the record to
                                                              a queue nothing reads)
an orderly handle's offset not in its       MESSAGE_ILLEGAL    offset is illegal, key:t@g@q, old:…,
batch                                                         commit:…, next:-1, …
an expired handle (already revived)        SUCCESS            (the record finds no checkpoint)
the ack record not stored (a full disk)    SYSTEM_ERROR       (Pumice: 5.3.3 logs it, answers
                                                              SUCCESS)
=========================================  =================  ===================================

A batch with no acks is NO_MESSAGE; a batch ack's offsets outside its queue are skipped, as
5.3.3 skips them. An orderly handle (reviveQid 999) writes no record: it marks the message in
the queue's batch (ConsumerOrderInfoManager) and moves the group's offset to the first message
not acked, then wakes the pops parked on the topic.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from typing import Any

import orjson

from pumice.broker.consumer_order_info_manager import ConsumerOrderInfoManager
from pumice.broker.pop_revive_log import ReviveLog
from pumice.common import extra_info_util as eiu
from pumice.common.pop_check_point import AckMsg
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_api import MessageStore
from pumice.store.put_message_result import PutMessageResult

log = logging.getLogger(__name__)


def bit_set_offsets(value: Any) -> list[int]:
    """The bit numbers a fastjson-written ``BitSet`` holds (base64 of its little-endian bytes,
    or a list of byte values)."""
    if value is None:
        return []
    if isinstance(value, str):
        raw = base64.b64decode(value, validate=True)
    elif isinstance(value, list):
        raw = bytes(b & 0xFF for b in value)
    else:
        raise ValueError(f"bitSet {value!r} is neither base64 nor a byte list")
    n = int.from_bytes(raw, "little")
    return [i for i in range(n.bit_length()) if n >> i & 1]


def check_queue(topics: Any, topic: str, queue_id: int, remote: str) -> tuple[int, str] | None:
    """TOPIC_NOT_EXIST / MESSAGE_ILLEGAL for an ack or a change of invisible time, or None."""
    tc = topics.select_topic_config(topic)
    if tc is None:
        return ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
    if queue_id < 0 or queue_id >= tc.read_queue_nums:
        return ResponseCode.MESSAGE_ILLEGAL, (
            f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}] "
            f"consumer:[{remote}]"
        )
    return None


def check_revive_qid(revive_log: ReviveLog, revive_qid: int) -> str | None:
    if revive_qid == eiu.POP_ORDER_REVIVE_QUEUE:
        return None
    if not 0 <= revive_qid < revive_log.revive_queue_num:
        return (
            f"reviveQid {revive_qid} is not a revive queue of {revive_log.topic} (0..{revive_log.revive_queue_num - 1})"
        )
    return None


class AckMessageProcessor:
    def __init__(self, store: MessageStore, topics: Any, revive_log: ReviveLog, broker_name: str, offsets: Any,
                 order_infos: ConsumerOrderInfoManager, notify: Callable[[str], None]) -> None:  # fmt: skip
        self.store = store
        self.topics = topics
        self.revive_log = revive_log
        self.broker_name = broker_name
        self.offsets = offsets
        self.order_infos = order_infos
        self.notify = notify  # wakes the pops parked on a topic

    def ack_orderly(self, channel: Channel, group: str, topic: str, queue_id: int, offset: int, pop_time: int,
                    invisible_time: int) -> tuple[int, str] | None:  # fmt: skip
        """AckMessageProcessor.ackOrderly; MESSAGE_ILLEGAL for an offset not in the batch."""
        old = self.offsets.query_offset(group, topic, queue_id)
        if offset < old:
            return None  # acked already
        nxt = self.order_infos.commit_and_next(topic, group, queue_id, offset, pop_time)
        if nxt > -1:
            self.offsets.commit_offset(channel.remote_addr, group, topic, queue_id, nxt)
            if not self.order_infos.check_block(None, topic, group, queue_id, invisible_time):
                self.notify(topic)
        elif nxt == -1:
            return ResponseCode.MESSAGE_ILLEGAL, (
                f"offset is illegal, key:{topic}@{group}@{queue_id}, old:{old}, commit:{offset}, next:{nxt}, "
                f"{channel.remote_addr}"
            )
        return None

    async def process_request(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        if req.code == RequestCode.BATCH_ACK_MESSAGE:
            return await self.batch_ack(channel, req)
        return await self.ack(channel, req)

    async def ack(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        group = req.ext_str("consumerGroup", required=True) or ""
        topic = req.ext_str("topic", required=True) or ""
        queue_id = req.ext_int("queueId", required=True)
        extra_info = req.ext_str("extraInfo", required=True)
        offset = req.ext_long("offset", required=True)
        assert queue_id is not None and offset is not None
        refused = check_queue(self.topics, topic, queue_id, channel.remote_addr)
        if refused is not None:
            return req.make_response(*refused)
        lo = self.store.get_min_offset_in_queue(topic, queue_id)
        hi = self.store.get_max_offset_in_queue(topic, queue_id)
        if not lo <= offset <= hi:
            remark = f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{lo}~{hi}"
            return req.make_response(ResponseCode.NO_MESSAGE, remark)
        try:
            info = eiu.split(extra_info)
        except ValueError as e:
            return req.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        bad = check_revive_qid(self.revive_log, info.revive_qid)
        if bad is not None:
            return req.make_response(ResponseCode.MESSAGE_ILLEGAL, bad)
        if info.is_order:
            refused = self.ack_orderly(channel, group, topic, queue_id, offset, info.pop_time, info.invisible_time)
            return req.make_response(*refused) if refused is not None else req.make_response(ResponseCode.SUCCESS)
        ack = AckMsg([offset], info.ck_queue_offset, group, topic, queue_id, info.pop_time, info.broker_name)
        return await self._store(req, [self.revive_log.put_ack(info.revive_qid, ack)])

    async def batch_ack(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        try:
            body = orjson.loads(bytes(req.body)) if req.body else None
        except orjson.JSONDecodeError as e:
            return req.make_response(ResponseCode.MESSAGE_ILLEGAL, f"the batch ack body is not JSON: {e}")
        if not isinstance(body, dict) or not body.get("acks"):
            return req.make_response(ResponseCode.NO_MESSAGE)
        acks = body["acks"]
        if not isinstance(acks, list):
            return req.make_response(ResponseCode.MESSAGE_ILLEGAL, f"acks is not a list: {acks!r}"[:200])
        broker_name = body.get("brokerName") or self.broker_name
        puts: list[PutMessageResult] = []
        for one in acks:
            try:
                group, retry = str(one.get("c") or one["consumerGroup"]), str(one.get("r", one.get("retry", "0")))
                topic = eiu.real_topic(str(one.get("t") or one["topic"]), group, retry)
                queue_id, revive_qid = (
                    int(one.get("q", one.get("queueId"))),
                    int(one.get("rq", one.get("reviveQueueId"))),
                )
                start, pop_time = int(one.get("so", one.get("startOffset"))), int(one.get("pt", one.get("popTime")))
                invisible_time = int(one.get("it", one.get("invisibleTime", 0)))
                bits = bit_set_offsets(one.get("b", one.get("bitSet")))
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                return req.make_response(ResponseCode.MESSAGE_ILLEGAL, f"a batch ack is malformed ({e!r}): {one!r}")
            bad = check_revive_qid(self.revive_log, revive_qid)
            if bad is not None:
                return req.make_response(ResponseCode.MESSAGE_ILLEGAL, bad)
            if self.topics.select_topic_config(topic) is None:
                log.error("Illegal topic or queue found when batch ack %s", one)
                continue
            lo = self.store.get_min_offset_in_queue(topic, queue_id)
            hi = self.store.get_max_offset_in_queue(topic, queue_id)
            offsets = [start + i for i in bits if lo <= start + i <= hi]
            if revive_qid == eiu.POP_ORDER_REVIVE_QUEUE:
                for o in offsets:  # as 5.3.3: an illegal one is not reported for a batch
                    self.ack_orderly(channel, group, topic, queue_id, o, pop_time, invisible_time)
            elif offsets:
                ack = AckMsg(offsets, start, group, topic, queue_id, pop_time, broker_name, batch=True)
                puts.append(self.revive_log.put_ack(revive_qid, ack))
        return await self._store(req, puts)

    async def _store(self, req: RemotingCommand, puts: list[PutMessageResult]) -> RemotingCommand:
        failed = [put.status.name for put in puts if not await self.revive_log.stored(put)]
        if failed:  # 5.3.3 logs it and answers SUCCESS; the consumer should know its ack did not land
            log.error("put ack msg error: %s", ", ".join(failed))
            return req.make_response(ResponseCode.SYSTEM_ERROR,
                                     f"the ack was not stored ({', '.join(failed)}): the message will be delivered "
                                     "again after its invisible time")  # fmt: skip
        return req.make_response(ResponseCode.SUCCESS)
