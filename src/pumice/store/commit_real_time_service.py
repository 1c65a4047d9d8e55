"""CommitRealTimeService: moves CommitLog data from the transient pool buffers into the files.

Every ``commitIntervalCommitLog`` (200 ms), or sooner when a put wakes it, it commits once
at least ``commitCommitLogLeastPages`` (4) pages are new, and commits whatever there is
every ``commitCommitLogThoroughInterval`` (200 ms). When something was committed it wakes
FlushRealTimeService. Readers and dispatch see data only once it is committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pumice.store.disk_io import StoreIOError
from pumice.store.service_thread import ServiceThread

if TYPE_CHECKING:
    from pumice.store.mapped_file_queue import MappedFileQueue
    from pumice.store.message_store_config import MessageStoreConfig

log = logging.getLogger(__name__)

RETRY_TIMES_OVER = 10


class CommitRealTimeService(ServiceThread):
    def __init__(
        self,
        config: MessageStoreConfig,
        mapped_file_queue: MappedFileQueue,
        commit_caught_up: Callable[[], bool],
        wakeup_flush: Callable[[], None],
        on_io_error: Callable[[StoreIOError], None],
        on_committed: Callable[[], None] | None = None,
    ) -> None:
        """``on_committed`` wakes dispatch, which reads committed data only."""
        super().__init__("CommitRealTimeService")
        self.config = config
        self.mapped_file_queue = mapped_file_queue
        self.commit_caught_up = commit_caught_up
        self.wakeup_flush = wakeup_flush
        self.on_io_error = on_io_error
        self.last_commit_timestamp = 0
        self.on_committed = on_committed

    def run(self) -> None:
        cfg = self.config
        mfq = self.mapped_file_queue
        failed = False
        while not self.stopped:
            least = cfg.commit_commit_log_least_pages
            now = int(time.time() * 1000)
            if failed or now >= self.last_commit_timestamp + cfg.commit_commit_log_thorough_interval:
                self.last_commit_timestamp = now
                least = 0  # after a failed write: everything, until it is all in the files again
            try:
                if not mfq.commit(least):  # False: something was committed
                    self.last_commit_timestamp = now
                    self.wakeup_flush()
                    if self.on_committed is not None:
                        self.on_committed()
                if failed:
                    failed = not self.commit_caught_up()
            except StoreIOError as e:  # the thread lives on: appends wait in the pool buffers
                failed = True
                self.on_io_error(e)
            except Exception:
                log.exception("CommitRealTimeService service has exception")
            self.wait_for_running(cfg.commit_interval_commit_log / 1000)
        try:
            for _ in range(RETRY_TIMES_OVER):
                if mfq.commit(0):
                    break
        except StoreIOError as e:
            self.on_io_error(e)
