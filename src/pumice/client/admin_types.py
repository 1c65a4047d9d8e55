"""Plain result types of the admin calls (ready to print or serialise for a CLI).

Each has ``to_dict()`` giving JSON-friendly values (MessageQueues as dicts).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pumice.client.message import MessageQueue

# UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's body is the broker's own SubscriptionGroupConfig JSON
from pumice.common.subscription_group import SubscriptionGroupConfig as SubscriptionGroupConfig


def _plain(v: Any) -> Any:
    if isinstance(v, MessageQueue):
        return v.to_json()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


class _ToDict:
    def to_dict(self) -> dict[str, Any]:
        return _plain(self)  # type: ignore[no-any-return]


@dataclass
class TopicOffset(_ToDict):
    """One queue of GET_TOPIC_STATS_INFO."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass
class QueueStatus(_ToDict):
    mq: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass
class OffsetWrapper(_ToDict):
    """One queue of GET_CONSUME_STATS."""

    broker_offset: int
    consumer_offset: int
    last_timestamp: int


@dataclass
class RollbackStats(_ToDict):
    """One queue of an offline reset (mqadmin's ``RollbackStats``): the rollback offset is the
    timestamp offset when it was written, else the consumer offset kept."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


@dataclass
class ConsumeStats(_ToDict):
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0


@dataclass
class QueueProgress(_ToDict):
    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def lag(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["lag"] = self.lag
        return d


@dataclass
class ConsumerProgress(_ToDict):
    group: str
    queues: list[QueueProgress] = field(default_factory=list)
    consume_tps: float = 0.0

    @property
    def total_broker_offset(self) -> int:
        return sum(q.broker_offset for q in self.queues)

    @property
    def total_consumer_offset(self) -> int:
        return sum(q.consumer_offset for q in self.queues)

    @property
    def total_lag(self) -> int:
        return sum(q.lag for q in self.queues)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "queues": [q.to_dict() for q in self.queues],
            "consumeTps": self.consume_tps,
            "totalBrokerOffset": self.total_broker_offset,
            "totalConsumerOffset": self.total_consumer_offset,
            "totalLag": self.total_lag,
        }


@dataclass
class Connection(_ToDict):
    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass
class ConsumerConnection(_ToDict):
    """GET_CONSUMER_CONNECTION_LIST: the group's clients and what they subscribe to."""

    connections: list[Connection] = field(default_factory=list)
    consume_type: Any = None
    message_model: Any = None
    consume_from_where: Any = None
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class BrokerInfo(_ToDict):
    """One broker of the cluster list, with its GET_BROKER_RUNTIME_INFO table (empty if it
    did not answer; ``error`` says why)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: dict[str, str] = field(default_factory=dict)
    error: str | None = None
