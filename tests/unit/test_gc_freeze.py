"""The start-up heap is frozen: a full collection afterwards walks only what was made since."""

from __future__ import annotations

import json
import subprocess
import sys

# run in a child: freezing the test runner's own heap would outlive the test
_CHILD = """
import gc, json
import pumice.broker.broker_controller  # a server's start-up heap: its modules and classes
from pumice.common.gc_freeze import freeze_start_up_heap

tracked_before = len(gc.get_objects())
frozen = freeze_start_up_heap()
after = {"frozen": frozen, "count": gc.get_freeze_count(), "tracked_before": tracked_before,
         "tracked_after": len(gc.get_objects())}
gc.disable()  # only the explicit pass below collects
for i in range(1000):  # cycles made after the freeze are still collected
    a = {}
    a["self"] = a
after["collected"] = gc.collect()
print(json.dumps(after))
"""


def test_freeze_takes_the_start_up_heap_out_of_collections() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60, check=True)
    r = json.loads(out.stdout)
    assert r["frozen"] == r["count"] > 10_000  # modules, classes, functions, tables
    # what a full pass walks now is a small fraction of what it walked before
    assert r["tracked_after"] < r["tracked_before"] // 10
    assert r["collected"] >= 999  # the cycles made after the freeze (the last is still held) are collected
