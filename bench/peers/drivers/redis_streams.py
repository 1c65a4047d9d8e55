"""Redis Streams through redis-py's asyncio client (hiredis parser): ``XADD`` per message over a
pool of up to 64 connections a publisher (Redis does not multiplex a connection), a pipeline of
64 ``XADD`` for a batch, ``XREAD COUNT 1000`` for the consumer (``BLOCK`` for the latency one)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.peers.drivers import Driver, OnBodies, Publisher

POOL = 64


class _RedisPublisher(Publisher):
    def __init__(self, r: Any, topic: str) -> None:
        self.r, self.topic = r, topic
        # queue for the pool's connections in order: redis-py's pool lets a waiter starve past its
        # timeout with 256 sends waiting on 64 connections ("No connection available", 2026-11-30)
        self._turns = asyncio.Semaphore(POOL)

    async def send(self, body: bytes) -> None:
        async with self._turns:
            await self.r.xadd(self.topic, {b"b": body})

    async def send_batch(self, bodies: list[bytes]) -> None:
        pipe = self.r.pipeline(transaction=False)
        for b in bodies:
            pipe.xadd(self.topic, {b"b": b})
        await pipe.execute()

    async def close(self) -> None:
        await self.r.aclose()


class RedisDriver(Driver):
    batch_note = "pipeline of 64 XADD"

    def _client(self, pool: int) -> Any:
        import redis.asyncio as redis

        cp = redis.BlockingConnectionPool(host=self.endpoint["host"], port=self.endpoint["port"],
                                          max_connections=pool, timeout=30, socket_timeout=30)  # fmt: skip
        return redis.Redis(connection_pool=cp)

    async def create_topic(self, topic: str) -> None:
        r = self._client(1)
        try:
            await r.delete(topic)
        finally:
            await r.aclose()

    async def publisher(self, topic: str, batch: int = 1) -> Publisher:
        r = self._client(POOL)
        await r.ping()
        return _RedisPublisher(r, topic)

    async def consume(
        self, topic: str, n: int, timeout_s: float, on_bodies: OnBodies, latest: bool = False,
        ready: asyncio.Event | None = None,
    ) -> int:  # fmt: skip
        deadline = time.monotonic() + timeout_s
        r = self._client(1)
        try:
            last: Any = b"0-0"
            if latest:
                tail = await r.xrevrange(topic, count=1)
                last = tail[0][0] if tail else b"0-0"
            if ready is not None:
                ready.set()
            got = 0
            while got < n and time.monotonic() < deadline:
                resp = await r.xread({topic: last}, count=1000, block=500 if latest else None)
                if not resp:
                    if not latest:
                        break  # from the start: everything stored has been read
                    continue
                entries = resp[0][1]
                last = entries[-1][0]
                got += len(entries)
                on_bodies([fields[b"b"] for _, fields in entries])
            return got
        finally:
            await r.aclose()


DRIVER = RedisDriver
