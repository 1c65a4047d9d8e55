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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pumice.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)


class CleanConsumeQueueService:
    def __init__(self, store: DefaultMessageStore, stop_event: threading.Event | None = None) -> None:
        self.store = store
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
        store = self.store
        interval_s = store.config.delete_consume_queue_files_interval / 1000
        min_offset = store.commit_log.get_min_offset()
        if min_offset <= self.last_physical_min_offset:
            return 0
        self.last_physical_min_offset = min_offset
        total = 0
        for queues in list(store.consume_queue_table.values()):
            for cq in list(queues.values()):
                if self._stopped.is_set():
                    return total
                n = cq.delete_expired_file(min_offset)
                total += n
                if n > 0 and interval_s > 0:
                    self._stopped.wait(interval_s)
        store.index_service.delete_expired_file(min_offset)
        return total
