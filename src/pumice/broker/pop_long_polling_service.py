"""PopLongPollingService: POP_MESSAGE requests that found nothing wait for a message (RocketMQ 5's
PopLongPollingService).

A pop with ``pollTime`` > 0 that finds nothing is parked until ``bornTime + pollTime``; a
message dispatched to its topic, or to its group's POP retry topic, runs it again (once, not
parked again); at its deadline it is run again and answered POLLING_TIMEOUT when it still
finds nothing. The service is the store's MessageArrivingListener and passes every arrival on
to the next one (the pulls' hold service).

==============================  ==============================================================
bound                           when passed
==============================  ==============================================================
``maxPopPollingSize`` (100000)  parked pops in all: POLLING_FULL
``popPollingSize`` (1024)       parked pops of one topic, group and queue id: POLLING_FULL
``MAX_POLL_MS`` (30 s)          a longer pollTime waits 30 s (the clients' request timeout;
                                RocketMQ 5 takes it as sent)
==============================  ==============================================================
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel

if TYPE_CHECKING:
    from pumice.store.dispatch_request import DispatchRequest
    from pumice.store.message_arriving_listener import MessageArrivingListener

MAX_POLL_MS = 30_000
SCAN_INTERVAL_S = 0.1


@dataclass(slots=True, eq=False)
class PopRequest:
    channel: Channel
    request: RemotingCommand
    key: tuple[str, str, int]  # topic, group, queue id (as asked: -1 for every queue)
    deadline: float  # time.monotonic()


class PollingResult:
    POLLING_SUC = "POLLING_SUC"
    POLLING_FULL = "POLLING_FULL"
    POLLING_TIMEOUT = "POLLING_TIMEOUT"
    NOT_POLLING = "NOT_POLLING"


class PopLongPollingService:
    def __init__(
        self,
        wake: Callable[[PopRequest, bool], Coroutine[Any, Any, None]],
        next_listener: MessageArrivingListener | None,
        *,
        max_pop_polling_size: int = 100_000,
        pop_polling_size: int = 1024,
    ) -> None:
        self.wake = wake  # runs the pop again (parked again if allowed) and answers it
        self.next_listener = next_listener
        self.max_pop_polling_size = max_pop_polling_size
        self.pop_polling_size = pop_polling_size
        self.by_topic: dict[str, list[PopRequest]] = {}  # topic (or POP retry topic) -> parked pops
        self.count = 0
        self._per_key: dict[tuple[str, str, int], int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._task: asyncio.Task[None] | None = None
        self._parked: asyncio.Event | None = None
        self._running: set[asyncio.Task[None]] = set()

    def start(self) -> asyncio.Task[None]:
        """The deadline scan's task (its owner cancels it at shutdown)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._parked = asyncio.Event()
        self._task = self._loop.create_task(self._scan_loop())
        return self._task

    def polling(self, channel: Channel, request: RemotingCommand, topics: Sequence[str], group: str, queue_id: int,
                born_time: int, poll_time: int) -> str:  # fmt: skip
        """Park the pop (its topic and retry topics in ``topics``) until ``bornTime + pollTime``."""
        if poll_time <= 0 or self._task is None or self._task.done():
            return PollingResult.NOT_POLLING
        if self.count >= self.max_pop_polling_size:
            return PollingResult.POLLING_FULL
        remaining_ms = born_time + poll_time - int(time.time() * 1000)
        if remaining_ms <= 0:
            return PollingResult.POLLING_TIMEOUT
        key = (topics[0], group, queue_id)
        if self._per_key.get(key, 0) > self.pop_polling_size:
            return PollingResult.POLLING_FULL
        pr = PopRequest(channel, request, key, time.monotonic() + min(remaining_ms, MAX_POLL_MS) / 1000)
        for t in topics:
            self.by_topic.setdefault(t, []).append(pr)
        self._per_key[key] = self._per_key.get(key, 0) + 1
        self.count += 1
        if self._parked is not None:
            self._parked.set()
        return PollingResult.POLLING_SUC

    def _unpark(self, pr: PopRequest) -> bool:
        """Remove ``pr`` from every topic it waits on; False if it was already gone."""
        found = False
        for t, prs in list(self.by_topic.items()):
            if pr in prs:
                found = True
                prs.remove(pr)
                if not prs:
                    del self.by_topic[t]
        if found:
            self.count -= 1
            n = self._per_key.get(pr.key, 1) - 1
            if n > 0:
                self._per_key[pr.key] = n
            else:
                self._per_key.pop(pr.key, None)
        return found

    def _run(self, pr: PopRequest, may_park: bool) -> None:
        if not self._unpark(pr) or pr.channel.closed:
            return
        assert self._loop is not None
        task = self._loop.create_task(self.wake(pr, may_park))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def notify_message_arriving(self, topic: str) -> None:
        for pr in list(self.by_topic.get(topic, ())):
            self._run(pr, True)

    # -- MessageArrivingListener -----------------------------------------------------------

    def arriving(self, topic: str, queue_id: int, logic_offset: int, tags_code: int, msg_store_time: int,
                 filter_bit_map: bytes | None, properties: dict[str, str] | None) -> None:  # fmt: skip
        if self.next_listener is not None:
            self.next_listener.arriving(topic, queue_id, logic_offset, tags_code, msg_store_time, filter_bit_map,
                                        properties)  # fmt: skip
        self._arrived(topic)

    def arriving_batch(self, requests: Sequence[DispatchRequest]) -> None:
        if self.next_listener is not None:
            self.next_listener.arriving_batch(requests)
        if self.by_topic:
            for t in {r.topic for r in requests if r.topic in self.by_topic}:
                self._arrived(t)

    def _arrived(self, topic: str) -> None:
        if topic not in self.by_topic or self._loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self.notify_message_arriving(topic)
        else:
            self._loop.call_soon_threadsafe(self.notify_message_arriving, topic)

    async def _scan_loop(self) -> None:
        assert self._parked is not None
        while True:
            if not self.count:
                self._parked.clear()
                await self._parked.wait()
            await asyncio.sleep(SCAN_INTERVAL_S)
            now = time.monotonic()
            due = {
                id(pr): pr for prs in self.by_topic.values() for pr in prs if now >= pr.deadline or pr.channel.closed
            }
            for pr in due.values():
                self._run(pr, False)
