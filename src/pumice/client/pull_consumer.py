"""Pull consumers: ``AsyncPullConsumer`` (pull by queue) and ``AsyncLitePullConsumer`` (poll),
with blocking twins ``PullConsumer`` and ``LitePullConsumer`` on a private background loop.

``AsyncPullConsumer.pull(mq, expression, offset, max_nums)`` sends one PULL_MESSAGE (sysFlag
SUBSCRIPTION, plus SUSPEND with ``block``) and returns a ``PullResult`` whose messages are
decoded, inflated (sysFlag bit 0) and filtered by tag string (the broker filters by tag hash,
which can collide), each with ``broker_name`` and the MIN_OFFSET / MAX_OFFSET properties set.
It also reads and writes the group's offsets on the broker (QUERY/UPDATE_CONSUMER_OFFSET).

``AsyncLitePullConsumer`` (CLUSTERING only):

* ``assign(mqs)``: exactly these queues; or ``subscribe(topic, expression)``: the group's
  queues are shared among its online members (``allocate.allocate_averagely``), re-balanced at
  start, every ``rebalance_interval_s`` (20 s) and when a broker says the members changed;
  the consumer heartbeats as CONSUME_ACTIVELY;
* one pull task per queue long-polls the broker (``pull_suspend_s``) and buffers batches of up
  to ``pull_batch_size`` messages, at most ``pull_threshold_for_queue`` messages per queue;
* ``poll(timeout_s)`` returns the next buffered batch (or [] after the timeout) and moves the
  queue's consumed offset past it;
* where a queue starts: its committed offset, else ``consume_from_where``: LAST (max offset),
  FIRST (min offset) or TIMESTAMP (``consume_timestamp_ms``; SEARCH_OFFSET_BY_TIMESTAMP). The
  broker answers 0 for a group without an offset on a queue that still holds its first
  message (RocketMQ's rule), so LAST only applies to queues that lost old messages;
* ``seek(mq, offset)`` / ``seek_to_begin`` / ``seek_to_end`` drop the queue's buffered
  messages and restart its pulls there;
* ``commit_sync()`` stores the consumed offsets with UPDATE_CONSUMER_OFFSET; with
  ``auto_commit`` (default) that also runs every ``auto_commit_interval_s`` (5 s), when queues
  are re-balanced away and at shutdown. ``commit(offsets)`` sets offsets first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pumice.client.allocate import allocate_averagely
from pumice.client.client_instance import MQClientInstance, consumer_data, own_instance
from pumice.client.exceptions import MQBrokerError, MQClientError
from pumice.client.message import (
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    decode_messages,
)
from pumice.client.subscription import MessageSelector, SubscriptionData, build_subscription
from pumice.client.sync_loop import SyncClient
from pumice.common.mix_all import DEFAULT_CONSUMER_GROUP
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)


class ConsumeFromWhere(Enum):
    LAST = "CONSUME_FROM_LAST_OFFSET"
    FIRST = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


def process_pull_result(result: PullResult, mq: MessageQueue, subscription: SubscriptionData) -> PullResult:
    """Decode ``result.raw_body`` into ``result.msgs``: inflate, filter by tag, annotate."""
    if result.status != PullStatus.FOUND or not result.raw_body:
        return result
    offsets = {PROPERTY_MIN_OFFSET: str(result.min_offset), PROPERTY_MAX_OFFSET: str(result.max_offset)}
    msgs = decode_messages(result.raw_body, broker_name=mq.broker_name, extra_properties=offsets)
    if not subscription.matches_all:
        msgs = [m for m in msgs if subscription.matches(m.tags)]
    result.msgs = msgs
    return result


class AsyncPullConsumer:
    """Pull by queue and offset; offsets and queue metadata of ``group`` on the brokers."""

    def __init__(
        self,
        group: str = DEFAULT_CONSUMER_GROUP,
        namesrv_addr: str = "127.0.0.1:9876",
        *,
        client_instance: MQClientInstance | None = None,
        instance_name: str | None = None,
        pull_suspend_s: float = 20.0,
        pull_timeout_s: float = 10.0,
        access_key: str | None = None,
        secret_key: str | None = None,
        use_tls: bool | ssl.SSLContext = False,
    ) -> None:
        self.group = group
        self.namesrv_addr = namesrv_addr
        self.pull_suspend_s = pull_suspend_s
        self.pull_timeout_s = pull_timeout_s
        self._owns_instance = client_instance is None
        self.instance = own_instance(
            client_instance,
            namesrv_addr,
            instance_name=instance_name,
            access_key=access_key,
            secret_key=secret_key,
            use_tls=use_tls,
        )
        self.started = False

    @property
    def api(self) -> Any:
        return self.instance.api

    async def start(self) -> None:
        if not self.started:
            await self.instance.start()
            self.started = True

    async def shutdown(self) -> None:
        if self.started:
            self.started = False
            if self._owns_instance:
                await self.instance.shutdown()

    async def __aenter__(self) -> Any:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted (MQBrokerError TOPIC_NOT_EXIST if it has no route)."""
        return await self.instance.subscribe_queues(topic, refresh=True)

    async def pull(
        self,
        mq: MessageQueue,
        sub_expression: str | SubscriptionData = "*",
        offset: int = 0,
        max_nums: int = 32,
        *,
        block: bool = False,
        timeout_s: float | None = None,
        commit_offset: int | None = None,
    ) -> PullResult:
        """One pull from ``offset``. With ``block`` the broker holds the request up to
        ``pull_suspend_s`` while no message is there; ``commit_offset`` also stores that offset."""
        if offset < 0:
            raise MQClientError(f"offset must not be negative: {offset}")
        if max_nums <= 0:
            raise MQClientError(f"max_nums must be positive: {max_nums}")
        sub = (
            sub_expression
            if isinstance(sub_expression, SubscriptionData)
            else build_subscription(mq.topic, sub_expression)
        )
        if timeout_s is None:
            timeout_s = self.pull_suspend_s + self.pull_timeout_s if block else self.pull_timeout_s
        result = await self.instance.pull_kernel(
            mq,
            sub,
            group=self.group,
            offset=offset,
            max_nums=max_nums,
            commit_offset=commit_offset if commit_offset is not None and commit_offset >= 0 else None,
            suspend_ms=int(self.pull_suspend_s * 1000) if block else None,
            timeout_s=timeout_s,
        )
        return process_pull_result(result, mq, sub)

    async def fetch_consume_offset(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq``, or -1 if it has none."""
        addr = await self.instance.broker_addr(mq)
        try:
            return int(await self.api.query_consumer_offset(addr, self.group, mq.topic, mq.queue_id))
        except MQBrokerError as e:
            if e.code == ResponseCode.QUERY_NOT_FOUND:
                return -1
            raise

    async def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        addr = await self.instance.broker_addr(mq)
        await self.api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, offset)

    async def min_offset(self, mq: MessageQueue) -> int:
        return int(await self.api.get_min_offset(await self.instance.broker_addr(mq), mq.topic, mq.queue_id))

    async def max_offset(self, mq: MessageQueue) -> int:
        return int(await self.api.get_max_offset(await self.instance.broker_addr(mq), mq.topic, mq.queue_id))

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        addr = await self.instance.broker_addr(mq)
        return int(await self.api.search_offset(addr, mq.topic, mq.queue_id, timestamp_ms))

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        addr = await self.instance.broker_addr(mq)
        return int(await self.api.get_earliest_msg_store_time(addr, mq.topic, mq.queue_id))

    async def send_message_back(self, msg: MessageExt, delay_level: int = 0, max_reconsume_times: int = 16) -> None:
        """Give a message back for redelivery through ``%RETRY%<group>`` (delay level 0: by
        reconsume count; negative: straight to the DLQ)."""
        if msg.broker_name is None:
            raise MQClientError("the message has no broker_name (was it pulled by this client?)")
        addr = await self.instance.broker_addr(MessageQueue(msg.topic, msg.broker_name, msg.queue_id))
        await self.api.consumer_send_message_back(addr, msg, self.group, delay_level, max_reconsume_times)


@dataclass
class _QueueState:
    mq: MessageQueue
    pull_offset: int
    consume_offset: int
    committed_offset: int = -1
    generation: int = 0
    buffered: int = 0
    paused: bool = False
    task: asyncio.Task[None] | None = None


@dataclass
class _Batch:
    mq: MessageQueue
    generation: int
    msgs: list[MessageExt] = field(default_factory=list)


class AsyncLitePullConsumer(AsyncPullConsumer):
    """RocketMQ's DefaultLitePullConsumer for asyncio (see the module docstring)."""

    def __init__(
        self,
        group: str = DEFAULT_CONSUMER_GROUP,
        namesrv_addr: str = "127.0.0.1:9876",
        *,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST,
        consume_timestamp_ms: int | None = None,
        pull_batch_size: int = 10,
        pull_threshold_for_queue: int = 1000,
        poll_timeout_s: float = 5.0,
        auto_commit: bool = True,
        auto_commit_interval_s: float = 5.0,
        rebalance_interval_s: float = 20.0,
        pull_suspend_s: float = 5.0,
        pull_delay_on_error_s: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, pull_suspend_s=pull_suspend_s, **kwargs)
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.poll_timeout_s = poll_timeout_s
        self.auto_commit = auto_commit
        self.auto_commit_interval_s = auto_commit_interval_s
        self.rebalance_interval_s = rebalance_interval_s
        self.pull_delay_on_error_s = pull_delay_on_error_s
        self.subscriptions: dict[str, SubscriptionData] = {}
        self._assigned: list[MessageQueue] | None = None  # assign() mode when set
        self._queues: dict[MessageQueue, _QueueState] = {}
        self._buffer: asyncio.Queue[_Batch] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_lock: asyncio.Lock | None = None
        self._last_commit = time.monotonic()

    # -- set-up -----------------------------------------------------------------------------

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` (a TAG expression or a ``MessageSelector``) with queues shared among
        the group's members."""
        if self._assigned is not None:
            raise MQClientError("subscribe and assign cannot be mixed")
        self.subscriptions[topic] = build_subscription(topic, sub_expression)
        if self.started:
            self._kick_rebalance()

    async def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self.started:
            await self.rebalance()

    async def assign(self, mqs: Iterable[MessageQueue], sub_expression: str = "*") -> None:
        """Consume exactly ``mqs`` (no sharing with other members)."""
        if self.subscriptions and self._assigned is None:
            raise MQClientError("subscribe and assign cannot be mixed")
        self._assigned = sorted(set(mqs))
        for topic in {m.topic for m in self._assigned}:
            self.subscriptions.setdefault(topic, build_subscription(topic, sub_expression))
        if self.started:
            await self._update_assignment(self._assigned)

    def assignment(self) -> set[MessageQueue]:
        return set(self._queues)

    async def start(self) -> None:
        if self.started:
            return
        await super().start()
        self._buffer = asyncio.Queue()
        self._rebalance_lock = asyncio.Lock()
        if self._assigned is None:
            self.instance.register_consumer(self.group, self._consumer_data)
            self.instance.add_consumer_ids_changed_listener(self._on_ids_changed)
            for topic in self.subscriptions:
                await self.instance.get_topic_route(topic)
            await self.instance.send_heartbeat_to_all_brokers()
            await self.rebalance()
            self._tasks.append(asyncio.create_task(self._every(self.rebalance_interval_s, self.rebalance)))
        else:
            await self._update_assignment(self._assigned)
        if self.auto_commit:
            self._tasks.append(asyncio.create_task(self._every(self.auto_commit_interval_s, self.commit_sync)))

    async def shutdown(self) -> None:
        if not self.started:
            return
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self._update_assignment([])  # stops pulls and commits (auto_commit)
        if self._assigned is None:
            await self.instance.unregister_consumer(self.group)
        await super().shutdown()

    def _consumer_data(self) -> dict[str, Any]:
        return consumer_data(
            self.group,
            list(self.subscriptions.values()),
            "CONSUME_ACTIVELY",
            "CLUSTERING",
            self.consume_from_where.value,
        )

    async def _every(self, interval_s: float, job: Any) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except Exception as e:  # keep the periodic job alive
                log.warning("%s failed: %s", getattr(job, "__name__", job), e)

    # -- rebalance --------------------------------------------------------------------------

    def _on_ids_changed(self, group: str) -> None:
        if group == self.group:
            self._kick_rebalance()

    def _kick_rebalance(self) -> None:
        task = asyncio.ensure_future(self.rebalance())

        def done(t: asyncio.Future[Any]) -> None:
            if not t.cancelled() and t.exception() is not None:
                log.warning("rebalance failed: %s", t.exception())

        task.add_done_callback(done)

    async def rebalance(self) -> None:
        """Share the subscribed topics' queues among the group's members (subscribe mode)."""
        if self._assigned is not None or not self.started:
            return
        mine: list[MessageQueue] = []
        for topic in list(self.subscriptions):
            try:
                mqs = await self.instance.subscribe_queues(topic, refresh=True)
            except MQBrokerError as e:
                log.warning("no route for %s: %s", topic, e)
                continue
            try:
                cids = await self.instance.get_consumer_id_list(self.group, topic)
            except MQClientError as e:
                log.info("consumer list of %s unknown (%s): taking every queue", self.group, e)
                cids = []
            if self.instance.client_id not in cids:
                cids = [*cids, self.instance.client_id]
            mine += allocate_averagely(self.instance.client_id, mqs, cids)
        await self._update_assignment(mine)

    async def _update_assignment(self, mqs: list[MessageQueue]) -> None:
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            wanted = set(mqs)
            gone = [s for mq, s in self._queues.items() if mq not in wanted]
            for s in gone:
                await self._stop_queue(s)
            if gone and self.auto_commit:
                await self._commit_states(gone)
            for s in gone:
                del self._queues[s.mq]
            for mq in sorted(wanted - set(self._queues)):
                try:
                    offset = await self._initial_offset(mq)
                except MQClientError as e:
                    log.warning("cannot compute the start offset of %s: %s", mq, e)
                    continue
                s = _QueueState(mq, offset, offset)
                self._queues[mq] = s
                self._start_queue(s)
            if gone or wanted:
                log.info("%s consumes %s", self.group, ", ".join(map(str, sorted(self._queues))) or "nothing")

    async def _initial_offset(self, mq: MessageQueue) -> int:
        committed = await self.fetch_consume_offset(mq)
        if committed >= 0:
            return committed
        if self.consume_from_where is ConsumeFromWhere.FIRST:
            return await self.min_offset(mq)
        if self.consume_from_where is ConsumeFromWhere.TIMESTAMP:
            ts = self.consume_timestamp_ms if self.consume_timestamp_ms is not None else int(time.time() * 1000)
            return await self.search_offset(mq, ts)
        return await self.max_offset(mq)

    # -- pulling ----------------------------------------------------------------------------

    def _start_queue(self, s: _QueueState) -> None:
        s.task = asyncio.create_task(self._pull_loop(s))

    async def _stop_queue(self, s: _QueueState) -> None:
        s.generation += 1
        s.buffered = 0
        if s.task is not None:
            s.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await s.task
            s.task = None

    async def _pull_loop(self, s: _QueueState) -> None:
        assert self._buffer is not None
        sub = self.subscriptions.get(s.mq.topic) or build_subscription(s.mq.topic, "*")
        while True:
            if s.paused or s.buffered >= self.pull_threshold_for_queue:
                await asyncio.sleep(0.05)
                continue
            generation = s.generation
            try:
                res = await self.pull(s.mq, sub, s.pull_offset, self.pull_batch_size, block=True)
            except (MQClientError, ValueError) as e:
                log.info("pull %s at %d failed: %s", s.mq, s.pull_offset, e)
                await asyncio.sleep(self.pull_delay_on_error_s)
                continue
            if generation != s.generation:
                continue
            if res.status is PullStatus.FOUND and res.msgs:
                s.buffered += len(res.msgs)
                self._buffer.put_nowait(_Batch(s.mq, generation, res.msgs))
            elif res.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG) and s.buffered == 0:
                s.consume_offset = res.next_begin_offset  # everything up to here was filtered out
            elif res.status is PullStatus.OFFSET_ILLEGAL:
                log.warning("offset %d of %s is illegal; moving to %d", s.pull_offset, s.mq, res.next_begin_offset)
                if s.buffered == 0:
                    s.consume_offset = res.next_begin_offset
            s.pull_offset = res.next_begin_offset

    async def poll(self, timeout_s: float | None = None) -> list[MessageExt]:
        """The next batch of messages ([] when none came within the timeout)."""
        if not self.started or self._buffer is None:
            raise MQClientError("the consumer is not started")
        deadline = time.monotonic() + (self.poll_timeout_s if timeout_s is None else timeout_s)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            try:  # asyncio.timeout: 3.11's wait_for can swallow a cancel that meets a result
                async with asyncio.timeout(remaining):
                    batch = await self._buffer.get()
            except TimeoutError:
                return []
            s = self._queues.get(batch.mq)
            if s is None or s.generation != batch.generation:
                continue  # dropped by seek or rebalance
            s.buffered = max(s.buffered - len(batch.msgs), 0)
            s.consume_offset = batch.msgs[-1].queue_offset + 1
            if self.auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval_s:
                await self.commit_sync()
            return batch.msgs

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            if mq in self._queues:
                self._queues[mq].paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            if mq in self._queues:
                self._queues[mq].paused = False

    # -- positions --------------------------------------------------------------------------

    def _state(self, mq: MessageQueue) -> _QueueState:
        s = self._queues.get(mq)
        if s is None:
            raise MQClientError(f"{mq} is not assigned to this consumer")
        return s

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` on (between its min and max offsets)."""
        s = self._state(mq)
        lo, hi = await self.min_offset(mq), await self.max_offset(mq)
        if not lo <= offset <= hi:
            raise MQClientError(f"seek offset {offset} of {mq} is outside [{lo}, {hi}]")
        await self._stop_queue(s)
        s.pull_offset = s.consume_offset = offset
        self._start_queue(s)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.max_offset(mq))

    def consumed_offset(self, mq: MessageQueue) -> int:
        """The offset after the last message ``poll`` returned for ``mq`` (where it resumes)."""
        return self._state(mq).consume_offset

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored on the broker (-1 if none)."""
        return await self.fetch_consume_offset(mq)

    async def _commit_states(self, states: Iterable[_QueueState]) -> None:
        for s in states:
            if s.consume_offset >= 0 and s.consume_offset != s.committed_offset:
                try:
                    await self.update_consume_offset(s.mq, s.consume_offset)
                    s.committed_offset = s.consume_offset
                except MQClientError as e:
                    log.warning("commit of %s at %d failed: %s", s.mq, s.consume_offset, e)

    async def commit_sync(self) -> None:
        """Store the consumed offset of every assigned queue on its broker."""
        self._last_commit = time.monotonic()
        await self._commit_states(list(self._queues.values()))

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """``commit_sync``, after setting the consumed offsets given (assigned queues only)."""
        for mq, offset in (offsets or {}).items():
            self._state(mq).consume_offset = offset
        await self.commit_sync()


class PullConsumer(SyncClient):
    """Blocking ``AsyncPullConsumer`` (same constructor arguments; ``self.impl``)."""

    _impl_class: type[AsyncPullConsumer] = AsyncPullConsumer

    def __init__(self, group: str = DEFAULT_CONSUMER_GROUP, namesrv_addr: str = "127.0.0.1:9876", **kwargs: Any):
        super().__init__(f"pumice-consumer-{group}", lambda: self._impl_class(group, namesrv_addr, **kwargs))

    def shutdown_timeout_s(self) -> float:
        return 60.0

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self.impl.fetch_subscribe_message_queues(topic))

    def pull(
        self,
        mq: MessageQueue,
        sub_expression: str = "*",
        offset: int = 0,
        max_nums: int = 32,
        *,
        block: bool = False,
        timeout_s: float | None = None,
        commit_offset: int | None = None,
    ) -> PullResult:
        return self._run(
            self.impl.pull(
                mq, sub_expression, offset, max_nums, block=block, timeout_s=timeout_s, commit_offset=commit_offset
            )
        )

    def fetch_consume_offset(self, mq: MessageQueue) -> int:
        return self._run(self.impl.fetch_consume_offset(mq))

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self._run(self.impl.update_consume_offset(mq, offset))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._run(self.impl.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._run(self.impl.max_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self.impl.search_offset(mq, timestamp_ms))

    def send_message_back(self, msg: MessageExt, delay_level: int = 0, max_reconsume_times: int = 16) -> None:
        self._run(self.impl.send_message_back(msg, delay_level, max_reconsume_times))


class LitePullConsumer(PullConsumer):
    """Blocking ``AsyncLitePullConsumer`` (same constructor arguments; ``self.impl``)."""

    _impl_class = AsyncLitePullConsumer

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        self._call(self.impl.subscribe, topic, sub_expression)

    def unsubscribe(self, topic: str) -> None:
        self._run(self.impl.unsubscribe(topic))

    def assign(self, mqs: Iterable[MessageQueue], sub_expression: str = "*") -> None:
        self._run(self.impl.assign(list(mqs), sub_expression))

    def assignment(self) -> set[MessageQueue]:
        return set(self.impl.assignment())

    def poll(self, timeout_s: float | None = None) -> list[MessageExt]:
        return self._run(self.impl.poll(timeout_s))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self.impl.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self.impl.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self.impl.seek_to_end(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        self._call(self.impl.pause, list(mqs))

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        self._call(self.impl.resume, list(mqs))

    def consumed_offset(self, mq: MessageQueue) -> int:
        return self.impl.consumed_offset(mq)

    def committed(self, mq: MessageQueue) -> int:
        return self._run(self.impl.committed(mq))

    def commit_sync(self) -> None:
        self._run(self.impl.commit_sync())

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._run(self.impl.commit(offsets))
