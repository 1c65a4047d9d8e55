"""NamesrvConfig: the name server's settings, with RocketMQ's key names (namesrv.conf)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

from pumice.config import NETTY_SERVER_IGNORED_KEYS, ignored


@dataclass
class NamesrvConfig:
    IGNORED_KEYS: ClassVar[dict[str, tuple[frozenset[str] | None, str]]] = {
        **NETTY_SERVER_IGNORED_KEYS,
        "productEnvName": ignored("no environment-specific behaviour"),
        "clusterTest": ignored("no test-cluster routes"),
    }

    listen_port: int = 9876
    listen_host: str = "0.0.0.0"
    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv", "kvConfig.json")
    )
    config_store_path: str = field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv", "namesrv.properties")
    )
    order_message_enable: bool = False
    # how long a broker may stay silent before it is dropped, and how often that is checked
    broker_channel_expired_time: int = 120_000
    scan_not_active_broker_interval: int = 10_000
    server_max_frame_length: int = 16 * 1024 * 1024
    # connections with no traffic for this long are closed (NettyServerConfig; 0: never)
    server_channel_max_idle_time_seconds: int = 120

    def validate(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listenPort {self.listen_port} is not a TCP port")
