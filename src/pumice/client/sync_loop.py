"""BackgroundLoop: the private event loop behind the sync client classes.

A sync wrapper (``Producer``, ``LitePullConsumer``, ``PullConsumer``, ``MQAdmin``) owns one
loop (uvloop's when installed) running in a daemon thread and forwards each call with
``asyncio.run_coroutine_threadsafe``, waiting for the result; ``submit`` returns the
``concurrent.futures.Future`` instead (callbacks run in the loop thread). Calling ``run`` from
the loop thread itself would deadlock, so it raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pumice.client.exceptions import MQClientError

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (a dependency, except on Windows), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class BackgroundLoop:
    def __init__(self, name: str = "pumice-client") -> None:
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self.loop.is_closed():
            coro.close()
            raise MQClientError("the client is shut down")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise MQClientError("a sync client call from its own loop thread (a callback?) would deadlock")
        fut = self.submit(coro)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(10)
            self.loop.close()
