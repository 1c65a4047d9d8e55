"""Client drivers: one module per broker, each with the same small asyncio interface
(``Driver``, ``Publisher``) that bench/peers/workloads.py drives, and ``driver_for(name,
endpoint)``. Every call that waits on the network is bounded in time."""

from __future__ import annotations

import asyncio
import importlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

OnBodies = Callable[[list[bytes]], None]
IDLE_S = 3.0  # a push consumer reading from the start stops after this long without a message
QUEUES = 4  # queues / partitions per topic where the broker has them (RocketMQ, Kafka)


class Publisher(ABC):
    """One producer connection (client instance). ``send`` returns once the broker acknowledged
    the message; ``send_batch`` once it acknowledged all of them."""

    @abstractmethod
    async def send(self, body: bytes) -> None: ...

    @abstractmethod
    async def send_batch(self, bodies: list[bytes]) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...


class Driver(ABC):
    """The client side of one broker."""

    name = ""
    batch_note = ""  # how a batch of 64 is sent

    def __init__(self, endpoint: dict[str, Any]) -> None:
        self.endpoint = endpoint

    @abstractmethod
    async def create_topic(self, topic: str) -> None: ...

    @abstractmethod
    async def publisher(self, topic: str, batch: int = 1) -> Publisher:
        """A started publisher for ``topic``; ``batch`` is the batch size it will be used with."""

    @abstractmethod
    async def consume(
        self, topic: str, n: int, timeout_s: float, on_bodies: OnBodies, latest: bool = False,
        ready: asyncio.Event | None = None,
    ) -> int:  # fmt: skip
        """Read ``topic`` with one consumer, from its first message (``latest``: only messages
        stored after ``ready`` is set), calling ``on_bodies`` with each batch of bodies received,
        until ``n`` messages or ``timeout_s`` (from the start: also when all that was stored has
        been read, or nothing came for ``IDLE_S``); the count read."""


async def wait_for_count(got: list[int], done: asyncio.Event, timeout_s: float, idle_s: float | None) -> None:
    """For push consumers: until ``done`` is set, ``timeout_s`` passed, or (with ``idle_s``) the
    count ``got[0]`` did not move for ``idle_s``."""
    deadline = time.monotonic() + timeout_s
    last, last_t = got[0], time.monotonic()
    while not done.is_set() and time.monotonic() < deadline:
        try:
            await asyncio.wait_for(done.wait(), min(0.25, max(0.0, deadline - time.monotonic())))
        except TimeoutError:
            pass
        if got[0] != last:
            last, last_t = got[0], time.monotonic()
        elif idle_s is not None and time.monotonic() - last_t > idle_s:
            return


_MODULES = {
    "pumice": "rocketmq_protocol",
    "pumice-pure": "rocketmq_protocol",
    "rocketmq": "rocketmq_protocol",
    "kafka": "kafka",
    "redis": "redis_streams",
    "nats": "nats_jetstream",
    "rabbitmq": "rabbitmq_streams",
}


def describe(name: str) -> str:
    """The driver module's docstring, on one line: how that broker's client sends and reads."""
    doc = importlib.import_module(f"bench.peers.drivers.{_MODULES[name]}").__doc__ or ""
    return " ".join(doc.split())


def driver_for(name: str, endpoint: dict[str, Any]) -> Driver:
    module = importlib.import_module(f"bench.peers.drivers.{_MODULES[name]}")
    driver: Driver = module.DRIVER(endpoint)
    driver.name = name
    return driver
