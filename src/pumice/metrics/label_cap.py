"""LabelCap: at most ``limit`` distinct values of one label (``topic``, ``consumer_group``).

The first ``limit`` values seen keep their own series for the life of the process; every later
one is reported as ``__other__`` (its figures added to that series), and counted once in
``pumice_metrics_label_values_folded_total{label=...}``. A scrape's cost and a Prometheus
server's series then stay bounded however many topics or groups a broker has.
"""

from __future__ import annotations

OTHER = "__other__"


class LabelCap:
    def __init__(self, label: str, limit: int) -> None:
        self.label = label
        self.limit = limit
        self.kept: set[str] = set()
        self.folded: set[str] = set()

    def __call__(self, value: str) -> str:
        """The label value to report for ``value``."""
        if value in self.kept:
            return value
        if value in self.folded:
            return OTHER
        if len(self.kept) < self.limit:
            self.kept.add(value)
            return value
        self.folded.add(value)
        return OTHER

    @property
    def folded_total(self) -> int:
        return len(self.folded)
