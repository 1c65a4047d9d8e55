"""The start-up heap of a server process, kept out of the collector's full passes.

A full (generation 2) collection walks every tracked object. A started broker holds about
50,000 of them that live as long as the process: modules, classes, functions, the config and
its tables. Under load, the survivors of young collections (requests in flight, held pulls)
start a full pass once they pass a quarter of that, about twice a second at 8,000 acknowledged
sends a second, and each pass stopped the event loop and every store thread for 16–20 ms, which
was the p99 of SYNC_FLUSH acknowledgements (BENCHMARKS.md, "The collector's full passes").

``gc.freeze()`` once the process has started moves what is then alive into the permanent
generation, which no collection walks: a full pass then walks only what was made since (0.2 ms
at p50 in the same run). Reference counting still frees frozen objects; only reference cycles
among start-up objects would never be collected, and they live for the whole process anyway.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)


def freeze_start_up_heap() -> int:
    """Collect once, then freeze what is alive; the number of objects frozen."""
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info(
        "start-up heap frozen: %d objects kept out of the collector's full passes (%.0f ms)",
        frozen, (time.perf_counter() - t0) * 1000,
    )  # fmt: skip
    return frozen
