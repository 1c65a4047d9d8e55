"""NATS JetStream through nats-py: a file-storage stream per topic, ``js.publish`` per message
(each waits for its PubAck), ``publish_async`` of 64 then all 64 PubAcks for a batch, and an
ordered push consumer (ephemeral, no acks; deliver-all or deliver-new) for reading."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.drivers import IDLE_S, Driver, OnBodies, Publisher, wait_for_count


class _NatsPublisher(Publisher):
    def __init__(self, nc: Any, topic: str) -> None:
        self.nc, self.js, self.topic = nc, nc.jetstream(), topic

    async def send(self, body: bytes) -> None:
        await self.js.publish(self.topic, body, timeout=30)

    async def send_batch(self, bodies: list[bytes]) -> None:
        futs = [await self.js.publish_async(self.topic, b, wait_stall=30) for b in bodies]
        await asyncio.wait_for(asyncio.gather(*futs), 30)

    async def close(self) -> None:
        await self.nc.close()


class NatsDriver(Driver):
    batch_note = "64 publish_async, then their 64 PubAcks"

    async def _connect(self) -> Any:
        import nats

        return await nats.connect(self.endpoint["url"], connect_timeout=10, max_reconnect_attempts=0)

    async def create_topic(self, topic: str) -> None:
        from nats.js.api import StorageType, StreamConfig

        nc = await self._connect()
        try:
            await nc.jetstream().add_stream(StreamConfig(name=topic, subjects=[topic], storage=StorageType.FILE))
        finally:
            await nc.close()

    async def publisher(self, topic: str, batch: int = 1) -> Publisher:
        return _NatsPublisher(await self._connect(), topic)

    async def consume(
        self, topic: str, n: int, timeout_s: float, on_bodies: OnBodies, latest: bool = False,
        ready: asyncio.Event | None = None,
    ) -> int:  # fmt: skip
        from nats.js.api import DeliverPolicy

        nc = await self._connect()
        got = [0]
        done = asyncio.Event()

        async def cb(msg: Any) -> None:
            got[0] += 1
            on_bodies([msg.data])
            if got[0] >= n:
                done.set()

        try:
            sub = await nc.jetstream().subscribe(
                topic, cb=cb, ordered_consumer=True,
                deliver_policy=DeliverPolicy.NEW if latest else DeliverPolicy.ALL,
                pending_msgs_limit=1 << 20, pending_bytes_limit=1 << 30,
            )  # fmt: skip
            if ready is not None:
                ready.set()
            await wait_for_count(got, done, timeout_s, None if latest else IDLE_S)
            await sub.unsubscribe()
            return got[0]
        finally:
            await nc.close()


DRIVER = NatsDriver
