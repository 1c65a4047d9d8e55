"""PullMessageProcessor: PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling.

LITE_PULL_MESSAGE is what RocketMQ 5.x's lite pull consumer sends: the same header and answer
as PULL_MESSAGE, served the same way (5.3.3's PullMessageProcessor serves both; its client
sends no commit offset flag), but NO_PERMISSION ``the broker[<brokerIP1>] for lite pull
consumer is forbidden`` with ``litePullMessageEnable=false``. Neither is served on the fast
port (the VIP channel), as in 5.3.3.

Request fields: consumerGroup, topic, queueId, queueOffset, maxMsgNums, sysFlag (1 commit
offset, 2 suspend, 4 subscription), commitOffset, suspendTimeoutMillis, subscription,
subVersion, expressionType. Checks, in RocketMQ's order: the broker is readable, the
subscription group exists (or may be auto-created) and may consume, the topic exists and is
readable, the queue id is in range; then the subscription: the request's own (sysFlag 4), or
the one the group's heartbeats registered (SUBSCRIPTION_NOT_EXIST without one,
SUBSCRIPTION_NOT_LATEST when the pull's subVersion is newer, NO_PERMISSION for a broadcasting
group the subscription group forbids). An SQL92 subscription the heartbeats registered is
evaluated with the group's filter in the ConsumerFilterManager (FILTER_DATA_NOT_EXIST without
one, FILTER_DATA_NOT_LATEST when the pull's subVersion is newer); one the pull carries is
compiled for it (SUBSCRIPTION_PARSE_FAILED if it does not). Without ``enablePropertyFilter``,
or another type, it is SYSTEM_ERROR, as 4.9 answers. The store applies the filter
(``expression_message_filter.py``) while it walks the ConsumeQueue: first by the entry (the
bloom-filter bit map in its ConsumeQueueExt unit, when there is one), then by the record's
properties; a pull that finds none matching is PULL_RETRY_IMMEDIATELY from past them (4.9's
NO_MATCHED_MESSAGE). A held SQL92 pull wakes on any arrival. With ``filterSupportRetry`` a
pull of a retry topic applies the group's filter for each message's original topic.

suggestWhichBrokerId: 0 (the master) unless ``slaveReadEnable`` is set; then the group's
``whichBrokerWhenConsumeSlowly`` (1) when the store says the consumer is so far behind that
its messages are no longer in memory (``accessMessageInMemoryMaxRatio``), else the group's
``brokerId``. Clients send their next pull of the queue to that broker. A slave never
stores the commit offset a pull carries, and with ``offsetCheckInSlave`` off it answers
PULL_RETRY_IMMEDIATELY, not PULL_OFFSET_MOVED, and leaves the offset alone.

GetMessageStatus → response code (nextBeginOffset comes from the store):

=========================================  ================================================
FOUND                                      SUCCESS, body = the stored records, as they are
NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING   PULL_RETRY_IMMEDIATELY
NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE PULL_OFFSET_MOVED if the offset is not 0, else
                                           PULL_NOT_FOUND
OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL     PULL_NOT_FOUND (held when SUSPEND is set)
OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL    PULL_OFFSET_MOVED
=========================================  ================================================

The body is sent as the store's record views (``Channel.send``: records of 4 KiB and more
straight from the map, smaller ones joined); the result is released once the transport has
sent them.

Long polling, bounded per connection:

==================================  =========================================================
suspendTimeoutMillis                clamped to 0..``MAX_SUSPEND_MS`` (30 s: the Java client's
                                    consumerTimeoutMillisWhenSuspend, after which nobody
                                    waits; RocketMQ 4.9 takes the value as sent)
the connection's parked pulls       SYSTEM_BUSY, remark ``[PULL_HOLD_FULL]...`` (clients pull
past ``MAX_HELD_BYTES_PER_CHANNEL``  again after their error delay, 3 s)
a parked pull wakes while its       PULL_RETRY_IMMEDIATELY without a body, nextBeginOffset =
connection is congested (over       the pull's own offset: the client pulls again once it
``WRITE_HIGH_WATER`` unread)        reads; one that never reads costs a small reply per
                                    parked pull, not a body each
==================================  =========================================================
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

import orjson

from pumice.broker.broker_stats_manager import BrokerStatsManager
from pumice.broker.consumer_filter_manager import ConsumerFilterManager, build, is_tag_type
from pumice.broker.consumer_manager import sub_version
from pumice.broker.expression_message_filter import ExpressionForRetryMessageFilter, ExpressionMessageFilter
from pumice.broker.filter_api import build_subscription_data
from pumice.broker.pull_request_hold_service import PullRequest, PullRequestHoldService
from pumice.common.message import MessageExtBrokerInner, host_address
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import message_properties_to_string
from pumice.common.mix_all import MASTER_ID, RMQ_SYS_OFFSET_MOVED_EVENT
from pumice.common.perm_name import PERM_READ
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import WRITE_HIGH_WATER, Channel, error_response
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.sql92 import Sql92Error, compile_sql92
from pumice.store.get_message_result import GetMessageStatus
from pumice.store.message_store_api import MessageStore
from pumice.store.put_message_result import PutMessageStatus

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
MAX_SUSPEND_MS = 30_000

_STATUS: dict[GetMessageStatus, ResponseCode] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


class TopicsLike(Protocol):
    def select_topic_config(self, topic: str) -> Any: ...


class OffsetsLike(Protocol):
    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None: ...


class PullMessageProcessor:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicsLike,
        offsets: OffsetsLike,
        *,
        broker_perm: int = 6,
        long_polling_enable: bool = True,
        short_polling_time_mills: int = 1000,
        consumers: Any = None,
        subscription_groups: Any = None,
        slave_read_enable: bool = False,
        broker_name: str = "broker-a",
        broker_addr: str = "127.0.0.1:10911",
        enable_property_filter: bool = False,
        consumer_filters: ConsumerFilterManager | None = None,
        filter_support_retry: bool = False,
        stats: BrokerStatsManager | None = None,
        lite_pull_message_enable: bool = True,
    ) -> None:
        self.lite_pull_message_enable = lite_pull_message_enable
        self.enable_property_filter = enable_property_filter  # SQL92 subscriptions served
        self.consumer_filters = consumer_filters  # the SQL92 filters heartbeats registered
        self.filter_support_retry = filter_support_retry
        self.store = store
        self.broker_name = broker_name
        self.broker_addr = broker_addr
        self.subscription_groups = subscription_groups  # SubscriptionGroupManager
        self.slave_read_enable = slave_read_enable
        self.consumers = consumers  # ConsumerManager: subscriptions from heartbeats
        self.topics = topics
        self.offsets = offsets
        self.broker_perm = broker_perm
        self.long_polling_enable = long_polling_enable
        self.short_polling_time_mills = short_polling_time_mills
        self.stats = stats if stats is not None else BrokerStatsManager()
        self.hold_service = PullRequestHoldService(
            self._execute_when_wakeup,
            store.get_max_offset_in_queue,
            long_polling_enable=long_polling_enable,
            short_polling_time_mills=short_polling_time_mills,
        )

    def _offset_moved_event(self, group: str, topic: str, queue_id: int, requested: int, new: int) -> None:
        """A pull answered PULL_OFFSET_MOVED: an OffsetMovedEvent in the OFFSET_MOVED_EVENT topic,
        as 4.9's generateOffsetMovedEvent writes it (tags and keys the group; DELAY 0; the body
        fastjson's, fields sorted)."""
        event = {"consumerGroup": group, "messageQueue": {"brokerName": self.broker_name, "queueId": queue_id,
                 "topic": topic}, "offsetNew": new, "offsetRequest": requested}  # fmt: skip
        host = host_address(self.broker_addr)
        props = {MessageConst.PROPERTY_KEYS: group, MessageConst.PROPERTY_DELAY_TIME_LEVEL: "0",
                 MessageConst.PROPERTY_TAGS: group}  # the order of 4.9's HashMap  # fmt: skip
        msg = MessageExtBrokerInner(
            topic=RMQ_SYS_OFFSET_MOVED_EVENT, body=orjson.dumps(event), properties=props,
            born_timestamp=int(time.time() * 1000), born_host=host, store_host=host,
            properties_string=message_properties_to_string(props),
        )  # fmt: skip
        r = self.store.put_messages((msg,), wait_flush=False)
        if r.status is not PutMessageStatus.PUT_OK:
            log.warning("OffsetMovedEvent of %s %s:%d not stored: %s", group, topic, queue_id, r.status.name)
        else:
            self.store.flush_future(r)
        log.warning("PULL_OFFSET_MOVED: correction offset. topic=%s, groupId=%s, requestOffset=%d, newOffset=%d",
                    topic, group, requested, new)  # fmt: skip

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return self.pull(channel, request, broker_allow_suspend=True)

    def _execute_when_wakeup(self, pr: PullRequest) -> None:
        """PullMessageProcessor.executeRequestWhenWakeup: the held pull again, never suspended;
        an error is answered (SYSTEM_ERROR) and logged, as for any request. A connection that
        does not read its replies gets no body: the memory it may take stays bounded."""
        response: RemotingCommand | None
        try:
            if pr.channel.congested:
                response = self._retry_later(pr)
            else:
                response = self.pull(pr.channel, pr.request, broker_allow_suspend=False)
        except Exception as e:
            response = error_response(pr.channel, pr.request, e)
        if response is not None and not pr.request.is_oneway:
            response.opaque = pr.request.opaque
            pr.channel.send(response)

    def _retry_later(self, pr: PullRequest) -> RemotingCommand:
        """PULL_RETRY_IMMEDIATELY at the pull's own offset, with every field clients require."""
        req = pr.request
        topic = req.ext_str("topic") or ""
        queue_id = req.ext_int("queueId") or 0
        suggest = MASTER_ID
        if self.slave_read_enable and self.subscription_groups is not None:
            sgc = self.subscription_groups.find_subscription_group_config(req.ext_str("consumerGroup") or "")
            if sgc is not None:
                suggest = sgc.broker_id
        ext = {
            "nextBeginOffset": pr.pull_from_this_offset,
            "minOffset": self.store.get_min_offset_in_queue(topic, queue_id),
            "maxOffset": self.store.get_max_offset_in_queue(topic, queue_id),
            "suggestWhichBrokerId": suggest,
        }
        remark = f"the connection has over {WRITE_HIGH_WATER} bytes of replies unread: pull again"
        return req.make_response(ResponseCode.PULL_RETRY_IMMEDIATELY, remark, ext_fields=ext)

    def pull(self, channel: Channel, req: RemotingCommand, broker_allow_suspend: bool) -> RemotingCommand | None:
        group = req.ext_str("consumerGroup", required=True) or ""
        topic = req.ext_str("topic", required=True) or ""
        queue_id = req.ext_int("queueId", required=True)
        offset = req.ext_long("queueOffset", required=True)
        max_nums = req.ext_int("maxMsgNums", 32) or 32
        sys_flag = req.ext_int("sysFlag", 0) or 0
        assert queue_id is not None and offset is not None
        if not self.broker_perm & PERM_READ:
            return req.make_response(ResponseCode.NO_PERMISSION, "the broker pulling message is forbidden")
        if req.code == RequestCode.LITE_PULL_MESSAGE and not self.lite_pull_message_enable:
            broker_ip = self.broker_addr.rpartition(":")[0] or self.broker_addr
            return req.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{broker_ip}] for lite pull consumer is forbidden"
            )
        sgc = None
        if self.subscription_groups is not None:
            sgc = self.subscription_groups.find_subscription_group_config(group)
            if sgc is None:
                return req.make_response(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
                )
            if not sgc.consume_enable:
                return req.make_response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return req.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return req.make_response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            return req.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        filter_data = None
        if sys_flag & FLAG_SUBSCRIPTION:
            expression = req.ext_str("subscription")
            expression_type = (req.ext_str("expressionType") or "TAG").upper()
            if not is_tag_type(expression_type) and expression_type == "SQL92" and self.enable_property_filter:
                try:
                    compile_sql92(expression or "")
                except Sql92Error as e:
                    log.warning("pull of %s on %s: %s", group, topic, e)
                    return req.make_response(
                        ResponseCode.SUBSCRIPTION_PARSE_FAILED, "Parse the consumer's subscription failed"
                    )
                filter_data = build(topic, group, expression or "", expression_type, req.ext_long("subVersion", 0) or 0)
        else:  # the subscription the group's heartbeats registered (Java push consumers send none)
            info = self.consumers.get_consumer_group_info(group) if self.consumers is not None else None
            if info is None:
                return req.make_response(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist")
            if sgc is not None and not sgc.consume_broadcast_enable and info.is_broadcasting():
                return req.make_response(
                    ResponseCode.NO_PERMISSION, f"the consumer group[{group}] can not consume by broadcast way"
                )
            registered = info.subscriptions.get(topic)
            if registered is None:
                return req.make_response(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist")
            if sub_version(registered) < (req.ext_long("subVersion", 0) or 0):
                return req.make_response(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            expression = str(registered.get("subString", "*"))
            expression_type = str(registered.get("expressionType") or "TAG").upper()
            if not is_tag_type(expression_type) and self.consumer_filters is not None:
                filter_data = self.consumer_filters.get(topic, group)
                if filter_data is None:
                    return req.make_response(
                        ResponseCode.FILTER_DATA_NOT_EXIST,
                        "The broker's consumer filter data is not exist!Your expression may be wrong!",
                    )
                if filter_data.client_version < (req.ext_long("subVersion", 0) or 0):
                    return req.make_response(
                        ResponseCode.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest"
                    )
        is_tag = is_tag_type(expression_type)
        if not is_tag and (expression_type != "SQL92" or not self.enable_property_filter):
            remark = f"The broker does not support consumer to filter message by {expression_type}"
            return req.make_response(ResponseCode.SYSTEM_ERROR, remark)
        if not is_tag and filter_data is None:  # compiled, but not registered (no manager here)
            filter_data = build(topic, group, expression or "", expression_type, 0)
        subscription = build_subscription_data(topic, expression if is_tag else "*")
        filter_class = ExpressionForRetryMessageFilter if self.filter_support_retry else ExpressionMessageFilter
        message_filter = None
        if not is_tag or self.filter_support_retry:
            message_filter = filter_class(subscription, filter_data, self.consumer_filters, is_tag=is_tag)
        codes = None if subscription.matches_all else subscription.code_set
        res = self.store.get_message(
            group, topic, queue_id, offset, max_nums, tags_codes=codes, message_filter=message_filter
        )
        if res is None:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "store getMessage return null")
        code = _STATUS.get(res.status)
        if code is None:  # NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE
            code = ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
        suggest = MASTER_ID
        if self.slave_read_enable and sgc is not None:
            suggest = sgc.which_broker_when_consume_slowly if res.suggest_pulling_from_slave else sgc.broker_id
        is_master = self.store.is_master()
        if code == ResponseCode.PULL_OFFSET_MOVED and not is_master and not self.store.config.offset_check_in_slave:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY  # a slave may lag: do not move the consumer
            if sgc is not None:
                suggest = sgc.broker_id
        if code == ResponseCode.PULL_OFFSET_MOVED:
            self._offset_moved_event(group, topic, queue_id, offset, res.next_begin_offset)
        ext = {
            "nextBeginOffset": res.next_begin_offset,
            "minOffset": res.min_offset,
            "maxOffset": res.max_offset,
            "suggestWhichBrokerId": suggest,
        }
        if code == ResponseCode.PULL_NOT_FOUND and broker_allow_suspend and sys_flag & FLAG_SUSPEND:
            timeout_ms = req.ext_long("suspendTimeoutMillis", 15_000) or 15_000
            if not self.long_polling_enable:
                timeout_ms = self.short_polling_time_mills
            timeout_ms = min(max(timeout_ms, 0), MAX_SUSPEND_MS)
            res.release()
            held = PullRequest(channel, req, offset, subscription, time.monotonic() + timeout_ms / 1000)
            if self.hold_service.suspend_pull_request(topic, queue_id, held):
                response = None
            else:
                remark = (
                    f"[PULL_HOLD_FULL]this connection already holds {channel.held} suspended pulls "
                    f"({channel.held_bytes} bytes, max {self.hold_service.max_held_bytes_per_channel}), try later"
                )
                response = req.make_response(ResponseCode.SYSTEM_BUSY, remark)
        elif code == ResponseCode.SUCCESS:
            self.stats.inc_get(group, topic, res.message_count, res.buffer_total_size)
            if (pulled := self.stats.pull_offsets) is not None:  # metrics on: in-flight messages
                pulled[(group, topic, queue_id)] = res.next_begin_offset
            response = req.make_response(code, ext_fields=ext, body_parts=list(res.buffers))
            response.after_send = res.release
        else:
            res.release()
            response = req.make_response(code, ext_fields=ext)
        if broker_allow_suspend and sys_flag & FLAG_COMMIT_OFFSET and is_master:
            commit = req.ext_long("commitOffset", -1)
            if commit is not None and commit >= 0:
                self.offsets.commit_offset(channel.remote_addr, group, topic, queue_id, commit)
        return response
