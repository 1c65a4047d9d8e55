"""BrokerMetrics before the broker has started: while the store loads, a scrape shows how far the
recovery's CommitLog scan has got, and nothing else (the other tables are not built yet)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from pumice.metrics.broker_metrics import BrokerMetrics
from pumice.store.recovery_progress import RecoveryProgress


def _broker(progress: RecoveryProgress | None) -> Any:
    config = SimpleNamespace(broker_cluster_name="C", broker_name="broker-a", metrics_label="", metrics_in_delta=False,
                             metrics_label_value_limit=10)  # fmt: skip
    return cast(Any, SimpleNamespace(config=config, store=SimpleNamespace(commit_log=SimpleNamespace(
        recovery_progress=progress))))  # fmt: skip


def test_while_the_store_loads_only_the_recovery_scan_is_served() -> None:
    progress = RecoveryProgress(total_bytes=3 * 4096, what="CommitLog")
    progress.advance(4096)
    metrics = BrokerMetrics(_broker(progress))
    families = {f.name: f for f in metrics.families()}
    assert set(families) == {"pumice_storage_recovery_scanned_bytes", "pumice_storage_recovery_total_bytes"}
    (scanned,) = families["pumice_storage_recovery_scanned_bytes"].samples
    (total,) = families["pumice_storage_recovery_total_bytes"].samples
    assert (scanned.value, total.value) == (4096, 3 * 4096)
    assert scanned.labels["what"] == "CommitLog" and scanned.labels["node_id"] == "broker-a"
    progress.advance(4096)  # read at each scrape, not once
    families = {f.name: f for f in metrics.families()}
    assert families["pumice_storage_recovery_scanned_bytes"].samples[0].value == 2 * 4096
    progress.close()


def test_before_the_scan_begins_a_scrape_is_empty() -> None:
    assert BrokerMetrics(_broker(None)).families() == []
