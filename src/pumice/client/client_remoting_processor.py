"""ClientRemotingProcessor: the client's answers to the requests a broker sends it.

=========================================  ===============================================
request (extFields, body)                  answer
=========================================  ===============================================
RESET_CONSUMER_CLIENT_OFFSET (220)         oneway: the group's consumer drops the topic's
``topic``, ``group``, body ResetOffsetBody queues named in the table, stores their new
``{"offsetTable": {MQ: offset}}``          offsets (and on the broker), and takes them
                                           again from there
GET_CONSUMER_STATUS_FROM_CLIENT (221)      GetConsumerStatusBody ``{"messageQueueTable":
``topic``, ``group``                       {MQ: offset}}``: the consumer's offsets of the
                                           topic's queues it holds
GET_CONSUMER_RUNNING_INFO (307)            ConsumerRunningInfo ``{"properties",
``consumerGroup``, ``clientId``,           "subscriptionSet", "mqTable": {MQ:
``jstackEnable``                           ProcessQueueInfo}, "statusTable": {topic:
                                           ConsumeStatus}}`` (no jstack: this is not a JVM)
CONSUME_MESSAGE_DIRECTLY (309)             ConsumeMessageDirectlyResult ``{"order",
``consumerGroup``, ``clientId``,           "autoCommit", "consumeResult": "CR_SUCCESS" /
``msgId``, ``brokerName``; body: the       "CR_LATER" / "CR_THROW_EXCEPTION", "remark",
stored record                              "spentTimeMills"}``: the record handed to the
                                           group's handler once, nothing committed
=========================================  ===============================================

A group this client does not run is answered SYSTEM_ERROR naming it, as the Java client's
``The Consumer Group <g> not exist in this consumer``. MQ keys are MessageQueues as fastjson
writes map keys: the compact JSON object, fields sorted, bare (``common.message_queue_map``);
a reset is read in either form, bare or quoted (``common.fastjson.loads``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, TypeVar

import orjson

from pumice.client.message import MessageQueue
from pumice.common import fastjson
from pumice.common.fastjson import ObjectKey
from pumice.common.message_queue_map import message_queue_table
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)
V = TypeVar("V")

CODES = (
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
    RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,
)


class ConsumerInner(Protocol):
    """What a consumer offers to the broker's calls (Java's MQConsumerInner)."""

    group: str

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None: ...

    async def consumer_status(self, topic: str) -> dict[MessageQueue, int]: ...

    def running_info(self) -> dict[str, Any]: ...

    async def consume_directly(self, record: bytes, broker_name: str | None) -> dict[str, Any]: ...


def mq_table(table: dict[MessageQueue, V]) -> dict[ObjectKey, V]:
    """A ``Map<MessageQueue, V>`` for ``fastjson.dumps``, in a Java HashMap's order."""
    return message_queue_table((mq.topic, mq.broker_name, mq.queue_id, v) for mq, v in table.items())


def parse_mq_table(raw: Any) -> dict[MessageQueue, int]:
    """``{MQ JSON: offset}`` (or, from a C++-style body, ``[{topic, brokerName, queueId, offset}]``)."""
    out: dict[MessageQueue, int] = {}
    if isinstance(raw, list):
        for e in raw:
            out[MessageQueue.from_json(e)] = int(e["offset"])
        return out
    if not isinstance(raw, dict):
        raise ValueError("offsetTable is not an object")
    for key, offset in raw.items():
        mq = MessageQueue.from_json(orjson.loads(key) if isinstance(key, str) else key)
        out[mq] = int(offset)
    return out


async def process(consumers: dict[str, ConsumerInner], request: RemotingCommand) -> RemotingCommand | None:
    """The answer to one of ``CODES``; None for the oneway reset."""
    code = request.code
    group = request.ext_str("group") if code in CODES[:2] else request.ext_str("consumerGroup")
    consumer = consumers.get(group or "")
    if consumer is None:
        if code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            log.info("reset offset for group %s, which this client does not run: ignored", group)
            return None
        return request.make_response(
            ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
        )
    if code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
        topic = request.ext_str("topic") or ""
        try:
            table = parse_mq_table(fastjson.loads(request.body or b"{}").get("offsetTable") or {})
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as e:
            log.warning("reset offset of %s: a body that is not ResetOffsetBody: %s", group, e)
            return None
        log.info("reset offset of %s on %s by the broker: %s", group, topic, {str(k): v for k, v in table.items()})
        await consumer.reset_offset(topic, table)
        return None
    if code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
        table = await consumer.consumer_status(request.ext_str("topic") or "")
        body = {"messageQueueTable": mq_table(table)}
        return request.make_response(ResponseCode.SUCCESS, body=fastjson.dumps(body))
    if code == RequestCode.GET_CONSUMER_RUNNING_INFO:
        return request.make_response(ResponseCode.SUCCESS, body=fastjson.dumps(consumer.running_info()))
    result = await consumer.consume_directly(bytes(request.body), request.ext_str("brokerName"))
    return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(result))
