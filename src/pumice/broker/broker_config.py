"""BrokerConfig: the broker's settings, with RocketMQ's key names (broker.conf).

A broker.conf sets both this and the store's MessageStoreConfig; ``load_broker_config``
applies each key to whichever has it and rejects unknown keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pumice.config import apply_properties, load_properties
from pumice.store.message_store_config import BrokerRole, MessageStoreConfig

PERM_READ = 4
PERM_WRITE = 2


@dataclass
class BrokerConfig:
    CONF_ALIASES: ClassVar[dict[str, str]] = {"brokerIP1": "broker_ip1", "brokerIP2": "broker_ip2"}

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    namesrv_addr: str | None = None  # "host:port;host:port"
    listen_port: int = 10911
    listen_host: str = "0.0.0.0"
    broker_ip1: str = "127.0.0.1"  # the address published to the name servers and in msgIds
    broker_ip2: str | None = None  # the HA address published to the name servers (brokerIP1 if unset)
    broker_permission: int = PERM_READ | PERM_WRITE
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8
    auto_create_subscription_group: bool = True
    register_name_server_period: int = 30_000
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    flush_consumer_offset_interval: int = 5000
    fast_listen_port_enable: bool = True
    slave_read_enable: bool = False  # a master may send slow consumers to its slave

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def register_period_s(self) -> float:
        """``registerNameServerPeriod`` clamped to 10–60 s, as the seeds say."""
        return min(max(self.register_name_server_period, 10_000), 60_000) / 1000

    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    def validate(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listenPort {self.listen_port} is not a TCP port")
        if self.broker_id < 0:
            raise ValueError(f"brokerId {self.broker_id} must be 0 (master) or more (slave)")
        for a in self.namesrv_addrs():
            host, _, port = a.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"namesrvAddr entry {a!r} is not host:port")


def apply_role(broker: BrokerConfig, store: MessageStoreConfig) -> None:
    """BrokerStartup's role rules: a master's brokerId is 0, a slave's must be above 0; the
    HA port is listenPort + 1 (0, an ephemeral port, when listenPort is 0)."""
    if store.broker_role is BrokerRole.SLAVE:
        if broker.broker_id <= 0:
            raise ValueError("Slave's brokerId must be > 0")
    else:
        broker.broker_id = 0
    store.ha_listen_port = broker.listen_port + 1 if broker.listen_port else 0


def load_broker_config(path: str | None) -> tuple[BrokerConfig, MessageStoreConfig]:
    broker, store = BrokerConfig(), MessageStoreConfig()
    if path:
        apply_properties([broker, store], load_properties(path), path)
    broker.validate()
    store.validate()
    apply_role(broker, store)
    return broker, store
