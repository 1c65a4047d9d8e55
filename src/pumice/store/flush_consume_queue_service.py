"""FlushConsumeQueueService: flushes the ConsumeQueues, then the checkpoint.

Every ``flushIntervalConsumeQueue`` (1 s) it flushes each queue that has at least
``flushConsumeQueueLeastPages`` (2) new pages; every ``flushConsumeQueueThoroughInterval``
(60 s), and at shutdown, it flushes everything and then the checkpoint file, with the
``logicsMsgTimestamp`` taken before that flush began (so it never claims more than is on
disk). A failed flush skips the checkpoint, is reported to the store (which stops taking
writes: recovery must rebuild what may be lost) and the thread goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pumice.store.disk_io import StoreIOError
from pumice.store.service_thread import ServiceThread

if TYPE_CHECKING:
    from pumice.store.consume_queue import ConsumeQueue
    from pumice.store.message_store_config import MessageStoreConfig
    from pumice.store.store_checkpoint import StoreCheckpoint

log = logging.getLogger(__name__)

RETRY_TIMES_OVER = 3


class FlushConsumeQueueService(ServiceThread):
    def __init__(
        self,
        config: MessageStoreConfig,
        consume_queues: Callable[[], Iterable[ConsumeQueue]],
        checkpoint: Callable[[], StoreCheckpoint | None],
        on_io_error: Callable[[StoreIOError], None],
    ) -> None:
        """``checkpoint``: the store's, once loaded (None before)."""
        super().__init__("FlushConsumeQueueService")
        self.config = config
        self.consume_queues = consume_queues
        self.checkpoint = checkpoint
        self.on_io_error = on_io_error
        self.last_flush_timestamp = 0

    def do_flush(self, retry_times: int) -> None:
        cfg = self.config
        least = cfg.flush_consume_queue_least_pages
        if retry_times == RETRY_TIMES_OVER:
            least = 0
        logics_ts = 0
        now = int(time.time() * 1000)
        cp = self.checkpoint()
        if now >= self.last_flush_timestamp + cfg.flush_consume_queue_thorough_interval:
            self.last_flush_timestamp = now
            least = 0
        if least == 0 and cp is not None:
            logics_ts = cp.logics_msg_timestamp
        for cq in self.consume_queues():
            for _ in range(retry_times):
                if cq.flush(least):
                    break
        if least == 0 and cp is not None:
            if logics_ts > 0:
                cp.logics_msg_timestamp = logics_ts
            cp.flush()

    def _flush_or_report(self, retry_times: int) -> None:
        try:
            self.do_flush(retry_times)
        except StoreIOError as e:
            self.on_io_error(e)
        except Exception:
            log.exception("FlushConsumeQueueService service has exception")

    def run(self) -> None:
        while not self.stopped:
            self.wait_for_running(self.config.flush_interval_consume_queue / 1000)
            self._flush_or_report(1)
        self._flush_or_report(RETRY_TIMES_OVER)
