"""`pumice namesrv|broker|dev` run their services through ``cli._serve``: start in order, stop
in reverse on SIGTERM/SIGINT, also when the signal comes during start-up or a start fails."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import click
import pytest

from pumice import cli
from pumice.common import gc_freeze


@pytest.fixture(autouse=True)
def _no_freeze(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """_serve freezes the process's heap once started: not the test runner's."""
    calls: list[str] = []
    monkeypatch.setattr(gc_freeze, "freeze_start_up_heap", lambda: calls.append("freeze") or 0)
    return calls


def test_a_sigterm_during_start_up_lets_it_finish_then_stops_cleanly() -> None:
    """As RocketMQ's shutdown hook: a stop asked for during a long recovery is not lost and
    does not kill the process half-way; the service stops as soon as it has started."""
    events: list[tuple[str, float]] = []

    async def start() -> None:
        events.append(("start", time.monotonic()))
        loop = asyncio.get_running_loop()
        # a safety net for a broken handler: a second SIGTERM 5 s later stops it anyway
        loop.call_later(5, os.kill, os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.2)  # start-up goes on after the signal
        events.append(("started", time.monotonic()))

    async def shutdown() -> None:
        events.append(("shutdown", time.monotonic()))

    previous = signal.signal(signal.SIGTERM, lambda *_: events.append(("lost", time.monotonic())))
    try:
        cli._serve((start, shutdown, lambda: "up"))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert [e for e, _ in events] == ["start", "started", "shutdown"]
    assert events[2][1] - events[1][1] < 2  # at once, not at the 5-s safety net


def test_a_start_that_fails_stops_what_it_and_the_services_before_it_started() -> None:
    stopped: list[str] = []

    async def ok_start() -> None:
        pass

    async def failing_start() -> None:
        raise OSError("address already in use")

    def stopper(name: str):
        async def shutdown() -> None:
            stopped.append(name)

        return shutdown

    with pytest.raises(click.ClickException, match="cannot start: address already in use"):
        cli._serve((ok_start, stopper("namesrv"), lambda: "up"), (failing_start, stopper("broker"), lambda: "up"))
    assert stopped == ["broker", "namesrv"]  # the half-started one too, then the others in reverse


def test_the_heap_is_frozen_once_every_service_has_started(_no_freeze: list[str]) -> None:
    """After the last start (not before, not when a start fails): see pumice.common.gc_freeze."""
    order: list[str] = []

    def start(name: str):
        async def go() -> None:
            order.append(f"{name} started, {len(_no_freeze)} freezes")
            if name == "broker":
                asyncio.get_running_loop().call_later(0.1, os.kill, os.getpid(), signal.SIGTERM)

        return go

    async def shutdown() -> None:
        pass

    cli._serve((start("namesrv"), shutdown, lambda: "up"), (start("broker"), shutdown, lambda: "up"))
    assert order == ["namesrv started, 0 freezes", "broker started, 0 freezes"]
    assert _no_freeze == ["freeze"]
    _no_freeze.clear()

    async def failing_start() -> None:
        raise OSError("address already in use")

    with pytest.raises(click.ClickException):
        cli._serve((failing_start, shutdown, lambda: "up"))
    assert _no_freeze == []
