"""PutMessageWaiter: a put's wait for the disk and for a slave as one awaited call.

RocketMQ 4.9's ``asyncPutMessage`` combines the flush future and the replica future
(``thenCombine``). The store here has no event loop: it calls back from its flush and HA
threads (``on_flushed``, ``on_replicated``), and this module turns those callbacks into one
awaited call on the broker's loop.

=========================  ==========================================  =====================
waits for                  when                                        on failure or timeout
=========================  ==========================================  =====================
the disk (group commit)    SYNC_FLUSH, the put OK, the message waits   FLUSH_DISK_TIMEOUT
a slave's acknowledgement  SYNC_MASTER, the message waits              FLUSH_SLAVE_TIMEOUT
a DLedger quorum           DLedger mode (``result.quorum``), always     the mapped outcome
=========================  ==========================================  =====================

Both waits run at once, under one ``syncFlushTimeout`` deadline. A message whose WAIT
property is not "true" waits for neither (the flush service is still woken). With no slave
to wait for, the store sets SLAVE_NOT_AVAILABLE itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from pumice.store.message_store_api import MessageStore
from pumice.store.message_store_config import BrokerRole, FlushDiskType
from pumice.store.put_message_result import PutMessageResult, PutMessageStatus


def _no_wait(ok: bool) -> None:
    pass


class AsyncFlushWaiter:
    """Turns store-thread completions into asyncio futures with one loop wake-up per batch.

    Completions arrive on the flush and HA threads, are queued, and the loop is woken once
    for the whole batch rather than once per put.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._done: list[tuple[asyncio.Future[bool], bool]] = []
        self._drain_scheduled = False
        # completions come from the flush and HA threads while the loop drains: without the
        # lock, one appended just as a drain ended would wait for ever (a timeout answer)
        self._lock = threading.Lock()

    def callback_for(self, fut: asyncio.Future[bool]) -> Callable[[bool], None]:
        def done(ok: bool) -> None:
            with self._lock:
                self._done.append((fut, ok))
                if self._drain_scheduled:
                    return
                self._drain_scheduled = True
            self.loop.call_soon_threadsafe(self._drain)

        return done

    def _drain(self) -> None:
        with self._lock:
            done, self._done = self._done, []
            self._drain_scheduled = False
        for fut, ok in done:
            if not fut.done():
                fut.set_result(ok)


def _time_out(pending: list[asyncio.Future[bool]]) -> None:
    for fut in pending:
        if not fut.done():
            fut.set_result(False)  # read as the wait's timeout


async def _wait_all(pending: list[asyncio.Future[bool]], timeout_s: float) -> None:
    """Until every future of ``pending`` (this module's own) is done, or ``timeout_s`` has passed:
    then those not done are done with False. One timer and an await each: ``asyncio.wait``'s
    waiter, callbacks and sets were 7 % of a SYNC_FLUSH send's broker CPU."""
    timer = asyncio.get_running_loop().call_later(timeout_s, _time_out, pending)
    try:
        for fut in pending:
            await fut
    finally:
        timer.cancel()


class PutMessageWaiter:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self._waiter: AsyncFlushWaiter | None = None

    def _register(self, register: Callable[[Callable[[bool], None]], bool]) -> asyncio.Future[bool] | None:
        """``register(callback)`` asks a store thread to call back once done; None when there
        is nothing to wait for."""
        loop = asyncio.get_running_loop()
        if self._waiter is None or self._waiter.loop is not loop:
            self._waiter = AsyncFlushWaiter(loop)
        fut: asyncio.Future[bool] = loop.create_future()
        return fut if register(self._waiter.callback_for(fut)) else None

    async def wait_stored(self, result: PutMessageResult, wait: bool = True) -> PutMessageResult:
        """Wait for what ``result``'s put must wait for; its status tells how that went."""
        store = self.store
        config = store.config
        if result.quorum is not None:
            # DLedger mode: the log flushes itself; the quorum's outcome is the status (the
            # log times out by itself after maxWaitAckTimeMs, WAIT_QUORUM_ACK_TIMEOUT)
            await asyncio.wrap_future(result.quorum)
            return result
        flushed: asyncio.Future[bool] | None = None
        if config.flush_disk_type is FlushDiskType.SYNC_FLUSH and result.is_ok() and wait:
            flushed = self._register(lambda cb: store.on_flushed(result, cb))
        else:
            store.on_flushed(result, _no_wait)  # wakes the flush service; nothing to wait for
        replicated: asyncio.Future[bool] | None = None
        replica_status: PutMessageStatus | None = None  # SLAVE_NOT_AVAILABLE, set by on_replicated
        if wait and config.broker_role is BrokerRole.SYNC_MASTER:
            before = result.status
            replicated = self._register(lambda cb: store.on_replicated(result, cb))
            if result.status is not before:
                replica_status = result.status
        pending = [f for f in (flushed, replicated) if f is not None]
        if pending:
            await _wait_all(pending, config.sync_flush_timeout / 1000)
        # as 4.9's thenCombine: the flush's status, then the replica's over it
        if flushed is not None and not (flushed.done() and flushed.result()):
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        if replica_status is not None:
            result.status = replica_status
        if replicated is not None and not (replicated.done() and replicated.result()):
            result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return result
