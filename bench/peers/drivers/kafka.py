"""Kafka through aiokafka: ``AIOKafkaProducer`` with acks=all (one ``send`` per message, which
the client batches per partition while requests are in flight; an explicit batch of 64 with
``create_batch``/``send_batch`` to one partition), and an ``AIOKafkaConsumer`` with no group,
assigned all partitions (fetch.max.wait.ms 10 ms for the latency consumer, see ``consume``)."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from bench.peers.drivers import QUEUES, Driver, OnBodies, Publisher

_rr = itertools.count()


class _KafkaPublisher(Publisher):
    def __init__(self, producer: Any, topic: str) -> None:
        self.p, self.topic = producer, topic

    async def send(self, body: bytes) -> None:
        fut = await self.p.send(self.topic, body)
        await fut

    async def send_batch(self, bodies: list[bytes]) -> None:
        batch = self.p.create_batch()
        for b in bodies:
            if batch.append(key=None, value=b, timestamp=None) is None:
                raise RuntimeError("the batch is full: raise max_batch_size")
        batch.close()
        fut = await self.p.send_batch(batch, self.topic, partition=next(_rr) % QUEUES)
        await fut

    async def close(self) -> None:
        await self.p.stop()


class KafkaDriver(Driver):
    batch_note = "create_batch/send_batch of 64 to one partition"

    async def create_topic(self, topic: str) -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=self.endpoint["bootstrap"], request_timeout_ms=30000)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=QUEUES, replication_factor=1)])
        finally:
            await admin.close()

    async def publisher(self, topic: str, batch: int = 1) -> Publisher:
        from aiokafka import AIOKafkaProducer

        kw: dict[str, Any] = {"max_batch_size": 256 * 1024} if batch > 1 else {}
        p = AIOKafkaProducer(bootstrap_servers=self.endpoint["bootstrap"], acks="all", linger_ms=0,
                             request_timeout_ms=30000, **kw)  # fmt: skip
        await p.start()
        return _KafkaPublisher(p, topic)

    async def consume(
        self, topic: str, n: int, timeout_s: float, on_bodies: OnBodies, latest: bool = False,
        ready: asyncio.Event | None = None,
    ) -> int:  # fmt: skip
        from aiokafka import AIOKafkaConsumer, TopicPartition

        deadline = time.monotonic() + timeout_s
        # the latency consumer: fetch.max.wait.ms 10 (default 500). aiokafka leaves a partition out of
        # the next fetch while its last records are undelivered, so new records of that partition can
        # wait for the fetch in flight for the others to expire: at 100 ms, p99 ~70-100 ms; at 10, ~11 ms
        c = AIOKafkaConsumer(bootstrap_servers=self.endpoint["bootstrap"], group_id=None, enable_auto_commit=False,
                             auto_offset_reset="latest" if latest else "earliest",
                             fetch_max_wait_ms=10 if latest else 500)  # fmt: skip
        await c.start()
        try:
            tps = [TopicPartition(topic, i) for i in range(QUEUES)]
            c.assign(tps)
            if latest:
                await c.seek_to_end(*tps)
            else:
                await c.seek_to_beginning(*tps)
            for tp in tps:
                await c.position(tp)
            ends = {} if latest else await c.end_offsets(tps)  # from the start: what is stored now
            if ready is not None:
                ready.set()
            got = 0
            while got < n and time.monotonic() < deadline:
                if ends:
                    positions = [await c.position(tp) for tp in tps]
                    if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                        break
                data = await c.getmany(timeout_ms=200, max_records=10000)
                for msgs in data.values():
                    got += len(msgs)
                    on_bodies([m.value for m in msgs])
            return got
        finally:
            await c.stop()


DRIVER = KafkaDriver
