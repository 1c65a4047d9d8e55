"""PopMessageProcessor: POP_MESSAGE (200050), RocketMQ 5's consumption by pop.

The broker hands out up to ``maxMsgNums`` messages of a topic (one queue, or every queue when
``queueId`` is −1) and of the group's POP retry topic, each invisible for ``invisibleTime``,
and stores a checkpoint for each queue it popped from in the revive topic
(``pop_revive_log.py``); what is not acked by then comes back through the revive service.

Request header (PopMessageRequestHeader): consumerGroup, topic, queueId, maxMsgNums,
invisibleTime, pollTime, bornTime, initMode (0 MAX, 1 MIN) required; expType, exp, order,
attemptId optional. Response header (PopMessageResponseHeader): popTime, invisibleTime,
reviveQid, restNum, startOffsetInfo, msgOffsetInfo, orderCountInfo (formats in
``pumice.common.extra_info_util``); the body is the records, a retry message's record
re-encoded with the topic it retries and its handle in ``POP_CK``.

Checks, in 5.3.3's order and words:

=========================================  ==================  ================================
condition                                  code                remark
=========================================  ==================  ================================
now − bornTime − pollTime > 500 ms         POLLING_TIMEOUT     the broker[ip] pop message is
                                                               timeout too much
the broker not readable                    NO_PERMISSION       the broker[ip] pop message is
                                                               forbidden
maxMsgNums > 32                            INVALID_PARAMETER   …pop message's num is greater
                                                               than 32
no such topic                              TOPIC_NOT_EXIST     topic[t] not exist, apply first
                                                               please!
the topic not readable                     NO_PERMISSION       the topic[t] peeking message is
                                                               forbidden
queueId ≥ readQueueNums                    INVALID_PARAMETER   queueId[q] is illegal, …
no such group (nor auto-created)           SUBSCRIPTION_GROUP  subscription group [g] does not
                                           _NOT_EXIST          exist
the group may not consume                  NO_PERMISSION       subscription group no
                                                               permission, g
an expression that does not parse          SUBSCRIPTION_       parse the consumer's
                                           PARSE_FAILED        subscription failed
nothing found, pollTime ≤ 0 or timed out   POLLING_TIMEOUT     NO_MESSAGE_IN_QUEUE
nothing found, too many parked             POLLING_FULL        NO_MESSAGE_IN_QUEUE
=========================================  ==================  ================================

Offsets, as 5.3.3 with ``enablePopBufferMerge=false``: the group's consumer offset of each
queue is where the next pop starts; a queue it has none of starts at the queue's minimum (a
retry topic, or initMode MIN), at 0 when the queue's first message is still in memory
(``initPopOffsetByCheckMsgInMem``), else at the last message. A pop appends its checkpoint
first and moves the offset past the messages only when the append succeeded, all on the
event loop with no await between the read and the move (so no queue lock is needed: two
pops of a queue never overlap), then waits for the checkpoint's flush before it answers.

An orderly pop (``order=true``: a FIFO group's) reads no retry topic, skips a queue whose batch
in flight is neither acked nor past its invisible time, writes no checkpoint and leaves the
offset where it was (``consumer_order_info_manager.py``); its handles have reviveQid 999 and the
response carries orderCountInfo (``<retry> qo<queueId>%<offset> <count>`` per message popped
before, then ``<retry> <queueId> <least count>``).
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from typing import Any

from pumice.broker.consumer_filter_manager import ConsumerFilterManager, build, is_tag_type
from pumice.broker.consumer_order_info_manager import ConsumerOrderInfoManager
from pumice.broker.expression_message_filter import ExpressionMessageFilter
from pumice.broker.filter_api import build_subscription_data
from pumice.broker.pop_long_polling_service import PollingResult, PopLongPollingService, PopRequest
from pumice.broker.pop_revive_log import ReviveLog, is_stored
from pumice.common import extra_info_util as eiu
from pumice.common.message_decoder import decode_message, encode_record
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.common.perm_name import PERM_READ
from pumice.common.pop_check_point import PROPERTY_POP_CK, PopCheckPoint
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel, error_response
from pumice.remoting.response_code import ResponseCode
from pumice.store.get_message_result import GetMessageResult, GetMessageStatus
from pumice.store.message_store_api import MessageStore

log = logging.getLogger(__name__)

INIT_MODE_MIN = 1  # ConsumeInitMode.MIN (MAX is 0)
MAX_POP_NUMS = 32
_RESET_OFFSET = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                 GetMessageStatus.OFFSET_FOUND_NULL)  # fmt: skip
_SKIP_TO_NEXT = (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.OFFSET_FOUND_NULL,
                 GetMessageStatus.MESSAGE_WAS_REMOVING, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)  # fmt: skip


class PopMessageProcessor:
    def __init__(
        self,
        store: MessageStore,
        topics: Any,
        offsets: Any,
        subscription_groups: Any,
        revive_log: ReviveLog,
        order_infos: ConsumerOrderInfoManager,
        *,
        broker_ip: str,
        broker_name: str,
        broker_perm: int = 6,
        pop_from_retry_probability: int = 20,
        enable_retry_topic_v2: bool = False,
        init_pop_offset_by_check_msg_in_mem: bool = True,
        enable_property_filter: bool = False,
        consumer_filters: ConsumerFilterManager | None = None,
        max_pop_polling_size: int = 100_000,
        pop_polling_size: int = 1024,
    ) -> None:
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.subscription_groups = subscription_groups
        self.revive_log = revive_log
        self.order_infos = order_infos
        self.broker_ip = broker_ip
        self.broker_name = broker_name
        self.broker_perm = broker_perm
        self.pop_from_retry_probability = pop_from_retry_probability
        self.enable_retry_topic_v2 = enable_retry_topic_v2
        self.init_pop_offset_by_check_msg_in_mem = init_pop_offset_by_check_msg_in_mem
        self.enable_property_filter = enable_property_filter
        self.consumer_filters = consumer_filters
        self._ck_number = itertools.count()
        self.polling = PopLongPollingService(
            self._wake, store.message_arriving_listener, max_pop_polling_size=max_pop_polling_size,
            pop_polling_size=pop_polling_size,
        )  # fmt: skip
        store.message_arriving_listener = self.polling  # it passes every arrival on to the pulls'

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return await self.pop(channel, request, may_park=True)

    async def _wake(self, pr: PopRequest, may_park: bool) -> None:
        try:
            response = await self.pop(pr.channel, pr.request, may_park=may_park)
        except Exception as e:
            response = error_response(pr.channel, pr.request, e)
        if response is not None and not pr.request.is_oneway and not pr.channel.closed:
            pr.channel.send(response)

    def _refuse(self, req: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        return req.make_response(code, remark)

    async def pop(self, channel: Channel, req: RemotingCommand, *, may_park: bool) -> RemotingCommand | None:
        now_ms = int(time.time() * 1000)
        group = req.ext_str("consumerGroup", required=True) or ""
        topic = req.ext_str("topic", required=True) or ""
        queue_id = req.ext_int("queueId", required=True)
        max_nums = req.ext_int("maxMsgNums", required=True)
        invisible_time = req.ext_long("invisibleTime", required=True)
        poll_time = req.ext_long("pollTime", required=True)
        born_time = req.ext_long("bornTime", 0) or now_ms  # 5.3.3 fills a missing or 0 bornTime
        init_mode = req.ext_int("initMode", required=True)
        assert queue_id is not None and max_nums is not None and invisible_time is not None
        assert poll_time is not None and init_mode is not None
        ip = self.broker_ip
        if now_ms - born_time - poll_time > 500:
            return self._refuse(req, ResponseCode.POLLING_TIMEOUT, f"the broker[{ip}] pop message is timeout too much")
        if not self.broker_perm & PERM_READ:
            return self._refuse(req, ResponseCode.NO_PERMISSION, f"the broker[{ip}] pop message is forbidden")
        if max_nums > MAX_POP_NUMS:
            remark = f"the broker[{ip}] pop message's num is greater than 32"
            return self._refuse(req, ResponseCode.INVALID_PARAMETER, remark)
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return self._refuse(req, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return self._refuse(req, ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.read_queue_nums:
            remark = (f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                      f"[{tc.read_queue_nums}] consumer:[{channel.remote_addr}]")  # fmt: skip
            return self._refuse(req, ResponseCode.INVALID_PARAMETER, remark)
        sgc = self.subscription_groups.find_subscription_group_config(group)
        if sgc is None:
            remark = f"subscription group [{group}] does not exist"
            return self._refuse(req, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark)
        if not sgc.consume_enable:
            return self._refuse(req, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        exp, exp_type = req.ext_str("exp") or "", (req.ext_str("expType") or "TAG").upper()
        tags_codes = None
        message_filter = None
        if exp:
            if is_tag_type(exp_type):
                sub = build_subscription_data(topic, exp)
                tags_codes = None if sub.matches_all else sub.code_set
            else:
                filter_data = build(topic, group, exp, exp_type, 0) if self.enable_property_filter else None
                if filter_data is None:
                    return self._refuse(req, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                        "parse the consumer's subscription failed")  # fmt: skip
                message_filter = ExpressionMessageFilter(build_subscription_data(topic, "*"), filter_data,
                                                         self.consumer_filters, is_tag=False)  # fmt: skip

        order = req.ext_bool("order")
        if order:
            revive_qid = eiu.POP_ORDER_REVIVE_QUEUE
        else:
            revive_qid = next(self._ck_number) % self.revive_log.revive_queue_num
        pop = _Pop(req, group, topic, invisible_time, max_nums, init_mode, revive_qid, now_ms, tags_codes,
                   message_filter, order, req.ext_str("attemptId"))  # fmt: skip
        random_q = random.randrange(100)
        need_retry = random_q < self.pop_from_retry_probability and not order  # orderly pops never read it
        retry_topic = eiu.build_pop_retry_topic(topic, group, self.enable_retry_topic_v2)
        if need_retry:
            self._pop_topic(pop, retry_topic, random_q, channel)
        if queue_id < 0:
            self._pop_topic(pop, topic, random_q, channel)
        else:
            self._pop_queue(pop, topic, queue_id, channel)
        if not need_retry and not order and len(pop.records) < max_nums:
            self._pop_topic(pop, retry_topic, random_q, channel)

        # answer only once every checkpoint is stored as the store's flush says
        for result in pop.ck_puts:
            if not await self.revive_log.stored(result):
                log.warning("checkpoint of a pop by %s on %s not flushed: %s", group, topic, result.status.name)
        ext = {
            "popTime": now_ms, "invisibleTime": invisible_time, "reviveQid": revive_qid, "restNum": pop.rest_num,
            "startOffsetInfo": ";".join(pop.start_offset_info), "msgOffsetInfo": ";".join(pop.msg_offset_info),
        }  # fmt: skip
        if order and pop.order_count_info:
            ext["orderCountInfo"] = ";".join(pop.order_count_info)
        if pop.records:
            return req.make_response(ResponseCode.SUCCESS, GetMessageStatus.FOUND.name, ext_fields=ext,
                                     body=b"".join(pop.records))  # fmt: skip
        result = PollingResult.NOT_POLLING
        if may_park:
            topics = [topic, retry_topic]
            result = self.polling.polling(channel, req, topics, group, queue_id, born_time, poll_time)
            if result == PollingResult.POLLING_SUC:
                return None
        code = ResponseCode.POLLING_FULL if result == PollingResult.POLLING_FULL else ResponseCode.POLLING_TIMEOUT
        return req.make_response(code, GetMessageStatus.NO_MESSAGE_IN_QUEUE.name, ext_fields=ext)

    def _pop_topic(self, pop: _Pop, topic: str, random_q: int, channel: Channel) -> None:
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return
        n = tc.read_queue_nums
        for i in range(n):
            self._pop_queue(pop, topic, (random_q + i) % n, channel)

    def _pop_offset(self, pop: _Pop, topic: str, queue_id: int) -> int:
        offset: int = self.offsets.query_offset(pop.group, topic, queue_id)
        if offset >= 0:
            return offset
        store = self.store
        if pop.init_mode == INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif (self.init_pop_offset_by_check_msg_in_mem and store.get_min_offset_in_queue(topic, queue_id) <= 0
              and store.get_max_offset_in_queue(topic, queue_id) > 0
              and not store.check_in_disk_by_consume_offset(topic, queue_id, 0)):  # fmt: skip
            offset = 0
        else:  # the last message
            offset = max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        self.offsets.commit_offset("getPopOffset", pop.group, topic, queue_id, offset)
        return offset

    def _pop_queue(self, pop: _Pop, topic: str, queue_id: int, channel: Channel) -> None:
        """Pop from one queue (synchronous: the read, the checkpoint's append and the offset's
        move happen with nothing else in between)."""
        offset = self._pop_offset(pop, topic, queue_id)
        if pop.order and self.order_infos.check_block(pop.attempt_id, topic, pop.group, queue_id, pop.invisible_time):
            return  # its batch in flight is neither acked nor visible again
        want = pop.max_nums - len(pop.records)
        if want <= 0:
            pop.rest_num += self.store.get_max_offset_in_queue(topic, queue_id) - offset
            return
        res = self._get(pop, topic, queue_id, offset, want)
        if res is None:
            return
        if res.status in _RESET_OFFSET:  # the stored offset is wrong: start where the store says
            log.warning("Pop initial offset, because store is no correct, %s@%s@%d, %d->%d", topic, pop.group,
                        queue_id, offset, res.next_begin_offset)  # fmt: skip
            res.release()
            offset = res.next_begin_offset
            self.offsets.commit_offset(channel.remote_addr, pop.group, topic, queue_id, offset)
            res = self._get(pop, topic, queue_id, offset, want)
            if res is None:
                return
        try:
            if res.buffers and pop.order:  # no checkpoint: the offset stays until the acks
                pop.order_count_info += self.order_infos.update(
                    pop.attempt_id, topic, pop.group, queue_id, pop.pop_time, pop.invisible_time, res.queue_offsets
                )
                self.offsets.commit_offset(channel.remote_addr, pop.group, topic, queue_id, offset)
                pop.records += [bytes(buf) for buf in res.buffers]
                pop.start_offset_info.append(eiu.start_offset_entry(topic, queue_id, offset))
                pop.msg_offset_info.append(eiu.msg_offset_entry(topic, queue_id, res.queue_offsets))
            elif res.buffers:
                ck = PopCheckPoint(
                    start_offset=offset, pop_time=pop.pop_time, invisible_time=pop.invisible_time,
                    num=len(res.buffers), queue_id=queue_id, topic=topic, cid=pop.group, broker_name=self.broker_name,
                    queue_offset_diff=[o - offset for o in res.queue_offsets],
                )  # fmt: skip
                put = self.revive_log.put_ck(pop.revive_qid, ck)
                if not is_stored(put):  # nothing handed out without its checkpoint
                    log.warning("checkpoint of %s on %s:%d not stored: %s", pop.group, topic, queue_id, put.status.name)
                    pop.rest_num += res.max_offset - offset
                    return
                pop.ck_puts.append(put)
                self.offsets.commit_offset(channel.remote_addr, pop.group, topic, queue_id, res.next_begin_offset)
                retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                for buf, qo in zip(res.buffers, res.queue_offsets, strict=True):
                    pop.records.append(self._retry_record(pop, buf, offset, qo) if retry else bytes(buf))
                pop.start_offset_info.append(eiu.start_offset_entry(topic, queue_id, offset))
                pop.msg_offset_info.append(eiu.msg_offset_entry(topic, queue_id, res.queue_offsets))
            elif res.status in _SKIP_TO_NEXT and res.next_begin_offset > offset:
                self.offsets.commit_offset(channel.remote_addr, pop.group, topic, queue_id, res.next_begin_offset)
            pop.rest_num += max(res.max_offset - res.next_begin_offset, 0)
        finally:
            res.release()

    def _get(self, pop: _Pop, topic: str, queue_id: int, offset: int, want: int) -> GetMessageResult | None:
        return self.store.get_message(pop.group, topic, queue_id, offset, want, tags_codes=pop.tags_codes,
                                      message_filter=pop.message_filter)  # fmt: skip

    def _retry_record(self, pop: _Pop, buf: memoryview, ck_offset: int, queue_offset: int) -> bytes:
        """A retry message as 5.3.3 answers it (popResponseReturnActualRetryTopic=false): the
        topic it retries, and its handle (retry flag 1) in POP_CK."""
        m = decode_message(buf)
        props = dict(m.properties)
        props.setdefault(PROPERTY_POP_CK, eiu.build_extra_info(ck_offset, pop.pop_time, pop.invisible_time,
                         pop.revive_qid, m.topic, self.broker_name, m.queue_id, queue_offset))  # fmt: skip
        return encode_record(
            body=m.body, topic=pop.topic, properties=props, queue_id=m.queue_id, flag=m.flag,
            queue_offset=m.queue_offset, physical_offset=m.commit_log_offset, sys_flag=m.sys_flag,
            born_timestamp=m.born_timestamp, born_host=m.born_host, store_timestamp=m.store_timestamp,
            store_host=m.store_host, reconsume_times=m.reconsume_times,
            prepared_transaction_offset=m.prepared_transaction_offset,
        )  # fmt: skip


class _Pop:
    """One POP_MESSAGE's state across the queues it reads."""

    __slots__ = ("attempt_id", "ck_puts", "group", "init_mode", "invisible_time", "max_nums", "message_filter",
                 "msg_offset_info", "order", "order_count_info", "pop_time", "records", "req", "rest_num",
                 "revive_qid", "start_offset_info", "tags_codes", "topic")  # fmt: skip

    def __init__(
        self, req: RemotingCommand, group: str, topic: str, invisible_time: int, max_nums: int, init_mode: int,
        revive_qid: int, pop_time: int, tags_codes: Any, message_filter: Any, order: bool, attempt_id: str | None,
    ) -> None:  # fmt: skip
        self.req = req
        self.group = group
        self.topic = topic
        self.invisible_time = invisible_time
        self.max_nums = max_nums
        self.init_mode = init_mode
        self.revive_qid = revive_qid
        self.pop_time = pop_time
        self.tags_codes = tags_codes
        self.message_filter = message_filter
        self.records: list[bytes] = []
        self.ck_puts: list[Any] = []
        self.rest_num = 0
        self.start_offset_info: list[str] = []
        self.msg_offset_info: list[str] = []
        self.order = order
        self.attempt_id = attempt_id
        self.order_count_info: list[str] = []
