"""FlushConsumeQueueService: flushes the ConsumeQueues, then the checkpoint.

Every ``flushIntervalConsumeQueue`` (1 s) it flushes each queue that has at least
``flushConsumeQueueLeastPages`` (2) new pages; every ``flushConsumeQueueThoroughInterval``
(60 s), and at shutdown, it flushes every file of every queue and then the checkpoints,
with what dispatch had done before that flush began: ``logicsMsgTimestamp`` (the store time
of the last record dispatched) in ``checkpoint`` and the CommitLog offset dispatch had
reached in ``dispatchcheckpoint``, so neither claims more than is on disk. (RocketMQ 4.9
flushes one file of a queue per pass, and its checkpoint takes ``logicsMsgTimestamp`` as
dispatch sets it whenever the index flushes it: both can claim entries still in memory.)
A failed flush skips the checkpoints, is reported to the store (which stops taking
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
    from pumice.store.dispatch_checkpoint import DispatchCheckpoint
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
        dispatch_checkpoint: Callable[[], DispatchCheckpoint | None] = lambda: None,
        dispatched_offset: Callable[[], int] = lambda: -1,
    ) -> None:
        """``checkpoint``, ``dispatch_checkpoint``: the store's, once loaded (None before);
        ``dispatched_offset``: the CommitLog offset below which every record is dispatched."""
        super().__init__("FlushConsumeQueueService")
        self.config = config
        self.consume_queues = consume_queues
        self.checkpoint = checkpoint
        self.dispatch_checkpoint = dispatch_checkpoint
        self.dispatched_offset = dispatched_offset
        self.on_io_error = on_io_error
        self.last_flush_timestamp = 0

    def do_flush(self, retry_times: int) -> None:
        cfg = self.config
        least = cfg.flush_consume_queue_least_pages
        if retry_times == RETRY_TIMES_OVER:
            least = 0
        now = int(time.time() * 1000)
        cp = self.checkpoint()
        if now >= self.last_flush_timestamp + cfg.flush_consume_queue_thorough_interval:
            self.last_flush_timestamp = now
            least = 0
        if least:
            for cq in self.consume_queues():
                for _ in range(retry_times):
                    if cq.flush(least):
                        break
            return
        # what dispatch has done, read before the flush: the flush covers at least that
        logics_ts = cp.dispatched_logics_timestamp if cp is not None else 0
        dispatched = self.dispatched_offset()
        for cq in self.consume_queues():
            cq.flush_all()
        if cp is not None:
            if logics_ts > 0:
                cp.logics_msg_timestamp = logics_ts
            cp.flush()
        dcp = self.dispatch_checkpoint()
        if dcp is not None and dispatched > dcp.consume_queue_offset:
            dcp.update(consume_queue_offset=dispatched)

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
