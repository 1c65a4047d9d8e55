"""QueryRoute and QueryAssignment (5.3.3's ``RouteActivity`` over ``LocalTopicRouteService``).

The route is the name servers' (GET_ROUTEINFO_BY_TOPIC; this broker's own topic table when it
has no name server). Each broker's endpoint is its address's host with ``grpcServerPort``
(``ProxyTopicRouteData(route, port)``: every broker of the cluster runs a proxy of its own).
A queue data of read r, write w and perm p gives, numbered from 0 (genMessageQueueFromQueueData):

| perm      | queues                                                        |
|-----------|---------------------------------------------------------------|
| RW        | max(r - w, 0) READ, then max(w - r, 0) WRITE, then min(r, w) READ_WRITE |
| W only    | w WRITE                                                       |
| R only    | r READ                                                        |
| neither   | max(1, r, w) NONE                                             |

each with ``accept_message_types`` from the topic's ``message.type``. QueryAssignment answers
one queue with id -1 per readable master (POP takes from every queue), or every read queue for a
FIFO group (consumeMessageOrderly); FORBIDDEN "no readable queue" when there is none.
"""

from __future__ import annotations

import logging
from typing import Any

from pumice.acl.permission import SUB
from pumice.client.route import TopicRouteData
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.common.route_data import BrokerData, QueueData
from pumice.proxy.activity import Activity
from pumice.proxy.grpc_status import GrpcProxyError, ok, status
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proxy_context import ProxyContext
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)


def permission_of(perm: int) -> Any:
    readable, writeable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writeable:
        return pb.READ_WRITE
    return pb.READ if readable else pb.WRITE if writeable else pb.NONE


def queues_of(q: QueueData) -> list[Any]:
    """The permission of each queue id of one queue data (the table above)."""
    r, w, perm = q.read_queue_nums, q.write_queue_nums, q.perm
    if perm & PERM_READ and perm & PERM_WRITE:
        rw = min(r, w)
        return [pb.READ] * (r - rw) + [pb.WRITE] * (w - rw) + [pb.READ_WRITE] * rw
    if perm & PERM_WRITE:
        return [pb.WRITE] * w
    if perm & PERM_READ:
        return [pb.READ] * r
    return [pb.NONE] * max(1, r, w)


class RouteActivity(Activity):
    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route from the name servers; TOPIC_NOT_FOUND as 5.3.3 answers it."""
        addrs = self.broker.config.namesrv_addrs()
        if not addrs:
            config = self.topic_config(topic)
            if config is None:
                raise GrpcProxyError(pb.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}")
            c = self.broker.config
            return TopicRouteData(
                broker_datas=[BrokerData(c.broker_cluster_name, c.broker_name, {0: c.broker_addr})],
                queue_datas=[QueueData(c.broker_name, config.read_queue_nums, config.write_queue_nums, config.perm)],
            )
        last: Exception | None = None
        for addr in addrs:
            request = RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic})
            try:
                response = await self.broker.namesrv_client.invoke(addr, request, timeout_s=3.0)
            except Exception as e:  # the next name server
                last = e
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                raise GrpcProxyError(pb.TOPIC_NOT_FOUND, response.remark or f"No topic route info in name server "
                                     f"for the topic: {topic}")  # fmt: skip
            if response.code != ResponseCode.SUCCESS:
                raise GrpcProxyError(pb.INTERNAL_SERVER_ERROR, response.remark or str(response.code))
            return TopicRouteData.decode(response.body)
        raise GrpcProxyError(pb.PROXY_TIMEOUT, f"no name server answered for topic {topic}: {last}")

    def brokers(self, route: TopicRouteData) -> dict[str, dict[int, Any]]:
        port = self.config.grpc_server_port
        out: dict[str, dict[int, Any]] = {}
        for b in route.broker_datas:
            ids: dict[int, Any] = {}
            for broker_id, addr in sorted(b.broker_addrs.items()):
                host = addr.rsplit(":", 1)[0].strip("[]")
                scheme = pb.IPv6 if ":" in host else pb.IPv4 if host.replace(".", "").isdigit() else pb.DOMAIN_NAME
                ids[int(broker_id)] = pb.Broker(name=b.broker_name, id=int(broker_id), endpoints=pb.Endpoints(
                    scheme=scheme, addresses=[pb.Address(host=host, port=port)]))  # fmt: skip
            out[b.broker_name] = ids
        return out

    async def query_route(self, ctx: ProxyContext, request: Any) -> Any:
        self.authorize(ctx, RequestCode.GET_ROUTEINFO_BY_TOPIC)
        topic = self.validate_topic(request.topic)
        route = await self.route(topic)
        brokers = self.brokers(route)
        accept = self.accept_message_types(topic)
        queues = []
        for q in route.queue_datas:
            ids = brokers.get(q.broker_name)
            if ids is None:
                break  # as 5.3.3
            for broker in ids.values():
                for queue_id, permission in enumerate(queues_of(q)):
                    queues.append(pb.MessageQueue(topic=request.topic, id=queue_id, permission=permission,
                                                  broker=broker, accept_message_types=accept))  # fmt: skip
        return mpb.QueryRouteResponse(status=ok(), message_queues=queues)

    async def query_assignment(self, ctx: ProxyContext, request: Any) -> Any:
        topic = self.validate_topic(request.topic)
        group = self.validate_group(request.group)
        self.authorize(ctx, RequestCode.GET_ROUTEINFO_BY_TOPIC, {topic: SUB, RETRY_GROUP_TOPIC_PREFIX + group: SUB})
        route = await self.route(topic)
        brokers = self.brokers(route)
        fifo = self.clients.fifo(None, group)
        assignments = []
        for q in route.queue_datas:
            if not q.perm & PERM_READ or q.read_queue_nums <= 0:
                continue
            master = brokers.get(q.broker_name, {}).get(0)
            if master is None:
                continue
            permission = permission_of(q.perm)
            for queue_id in range(q.read_queue_nums) if fifo else (-1,):
                assignments.append(pb.Assignment(message_queue=pb.MessageQueue(
                    topic=request.topic, id=queue_id, permission=permission, broker=master)))  # fmt: skip
        if not assignments:
            return mpb.QueryAssignmentResponse(status=status(pb.FORBIDDEN, "no readable queue"))
        return mpb.QueryAssignmentResponse(status=ok(), assignments=assignments)
