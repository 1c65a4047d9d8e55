"""PullRequestHoldService's scan: asleep while no pull is parked, on time once one is."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any, cast

from pumice.broker import pull_request_hold_service
from pumice.broker.pull_request_hold_service import PullRequest, PullRequestHoldService
from pumice.remoting.remoting_command import RemotingCommand


class CountingClock:
    """The module's ``time``, counting the scan's reads of the clock (one a tick)."""

    def __init__(self) -> None:
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        return time.monotonic()


def test_the_scan_sleeps_while_nothing_is_parked_and_times_a_parked_pull_out_on_time(monkeypatch) -> None:
    clock = CountingClock()
    monkeypatch.setattr(pull_request_hold_service, "time", clock)

    async def main() -> tuple[int, float]:
        woken: list[float] = []
        hold = PullRequestHoldService(lambda pr: woken.append(time.monotonic()), lambda topic, queue_id: 0)
        hold.start()
        try:
            await asyncio.sleep(0.5)
            idle_reads = clock.reads
            channel = SimpleNamespace(held=0, held_bytes=0, closed=False)
            t0 = time.monotonic()
            pr = PullRequest(cast(Any, channel), RemotingCommand(code=11), 5, cast(Any, None), t0 + 0.2, cost=1)
            assert hold.suspend_pull_request("T", 0, pr)
            for _ in range(100):  # bounded: 5 s
                if woken:
                    break
                await asyncio.sleep(0.05)
            assert woken, "the parked pull never timed out"
            return idle_reads, woken[0] - t0
        finally:
            await hold.shutdown()

    idle_reads, took = asyncio.run(asyncio.wait_for(main(), 30))
    assert idle_reads <= 1  # a tick every 100 ms (5 in half a second) before
    assert 0.2 <= took < 0.5  # its deadline, within a tick
