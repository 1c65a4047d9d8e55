"""CleanConsumeQueueService: deletes ConsumeQueue and index files the CommitLog has outlived.

It has one trigger: the CommitLog's min offset has moved since the last run (CommitLog
files were deleted). Then, for every ConsumeQueue, files whose last entry points below
that offset are deleted (never the last file, oldest first) and the queue's min offset is
moved to the first entry still in the CommitLog, so reads below it answer OFFSET_TOO_SMALL;
``deleteConsumeQueueFilesInterval`` ms (100) pass after each queue that lost files. Last,
index files whose entries all point below the offset are deleted. Runs right after
CleanCommitLogService, every ``cleanResourceInterval``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pumice.store.consume_queue import ConsumeQueue
    from pumice.store.index_service import IndexService

log = logging.getLogger(__name__)


class CleanConsumeQueueService:
    def __init__(
        self,
        commit_log_min_offset: Callable[[], int],
        consume_queues: Callable[[], Iterable[ConsumeQueue]],
        index_service: IndexService,
        delete_interval_ms: Callable[[], int],
        stop_event: threading.Event | None = None,
    ) -> None:
        """``delete_interval_ms``: deleteConsumeQueueFilesInterval, read at each pass (it can change live)."""
        self.commit_log_min_offset = commit_log_min_offset
        self.consume_queues = consume_queues
        self.index_service = index_service
        self.delete_interval_ms = delete_interval_ms
        self.last_physical_min_offset = 0
        # set by the store's shutdown: cuts short the pauses of a pass under way
        self._stopped = stop_event or threading.Event()

    def run(self) -> None:
        """One pass. Errors are logged."""
        try:
            self.delete_expired_files()
        except Exception:
            log.warning("CleanConsumeQueueService service has exception", exc_info=True)

    def delete_expired_files(self) -> int:
        """Delete what the CommitLog's min offset leaves behind; returns the ConsumeQueue files deleted."""
        interval_s = self.delete_interval_ms() / 1000
        min_offset = self.commit_log_min_offset()
        if min_offset <= self.last_physical_min_offset:
            return 0
        self.last_physical_min_offset = min_offset
        total = 0
        for cq in self.consume_queues():
            if self._stopped.is_set():
                return total
            n = cq.delete_expired_file(min_offset)
            total += n
            if n > 0 and interval_s > 0:
                self._stopped.wait(interval_s)
        self.index_service.delete_expired_file(min_offset)
        return total
