"""Auto-renewal of the receipt handles push consumers hold (5.3.3's ``DefaultReceiptHandleManager``
with ``RenewStrategyPolicy``).

A ReceiveMessage with ``auto_renew`` (a push consumer) gets ``defaultInvisibleTimeMills`` and each
message's handle is held here by (client id, group) until the client acks it or changes its
invisible time (then the latest handle is the one sent to the broker: the client's may be stale).
Every ``renewSchedulePeriodMillis`` a scan renews, through CHANGE_MESSAGE_INVISIBLETIME, each
handle due within ``renewAheadTimeMillis``:

| held for                  | new invisible time                                   | then           |
|---------------------------|------------------------------------------------------|----------------|
| < renewMaxTimeMillis      | 1m 3m 5m 10m 30m 1h (by renewals so far; then 1h)    | held (renewed) |
| ≥ renewMaxTimeMillis      | the group's retry delay for its reconsume times      | let go         |
| client gone               | invisibleTimeMillisWhenClear                         | let go         |

A renewal that fails ``maxRenewRetryTimes`` times in a row is let go (the message comes back
when its time runs out). The scan runs as a task while handles are held and ends with the last.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pumice.proxy.client_manager import DEFAULT_RETRY_NEXT_MS, GrpcClientManager
from pumice.proxy.proxy_config import ProxyConfig

log = logging.getLogger(__name__)

RENEW_POLICY_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)


@dataclass
class HeldHandle:
    client_id: str
    channel: Any  # the client's GrpcClientChannel, the broker's view of it
    group: str
    topic: str
    message_id: str
    handle: str  # the latest (renewed) handle
    expire_ms: int  # when it becomes visible again
    received_ms: int
    reconsume_times: int
    renew_times: int = 0
    retry_times: int = 0


# (a held handle, new invisible ms) → the new handle text, or None (failed)
ChangeFn = Callable[[HeldHandle, int], Awaitable[str | None]]


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReceiptHandleManager:
    def __init__(self, config: ProxyConfig, clients: GrpcClientManager, change: ChangeFn) -> None:
        self.config, self.clients, self.change = config, clients, change
        # (client id, group) → {(message id, the handle the client holds): HeldHandle}
        self.groups: dict[tuple[str, str], dict[tuple[str, str], HeldHandle]] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, client_id: str, channel: Any, group: str, topic: str, message_id: str, handle: str,
            invisible_ms: int, reconsume_times: int) -> None:  # fmt: skip
        now = _now_ms()
        held = HeldHandle(client_id, channel, group, topic, message_id, handle, now + invisible_ms, now,
                          reconsume_times)  # fmt: skip
        self.groups.setdefault((client_id, group), {})[(message_id, handle)] = held
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._scan_loop())

    def remove(self, client_id: str, group: str, message_id: str, handle: str) -> HeldHandle | None:
        """Lets a handle go (acked or changed by the client); the latest held, if any."""
        held_group = self.groups.get((client_id, group))
        if held_group is None:
            return None
        held = held_group.pop((message_id, handle), None)
        if not held_group:
            self.groups.pop((client_id, group), None)
        return held

    async def _scan_loop(self) -> None:
        while self.groups:
            await asyncio.sleep(self.config.renew_schedule_period_millis / 1000)
            try:
                await self.scan()
            except Exception:  # the scan goes on; the next one retries
                log.exception("receipt handle renewal scan failed")

    async def scan(self) -> None:
        c = self.config
        for key, held_group in list(self.groups.items()):
            client = self.clients.get(key[0])
            gone = client is None or client.channel.closed
            for handle_key, held in list(held_group.items()):
                now = _now_ms()
                if gone:
                    ms, stop = c.invisible_time_millis_when_clear, True
                elif held.expire_ms - now > c.renew_ahead_time_millis:
                    continue
                elif now - held.received_ms < c.renew_max_time_millis:
                    ms, stop = RENEW_POLICY_MS[min(held.renew_times, len(RENEW_POLICY_MS) - 1)], False
                else:
                    ms = DEFAULT_RETRY_NEXT_MS[min(held.reconsume_times, len(DEFAULT_RETRY_NEXT_MS) - 1)]
                    stop = True
                new = await self.change(held, ms)
                if new is not None:
                    held.handle, held.expire_ms = new, now + ms
                    held.renew_times, held.retry_times = held.renew_times + 1, 0
                else:
                    held.retry_times += 1
                    log.warning("renewing %s of %s failed (%d)", held.message_id, held.group, held.retry_times)
                if stop or gone or held.retry_times >= c.max_renew_retry_times:
                    held_group.pop(handle_key, None)
            if not held_group:
                self.groups.pop(key, None)
