"""The metrics keys of broker.conf and namesrv.conf (RocketMQ 5.3.3's names), and the pieces the
collectors build on: bucket counts and the label cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from pumice.broker.broker_config import BrokerConfig, load_broker_config
from pumice.config import ConfigError, apply_properties, load_properties
from pumice.metrics.histogram import MESSAGE_SIZE_BOUNDS, cumulative, observe
from pumice.metrics.label_cap import OTHER, LabelCap
from pumice.namesrv.namesrv_config import NamesrvConfig

BAD = [
    ("metricsExporterType=OTLP_GRPC", "metricsExporterType OTLP_GRPC is not supported: only PROM"),
    ("metricsExporterType=3", "metricsExporterType LOG is not supported"),
    ("metricsExporterType=JMX", "metricsExporterType 'JMX' is not DISABLE, OTLP_GRPC, PROM or LOG"),
    ("metricsPromExporterPort=70000", "metricsPromExporterPort 70000 is not a TCP port"),
    ("metricsPromExporterHost=bad host", "metricsPromExporterHost 'bad host' is not an address or a host name"),
    ("metricsLabel=env", "metricsLabel entry 'env' is not name:value"),
    ("metricsLabel=1x:y", "metricsLabel entry '1x:y' is not name:value"),
    ("metricsLabelValueLimit=0", "metricsLabelValueLimit 0 must be 1 or more"),
    ("metricsGrpcExporterTarget=otel:4317", "metricsGrpcExporterTarget"),
    ("metricsOtelCardinalityLimit=10", "metricsOtelCardinalityLimit"),
]


def load_namesrv(path: Path) -> NamesrvConfig:
    config = NamesrvConfig()
    apply_properties([config], load_properties(str(path)), str(path))
    config.validate()
    return config


def test_defaults_are_5x_and_off() -> None:
    for config in (BrokerConfig(), NamesrvConfig()):
        assert (config.metrics_exporter_type, config.metrics_prom_exporter_port, config.metrics_prom_exporter_host,
                config.metrics_label, config.metrics_in_delta) == ("DISABLE", 5557, "", "", False)  # fmt: skip


@pytest.mark.parametrize(("line", "message"), BAD)
def test_a_bad_or_unbuilt_metrics_key_stops_the_start_naming_it(tmp_path: Path, line: str, message: str) -> None:
    conf = tmp_path / "x.conf"
    conf.write_text(line + "\n")
    with pytest.raises((ConfigError, ValueError), match=message.replace("(", r"\(")):
        load_broker_config(str(conf))
    with pytest.raises((ConfigError, ValueError), match=message.replace("(", r"\(")):
        load_namesrv(conf)


def test_prom_by_name_or_number_and_the_5x_defaults_of_unbuilt_keys_pass(tmp_path: Path) -> None:
    conf = tmp_path / "x.conf"
    conf.write_text("metricsExporterType=2\nmetricsLabel=env:test, dc:eu\nmetricsInDelta=true\n"
                    "metricsGrpcExporterTarget=\nmetricsOtelCardinalityLimit=50000\n")  # fmt: skip
    broker, _ = load_broker_config(str(conf))
    assert broker.metrics_exporter_type == "PROM" and broker.metrics_in_delta
    assert load_namesrv(conf).metrics_exporter_type == "PROM"


def test_histogram_buckets_are_cumulative_with_the_sum() -> None:
    table: dict[object, list[float]] = {}
    for size in (10, 1024, 1025, 5000, 9_000_000):
        observe(table, "t", size, MESSAGE_SIZE_BOUNDS)  # type: ignore[arg-type]
    buckets, total = cumulative(table["t"], MESSAGE_SIZE_BOUNDS)
    assert buckets == [("1024.0", 2), ("4096.0", 3), ("524288.0", 4), ("1048576.0", 4), ("2097152.0", 4),
                       ("4194304.0", 4), ("+Inf", 5)]  # fmt: skip
    assert total == 10 + 1024 + 1025 + 5000 + 9_000_000


def test_the_label_cap_keeps_the_first_values_and_folds_the_rest_once() -> None:
    cap = LabelCap("topic", 2)
    assert [cap(v) for v in ("a", "b", "c", "a", "d", "c")] == ["a", "b", OTHER, "a", OTHER, OTHER]
    assert cap.folded_total == 2
