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

import ipaddress
import logging
import os
from dataclasses import dataclass, field
from typing import ClassVar

from pumice.common import host_address
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.config import (
    NETTY_CLIENT_IGNORED_KEYS,
    NETTY_SERVER_IGNORED_KEYS,
    ConfigError,
    apply_properties,
    camel_to_snake,
    field_for_key,
    ignored,
    load_properties,
    snake_to_camel,
)
from pumice.config_black_list import ConfigBlackList
from pumice.metrics import metrics_config
from pumice.remoting.tls import TlsServerConfig
from pumice.store.message_store_config import BrokerRole, MessageStoreConfig

log = logging.getLogger(__name__)

_END_TRANSACTION_POOL = "END_TRANSACTION runs in the send pool"
_NO_COMMERCIAL = "commercial statistics are not kept"
_SENDS_HOLD_NO_THREAD = (
    "a send waiting for its flush or its slave holds no thread (sendThreadPoolQueueCapacity bounds them)"
)
_UNUSED_IN_49 = "RocketMQ 4.9 does not use it either"


# the keys UPDATE_BROKER_CONFIG never changes, whatever configBlackList says (RocketMQ 4.9.8's
# AdminBrokerProcessor adds them to it), with every path-like key (config_black_list.py)
ALWAYS_BLACK_LISTED = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})


@dataclass
class BrokerConfig(TlsServerConfig):
    CONF_ALIASES: ClassVar[dict[str, str]] = {"brokerIP1": "broker_ip1", "brokerIP2": "broker_ip2", "useTLS": "use_tls"}
    CONF_NAMES: ClassVar[dict[str, str]] = {"broker_ip1": "brokerIP1", "broker_ip2": "brokerIP2", "use_tls": "useTLS"}
    LONG_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "short_polling_time_mills",
            "transaction_time_out",
            "transaction_check_interval",
            "wait_time_mills_in_send_queue",
            "wait_time_mills_in_pull_queue",
            "wait_time_mills_in_heartbeat_queue",
            "filter_data_clean_time_span",
            "revive_interval",
            "max_pop_polling_size",
        }
    )  # Java long; other ints are int
    # every other BrokerConfig key of RocketMQ 4.9.8, and the NettyServerConfig and
    # NettyClientConfig keys it reads from broker.conf too
    IGNORED_KEYS: ClassVar[dict[str, tuple[frozenset[str] | None, str]]] = {
        **{k: v for k, v in {**NETTY_SERVER_IGNORED_KEYS, **NETTY_CLIENT_IGNORED_KEYS}.items() if k != "useTLS"},
        "sendMessageThreadPoolNums": ignored(
            "sends run on the event loop, and one waiting for its flush holds "
            "no worker (sendThreadPoolQueueCapacity bounds them)"
        ),
        # misspellings in the broker.conf sample most guides copy; RocketMQ ignores them too
        "sendMessageTreadPoolNums": ignored("a misspelling of sendMessageThreadPoolNums (RocketMQ ignores it too)"),
        "pullMessageTreadPoolNums": ignored("a misspelling of pullMessageThreadPoolNums (RocketMQ ignores it too)"),
        "heartbeatThreadPoolNums": ignored("heartbeats share the client-manage pool"),
        "heartbeatThreadPoolQueueCapacity": ignored("heartbeats share the client-manage pool"),
        "processReplyMessageThreadPoolNums": ignored("replies (SEND_REPLY_MESSAGE) run in the send pool"),
        "replyThreadPoolQueueCapacity": ignored("replies (SEND_REPLY_MESSAGE) run in the send pool"),
        "endTransactionThreadPoolNums": ignored(_END_TRANSACTION_POOL),
        "endTransactionPoolQueueCapacity": ignored(_END_TRANSACTION_POOL),
        "checkTransactionMessageEnable": ignored(_UNUSED_IN_49),  # an old key many samples still carry
        "waitTimeMillsInTransactionQueue": ignored("END_TRANSACTION runs in the send pool: waitTimeMillsInSendQueue"),
        "fetchNamesrvAddrByAddressServer": ignored("there is no address server: set namesrvAddr", "false"),
        # read by BrokerStartup from broker.conf into system properties, for the address server
        "rmqAddressServerDomain": ignored("there is no address server: set namesrvAddr"),
        "rmqAddressServerSubGroup": ignored("there is no address server: set namesrvAddr"),
        "forceRegister": ignored("the broker sends its topics at every registration"),
        "compressedRegister": ignored("the broker registers with uncompressed bodies (same routes, more bytes)"),
        "registerBrokerTimeoutMills": ignored("a registration waits 6 s for each name server, RocketMQ's default"),
        # asking for them (true) is refused: they are not built
        "filterServerNums": ignored("filter servers (class filters) are not supported", "0"),
        "transferMsgByHeap": ignored("pull bodies always go from the mapped CommitLog without a heap copy"),
        "commercialEnable": ignored(_NO_COMMERCIAL),
        "commercialTimerCount": ignored(_NO_COMMERCIAL),
        "commercialTransCount": ignored(_NO_COMMERCIAL),
        "commercialBigCount": ignored(_NO_COMMERCIAL),
        "commercialBaseCount": ignored(_NO_COMMERCIAL),
        "messageStorePlugIn": ignored("message store plug-ins are not supported", ""),
        "disableConsumeIfConsumerReadSlowly": ignored("a slow consumer group is never cut off", "false"),
        "consumerFallbehindThreshold": ignored("a slow consumer group is never cut off"),
        "startAcceptSendRequestTimeStamp": ignored("sends are not held back until a start time", "0"),
        "putMessageFutureThreadPoolNums": ignored(_SENDS_HOLD_NO_THREAD),
        "putThreadPoolQueueCapacity": ignored(_SENDS_HOLD_NO_THREAD),
        "enableDetailStat": ignored("statistics are kept by topic and by group, not by queue"),
        "autoDeleteUnusedStats": ignored("statistics are not dropped when their topic or group is deleted"),
        # BrokerConfig fields RocketMQ 4.9.8 itself never reads
        "flushConsumerOffsetHistoryInterval": ignored(_UNUSED_IN_49),
        "highSpeedMode": ignored(_UNUSED_IN_49),
        "maxDelayTime": ignored(_UNUSED_IN_49),
        # RocketMQ 5.3.3's keys of the OTLP and logging metrics exporters (not built): defaults only
        **{
            k: ignored("only the Prometheus metrics exporter is built", d)
            for k, d in metrics_config.NOT_BUILT_KEYS.items()
        },
    }

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    namesrv_addr: str | None = field(
        default_factory=lambda: os.environ.get("NAMESRV_ADDR") or None
    )  # "host:port;host:port"; $NAMESRV_ADDR when the file does not set it, as RocketMQ
    listen_port: int = 10911
    listen_host: str = "0.0.0.0"
    broker_ip1: str = (  # the address published to the name servers and in msgIds; by default listenHost when
        ""  # that is one address, else the host's address (RocketMQ's rule: host_address.py)
    )
    broker_ip2: str | None = None  # the HA address published to the name servers (brokerIP1 if unset)
    broker_permission: int = PERM_READ | PERM_WRITE
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8
    auto_create_subscription_group: bool = True
    # tell a group's members when one joins or leaves (also per group, in its subscription group)
    notify_consumer_ids_changed_enable: bool = True
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
    # what a Java broker answers each send with (MSG_REGION, TRACE_ON), and stores in each sent
    # message's properties, as 5.x: the Java client's trace records a send only when both come
    # back, and (5.3.1+) a consumption only when the message has MSG_REGION
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    # RocketMQ 5.x: LITE_PULL_MESSAGE (361) served; a topic's message.type may be MIXED
    lite_pull_message_enable: bool = True
    enable_mixed_message_type: bool = False
    # transactional messages (transactional_message_service)
    reject_transaction_message: bool = False  # half messages refused NO_PERMISSION
    transaction_time_out: int = 6000  # ms a half waits before its first check
    transaction_check_max: int = 15  # checks before a half goes to TRANS_CHECK_MAX_TIME_TOPIC
    transaction_check_interval: int = 60_000  # ms between check passes
    # RECALL_MESSAGE of timer messages (RocketMQ 5.3.3's keys and defaults: recall_message_processor)
    recall_message_enable: bool = False  # RECALL_MESSAGE served (else NO_PERMISSION)
    allow_recall_when_broker_not_writeable: bool = True  # recalls taken without brokerPermission's write bit
    # POP consumption (RocketMQ 5.3.3's keys and defaults: pop_message_processor, pop_revive_service)
    revive_queue_num: int = 8  # queues of rmq_sys_REVIVE_LOG_<cluster>, the checkpoints' and acks' topic
    revive_interval: int = 1000  # between two passes of the revive service (ms)
    pop_polling_size: int = 1024  # parked pops of one topic, group and queue (then POLLING_FULL)
    max_pop_polling_size: int = 100_000  # parked pops in all (then POLLING_FULL)
    pop_from_retry_probability: int = 20  # % of pops that read the POP retry topic first
    enable_retry_topic_v2: bool = False  # POP retry topics named %RETRY%<group>+<topic>, not with an underscore
    init_pop_offset_by_check_msg_in_mem: bool = True  # a new group pops from 0 while message 0 is in memory
    enable_property_filter: bool = False  # SQL92 subscriptions (sql92.py) accepted and served
    # the SQL92 filters' bloom-filter bit maps, in the ConsumeQueueExt (enableConsumeQueueExt)
    enable_calc_filter_bit_map: bool = False
    expect_consumer_num_use_filter: int = 32
    max_error_rate_of_bloom_filter: int = 20  # %
    filter_data_clean_time_span: int = 24 * 3600 * 1000  # a dead filter is dropped after it (ms)
    filter_support_retry: bool = False  # a retry topic's messages filtered by their topic's SQL92 filter
    store_reply_message_enable: bool = True  # a reply is stored as well as pushed to its requester
    # fast failure (broker_fast_failure): requests that waited this long for a worker get SYSTEM_BUSY
    broker_fast_failure_enable: bool = True
    wait_time_mills_in_send_queue: int = 200
    wait_time_mills_in_pull_queue: int = 5000
    wait_time_mills_in_heartbeat_queue: int = 31_000
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
    # Pumice's own: the bytes all connections may hold of frames not yet complete; a connection
    # whose unfinished frame would pass it is closed (at least serverMaxFrameLength)
    server_max_partial_frame_bytes: int = 256 * 1024 * 1024
    # NettyClientConfig's useTLS: the broker's own calls (registration, a slave's copies) over TLS,
    # any server certificate trusted (4.9's client default)
    use_tls: bool = False
    # RocketMQ 4.9's plain ACL (pumice.acl): every request's signature and perms checked against
    # $ROCKETMQ_HOME/conf/plain_acl.yml and conf/acl/*.yml
    acl_enable: bool = False
    rocketmq_home: str | None = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME"))
    # more keys UPDATE_BROKER_CONFIG refuses (NO_PERMISSION), ';'-separated; read at start
    config_black_list: str = "configBlackList;brokerConfigPath"
    # Pumice's own: the ACL account (of $ROCKETMQ_HOME/conf/plain_acl.yml or conf/acl/*.yml, its
    # secret key read from there at start) that signs REGISTER_BROKER and UNREGISTER_BROKER, for a
    # name server with aclEnable=true (an admin account there); unset: unsigned, as 4.9
    namesrv_access_key: str | None = None
    # Pumice's own: the log files' directory (read at start; else $PUMICE_LOG_DIR, else
    # ~/logs/rocketmqlogs as RocketMQ); --log-dir wins
    log_dir: str | None = None
    # the log files in <log dir>/<brokerName>_<brokerId>/, one directory per broker (read at start)
    isolate_log_enable: bool = False
    # metrics (RocketMQ 5.3.3's keys; pumice.metrics, table in metrics_config.py): PROM serves
    # /metrics on metricsPromExporterHost (brokerIP1 when empty):metricsPromExporterPort
    metrics_exporter_type: str = "DISABLE"  # DISABLE or PROM (also 0 or 2); OTLP_GRPC and LOG are refused
    metrics_prom_exporter_host: str = ""  # where /metrics listens; empty: brokerIP1
    metrics_prom_exporter_port: int = metrics_config.DEFAULT_PROM_PORT  # 0: any free port
    metrics_label: str = ""  # more labels on every series: name:value,name:value
    metrics_in_delta: bool = False  # adds aggregation="delta" (as 5.x; values stay cumulative)
    # Pumice's own (5.x has none): distinct topic and consumer_group label values kept, each
    metrics_label_value_limit: int = metrics_config.DEFAULT_LABEL_VALUE_LIMIT

    def __post_init__(self) -> None:
        if not self.broker_ip1:
            self.broker_ip1 = default_broker_ip1(self.listen_host)

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def register_period_s(self) -> float:
        """``registerNameServerPeriod`` clamped to 10–60 s, as the seeds say."""
        return min(max(self.register_name_server_period, 10_000), 60_000) / 1000

    def black_list(self) -> ConfigBlackList:
        """The keys UPDATE_BROKER_CONFIG refuses, under any spelling (its own and the store's)."""
        return ConfigBlackList((type(self), MessageStoreConfig), ALWAYS_BLACK_LISTED, self.config_black_list)

    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    def validate(self) -> None:
        self.tls_settings().check()
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
        if self.transaction_time_out < 0 or self.transaction_check_max < 1 or self.transaction_check_interval < 1:
            raise ValueError(
                f"transactionTimeOut {self.transaction_time_out} must be 0 or more, transactionCheckMax "
                f"{self.transaction_check_max} and transactionCheckInterval {self.transaction_check_interval} 1 or more"
            )
        if not 1 <= self.revive_queue_num <= 1024 or self.revive_interval < 1:
            raise ValueError(
                f"reviveQueueNum {self.revive_queue_num} must be 1 to 1024 and reviveInterval {self.revive_interval} "
                "1 ms or more"
            )
        if not 0 <= self.pop_from_retry_probability <= 100:
            raise ValueError(f"popFromRetryProbability {self.pop_from_retry_probability} must be 0 to 100 (%)")
        if not 1 <= self.max_error_rate_of_bloom_filter <= 99 or self.expect_consumer_num_use_filter < 1:
            raise ValueError(
                f"maxErrorRateOfBloomFilter {self.max_error_rate_of_bloom_filter} must be 1 to 99 and "
                f"expectConsumerNumUseFilter {self.expect_consumer_num_use_filter} 1 or more"
            )
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
        if self.server_max_partial_frame_bytes < self.server_max_frame_length:
            raise ValueError(
                f"serverMaxPartialFrameBytes {self.server_max_partial_frame_bytes} is under serverMaxFrameLength "
                f"{self.server_max_frame_length}: a client could not send one frame of the largest size"
            )
        for a in self.namesrv_addrs():
            host, _, port = a.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"namesrvAddr entry {a!r} is not host:port")
        self.metrics_exporter_type = metrics_config.check(self)


def apply_role(broker: BrokerConfig, store: MessageStoreConfig) -> None:
    """BrokerStartup's role rules: a master's brokerId is 0, a slave's must be above 0; the
    HA port is listenPort + 1 (0, an ephemeral port, when listenPort is 0). In DLedger mode
    the brokerId is -1 until the first role change sets it."""
    if store.broker_role is BrokerRole.SLAVE:
        if broker.broker_id <= 0:
            raise ValueError("Slave's brokerId must be > 0")
    else:
        broker.broker_id = 0
    if store.enable_d_leger_commit_log:
        broker.broker_id = -1
    store.ha_listen_port = broker.listen_port + 1 if broker.listen_port else 0


def check_store_paths(store: MessageStoreConfig, source: str = "<config>") -> None:
    """RocketMQ 4.9 spreads the CommitLog over several directories when storePathCommitLog
    lists them (comma-separated): Pumice keeps one, so such a path is refused, not taken as
    one directory with a comma in its name."""
    if "," in (store.store_path_commit_log or ""):
        raise ConfigError(
            f"{source}: storePathCommitLog={store.store_path_commit_log} is not supported: "
            "a CommitLog spread over several directories is not supported; give one directory"
        )


def _is_one_address(host: str) -> bool:
    try:
        return not ipaddress.ip_address(host).is_unspecified
    except ValueError:  # a host name
        return False


def default_broker_ip1(listen_host: str) -> str:
    """brokerIP1 when no one sets it: listenHost when that is one address (a broker bound there is
    reachable only there), else the host's address as RocketMQ picks it (host_address.py)."""
    return listen_host if _is_one_address(listen_host) else host_address.local_address()


def load_broker_config(path: str | None) -> tuple[BrokerConfig, MessageStoreConfig]:
    broker, store = BrokerConfig(), MessageStoreConfig()
    props: dict[str, str] = {}
    if path:
        props = load_properties(path)
        apply_properties([broker, store], props, path)
        check_store_paths(store, path)
    given = {field_for_key(BrokerConfig, k) for k in props}
    if "broker_ip1" not in given or not broker.broker_ip1:  # the file's listenHost counts
        broker.broker_ip1 = default_broker_ip1(broker.listen_host)
    try:
        broker.validate()
        store.validate()
    except ValueError as e:  # name the file the value came from (the same type: callers tell them apart)
        if path and not str(e).startswith(path):
            raise type(e)(f"{path}: {e}") from None
        raise
    asked = store.ha_listen_port  # as the file gave it, parsed
    apply_role(broker, store)
    if asked != store.ha_listen_port and "ha_listen_port" in {camel_to_snake(k) for k in props}:
        # RocketMQ replaces it without a word; an operator who set it should know
        log.warning(
            "%s: haListenPort=%d is replaced by %d: the HA port is always listenPort + 1, as in RocketMQ",
            path, asked, store.ha_listen_port,
        )  # fmt: skip
    if store.transient_store_pool_enable and not store.transient_store_pool_in_effect:
        # RocketMQ ignores the key there without a word
        log.warning(
            "%s: transientStorePoolEnable=true is ignored: the pool is used only with ASYNC_FLUSH on a master "
            "(flushDiskType=%s, brokerRole=%s), as in RocketMQ",
            path, store.flush_disk_type.name, store.broker_role.name,
        )  # fmt: skip
    return broker, store
