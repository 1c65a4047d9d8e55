"""A thread that calls a check every few seconds until shut down (RocketMQ's FileWatchService):
the ACL files' and the TLS certificates' reloads. A check that raises is logged; the next one
runs anyway."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class FileWatchService:
    def __init__(self, check: Callable[[], object], interval_s: float, name: str) -> None:
        self.check = check
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:  # the watcher must outlive anything a file does to it
                log.exception("%s failed", self._thread.name)

    def start(self) -> None:
        self._thread.start()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)
