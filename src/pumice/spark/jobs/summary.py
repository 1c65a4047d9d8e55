"""``JobSummary``: what a Spark job did, as the one line it ends with.

export: 1,000,000 messages, 24 files, 8.3 s (topics BenchTopic)

``messages`` counts messages (one row of the data source each); ``files`` are those the job
read (stats: CommitLog segments or ConsumeQueue files) or wrote (export: Parquet files;
reindex: ConsumeQueue and index files).
"""

from __future__ import annotations

import time
from dataclasses import dataclass


def plural(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``, ``1,000 files``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


@dataclass(frozen=True)
class JobSummary:
    job: str
    messages: int
    files: int
    seconds: float
    detail: str = ""

    @property
    def rows(self) -> int:
        """The name ``messages`` had before issue 21."""
        return self.messages

    def line(self) -> str:
        tail = f" ({self.detail})" if self.detail else ""
        return (
            f"{self.job}: {plural(self.messages, 'message')}, {plural(self.files, 'file')}, {self.seconds:.1f} s{tail}"
        )

    def __str__(self) -> str:
        return self.line()


class Stopwatch:
    """Seconds since it was made (a monotonic clock)."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self._t0
