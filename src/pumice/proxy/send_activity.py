"""SendMessage (5.3.3's ``SendMessageActivity`` and ``ProducerProcessor`` in LOCAL mode).

Each message is checked and converted (``message_converter``), then stored through the
broker's SEND_MESSAGE processor in this process, under the producer group 5.x uses for gRPC
producers: the topic's name (so a check-back of a half message finds the producer that
registered under it). The queue: for one message with a message group, the group's Java
``hashCode`` through Guava's ``consistentHash`` over the topic's write queues; otherwise the
next queue round-robin. A topic this broker does not have: TOPIC_NOT_FOUND.

| broker answer         | entry status                                        |
|-----------------------|-----------------------------------------------------|
| SUCCESS               | OK, message_id = the client's id, offset = queue offset, transaction_id (half messages), |
|                       | recall_handle (a timer message: the broker's ``recallHandle``, for RecallMessage) |
| FLUSH_DISK_TIMEOUT    | MASTER_PERSISTENCE_TIMEOUT                          |
| FLUSH_SLAVE_TIMEOUT   | SLAVE_PERSISTENCE_TIMEOUT                           |
| SLAVE_NOT_AVAILABLE   | HA_NOT_AVAILABLE                                    |
| anything else         | the call fails: its status as ``grpc_status`` maps the code, with the broker's remark |

The answer's status is the entries' one code (its name as the message), or MULTIPLE_RESULTS
when they differ.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from pumice.acl.permission import PUB
from pumice.common.java_hash import java_string_hash
from pumice.common.message_decoder import message_properties_to_string
from pumice.proxy.activity import Activity
from pumice.proxy.grpc_status import GrpcProxyError, code_of, status
from pumice.proxy.message_converter import build_properties, sys_flag_of, validate_body
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proxy_context import ProxyContext
from pumice.proxy.transaction_activity import TransactionActivity
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

_STATUS_OF_SEND: dict[int, Any] = {
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
}


def consistent_hash(h: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (a linear congruential walk)."""
    state = h & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        next_ = int((candidate + 1) / (((state >> 33) + 1) / 2147483648.0))
        if 0 <= next_ < buckets:
            candidate = next_
        else:
            return candidate


class SendActivity:
    def __init__(self, base: Activity, transactions: TransactionActivity) -> None:
        self.base = base
        self.transactions = transactions
        self._round_robin = itertools.count()

    def _queue_id(self, request: Any, write_queue_nums: int) -> int:
        first = request.messages[0]
        group = first.system_properties.message_group if len(request.messages) == 1 else ""
        if group:
            return consistent_hash(java_string_hash(group), write_queue_nums)
        return next(self._round_robin) % write_queue_nums

    async def send_message(self, ctx: ProxyContext, request: Any) -> Any:
        b = self.base
        if not request.messages:
            b.authorize(ctx, RequestCode.SEND_MESSAGE)
            raise GrpcProxyError(pb.MESSAGE_CORRUPTED, "no message to send")
        topic = request.messages[0].topic.name
        b.authorize(ctx, RequestCode.SEND_MESSAGE, {topic: PUB})
        b.validate_topic(request.messages[0].topic)
        now_ms = int(time.time() * 1000)
        converted = []
        for m in request.messages:
            if m.topic != request.messages[0].topic:
                raise GrpcProxyError(pb.MESSAGE_CORRUPTED, "topic in message is not same")
            validate_body(m.body, b.config)
            converted.append((m, build_properties(m, topic, ctx.remote_addr, b.config, now_ms)))
        config = b.topic_config(topic)
        if config is None:
            raise GrpcProxyError(pb.TOPIC_NOT_FOUND, f"topic {topic} not exist on broker {b.broker.config.broker_name}")
        if config.write_queue_nums <= 0:
            raise GrpcProxyError(pb.FORBIDDEN, f"topic {topic} has no write queue")
        queue_id = self._queue_id(request, config.write_queue_nums)
        channel = b.channel_of(ctx)
        entries = []
        for m, props in converted:
            sys_flag = sys_flag_of(m)
            fields = {"producerGroup": topic, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                      "queueId": queue_id, "sysFlag": sys_flag, "bornTimestamp": props.get("BORN_TIMESTAMP", now_ms),
                      "flag": 0, "properties": message_properties_to_string(props),
                      "reconsumeTimes": m.system_properties.delivery_attempt, "unitMode": "false",
                      "batch": "false"}  # fmt: skip
            response = await b.call(channel, RequestCode.SEND_MESSAGE, fields, bytes(m.body))
            code = response.code
            if code == ResponseCode.SUCCESS:
                offset = int(response.ext_fields.get("queueOffset", 0))
                transaction_id = ""
                if m.system_properties.message_type == pb.TRANSACTION:
                    transaction_id = self.transactions.record(
                        topic, m.system_properties.message_id, str(response.ext_fields.get("msgId", "")), offset
                    )
                recall_handle = str(response.ext_fields.get("recallHandle", ""))
                entries.append(mpb.SendResultEntry(status=status(pb.OK), message_id=m.system_properties.message_id,
                                                   transaction_id=transaction_id, offset=offset,
                                                   recall_handle=recall_handle))  # fmt: skip
            elif code in _STATUS_OF_SEND:
                entries.append(mpb.SendResultEntry(status=status(
                    _STATUS_OF_SEND[code], f"send message failed, sendStatus={ResponseCode(code).name}")))  # fmt: skip
            else:  # the broker refused it: the whole call fails with its remark (5.3.3's MQBrokerException)
                raise GrpcProxyError(code_of(code), response.remark or str(code))
        codes = {e.status.code for e in entries}
        top = status(pb.MULTIPLE_RESULTS) if len(codes) > 1 else status(entries[0].status.code)
        return mpb.SendMessageResponse(status=top, entries=entries)
