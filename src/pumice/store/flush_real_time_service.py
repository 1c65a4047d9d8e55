"""FlushRealTimeService: ASYNC_FLUSH of the CommitLog.

Every ``flushIntervalCommitLog`` (500 ms) it flushes the CommitLog once at least
``flushCommitLogLeastPages`` (4) pages of 4 KiB are unflushed, and flushes whatever there is
every ``flushCommitLogThoroughInterval`` (10 s). ``flushCommitLogTimed`` (true, RocketMQ 4.9.8's
default) sleeps the full interval; with it false, a put that leaves 4 pages unflushed wakes the
thread sooner (the default of RocketMQ before 4.9.1). After each
flush the checkpoint's ``physicMsgTimestamp`` follows the flushed data. A failed flush is
reported to the CommitLog's ``on_io_error`` (the store stops taking writes) and the thread
goes on; the flushed position and the checkpoint stay where the disk last confirmed.
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


class FlushRealTimeService(ServiceThread):
    def __init__(
        self,
        config: MessageStoreConfig,
        mapped_file_queue: MappedFileQueue,
        on_io_error: Callable[[StoreIOError], None],
        update_checkpoint: Callable[[], None],
    ) -> None:
        super().__init__("FlushRealTimeService")
        self.config = config
        self.mapped_file_queue = mapped_file_queue
        self.on_io_error = on_io_error
        self.update_checkpoint = update_checkpoint
        self.last_flush_timestamp = 0

    def run(self) -> None:
        cfg = self.config
        while not self.stopped:
            interval_s = cfg.flush_interval_commit_log / 1000
            least = cfg.flush_commit_log_least_pages
            now = int(time.time() * 1000)
            if now >= self.last_flush_timestamp + cfg.flush_commit_log_thorough_interval:
                self.last_flush_timestamp = now
                least = 0
            if cfg.flush_commit_log_timed:
                self._stop.wait(interval_s)
            else:
                self.wait_for_running(interval_s)
            self._flush(least)
        for _ in range(RETRY_TIMES_OVER):
            if self._flush(0):
                break

    def _flush(self, least: int) -> bool:
        try:
            done = self.mapped_file_queue.flush(least)
        except StoreIOError as e:
            self.on_io_error(e)
            return True
        except Exception:
            log.exception("FlushRealTimeService service has exception")
            return True
        self.update_checkpoint()
        return done
