"""BrokerConfig: the broker's settings, with RocketMQ's key names (broker.conf).

A broker.conf sets both this and the store's MessageStoreConfig; ``load_broker_config``
applies each key to whichever has it and rejects unknown keys (RocketMQ keys with no meaning
here are accepted with a warning: ``IGNORED_KEYS``).

The processor pools (RocketMQ's executors, see the seeds' table) take their sizes and queue
capacities from the ``*ThreadPoolNums`` and ``*ThreadPoolQueueCapacity`` keys: a pool runs at
most that many requests at once (requests that wait, e.g. on a worker thread) and answers
SYSTEM_BUSY past that many queued. The send pool's size is its capacity: a send waiting for
its flush or its slave holds no thread in RocketMQ 4.9, so it must not hold up the next.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

from pumice.config import NETTY_SERVER_IGNORED_KEYS, apply_properties, ignored, load_properties, snake_to_camel
from pumice.store.message_store_config import BrokerRole, MessageStoreConfig

PERM_READ = 4
PERM_WRITE = 2


@dataclass
class BrokerConfig:
    CONF_ALIASES: ClassVar[dict[str, str]] = {"brokerIP1": "broker_ip1", "brokerIP2": "broker_ip2"}
    CONF_NAMES: ClassVar[dict[str, str]] = {"broker_ip1": "brokerIP1", "broker_ip2": "brokerIP2"}
    LONG_FIELDS: ClassVar[frozenset[str]] = frozenset({"short_polling_time_mills"})  # Java long; other ints are int
    IGNORED_KEYS: ClassVar[dict[str, tuple[frozenset[str] | None, str]]] = {
        **NETTY_SERVER_IGNORED_KEYS,
        "rocketmqHome": ignored("Pumice needs no installation directory"),
        "sendMessageThreadPoolNums": ignored(
            "sends run on the event loop, and one waiting for its flush holds "
            "no worker (sendThreadPoolQueueCapacity bounds them)"
        ),
        # misspellings in the broker.conf sample most guides copy; RocketMQ ignores them too
        "sendMessageTreadPoolNums": ignored("a misspelling of sendMessageThreadPoolNums (RocketMQ ignores it too)"),
        "pullMessageTreadPoolNums": ignored("a misspelling of pullMessageThreadPoolNums (RocketMQ ignores it too)"),
        "heartbeatThreadPoolNums": ignored("heartbeats share the client-manage pool"),
        "heartbeatThreadPoolQueueCapacity": ignored("heartbeats share the client-manage pool"),
        "processReplyMessageThreadPoolNums": ignored("request-reply messages are not supported"),
        "replyThreadPoolQueueCapacity": ignored("request-reply messages are not supported"),
        "endTransactionThreadPoolNums": ignored("transactional messages are not supported"),
        "endTransactionPoolQueueCapacity": ignored("transactional messages are not supported"),
        "checkTransactionMessageEnable": ignored("transactional messages are not supported"),
        "fetchNamesrvAddrByAddressServer": ignored("there is no address server: set namesrvAddr", "false"),
        "forceRegister": ignored("the broker sends its topics at every registration"),
        "filterSupportRetry": ignored("SQL92 (property) filtering is not supported"),
        "enablePropertyFilter": ignored("SQL92 (property) filtering is not supported: such pulls are refused"),
        "transferMsgByHeap": ignored("pull bodies always go from the mapped CommitLog without a heap copy"),
        "commercialBaseCount": ignored("commercial statistics are not kept"),
    }

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
    # the system topics made at start (TopicConfigManager)
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    # processor pools: at once / queued (RocketMQ 4.9's defaults)
    send_thread_pool_queue_capacity: int = 10_000
    pull_message_thread_pool_nums: int = field(default_factory=lambda: 16 + 2 * (os.cpu_count() or 1))
    pull_thread_pool_queue_capacity: int = 100_000
    query_message_thread_pool_nums: int = field(default_factory=lambda: 8 + (os.cpu_count() or 1))
    query_thread_pool_queue_capacity: int = 20_000
    admin_broker_thread_pool_nums: int = 16
    client_manage_thread_pool_nums: int = 32
    client_manager_thread_pool_queue_capacity: int = 1_000_000
    consumer_manage_thread_pool_nums: int = 32
    consumer_manager_thread_pool_queue_capacity: int = 1_000_000
    # connections with no traffic for this long are closed (NettyServerConfig; 0: never)
    server_channel_max_idle_time_seconds: int = 120
    server_max_frame_length: int = 16 * 1024 * 1024  # Java: -Dcom.rocketmq.remoting.frameMaxLength

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
        if self.listen_port != 0 and not 3 <= self.listen_port <= 65534:
            raise ValueError(
                f"listenPort {self.listen_port} is not 0 (any free port) or 3 to 65534: the broker also listens "
                "on listenPort - 2 (the fast port) and listenPort + 1 (HA)"
            )
        if self.broker_id < 0:
            raise ValueError(f"brokerId {self.broker_id} must be 0 (master) or more (slave)")
        if not 0 <= self.broker_permission <= 15:
            raise ValueError(f"brokerPermission {self.broker_permission} is not 0 to 15 (2 write, 4 read)")
        if self.flush_consumer_offset_interval < 1:
            raise ValueError(f"flushConsumerOffsetInterval {self.flush_consumer_offset_interval} must be 1 ms or more")
        if self.short_polling_time_mills < 0:
            raise ValueError(f"shortPollingTimeMills {self.short_polling_time_mills} is negative")
        for name in ("pull_message_thread_pool_nums", "query_message_thread_pool_nums", "admin_broker_thread_pool_nums",
                     "client_manage_thread_pool_nums", "consumer_manage_thread_pool_nums",
                     "send_thread_pool_queue_capacity", "pull_thread_pool_queue_capacity",
                     "query_thread_pool_queue_capacity", "client_manager_thread_pool_queue_capacity",
                     "consumer_manager_thread_pool_queue_capacity"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{snake_to_camel(name)} {getattr(self, name)} must be 1 or more")
        if self.server_channel_max_idle_time_seconds < 0:
            raise ValueError(f"serverChannelMaxIdleTimeSeconds {self.server_channel_max_idle_time_seconds} is negative")
        if self.server_max_frame_length < 64 * 1024:
            raise ValueError(f"serverMaxFrameLength {self.server_max_frame_length} is under 64 KiB")
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
