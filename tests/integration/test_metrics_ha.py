"""A master's ``pumice_ha_slave_behind_bytes``: a paused slave falls behind by exactly the bytes
put meanwhile, and catches up to 0 once resumed (real `pumice` processes, metricsExporterType=PROM
on port 0, the port taken read from the start line)."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from tests.helpers.clusters import HACluster, call, send
from tests.helpers.waiting import eventually
from tests.integration.test_metrics import Samples, scrape, value


def metrics_port(proc: object) -> int:
    m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", "".join(proc.output_lines))  # type: ignore[attr-defined]
    assert m, "no metrics URL in the start line"
    return int(m.group(1))


def test_a_paused_slave_falls_behind_by_the_bytes_put_then_catches_up(tmp_path: Path) -> None:
    c = HACluster(tmp_path, extra_conf="metricsExporterType=PROM\nmetricsPromExporterPort=0\n")
    try:
        c.start_slave()
        assert c.master is not None and c.slave is not None
        port = metrics_port(c.master)
        assert all(r.code == 0 for r in call(c.m, None, *(send("HaTopic", b"x" * 100, f"k{i}") for i in range(3))))
        c.wait_replicated()
        s = eventually(lambda: _caught_up(scrape(port)), what="the slave caught up")
        assert value(s, "pumice_ha_slave_connections") == 1
        before = value(s, "rocketmq_throughput_in_total", topic="HaTopic")
        os.kill(c.slave.pid, signal.SIGSTOP)
        try:
            assert all(r.code == 0 for r in call(c.m, None, *(send("HaTopic", b"y" * 500, f"p{i}") for i in range(4))))
            s = scrape(port)
            put = value(s, "rocketmq_throughput_in_total", topic="HaTopic") - before
            ((_, behind),) = s["pumice_ha_slave_behind_bytes"]
            assert put > 2000 and behind == put
        finally:
            os.kill(c.slave.pid, signal.SIGCONT)
        eventually(lambda: _caught_up(scrape(port)), what="the slave caught up again")
    finally:
        c.close()


def _caught_up(s: Samples) -> Samples:
    ((labels, behind),) = s["pumice_ha_slave_behind_bytes"]
    assert labels["slave_address"].startswith("127.0.0.1:") and behind == 0
    return s
