"""SaveRetry: a config file that could not be saved, saved again as soon as it can be.

A failed save (``OSError``: ENOSPC, EIO, EROFS, ...) leaves the state in memory newer than the
file: the owner marks it ``failed(error)`` and its retry timer asks ``due()`` until a save
lands (``saved()``). RocketMQ's ConfigManager logs the error and forgets it: the file stays
stale until some later change happens to persist it, and a crash meanwhile loses the change.

==================  ==========================================================================
state               meaning
==================  ==========================================================================
``cause``           None: the file holds the state. Else the last failure (``strerror``)
``failures``        failed saves since the last one that landed
``due()``           True once the back-off has passed: 1 s after the first failure, doubling
                    up to ``RETRY_MAX_S`` (a full disk is not hammered, nor left for long)
==================  ==========================================================================

Logging: one ERROR per cause (a retry failing the same way is DEBUG), one WARN when the file
is saved again, naming how many saves failed and why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

RETRY_MIN_S = 1.0
RETRY_MAX_S = 4.0


class SaveRetry:
    """The save state of the file at ``path`` (not thread-safe: the owner's write lock guards it)."""

    __slots__ = ("_clock", "_delay_s", "_retry_at", "cause", "failures", "path")

    def __init__(self, path: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.cause: str | None = None
        self.failures = 0
        self._clock = clock
        self._delay_s = RETRY_MIN_S
        self._retry_at = 0.0

    @property
    def unsaved(self) -> bool:
        return self.cause is not None

    def failed(self, error: OSError) -> None:
        """A save failed: log it (once per cause) and schedule the next try."""
        cause = error.strerror or str(error)
        self.failures += 1
        if cause != self.cause:
            log.error("cannot persist %s: %s; it is saved again every %g to %g s until it lands",
                      self.path, error, RETRY_MIN_S, RETRY_MAX_S)  # fmt: skip
        else:
            log.debug("persist %s failed again (%d times): %s", self.path, self.failures, error)
        self.cause = cause
        self._retry_at = self._clock() + self._delay_s
        self._delay_s = min(self._delay_s * 2, RETRY_MAX_S)

    def saved(self) -> None:
        """A save landed."""
        if self.cause is not None:
            log.warning("persisted %s again after %d failed saves (%s)", self.path, self.failures, self.cause)
        self.cause = None
        self.failures = 0
        self._delay_s = RETRY_MIN_S

    def due(self) -> bool:
        """True when the file is unsaved and its back-off has passed."""
        return self.cause is not None and self._clock() >= self._retry_at
