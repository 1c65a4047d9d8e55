"""PutMessageWaiter: the flush and replica waits as one awaited call, statuses as 4.9's
thenCombine sets them, against a store whose callbacks come from other threads."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from pumice.broker.put_message_waiter import PutMessageWaiter
from pumice.store.message_store_config import BrokerRole, FlushDiskType
from pumice.store.put_message_result import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)


class FakeStore:
    """on_flushed / on_replicated as the store answers them: a callback later on a thread
    (after ``delay_s``, with ``ok``), or nothing to wait for (``None``)."""

    def __init__(self, flush: tuple[float, bool] | None, replica: tuple[float, bool] | str | None, **config: Any):
        self.config = SimpleNamespace(
            flush_disk_type=FlushDiskType.SYNC_FLUSH, broker_role=BrokerRole.SYNC_MASTER, sync_flush_timeout=300
        )
        for k, v in config.items():
            setattr(self.config, k, v)
        self.flush, self.replica = flush, replica
        self.woken = 0
        self.timers: list[threading.Timer] = []

    def _later(self, spec: tuple[float, bool], callback: Callable[[bool], None]) -> None:
        delay, ok = spec
        timer = threading.Timer(delay, callback, (ok,))
        self.timers.append(timer)
        timer.start()

    def on_flushed(self, result: PutMessageResult, callback: Callable[[bool], None]) -> bool:
        self.woken += 1
        if self.flush is None or self.config.flush_disk_type is not FlushDiskType.SYNC_FLUSH:
            return False
        self._later(self.flush, callback)
        return True

    def on_replicated(self, result: PutMessageResult, callback: Callable[[bool], None]) -> bool:
        if self.replica == "no slave":
            result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            return False
        if self.replica is None:
            return False
        assert isinstance(self.replica, tuple)
        self._later(self.replica, callback)
        return True


def wait(store: FakeStore, wait_for: bool = True) -> tuple[PutMessageStatus, float]:
    async def main() -> tuple[PutMessageStatus, float]:
        t = time.monotonic()
        put = PutMessageResult(PutMessageStatus.PUT_OK, AppendMessageResult(AppendMessageStatus.PUT_OK))
        result = await PutMessageWaiter(store).wait_stored(put, wait_for)  # type: ignore[arg-type]
        took = time.monotonic() - t
        for timer in store.timers:  # late callbacks land while the loop still runs
            await asyncio.to_thread(timer.join)
        return result.status, took

    return asyncio.run(main())


def test_both_waits_run_at_once_under_one_deadline() -> None:
    status, took = wait(FakeStore((0.15, True), (0.15, True)))
    assert status is PutMessageStatus.PUT_OK and took < 0.28  # not 0.15 + 0.15


@pytest.mark.parametrize(
    ("flush", "replica", "expected"),
    [
        ((0.01, False), (0.01, True), PutMessageStatus.FLUSH_DISK_TIMEOUT),
        ((1.0, True), None, PutMessageStatus.FLUSH_DISK_TIMEOUT),  # past syncFlushTimeout (300 ms)
        ((0.01, True), (1.0, True), PutMessageStatus.FLUSH_SLAVE_TIMEOUT),
        ((0.01, True), (0.01, False), PutMessageStatus.FLUSH_SLAVE_TIMEOUT),
        ((0.01, False), (0.01, False), PutMessageStatus.FLUSH_SLAVE_TIMEOUT),  # the replica's over the flush's
        ((0.01, True), "no slave", PutMessageStatus.SLAVE_NOT_AVAILABLE),
        ((0.01, False), "no slave", PutMessageStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_statuses_as_thencombine_sets_them(flush: Any, replica: Any, expected: PutMessageStatus) -> None:
    assert wait(FakeStore(flush, replica))[0] is expected


def test_a_message_that_does_not_wait_still_wakes_the_flush_service() -> None:
    store = FakeStore((1.0, False), (1.0, False))
    status, took = wait(store, wait_for=False)
    assert status is PutMessageStatus.PUT_OK and took < 0.2 and store.woken == 1


def test_async_flush_on_a_master_without_replication_waits_for_nothing() -> None:
    store = FakeStore(None, None, flush_disk_type=FlushDiskType.ASYNC_FLUSH, broker_role=BrokerRole.ASYNC_MASTER)
    assert wait(store) == (PutMessageStatus.PUT_OK, pytest.approx(0, abs=0.1)) and store.woken == 1
