"""The proxy's renewal of the receipt handles push consumers hold (receipt_handle_manager.py)."""

from __future__ import annotations

import asyncio

from pumice.proxy.client_manager import GrpcClientManager
from pumice.proxy.proxy_config import ProxyConfig
from pumice.proxy.receipt_handle_manager import RENEW_POLICY_MS, HeldHandle, ReceiptHandleManager


def _manager(results: list[str | None]) -> tuple[ReceiptHandleManager, list[tuple[str, int]], GrpcClientManager]:
    config = ProxyConfig(
        renew_ahead_time_millis=10_000, max_renew_retry_times=2, renew_schedule_period_millis=3_600_000
    )
    clients = GrpcClientManager(config, lambda g: None)
    calls: list[tuple[str, int]] = []

    async def change(held: HeldHandle, ms: int) -> str | None:
        calls.append((held.handle, ms))
        return results.pop(0)

    return ReceiptHandleManager(config, clients, change), calls, clients


def test_renews_what_is_due_and_acks_use_the_latest() -> None:
    async def go() -> None:
        m, calls, clients = _manager(["h1", "h2"])
        clients.client("c", "127.0.0.1:1", "PYTHON")
        m.add("c", None, "G", "T", "id", "h0", invisible_ms=4000, reconsume_times=0)  # due within 10 s
        m.add("c", None, "G", "T", "far", "f0", invisible_ms=60_000, reconsume_times=0)  # not due
        await m.scan()
        assert calls == [("h0", RENEW_POLICY_MS[0])]
        m.groups[("c", "G")][("id", "h0")].expire_ms = 0  # due again: the next policy step
        await m.scan()
        assert calls[1] == ("h1", RENEW_POLICY_MS[1])
        held = m.remove("c", "G", "id", "h0")  # the client acks with the handle it holds
        assert held is not None and held.handle == "h2" and held.renew_times == 2
        assert m.remove("c", "G", "id", "h0") is None

    asyncio.run(go())


def test_failed_renewals_let_go_and_a_gone_client_is_cleared() -> None:
    async def go() -> None:
        m, calls, clients = _manager([None, None, "x"])
        clients.client("c", "127.0.0.1:1", "PYTHON")
        m.add("c", None, "G", "T", "id", "h0", invisible_ms=1000, reconsume_times=0)
        await m.scan()
        await m.scan()  # maxRenewRetryTimes (2) failures: let go
        assert len(calls) == 2 and not m.groups
        m.add("gone", None, "G", "T", "id2", "g0", invisible_ms=60_000, reconsume_times=0)
        await m.scan()  # no such client: visible again after invisibleTimeMillisWhenClear
        assert calls[2] == ("g0", 1000) and not m.groups

    asyncio.run(go())
