"""PopReviveService: popped messages not acked in time go to their group's POP retry topic (RocketMQ 5's
PopReviveService).

Every ``reviveInterval`` (1 s) the master reads each revive queue of ``rmq_sys_REVIVE_LOG_<cluster>``
from where it stopped: a checkpoint (``ck``) is kept until it is settled, an ack (``ack``,
``bAck``) sets the bit of its message in its checkpoint (same topic, group, queue, start
offset, popTime and brokerName). A checkpoint is settled when every message is acked, or
once its revive time (popTime + invisibleTime) is ``ackTimeInterval`` (1 s) past: each
message not acked is then stored again in ``%RETRY%<group>_<topic>`` (``+`` with
``enableRetryTopicV2``; a retry message stays in its retry topic), queue 0, with:

=================  ==========================================================================
field              value
=================  ==========================================================================
body, flag,        the message's
sysFlag, tags,
properties,
bornTimestamp
reconsumeTimes     the message's + 1 (the attempt the consumer sees is this + 1)
1ST_POP_TIME       the first checkpoint's popTime (kept once set)
bornHost,          the broker
storeHost
=================  ==========================================================================

The retry topic is created with one queue (perm 6) the first time, and the group's offset of
it set to 0. The revive progress is the consumer offset of ``CID_RMQ_SYS_REVIVE_GROUP`` on
each revive queue: the offset before the oldest checkpoint not settled (persisted with the
other offsets every ``flushConsumerOffsetInterval``); after a restart the queue is read again
from there, so a checkpoint settled in the last seconds before a SIGKILL is settled again:
its messages may come back once more (at least once), and none is lost. A checkpoint whose
topic or group no longer exists is dropped, as 5.3.3 drops it. The maximum of attempts and
the dead-letter queue are the consumer's (5.3.3's proxy forwards a message whose
reconsumeTimes reached the group's retryMaxTimes to ``%DLQ%<group>`` with
CONSUMER_SEND_MSG_BACK), not the revive service's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pumice.broker.pop_revive_log import ReviveLog, is_stored
from pumice.broker.topic_config_manager import TopicConfig
from pumice.common import extra_info_util as eiu
from pumice.common.message import MessageExt, MessageExtBrokerInner
from pumice.common.message_decoder import decode_message, message_properties_to_string
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.common.pop_check_point import (
    ACK_TAG,
    ACK_TIME_INTERVAL_MS,
    BATCH_ACK_TAG,
    CK_TAG,
    PROPERTY_FIRST_POP_TIME,
    RETRY_QUEUE_NUM,
    REVIVE_GROUP,
    AckMsg,
    PopCheckPoint,
)
from pumice.store.get_message_result import GetMessageStatus
from pumice.store.message_store_api import MessageStore
from pumice.store.put_message_result import PutMessageResult

log = logging.getLogger(__name__)

MAX_READ_PER_TICK = 4096  # revive records read from one queue per pass (the rest next pass)
_LOCAL_HOST = "127.0.0.1"
_MOVED = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY)


class PopReviveService:
    def __init__(
        self,
        store: MessageStore,
        topics: Any,
        offsets: Any,
        subscription_groups: Any,
        revive_log: ReviveLog,
        *,
        broker_name: str,
        revive_interval_ms: int = 1000,
        enable_retry_topic_v2: bool = False,
    ) -> None:
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.subscription_groups = subscription_groups
        self.revive_log = revive_log
        self.broker_name = broker_name
        self.revive_interval_ms = revive_interval_ms
        self.enable_retry_topic_v2 = enable_retry_topic_v2
        n = revive_log.revive_queue_num
        self._read_offset: list[int] = [-1] * n  # next revive-queue offset to read (-1: from the committed one)
        self._pending: list[dict[str, PopCheckPoint]] = [{} for _ in range(n)]  # merge key -> ck, read order

    def start(self) -> asyncio.Task[None]:
        """The passes' task, started when the broker becomes master and cancelled when it stops
        being one; each start reads the revive queues again from the revive group's offsets."""
        self._forget()
        return asyncio.get_running_loop().create_task(self._run())

    def _forget(self) -> None:
        """What an earlier term as master read (the log may have been truncated since)."""
        n = self.revive_log.revive_queue_num
        self._read_offset = [-1] * n
        self._pending = [{} for _ in range(n)]

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.revive_interval_ms / 1000)
            for qid in range(self.revive_log.revive_queue_num):
                try:
                    await self.revive_queue(qid)
                except Exception:  # logged; the next pass tries again from the same place
                    log.exception("revive of queue %d of %s failed", qid, self.revive_log.topic)

    async def revive_queue(self, qid: int, now_ms: int | None = None) -> None:
        self._scan(qid)
        await self._revive(qid, int(time.time() * 1000) if now_ms is None else now_ms)

    # -- reading ------------------------------------------------------------------------

    def _scan(self, qid: int) -> None:
        topic = self.revive_log.topic
        offset = self._read_offset[qid]
        if offset < 0:
            offset = self.offsets.query_offset(REVIVE_GROUP, topic, qid) + 1  # -1 (none) reads from 0
        pending = self._pending[qid]
        read = 0
        while read < MAX_READ_PER_TICK:
            res = self.store.get_message(REVIVE_GROUP, topic, qid, offset, 32)
            if res is None:
                break
            try:
                if not res.buffers:
                    moved = res.status in _MOVED or res.status is GetMessageStatus.OFFSET_FOUND_NULL
                    if moved and res.next_begin_offset != offset:  # retention took them, or a reset: go on from there
                        log.error("reviveQueueId=%d, OFFSET_ILLEGAL %d, next %d", qid, offset, res.next_begin_offset)
                        offset = res.next_begin_offset
                        continue
                    break
                for buf, qo in zip(res.buffers, res.queue_offsets, strict=True):
                    self._read_record(decode_message(buf), qo, pending)
                read += len(res.buffers)
                offset = res.next_begin_offset
            finally:
                res.release()
        self._read_offset[qid] = offset

    def _read_record(self, m: MessageExt, queue_offset: int, pending: dict[str, PopCheckPoint]) -> None:
        tag = m.tags
        try:
            if tag == CK_TAG:
                ck = PopCheckPoint.from_json(m.body)
                if ck.topic is None or ck.cid is None:
                    return
                ck.revive_offset = queue_offset
                ck.bit_map = 0
                pending[ck.merge_key()] = ck
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                ack = AckMsg.from_json(m.body, batch=tag == BATCH_ACK_TAG)
                ck_or_none = pending.get(ack.merge_key(self.broker_name))
                if ck_or_none is None:
                    return  # its checkpoint was settled already (an ack after the revive)
                for ao in ack.ack_offsets:
                    i = ck_or_none.index_of_ack(ao)
                    if i >= 0:
                        ck_or_none.bit_map |= 1 << i
                    else:
                        log.error("invalid ack index, %s, %s", ack, ck_or_none)
        except (ValueError, KeyError, TypeError) as e:  # a record nobody can use: logged, skipped
            log.error("revive record at %d of tag %s is malformed (%s): %r", queue_offset, tag, e, m.body[:200])

    # -- reviving -----------------------------------------------------------------------

    async def _revive(self, qid: int, now_ms: int) -> None:
        pending = self._pending[qid]
        puts: list[PutMessageResult] = []
        for key, ck in list(pending.items()):
            all_acked = ck.bit_map == (1 << ck.num) - 1
            if not all_acked and now_ms - ck.revive_time <= ACK_TIME_INTERVAL_MS:
                continue
            if not all_acked and self._valid(ck):
                done = self._revive_ck(ck, puts)
                if not done:
                    continue  # kept: tried again next pass
            del pending[key]
        for put in puts:
            await self.revive_log.stored(put)
        first = min((ck.revive_offset for ck in pending.values()), default=self._read_offset[qid])
        committed = self.offsets.query_offset(REVIVE_GROUP, self.revive_log.topic, qid)
        if first - 1 > committed:
            self.offsets.commit_offset(_LOCAL_HOST, REVIVE_GROUP, self.revive_log.topic, qid, first - 1)

    def _valid(self, ck: PopCheckPoint) -> bool:
        normal = eiu.parse_normal_topic(ck.topic, ck.cid)
        if self.topics.select_topic_config(normal) is None:
            log.warning("can not get normal topic %s, then continue", ck.topic)
            return False
        if self.subscription_groups.find_subscription_group_config(ck.cid) is None:
            log.warning("can not get cid %s, then continue", ck.cid)
            return False
        return True

    def _revive_ck(self, ck: PopCheckPoint, puts: list[PutMessageResult]) -> bool:
        """Store every message of ``ck`` not acked in its retry topic; False if one failed
        (the checkpoint stays, those already stored are stored again next pass: at least once)."""
        ok = True
        for i in range(ck.num):
            if ck.bit_map >> i & 1:
                continue
            offset = ck.ack_offset_by_index(i)
            res = self.store.get_message(ck.cid, ck.topic, ck.queue_id, offset, 1)
            if res is None or not res.buffers:
                if res is not None:
                    res.release()
                log.info("can not get biz msg, topic:%s, qid:%d, offset:%d, then continue", ck.topic, ck.queue_id,
                         offset)  # fmt: skip
                continue
            try:
                m = decode_message(res.buffers[0])
            finally:
                res.release()
            put = self._put_retry(ck, m)
            if is_stored(put):
                puts.append(put)
                ck.bit_map |= 1 << i  # stored: not again if a later message of the checkpoint fails
            else:
                log.error("revive error, put %s:%d of %s: %s", ck.topic, offset, ck.cid, put.status.name)
                ok = False
        return ok

    def _put_retry(self, ck: PopCheckPoint, m: MessageExt) -> PutMessageResult:
        if ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            retry_topic = ck.topic
        else:
            retry_topic = eiu.build_pop_retry_topic(ck.topic, ck.cid, self.enable_retry_topic_v2)
        self._add_retry_topic_if_not_exist(retry_topic, ck.cid)
        props = dict(m.properties)
        if m.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
            props[PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        host = self.revive_log.host
        inner = MessageExtBrokerInner(
            topic=retry_topic, body=m.body, queue_id=0, flag=m.flag, properties=props, sys_flag=m.sys_flag,
            born_timestamp=m.born_timestamp, born_host=host, store_host=host, reconsume_times=m.reconsume_times + 1,
            properties_string=message_properties_to_string(props),
        )  # fmt: skip
        return self.store.put_messages((inner,), wait_flush=False)

    def _add_retry_topic_if_not_exist(self, topic: str, group: str) -> None:
        if self.topics.select_topic_config(topic) is not None:
            return
        self.topics.update_topic_config(TopicConfig(topic, RETRY_QUEUE_NUM, RETRY_QUEUE_NUM, PERM_READ | PERM_WRITE))
        if self.offsets.query_offset(group, topic, 0) < 0:
            self.offsets.commit_offset("initPopRetryOffset", group, topic, 0, 0)
