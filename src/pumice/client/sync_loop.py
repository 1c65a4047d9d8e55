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
from collections.abc import Callable, Coroutine
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


async def _on_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


class SyncClient:
    """Base of the blocking twins: ``self.impl``, an async client built on a private
    ``BackgroundLoop`` by ``factory``, and driven there. ``start``/``shutdown`` and the context
    manager forward to it; ``shutdown_timeout_s`` bounds the wait for its shutdown."""

    impl: Any

    def __init__(self, loop_name: str, factory: Callable[[], Any]) -> None:
        self._loop = BackgroundLoop(loop_name)
        self.impl = self._loop.run(_on_loop(factory))  # built on its loop: it may look up the running loop

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return self._loop.run(coro, timeout_s)

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a plain method of the loop-bound client on its loop."""
        return self._loop.run(_on_loop(fn, *args, **kwargs))

    def shutdown_timeout_s(self) -> float:
        return 30.0

    def start(self) -> None:
        self._run(self.impl.start())

    def shutdown(self) -> None:
        try:
            self._run(self.impl.shutdown(), self.shutdown_timeout_s())
        finally:
            self._loop.close()

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
