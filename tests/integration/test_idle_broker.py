"""An idle broker sleeps: its event loop is not woken by timers that have nothing to do."""

from __future__ import annotations

import time

from tests.helpers.clusters import Cluster


def loop_wakes(pid: int) -> int:
    """How often the broker's main thread (its event loop) has gone to sleep and woken (/proc)."""
    with open(f"/proc/{pid}/task/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))


def test_an_idle_brokers_loop_rarely_wakes(cluster: Cluster) -> None:
    """Fast failure's 10 ms clean and the long-polling scan's 100 ms tick woke it ~110 times a
    second with nothing waiting; what is left is the broker's scheduled tasks (seconds apart)."""
    pid = cluster.broker.pid
    time.sleep(1.0)  # start-up's last tasks
    before, t0 = loop_wakes(pid), time.monotonic()
    time.sleep(2.0)
    rate = (loop_wakes(pid) - before) / (time.monotonic() - t0)
    assert rate < 20, f"the idle broker's loop woke {rate:.0f} times a second"
