"""Broker2Client: the broker's requests to its clients, and the admin codes that relay them.

The broker sends a request on a client's own connection and waits for its answer
(``Channel.invoke``, matched by opaque, as Netty's ``invokeSync``); a client that never answers
costs a timeout, nothing more.

=====================================  ====================================================
admin request (extFields)              what the broker does
=====================================  ====================================================
INVOKE_BROKER_TO_RESET_OFFSET (222)    every write queue's offset of ``topic`` at
``topic*``, ``group*``,                ``timestamp`` (-1: the queue's end), kept when it is
``timestamp*``, ``isForce*``           past the group's offset unless ``isForce``; sent
                                       oneway as RESET_CONSUMER_CLIENT_OFFSET (220) to every
                                       online member (a C++ client, as 4.9 decides by the
                                       admin request's language, gets the list form), and
                                       answered with ``{"offsetTable": {MQ: offset}}``.
                                       CONSUMER_NOT_ONLINE when no member is online (the
                                       tools then write the offsets themselves);
                                       SYSTEM_ERROR for a topic the broker lacks or a group
                                       without offsets on it
INVOKE_BROKER_TO_GET_CONSUMER_STATUS   GET_CONSUMER_STATUS_FROM_CLIENT (221) to each member
(223) ``topic*``, ``group*``,          (or only ``clientAddr``, a clientId), 5 s each;
``clientAddr``                         ``{"consumerTable": {clientId: {MQ: offset}},
                                       "messageQueueTable": {}}`` of those that answered;
                                       SYSTEM_ERROR when none is online
GET_CONSUMER_RUNNING_INFO (307)        relayed to that client (10 s), its answer returned
``consumerGroup*``, ``clientId*``,     as it is (ConsumerRunningInfo)
``jstackEnable``
CONSUME_MESSAGE_DIRECTLY (309)         the stored record of ``msgId`` (an offset msgId) as
``consumerGroup*``, ``clientId*``,     the body, ``brokerName`` added; relayed (10 s); the
``msgId*``                             client's ConsumeMessageDirectlyResult returned
=====================================  ====================================================

Relays answer SYSTEM_ERROR ``The Consumer <g> <id> not online`` for an unknown member, a
member older than V3_1_8_SNAPSHOT, or a connection that fails, and CONSUME_MSG_TIMEOUT when
the client does not answer in time, as 4.9's ``callConsumer``. MQ is a MessageQueue as a
fastjson map key, written bare in a HashMap's order (``common.message_queue_map``); a
client's GetConsumerStatusBody is read in either form (``common.fastjson.loads``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from pumice.common import fastjson
from pumice.common.fastjson import ObjectKey
from pumice.common.message_decoder import decode_message_id
from pumice.common.message_queue_map import message_queue_table, message_queue_table_of
from pumice.remoting.mq_version import version_desc, version_ordinal
from pumice.remoting.remoting_command import RPC_ONEWAY, RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from pumice.broker.consumer_manager import ClientChannelInfo, ConsumerManager
    from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
    from pumice.broker.topic_config_manager import TopicConfigManager
    from pumice.store.message_store_api import MessageStore

log = logging.getLogger(__name__)

CALL_CLIENT_TIMEOUT_S = 10.0  # callClient's invokeSync
CONSUMER_STATUS_TIMEOUT_S = 5.0
# the oldest clients that can take these calls
V3_0_7_SNAPSHOT = version_ordinal("V3_0_7_SNAPSHOT")
V3_1_8_SNAPSHOT = version_ordinal("V3_1_8_SNAPSHOT")


class Broker2Client:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        consumers: ConsumerManager,
        broker_name: str,
    ) -> None:
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.consumers = consumers
        self.broker_name = broker_name

    def _mq_table(self, topic: str, table: dict[int, int]) -> dict[ObjectKey, int]:
        return message_queue_table((topic, self.broker_name, q, off) for q, off in table.items())

    # -- reset offsets (222 → 220) -------------------------------------------------------

    def reset_offset(self, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_str("topic", required=True) or ""
        group = request.ext_str("group", required=True) or ""
        timestamp = request.ext_long("timestamp", required=True)
        request.ext_str("isForce", required=True)  # @CFNotNull upstream
        is_force = request.ext_bool("isForce")
        is_c = str(request.language).upper() == "CPP"
        log.info("[reset-offset] reset offset started. topic=%s, group=%s, timestamp=%s, isForce=%s",
                 topic, group, timestamp, is_force)  # fmt: skip
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
            )
        table: dict[int, int] = {}
        for queue_id in range(tc.write_queue_nums):
            consumer_offset = self.offsets.query_offset(group, topic, queue_id)
            if consumer_offset == -1:
                return request.make_response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                at = self.store.get_max_offset_in_queue(topic, queue_id)
            else:
                at = self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp or 0)
            at = max(at, 0)
            table[queue_id] = at if is_force or at < consumer_offset else consumer_offset
        if is_c:
            body: Any = {
                "offsetTable": [
                    {"brokerName": self.broker_name, "offset": off, "queueId": q, "topic": topic}
                    for q, off in table.items()
                ]
            }
        else:
            body = {"offsetTable": self._mq_table(topic, table)}
        info = self.consumers.get_consumer_group_info(group)
        if info is None or not info.channels:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {timestamp}",
            )
        notice = RemotingCommand(
            code=RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            flag=RPC_ONEWAY,
            # isForce: 4.9 never sets it in the notice (always false); the table already applied it
            ext_fields={"topic": topic, "group": group, "timestamp": str(timestamp), "isForce": "false"},
            body=fastjson.dumps(body),
            language="JAVA",
        )
        for member in list(info.channels.values()):
            if member.version < V3_0_7_SNAPSHOT:
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    f"the client does not support this feature. version={version_desc(member.version)}",
                )
            member.channel.send(notice)
            log.info("[reset-offset] reset offset success. topic=%s, group=%s, clientId=%s", topic, group,
                     member.client_id)  # fmt: skip
        # the broker's own offsets too (a member that reconnects, or a later member, starts there)
        for queue_id, off in table.items():
            self.offsets.commit_offset("reset-offset", group, topic, queue_id, off)
        answer = {"offsetTable": self._mq_table(topic, table)}
        return request.make_response(ResponseCode.SUCCESS, body=fastjson.dumps(answer))

    # -- consumer status (223 → 221) -----------------------------------------------------

    async def get_consume_status(self, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_str("topic", required=True) or ""
        group = request.ext_str("group", required=True) or ""
        origin = request.ext_str("clientAddr") or ""
        info = self.consumers.get_consumer_group_info(group)
        if info is None or not info.channels:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]"
            )
        table: dict[str, Any] = {}
        for client_id, member in sorted(info.channels.items()):
            if member.version < V3_0_7_SNAPSHOT:
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    f"the client does not support this feature. version={version_desc(member.version)}",
                )
            if origin and origin != client_id:
                continue
            call = RemotingCommand(
                code=RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                ext_fields={"topic": topic, "group": group},
                language="JAVA",
            )
            try:
                response = await member.channel.invoke(call, CONSUMER_STATUS_TIMEOUT_S)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                log.error("[get-consumer-status] get consumer status exception. topic=%s, group=%s, error=%s",
                          topic, group, e)  # fmt: skip
                continue
            if response.code == ResponseCode.SUCCESS and response.body:
                try:
                    data = fastjson.loads(response.body)
                    table[client_id] = message_queue_table_of(data.get("messageQueueTable") or {})
                except (orjson.JSONDecodeError, AttributeError, ValueError):
                    log.warning("[get-consumer-status] %s answered a body that is not GetConsumerStatusBody", client_id)
            if origin:
                break
        # GetConsumerStatusBody: 4.9 writes its (empty) messageQueueTable too
        body = {"consumerTable": table, "messageQueueTable": {}}
        return request.make_response(ResponseCode.SUCCESS, body=fastjson.dumps(body))

    # -- relays (307, 309) ---------------------------------------------------------------

    async def get_consumer_running_info(self, request: RemotingCommand) -> RemotingCommand:
        return await self._call_consumer(RequestCode.GET_CONSUMER_RUNNING_INFO, request, request.body)

    async def consume_message_directly(self, request: RemotingCommand) -> RemotingCommand:
        msg_id = request.ext_str("msgId", required=True) or ""
        request.ext_fields["brokerName"] = self.broker_name
        body = b""
        try:
            _, offset = decode_message_id(msg_id)
        except ValueError:
            offset = -1
        sbr = self.store.select_one_message_by_offset(offset) if offset >= 0 else None
        if sbr is not None:
            try:
                body = bytes(sbr.buffer)
            finally:
                sbr.release()
        return await self._call_consumer(RequestCode.CONSUME_MESSAGE_DIRECTLY, request, body)

    def _find(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.consumers.get_consumer_group_info(group)
        return info.channels.get(client_id) if info is not None else None

    async def _call_consumer(
        self, code: int, request: RemotingCommand, body: bytes | bytearray | memoryview | None
    ) -> RemotingCommand:
        group = request.ext_str("consumerGroup", required=True) or ""
        client_id = request.ext_str("clientId", required=True) or ""
        member = self._find(group, client_id)
        if member is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if member.version < V3_1_8_SNAPSHOT:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{version_desc(member.version)}> too low to finish, please "
                "upgrade it to V3_1_8_SNAPSHOT",
            )
        call = RemotingCommand(code=code, ext_fields=dict(request.ext_fields), body=body or b"", language="JAVA")
        try:
            answer = await member.channel.invoke(call, CALL_CLIENT_TIMEOUT_S)
        except RemotingTimeoutError as e:
            return request.make_response(
                ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {e}"
            )
        except RemotingConnectError as e:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {e}"
            )
        response = request.make_response(answer.code, answer.remark, body=answer.body)
        response.ext_fields = dict(answer.ext_fields or {})
        return response
