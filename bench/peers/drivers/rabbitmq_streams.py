"""RabbitMQ streams through rstream: ``send_wait`` per message (waits for its publish confirm),
``send_batch`` of 64 with a confirm callback awaited for all 64, and a ``Consumer`` subscribed
from the first offset (or ``NEXT`` for the latency consumer)."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.drivers import IDLE_S, Driver, OnBodies, Publisher, wait_for_count

USER = {"username": "guest", "password": "guest"}


class _RabbitPublisher(Publisher):
    def __init__(self, p: Any, topic: str) -> None:
        self.p, self.topic = p, topic

    async def send(self, body: bytes) -> None:
        await self.p.send_wait(self.topic, body, timeout=30)

    async def send_batch(self, bodies: list[bytes]) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        left = [len(bodies)]

        def confirmed(status: Any) -> None:
            if not status.is_confirmed and not fut.done():
                fut.set_exception(RuntimeError(f"publish error {status.response_code}"))
            left[0] -= 1
            if left[0] == 0 and not fut.done():
                fut.set_result(None)

        await self.p.send_batch(self.topic, bodies, on_publish_confirm=confirmed)
        await asyncio.wait_for(fut, 30)

    async def close(self) -> None:
        await self.p.close()


class RabbitMQDriver(Driver):
    batch_note = "send_batch of 64, then their 64 confirms"

    def _producer(self) -> Any:
        from rstream import Producer

        return Producer(self.endpoint["host"], self.endpoint["port"], **USER)

    async def create_topic(self, topic: str) -> None:
        p = self._producer()
        await p.start()
        try:
            await p.create_stream(topic, exists_ok=True)
        finally:
            await p.close()

    async def publisher(self, topic: str, batch: int = 1) -> Publisher:
        p = self._producer()
        await p.start()
        return _RabbitPublisher(p, topic)

    async def consume(
        self, topic: str, n: int, timeout_s: float, on_bodies: OnBodies, latest: bool = False,
        ready: asyncio.Event | None = None,
    ) -> int:  # fmt: skip
        from rstream import Consumer, ConsumerOffsetSpecification, OffsetType

        c = Consumer(self.endpoint["host"], self.endpoint["port"], **USER)
        got = [0]
        done = asyncio.Event()

        def cb(body: bytes, ctx: Any) -> None:
            got[0] += 1
            on_bodies([body])
            if got[0] >= n:
                done.set()

        await c.start()
        try:
            spec = ConsumerOffsetSpecification(OffsetType.NEXT if latest else OffsetType.FIRST, None)
            await c.subscribe(topic, cb, offset_specification=spec, initial_credit=10)
            if ready is not None:
                ready.set()
            await wait_for_count(got, done, timeout_s, None if latest else IDLE_S)
            return got[0]
        finally:
            await c.close()


DRIVER = RabbitMQDriver
