"""RECALL_MESSAGE (370): a producer takes back a timer message before it is due (RocketMQ
5.3.3's RecallMessageProcessor and RecallMessageHandle).

The send answer of a timer message (SEND_MESSAGE(_V2), not a batch, a send-back or a retry
topic) carries ``recallHandle``: URL-safe base64 (padded) of ``v1 <topic> <brokerName>
<TIMER_OUT_MS + 1> <UNIQ_KEY>``, space-separated. A recall puts a marker message on the topic
with TIMER_DELIVER_MS the handle's time and TIMER_DEL_UNIQKEY ``<topic>+<UNIQ_KEY>``: the put
hook files it in the same wheel slot with the DELETE magic, and the timer then skips the
message with that key when the slot is read.

Request (ext fields): ``producerGroup``, ``topic*``, ``recallHandle*``. Answers, as 5.3.3's:

=============================================  ===================  ==========================================
case                                           code                 remark
=============================================  ===================  ==========================================
``recallMessageEnable=false`` (the default)    NO_PERMISSION (16)   recall failed, operation is forbidden
a slave                                        SLAVE_NOT_AVAILABLE  recall failed, broker service not available
no write permission and not                    SERVICE_NOT_         recall failed, broker service not available
``allowRecallWhenBrokerNotWriteable``          AVAILABLE (14)
no such topic                                  TOPIC_NOT_EXIST      recall failed, the topic[%s] not exist
a handle that does not decode                  ILLEGAL_OPERATION    recall handle is invalid
                                               (604)
the handle's topic is not ``topic``            ILLEGAL_OPERATION    recall failed, topic not match
another broker's handle                        ILLEGAL_OPERATION    recall failed, broker service not available
its time past, or beyond ``timerMaxDelaySec``  ILLEGAL_OPERATION    recall failed, timestamp invalid
the marker stored                              SUCCESS              (``msgId``: the recalled UNIQ_KEY)
the marker refused                             SYSTEM_ERROR         recall failed, execute error
=============================================  ===================  ==========================================
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import TYPE_CHECKING

from pumice.broker.timer_message_hook import TIMER_DEL_UNIQKEY, TIMER_DELIVER_MS, TIMER_OUT_MS
from pumice.common.message import MessageExtBrokerInner, host_address
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import java_properties_string
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.common.perm_name import PERM_WRITE
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_config import BrokerRole
from pumice.store.put_message_result import PutMessageStatus

if TYPE_CHECKING:
    from pumice.broker.broker_config import BrokerConfig
    from pumice.broker.topic_config_manager import TopicConfigManager
    from pumice.common.message import HostAddress
    from pumice.remoting.remoting_command import RemotingCommand
    from pumice.remoting.remoting_server import Channel
    from pumice.store.message_store_api import MessageStore

ILLEGAL_OPERATION = 604  # RocketMQ 5's ResponseCode.ILLEGAL_OPERATION
RECALL_MESSAGE_TAG = "_RECALL_TAG_"
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
           PutMessageStatus.SLAVE_NOT_AVAILABLE)  # fmt: skip


def build_handle(topic: str, broker_name: str, timestamp: str, uniq_key: str) -> str:
    return base64.urlsafe_b64encode(" ".join(("v1", topic, broker_name, timestamp, uniq_key)).encode()).decode()


def decode_handle(handle: str) -> tuple[str, str, str, str]:
    """(topic, broker name, timestamp, UNIQ_KEY); ValueError("recall handle is invalid")."""
    try:
        items = base64.urlsafe_b64decode(handle.encode()).decode().split(" ") if handle else []
    except (binascii.Error, UnicodeError, ValueError):
        items = []
    if len(items) < 5 or items[0] != "v1":
        raise ValueError("recall handle is invalid")
    return items[1], items[2], items[3], items[4]


def recall_handle_of(msg: MessageExtBrokerInner, broker_name: str) -> str | None:
    """The send answer's ``recallHandle`` of a message the put hook routed to the timer
    (5.3.3's attachRecallHandle), else None."""
    out_ms = msg.properties.get(TIMER_OUT_MS)
    real_topic = msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC)
    uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if out_ms is None or real_topic is None or real_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    try:
        timestamp = str(int(out_ms) + 1)  # the slot is floored: the marker goes into the same one
    except ValueError:
        return None
    return build_handle(real_topic, broker_name, timestamp, uniq or "null")


class RecallMessageProcessor:
    def __init__(
        self, store: MessageStore, topics: TopicConfigManager, config: BrokerConfig, store_host: HostAddress
    ) -> None:
        self.store = store
        self.topics = topics
        self.config = config
        self.store_host = store_host

    async def process_request(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        c = self.config
        region = {MessageConst.PROPERTY_MSG_REGION: c.region_id}
        if not c.recall_message_enable:
            return req.make_response(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden", region)
        unavailable = "recall failed, broker service not available"
        if self.store.config.broker_role is BrokerRole.SLAVE:
            return req.make_response(ResponseCode.SLAVE_NOT_AVAILABLE, unavailable, region)
        if not c.broker_permission & PERM_WRITE and not c.allow_recall_when_broker_not_writeable:
            return req.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, unavailable, region)
        topic = req.ext_str("topic", required=True) or ""
        handle_text = req.ext_str("recallHandle", required=True) or ""
        if self.topics.select_topic_config(topic) is None:
            return req.make_response(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist",
                                     region)  # fmt: skip
        try:
            h_topic, h_broker, h_time, uniq = decode_handle(handle_text)
        except ValueError as e:
            return req.make_response(ILLEGAL_OPERATION, str(e), region)
        if h_topic != topic:
            return req.make_response(ILLEGAL_OPERATION, "recall failed, topic not match", region)
        if h_broker != c.broker_name:
            return req.make_response(ILLEGAL_OPERATION, unavailable, region)
        now = time.time_ns() // 1_000_000
        try:
            left = int(h_time) - now
        except ValueError:
            left = -1
        if left <= 0 or left >= self.store.config.timer_max_delay_sec * 1000:
            return req.make_response(ILLEGAL_OPERATION, "recall failed, timestamp invalid", region)
        props = {
            MessageConst.PROPERTY_TAGS: RECALL_MESSAGE_TAG,
            TIMER_DEL_UNIQKEY: f"{topic}+{uniq}",  # TimerMessageStore.buildDeleteKey
            MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
            TIMER_DELIVER_MS: h_time,
            "BORN_TIMESTAMP": str(now),
            "TRACE_CONTEXT": "",
            MessageConst.PROPERTY_PRODUCER_GROUP: req.ext_str("producerGroup") or "",
        }
        marker = MessageExtBrokerInner(
            topic=topic, body=b"0", properties=props, born_timestamp=now, store_host=self.store_host,
            properties_string=java_properties_string(props),
        )  # fmt: skip
        marker.born_host = host_address(channel.remote_addr)
        result = self.store.put_messages((marker,), wait_flush=False)
        if result.status in _STORED:
            return req.make_response(ResponseCode.SUCCESS, None, {**region, "msgId": uniq})
        return req.make_response(ResponseCode.SYSTEM_ERROR, "recall failed, execute error", region)
