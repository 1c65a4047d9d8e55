"""Polling until something holds, with a bounded wait.

``eventually`` (blocking) and ``eventually_async`` (in a coroutine) are the two poll loops:
``check()`` every ``every`` seconds until it returns a truthy value, which is returned, or an
AssertionError naming ``what`` (and the last value or error) after ``timeout_s``. An exception
of a ``retry_on`` type counts as "not yet"; any other fails at once. ``wait_until`` and
``wait_dispatched`` are ``eventually`` set up for state inside the test's own process (a
store's threads): polled every few milliseconds, errors fail at once.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pumice.client import MQClientError

if TYPE_CHECKING:
    from pumice.store import DefaultMessageStore

Errors = tuple[type[BaseException], ...]
ROUTE_NOT_YET: Errors = (AssertionError, MQClientError)  # a topic's route before the broker registered it


def _timed_out(what: str, timeout_s: float, last: Any) -> AssertionError:
    return AssertionError(f"{what} not reached within {timeout_s}s (last: {last!r})")


def eventually(
    check: Callable[[], Any],
    timeout_s: float = 15.0,
    what: str = "condition",
    *,
    every: float = 0.1,
    retry_on: Errors = (AssertionError,),
) -> Any:
    """``check()`` every ``every`` s until truthy (returned); AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            last = check()
            if last:
                return last
        except retry_on as e:
            last = e
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout_s, last)
        time.sleep(every)


async def eventually_async(
    check: Callable[[], Any],
    timeout_s: float = 15.0,
    what: str = "condition",
    *,
    every: float = 0.1,
    retry_on: Errors = (AssertionError, MQClientError),
) -> Any:
    """``eventually`` in a coroutine; ``check()`` may return an awaitable, which is awaited.
    A client call failing (MQClientError: no route yet, say) counts as not yet by default."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            last = check()
            if inspect.isawaitable(last):
                last = await last
            if last:
                return last
        except retry_on as e:
            last = e
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout_s, last)
        await asyncio.sleep(every)


def wait_until(check: Callable[[], Any], timeout_s: float = 3.0, what: str = "condition") -> Any:
    """``eventually`` for state in this process: every 5 ms, 3 s by default, errors fail at once."""
    return eventually(check, timeout_s, what, every=0.005, retry_on=())


def wait_dispatched(store: DefaultMessageStore, timeout_s: float = 10.0) -> None:
    """Until dispatch (ConsumeQueues and index) has caught up with the store's CommitLog."""
    try:
        eventually(lambda: store.dispatch_behind_bytes() <= 0, timeout_s, "dispatch", every=0.002, retry_on=())
    except AssertionError:
        raise AssertionError(
            f"dispatch still {store.dispatch_behind_bytes()} bytes behind after {timeout_s}s"
        ) from None
