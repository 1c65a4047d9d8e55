"""What every RPC's activity shares (5.3.3's ``AbstractMessingActivity``): the broker it runs
in, the proxy config, the clients, the in-process calls of the broker's processors, the
topic and group checks, and the ACL check of a call."""

from __future__ import annotations

import re
from typing import Any

from pumice.proxy.client_channel import GrpcClientChannel, call_processor
from pumice.proxy.client_manager import GrpcClientManager
from pumice.proxy.grpc_status import GrpcProxyError
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proxy_config import ProxyConfig
from pumice.proxy.proxy_context import ProxyContext, authenticate
from pumice.remoting.remoting_command import RemotingCommand

# GrpcValidator: topic and group names (5.x's TopicValidator and the 255/120 limits)
_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 120
MESSAGE_TYPE_ATTRIBUTE = "message.type"
ACCEPT_TYPES: dict[str, list[Any]] = {
    "NORMAL": [pb.NORMAL], "FIFO": [pb.FIFO], "DELAY": [pb.DELAY], "TRANSACTION": [pb.TRANSACTION],
    "MIXED": [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION],
}  # fmt: skip


class Activity:
    def __init__(self, broker: Any, config: ProxyConfig, clients: GrpcClientManager) -> None:
        self.broker = broker  # the BrokerController this proxy runs in
        self.config = config
        self.clients = clients
        # calls with no client of their own (a route, an end of transaction from a new client)
        self.proxy_channel = GrpcClientChannel("proxy", "127.0.0.1:0", "JAVA")

    async def call(self, channel: GrpcClientChannel, code: int, fields: dict[str, Any], body: bytes = b"",
                   timeout_s: float = 30.0, oneway: bool = False) -> RemotingCommand:  # fmt: skip
        return await call_processor(self.broker.server, channel, code, fields, body, timeout_s, oneway)

    def authorize(self, ctx: ProxyContext, request_code: int, resources: dict[str, int] | None = None) -> None:
        """aclEnable: the call's signature and perms (UNAUTHORIZED); then its client id."""
        acl = self.broker.acl
        if acl is not None:
            authenticate(ctx, acl, request_code, resources or {})
        ctx.require_client_id()

    def channel_of(self, ctx: ProxyContext) -> GrpcClientChannel:
        return self.clients.client(ctx.client_id, ctx.remote_addr, ctx.language).channel

    # -- checks ------------------------------------------------------------------------------

    @staticmethod
    def validate_topic(topic: Any) -> str:
        name = topic.name
        if not name.strip():
            raise GrpcProxyError(pb.ILLEGAL_TOPIC, "topic name cannot be blank")
        if len(name) > TOPIC_MAX_LENGTH:
            raise GrpcProxyError(pb.ILLEGAL_TOPIC, f"topic name cannot exceed {TOPIC_MAX_LENGTH} characters")
        if not _NAME.match(name):
            raise GrpcProxyError(pb.ILLEGAL_TOPIC, f"topic name {name} contains illegal characters")
        return name

    @staticmethod
    def validate_group(group: Any) -> str:
        name = group.name
        if not name.strip():
            raise GrpcProxyError(pb.ILLEGAL_CONSUMER_GROUP, "consumer group cannot be blank")
        if len(name) > GROUP_MAX_LENGTH:
            raise GrpcProxyError(
                pb.ILLEGAL_CONSUMER_GROUP, f"consumer group cannot exceed {GROUP_MAX_LENGTH} characters"
            )
        if not _NAME.match(name):
            raise GrpcProxyError(pb.ILLEGAL_CONSUMER_GROUP, f"consumer group {name} contains illegal characters")
        return name

    # -- the broker's tables -----------------------------------------------------------------

    def topic_config(self, topic: str) -> Any:
        return self.broker.topics.topic_config_table.get(topic)

    def group_config(self, group: str) -> Any:
        return self.broker.subscription_groups.subscription_group_table.get(group)

    def message_type(self, topic: str) -> str:
        """The topic's ``message.type`` attribute (5.x); NORMAL when it has none, as 5.3.3's
        default. Read defensively: TopicConfig gains ``attributes`` in another change."""
        config = self.topic_config(topic)
        attributes = getattr(config, "attributes", None) or {}
        value = attributes.get(MESSAGE_TYPE_ATTRIBUTE) or attributes.get("+" + MESSAGE_TYPE_ATTRIBUTE)
        return str(value).upper() if value else "NORMAL"

    def accept_message_types(self, topic: str) -> list[Any]:
        return ACCEPT_TYPES.get(self.message_type(topic), [pb.MESSAGE_TYPE_UNSPECIFIED])
