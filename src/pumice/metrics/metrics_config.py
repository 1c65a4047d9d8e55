"""The ``metrics*`` keys of broker.conf and namesrv.conf, as RocketMQ 5.3.3's BrokerConfig names them.

=====================================  ===========  ==================================================
key                                    default      here
=====================================  ===========  ==================================================
metricsExporterType                    DISABLE      DISABLE (0) or PROM (2); OTLP_GRPC (1) and LOG (3)
                                                    are refused at start (not built)
metricsPromExporterHost                ""           the address ``/metrics`` listens on; empty: the
                                                    broker's brokerIP1 (5.x), the name server's
                                                    listenHost
metricsPromExporterPort                5557         its TCP port (0: any free port)
metricsLabel                           ""           more labels on every series, ``k:v,k:v`` (5.x)
metricsInDelta                         false        true adds ``aggregation="delta"`` to every series,
                                                    as 5.x does (Prometheus values stay cumulative,
                                                    as 5.x's Prometheus reader keeps them)
metricsLabelValueLimit (Pumice's own)  1000         distinct ``topic`` and ``consumer_group`` label
                                                    values kept (each); the rest fold into
                                                    ``__other__``
=====================================  ===========  ==================================================

5.x's OTLP and logging exporter keys (``metricsGrpcExporterTarget`` …) are accepted only at their
defaults (the config classes' ``IGNORED_KEYS``).
"""

from __future__ import annotations

import ipaddress
from typing import Protocol

EXPORTER_TYPES = {"0": "DISABLE", "1": "OTLP_GRPC", "2": "PROM", "3": "LOG"}  # 5.x's MetricsExporterType
BUILT = ("DISABLE", "PROM")
DEFAULT_PROM_PORT = 5557
DEFAULT_LABEL_VALUE_LIMIT = 1000

# 5.3.3's keys of exporters not built here: accepted at their default only
NOT_BUILT_KEYS = {
    "metricsOtelCardinalityLimit": "50000",
    "metricsGrpcExporterTarget": "",
    "metricsGrpcExporterHeader": "",
    "metricGrpcExporterTimeOutInMills": "3000",
    "metricGrpcExporterIntervalInMills": "60000",
    "metricLoggingExporterIntervalInMills": "10000",
}


def exporter_type(value: str) -> str:
    """``metricsExporterType`` by name or by number (5.x's setters take both), upper case; ValueError
    for an unknown one or one not built."""
    name = EXPORTER_TYPES.get(value.strip(), value.strip().upper())
    if name not in EXPORTER_TYPES.values():
        raise ValueError(f"metricsExporterType {value!r} is not DISABLE, OTLP_GRPC, PROM or LOG")
    if name not in BUILT:
        raise ValueError(
            f"metricsExporterType {name} is not supported: only PROM (Prometheus /metrics) and DISABLE are built"
        )
    return name


def parse_labels(value: str) -> dict[str, str]:
    """``metricsLabel``: ``k:v`` pairs separated by commas; ValueError naming a bad pair (5.x skips it
    with a warning; a label that silently goes missing is worse)."""
    labels: dict[str, str] = {}
    for item in (p.strip() for p in value.split(",")):
        if not item:
            continue
        key, sep, val = item.partition(":")
        if not sep or not key or ":" in val or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ValueError(f"metricsLabel entry {item!r} is not name:value (name of letters, digits and _)")
        labels[key] = val
    return labels


class MetricsKeys(Protocol):
    metrics_exporter_type: str
    metrics_prom_exporter_host: str
    metrics_prom_exporter_port: int
    metrics_label: str
    metrics_label_value_limit: int


def check(cfg: MetricsKeys) -> str:
    """Every metrics key of one server's config, ValueError naming the first bad one; the exporter
    type's name (``2`` is ``PROM``)."""
    name = exporter_type(cfg.metrics_exporter_type)
    port, host = cfg.metrics_prom_exporter_port, cfg.metrics_prom_exporter_host
    if not 0 <= port <= 65535:
        raise ValueError(f"metricsPromExporterPort {port} is not a TCP port (0 to 65535)")
    if host:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            if not all(p and p.replace("-", "a").isalnum() for p in host.split(".")):
                raise ValueError(f"metricsPromExporterHost {host!r} is not an address or a host name") from None
    parse_labels(cfg.metrics_label)
    if cfg.metrics_label_value_limit < 1:
        raise ValueError(f"metricsLabelValueLimit {cfg.metrics_label_value_limit} must be 1 or more")
    return name
