"""ClientManageProcessor: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) (see rebalance_lock_manager), CHECK_CLIENT_CONFIG (46).

CHECK_CLIENT_CONFIG (a Java push consumer sends it at start for each subscription that is not
TAG): body CheckClientRequestBody ``{"clientId", "group", "subscriptionData"}``. SUCCESS for no
subscriptionData, or an expressionType that is absent, empty or ``TAG``; any
other type (SQL92) is SYSTEM_ERROR ``The broker does not support consumer to filter message by
SQL92``, as RocketMQ 4.9 answers with ``enablePropertyFilter=false`` (the client then fails its
start); a body that is not JSON is SYSTEM_ERROR.

A heartbeat body (HeartbeatData JSON) lists the client's producer and consumer groups; enum
fields arrive as names (Java) or ordinals (C++) and are kept as sent. As the Java broker, a
consumer group's heartbeat finds its subscription group (creating it when
autoCreateSubscriptionGroup allows) and then its ``%RETRY%<group>`` topic with the group's
retryQueueNums (a unit-mode consumer's with the unit-sub flag); a group that neither exists nor
may be created gets no retry topic. The group's notifyConsumerIdsChangedEnable decides whether
its members hear NOTIFY_CONSUMER_IDS_CHANGED when one joins or unregisters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from pumice.broker.consumer_manager import ClientChannelInfo, ConsumerManager
from pumice.broker.producer_manager import ProducerManager
from pumice.broker.rebalance_lock_manager import RebalanceLockManager, mq_json, mq_set
from pumice.remoting.remoting_command import MissingFieldError, RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.sql92 import Sql92Error, compile_sql92

# a heartbeat's consumer groups, each with its unitMode → each group's notifyConsumerIdsChangedEnable
PrepareGroups = Callable[[list[tuple[str, bool]]], Awaitable[dict[str, bool]]]


def _is_subscription(sub: object) -> bool:
    """A SubscriptionData a pull can use: a topic, and a subString if there is one."""
    return isinstance(sub, dict) and isinstance(sub.get("topic"), str) and isinstance(sub.get("subString", "*"), str)


class ClientManageProcessor:
    def __init__(
        self,
        consumers: ConsumerManager,
        prepare_groups: PrepareGroups | None = None,
        producers: ProducerManager | None = None,
        group_notifies: Callable[[str], bool] | None = None,
        enable_property_filter: bool = False,
    ) -> None:
        self.consumers = consumers
        self.producers = producers if producers is not None else ProducerManager()
        self.locks = RebalanceLockManager()
        self.prepare_groups = prepare_groups
        self.enable_property_filter = enable_property_filter  # SQL92 subscriptions accepted
        self.group_notifies = group_notifies  # a group's notifyConsumerIdsChangedEnable

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if request.code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
            return self.lock_or_unlock(request)
        if request.code == RequestCode.HEART_BEAT:
            return await self.heart_beat(channel, request)
        if request.code == RequestCode.CHECK_CLIENT_CONFIG:
            return self.check_client_config(request)
        if request.code == RequestCode.UNREGISTER_CLIENT:
            client_id = request.ext_str("clientID", required=True) or ""
            producer_group = request.ext_str("producerGroup") or ""
            if producer_group:
                self.producers.unregister_producer(producer_group, channel)
            group = request.ext_str("consumerGroup") or ""
            if group:
                notify = self.group_notifies(group) if self.group_notifies is not None else True
                self.consumers.unregister_consumer(group, client_id, notify)
            return request.make_response(ResponseCode.SUCCESS)
        group = request.ext_str("consumerGroup", required=True) or ""
        ids = self.consumers.get_consumer_ids(group)
        if not ids:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"consumerIdList": ids}))

    def lock_or_unlock(self, request: RemotingCommand) -> RemotingCommand:
        if not len(request.body):  # 4.9 fails decoding the missing body: SYSTEM_ERROR
            raise MissingFieldError("the request has no body: a LockBatchRequestBody / UnlockBatchRequestBody")
        try:
            body = orjson.loads(request.body)
        except orjson.JSONDecodeError as e:
            raise MissingFieldError(f"the lock body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise MissingFieldError("the lock body is not a JSON object")
        group = str(body.get("consumerGroup", ""))
        client_id = str(body.get("clientId", ""))
        mqs = mq_set(body)
        if request.code == RequestCode.UNLOCK_BATCH_MQ:
            self.locks.unlock_batch(group, mqs, client_id)
            return request.make_response(ResponseCode.SUCCESS)
        granted = self.locks.try_lock_batch(group, mqs, client_id)
        return request.make_response(
            ResponseCode.SUCCESS, body=orjson.dumps({"lockOKMQSet": [mq_json(m) for m in granted]})
        )

    def check_client_config(self, request: RemotingCommand) -> RemotingCommand:
        if not len(request.body):  # 4.9 fails decoding the missing body: SYSTEM_ERROR
            raise MissingFieldError("the request has no body: a CheckClientRequestBody")
        try:
            body = orjson.loads(request.body)
        except orjson.JSONDecodeError as e:
            raise MissingFieldError(f"the CheckClientRequestBody is not JSON: {e}") from None
        if body is not None and not isinstance(body, dict):  # JSON null: nothing to check, as 4.9
            raise MissingFieldError("the CheckClientRequestBody is not a JSON object")
        sub = body.get("subscriptionData") if body is not None else None
        if sub is not None and not isinstance(sub, dict):
            raise MissingFieldError("the CheckClientRequestBody's subscriptionData is not a JSON object")
        if sub is not None:
            expression_type = sub.get("expressionType")
            if expression_type not in (None, "", "TAG"):  # ExpressionType.isTagType
                if not self.enable_property_filter:
                    return request.make_response(
                        ResponseCode.SYSTEM_ERROR,
                        f"The broker does not support consumer to filter message by {expression_type}",
                    )
                if str(expression_type).upper() != "SQL92":
                    remark = f"the expression type {expression_type} is not supported"
                    return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark)
                try:
                    compile_sql92(str(sub.get("subString") or ""))
                except Sql92Error as e:
                    return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e))
        return request.make_response(ResponseCode.SUCCESS)

    async def heart_beat(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """Checks the whole body before anything changes; then the subscription groups and their
        retry topics (the missing ones created together), then the members."""
        if not len(request.body):  # 4.9 fails decoding the missing body: SYSTEM_ERROR
            raise MissingFieldError("the request has no body: a HeartbeatData")
        try:
            data = orjson.loads(request.body)
        except orjson.JSONDecodeError as e:
            raise MissingFieldError(f"the heartbeat body is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise MissingFieldError("the heartbeat body is not a JSON object")
        client_id = str(data.get("clientID", ""))
        consumers = data.get("consumerDataSet") or []
        if not isinstance(consumers, list):
            raise MissingFieldError("the heartbeat's consumerDataSet is not a list")
        entries: list[tuple[str, dict[str, Any]]] = []
        for i, consumer in enumerate(consumers):
            where = f"the heartbeat's consumerDataSet[{i}]"
            if not isinstance(consumer, dict):
                raise MissingFieldError(f"{where} is not a JSON object")
            group = consumer.get("groupName")
            if not isinstance(group, str) or not group:
                raise MissingFieldError(f"{where} has no groupName string")
            subs = consumer.get("subscriptionDataSet") or []
            if not isinstance(subs, list) or not all(_is_subscription(s) for s in subs):
                raise MissingFieldError(f"{where}.subscriptionDataSet: each entry needs a topic and a subString string")
            entries.append((group, consumer))
        producers = data.get("producerDataSet") or []
        if not isinstance(producers, list) or not all(
            isinstance(p, dict) and isinstance(p.get("groupName"), str) and p["groupName"] for p in producers
        ):
            raise MissingFieldError("the heartbeat's producerDataSet: each entry needs a groupName string")
        notifies: dict[str, bool] = {}
        if self.prepare_groups is not None and entries:
            notifies = await self.prepare_groups([(g, consumer.get("unitMode") is True) for g, consumer in entries])
            if channel.closed:  # it closed meanwhile, and its close event has run: register nothing
                return request.make_response(ResponseCode.SUCCESS)
        for group, consumer in entries:
            self.consumers.register_consumer(
                group, client_id, channel, consumer, request.language, request.version, notifies.get(group, True)
            )
        for producer in producers:
            info = ClientChannelInfo(client_id, channel, language=request.language, version=request.version)
            self.producers.register_producer(producer["groupName"], info)
        return request.make_response(ResponseCode.SUCCESS)
