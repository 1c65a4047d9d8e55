"""The v5 clients the proxy knows: their channels, their settings and Telemetry streams
(5.3.3's ``GrpcChannelManager`` and ``GrpcClientSettingsManager``), and the Settings answer.

The Settings a client sends on Telemetry are kept by client id and answered merged with the
server's (``Settings`` in the answer):

| client   | field                             | value                                          |
|----------|-----------------------------------|------------------------------------------------|
| producer | backoff_policy                    | max_attempts grpcClientProducerMaxAttempts;    |
|          |                                   | exponential: grpcClientProducerBackoff*        |
|          |                                   | (initial, max, multiplier)                     |
| producer | publishing.max_body_size          | maxMessageSize                                 |
| producer | publishing.validate_message_type  | enableTopicMessageTypeCheck                    |
| consumer | subscription.receive_batch_size   | grpcClientConsumerLongPollingBatchSize         |
| consumer | subscription.long_polling_timeout | grpcClientConsumerMaxLongPollingTimeoutMillis  |
| consumer | subscription.fifo                 | the group's consumeMessageOrderly              |
| consumer | backoff_policy                    | max_attempts the group's retryMaxTimes + 1;    |
|          |                                   | customized: 1s 5s 10s 30s 1m … 2h (5.x's       |
|          |                                   | default group retry policy)                    |
| any      | metric                            | on = false                                     |
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pumice.proxy.client_channel import GrpcClientChannel
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proxy_config import ProxyConfig
from pumice.remoting.remoting_command import RemotingCommand

log = logging.getLogger(__name__)

# SubscriptionGroupConfig's default GroupRetryPolicy in 5.x: CUSTOMIZED, the delay levels from 3 on
DEFAULT_RETRY_NEXT_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
                         480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)  # fmt: skip


@dataclass
class GrpcClient:
    """One client instance (x-mq-client-id)."""

    client_id: str
    channel: GrpcClientChannel
    settings: Any = None  # the Settings it sent last
    telemetry: asyncio.Queue[Any] | None = None  # its open Telemetry stream's outbox
    producer_groups: set[str] = field(default_factory=set)
    consumer_group: str | None = None


class GrpcClientManager:
    def __init__(self, config: ProxyConfig, group_config: Callable[[str], Any]) -> None:
        self.config = config
        self.group_config = group_config  # consumer group → its SubscriptionGroupConfig or None
        self.clients: dict[str, GrpcClient] = {}
        self.on_broker_request: Callable[[GrpcClient, RemotingCommand], None] | None = None

    def client(self, client_id: str, remote_addr: str, language: str) -> GrpcClient:
        """The client of that id; a channel the broker closed (no heartbeat for 120 s) is replaced."""
        c = self.clients.get(client_id)
        if c is None:
            c = GrpcClient(client_id, GrpcClientChannel(client_id, remote_addr, language, self._broker_request))
            self.clients[client_id] = c
        elif c.channel.closed:
            c.channel = GrpcClientChannel(client_id, remote_addr, language, self._broker_request)
        c.channel.remote_addr = remote_addr
        return c

    def get(self, client_id: str) -> GrpcClient | None:
        return self.clients.get(client_id)

    def remove(self, client_id: str) -> GrpcClient | None:
        c = self.clients.pop(client_id, None)
        if c is not None:
            c.channel.close()
        return c

    def _broker_request(self, channel: GrpcClientChannel, request: RemotingCommand) -> None:
        c = self.clients.get(channel.client_id)
        if c is not None and self.on_broker_request is not None:
            self.on_broker_request(c, request)

    def write_telemetry(self, client: GrpcClient, command: Any) -> bool:
        if client.telemetry is None:
            return False
        client.telemetry.put_nowait(command)
        return True

    # -- settings --------------------------------------------------------------------------

    def merged_settings(self, client: GrpcClient) -> Any:
        """The client's settings with the server's values (the table above)."""
        raw = client.settings
        if raw is None:
            return None
        s = pb.Settings()
        s.CopyFrom(raw)
        c = self.config
        if s.HasField("publishing"):
            bp = s.backoff_policy
            bp.max_attempts = c.grpc_client_producer_max_attempts
            bp.exponential_backoff.initial.FromMilliseconds(c.grpc_client_producer_backoff_initial_millis)
            bp.exponential_backoff.max.FromMilliseconds(c.grpc_client_producer_backoff_max_millis)
            bp.exponential_backoff.multiplier = float(c.grpc_client_producer_backoff_multiplier)
            s.publishing.validate_message_type = c.enable_topic_message_type_check
            s.publishing.max_body_size = c.max_message_size
        elif s.HasField("subscription"):
            group = self.group_config(s.subscription.group.name)
            sub = s.subscription
            sub.receive_batch_size = c.grpc_client_consumer_long_polling_batch_size
            sub.long_polling_timeout.FromMilliseconds(c.grpc_client_consumer_max_long_polling_timeout_millis)
            sub.fifo = group.consume_message_orderly if group is not None else False
            retry_max_times = group.retry_max_times if group is not None else 16
            s.backoff_policy.max_attempts = retry_max_times + 1
            s.backoff_policy.customized_backoff.Clear()
            for ms in DEFAULT_RETRY_NEXT_MS:
                s.backoff_policy.customized_backoff.next.add().FromMilliseconds(ms)
        s.metric.on = False
        return s

    def fifo(self, client: GrpcClient | None, group: str) -> bool:
        """Whether a group is FIFO, as ReceiveMessage reads it (the group's config)."""
        config = self.group_config(group)
        return bool(config.consume_message_orderly) if config is not None else False
