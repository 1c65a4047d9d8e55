"""ServiceThread: a named daemon thread that sleeps until woken or its interval passes.

RocketMQ's ``ServiceThread``: ``wait_for_running(interval)`` returns at once if a
``wakeup()`` came since the last wait, else after the interval or the next wakeup, and
calls ``on_wait_end()`` either way (GroupCommitService swaps its request lists there).
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod

log = logging.getLogger(__name__)


class ServiceThread(ABC):
    def __init__(self, name: str) -> None:
        self.name = name
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
            self._thread.start()

    def _main(self) -> None:
        log.info("%s service started", self.name)
        try:
            self.run()
        except Exception:
            log.exception("%s service has exception", self.name)
        log.info("%s service end", self.name)

    @abstractmethod
    def run(self) -> None:
        """The thread body; loop until ``stopped``."""

    def wakeup(self) -> None:
        if not self._wake.is_set():  # set() takes a lock even when already set
            self._wake.set()

    def wait_for_running(self, interval_s: float) -> None:
        if not self._wake.is_set():
            self._wake.wait(interval_s)
        self._wake.clear()
        self.on_wait_end()

    def on_wait_end(self) -> None:  # noqa: B027 - optional hook, most services need none
        """Called after every wait."""

    def shutdown(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout_s)
