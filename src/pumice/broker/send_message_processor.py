"""SendMessageProcessor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320),
CONSUMER_SEND_MSG_BACK (36), END_TRANSACTION (37), SEND_REPLY_MESSAGE (324) and _V2 (325).

Request header fields (code 10 names; codes 310/320/325 use the letters):

===  =====================  ===================================================
v2   name                   meaning
===  =====================  ===================================================
a    producerGroup          sender's group
b    topic                  target topic
c    defaultTopic           topic to inherit from when auto-creating (TBW102)
d    defaultTopicQueueNums  queues for an auto-created topic
e    queueId                target queue; < 0 picks one
f    sysFlag                message sysFlag (compression, transaction type)
g    bornTimestamp          producer's send time (ms)
h    flag                   application flag
i    properties             ``name\\x01value\\x02…``
j    reconsumeTimes         redelivery count
k    unitMode               ignored
l    maxReconsumeTimes      ignored here
m    batch                  body holds several messages (code 10 with "1"/"true")
===  =====================  ===================================================

A batch body (format in ``pumice.common.message.MessageExtBatch``) holds messages of the
header's topic and queue; ``put_message_batch`` writes them in one append, with CLUSTER
appended to each message's properties, as the Java broker does. A malformed body or a
delay level makes it MESSAGE_ILLEGAL. A batch whose sysFlag has COMPRESSED (bit 0) is a
compressed body (zlib, as rocketmq-client-cpp sends batches over 4 KiB; or the type in bits
8-10): it is inflated (up to maxMessageSize) and its messages are stored uncompressed.

The response carries ``msgId`` (comma-joined for a batch), ``queueId``, ``queueOffset`` and
``transactionId`` (the header's UNIQ_KEY; a batch's are in its messages). PutMessageStatus
maps to response codes as in RocketMQ 4.9; FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and
SLAVE_NOT_AVAILABLE still count as sent. A message whose WAIT property is not "true" (the Java
client's ``setWaitStoreMsgOK(false)``; a batch takes its first message's) is answered once
stored, without waiting for the flush (SYNC_FLUSH) or a slave (SYNC_MASTER), as 4.9's
handleDiskFlush and handleHA: SEND_OK on a SYNC_MASTER that has no slave. A single message is
stored without its WAIT property, as 4.9.4 and later store it (a delayed one keeps it: 4.9
rebuilds the copy for SCHEDULE_TOPIC_XXXX from the map WAIT was put back into), its pairs in the
order of 4.9's HashMap (``java_properties_string``); each message of a batch keeps its own
pairs, followed by the batch's (its WAIT; not its UNIQ_KEY) and CLUSTER, as 4.9's batch encoder
writes them.

CONSUMER_SEND_MSG_BACK (offset, group, delayLevel, maxReconsumeTimes, originMsgId) stores the
failed message again in ``%RETRY%<group>`` with reconsumeTimes + 1, RETRY_TOPIC and
ORIGIN_MESSAGE_ID, delayed by level (0 → 3 + reconsumeTimes); after maxReconsumeTimes
(the group's retryMaxTimes, 16) or with a negative level it goes to ``%DLQ%<group>``
(readable and writable, as RocketMQ creates it since 4.9.3, so consumers can read it; before,
it was write-only). With ACL on, the account must also be allowed to SUB the topic of the record it names
(NO_PERMISSION otherwise; 4.9 checks the group only, so any record could be copied to a retry
topic the account reads).

A plain send to ``%RETRY%<group>`` (how a consumer re-sends a message when its send-back
failed) is checked as the Java broker's handleRetryAndDLQ does: the group must exist
(SUBSCRIPTION_GROUP_NOT_EXIST), and a message whose header reconsumeTimes has reached
maxReconsumeTimes (header ``l``, else the group's retryMaxTimes) is stored in
``%DLQ%<group>`` queue 0 without its delay level.

Transactional messages (with ``transactions``, a TransactionalMessageService, as the broker
wires it): a message whose TRAN_MSG property is "true" (any case, as Java's
Boolean.parseBoolean) is a half message, stored in RMQ_SYS_TRANS_HALF_TOPIC; with
``rejectTransactionMessage`` it is NO_PERMISSION "the broker[<brokerIP1>] sending transaction
message is forbidden", as 4.9. A sysFlag with the transaction type PREPARED or ROLLBACK but no
TRAN_MSG is refused NO_PERMISSION (its record would enter no ConsumeQueue: 4.9 stores it and
never delivers it); a batch with a transaction type, or TRAN_MSG, is MESSAGE_ILLEGAL (4.9's
CommitLog refuses it so). A send-back of a half (PREPARED or ROLLBACK) record is refused with
NO_PERMISSION too. END_TRANSACTION is EndTransactionProcessor's (``end_transaction``); with ACL
on, its account must be allowed to PUB the half's real topic (NO_PERMISSION; 4.9: no check). Without
``transactions`` every transactional send is refused, and END_TRANSACTION gets NO_PERMISSION
or, oneway, a WARN line at most once a minute.

A send into a topic whose config is not on disk (its creation by this send, or an earlier
change, could not be saved: a full disk) is refused with SYSTEM_ERROR and a remark naming the
cause, and nothing is stored, until topics.json is saved again (TopicConfigManager); so are a
send-back and a plain send into ``%RETRY%``/``%DLQ%`` topics in that state. RocketMQ 4.9 stores
and acknowledges it, and a crash then forgets the topic and hides the message.

SEND_REPLY_MESSAGE(_V2), a reply to a request: pushed to the requester's connection (its
REPLY_TO_CLIENT, among the producers) with PUSH_REPLY_MESSAGE_TO_CLIENT and stored
(``store_reply_message_enable``); SYSTEM_ERROR with 4.9's remark when it cannot be pushed.
Every send's answer carries MSG_REGION and TRACE_ON (``regionId``, ``traceOn``), and, as RocketMQ
5.x, every message of a SEND_MESSAGE(_V2) or SEND_BATCH_MESSAGE stores both in its properties
(``with_trace_properties``; a reply and a send-back do not add them, as 5.3.3); a 4.9 broker
stores them only with a send hook registered. A batch's own UNIQ_KEY (5.x clients give the
envelope one) is not appended to its messages (``batch_properties_suffix``): each keeps its id.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from pumice.acl.permission import PUB
from pumice.acl.plain_access_validator import read_refusal
from pumice.acl.plain_permission_manager import PlainPermissionManager
from pumice.broker.broker_stats_manager import BrokerStatsManager
from pumice.broker.producer_manager import ProducerManager
from pumice.broker.put_message_waiter import PutMessageWaiter
from pumice.broker.recall_message_processor import recall_handle_of
from pumice.broker.timer_message_hook import REFUSAL_CODES, TIMER_TOPIC
from pumice.broker.topic_config_manager import check_topic_name, is_not_allowed_send_topic
from pumice.broker.transactional_message_service import TransactionalMessageService
from pumice.common.message import HostAddress, MessageExtBatch, MessageExtBrokerInner, host_address
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import (
    HASH_MAP_ORDERS,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    get_property,
    java_properties_string,
    message_properties_to_string,
    string_to_message_properties,
)
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.common.mix_all import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.compression import COMPRESSION_TYPE_MASK, decompress
from pumice.native import NATIVE
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_api import MessageStore
from pumice.store.put_message_result import PutMessageResult, PutMessageStatus

log = logging.getLogger(__name__)

_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_TRAN_MSG = MessageConst.PROPERTY_TRANSACTION_PREPARED
_TRAN_PAIR = _TRAN_MSG + "\x01"
_TRAN_MASK = MessageSysFlag.TRANSACTION_MASK
# transaction types whose record enters no ConsumeQueue: stored, it would never be delivered
_UNDELIVERED_TYPES = (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)
_TRANSACTION_TYPE_NAMES = {
    MessageSysFlag.TRANSACTION_NOT_TYPE: "UNKNOWN", MessageSysFlag.TRANSACTION_PREPARED_TYPE: "PREPARED",
    MessageSysFlag.TRANSACTION_COMMIT_TYPE: "COMMIT", MessageSysFlag.TRANSACTION_ROLLBACK_TYPE: "ROLLBACK",
}  # fmt: skip
TRANSACTIONS_NOT_SUPPORTED = "transactional messages are not supported by this broker yet"

V2_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes", "k": "unitMode",
    "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}  # fmt: skip
_V2_CODES = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)
_native = NATIVE
DLQ_PERM = PERM_WRITE | PERM_READ  # 4.9.3 on; write-only before (a consumer of the DLQ got NO_PERMISSION)
PROPERTY_REPLY_TO_CLIENT = MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT
PROPERTY_PUSH_REPLY_TIME = MessageConst.PROPERTY_PUSH_REPLY_TIME
PUSH_REPLY_TIMEOUT_S = 10.0  # Broker2Client.callClient

_STATUS_TO_RESPONSE: dict[PutMessageStatus, tuple[ResponseCode, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (
        ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. msg properties length limit 32k."),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL, "the message properties are too long"),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE, None),
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
    **{status: (code, None) for status, code in REFUSAL_CODES.items()},  # the remark is the result's
}  # fmt: skip
_SENT = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
         PutMessageStatus.SLAVE_NOT_AVAILABLE)  # fmt: skip


class TopicsLike(Protocol):
    def select_topic_config(self, topic: str) -> Any: ...

    def is_order_topic(self, topic: str) -> bool: ...

    def create_topic_in_send_message_method(
        self, topic: str, default_topic: str, remote_addr: str, client_default_topic_queue_nums: int,
        topic_sys_flag: int,
    ) -> Any: ...  # fmt: skip

    def create_topic_in_send_message_back_method(
        self, topic: str, client_default_topic_queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> Any: ...

    def unsaved_topic_cause(self, topic: str) -> str | None: ...

    def retry_persist(self) -> bool | None: ...


# topic, sysFlag, queueId, bornTimestamp, flag, reconsumeTimes, properties, batch
SendHeaderFields = tuple[str, int, int, int, int, int, str, bool]


def send_header_fields(request: RemotingCommand) -> SendHeaderFields:
    """What the send path reads of a SEND_MESSAGE(_V2)/SEND_BATCH_MESSAGE/SEND_REPLY_MESSAGE(_V2)
    header, in one call; ``request.ext_fields`` is left under the code 10 names (``header``).
    Native where ``pumice._native`` is loaded, else (and for any value off its fast path)
    ``send_header_fields_pure``, which raises MissingFieldError for a missing or bad field."""
    v2 = request.code in _V2_CODES
    if _native is not None:
        got = _native.send_header_fields(request.ext_fields, v2)
        if got is not None:
            request.ext_fields, fields = got
            return fields  # type: ignore[no-any-return]
    return send_header_fields_pure(request, v2)


def send_header_fields_pure(request: RemotingCommand, v2: bool) -> SendHeaderFields:
    """``send_header_fields``' twin (the reference)."""
    if v2:
        request.ext_fields = {V2_NAMES.get(k, k): v for k, v in request.ext_fields.items()}
    topic = request.ext_str("topic", required=True) or ""
    request.ext_str("producerGroup", required=True)
    queue_id = request.ext_int("queueId", -1)
    assert queue_id is not None
    return (
        topic,
        request.ext_int("sysFlag", 0) or 0,
        queue_id,
        request.ext_long("bornTimestamp", 0) or 0,
        request.ext_int("flag", 0) or 0,
        request.ext_int("reconsumeTimes", 0) or 0,
        request.ext_str("properties", "") or "",
        request.ext_bool("batch"),
    )


def send_properties(header_props: str, cluster: str) -> tuple[dict[str, str], str, str | None]:
    """A single message's properties as the broker stores them: the header's pairs with CLUSTER;
    the stored string without WAIT (as 4.9.4 and later), in 4.9's HashMap order; the map with WAIT
    put back (a delayed message's copy is rebuilt from it, as in 4.9), and the WAIT value. Native
    where ``pumice._native`` is loaded and the names' HashMap order is known, else
    ``send_properties_pure``."""
    if _native is not None:
        got = _native.send_properties(header_props, cluster, HASH_MAP_ORDERS)
        if got is not None:
            return got  # type: ignore[no-any-return]
    return send_properties_pure(header_props, cluster)


def send_properties_pure(header_props: str, cluster: str) -> tuple[dict[str, str], str, str | None]:
    """``send_properties``' twin (the reference)."""
    props = string_to_message_properties(header_props)
    props[MessageConst.PROPERTY_CLUSTER] = cluster
    wait_value = props.pop(_WAIT, None)
    stored = java_properties_string(props)  # without WAIT, in 4.9's HashMap order
    if wait_value is not None:
        props[_WAIT] = wait_value  # put back, as 4.9: a delayed message's copy is rebuilt with it
    return props, stored, wait_value


def with_trace_properties(header_props: str, region_id: str, trace_on: bool) -> str:
    """The header's properties with MSG_REGION and TRACE_ON put in (over the client's), as 5.x's
    buildMsgContext does for every SEND_MESSAGE(_V2) and SEND_BATCH_MESSAGE: 5.x stores them in
    each message, and its client (5.3.1+) records no consumer trace of a message without
    MSG_REGION. A 4.9 broker stores them only when a send hook is registered."""
    region = MessageConst.PROPERTY_MSG_REGION + NAME_VALUE_SEPARATOR + region_id
    switch = MessageConst.PROPERTY_TRACE_SWITCH + NAME_VALUE_SEPARATOR + ("true" if trace_on else "false")
    pairs = region + PROPERTY_SEPARATOR + switch
    if not header_props:
        return pairs
    if header_props.endswith(PROPERTY_SEPARATOR):
        return header_props + pairs
    return header_props + PROPERTY_SEPARATOR + pairs


def batch_properties_suffix(header_props: str, cluster: str) -> str:
    """What follows each message's own properties in a stored batch: the batch's pairs and
    CLUSTER, in 4.9's HashMap order, as the batch encoder appends them; without the batch's
    UNIQ_KEY, which 5.x clients give the envelope (4.9.8's give it none): appended, it would
    replace each message's own id with one shared id."""
    props = string_to_message_properties(header_props)
    props.pop(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, None)
    props[MessageConst.PROPERTY_CLUSTER] = cluster
    return java_properties_string(props)


def wait_store_msg_ok(value: str | None) -> bool:
    """Message.isWaitStoreMsgOK: the WAIT property absent, or "true" in any case (Java's
    Boolean.parseBoolean). A message with WAIT "false" (``setWaitStoreMsgOK(false)``) is
    answered once stored: 4.9's handleDiskFlush and handleHA wait for neither the disk nor a
    slave for it, so it is SEND_OK on a SYNC_MASTER without a slave."""
    return value is None or value.lower() == "true"


class RateLimitedWarning:
    """A WARN line at most once per ``interval_s``; the next line logged says how many were
    left out in between (none is dropped without a trace for good)."""

    def __init__(self, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._next = float("-inf")
        self.left_out = 0

    def warn(self, msg: str, *args: object) -> bool:
        now = self.clock()
        if now < self._next:
            self.left_out += 1
            return False
        self._next = now + self.interval_s
        if self.left_out:
            msg += " (and %d more like it since the last such warning)"
            args = (*args, self.left_out)
            self.left_out = 0
        log.warning(msg, *args)
        return True


class SendMessageProcessor:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicsLike,
        *,
        store_host: str,
        cluster_name: str,
        broker_perm: int = 6,
        subscription_groups: Any = None,
        region_id: str = "DefaultRegion",
        trace_on: bool = True,
        transactions: TransactionalMessageService | None = None,
        reject_transaction_message: bool = False,
        producers: ProducerManager | None = None,
        store_reply_message_enable: bool = True,
        stats: BrokerStatsManager | None = None,
        acl: PlainPermissionManager | None = None,
    ) -> None:
        # with ACL on: a send-back's record must be of a topic the account may read
        self.acl = acl
        # request-reply: the requester's connection, by client id; whether replies are stored too
        self.producers = producers
        self.store_reply_message_enable = store_reply_message_enable
        self.store = store
        # half messages and END_TRANSACTION (None: refused, as before transactions were built)
        self.transactions = transactions
        self.reject_transaction_message = reject_transaction_message
        # added to every send's answer, as 4.9: the Java client's trace records the region
        self.region_id = region_id
        self.trace_on = trace_on
        self.topics = topics
        self.store_host = host_address(store_host)
        self.broker_name = ""  # a timer message's recallHandle names it (the broker sets it)
        self.store_addr = store_host
        self.cluster_name = cluster_name
        self.broker_perm = broker_perm
        self.subscription_groups = subscription_groups
        self._waiter = PutMessageWaiter(store)
        self._valid_topics: set[str] = set()  # names that passed check_topic_name
        self._dispatch_pending = False
        self._born_hosts: dict[str, HostAddress] = {}  # channel address → (ip bytes, port)
        self.stats = stats if stats is not None else BrokerStatsManager(cluster_name)
        broker_ip = store_host.rpartition(":")[0] or store_host  # brokerIP1, as 4.9's remark names it
        self.send_forbidden = f"the broker[{broker_ip}] sending message is forbidden"
        self.transaction_forbidden = f"the broker[{broker_ip}] sending transaction message is forbidden"
        self.end_transaction_forbidden = f"the broker[{broker_ip}] end transaction is forbidden"
        self.transaction_send_warning = RateLimitedWarning()
        self.end_transaction_warning = RateLimitedWarning()

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.CONSUMER_SEND_MSG_BACK:
            return await self.consumer_send_msg_back(channel, request)
        if request.code == RequestCode.END_TRANSACTION:
            if self.transactions is None:
                return self.end_transaction_refused(channel, request)
            return await self.end_transaction(channel, request)
        response = await self.send_message(channel, request)
        if response is not None:
            response.ext_fields["MSG_REGION"] = self.region_id
            response.ext_fields["TRACE_ON"] = "true" if self.trace_on else "false"
        return response

    async def send_message(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE and SEND_REPLY_MESSAGE(_V2)."""
        reply = request.code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)
        req = request
        topic, sys_flag, queue_id, born_ts, flag, reconsume, header_props, batch = send_header_fields(req)
        batch = not reply and (request.code == RequestCode.SEND_BATCH_MESSAGE or batch)
        if not reply:
            header_props = with_trace_properties(header_props, self.region_id, self.trace_on)
        # a broker without write permission still takes sends, but for order topics, as 4.9: the
        # name servers' routes stop producers; an order topic's queues must not move meanwhile
        if not self.broker_perm & PERM_WRITE and self.topics.is_order_topic(topic):
            return req.make_response(ResponseCode.NO_PERMISSION, self.send_forbidden)
        if topic not in self._valid_topics:
            bad_name = check_topic_name(topic)
            if bad_name is not None:
                return req.make_response(ResponseCode.SYSTEM_ERROR, bad_name)
            if len(self._valid_topics) < 10_000:
                self._valid_topics.add(topic)
        if is_not_allowed_send_topic(topic):
            return req.make_response(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        half = False
        if sys_flag & _TRAN_MASK or _TRAN_PAIR in header_props:  # before any topic is created or record stored
            refused = self._refuse_transactional(channel, req, topic, sys_flag, header_props, batch)
            if refused is not None:
                return refused
            tran_msg = get_property(header_props, _TRAN_MSG) if header_props else None
            half = tran_msg is not None and tran_msg.lower() == "true"
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            tc = self.topics.create_topic_in_send_message_method(
                topic, req.ext_str("defaultTopic", "TBW102") or "TBW102", channel.remote_addr,
                req.ext_int("defaultTopicQueueNums", 4) or 4, sys_flag,
            )  # fmt: skip
        if tc is None:
            return req.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        unsaved = self._unsaved_refusal(req, topic)
        if unsaved is not None:
            return unsaved
        if queue_id >= max(tc.read_queue_nums, tc.write_queue_nums):
            return req.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic {topic} has {tc.write_queue_nums} write queues",
            )
        if queue_id < 0:
            queue_id = random.randrange(max(tc.write_queue_nums, 1))
        born_host = self._born_hosts.get(channel.remote_addr)
        if born_host is None:
            born_host = host_address(channel.remote_addr)
            if len(self._born_hosts) > 10_000:
                self._born_hosts.clear()
            self._born_hosts[channel.remote_addr] = born_host
        if batch:
            return await self._put_batch(req, topic, queue_id, sys_flag, born_ts, born_host, reconsume, header_props)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            moved = self._retry_or_dlq(req, topic, reconsume)
            if isinstance(moved, RemotingCommand):
                return moved
            if moved is not None:
                topic, queue_id = moved
                props = string_to_message_properties(header_props)
                props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
                header_props = message_properties_to_string(props)
        props, stored, wait_value = send_properties(header_props, self.cluster_name)
        wait = wait_store_msg_ok(wait_value)
        msg = MessageExtBrokerInner(
            topic=topic,
            body=bytes(request.body),
            queue_id=queue_id,
            flag=flag,
            properties=props,
            sys_flag=sys_flag,
            born_timestamp=born_ts,
            born_host=born_host,
            store_host=self.store_host,
            reconsume_times=reconsume,
            properties_string=stored,
        )
        if half and self.transactions is not None:
            self.transactions.prepare_message(msg)
        if reply:
            return await self._reply_message(channel, req, msg, queue_id, header_props, wait)
        result = await self._await_flush(self._put((msg,)), wait)
        self._count(topic, result)
        response = self._response(req, result, queue_id, props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
        if response.code == ResponseCode.SUCCESS and msg.topic == TIMER_TOPIC:  # routed by the put hook
            handle = recall_handle_of(msg, self.broker_name)
            if handle is not None:
                response.ext_fields["recallHandle"] = handle
        return response

    async def _reply_message(
        self, channel: Channel, req: RemotingCommand, msg: MessageExtBrokerInner, queue_id: int, header_props: str,
        wait: bool,
    ) -> RemotingCommand:  # fmt: skip
        """SEND_REPLY_MESSAGE(_V2), as 4.9's ReplyMessageProcessor: the reply is pushed to the
        requester's connection (REPLY_TO_CLIENT) with PUSH_REPLY_MESSAGE_TO_CLIENT, and stored
        too with storeReplyMessageEnable; the answer is SUCCESS only if the push was."""
        remark = await self._push_reply(channel, req, msg, header_props)
        ext: dict[str, Any] = {"msgId": "0", "queueId": queue_id, "queueOffset": 0} if remark is None else {}
        if self.store_reply_message_enable:
            result = await self._await_flush(self._put((msg,)), wait)
            amr = result.append_message_result
            if result.status in _SENT and amr is not None:
                self._count(msg.topic, result)
                ext = {"msgId": amr.msg_id, "queueId": queue_id, "queueOffset": amr.logics_offset}
            else:
                log.warning("reply message to %s not stored: %s %s", msg.topic, result.status.name, result.remark)
        if remark is None:
            return req.make_response(ResponseCode.SUCCESS, ext_fields=ext)
        return req.make_response(ResponseCode.SYSTEM_ERROR, remark, ext_fields=ext)

    async def _push_reply(
        self, channel: Channel, req: RemotingCommand, msg: MessageExtBrokerInner, header_props: str
    ) -> str | None:
        """Push the reply to its requester (pushReplyMessage); None, or why it was not."""
        sender = msg.properties.get(PROPERTY_REPLY_TO_CLIENT)
        if sender is None:
            log.warning("%s is null, can not reply message", PROPERTY_REPLY_TO_CLIENT)
            return f"reply message properties[{PROPERTY_REPLY_TO_CLIENT}] is null"
        target = self.producers.find_channel(sender) if self.producers is not None else None
        if target is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning(remark)
            return remark
        now_ms = int(time.time() * 1000)
        props = string_to_message_properties(header_props)
        props[PROPERTY_PUSH_REPLY_TIME] = str(now_ms)
        f = req.ext_fields.get
        fields = {
            "bornHost": channel.remote_addr, "storeHost": self.store_addr, "storeTimestamp": now_ms,
            "producerGroup": f("producerGroup"), "topic": f("topic"), "defaultTopic": f("defaultTopic"),
            "defaultTopicQueueNums": f("defaultTopicQueueNums"), "queueId": f("queueId"), "sysFlag": f("sysFlag"),
            "bornTimestamp": f("bornTimestamp"), "flag": f("flag"), "properties": message_properties_to_string(props),
            "reconsumeTimes": f("reconsumeTimes"), "unitMode": f("unitMode", False),
        }  # fmt: skip
        present = {k: v for k, v in fields.items() if v is not None}
        push = RemotingCommand(code=RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, language="JAVA", ext_fields=present,
                               body=msg.body)  # fmt: skip
        try:
            answer = await target.invoke(push, PUSH_REPLY_TIMEOUT_S)
        except (RemotingConnectError, RemotingTimeoutError) as e:
            log.warning("push reply message to <%s> fail: %s", sender, e)
            return f"push reply message to {sender}fail."  # 4.9's remark, space and all
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", sender, answer.remark)
            return f"push reply message to {sender}fail."
        return None

    def _refuse_transactional(
        self, channel: Channel, req: RemotingCommand, topic: str, sys_flag: int, header_props: str, batch: bool
    ) -> RemotingCommand | None:
        """The refusal of a transactional send (see the module docstring), or None when it is
        to be stored (a half message, or not transactional). A COMMIT sysFlag alone is
        delivered (its record enters the ConsumeQueue), as in 4.9."""
        tran_type = sys_flag & _TRAN_MASK
        tran_msg = get_property(header_props, _TRAN_MSG) if header_props else None
        is_half = tran_msg is not None and tran_msg.lower() == "true"
        why: str | None = TRANSACTIONS_NOT_SUPPORTED
        if self.transactions is None:  # every transactional send is refused
            if batch and tran_type:
                code = ResponseCode.MESSAGE_ILLEGAL
                remark = (
                    f"a batch message cannot be transactional (its sysFlag {sys_flag} has the transaction type "
                    f"{_TRANSACTION_TYPE_NAMES[tran_type]}); {TRANSACTIONS_NOT_SUPPORTED}"
                )
            elif is_half or tran_type in _UNDELIVERED_TYPES:
                code = ResponseCode.NO_PERMISSION
                remark = f"{self.transaction_forbidden}: {TRANSACTIONS_NOT_SUPPORTED}"
            else:
                return None
        elif batch and (tran_type or is_half):  # 4.9's CommitLog refuses a batch with a transaction type
            code = ResponseCode.MESSAGE_ILLEGAL
            remark = why = f"a batch message cannot be transactional (sysFlag {sys_flag}, {_TRAN_MSG}={tran_msg})"
        elif is_half and not self.reject_transaction_message:
            return None  # a half message: stored in RMQ_SYS_TRANS_HALF_TOPIC
        elif is_half:
            code, remark, why = ResponseCode.NO_PERMISSION, self.transaction_forbidden, "rejectTransactionMessage=true"
        elif tran_type in _UNDELIVERED_TYPES:  # 4.9 stores such a record and never delivers it
            code = ResponseCode.NO_PERMISSION
            remark = why = (
                f"{self.transaction_forbidden}: sysFlag {sys_flag} has the transaction type "
                f"{_TRANSACTION_TYPE_NAMES[tran_type]} without {_TRAN_MSG}=true, so it would never be delivered"
            )
        else:
            return None
        self.transaction_send_warning.warn(
            "refused a transactional message from %s (producerGroup %s, topic %s, sysFlag %d, %s=%s): %s",
            channel.remote_addr, req.ext_str("producerGroup"), topic, sys_flag, _TRAN_MSG, tran_msg, why,
        )  # fmt: skip
        return req.make_response(code, remark)

    async def end_transaction(self, channel: Channel, req: RemotingCommand) -> RemotingCommand | None:
        """END_TRANSACTION (37), as 4.9's EndTransactionProcessor: COMMIT stores the half in its
        real topic, then its op record; ROLLBACK writes the op record only; UNKNOWN leaves it to
        the check. A oneway request (how clients send it) gets no answer, so what fails is
        logged; a two-way one is answered."""
        assert self.transactions is not None
        if not self.store.is_master():
            log.warning("a slave ends no transaction: END_TRANSACTION from %s refused", channel.remote_addr)
            return None if req.is_oneway else req.make_response(ResponseCode.SLAVE_NOT_AVAILABLE)
        group = req.ext_str("producerGroup", required=True) or ""
        queue_offset = req.ext_long("tranStateTableOffset", required=True)
        commit_log_offset = req.ext_long("commitLogOffset", required=True)
        state = req.ext_int("commitOrRollback", required=True)
        from_check = req.ext_bool("fromTransactionCheck", False)
        assert queue_offset is not None and commit_log_offset is not None and state is not None
        details = (
            f"producerGroup={group}, msgId={req.ext_fields.get('msgId')}, commitLogOffset={commit_log_offset}, "
            f"tranStateTableOffset={queue_offset}, fromTransactionCheck={from_check}"
        )
        if state not in (MessageSysFlag.TRANSACTION_COMMIT_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE):
            if state == MessageSysFlag.TRANSACTION_NOT_TYPE:
                log.warning("producer %s left its transaction pending (%s): the check will ask", channel.remote_addr,
                            details)  # fmt: skip
                return None if req.is_oneway else req.make_response(ResponseCode.SUCCESS)
            log.warning("END_TRANSACTION from %s with commitOrRollback %s (%s) ignored", channel.remote_addr, state,
                        details)  # fmt: skip
            return None if req.is_oneway else req.make_response(
                ResponseCode.SYSTEM_ERROR, f"commitOrRollback {state} is not 8 (COMMIT), 12 (ROLLBACK) or 0 (UNKNOWN)"
            )  # fmt: skip
        commit = state == MessageSysFlag.TRANSACTION_COMMIT_TYPE
        half = self.transactions.find_half(commit_log_offset)
        remark = self.transactions.check_prepare_message(half, group, queue_offset, commit_log_offset)
        if remark is not None or half is None:
            log.warning("%s from %s not done: %s (%s)", "COMMIT" if commit else "ROLLBACK", channel.remote_addr,
                        remark, details)  # fmt: skip
            return None if req.is_oneway else req.make_response(ResponseCode.SYSTEM_ERROR, remark)
        real_topic = half.properties.get(MessageConst.PROPERTY_REAL_TOPIC) or half.topic
        refused = read_refusal(self.acl, channel.remote_addr, req, real_topic, PUB)
        if refused is not None:  # only an account that may send to the topic ends its transactions
            log.warning("%s from %s refused: %s (%s)", "COMMIT" if commit else "ROLLBACK", channel.remote_addr,
                        refused, details)  # fmt: skip
            return None if req.is_oneway else req.make_response(ResponseCode.NO_PERMISSION, refused)
        response = req.make_response(ResponseCode.SUCCESS)
        ended = self.transactions.ended_as(half)
        if ended is not None:  # another copy of this half was ended: its op record only
            log.info("%s from %s: the transaction was already ended (%s) through another copy of its half; "
                     "only this copy's op record is written (%s)", "COMMIT" if commit else "ROLLBACK",
                     channel.remote_addr, ended, details)  # fmt: skip
            commit = False
        else:  # marked before the await: a second END_TRANSACTION meanwhile sees it
            self.transactions.mark_ended(half, "COMMIT" if commit else "ROLLBACK")
        if commit:
            final = self.transactions.end_message_transaction(half, commit_log_offset)
            result = await self._await_flush(self._put((final,)), True)
            if result.status not in _SENT:
                self.transactions.unmark_ended(half)
                code, why = _STATUS_TO_RESPONSE.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"))
                log.warning("COMMIT from %s not stored: %s %s (%s)", channel.remote_addr, result.status.name,
                            result.remark or why, details)  # fmt: skip
                return None if req.is_oneway else req.make_response(code, result.remark or why or result.status.name)
            self._count(final.topic, result)
        op = await self._await_flush(self._put((self.transactions.op_message(half),)), False)
        if op.status is not PutMessageStatus.PUT_OK:
            log.warning("op record of %s not stored (%s): the check will ask about it again", details, op.status.name)
        return None if req.is_oneway else response

    def end_transaction_refused(self, channel: Channel, req: RemotingCommand) -> RemotingCommand | None:
        """END_TRANSACTION (37) on a broker without transactions: no half message is ever stored
        here (every one is refused at send), so there is nothing to commit or roll back. A
        request that waits for an answer gets NO_PERMISSION and why; a oneway one (how the Java
        and C++ producers send it) gets none, so it is logged at WARN, at most once a minute.
        Never raises: a oneway request's error would be dropped unseen."""
        f = req.ext_fields.get
        state = f("commitOrRollback")
        try:
            state_name = _TRANSACTION_TYPE_NAMES.get(int(state), str(state))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            state_name = str(state)
        details = (
            f"producerGroup={f('producerGroup')}, msgId={f('msgId')}, transactionId={f('transactionId')}, "
            f"commitLogOffset={f('commitLogOffset')}, commitOrRollback={state_name}, "
            f"fromTransactionCheck={f('fromTransactionCheck')}"
        )
        self.end_transaction_warning.warn(
            "dropped %sEND_TRANSACTION from %s (%s): %s; the producer's half message was refused at send",
            "a oneway " if req.is_oneway else "an ", channel.remote_addr, details, TRANSACTIONS_NOT_SUPPORTED,
        )  # fmt: skip
        if req.is_oneway:
            return None
        return req.make_response(
            ResponseCode.NO_PERMISSION,
            f"{self.end_transaction_forbidden}: {TRANSACTIONS_NOT_SUPPORTED}, so it holds no half message "
            f"to commit or roll back ({details})",
        )

    async def _put_batch(
        self,
        req: RemotingCommand,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_ts: int,
        born_host: HostAddress,
        reconsume: int,
        header_props: str,
    ) -> RemotingCommand:
        if header_props and get_property(header_props, MessageConst.PROPERTY_DELAY_TIME_LEVEL):
            return req.make_response(ResponseCode.MESSAGE_ILLEGAL, "a batch message cannot have a delay level")
        body = req.body
        if sys_flag & MessageSysFlag.COMPRESSED_FLAG:
            # rocketmq-client-cpp (the PyPI rocketmq package's library) zlib-compresses a whole batch
            # body over 4 KiB and flags the request; inflate it so its messages are stored plain
            try:
                body = decompress(body, sys_flag, self.store.config.max_message_size)
            except ValueError as e:
                return req.make_response(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"the batch is flagged compressed but does not inflate to at most maxMessageSize bytes: {e}",
                )
            sys_flag &= ~(MessageSysFlag.COMPRESSED_FLAG | COMPRESSION_TYPE_MASK)
        batch = MessageExtBatch(
            topic=topic,
            queue_id=queue_id,
            body=body,
            # each message's own properties, then the batch's (its WAIT too) and CLUSTER, as 4.9's
            # MessageExtBatchEncoder appends them; not the batch's UNIQ_KEY (5.x clients put one)
            properties_suffix=batch_properties_suffix(header_props, self.cluster_name),
            sys_flag=sys_flag,
            born_timestamp=born_ts,
            born_host=born_host,
            store_host=self.store_host,
            reconsume_times=reconsume,
        )
        result = await self._await_flush(
            self.store.put_message_batch(batch, wait_flush=False, caller_dispatches=self.store.dispatch_on_caller),
            wait_store_msg_ok(get_property(header_props, _WAIT) if header_props else None),
        )
        self._count(topic, result)
        uniq = get_property(header_props, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) if header_props else None
        return self._response(req, result, queue_id, uniq)

    def _retry_or_dlq(
        self, req: RemotingCommand, topic: str, reconsume: int
    ) -> RemotingCommand | tuple[str, int] | None:
        """A plain send to ``%RETRY%<group>`` (a consumer whose send-back failed re-sends the
        message itself): the group must exist, and once reconsumeTimes reaches the header's
        maxReconsumeTimes (else the group's retryMaxTimes) the message goes to ``%DLQ%<group>``
        queue 0, undelayed. Returns the new (topic, queue), None to keep it, or an error."""
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        if self.subscription_groups is None:
            return None
        sub = self.subscription_groups.find_subscription_group_config(group)
        if sub is None:
            return req.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = req.ext_int("maxReconsumeTimes")
        if max_times is None:
            max_times = getattr(sub, "retry_max_times", 16)
        if reconsume < max_times:
            return None
        dlq = DLQ_GROUP_TOPIC_PREFIX + group
        self.topics.create_topic_in_send_message_back_method(dlq, 1, DLQ_PERM)
        unsaved = self._unsaved_refusal(req, dlq)
        if unsaved is not None:
            return unsaved
        return dlq, 0

    def _unsaved_refusal(self, req: RemotingCommand, topic: str) -> RemotingCommand | None:
        """SYSTEM_ERROR (a producer retries it, on another broker) while ``topic``'s config is
        not on disk (its save failed, on a full disk say): a message stored in it and
        acknowledged would be unreadable after a crash, its topic forgotten. The file is saved
        again first when its back-off has passed, so a send finds it saved as soon as it can be."""
        if self.topics.unsaved_topic_cause(topic) is None:
            return None
        self.topics.retry_persist()
        cause = self.topics.unsaved_topic_cause(topic)
        if cause is None:
            return None
        return req.make_response(
            ResponseCode.SYSTEM_ERROR,
            f"the config of topic[{topic}] could not be saved ({cause}): no message is stored in it until it is "
            f"(retried every few seconds), try again later",
        )

    def _count(self, topic: str, result: PutMessageResult) -> None:
        amr = result.append_message_result
        if amr is not None and result.status in _SENT:
            self.stats.inc_put(topic, amr.msg_num, amr.wrote_bytes)

    async def consumer_send_msg_back(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        """A consumer failed a message: store it again in %RETRY%<group>, delayed by its level
        (0 means 3 + reconsumeTimes), or in %DLQ%<group> after maxReconsumeTimes or when the
        delay level is negative."""
        offset = req.ext_long("offset", required=True)
        group = req.ext_str("group", required=True) or ""
        delay_level = req.ext_int("delayLevel", 0) or 0
        sub = self.subscription_groups.find_subscription_group_config(group) if self.subscription_groups else None
        if self.subscription_groups is not None and sub is None:
            return req.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        if not self.broker_perm & PERM_WRITE:
            return req.make_response(ResponseCode.NO_PERMISSION, self.send_forbidden)
        retry_queue_nums = getattr(sub, "retry_queue_nums", 1)
        if retry_queue_nums <= 0:  # the group wants no retries: the message is dropped, as upstream
            return req.make_response(ResponseCode.SUCCESS)
        retry_topic = RETRY_GROUP_TOPIC_PREFIX + group
        retry_tc = self.topics.create_topic_in_send_message_back_method(retry_topic, retry_queue_nums, 6)
        if not retry_tc.perm & PERM_WRITE:
            return req.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{retry_topic}] sending message is forbidden"
            )
        unsaved = self._unsaved_refusal(req, retry_topic)
        if unsaved is not None:
            return unsaved
        max_times = req.ext_int("maxReconsumeTimes")  # 0 is a value: straight to the DLQ
        if max_times is None:
            max_times = getattr(sub, "retry_max_times", 16)
        assert offset is not None
        m = self.store.look_message_by_offset(offset)
        if m is None:
            return req.make_response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        refused = read_refusal(self.acl, channel.remote_addr, req, m.topic)
        if refused is not None:  # else any record could be copied into the group's retry topic
            return req.make_response(ResponseCode.NO_PERMISSION, refused)
        if m.sys_flag & _TRAN_MASK in _UNDELIVERED_TYPES:
            # a half (or rolled back) record was never delivered, and its copy would enter no
            # retry queue: storing it would lose it silently
            return req.make_response(
                ResponseCode.NO_PERMISSION,
                f"the message at commitLogOffset {offset} is a transaction record of type "
                f"{_TRANSACTION_TYPE_NAMES[m.sys_flag & _TRAN_MASK]} (sysFlag {m.sys_flag}), which is never "
                f"delivered: it cannot be sent back; {TRANSACTIONS_NOT_SUPPORTED}",
            )
        props = dict(m.properties)
        props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, m.topic)
        # the first failure's id (the header's originMsgId is the client's word: not stored)
        if not props.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, "").strip():
            props[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = m.msg_id
        props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        props[_WAIT] = "false"  # as 4.9 stores the copy (it answers before the flush; Pumice waits)
        if m.reconsume_times >= max_times or delay_level < 0:
            topic, queue_id = DLQ_GROUP_TOPIC_PREFIX + group, 0
            self.topics.create_topic_in_send_message_back_method(topic, 1, DLQ_PERM)
            unsaved = self._unsaved_refusal(req, topic)
            if unsaved is not None:
                return unsaved
        else:
            topic = retry_topic
            # a queue the topic has (an older retry topic may have fewer than the group asks now)
            queue_id = random.randrange(max(1, min(retry_queue_nums, retry_tc.write_queue_nums)))
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level or 3 + m.reconsume_times)
        inner = MessageExtBrokerInner(
            topic=topic, body=m.body, queue_id=queue_id, flag=m.flag, properties=props, sys_flag=m.sys_flag,
            born_timestamp=m.born_timestamp, born_host=m.born_host, store_host=self.store_host,
            reconsume_times=m.reconsume_times + 1, properties_string=message_properties_to_string(props),
        )  # fmt: skip
        # always waits for the flush and the slave: 4.9 stores the copy with WAIT false and answers
        # before it is flushed, and the consumer, told SUCCESS, moves its offset past the message
        result = await self._await_flush(self._put((inner,)))
        if result.status in _SENT:
            self.stats.inc_send_back(group, props[MessageConst.PROPERTY_RETRY_TOPIC])
            return req.make_response(ResponseCode.SUCCESS)
        # as upstream: any other status is SYSTEM_ERROR named by the status (the client then sends
        # the message to the retry topic itself)
        remark = result.status.name + (f": {result.remark}" if result.remark else "")
        return req.make_response(ResponseCode.SYSTEM_ERROR, remark)

    def _put(self, msgs: tuple[MessageExtBrokerInner, ...]) -> PutMessageResult:
        """Put without blocking the loop; ``_await_flush`` then dispatches and waits."""
        return self.store.put_messages(msgs, wait_flush=False, caller_dispatches=self.store.dispatch_on_caller)

    def _dispatch_soon(self) -> None:
        """After puts: dispatch them on this loop at the end of the turn (one call for all the
        puts of the turn), so held pulls wake without a thread hand-off."""
        if not self._dispatch_pending:
            self._dispatch_pending = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_pending = False
        try:
            self.store.dispatch_now()
        except Exception:  # the dispatch thread, woken, retries what is left
            log.exception("dispatch on the event loop failed")

    async def _await_flush(self, result: PutMessageResult, wait: bool = True) -> PutMessageResult:
        """Dispatch the put on this loop, then wait for the disk and a slave as the message
        asks (``PutMessageWaiter``)."""
        if self.store.dispatch_on_caller and result.status is PutMessageStatus.PUT_OK:
            self._dispatch_soon()
        return await self._waiter.wait_stored(result, wait)

    @staticmethod
    def _response(req: RemotingCommand, result: PutMessageResult, queue_id: int, uniq: str | None) -> RemotingCommand:
        code, remark = _STATUS_TO_RESPONSE.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        if result.status not in _SENT or result.append_message_result is None:
            return req.make_response(code, result.remark or remark or result.status.name)
        amr = result.append_message_result
        ext = {"msgId": amr.msg_id, "queueId": queue_id, "queueOffset": amr.logics_offset}
        if uniq:
            ext["transactionId"] = uniq
        return req.make_response(code, remark, ext_fields=ext)
