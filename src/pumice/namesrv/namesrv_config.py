"""NamesrvConfig: the name server's settings, with RocketMQ's key names (namesrv.conf).

RocketMQ 4.9.8's name server reads NamesrvConfig's and NettyServerConfig's keys from its conf
file; Pumice accepts each of them (``IGNORED_KEYS``: the ones with no use here, with a
warning), plus its own (``listenHost``, ``brokerChannelExpiredTime``, …).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

from pumice.config import NETTY_SERVER_IGNORED_KEYS, ignored
from pumice.config_black_list import ConfigBlackList
from pumice.metrics import metrics_config
from pumice.remoting.tls import TlsServerConfig

# the keys UPDATE_NAMESRV_CONFIG never changes, whatever configBlackList says (RocketMQ 4.9.8's
# DefaultRequestProcessor adds the first four to it; the TLS keys are read at start only), with
# every path-like key (config_black_list.py)
ALWAYS_BLACK_LISTED = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome", "tlsMode",
                                 "tlsServerNeedClientAuth"})  # fmt: skip


@dataclass
class NamesrvConfig(TlsServerConfig):
    IGNORED_KEYS: ClassVar[dict[str, tuple[frozenset[str] | None, str]]] = {
        **NETTY_SERVER_IGNORED_KEYS,
        "productEnvName": ignored("there is no test-cluster routing (clusterTest=true is refused)"),
        "clusterTest": ignored(
            "test-cluster routing (RocketMQ's ClusterTestRequestProcessor, routes from another "
            "environment's name servers) is not supported",
            "false",
        ),
        # the broker's metrics keys of RocketMQ 5.3.3's OTLP and logging exporters (not built): defaults only
        **{
            k: ignored("only the Prometheus metrics exporter is built", d)
            for k, d in metrics_config.NOT_BUILT_KEYS.items()
        },
    }

    listen_port: int = 9876
    listen_host: str = "0.0.0.0"
    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv", "kvConfig.json")
    )
    # where UPDATE_NAMESRV_CONFIG writes the whole config after a change (as RocketMQ does; it
    # is not read at start, -c is)
    config_store_path: str = field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv", "namesrv.properties")
    )
    # more keys UPDATE_NAMESRV_CONFIG refuses (NO_PERMISSION), ';'-separated; read at start
    config_black_list: str = "configBlackList;configStorePath;kvConfigPath"
    order_message_enable: bool = False
    # how long a broker may stay silent before it is dropped, and how often that is checked
    broker_channel_expired_time: int = 120_000
    scan_not_active_broker_interval: int = 10_000
    server_max_frame_length: int = 16 * 1024 * 1024
    # Pumice's own: the bytes all connections may hold of frames not yet complete; a connection
    # whose unfinished frame would pass it is closed (at least serverMaxFrameLength)
    server_max_partial_frame_bytes: int = 256 * 1024 * 1024
    # connections with no traffic for this long are closed (NettyServerConfig; 0: never)
    server_channel_max_idle_time_seconds: int = 120
    # beyond 4.9 (as RocketMQ 5's name server): every state-changing request (REGISTER_BROKER,
    # UNREGISTER_BROKER, QUERY_DATA_VERSION, DELETE_TOPIC_IN_NAMESRV, WIPE/ADD_WRITE_PERM_OF_BROKER,
    # UPDATE_NAMESRV_CONFIG, PUT/DELETE_KV_CONFIG) must be signed by an admin account (or come from a
    # white-listed address) of $ROCKETMQ_HOME/conf/plain_acl.yml and conf/acl/*.yml; reads stay
    # open. Brokers then need namesrvAccessKey (a 4.9 broker cannot sign). Read at start only
    acl_enable: bool = False
    # Pumice's own: the log files' directory (read at start; else $PUMICE_LOG_DIR, else
    # ~/logs/rocketmqlogs as RocketMQ); --log-dir wins
    log_dir: str | None = None
    # beyond 5.x (whose name server has no metrics): the broker's metrics keys (pumice.metrics,
    # table in metrics_config.py); PROM serves /metrics on metricsPromExporterHost (listenHost
    # when empty):metricsPromExporterPort
    metrics_exporter_type: str = "DISABLE"  # DISABLE or PROM (also 0 or 2); OTLP_GRPC and LOG are refused
    metrics_prom_exporter_host: str = ""  # where /metrics listens; empty: listenHost
    metrics_prom_exporter_port: int = metrics_config.DEFAULT_PROM_PORT  # 0: any free port
    metrics_label: str = ""  # more labels on every series: name:value,name:value
    metrics_in_delta: bool = False  # adds aggregation="delta" (as 5.x; values stay cumulative)
    metrics_label_value_limit: int = metrics_config.DEFAULT_LABEL_VALUE_LIMIT

    def black_list(self) -> ConfigBlackList:
        """The keys UPDATE_NAMESRV_CONFIG refuses, under any spelling."""
        return ConfigBlackList((type(self),), ALWAYS_BLACK_LISTED, self.config_black_list)

    def validate(self) -> None:
        self.tls_settings().check()
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listenPort {self.listen_port} is not a TCP port")
        if self.broker_channel_expired_time < 1:
            raise ValueError(f"brokerChannelExpiredTime {self.broker_channel_expired_time} must be 1 ms or more")
        if self.scan_not_active_broker_interval < 1:
            raise ValueError(f"scanNotActiveBrokerInterval {self.scan_not_active_broker_interval} must be 1 ms or more")
        if self.server_channel_max_idle_time_seconds < 0:
            raise ValueError(f"serverChannelMaxIdleTimeSeconds {self.server_channel_max_idle_time_seconds} is negative")
        if self.server_max_frame_length < 64 * 1024:
            raise ValueError(f"serverMaxFrameLength {self.server_max_frame_length} is under 64 KiB")
        if self.server_max_partial_frame_bytes < self.server_max_frame_length:
            raise ValueError(
                f"serverMaxPartialFrameBytes {self.server_max_partial_frame_bytes} is under serverMaxFrameLength "
                f"{self.server_max_frame_length}: a client could not send one frame of the largest size"
            )
        self.metrics_exporter_type = metrics_config.check(self)
