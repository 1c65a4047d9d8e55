"""QueryAssignmentProcessor: QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401), RocketMQ 5's
server-side rebalance, through which a 5.x remoting push consumer learns it should pop.

SET_MESSAGE_REQUEST_MODE (what ``mqadmin setConsumeMode -t T -g G -m POP -q N`` sends), body
SetMessageRequestModeRequestBody ``{"topic","consumerGroup","mode":"PULL"|"POP","popShareQueueNum"}``,
saved in ``messageRequestMode.json`` (``message_request_mode_manager.py``):

===============================  =========================  ===================================
condition                        code                       remark (5.3.3's)
===============================  =========================  ===================================
a retry topic                    NO_PERMISSION              retry topic is not allowed to set mode
no such topic                    TOPIC_NOT_EXIST            topic[t] not exist
no such group                    SUBSCRIPTION_GROUP_NOT_    subscription group does not exist
                                 EXIST
a body that does not parse       SYSTEM_ERROR               (Pumice: what is wrong)
===============================  =========================  ===================================

QUERY_ASSIGNMENT, body QueryAssignmentRequestBody ``{"topic","consumerGroup","clientId",
"strategyName","messageModel"}``; answer SUCCESS with QueryAssignmentResponseBody
``{"messageQueueAssignments":[{"messageQueue":{"brokerName","queueId","topic"},"mode":…}]}``
(no key at all when there is no answer: the client keeps what it has). The topic's queues are
its route's readable queues (asked of the name servers, else this broker's own); the mode is
the group's (a retry topic, or none set: PULL, 5.3.3's ``defaultMessageRequestMode``).

==========================  ==============================================================
messageModel / mode         the client's queues
==========================  ==============================================================
BROADCASTING                every queue
CLUSTERING, PULL            the strategy's share among the group's live clients (``AVG``,
                            ``AVG_BY_CIRCLE``; another strategy: no answer)
CLUSTERING, POP,            every broker's queues as queue id −1 (each client pops from
popShareQueueNum 0 (or ≥    the whole broker)
clients − 1)
CLUSTERING, POP, N          its own share and the next N clients' (fewer clients than
                            queues), else one queue by its place among the clients
==========================  ==============================================================
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from pumice.broker.message_request_mode_manager import MODES, MessageRequestModeManager
from pumice.client.allocate import allocate_averagely, allocate_message_queue_averagely_by_circle
from pumice.client.message import MessageQueue
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.common.perm_name import PERM_READ
from pumice.common.route_data import loads_lenient
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)

ROUTE_TIMEOUT_S = 3.0


def _allocate(strategy: str, cid: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue] | None:
    if strategy == "AVG":
        return allocate_averagely(cid, mqs, cids)
    if strategy == "AVG_BY_CIRCLE":
        return allocate_message_queue_averagely_by_circle("", cid, mqs, cids)
    return None


def allocate_for_pop(
    strategy: str, cid: str, mqs: list[MessageQueue], cids: list[str], share: int
) -> list[MessageQueue]:
    """QueryAssignmentProcessor.allocate4Pop."""
    if share <= 0 or share >= len(cids) - 1:
        return [MessageQueue(mq.topic, mq.broker_name, -1) for mq in sorted(mqs)]
    cids = sorted(cids)
    if len(cids) <= len(mqs):
        out = list(_allocate(strategy, cid, mqs, cids) or [])
        if cid in cids:
            i = cids.index(cid)
            for _ in range(share):
                i = (i + 1) % len(cids)
                out += _allocate(strategy, cids[i], mqs, cids) or []
        return out
    return [sorted(mqs)[cids.index(cid) % len(mqs)]] if cid in cids else []


class QueryAssignmentProcessor:
    def __init__(self, topics: Any, subscription_groups: Any, consumers: Any, modes: MessageRequestModeManager,
                 broker_name: str, namesrv_addrs: Any, client: RemotingClient) -> None:  # fmt: skip
        self.topics = topics
        self.subscription_groups = subscription_groups
        self.consumers = consumers
        self.modes = modes
        self.broker_name = broker_name
        self.namesrv_addrs = namesrv_addrs  # () -> the name servers' addresses now
        self.client = client

    async def process_request(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        try:
            body = orjson.loads(bytes(req.body)) if req.body else None
        except orjson.JSONDecodeError as e:
            return req.make_response(ResponseCode.SYSTEM_ERROR, f"the request body is not JSON: {e}")
        if not isinstance(body, dict) or not isinstance(body.get("topic"), str):
            return req.make_response(ResponseCode.SYSTEM_ERROR, "the request body has no topic")
        if req.code == RequestCode.SET_MESSAGE_REQUEST_MODE:
            return self.set_mode(req, body)
        return await self.query_assignment(req, body)

    def set_mode(self, req: RemotingCommand, body: dict[str, Any]) -> RemotingCommand:
        topic, group = body["topic"], str(body.get("consumerGroup") or "")
        mode = str(body.get("mode") or "PULL")
        if mode not in MODES:
            return req.make_response(ResponseCode.SYSTEM_ERROR, f"mode {mode!r} is not PULL or POP")
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return req.make_response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.topics.select_topic_config(topic) is None:
            return req.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if self.subscription_groups.find_subscription_group_config(group) is None:
            return req.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        if not self.modes.set_mode(topic, group, mode, int(body.get("popShareQueueNum") or 0)):
            log.error("messageRequestMode.json not saved: the mode of %s on %s is kept in memory", group, topic)
        return req.make_response(ResponseCode.SUCCESS)

    async def _queues(self, topic: str) -> list[MessageQueue] | None:
        """The topic's readable queues of its route (TopicRouteInfoManager.getTopicSubscribeInfo)."""
        for addr in self.namesrv_addrs():
            try:
                r = await self.client.invoke(
                    addr, RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic}),
                    ROUTE_TIMEOUT_S,
                )  # fmt: skip
            except Exception as e:  # the next name server, else this broker's own queues
                log.warning("route of %s from %s: %r", topic, addr, e)
                continue
            if r.code == ResponseCode.SUCCESS and r.body:
                readable = [qd for qd in loads_lenient(r.body).get("queueDatas") or [] if int(qd["perm"]) & PERM_READ]
                return [MessageQueue(topic, str(qd["brokerName"]), i) for qd in readable
                        for i in range(int(qd["readQueueNums"]))]  # fmt: skip
            if r.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
        tc = self.topics.select_topic_config(topic)
        if tc is None or not tc.perm & PERM_READ:
            return None
        return [MessageQueue(topic, self.broker_name, i) for i in range(tc.read_queue_nums)]

    async def query_assignment(self, req: RemotingCommand, body: dict[str, Any]) -> RemotingCommand:
        topic, group = body["topic"], str(body.get("consumerGroup") or "")
        cid, strategy = str(body.get("clientId") or ""), str(body.get("strategyName") or "AVG")
        mode = self.modes.get_mode(topic, group)
        if mode is None or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            mode = {"mode": "PULL", "popShareQueueNum": 0}
        mqs = await self._queues(topic)
        assigned: list[MessageQueue] | None = None
        if mqs is not None:
            if str(body.get("messageModel")).upper() == "BROADCASTING":
                assigned = mqs
            else:
                info = self.consumers.get_consumer_group_info(group) if self.consumers is not None else None
                cids = sorted(info.channels) if info is not None else []
                if not cids:
                    log.warning("QueryLoad: no assignment for group[%s] topic[%s], no client", group, topic)
                elif _allocate(strategy, cid, mqs, cids) is None:
                    log.warning("QueryLoad: unsupported strategy [%s]", strategy)
                elif mode["mode"] == "POP":
                    assigned = allocate_for_pop(strategy, cid, mqs, cids, int(mode.get("popShareQueueNum") or 0))
                else:
                    assigned = _allocate(strategy, cid, mqs, cids)
        out: dict[str, Any] = {}
        if assigned is not None:
            unique = {(mq.broker_name, mq.queue_id): mq for mq in assigned}
            out["messageQueueAssignments"] = [{"messageQueue": mq.to_json(), "mode": mode["mode"]}
                                              for mq in unique.values()]  # fmt: skip
        return req.make_response(ResponseCode.SUCCESS, body=orjson.dumps(out))
