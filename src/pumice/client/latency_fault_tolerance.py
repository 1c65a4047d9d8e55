"""LatencyFaultTolerance: brokers that failed or answered slowly are avoided for a while.

After each send the producer reports the broker's latency; a failure counts as 30 s. The
broker is then unavailable for the duration of the first step the latency reaches (the Java
client's MQFaultStrategy defaults):

=================  ==================
latency ≥ (ms)     unavailable for
=================  ==================
0, 50, 100         0
550                30 s
1000               60 s
2000               120 s
3000               180 s
15000 (failures)   600 s
=================  ==================
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
ISOLATION_LATENCY_MS = 30_000


def _now_ms() -> float:
    return time.monotonic() * 1000


def not_available_duration(latency_ms: float) -> int:
    if latency_ms < 550:  # nearly every send: the table's first three steps are all 0
        return 0
    for i in range(len(LATENCY_MAX_MS) - 1, -1, -1):
        if latency_ms >= LATENCY_MAX_MS[i]:
            return NOT_AVAILABLE_DURATION_MS[i]
    return 0


@dataclass
class FaultItem:
    name: str
    latency_ms: float
    available_at_ms: float


class LatencyFaultTolerance:
    """Thread-safe; ``clock`` returns milliseconds (monotonic), replaceable for tests."""

    def __init__(self, clock: Callable[[], float] = _now_ms) -> None:
        self.clock = clock
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()

    def update_fault_item(self, name: str, latency_ms: float, isolation: bool = False) -> None:
        duration = not_available_duration(ISOLATION_LATENCY_MS if isolation else latency_ms)
        at = self.clock() + duration
        item = self._items.get(name)
        if item is not None:  # updated in place: no new item a send (each write atomic)
            item.latency_ms, item.available_at_ms = latency_ms, at
            return
        with self._lock:
            self._items[name] = FaultItem(name, latency_ms, at)

    def is_available(self, name: str) -> bool:
        item = self._items.get(name)
        return item is None or self.clock() >= item.available_at_ms

    def remove(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)

    def pick_one_at_least(self, candidates: list[str] | None = None) -> str | None:
        """Among known brokers (or ``candidates``), the one that becomes available first."""
        with self._lock:
            items = [i for i in self._items.values() if candidates is None or i.name in candidates]
        if not items:
            return None
        return min(items, key=lambda i: (i.available_at_ms, i.latency_ms)).name
