"""Histograms the hot paths add to: one list of bucket counts per label key, read at scrape time.

A table maps a key to ``[n_0, …, n_k, n_inf, sum]``: ``n_i`` counts the values ``<= bounds[i]``
that were above ``bounds[i-1]``; ``n_inf`` those above the last bound; ``sum`` adds every value.
``observe`` is the one call a hot path makes (a bisect and two list increments); the exposition
turns the counts into Prometheus' cumulative ``le`` buckets.

==========================  =======================================================================
bounds                      values (RocketMQ 5.3.3's views where it has one)
==========================  =======================================================================
MESSAGE_SIZE_BOUNDS         bytes: 1 KiB, 4 KiB, 512 KiB, 1 MiB, 2 MiB, 4 MiB (BrokerMetricsManager)
RPC_LATENCY_BOUNDS_MS       ms: 1, 3, 5, 7, 10, 100, 1000, 2000, 3000 (RemotingMetricsManager)
GROUP_COMMIT_SIZE_BOUNDS    SYNC_FLUSH puts one flush covered: 1, 2, 4 … 256 (Pumice's own)
FLUSH_LATENCY_BOUNDS_MS     ms one group's flush (its fdatasyncs) took: 0.5, 1, 2, 5 … 1000
==========================  =======================================================================
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable

MESSAGE_SIZE_BOUNDS = (1024.0, 4096.0, 512 * 1024.0, 1024 * 1024.0, 2 * 1024 * 1024.0, 4 * 1024 * 1024.0)
RPC_LATENCY_BOUNDS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
GROUP_COMMIT_SIZE_BOUNDS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
FLUSH_LATENCY_BOUNDS_MS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 250.0, 1000.0)


def observe(table: dict[Hashable, list[float]], key: Hashable, value: float, bounds: tuple[float, ...]) -> None:
    counts = table.get(key)
    if counts is None:
        counts = table[key] = [0] * (len(bounds) + 2)
    counts[bisect_left(bounds, value)] += 1
    counts[-1] += value


def cumulative(counts: list[float], bounds: tuple[float, ...]) -> tuple[list[tuple[str, float]], float]:
    """Prometheus buckets (``le`` as text, cumulative counts, ``+Inf`` last) and the sum."""
    buckets, running = [], 0.0
    for le, n in zip((*(repr(b) for b in bounds), "+Inf"), counts[:-1], strict=True):
        running += n
        buckets.append((le, running))
    return buckets, counts[-1]


def merge(into: list[float] | None, counts: list[float]) -> list[float]:
    """Bucket counts added (label values folded together)."""
    if into is None:
        return list(counts)
    for i, n in enumerate(counts):
        into[i] += n
    return into
