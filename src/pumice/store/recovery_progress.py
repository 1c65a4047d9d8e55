"""RecoveryProgress: how far a recovery scan has got, shown while it runs.

On a terminal (stderr is a TTY) it draws a progress bar with bytes scanned out of the total
and the rate; otherwise it logs a line every few seconds and a summary at the end.
"""

from __future__ import annotations

import logging
import sys
import time

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

log = logging.getLogger(__name__)

LOG_EVERY_S = 5.0


class RecoveryProgress:
    def __init__(self, total_bytes: int, what: str) -> None:
        self.total = total_bytes
        self.what = what
        self.done = 0
        self.started = time.monotonic()
        self._last_log = self.started
        self._bar: Progress | None = None
        if sys.stderr.isatty() and total_bytes > 0:
            self._bar = Progress(
                TextColumn(f"recover {what}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), transient=True
            )
            self._task = self._bar.add_task(what, total=total_bytes)
            self._bar.start()

    def advance(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
            return
        now = time.monotonic()
        if now - self._last_log >= LOG_EVERY_S:
            self._last_log = now
            log.info("recover %s: %s", self.what, self.describe())

    def describe(self) -> str:
        secs = max(time.monotonic() - self.started, 1e-9)
        return f"{self.done / 1e6:,.1f} of {self.total / 1e6:,.1f} MB scanned, {self.done / secs / 1e6:,.0f} MB/s"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        log.info("recover %s done: %s", self.what, self.describe())
