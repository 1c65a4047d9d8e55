"""The proxy's configuration: RocketMQ 5.3.3's ``rmq-proxy.json`` (its ``ProxyConfig``).

Read from ``$RMQ_PROXY_HOME/conf/rmq-proxy.json``, else ``$ROCKETMQ_HOME/conf/rmq-proxy.json``
(as 5.3.3's ``ConfigurationManager``); no file: every default. The keys Pumice uses, with
5.3.3's names and defaults:

| key                                          | default    | what                                        |
|----------------------------------------------|------------|---------------------------------------------|
| grpcServerPort                               | 8081       | the gRPC port (plain text)                  |
| grpcShutdownTimeSeconds                      | 30         | grace for open calls at shutdown            |
| grpcMaxInboundMessageSize                    | 136314880  | largest request (130 MiB)                   |
| maxMessageSize                               | 4194304    | largest body; the producers' max_body_size  |
| enableMessageBodyEmptyCheck                  | true       | an empty body: MESSAGE_BODY_EMPTY           |
| maxUserPropertySize                          | 16384      | user properties, tag and keys, in bytes     |
| userPropertyMaxNum                           | 128        | user properties per message                 |
| maxMessageGroupSize                          | 64         | message group, in bytes (exclusive)         |
| maxDelayTimeMills                            | 86400000   | delivery time at most this far ahead        |
| maxTransactionRecoverySecond                 | 3600       | a half message's recovery duration          |
| enableTopicMessageTypeCheck                  | true       | producers' validate_message_type            |
| grpcClientProducerMaxAttempts                | 3          | producers' backoff policy                   |
| grpcClientProducerBackoffInitialMillis       | 10         |                                             |
| grpcClientProducerBackoffMaxMillis           | 1000       |                                             |
| grpcClientProducerBackoffMultiplier          | 2          |                                             |
| grpcClientConsumerMinLongPollingTimeoutMillis| 5000       | ReceiveMessage's long polling, clamped      |
| grpcClientConsumerMaxLongPollingTimeoutMillis| 20000      | and the consumers' long_polling_timeout     |
| grpcClientConsumerLongPollingBatchSize       | 32         | consumers' receive_batch_size               |
| minInvisibleTimeMillsForRecv                 | 10000      | ReceiveMessage's invisible time, at least   |
| maxInvisibleTimeMills                        | 43200000   | and at most (ILLEGAL_INVISIBLE_TIME)        |
| longPollingReserveTimeInMillis               | 100        | a long poll answers this early              |
| defaultInvisibleTimeMills                    | 60000      | ReceiveMessage with auto_renew (push)       |
| enableProxyAutoRenew                         | true       | renew what push consumers hold              |
| renewSchedulePeriodMillis                    | 5000       | the renewal scan's period                   |
| renewAheadTimeMillis                         | 10000      | renew this long before a handle expires     |
| renewMaxTimeMillis                           | 10800000   | then stop: the group's retry delay (3 h)    |
| maxRenewRetryTimes                           | 3          | failed renewals before giving a handle up   |
| invisibleTimeMillisWhenClear                 | 1000       | a gone client's handles: visible this soon  |
| rocketMQClusterName                          | DefaultCluster | the cluster the proxy serves            |

Any other key of 5.3.3's ProxyConfig is accepted and logged as unused; a value of the wrong
type, or a number out of range, is refused naming the key and the file.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

log = logging.getLogger(__name__)

FILE_NAME = "rmq-proxy.json"
INT_MAX = 2**31 - 1


class ProxyConfigError(ValueError):
    pass


def _key(name: str, lo: int = 0, hi: int = INT_MAX) -> dict[str, Any]:
    return {"key": name, "lo": lo, "hi": hi}


@dataclasses.dataclass
class ProxyConfig:
    grpc_server_port: int = dataclasses.field(default=8081, metadata=_key("grpcServerPort", 0, 65535))
    grpc_shutdown_time_seconds: int = dataclasses.field(default=30, metadata=_key("grpcShutdownTimeSeconds"))
    grpc_max_inbound_message_size: int = dataclasses.field(
        default=130 * 1024 * 1024, metadata=_key("grpcMaxInboundMessageSize", 1024)
    )
    max_message_size: int = dataclasses.field(default=4 * 1024 * 1024, metadata=_key("maxMessageSize", -1))
    enable_message_body_empty_check: bool = dataclasses.field(
        default=True, metadata={"key": "enableMessageBodyEmptyCheck"}
    )
    max_user_property_size: int = dataclasses.field(default=16 * 1024, metadata=_key("maxUserPropertySize", -1))
    user_property_max_num: int = dataclasses.field(default=128, metadata=_key("userPropertyMaxNum", 0))
    max_message_group_size: int = dataclasses.field(default=64, metadata=_key("maxMessageGroupSize", -1))
    max_delay_time_mills: int = dataclasses.field(default=86_400_000, metadata=_key("maxDelayTimeMills", -1, 2**63 - 1))
    max_transaction_recovery_second: int = dataclasses.field(
        default=3600, metadata=_key("maxTransactionRecoverySecond", -1, 2**63 - 1)
    )
    enable_topic_message_type_check: bool = dataclasses.field(
        default=True, metadata={"key": "enableTopicMessageTypeCheck"}
    )
    grpc_client_producer_max_attempts: int = dataclasses.field(
        default=3, metadata=_key("grpcClientProducerMaxAttempts", 1)
    )
    grpc_client_producer_backoff_initial_millis: int = dataclasses.field(
        default=10, metadata=_key("grpcClientProducerBackoffInitialMillis")
    )
    grpc_client_producer_backoff_max_millis: int = dataclasses.field(
        default=1000, metadata=_key("grpcClientProducerBackoffMaxMillis")
    )
    grpc_client_producer_backoff_multiplier: int = dataclasses.field(
        default=2, metadata=_key("grpcClientProducerBackoffMultiplier", 1)
    )
    grpc_client_consumer_min_long_polling_timeout_millis: int = dataclasses.field(
        default=5000, metadata=_key("grpcClientConsumerMinLongPollingTimeoutMillis")
    )
    grpc_client_consumer_max_long_polling_timeout_millis: int = dataclasses.field(
        default=20_000, metadata=_key("grpcClientConsumerMaxLongPollingTimeoutMillis")
    )
    grpc_client_consumer_long_polling_batch_size: int = dataclasses.field(
        default=32, metadata=_key("grpcClientConsumerLongPollingBatchSize", 1)
    )
    min_invisible_time_mills_for_recv: int = dataclasses.field(
        default=10_000, metadata=_key("minInvisibleTimeMillsForRecv")
    )
    max_invisible_time_mills: int = dataclasses.field(
        default=43_200_000, metadata=_key("maxInvisibleTimeMills", 1, 2**63 - 1)
    )
    long_polling_reserve_time_in_millis: int = dataclasses.field(
        default=100, metadata=_key("longPollingReserveTimeInMillis")
    )
    default_invisible_time_mills: int = dataclasses.field(
        default=60_000, metadata=_key("defaultInvisibleTimeMills", 1, 2**63 - 1)
    )
    enable_proxy_auto_renew: bool = dataclasses.field(default=True, metadata={"key": "enableProxyAutoRenew"})
    renew_schedule_period_millis: int = dataclasses.field(
        default=5000, metadata=_key("renewSchedulePeriodMillis", 1, 2**63 - 1)
    )
    renew_ahead_time_millis: int = dataclasses.field(
        default=10_000, metadata=_key("renewAheadTimeMillis", 0, 2**63 - 1)
    )
    renew_max_time_millis: int = dataclasses.field(
        default=3 * 3600 * 1000, metadata=_key("renewMaxTimeMillis", 0, 2**63 - 1)
    )
    max_renew_retry_times: int = dataclasses.field(default=3, metadata=_key("maxRenewRetryTimes"))
    invisible_time_millis_when_clear: int = dataclasses.field(
        default=1000, metadata=_key("invisibleTimeMillisWhenClear", 0, 2**63 - 1)
    )
    rocket_mq_cluster_name: str = dataclasses.field(default="DefaultCluster", metadata={"key": "rocketMQClusterName"})

    @classmethod
    def keys(cls) -> dict[str, dataclasses.Field[Any]]:
        return {f.metadata["key"]: f for f in dataclasses.fields(cls)}

    def apply(self, values: dict[str, Any], source: str) -> None:
        """Sets each known key from a parsed JSON object; unknown keys are logged."""
        known = self.keys()
        unused = sorted(k for k in values if k not in known)
        if unused:
            log.warning("%s: keys Pumice's proxy does not use (accepted, no effect): %s", source, ", ".join(unused))
        for key, value in values.items():
            f = known.get(key)
            if f is None:
                continue
            setattr(self, f.name, _coerce(key, value, f, source))


def _coerce(key: str, value: Any, f: dataclasses.Field[Any], source: str) -> Any:
    """fastjson's leniency: numbers and booleans also as strings."""
    if f.type in (bool, "bool"):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ProxyConfigError(f"{source}: {key} must be true or false, not {value!r}")
    if f.type in (int, "int"):
        n: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        elif isinstance(value, str):
            try:
                n = int(value.strip())
            except ValueError:
                n = None
        lo, hi = f.metadata["lo"], f.metadata["hi"]
        if n is None or not lo <= n <= hi:
            raise ProxyConfigError(f"{source}: {key} must be an integer from {lo} to {hi}, not {value!r}")
        return n
    if not isinstance(value, str) or not value:
        raise ProxyConfigError(f"{source}: {key} must be a non-empty string, not {value!r}")
    return value


def config_path(env: dict[str, str] | None = None) -> str | None:
    """Where 5.3.3 looks: $RMQ_PROXY_HOME/conf, else $ROCKETMQ_HOME/conf."""
    env = dict(os.environ) if env is None else env
    home = env.get("RMQ_PROXY_HOME") or env.get("ROCKETMQ_HOME")
    return os.path.join(home, "conf", FILE_NAME) if home else None


def load_proxy_config(path: str | None = None, env: dict[str, str] | None = None) -> ProxyConfig:
    """The file at ``path`` (else where 5.3.3 looks); a missing file gives the defaults."""
    config = ProxyConfig()
    path = path or config_path(env)
    if path is None or not os.path.exists(path):
        return config
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError) as e:
        raise ProxyConfigError(f"cannot read {path}: {e}") from None
    if not isinstance(values, dict):
        raise ProxyConfigError(f"{path}: not a JSON object")
    config.apply(values, path)
    return config
