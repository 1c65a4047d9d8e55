"""PullRequestHoldService: long polling for pulls that found nothing.

A PULL_MESSAGE with the SUSPEND flag that finds no new message is parked under its
(topic, queueId) until ``suspendTimeoutMillis`` (or ``shortPollingTimeMills`` when long
polling is off). Dispatch tells the store's message-arrival listener about every record.
On the dispatch thread, arrivals are queued and the event loop is woken once per batch; when
the loop dispatched the messages itself (after its own puts), waiting pulls are woken at
once. A parked pull whose queue moved past its offset, with a message its
subscription matches, is run again (without suspending) and answered; one that times out is
run again too, and answers PULL_NOT_FOUND. A scan every 5 s (1 s without long polling)
catches anything missed.

Parked pulls are bounded per connection: each counts its request's strings and body plus
``PARKED_PULL_OVERHEAD`` against ``MAX_HELD_BYTES_PER_CHANNEL`` (``Channel.held_bytes``);
past it ``suspend_pull_request`` refuses (the processor answers SYSTEM_BUSY). An ordinary
pull counts about 1.7 KB, so a connection may park about 10,000 (a client process shares
one connection per broker for all its queues, one parked pull each).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pumice.broker.filter_api import SubscriptionData
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.store.dispatch_request import DispatchRequest

log = logging.getLogger(__name__)

# with long polling, every held pull is re-checked this often (RocketMQ: 5 s), arrivals or not
FULL_SCAN_INTERVAL_S = 5.0
MAX_HELD_BYTES_PER_CHANNEL = 16 * 1024 * 1024
PARKED_PULL_OVERHEAD = 1536  # the request, PullRequest and subscription objects (~1.7 KB measured with strings)


@dataclass(eq=False)
class PullRequest:
    channel: Channel
    request: RemotingCommand
    pull_from_this_offset: int
    subscription: SubscriptionData
    deadline: float  # time.monotonic()
    cost: int = 0  # counted in channel.held_bytes while parked


def parked_cost(request: RemotingCommand) -> int:
    """What a parked request keeps alive, roughly: its header strings, its body, the objects."""
    n = PARKED_PULL_OVERHEAD + len(request.body)
    for k, v in request.ext_fields.items():
        n += len(k) + (len(v) if type(v) is str else 8)
    return n


class PullRequestHoldService:
    def __init__(
        self,
        execute_when_wakeup: Callable[[PullRequest], None],
        max_offset: Callable[[str, int], int],
        *,
        long_polling_enable: bool = True,
        short_polling_time_mills: int = 1000,
        max_held_bytes_per_channel: int = MAX_HELD_BYTES_PER_CHANNEL,
    ) -> None:
        self.execute_when_wakeup = execute_when_wakeup
        self.max_held_bytes_per_channel = max_held_bytes_per_channel
        self.max_offset = max_offset
        self.long_polling_enable = long_polling_enable
        self.short_polling_time_mills = short_polling_time_mills
        self.pull_request_table: dict[tuple[str, int], list[PullRequest]] = {}
        self._arrivals: collections.deque[tuple[str, int, int, int]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._task: asyncio.Task[None] | None = None
        self._parked: asyncio.Event | None = None  # set when a pull parks in an empty table

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._parked = asyncio.Event()
        self._loop_thread = threading.get_ident()
        self._task = self._loop.create_task(self._scan_loop())

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def suspend_pull_request(self, topic: str, queue_id: int, request: PullRequest) -> bool:
        """Park ``request``; False (not parked) when its connection already holds its share."""
        ch = request.channel
        cost = request.cost or parked_cost(request.request)
        if ch.held_bytes + cost > self.max_held_bytes_per_channel:
            return False
        request.cost = cost
        ch.held += 1
        ch.held_bytes += cost
        if not self.pull_request_table and self._parked is not None:
            self._parked.set()
        self.pull_request_table.setdefault((topic, queue_id), []).append(request)
        return True

    # -- MessageArrivingListener (called on the dispatch thread) --------------------------

    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        msg_store_time: int,
        filter_bit_map: bytes | None,
        properties: dict[str, str] | None,
    ) -> None:
        if (topic, queue_id) not in self.pull_request_table or self._loop is None:
            return  # nobody waits on this queue (a plain read of a dict: fine across threads)
        if threading.get_ident() == self._loop_thread:  # dispatched on the loop itself: wake now
            self.notify_message_arriving(topic, queue_id, logic_offset, tags_code)
            return
        first = not self._arrivals
        self._arrivals.append((topic, queue_id, logic_offset, tags_code))
        if first:
            self._loop.call_soon_threadsafe(self._drain_arrivals)

    def arriving_batch(self, requests: Sequence[DispatchRequest]) -> None:
        table = self.pull_request_table
        if not table:
            return  # nobody waits: the common case under load, with no call per record
        for r in requests:
            if (r.topic, r.queue_id) in table:
                self.arriving(r.topic, r.queue_id, r.consume_queue_offset + 1, r.tags_code, 0, None, None)

    def _drain_arrivals(self) -> None:
        arrivals = self._arrivals
        while arrivals:
            topic, queue_id, max_offset, code = arrivals.popleft()
            self.notify_message_arriving(topic, queue_id, max_offset, code)

    # -- wake-up -------------------------------------------------------------------------

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        key = (topic, queue_id)
        held = self.pull_request_table.pop(key, None)
        if not held:
            return
        keep: list[PullRequest] = []
        now = time.monotonic()
        for pr in held:
            newest = max_offset
            if newest <= pr.pull_from_this_offset:
                newest = self.max_offset(topic, queue_id)
            if newest > pr.pull_from_this_offset and (tags_code is None or pr.subscription.is_matched(tags_code)):
                self._run(pr)
            elif now >= pr.deadline or pr.channel.closed:
                self._run(pr)
            else:
                keep.append(pr)
        if keep:
            self.pull_request_table.setdefault(key, []).extend(keep)

    def _run(self, pr: PullRequest) -> None:
        ch = pr.channel
        ch.held -= 1
        ch.held_bytes -= pr.cost
        if ch.closed:
            return
        assert self._loop is not None
        # a callback of its own (not a task: the pull is synchronous), after the dispatch that woke it
        self._loop.call_soon(self.execute_when_wakeup, pr)

    async def _scan_loop(self) -> None:
        interval = FULL_SCAN_INTERVAL_S if self.long_polling_enable else self.short_polling_time_mills / 1000
        # deadlines are checked more often than the full scan, so a timeout is answered on time
        tick = min(interval, 0.1)
        last_scan = time.monotonic()
        while True:
            if not self.pull_request_table and self._parked is not None:
                self._parked.clear()  # nothing to time out: sleep until a pull parks
                await self._parked.wait()
            await asyncio.sleep(tick)
            now = time.monotonic()
            full = now - last_scan >= interval
            if full:
                last_scan = now
            for key in list(self.pull_request_table):
                prs = self.pull_request_table.get(key, [])
                if full or any(now >= pr.deadline for pr in prs):
                    self.notify_message_arriving(key[0], key[1], self.max_offset(*key))
