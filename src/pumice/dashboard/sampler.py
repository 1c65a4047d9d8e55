"""Sampler: the dashboard's background task that keeps the last hour of TPS and lag in memory.

Every ``interval_s`` it asks the cluster (GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO per
broker, GET_ALL_SUBSCRIPTIONGROUP_CONFIG per master, GET_CONSUME_STATS per group) and appends one
``Sample``; samples older than ``keep_s`` go. A failed round is kept as the error (shown on the
charts page), never raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQClientError
from pumice.dashboard.views import first_float

log = logging.getLogger(__name__)

MAX_GROUPS = 20  # groups whose lag is sampled (the first by name): a round stays a few requests


@dataclass
class Sample:
    at: float  # epoch seconds
    tps_in: dict[str, float] = field(default_factory=dict)  # broker address → putTps
    tps_out: dict[str, float] = field(default_factory=dict)  # broker address → getTransferedTps
    lag: dict[str, int] = field(default_factory=dict)  # group → messages behind


class Sampler:
    def __init__(self, admin: AsyncMQAdmin, interval_s: float = 10.0, keep_s: float = 3600.0) -> None:
        self.admin = admin
        self.interval_s = interval_s
        self.keep_s = keep_s
        self.samples: deque[Sample] = deque()
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="dashboard-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            before = self.last_error
            try:
                await self.sample_once()
            except Exception as e:  # a round never stops the task
                self.last_error = f"{type(e).__name__}: {e}"
            if self.last_error and self.last_error != before:  # once per new error, not every round
                log.warning("dashboard sampling failed: %s", self.last_error)
            await asyncio.sleep(self.interval_s)

    async def sample_once(self) -> Sample:
        s = Sample(time.time())
        try:
            brokers = await self.admin.cluster_list()
            for b in brokers:
                if not b.error:
                    s.tps_in[b.addr] = first_float(b.runtime.get("putTps"))
                    s.tps_out[b.addr] = first_float(b.runtime.get("getTransferedTps"))
            groups: set[str] = set()
            for b in brokers:
                if b.broker_id == 0 and not b.error:
                    groups.update(await self.admin.user_subscription_groups(b.addr))
            for g in sorted(groups)[:MAX_GROUPS]:
                try:
                    s.lag[g] = (await self.admin.consumer_progress(g)).total_lag
                except MQClientError:
                    continue  # a group with no offsets yet has no lag to draw
            self.last_error = None
        except MQClientError as e:
            self.last_error = str(e)
        self.samples.append(s)
        while self.samples and self.samples[0].at < s.at - self.keep_s:
            self.samples.popleft()
        return s

    def series(self, kind: str) -> dict[str, list[tuple[float, float]]]:
        """``tps_in``, ``tps_out`` or ``lag``: name → [(time, value)]."""
        out: dict[str, list[tuple[float, float]]] = {}
        for s in self.samples:
            for name, v in getattr(s, kind).items():
                out.setdefault(name, []).append((s.at, float(v)))
        return out
