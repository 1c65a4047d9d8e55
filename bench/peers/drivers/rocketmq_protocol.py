"""Pumice's own client (pumice.client) for both RocketMQ-protocol brokers: Pumice and Apache
RocketMQ 4.9.7. ``AsyncProducer.send`` / ``send_batch`` (one SEND_BATCH_MESSAGE), and an
``AsyncPullConsumer`` with one pull in flight per queue (32 messages a pull, the broker's cap;
long polling for the latency consumer)."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from bench.peers.drivers import QUEUES, Driver, OnBodies, Publisher

_ids = itertools.count()


class _RocketPublisher(Publisher):
    def __init__(self, producer: Any, topic: str) -> None:
        from pumice.client import Message, SendStatus

        self.p, self.topic, self.Message, self.ok = producer, topic, Message, SendStatus.SEND_OK

    async def send(self, body: bytes) -> None:
        r = await self.p.send(self.Message(self.topic, body))
        if r.send_status != self.ok:
            raise RuntimeError(f"send status {r.send_status}")

    async def send_batch(self, bodies: list[bytes]) -> None:
        r = await self.p.send_batch([self.Message(self.topic, b) for b in bodies])
        if r.send_status != self.ok:
            raise RuntimeError(f"send status {r.send_status}")

    async def close(self) -> None:
        await self.p.shutdown()


class RocketMQProtocolDriver(Driver):
    batch_note = "send_batch of 64 (one SEND_BATCH_MESSAGE)"

    async def create_topic(self, topic: str) -> None:
        from pumice.client import AsyncMQAdmin

        ns = self.endpoint["namesrv"]
        deadline = time.monotonic() + 60
        async with AsyncMQAdmin(ns) as admin:
            while True:  # the broker's first registration may still be on its way
                try:
                    await admin.create_topic(
                        topic, cluster=self.endpoint["cluster"], read_queue_nums=QUEUES, write_queue_nums=QUEUES
                    )
                    await admin.topic_route(topic)
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)

    async def publisher(self, topic: str, batch: int = 1) -> Publisher:
        from pumice.client import AsyncProducer

        i = next(_ids)
        p = AsyncProducer(f"BenchPG{i}", self.endpoint["namesrv"], instance_name=f"bench{i}", send_msg_timeout_s=10)
        await p.start()
        return _RocketPublisher(p, topic)

    async def consume(
        self, topic: str, n: int, timeout_s: float, on_bodies: OnBodies, latest: bool = False,
        ready: asyncio.Event | None = None,
    ) -> int:  # fmt: skip
        from pumice.client import AsyncPullConsumer, PullStatus

        deadline = time.monotonic() + timeout_s
        got = [0]
        done = asyncio.Event()
        c = AsyncPullConsumer(f"BenchCG{next(_ids)}", self.endpoint["namesrv"], pull_suspend_s=2.0)
        await c.start()
        try:
            mqs = await c.fetch_subscribe_message_queues(topic)
            ends = [await c.max_offset(mq) for mq in mqs]  # from the start: what is stored now
            starts = ends if latest else [0] * len(mqs)
            if ready is not None:
                ready.set()
            left = [len(mqs)]

            async def one(mq: Any, offset: int, end: int) -> None:
                while got[0] < n and time.monotonic() < deadline and (latest or offset < end):
                    r = await c.pull(mq, "*", offset, 32, block=latest)
                    if r.status == PullStatus.FOUND:
                        got[0] += len(r.msgs)
                        on_bodies([m.body for m in r.msgs])
                        if got[0] >= n:
                            done.set()
                    elif r.status != PullStatus.NO_NEW_MSG and not latest:
                        raise RuntimeError(f"pull of {mq}: {r.status}")
                    offset = r.next_begin_offset
                left[0] -= 1
                if not left[0]:
                    done.set()

            tasks = [asyncio.ensure_future(one(mq, s, e)) for mq, s, e in zip(mqs, starts, ends, strict=True)]
            try:
                await asyncio.wait_for(done.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                pass
            for t in tasks:
                t.cancel()
            for r in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(r, Exception):
                    raise r
            return got[0]
        finally:
            await c.shutdown()


DRIVER = RocketMQProtocolDriver
