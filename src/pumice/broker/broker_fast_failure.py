"""BrokerFastFailure: requests that waited too long for a worker of their pool are answered
SYSTEM_BUSY at once, rather than served after the client has given up (RocketMQ 4.9's
BrokerFastFailure, every 10 ms while ``brokerFastFailureEnable``):

===========================  ===================================  ==============================
pool                         answered when                        remark
===========================  ===================================  ==============================
send (also END_TRANSACTION)  the store's page cache is busy       ``[PCBUSY_CLEAN_QUEUE]…``
                             (a put has held the CommitLog for
                             over ``osPageCacheBusyTimeOutMills``)
send                         waited ``waitTimeMillsInSendQueue``  ``[TIMEOUT_CLEAN_QUEUE]…``
pull                         ``waitTimeMillsInPullQueue``         ``[TIMEOUT_CLEAN_QUEUE]…``
client (heartbeats)          ``waitTimeMillsInHeartbeatQueue``    ``[TIMEOUT_CLEAN_QUEUE]…``
===========================  ===================================  ==============================

4.9 cleans every 10 ms whether or not anything waits; ``run`` cleans every 10 ms only while a
request waits for a worker (the pools call ``on_waiting`` when one starts), so an idle broker's
loop is not woken 100 times a second for nothing.

The remarks are 4.9's: ``broker busy, start flow control for a while, period in queue: <ms>ms,
size of queue: <n>``. The Java client retries a SYSTEM_BUSY send on another broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pumice.remoting.remoting_server import ProcessorPool

log = logging.getLogger(__name__)

PERIOD_S = 0.01
_FLOW_CONTROL = "broker busy, start flow control for a while, period in queue: %sms, size of queue: %d"
PCBUSY_REMARK = "[PCBUSY_CLEAN_QUEUE]" + _FLOW_CONTROL
TIMEOUT_REMARK = "[TIMEOUT_CLEAN_QUEUE]" + _FLOW_CONTROL


class BrokerFastFailure:
    def __init__(
        self,
        pools: dict[str, ProcessorPool],
        settings: Callable[[], tuple[bool, int, int, int]],
        page_cache_busy: Callable[[], bool],
    ) -> None:
        self.pools = pools
        self.settings = settings  # (enabled, send ms, pull ms, heartbeat ms), read live
        self.page_cache_busy = page_cache_busy
        self.answered = 0

    async def run(self) -> None:
        """Clean every PERIOD_S while some request waits, for the broker's life; a failure is
        logged and the schedule goes on."""
        someone_waits = asyncio.Event()
        pools = [p for p in self.pools.values() if p.waiting is not None]
        for p in pools:
            p.on_waiting = someone_waits.set
        while True:
            if not any(p.waiting for p in pools):
                someone_waits.clear()
                await someone_waits.wait()
            await asyncio.sleep(PERIOD_S)
            try:
                self.clean_expired_request()
            except Exception:
                log.exception("fast failure failed")

    def clean_expired_request(self) -> None:
        enabled, send_ms, pull_ms, heartbeat_ms = self.settings()
        if not enabled:  # nothing is answered, but what ran leaves the lists (else they only grow)
            for tracked in self.pools.values():
                tracked.drop_done()
            return
        send = self.pools.get("send")
        n = 0
        if send is not None and send.waiting and self.page_cache_busy():
            n += send.answer_waiting(0.0, PCBUSY_REMARK)
        for name, wait_ms in (("send", send_ms), ("pull", pull_ms), ("client", heartbeat_ms)):
            pool = self.pools.get(name)
            if pool is not None and pool.waiting:
                n += pool.answer_waiting(wait_ms / 1000, TIMEOUT_REMARK)
        if n:
            self.answered += n
            log.warning("fast failure: %d waiting requests answered SYSTEM_BUSY", n)
