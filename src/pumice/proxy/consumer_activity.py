"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue
(5.3.3's consumer activities over ``ConsumerProcessor`` and ``LocalMessageService``): the
broker's POP remoting codes, called in this process.

| RPC                     | broker request (5.x header fields)                                   |
|-------------------------|----------------------------------------------------------------------|
| ReceiveMessage          | POP_MESSAGE 200050: consumerGroup, topic, queueId -1 (the whole      |
|                         | broker), maxMsgNums, invisibleTime, pollTime, bornTime, initMode 1   |
|                         | (MAX), expType, exp, order, attemptId                                |
| AckMessage              | ACK_MESSAGE 200051: consumerGroup, topic, queueId, extraInfo, offset |
| ChangeInvisibleDuration | CHANGE_MESSAGE_INVISIBLETIME 200053: the same and invisibleTime;     |
|                         | answer: popTime, invisibleTime, reviveQid                            |
| ForwardMessageToDead…   | CONSUMER_SEND_MSG_BACK 36: offset (CommitLog), group, delayLevel -1, |
|                         | originMsgId, originTopic, maxReconsumeTimes; then ACK_MESSAGE        |

A receipt handle is the POP checkpoint's extra info and the message's CommitLog offset, space
separated (5.x's ``ReceiptHandle``):

| index | field                                   |
|-------|-----------------------------------------|
| 0     | the checkpoint's start queue offset     |
| 1     | pop time (ms)                           |
| 2     | invisible time (ms)                     |
| 3     | revive queue id                         |
| 4     | topic type: 0 topic, 1 retry topic v1, 2 retry topic v2 |
| 5     | broker name                             |
| 6     | queue id                                |
| 7     | the message's queue offset              |
| 8     | the message's CommitLog offset          |

built from the POP answer's header (``startOffsetInfo``, ``msgOffsetInfo``, ``orderCountInfo``,
entries ``<type> <queueId> <value>`` joined by ``;``). A broker without the POP processor
answers REQUEST_CODE_NOT_SUPPORTED: the RPC's status is NOT_IMPLEMENTED with that remark,
never an empty success. A message past the group's max attempts goes to the DLQ instead of
the client (PopMessageResultFilterImpl).
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import AsyncIterator
from typing import Any

from pumice.acl.permission import SUB
from pumice.common.message import MessageExt
from pumice.common.message_decoder import decode_message
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.proxy.activity import Activity
from pumice.proxy.grpc_status import GrpcProxyError, from_remoting, ok, status
from pumice.proxy.message_converter import PROPERTY_POP_CK, to_proto_message
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proxy_context import ProxyContext
from pumice.proxy.receipt_handle_manager import HeldHandle, ReceiptHandleManager
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)

# 5.x request and response codes (the POP processor registers them in the broker)
POP_MESSAGE = 200050
ACK_MESSAGE = 200051
CHANGE_MESSAGE_INVISIBLETIME = 200053
POLLING_FULL = 209
POLLING_TIMEOUT = 210
INIT_MODE_MAX = 1
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"


def topic_type(topic: str) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "2" if "+" in topic else "1"
    return "0"


def real_topic(topic: str, group: str, kind: str) -> str:
    if kind == "1":
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"
    if kind == "2":
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"
    return topic


def parse_info(text: str | None) -> dict[str, str]:
    """``<type> <key> <value>;…`` → {"<type>@<key>": value} (ExtraInfoUtil's parse*Info)."""
    out: dict[str, str] = {}
    for one in (text or "").split(";"):
        parts = one.split(" ")
        if len(parts) == 3:
            out[f"{parts[0]}@{parts[1]}"] = parts[2]
    return out


def decode_records(body: bytes) -> list[MessageExt]:
    out, pos = [], 0
    while pos + 4 <= len(body):
        (size,) = struct.unpack_from(">i", body, pos)
        if size <= 0 or pos + size > len(body):
            break
        out.append(decode_message(body, pos))
        pos += size
    return out


class ReceiptHandle:
    def __init__(self, text: str) -> None:
        parts = text.split(" ")
        if len(parts) < 8:
            raise GrpcProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle is invalid")
        try:
            self.start_offset, self.pop_time, self.invisible_time = int(parts[0]), int(parts[1]), int(parts[2])
            self.revive_qid, self.topic_type, self.broker_name = int(parts[3]), parts[4], parts[5]
            self.queue_id, self.offset = int(parts[6]), int(parts[7])
            self.commit_log_offset = int(parts[8]) if len(parts) > 8 else -1
        except ValueError:
            raise GrpcProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle is invalid") from None
        self.text = text
        self.extra_info = " ".join(parts[:8])


def _need_handle(text: str) -> ReceiptHandle:
    if not text.strip():
        raise GrpcProxyError(pb.INVALID_RECEIPT_HANDLE, "receipt handle cannot be empty")
    return ReceiptHandle(text)


class ConsumerActivity:
    def __init__(self, base: Activity) -> None:
        self.base = base
        self.held = ReceiptHandleManager(base.config, base.clients, self._renew)

    def _handles(self, response: Any, messages: list[MessageExt], broker_name: str, order: bool) -> None:
        """Puts each message's receipt handle into its POP_CK property (the table above)."""
        f = response.ext_fields
        pop_time, invisible = int(f.get("popTime", 0)), int(f.get("invisibleTime", 0))
        revive_qid = int(f.get("reviveQid", 0))
        starts, offsets, counts = (parse_info(f.get(k)) for k in ("startOffsetInfo", "msgOffsetInfo", "orderCountInfo"))
        seen: dict[str, list[int]] = {}
        for m in messages:
            seen.setdefault(f"{topic_type(m.topic)}@{m.queue_id}", []).append(m.queue_offset)
        for m in messages:
            kind = topic_type(m.topic)
            key = f"{kind}@{m.queue_id}"
            if starts and key in starts:
                index = seen[key].index(m.queue_offset)
                listed = (offsets.get(key) or "").split(",")
                queue_offset = int(listed[index]) if index < len(listed) and listed[index] else m.queue_offset
                start = int(starts[key])
                if order:
                    count = counts.get(f"{kind}@qo{m.queue_id}%{m.queue_offset}") or counts.get(key)
                    if count and int(count) > 0:
                        m.reconsume_times = int(count)
            else:  # a broker without startOffsetInfo: the message's own offset starts its checkpoint
                start = queue_offset = m.queue_offset
            ck = m.properties.get(PROPERTY_POP_CK) or " ".join(
                str(v) for v in (start, pop_time, invisible, revive_qid, kind, broker_name, m.queue_id, queue_offset)
            )
            m.properties[PROPERTY_POP_CK] = f"{ck} {m.commit_log_offset}"

    async def receive_message(self, ctx: ProxyContext, request: Any) -> AsyncIterator[Any]:
        try:
            async for item in self._receive(ctx, request):
                yield item
        except GrpcProxyError as e:
            yield mpb.ReceiveMessageResponse(status=status(e.code, e.message))
        # every stream ends with the time it was answered (5.3.3's ReceiveMessageResponseStreamWriter
        # onComplete): a push consumer computes its delivery latency from it and drops the batch without it
        answered = mpb.ReceiveMessageResponse()
        answered.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
        yield answered

    async def _receive(self, ctx: ProxyContext, request: Any) -> AsyncIterator[Any]:
        b, c = self.base, self.base.config
        topic = b.validate_topic(request.message_queue.topic)
        group = b.validate_group(request.group)
        b.authorize(ctx, POP_MESSAGE, {topic: SUB, RETRY_GROUP_TOPIC_PREFIX + group: SUB})
        if request.auto_renew:
            invisible_ms = c.default_invisible_time_mills
        else:
            if not request.HasField("invisible_duration"):
                raise GrpcProxyError(pb.ILLEGAL_INVISIBLE_TIME, "invisible duration is required")
            invisible_ms = request.invisible_duration.ToMilliseconds()
            if invisible_ms < c.min_invisible_time_mills_for_recv:
                raise GrpcProxyError(
                    pb.ILLEGAL_INVISIBLE_TIME,
                    f"the invisibleTime is too small. min is {c.min_invisible_time_mills_for_recv}",
                )
            if invisible_ms > c.max_invisible_time_mills:
                raise GrpcProxyError(
                    pb.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {c.max_invisible_time_mills}"
                )
        expression = request.filter_expression
        exp_type = "SQL92" if expression.type == pb.SQL else "TAG"
        poll_ms = c.grpc_client_consumer_max_long_polling_timeout_millis
        if request.HasField("long_polling_timeout"):
            poll_ms = min(max(request.long_polling_timeout.ToMilliseconds(),
                              c.grpc_client_consumer_min_long_polling_timeout_millis),
                          c.grpc_client_consumer_max_long_polling_timeout_millis)  # fmt: skip
        poll_ms = max(poll_ms - c.long_polling_reserve_time_in_millis, 0)
        # fifo and max attempts: the client's settings as answered (5.3.3), else the group's config
        client = b.clients.get(ctx.client_id)
        settings = b.clients.merged_settings(client) if client is not None else None
        if settings is not None and settings.HasField("subscription"):
            fifo, max_attempts = settings.subscription.fifo, settings.backoff_policy.max_attempts
        else:
            group_config = b.group_config(group)
            fifo = b.clients.fifo(None, group)
            max_attempts = (group_config.retry_max_times if group_config is not None else 16) + 1
        # queueId -1: the whole broker, whatever queue the client named (as 5.3.3)
        fields = {"consumerGroup": group, "topic": topic, "queueId": -1,
                  "maxMsgNums": request.batch_size,
                  "invisibleTime": invisible_ms, "pollTime": poll_ms, "bornTime": int(time.time() * 1000),
                  "initMode": INIT_MODE_MAX, "expType": exp_type, "exp": expression.expression or "*",
                  "order": "true" if fifo else "false",
                  "attemptId": request.attempt_id if request.HasField("attempt_id") else None}  # fmt: skip
        channel = b.channel_of(ctx)
        response = await b.call(channel, POP_MESSAGE, fields, timeout_s=poll_ms / 1000 + 5)
        if response.code in (ResponseCode.PULL_NOT_FOUND, POLLING_TIMEOUT):
            yield mpb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no match message"))
            return
        if response.code == POLLING_FULL:
            yield mpb.ReceiveMessageResponse(status=status(pb.TOO_MANY_REQUESTS, "polling full"))
            return
        if response.code != ResponseCode.SUCCESS:
            yield mpb.ReceiveMessageResponse(status=from_remoting(response.code, response.remark))
            return
        messages = decode_records(bytes(response.body))
        self._handles(response, messages, b.broker.config.broker_name, fifo)
        delivered = []
        for m in messages:
            if m.reconsume_times + 1 > max_attempts:  # past max attempts: to the DLQ, not the client
                await self._to_dlq(channel, group, m.properties.get(PROPERTY_RETRY_TOPIC, topic),
                                   _need_handle(m.properties[PROPERTY_POP_CK]),
                                   m.properties.get("UNIQ_KEY", m.msg_id), max_attempts)  # fmt: skip
                continue
            delivered.append(m)
        if not delivered:
            yield mpb.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no match message"))
            return
        yield mpb.ReceiveMessageResponse(status=ok())
        for m in delivered:
            shown = m.properties.get(PROPERTY_RETRY_TOPIC) or topic
            if request.auto_renew and c.enable_proxy_auto_renew:
                self.held.add(ctx.client_id, channel, group, shown, m.properties.get("UNIQ_KEY", m.msg_id),
                              m.properties[PROPERTY_POP_CK], invisible_ms, m.reconsume_times)  # fmt: skip
            yield mpb.ReceiveMessageResponse(message=to_proto_message(
                m, topic=shown, receipt_handle=m.properties[PROPERTY_POP_CK], invisible_ms=invisible_ms))  # fmt: skip

    async def _ack(self, channel: Any, group: str, topic: str, handle: ReceiptHandle) -> Any:
        fields = {"consumerGroup": group, "topic": real_topic(topic, group, handle.topic_type),
                  "queueId": handle.queue_id, "extraInfo": handle.extra_info, "offset": handle.offset}  # fmt: skip
        return await self.base.call(channel, ACK_MESSAGE, fields)

    async def ack_message(self, ctx: ProxyContext, request: Any) -> Any:
        b = self.base
        topic = b.validate_topic(request.topic)
        group = b.validate_group(request.group)
        b.authorize(ctx, ACK_MESSAGE, {topic: SUB, RETRY_GROUP_TOPIC_PREFIX + group: SUB})
        channel = b.channel_of(ctx)
        entries = []
        for entry in request.entries:
            try:
                latest = self._latest(ctx, group, entry.message_id, entry.receipt_handle)
                response = await self._ack(channel, group, topic, _need_handle(latest))
                st = ok() if response.code == ResponseCode.SUCCESS else from_remoting(response.code, response.remark)
            except GrpcProxyError as e:
                st = status(e.code, e.message)
            entries.append(mpb.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                                     status=st))  # fmt: skip
        codes = {e.status.code for e in entries}
        if not entries:
            top = status(pb.BAD_REQUEST, "no entry to ack")
        elif len(codes) > 1:
            top = status(pb.MULTIPLE_RESULTS)
        else:
            top = status(entries[0].status.code, entries[0].status.message)
        return mpb.AckMessageResponse(status=top, entries=entries)

    async def change_invisible_duration(self, ctx: ProxyContext, request: Any) -> Any:
        b, c = self.base, self.base.config
        topic = b.validate_topic(request.topic)
        group = b.validate_group(request.group)
        b.authorize(ctx, CHANGE_MESSAGE_INVISIBLETIME, {topic: SUB, RETRY_GROUP_TOPIC_PREFIX + group: SUB})
        invisible_ms = request.invisible_duration.ToMilliseconds()
        if invisible_ms < 0 or invisible_ms > c.max_invisible_time_mills:
            raise GrpcProxyError(
                pb.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {c.max_invisible_time_mills}"
            )
        handle = _need_handle(self._latest(ctx, group, request.message_id, request.receipt_handle))
        response, new = await self._change(b.channel_of(ctx), group, topic, handle, invisible_ms)
        if response.code != ResponseCode.SUCCESS:
            return mpb.ChangeInvisibleDurationResponse(status=from_remoting(response.code, response.remark))
        return mpb.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=new)

    async def _change(self, channel: Any, group: str, topic: str, handle: ReceiptHandle,
                      invisible_ms: int) -> tuple[Any, str]:  # fmt: skip
        """CHANGE_MESSAGE_INVISIBLETIME; the broker's answer and the new receipt handle."""
        fields = {"consumerGroup": group, "topic": real_topic(topic, group, handle.topic_type),
                  "queueId": handle.queue_id, "extraInfo": handle.extra_info, "offset": handle.offset,
                  "invisibleTime": invisible_ms}  # fmt: skip
        response = await self.base.call(channel, CHANGE_MESSAGE_INVISIBLETIME, fields)
        f = response.ext_fields or {}
        new = " ".join(str(v) for v in (handle.offset, f.get("popTime", 0), f.get("invisibleTime", invisible_ms),
                                        f.get("reviveQid", handle.revive_qid), handle.topic_type, handle.broker_name,
                                        handle.queue_id, handle.offset, handle.commit_log_offset))  # fmt: skip
        return response, new

    def _latest(self, ctx: ProxyContext, group: str, message_id: str, handle: str) -> str:
        """The handle to send the broker: the latest renewal of one held for auto_renew (the
        client's is stale once renewed), which the client now takes over; else the client's."""
        held = self.held.remove(ctx.client_id, group, message_id, handle)
        return held.handle if held is not None else handle

    async def _renew(self, held: HeldHandle, invisible_ms: int) -> str | None:
        try:
            response, new = await self._change(held.channel, held.group, held.topic, ReceiptHandle(held.handle),
                                               invisible_ms)  # fmt: skip
        except Exception:
            log.exception("renewing %s of %s", held.message_id, held.group)
            return None
        return new if response.code == ResponseCode.SUCCESS else None

    async def _to_dlq(self, channel: Any, group: str, topic: str, handle: ReceiptHandle, message_id: str,
                      max_attempts: int) -> Any:  # fmt: skip
        fields = {"offset": handle.commit_log_offset, "group": group, "delayLevel": -1, "originMsgId": message_id,
                  "originTopic": real_topic(topic, group, handle.topic_type), "unitMode": "false",
                  "maxReconsumeTimes": max_attempts - 1}  # fmt: skip
        response = await self.base.call(channel, RequestCode.CONSUMER_SEND_MSG_BACK, fields)
        if response.code == ResponseCode.SUCCESS:
            response = await self._ack(channel, group, topic, handle)
        return response

    async def forward_to_dlq(self, ctx: ProxyContext, request: Any) -> Any:
        b = self.base
        topic = b.validate_topic(request.topic)
        group = b.validate_group(request.group)
        b.authorize(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, {topic: SUB, RETRY_GROUP_TOPIC_PREFIX + group: SUB})
        handle = _need_handle(request.receipt_handle)
        response = await self._to_dlq(b.channel_of(ctx), group, topic, handle, request.message_id,
                                      request.max_delivery_attempts)  # fmt: skip
        if response.code != ResponseCode.SUCCESS:
            return mpb.ForwardMessageToDeadLetterQueueResponse(status=from_remoting(response.code, response.remark))
        return mpb.ForwardMessageToDeadLetterQueueResponse(status=ok())
