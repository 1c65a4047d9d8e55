"""MQClientAPIImpl: one async method per request the clients send, over ``RemotingClient``.

Every method takes the peer address first. A non-success response code raises
``MQBrokerError(code, remark)``; no answer raises ``RemotingConnectError`` or
``RemotingTimeoutError`` (``pumice.client.exceptions``). Request extFields are written as
strings, as the Java client does. Request fields and bodies (``*`` required):

==================================  ============================================================
code                                request → answer
==================================  ============================================================
GET_ROUTEINFO_BY_TOPIC 105          topic* → body TopicRouteData (TOPIC_NOT_EXIST 17)
GET_BROKER_CLUSTER_INFO 106         → body ClusterInfo
GET_ALL_TOPIC_LIST_FROM_NAMESERVER  → body ``{"topicList": [...]}``
206
DELETE_TOPIC_IN_NAMESRV 216         topic*
SEND_MESSAGE_V2 310 /               a producerGroup, b topic, c defaultTopic, d defaultTopicQueueNums,
SEND_BATCH_MESSAGE 320              e queueId, f sysFlag, g bornTimestamp, h flag, i properties,
                                    j reconsumeTimes, k unitMode, l maxReconsumeTimes (retry topics
                                    only), m batch; body = message body or batch body → msgId,
                                    queueId, queueOffset, transactionId
PULL_MESSAGE 11                     consumerGroup, topic, queueId, queueOffset, maxMsgNums, sysFlag,
                                    commitOffset, suspendTimeoutMillis, subscription, subVersion,
                                    expressionType → nextBeginOffset, minOffset, maxOffset,
                                    suggestWhichBrokerId, body records; 19/20/21 are statuses
QUERY_CONSUMER_OFFSET 14            consumerGroup, topic, queueId → offset (QUERY_NOT_FOUND 22)
UPDATE_CONSUMER_OFFSET 15           consumerGroup, topic, queueId, commitOffset
GET_MAX_OFFSET 30 / GET_MIN_OFFSET  topic, queueId → offset
31
SEARCH_OFFSET_BY_TIMESTAMP 29       topic, queueId, timestamp → offset
GET_EARLIEST_MSG_STORETIME 32       topic, queueId → timestamp
HEART_BEAT 34                       body HeartbeatData JSON
UNREGISTER_CLIENT 35                clientID, producerGroup, consumerGroup
GET_CONSUMER_LIST_BY_GROUP 38       consumerGroup → body ``{"consumerIdList": [...]}``
LOCK_BATCH_MQ 41 / UNLOCK 42        body ``{"consumerGroup", "clientId", "onlyThisBroker", "mqSet"}``
                                    → body ``{"lockOKMQSet": [...]}``
CONSUMER_SEND_MSG_BACK 36           offset (commit log), group, delayLevel, originMsgId,
                                    originTopic, maxReconsumeTimes
QUERY_MESSAGE 12                    topic, key, maxNum, beginTimestamp, endTimestamp,
                                    _UNIQUE_KEY_QUERY → body records (QUERY_NOT_FOUND → [])
VIEW_MESSAGE_BY_ID 33               offset (from the offset msgId) → body one record
UPDATE_AND_CREATE_TOPIC 17          topic, defaultTopic, readQueueNums, writeQueueNums, perm,
                                    topicFilterType, topicSysFlag, order
DELETE_TOPIC_IN_BROKER 215          topic
GET_TOPIC_STATS_INFO 202            topic → ``{"offsetTable": {MQ-JSON: {minOffset, maxOffset,
                                    lastUpdateTimestamp}}}``
GET_CONSUME_STATS 208               consumerGroup, topic → ``{"offsetTable": {MQ-JSON:
                                    {brokerOffset, consumerOffset, lastTimestamp}}, "consumeTps"}``
GET_CONSUMER_CONNECTION_LIST 203    consumerGroup → ConsumerConnection JSON (CONSUMER_NOT_ONLINE)
INVOKE_BROKER_TO_RESET_OFFSET 222   topic, group, timestamp, isForce (language CPP for mqadmin's
                                    -c) → ``{"offsetTable": {MQ-JSON: offset}}``
                                    (CONSUMER_NOT_ONLINE)
GET_BROKER_RUNTIME_INFO 28          → ``{"table": {key: value}}``
UPDATE_AND_CREATE_SUBSCRIPTION-     body SubscriptionGroupConfig JSON
GROUP 200
GET_ALL_CONSUMER_OFFSET 43          → ``{"offsetTable": {"topic@group": {"queueId": offset}}}``
GET_ALL_TOPIC_CONFIG 21             → ``{"topicConfigTable": {...}, "dataVersion": {...}}``
==================================  ============================================================

MQ-JSON map keys are a MessageQueue's compact JSON (fastjson writes object keys that way).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import Any, cast

import orjson

from pumice.client.admin_types import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    SubscriptionGroupConfig,
    TopicOffset,
)
from pumice.client.exceptions import (
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    RemotingTimeoutError,
    code_name,
)
from pumice.client.message import (
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    decode_messages,
)
from pumice.client.route import ClusterInfo, TopicRouteData, loads_lenient
from pumice.common.mix_all import AUTO_CREATE_TOPIC_KEY_TOPIC, MASTER_ID, RETRY_GROUP_TOPIC_PREFIX
from pumice.remoting import remoting_client as rc
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

# PULL_MESSAGE sysFlag bits
PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
_SEND_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def _ext(**fields: Any) -> dict[str, str]:
    """extFields as strings (booleans as true/false); None values are left out."""
    out = {}
    for k, v in fields.items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def _json(body: bytes | memoryview | Any) -> Any:
    if not len(body):
        return {}
    try:
        return loads_lenient(body)
    except orjson.JSONDecodeError as e:
        raise MQClientError(f"the answer's body is not JSON: {e}") from None


def _mq_table(table: dict[str, Any]) -> dict[MessageQueue, dict[str, Any]]:
    return {MessageQueue.from_json(orjson.loads(k)): v for k, v in (table or {}).items()}


def _broker_id(value: object) -> int:
    """A suggestWhichBrokerId as sent; the master for a missing, negative or non-numeric one."""
    try:
        bid = int(str(value))
    except ValueError:
        return MASTER_ID
    return bid if bid >= 0 else MASTER_ID


class MQClientAPIImpl:
    """Typed request methods; ``timeout_s`` is the default answer timeout."""

    def __init__(
        self,
        remoting: rc.RemotingClient | None = None,
        timeout_s: float = 3.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.remoting = remoting if remoting is not None else rc.RemotingClient(ssl_context=ssl_context)
        self.timeout_s = timeout_s

    async def close(self) -> None:
        await self.remoting.close()

    # -- plumbing ---------------------------------------------------------------------------

    async def invoke(
        self,
        addr: str,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        timeout_s: float | None = None,
        language: str = "PYTHON",
    ) -> RemotingCommand:
        """The raw answer, whatever its code (remoting failures raised as client errors)."""
        req = RemotingCommand(code=int(code), ext_fields=ext or {}, body=body, language=language)
        try:
            return await self.remoting.invoke(addr, req, self.timeout_s if timeout_s is None else timeout_s)
        except rc.RemotingTimeoutError as e:
            raise RemotingTimeoutError(str(e), addr) from None
        except rc.RemotingConnectError as e:
            raise RemotingConnectError(str(e), addr) from None

    async def invoke_ok(
        self,
        addr: str,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        timeout_s: float | None = None,
        ok: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """The answer if its code is in ``ok``, else MQBrokerError."""
        resp = await self.invoke(addr, code, ext, body, timeout_s)
        if resp.code not in (ok if isinstance(ok, (dict, frozenset, set, tuple)) else set(ok)):
            raise MQBrokerError(resp.code, resp.remark, addr)
        return resp

    async def invoke_oneway(self, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> None:
        try:
            await self.remoting.invoke_oneway(addr, RemotingCommand(code=int(code), ext_fields=ext or {}, body=body))
        except rc.RemotingConnectError as e:
            raise RemotingConnectError(str(e), addr) from None

    # -- name server ------------------------------------------------------------------------

    async def get_topic_route_info_from_name_server(
        self, addr: str, topic: str, timeout_s: float | None = None
    ) -> TopicRouteData:
        resp = await self.invoke_ok(addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, _ext(topic=topic), timeout_s=timeout_s)
        return TopicRouteData.decode(resp.body)

    async def get_broker_cluster_info(self, addr: str, timeout_s: float | None = None) -> ClusterInfo:
        resp = await self.invoke_ok(addr, RequestCode.GET_BROKER_CLUSTER_INFO, timeout_s=timeout_s)
        return ClusterInfo.decode(resp.body)

    async def get_topic_list_from_name_server(self, addr: str, timeout_s: float | None = None) -> list[str]:
        resp = await self.invoke_ok(addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, timeout_s=timeout_s)
        return [str(t) for t in _json(resp.body).get("topicList") or []]

    async def delete_topic_in_name_server(self, addr: str, topic: str, timeout_s: float | None = None) -> None:
        await self.invoke_ok(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, _ext(topic=topic), timeout_s=timeout_s)

    # -- send -------------------------------------------------------------------------------

    async def send_message(
        self,
        addr: str,
        broker_name: str,
        *,
        group: str,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: str = "",
        sys_flag: int = 0,
        born_timestamp: int = 0,
        flag: int = 0,
        batch: bool = False,
        default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
        default_topic_queue_nums: int = 4,
        reconsume_times: int = 0,
        max_reconsume_times: int | None = None,
        uniq_id: str | None = None,
        oneway: bool = False,
        timeout_s: float | None = None,
        reply: bool = False,
        mq: MessageQueue | None = None,
    ) -> SendResult | None:
        """SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE with ``batch``, SEND_REPLY_MESSAGE_V2 with
        ``reply``); None when ``oneway``. ``mq``, the queue sent to, becomes the result's
        ``message_queue`` when the broker answers with its queue id (no new MessageQueue)."""
        # SendMessageRequestHeaderV2's letters, as strings already (every send: no _ext pass)
        ext = {
            "a": group,
            "b": topic,
            "c": default_topic,
            "d": str(default_topic_queue_nums),
            "e": str(queue_id),
            "f": str(sys_flag),
            "g": str(born_timestamp),
            "h": str(flag),
            "i": properties,
            "j": str(reconsume_times),
            "k": "false",
        }
        if max_reconsume_times is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            ext["l"] = str(max_reconsume_times)
        if batch:
            ext["m"] = "true"
        code = (
            RequestCode.SEND_BATCH_MESSAGE if batch
            else RequestCode.SEND_REPLY_MESSAGE_V2 if reply
            else RequestCode.SEND_MESSAGE_V2
        )  # fmt: skip
        if oneway:
            await self.invoke_oneway(addr, code, ext, body)
            return None
        resp = await self.invoke(addr, code, ext, body, timeout_s)  # invoke_ok's check, one coroutine fewer
        status = _SEND_STATUS.get(resp.code)
        if status is None:
            raise MQBrokerError(resp.code, resp.remark, addr)
        ef = resp.ext_fields
        try:
            qid = int(ef.get("queueId", queue_id))
            queue_offset = int(ef.get("queueOffset", -1))
        except ValueError:
            # stored, so not an MQBrokerError the producer would retry (a duplicate)
            raise MQClientError(
                f"the broker {addr} answered {code_name(resp.code)} with a queueId {ef.get('queueId')!r} "
                f"and queueOffset {ef.get('queueOffset')!r} that are not integers"
            ) from None
        if mq is None or mq.queue_id != qid or mq.topic != topic or mq.broker_name != broker_name:
            mq = MessageQueue(topic, broker_name, qid)
        return SendResult(
            send_status=status,
            msg_id=uniq_id or str(ef.get("transactionId") or ef.get("msgId") or ""),
            offset_msg_id=str(ef.get("msgId", "")),
            message_queue=mq,
            queue_offset=queue_offset,
            transaction_id=ef.get("transactionId"),
        )

    # -- pull and offsets -------------------------------------------------------------------

    async def pull_message(
        self,
        addr: str,
        *,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        sys_flag: int,
        commit_offset: int = 0,
        suspend_timeout_ms: int = 0,
        subscription: str | None = "*",
        sub_version: int = 0,
        expression_type: str = "TAG",
        timeout_s: float | None = None,
    ) -> PullResult:
        """The raw pull answer: status, offsets and ``raw_body`` (``msgs`` left empty)."""
        ext = _ext(
            consumerGroup=group,
            topic=topic,
            queueId=queue_id,
            queueOffset=offset,
            maxMsgNums=max_nums,
            sysFlag=sys_flag,
            commitOffset=commit_offset,
            suspendTimeoutMillis=suspend_timeout_ms,
            subscription=subscription,
            subVersion=sub_version,
            expressionType=expression_type,
        )
        resp = await self.invoke_ok(addr, RequestCode.PULL_MESSAGE, ext, timeout_s=timeout_s, ok=_PULL_STATUS)
        ef = resp.ext_fields
        body = resp.body
        return PullResult(
            status=_PULL_STATUS[ResponseCode(resp.code)],
            next_begin_offset=int(ef.get("nextBeginOffset", offset)),
            min_offset=int(ef.get("minOffset", 0)),
            max_offset=int(ef.get("maxOffset", 0)),
            suggest_which_broker_id=_broker_id(ef.get("suggestWhichBrokerId")),
            raw_body=bytes(body) if resp.code == ResponseCode.SUCCESS else b"",
        )

    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int:
        """The committed offset; MQBrokerError QUERY_NOT_FOUND (22) when the group has none."""
        resp = await self.invoke_ok(
            addr, RequestCode.QUERY_CONSUMER_OFFSET, _ext(consumerGroup=group, topic=topic, queueId=queue_id)
        )
        return int(resp.ext_fields["offset"])

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int, oneway: bool = False
    ) -> None:
        ext = _ext(consumerGroup=group, topic=topic, queueId=queue_id, commitOffset=offset)
        if oneway:
            await self.invoke_oneway(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        else:
            await self.invoke_ok(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)

    async def _offset(self, addr: str, code: int, field: str = "offset", **ext: Any) -> int:
        resp = await self.invoke_ok(addr, code, _ext(**ext))
        return int(resp.ext_fields[field])

    async def get_max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """The next offset to be written (the queue's message count if nothing was deleted)."""
        return await self._offset(addr, RequestCode.GET_MAX_OFFSET, topic=topic, queueId=queue_id)

    async def get_min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset(addr, RequestCode.GET_MIN_OFFSET, topic=topic, queueId=queue_id)

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return await self._offset(
            addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic=topic, queueId=queue_id, timestamp=timestamp_ms
        )

    async def get_earliest_msg_store_time(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset(
            addr, RequestCode.GET_EARLIEST_MSG_STORETIME, "timestamp", topic=topic, queueId=queue_id
        )

    # -- client membership ------------------------------------------------------------------

    async def send_heartbeat(self, addr: str, heartbeat: dict[str, Any], timeout_s: float | None = None) -> None:
        await self.invoke_ok(addr, RequestCode.HEART_BEAT, body=orjson.dumps(heartbeat), timeout_s=timeout_s)

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        ext = _ext(clientID=client_id, producerGroup=producer_group, consumerGroup=consumer_group)
        await self.invoke_ok(addr, RequestCode.UNREGISTER_CLIENT, ext)

    async def get_consumer_id_list_by_group(self, addr: str, group: str) -> list[str]:
        resp = await self.invoke_ok(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, _ext(consumerGroup=group))
        return [str(c) for c in _json(resp.body).get("consumerIdList") or []]

    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], only_this_broker: bool = False
    ) -> set[MessageQueue]:
        body = orjson.dumps(
            {
                "consumerGroup": group,
                "clientId": client_id,
                "onlyThisBroker": only_this_broker,
                "mqSet": [m.to_json() for m in mqs],
            }
        )
        resp = await self.invoke_ok(addr, RequestCode.LOCK_BATCH_MQ, body=body)
        return {MessageQueue.from_json(m) for m in _json(resp.body).get("lockOKMQSet") or []}

    async def unlock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], oneway: bool = False
    ) -> None:
        body = orjson.dumps({"consumerGroup": group, "clientId": client_id, "mqSet": [m.to_json() for m in mqs]})
        if oneway:
            await self.invoke_oneway(addr, RequestCode.UNLOCK_BATCH_MQ, body=body)
        else:
            await self.invoke_ok(addr, RequestCode.UNLOCK_BATCH_MQ, body=body)

    async def consumer_send_message_back(
        self, addr: str, msg: MessageExt, group: str, delay_level: int, max_reconsume_times: int = 16
    ) -> None:
        """Hand a message the consumer failed back to the broker (retry topic, later the DLQ)."""
        ext = _ext(
            offset=msg.commit_log_offset,
            group=group,
            delayLevel=delay_level,
            originMsgId=msg.msg_id,
            originTopic=msg.topic,
            unitMode=False,
            maxReconsumeTimes=max_reconsume_times,
        )
        await self.invoke_ok(addr, RequestCode.CONSUMER_SEND_MSG_BACK, ext)

    # -- messages by key or id --------------------------------------------------------------

    async def query_message(
        self,
        addr: str,
        topic: str,
        key: str,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int = 2**63 - 1,
        unique_key: bool = False,
        timeout_s: float | None = None,
    ) -> list[MessageExt]:
        """Messages indexed under ``key`` (KEYS token or UNIQ_KEY); [] on QUERY_NOT_FOUND."""
        ext = _ext(
            topic=topic,
            key=key,
            maxNum=max_num,
            beginTimestamp=begin_ms,
            endTimestamp=end_ms,
            _UNIQUE_KEY_QUERY=True if unique_key else None,
        )
        resp = await self.invoke_ok(
            addr,
            RequestCode.QUERY_MESSAGE,
            ext,
            timeout_s=timeout_s,
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        return decode_messages(resp.body)

    async def view_message(self, addr: str, commit_log_offset: int, timeout_s: float | None = None) -> MessageExt:
        resp = await self.invoke_ok(
            addr, RequestCode.VIEW_MESSAGE_BY_ID, _ext(offset=commit_log_offset), timeout_s=timeout_s
        )
        msgs = decode_messages(resp.body)
        if not msgs:
            raise MQClientError(f"{addr} answered VIEW_MESSAGE_BY_ID {commit_log_offset} with no record")
        return msgs[0]

    # -- admin ------------------------------------------------------------------------------

    async def update_and_create_topic(
        self,
        addr: str,
        topic: str,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
        order: bool = False,
        topic_filter_type: str = "SINGLE_TAG",
        topic_sys_flag: int = 0,
    ) -> None:
        ext = _ext(
            topic=topic,
            defaultTopic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            readQueueNums=read_queue_nums,
            writeQueueNums=write_queue_nums,
            perm=perm,
            topicFilterType=topic_filter_type,
            topicSysFlag=topic_sys_flag,
            order=order,
        )
        await self.invoke_ok(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        await self.invoke_ok(addr, RequestCode.DELETE_TOPIC_IN_BROKER, _ext(topic=topic))

    async def get_all_topic_config(self, addr: str) -> dict[str, Any]:
        resp = await self.invoke_ok(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        return dict(_json(resp.body))

    async def get_topic_stats_info(self, addr: str, topic: str) -> dict[MessageQueue, TopicOffset]:
        resp = await self.invoke_ok(addr, RequestCode.GET_TOPIC_STATS_INFO, _ext(topic=topic))
        return {
            mq: TopicOffset(
                int(v.get("minOffset", 0)), int(v.get("maxOffset", 0)), int(v.get("lastUpdateTimestamp", 0))
            )
            for mq, v in _mq_table(_json(resp.body).get("offsetTable")).items()
        }

    async def get_consume_stats(self, addr: str, group: str, topic: str | None = None) -> ConsumeStats:
        resp = await self.invoke_ok(addr, RequestCode.GET_CONSUME_STATS, _ext(consumerGroup=group, topic=topic))
        data = _json(resp.body)
        table = {
            mq: OffsetWrapper(
                int(v.get("brokerOffset", 0)), int(v.get("consumerOffset", 0)), int(v.get("lastTimestamp", 0))
            )
            for mq, v in _mq_table(data.get("offsetTable")).items()
        }
        return ConsumeStats(table, float(data.get("consumeTps", 0.0)))

    async def invoke_broker_to_reset_offset(
        self, addr: str, topic: str, group: str, timestamp: int, force: bool, cplus: bool = False
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET: the broker resets the group's offsets and tells its
        online members; the offsets set. ``cplus`` sends it as a C++ client (whose members
        get the list form). CONSUMER_NOT_ONLINE (no member online) is an MQBrokerError."""
        ext = _ext(topic=topic, group=group, timestamp=timestamp, isForce=force)
        resp = await self.invoke(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext,
                                 language="CPP" if cplus else "JAVA")  # fmt: skip
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        table: dict[str, Any] = _json(resp.body).get("offsetTable") or {}
        return {mq: int(cast(Any, v)) for mq, v in _mq_table(table).items()}

    async def get_consumer_connection_list(self, addr: str, group: str) -> ConsumerConnection:
        resp = await self.invoke_ok(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, _ext(consumerGroup=group))
        d = _json(resp.body)
        conns = [
            Connection(
                str(c.get("clientId", "")),
                str(c.get("clientAddr", "")),
                str(c.get("language", "")),
                int(c.get("version", 0) or 0),
            )
            for c in d.get("connectionSet") or []
        ]
        return ConsumerConnection(
            conns,
            d.get("consumeType"),
            d.get("messageModel"),
            d.get("consumeFromWhere"),
            dict(d.get("subscriptionTable") or {}),
        )

    async def get_producer_connection_list(self, addr: str, group: str) -> list[Connection]:
        """GET_PRODUCER_CONNECTION_LIST: the group's client connections to that broker."""
        resp = await self.invoke_ok(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, _ext(producerGroup=group))
        return [
            Connection(str(c.get("clientId", "")), str(c.get("clientAddr", "")), str(c.get("language", "")),
                       int(c.get("version", 0) or 0))
            for c in _json(resp.body).get("connectionSet") or []
        ]  # fmt: skip

    async def get_broker_runtime_info(self, addr: str, timeout_s: float | None = None) -> dict[str, str]:
        resp = await self.invoke_ok(addr, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=timeout_s)
        return {str(k): str(v) for k, v in (_json(resp.body).get("table") or {}).items()}

    async def delete_expired_commit_log(self, addr: str) -> None:
        """DELETE_EXPIRED_COMMITLOG: the broker's next clean-up passes delete expired CommitLog
        files whatever ``deleteWhen`` says (as mqadmin deleteExpiredCommitLog)."""
        await self.invoke_ok(addr, RequestCode.DELETE_EXPIRED_COMMITLOG)

    # -- ACL (a broker with aclEnable=true) -------------------------------------------------------

    async def update_acl_config(self, addr: str, account: dict[str, Any]) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: accessKey, secretKey, whiteRemoteAddress, admin,
        defaultTopicPerm, defaultGroupPerm, topicPerms and groupPerms (comma lists)."""
        await self.invoke_ok(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, _ext(**account))

    async def delete_acl_config(self, addr: str, access_key: str) -> None:
        await self.invoke_ok(addr, RequestCode.DELETE_ACL_CONFIG, _ext(accessKey=access_key))

    async def update_global_white_addrs(self, addr: str, addrs: str, acl_file: str | None = None) -> None:
        ext = _ext(globalWhiteAddrs=addrs, aclFileFullPath=acl_file)
        await self.invoke_ok(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext)

    async def get_broker_cluster_acl_info(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_CLUSTER_ACL_INFO: clusterName, brokerName, brokerAddr, version (the default
        file's {counter, timestamp}) and allAclFileVersion (file path → {counter, timestamp})."""
        ef = (await self.invoke_ok(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)).ext_fields
        return {
            "clusterName": ef.get("clusterName"),
            "brokerName": ef.get("brokerName"),
            "brokerAddr": ef.get("brokerAddr"),
            "version": orjson.loads(ef.get("version") or "{}"),
            "allAclFileVersion": orjson.loads(ef.get("allAclFileVersion") or "{}"),
        }

    async def update_and_create_subscription_group(self, addr: str, config: SubscriptionGroupConfig) -> None:
        await self.invoke_ok(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(config.to_json()))

    async def get_all_consumer_offset(self, addr: str) -> dict[str, dict[int, int]]:
        """``{"topic@group": {queueId: offset}}``."""
        resp = await self.invoke_ok(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        table = _json(resp.body).get("offsetTable") or {}
        return {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}
