"""Push consumers: ``AsyncPushConsumer`` (asyncio) and its blocking twin ``PushConsumer``.

RocketMQ's DefaultMQPushConsumer: the consumer pulls for you and calls a handler with the
messages; the handler answers ``ConsumeStatus.SUCCESS`` or ``RECONSUME_LATER`` (a raised
exception or ``None`` counts as RECONSUME_LATER)::

    c = AsyncPushConsumer("CG", "127.0.0.1:9876")
    c.subscribe("TopicA", "TagA || TagB")
    c.register_message_listener(handler)          # or register_message_listener_orderly
    await c.start()
    ...
    await c.shutdown()

``handler(msgs, context)``: ``msgs`` holds up to ``consume_message_batch_max_size`` (1)
messages of one queue, ``context`` is a ``ConsumeContext``. A coroutine function is awaited on
the consumer's loop; a plain function runs in a pool of ``consume_thread_count`` (20) threads.
At most ``consume_thread_count`` handler calls run at once.

How it works (Java's names in parentheses):

* message model: CLUSTERING (default) shares the queues of the subscribed topics among the
  group's members and keeps offsets on the brokers (``RemoteBrokerOffsetStore``); the group's
  retry topic ``%RETRY%<group>`` is subscribed automatically. BROADCASTING gives every member
  every queue and keeps offsets in a local JSON file (``LocalFileOffsetStore``;
  ``offset_store_path``, default ``~/.pumice/offsets/<clientId>/<group>/offsets.json``).
* rebalance (RebalancePushImpl): at start, every ``rebalance_interval_s`` (20 s) and when a
  broker sends NOTIFY_CONSUMER_IDS_CHANGED, each subscribed topic's queues are divided with
  ``allocate_strategy(group, client_id, mqs, cids)`` (default AllocateMessageQueueAveragely).
  A queue taken away stops being pulled, its offset is stored, and (orderly) it is unlocked.
  A round that could not see a route or the member list keeps the queues it has and is
  retried after 1 s. A queue whose pulling stopped (its task ended, or no pull round for
  120 s, PULL_MAX_IDLE_TIME) is dropped and taken again from its stored offset.
* pulling (PullMessageService): one task per queue long-polls the broker (PULL_MESSAGE with
  the SUSPEND flag, ``pull_suspend_s`` 15 s held by the broker — brokerSuspendMaxTimeMillis —
  and ``pull_timeout_when_suspend_s`` 30 s for the answer, which must be longer), sending the
  queue's in-memory offset as commitOffset (CLUSTERING). Bodies are inflated and tags filtered
  again on the client (the broker filters by hash code). Flow control: with more than
  ``pull_threshold_for_queue`` (1000) messages or ``pull_threshold_size_for_queue_mib``
  (100 MiB) cached for a queue, or (concurrent) an offset span over
  ``consume_concurrently_max_span`` (2000), the next pull waits ``pull_delay_on_flow_control_s``
  (50 ms) instead. Errors wait ``pull_delay_on_error_s`` (3 s).
* offsets (``process_queue.ProcessQueue``): the offset stored for a queue is the smallest one
  still in flight, so a crash never skips an unfinished message; they are written every
  ``persist_consumer_offset_interval_s`` (5 s), when a queue is dropped and at shutdown.
  Where a queue without an offset starts: ``consume_from_where`` LAST (max offset; retry
  queues from 0), FIRST (min offset) or TIMESTAMP (``consume_timestamp_ms``).
* concurrent consumption (ConsumeMessageConcurrentlyService): RECONSUME_LATER sends each
  message back (CONSUMER_SEND_MSG_BACK, delay level ``context.delay_level_when_next_consume``,
  0 = the broker's 3 + reconsumeTimes; after ``max_reconsume_times``, 16, the broker moves it to
  ``%DLQ%<group>``); when the send-back fails the message is sent to ``%RETRY%<group>`` by an
  inner producer instead (as Java's client does, with RECONSUME_TIME and MAX_RECONSUME_TIMES
  so the broker can choose the DLQ); when that fails too it is consumed again locally after
  ``consume_retry_local_delay_s`` (5 s) with reconsume_times + 1, and holds its queue's offset
  meanwhile. BROADCASTING drops failed messages (as Java does).
* orderly consumption (ConsumeMessageOrderlyService, ``register_message_listener_orderly``):
  in CLUSTERING a queue is locked on its broker (LOCK_BATCH_MQ) before it is pulled, locks are
  renewed every ``lock_interval_s`` (20 s) and count as lost after 30 s without renewal;
  dropped queues and, at shutdown, all queues are unlocked (UNLOCK_BATCH_MQ). One handler call
  at a time per queue, in offset order. RECONSUME_LATER (= SUSPEND_CURRENT_QUEUE_A_MOMENT)
  suspends the queue for ``context.suspend_current_queue_time_s`` (1 s) and gives the same
  messages again with reconsume_times + 1; once a message reached ``max_reconsume_times``
  (unlimited by default for orderly) it is sent to the DLQ (send-back with delay level -1).
* shutdown: stop pulling and rebalancing, wait for running handlers (at most
  ``shutdown_await_s``, 10 s; handler calls not started yet are dropped, their messages come
  again), store offsets, unlock orderly queues, UNREGISTER_CLIENT (the broker tells the other
  members, which re-balance).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pumice.client.allocate import AllocateStrategy, allocate_message_queue_averagely
from pumice.client.client_instance import MQClientInstance, consumer_data
from pumice.client.exceptions import MQClientError
from pumice.client.message import (
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_TAGS,
    PROPERTY_WAIT,
    Message,
    MessageExt,
    MessageQueue,
    PullStatus,
)
from pumice.client.offset_store import LocalFileOffsetStore, OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from pumice.client.process_queue import ProcessQueue, flow_control
from pumice.client.producer import AsyncProducer
from pumice.client.pull_consumer import ConsumeFromWhere, process_pull_result
from pumice.client.subscription import MessageSelector, SubscriptionData, build_subscription
from pumice.client.sync_loop import SyncClient
from pumice.common.message_const import MessageConst
from pumice.common.mix_all import (
    CLIENT_INNER_PRODUCER_GROUP,
    DEFAULT_CONSUMER_GROUP,
    RETRY_GROUP_TOPIC_PREFIX,
    get_retry_topic,
)
from pumice.remoting.mq_version import version_desc
from pumice.remoting.remoting_command import DEFAULT_VERSION

log = logging.getLogger(__name__)

PROPERTY_RETRY_TOPIC = MessageConst.PROPERTY_RETRY_TOPIC
PROPERTY_RECONSUME_TIME = MessageConst.PROPERTY_RECONSUME_TIME
PROPERTY_MAX_RECONSUME_TIMES = MessageConst.PROPERTY_MAX_RECONSUME_TIMES
PROPERTY_ORIGIN_MESSAGE_ID = MessageConst.PROPERTY_ORIGIN_MESSAGE_ID
# set again by the producer or broker, or only meaningful on the pulled copy
_NOT_RESENT = frozenset({
    PROPERTY_DELAY, PROPERTY_WAIT, MessageConst.PROPERTY_CLUSTER, PROPERTY_MIN_OFFSET, PROPERTY_MAX_OFFSET,
    MessageConst.PROPERTY_TRANSACTION_PREPARED,
})  # fmt: skip
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0  # orderly: then give the worker to another queue
DEFAULT_MAX_RECONSUME_TIMES = 16
ORDERLY_UNLIMITED_RECONSUME_TIMES = 2**31 - 1


class MessageModel(Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeStatus(Enum):
    """A handler's answer. For orderly handlers RECONSUME_LATER is Java's
    SUSPEND_CURRENT_QUEUE_A_MOMENT (an alias here)."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "RECONSUME_LATER"


@dataclass(slots=True)
class ConsumeContext:
    """What a handler call is about; a handler may change the two knobs."""

    mq: MessageQueue
    orderly: bool = False
    delay_level_when_next_consume: int = 0  # concurrent: 0 = broker's 3 + reconsumeTimes, -1 = DLQ
    suspend_current_queue_time_s: float = 1.0  # orderly


MessageListener = Callable[[list[MessageExt], ConsumeContext], Any]


def reset_retry_topic(msgs: Iterable[MessageExt], group: str) -> None:
    """Messages from ``%RETRY%<group>`` show their original topic (RETRY_TOPIC), as in Java."""
    rt = get_retry_topic(group)
    for m in msgs:
        if m.topic == rt:  # first: most messages are not retries, and their properties stay unread
            original = m.properties.get(PROPERTY_RETRY_TOPIC)
            if original:
                m.topic = original


class AsyncPushConsumer:
    """RocketMQ's DefaultMQPushConsumer for asyncio (see the module docstring)."""

    def __init__(
        self,
        group: str = DEFAULT_CONSUMER_GROUP,
        namesrv_addr: str = "127.0.0.1:9876",
        *,
        client_instance: MQClientInstance | None = None,
        instance_name: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateStrategy = allocate_message_queue_averagely,
        consume_thread_count: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        consume_concurrently_max_span: int = 2000,
        pull_delay_on_flow_control_s: float = 0.05,
        pull_delay_on_error_s: float = 3.0,
        pull_delay_on_lock_fail_s: float = 3.0,
        pull_suspend_s: float = 15.0,
        pull_timeout_when_suspend_s: float = 30.0,
        max_reconsume_times: int = -1,
        suspend_current_queue_time_s: float = 1.0,
        consume_retry_local_delay_s: float = 5.0,
        rebalance_interval_s: float = 20.0,
        lock_interval_s: float = 20.0,
        persist_consumer_offset_interval_s: float = 5.0,
        offset_store_path: str | Path | None = None,
        offset_store: OffsetStore | None = None,
        shutdown_await_s: float = 10.0,
        drop_wait_s: float = 5.0,
    ) -> None:
        if pull_timeout_when_suspend_s <= pull_suspend_s:
            raise MQClientError(
                f"pull_timeout_when_suspend_s ({pull_timeout_when_suspend_s}) must be longer than "
                f"pull_suspend_s ({pull_suspend_s}), the time the broker may hold a pull"
            )
        if consume_thread_count < 1 or not 1 <= consume_message_batch_max_size <= 1024 or pull_batch_size < 1:
            raise MQClientError("consume_thread_count, consume_message_batch_max_size (<= 1024), pull_batch_size > 0")
        self.group = group
        self.namesrv_addr = namesrv_addr
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate_strategy = allocate_strategy
        self.consume_thread_count = consume_thread_count
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue_mib = pull_threshold_size_for_queue_mib
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.pull_delay_on_flow_control_s = pull_delay_on_flow_control_s
        self.pull_delay_on_error_s = pull_delay_on_error_s
        self.pull_delay_on_lock_fail_s = pull_delay_on_lock_fail_s
        self.pull_suspend_s = pull_suspend_s
        self.pull_timeout_when_suspend_s = pull_timeout_when_suspend_s
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_time_s = suspend_current_queue_time_s
        self.consume_retry_local_delay_s = consume_retry_local_delay_s
        self.rebalance_interval_s = rebalance_interval_s
        self.lock_interval_s = lock_interval_s
        self.persist_consumer_offset_interval_s = persist_consumer_offset_interval_s
        self.offset_store_path = offset_store_path
        self.shutdown_await_s = shutdown_await_s
        self.drop_wait_s = drop_wait_s
        self._owns_instance = client_instance is None
        self.instance = client_instance or MQClientInstance(namesrv_addr, instance_name=instance_name)
        self.offset_store: OffsetStore | None = offset_store
        self.subscriptions: dict[str, SubscriptionData] = {}
        self._listener: MessageListener | None = None
        self._listener_is_async = False
        self.orderly = False
        self._pqs: dict[MessageQueue, ProcessQueue] = {}
        # a consume request: (messages, queue) for concurrent consumption, else a job to await
        self._requests: asyncio.Queue[tuple[list[MessageExt], ProcessQueue] | Callable[[], Awaitable[None]]] | None
        self._requests = None
        self._workers: list[asyncio.Task[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._later_handles: set[asyncio.TimerHandle] = set()
        self._spawned: set[asyncio.Task[Any]] = set()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._inner_producer: AsyncProducer | None = None  # started on the first failed send-back
        self._rebalance_lock: asyncio.Lock | None = None
        self._rebalance_wakeup: asyncio.Event | None = None
        self._active = 0  # handler calls running
        self._running = False
        self.started = False
        self._start_ms = 0  # when start() ran (ConsumerRunningInfo)
        self.stats = {"consumed_ok": 0, "consumed_failed": 0, "sent_back": 0, "send_back_failed": 0, "flow_control": 0}

    # -- set-up -----------------------------------------------------------------------------

    @property
    def clustering(self) -> bool:
        return self.message_model is MessageModel.CLUSTERING

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    @property
    def api(self) -> Any:
        return self.instance.api

    @property
    def effective_max_reconsume_times(self) -> int:
        if self.max_reconsume_times >= 0:
            return self.max_reconsume_times
        return ORDERLY_UNLIMITED_RECONSUME_TIMES if self.orderly else DEFAULT_MAX_RECONSUME_TIMES

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        """Consume ``topic``'s messages matching the TAG expression (``*``, ``a || b``), or a
        ``MessageSelector`` (``MessageSelector.by_sql(...)``: SQL92, evaluated by the broker)."""
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MQClientError("retry topics are subscribed automatically")
        self.subscriptions[topic] = build_subscription(topic, sub_expression)
        if self.started:
            self._kick_rebalance(heartbeat=True)

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self.started:
            self._kick_rebalance(heartbeat=True)

    def register_message_listener(self, listener: MessageListener, *, orderly: bool = False) -> None:
        """Set the handler (concurrent, or orderly with ``orderly=True``); before ``start``."""
        if self.started:
            raise MQClientError("register the message listener before start()")
        self._listener = listener
        self._listener_is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            getattr(listener, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        self.orderly = orderly

    def register_message_listener_orderly(self, listener: MessageListener) -> None:
        self.register_message_listener(listener, orderly=True)

    def assignment(self) -> set[MessageQueue]:
        """The queues this member consumes now (retry queues included)."""
        return set(self._pqs)

    def process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        return self._pqs.get(mq)

    def _consumer_data(self) -> dict[str, Any]:
        return consumer_data(
            self.group,
            list(self.subscriptions.values()),
            "CONSUME_PASSIVELY",
            self.message_model.value,
            self.consume_from_where.value,
        )

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self.started:
            return
        if self._listener is None:
            raise MQClientError("no message listener: call register_message_listener first")
        if not self.subscriptions:
            raise MQClientError("no subscription: call subscribe first")
        await self.instance.start()
        if self.clustering:
            self.subscriptions[get_retry_topic(self.group)] = build_subscription(get_retry_topic(self.group), "*")
        if self.offset_store is None:
            if self.clustering:
                self.offset_store = RemoteBrokerOffsetStore(self.instance, self.group)
            else:
                self.offset_store = LocalFileOffsetStore(self.group, self.client_id, self.offset_store_path)
        await self.offset_store.load()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.consume_thread_count, thread_name_prefix=f"pumice-consume-{self.group}"
        )
        self._requests = asyncio.Queue()
        self._rebalance_lock = asyncio.Lock()
        self._rebalance_wakeup = asyncio.Event()
        self.instance.register_consumer(self.group, self._consumer_data, self)
        self._start_ms = int(time.time() * 1000)
        self.instance.add_consumer_ids_changed_listener(self._on_ids_changed)
        for topic in self.subscriptions:
            try:
                await self.instance.get_topic_route(topic)
            except MQClientError as e:
                log.info("no route for %s yet: %s", topic, e)
        await self.instance.send_heartbeat_to_all_brokers()
        self._running = True
        self.started = True
        self._workers = [asyncio.create_task(self._worker()) for _ in range(self.consume_thread_count)]
        self._tasks = [
            asyncio.create_task(self._rebalance_loop()),
            asyncio.create_task(self._every(self.persist_consumer_offset_interval_s, self.persist_offsets)),
        ]
        if self.orderly and self.clustering:
            self._tasks.append(asyncio.create_task(self._every(self.lock_interval_s, self.lock_all)))
        self._rebalance_wakeup.set()  # the first rebalance, at once

    async def shutdown(self) -> None:
        """Stop pulling, wait for running handlers (bounded), store offsets, unlock, unregister."""
        if not self.started:
            return
        self._running = False
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:  # a rebalance in progress finishes first (no half-dropped queue)
            await _cancel_all(self._tasks)
        await _cancel_all([pq.pull_task for pq in self._pqs.values() if pq.pull_task is not None])
        for h in self._later_handles:
            h.cancel()
        self._later_handles.clear()
        try:
            async with asyncio.timeout(self.shutdown_await_s):
                while self._active:  # polled: a per-call idle Event costs every call, this only shutdown
                    await asyncio.sleep(0.01)
        except TimeoutError:
            log.warning(
                "%d handler calls of %s still running after %ss", self._active, self.group, self.shutdown_await_s
            )
        await _cancel_all([*self._workers, *self._spawned])
        self._workers.clear()
        assert self.offset_store is not None
        await self.offset_store.persist_all(list(self._pqs))
        if self.orderly and self.clustering:
            await self._unlock(list(self._pqs))
        for pq in self._pqs.values():
            pq.dropped = True
        self._pqs.clear()
        await self.instance.unregister_consumer(self.group)
        if self._inner_producer is not None:
            await self._inner_producer.shutdown()
            self._inner_producer = None
        if self._owns_instance:
            await self.instance.shutdown()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self.started = False

    async def __aenter__(self) -> AsyncPushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def _every(self, interval_s: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except Exception as e:  # keep the periodic job alive
                log.warning("%s of %s failed: %s", getattr(job, "__name__", job), self.group, e)

    def _later(self, delay_s: float, fn: Callable[[], None]) -> None:
        if not self._running:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._later_handles.discard(handle)
            if self._running:
                fn()

        handle = loop.call_later(delay_s, fire)
        self._later_handles.add(handle)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    # -- rebalance --------------------------------------------------------------------------

    def _on_ids_changed(self, group: str) -> None:
        if group == self.group and self._running:
            self._kick_rebalance()

    def _kick_rebalance(self, heartbeat: bool = False) -> None:
        if heartbeat:
            self._spawn(self.instance.send_heartbeat_to_all_brokers())
        if self._rebalance_wakeup is not None:
            self._rebalance_wakeup.set()

    async def _rebalance_loop(self) -> None:
        assert self._rebalance_wakeup is not None
        delay = self.rebalance_interval_s
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel arriving together
            # with the wake-up, and this task would never stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._rebalance_wakeup.wait()
            self._rebalance_wakeup.clear()
            try:
                complete = await self.rebalance()
            except Exception as e:  # keep re-balancing
                log.warning("rebalance of %s failed: %s", self.group, e)
                complete = False
            delay = self.rebalance_interval_s if complete else min(1.0, self.rebalance_interval_s)

    async def rebalance(self) -> bool:
        """One round; False when some topic could not be re-balanced (kept as it was)."""
        if not self._running:
            return True
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            complete = True
            wanted: dict[str, list[MessageQueue]] = {}
            for topic in list(self.subscriptions):
                try:
                    mqs = await self.instance.subscribe_queues(topic, refresh=True)
                except MQClientError as e:
                    log.info("rebalance of %s: no route for %s (%s)", self.group, topic, e)
                    complete = False
                    continue
                if not self.clustering:
                    wanted[topic] = mqs
                    continue
                try:
                    cids = await self.instance.get_consumer_id_list(self.group, topic)
                except MQClientError as e:
                    cids = []
                    log.info("rebalance of %s: no member list for %s (%s)", self.group, topic, e)
                if self.client_id not in cids:
                    # the broker does not know this member (yet, or any more: restarted): tell it
                    complete = False
                    self._spawn(self.instance.send_heartbeat_to_all_brokers())
                    continue
                try:
                    wanted[topic] = list(self.allocate_strategy(self.group, self.client_id, mqs, cids))
                except Exception as e:
                    log.warning("the allocate strategy of %s failed: %s", self.group, e)
                    complete = False
            await self._update_process_queue_table(wanted)
            return complete

    async def _update_process_queue_table(self, wanted: dict[str, list[MessageQueue]]) -> None:
        drop = [
            mq
            for mq in self._pqs
            if mq.topic not in self.subscriptions or (mq.topic in wanted and mq not in wanted[mq.topic])
        ]
        for mq in drop:
            await self._remove_process_queue(mq)
        # as Java's rebalance: a queue whose pulling stopped (its task ended, or no pull round
        # for PULL_MAX_IDLE_TIME) is dropped here and, still wanted, taken again just below
        now = time.monotonic()
        stalled = [
            mq
            for mq, pq in self._pqs.items()
            if mq.topic in wanted and (pq.is_pull_expired(now) or (pq.pull_task is not None and pq.pull_task.done()))
        ]
        for mq in stalled:
            log.error("%s: pulling of %s stopped; dropping the queue to restart it", self.group, mq)
            await self._remove_process_queue(mq)
        new = sorted({mq for mqs in wanted.values() for mq in mqs if mq not in self._pqs})
        if new and self.orderly and self.clustering:
            locked = await self._lock(new)
            for mq in new:
                if mq not in locked:
                    log.info("%s: %s is locked by another member; not consumed for now", self.group, mq)
            new = [mq for mq in new if mq in locked]
        added = []
        for mq in new:
            if not self._running:
                break
            assert self.offset_store is not None
            self.offset_store.remove_offset(mq)
            try:
                offset = await self.compute_pull_from_where(mq)
            except (MQClientError, ValueError) as e:
                log.warning("%s: cannot tell where to start %s: %s", self.group, mq, e)
                continue
            pq = ProcessQueue(mq, offset)
            if self.orderly and self.clustering:
                pq.locked, pq.last_lock_time = True, time.monotonic()
            self._pqs[mq] = pq
            pq.pull_task = asyncio.create_task(self._pull_loop(pq))
            added.append(f"{mq}@{offset}")
        if drop or added:
            log.info(
                "%s (%s) rebalanced: +[%s] -[%s]",
                self.group,
                self.client_id,
                ", ".join(added),
                ", ".join(map(str, drop)),
            )

    async def _remove_process_queue(self, mq: MessageQueue) -> None:
        pq = self._pqs.pop(mq)
        pq.dropped = True
        if pq.pull_task is not None:
            pq.pull_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pq.pull_task
        assert self.offset_store is not None
        if self.orderly and self.clustering:
            # wait for this queue's handler call, so that nobody else consumes it meanwhile
            try:
                async with asyncio.timeout(self.drop_wait_s):
                    await pq.consume_lock.acquire()
            except TimeoutError:
                log.warning("%s: %s is still being consumed; left locked until the lock expires", self.group, mq)
                await self.offset_store.persist(mq)
                self.offset_store.remove_offset(mq)
                return
            try:
                await self.offset_store.persist(mq)
                self.offset_store.remove_offset(mq)
                await self._unlock([mq])
            finally:
                pq.consume_lock.release()
            return
        await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The stored offset of ``mq``, else the start ``consume_from_where`` gives."""
        assert self.offset_store is not None
        last = await self.offset_store.read_offset(mq, ReadOffsetType.STORE)
        if last >= 0:
            return last
        is_retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        addr = await self.instance.broker_addr(mq)
        if self.consume_from_where is ConsumeFromWhere.LAST:
            return 0 if is_retry else int(await self.api.get_max_offset(addr, mq.topic, mq.queue_id))
        if self.consume_from_where is ConsumeFromWhere.FIRST:
            return int(await self.api.get_min_offset(addr, mq.topic, mq.queue_id))
        if is_retry:
            return int(await self.api.get_max_offset(addr, mq.topic, mq.queue_id))
        ts = self.consume_timestamp_ms
        if ts is None:  # Java's default: half an hour ago
            ts = int(time.time() * 1000) - 30 * 60 * 1000
        return int(await self.api.search_offset(addr, mq.topic, mq.queue_id, ts))

    # -- locks (orderly, CLUSTERING) --------------------------------------------------------

    def _by_broker(self, mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
        out: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            out.setdefault(mq.broker_name, []).append(mq)
        return out

    async def _lock(self, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ per broker; the queues this member holds now."""
        locked: set[MessageQueue] = set()
        for _, group_mqs in sorted(self._by_broker(mqs).items()):
            try:
                addr = await self.instance.broker_addr(group_mqs[0])
                locked |= await self.api.lock_batch_mq(addr, self.group, self.client_id, group_mqs)
            except MQClientError as e:
                log.info("%s: lock of %s failed: %s", self.group, group_mqs, e)
        return locked

    async def _unlock(self, mqs: Iterable[MessageQueue]) -> None:
        for _, group_mqs in sorted(self._by_broker(mqs).items()):
            try:
                addr = await self.instance.broker_addr(group_mqs[0])
                await self.api.unlock_batch_mq(addr, self.group, self.client_id, group_mqs)
            except MQClientError as e:
                log.info("%s: unlock of %s failed: %s", self.group, group_mqs, e)
            for mq in group_mqs:
                pq = self._pqs.get(mq)
                if pq is not None:
                    pq.locked = False

    async def lock_all(self) -> None:
        """Renew the locks of every queue held (Java's lockAll, every 20 s)."""
        mqs = list(self._pqs)
        if not mqs:
            return
        locked = await self._lock(mqs)
        now = time.monotonic()
        for mq in mqs:
            pq = self._pqs.get(mq)
            if pq is None:
                continue
            if mq in locked:
                pq.locked, pq.last_lock_time = True, now
            elif pq.locked:
                log.warning("%s: lost the lock of %s", self.group, mq)
                pq.locked = False

    async def _try_lock_and_reconsume(self, pq: ProcessQueue, delay_s: float) -> None:
        if pq.dropped or not self._running:
            return
        if pq.mq in await self._lock([pq.mq]):
            pq.locked, pq.last_lock_time = True, time.monotonic()
            self._submit_orderly_later(pq, 0.01)
        else:
            self._submit_orderly_later(pq, delay_s)

    # -- pulling ----------------------------------------------------------------------------

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        threshold_size = self.pull_threshold_size_for_queue_mib * 1024 * 1024
        max_span = None if self.orderly else self.consume_concurrently_max_span
        assert self.offset_store is not None
        while self._running and not pq.dropped:
            pq.last_pull_time = time.monotonic()  # a pull round, flow-controlled or not (Java's lastPullTimestamp)
            reason = flow_control(pq, self.pull_threshold_for_queue, threshold_size, max_span)
            if reason is not None:
                self.stats["flow_control"] += 1
                if self.stats["flow_control"] % 1000 == 1:
                    log.info("%s: flow control on %s: %s", self.group, mq, reason)
                await asyncio.sleep(self.pull_delay_on_flow_control_s)
                continue
            if self.orderly and self.clustering and not pq.locked:
                await asyncio.sleep(self.pull_delay_on_lock_fail_s)
                continue
            sub = self.subscriptions.get(mq.topic)
            if sub is None:
                return
            commit = await self.offset_store.read_offset(mq, ReadOffsetType.MEMORY) if self.clustering else -1
            offset = pq.pull_offset
            try:
                res = await self.instance.pull_kernel(
                    mq,
                    sub,
                    group=self.group,
                    offset=offset,
                    max_nums=self.pull_batch_size,
                    commit_offset=commit if commit > 0 else None,
                    suspend_ms=int(self.pull_suspend_s * 1000),
                    timeout_s=self.pull_timeout_when_suspend_s,
                )
                res = process_pull_result(res, mq, sub)
            except (MQClientError, ValueError) as e:
                if pq.dropped or not self._running:
                    return
                log.info("%s: pull of %s at %d failed: %s", self.group, mq, offset, e)
                await asyncio.sleep(self.pull_delay_on_error_s)
                continue
            if pq.dropped or not self._running:
                return
            if res.status is PullStatus.FOUND and res.msgs:
                pq.pull_offset = res.next_begin_offset
                reset_retry_topic(res.msgs, self.group)
                dispatch = pq.put_messages(res.msgs)
                if self.orderly:
                    if dispatch:
                        self._submit_orderly(pq)
                else:
                    self._submit_concurrently(res.msgs, pq)
            elif res.status in (PullStatus.FOUND, PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                pq.pull_offset = res.next_begin_offset
                if not pq.has_messages():  # everything before was consumed or filtered out
                    self.offset_store.update_offset(mq, pq.pull_offset, increase_only=True)
            else:  # OFFSET_ILLEGAL
                log.warning(
                    "%s: offset %d of %s is illegal; moving to %d", self.group, offset, mq, res.next_begin_offset
                )
                pq.pull_offset = res.next_begin_offset
                if not pq.has_messages():
                    self.offset_store.update_offset(mq, pq.pull_offset)
                    await self.offset_store.persist(mq)

    # -- consuming --------------------------------------------------------------------------

    async def _worker(self) -> None:
        q = self._requests
        assert q is not None
        while True:
            try:  # get_nowait first: no coroutine per request while a backlog lasts
                req = q.get_nowait()
            except asyncio.QueueEmpty:
                req = await q.get()
            if not self._running:
                continue  # shutting down: not started calls are dropped (their messages come again)
            try:
                if type(req) is tuple:
                    await self._consume_concurrently(*req)
                else:
                    await req()  # type: ignore[operator]
            except Exception:
                log.exception("%s: a consume request failed", self.group)

    def _submit(self, job: Callable[[], Awaitable[None]]) -> None:
        if self._requests is not None and self._running:
            self._requests.put_nowait(job)

    async def _invoke(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        assert self._listener is not None
        self._active += 1
        try:
            if self._listener_is_async:
                res = await self._listener(msgs, ctx)
            else:
                loop = asyncio.get_running_loop()
                res = await loop.run_in_executor(self._executor, self._listener, msgs, ctx)
                if inspect.isawaitable(res):
                    res = await res
        except Exception as e:
            log.warning("%s: the handler raised %s: %s (RECONSUME_LATER)", self.group, type(e).__name__, e)
            res = ConsumeStatus.RECONSUME_LATER
        finally:
            self._active -= 1
        if not isinstance(res, ConsumeStatus):
            log.warning("%s: the handler returned %r, not a ConsumeStatus (RECONSUME_LATER)", self.group, res)
            res = ConsumeStatus.RECONSUME_LATER
        self.stats["consumed_ok" if res is ConsumeStatus.SUCCESS else "consumed_failed"] += len(msgs)
        return res

    async def _send_back(self, msg: MessageExt, pq: ProcessQueue, delay_level: int) -> bool:
        try:
            addr = await self.instance.broker_addr(pq.mq)
            await self.api.consumer_send_message_back(
                addr, msg, self.group, delay_level, self.effective_max_reconsume_times
            )
        except MQClientError as e:
            log.info(
                "%s: send-back of %s failed (%s); sending it to %s",
                self.group,
                msg.msg_id,
                e,
                get_retry_topic(self.group),
            )
            try:
                await self._resend_to_retry_topic(msg, delay_level)
            except MQClientError as e2:
                self.stats["send_back_failed"] += 1
                log.info("%s: re-sending %s failed too: %s", self.group, msg.msg_id, e2)
                return False
        self.stats["sent_back"] += 1
        return True

    async def _resend_to_retry_topic(self, msg: MessageExt, delay_level: int) -> None:
        """When CONSUMER_SEND_MSG_BACK fails, Java's consumer sends the message itself, through
        its client's inner producer, to ``%RETRY%<group>`` (any broker of it): the properties
        copied, RETRY_TOPIC and ORIGIN_MESSAGE_ID set, RECONSUME_TIME + 1, MAX_RECONSUME_TIMES,
        delay level 3 + reconsumeTimes. The broker sends it to the DLQ once the count reaches
        the maximum (a negative ``delay_level`` asks for that at once)."""
        props = {k: v for k, v in msg.properties.items() if k not in _NOT_RESENT}
        tags = props.pop(PROPERTY_TAGS, None)
        keys = props.pop(PROPERTY_KEYS, None)
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        props[PROPERTY_RETRY_TOPIC] = msg.topic
        max_times = self.effective_max_reconsume_times
        times = msg.reconsume_times + 1 if delay_level >= 0 else max(msg.reconsume_times + 1, max_times)
        props[PROPERTY_RECONSUME_TIME] = str(times)
        props[PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
        resend = Message(
            get_retry_topic(self.group), msg.body, tags=tags, keys=keys, properties=props, flag=msg.flag,
            delay_time_level=delay_level if delay_level > 0 else 3 + msg.reconsume_times,
        )  # fmt: skip
        if self._inner_producer is None:
            self._inner_producer = AsyncProducer(CLIENT_INNER_PRODUCER_GROUP, client_instance=self.instance)
            await self._inner_producer.start()
        await self._inner_producer.send(resend)

    # concurrent

    def _submit_concurrently(self, msgs: list[MessageExt], pq: ProcessQueue) -> None:
        if self._requests is None or not self._running:
            return
        put, n = self._requests.put_nowait, self.consume_message_batch_max_size
        if n == 1:
            for m in msgs:
                put(([m], pq))
        else:
            for i in range(0, len(msgs), n):
                put((msgs[i : i + n], pq))

    async def _consume_concurrently(self, msgs: list[MessageExt], pq: ProcessQueue) -> None:
        if pq.dropped:
            return
        ctx = ConsumeContext(pq.mq)
        status = await self._invoke(msgs, ctx)
        if pq.dropped:
            return  # the queue went to another member: its offset is not ours to move
        done = msgs
        if status is not ConsumeStatus.SUCCESS:
            if self.clustering:
                failed = [m for m in msgs if not await self._send_back(m, pq, ctx.delay_level_when_next_consume)]
                if failed:
                    for m in failed:
                        m.reconsume_times += 1
                    done = [m for m in msgs if all(m is not f for f in failed)]
                    self._later(self.consume_retry_local_delay_s, lambda: self._submit_concurrently(failed, pq))
            else:
                log.warning("%s (BROADCASTING): %d messages failed and are dropped", self.group, len(msgs))
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped:
            assert self.offset_store is not None
            self.offset_store.update_offset(pq.mq, offset, increase_only=True)

    # orderly

    def _submit_orderly(self, pq: ProcessQueue) -> None:
        self._submit(lambda: self._consume_orderly(pq))

    def _submit_orderly_later(self, pq: ProcessQueue, delay_s: float) -> None:
        self._later(delay_s, lambda: self._submit_orderly(pq))

    async def _consume_orderly(self, pq: ProcessQueue) -> None:
        if pq.dropped:
            return
        async with pq.consume_lock:
            t0 = time.monotonic()
            while True:
                if pq.dropped or not self._running:
                    return
                if self.clustering and (not pq.locked or pq.is_lock_expired()):
                    self._later(0.1, lambda: self._spawn(self._try_lock_and_reconsume(pq, 3.0)))
                    return
                if time.monotonic() - t0 > MAX_TIME_CONSUME_CONTINUOUSLY_S:
                    self._submit_orderly_later(pq, 0.01)
                    return
                msgs = pq.take_messages(self.consume_message_batch_max_size)
                if not msgs:
                    return
                ctx = ConsumeContext(
                    pq.mq, orderly=True, suspend_current_queue_time_s=self.suspend_current_queue_time_s
                )
                status = await self._invoke(msgs, ctx)
                assert self.offset_store is not None
                if status is ConsumeStatus.SUCCESS:
                    offset = pq.commit()
                else:
                    retry = await self._check_reconsume_times(msgs, pq)
                    pq.make_messages_to_consume_again(retry)
                    offset = pq.commit()  # the messages given to the DLQ, if any
                    if retry:
                        if offset >= 0:
                            self.offset_store.update_offset(pq.mq, offset)
                        self._submit_orderly_later(pq, max(ctx.suspend_current_queue_time_s, 0.01))
                        return
                if offset >= 0:
                    self.offset_store.update_offset(pq.mq, offset)

    async def _check_reconsume_times(self, msgs: list[MessageExt], pq: ProcessQueue) -> list[MessageExt]:
        """The messages to consume again (reconsume_times + 1); the others went to the DLQ."""
        retry = []
        for m in msgs:
            if m.reconsume_times >= self.effective_max_reconsume_times:
                m.properties[PROPERTY_RECONSUME_TIME] = str(m.reconsume_times)
                if self.clustering and await self._send_back(m, pq, -1):
                    continue
                if not self.clustering:
                    log.warning(
                        "%s (BROADCASTING): %s failed %d times; dropped", self.group, m.msg_id, m.reconsume_times
                    )
                    continue
            m.reconsume_times += 1
            retry.append(m)
        return retry

    # -- offsets ----------------------------------------------------------------------------

    # -- the broker's calls (client_remoting_processor) --------------------------------------

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET, as Java's MQClientInstance.resetOffset: the queues of
        ``topic`` this member holds and the table names are dropped, get their new offsets
        (stored here and on the broker), and are taken again from there by a rebalance."""
        if not self._running or self.offset_store is None or self._rebalance_lock is None:
            return
        async with self._rebalance_lock:
            for mq in [mq for mq in self._pqs if mq.topic == topic and mq in table]:
                pq = self._pqs.pop(mq)
                pq.dropped = True  # in-flight results no longer move its offset
                if pq.pull_task is not None:
                    pq.pull_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await pq.pull_task
                self.offset_store.update_offset(mq, table[mq])
                try:
                    await self.offset_store.persist(mq)
                except MQClientError as e:
                    log.warning("%s: storing the reset offset of %s failed: %s", self.group, mq, e)
                self.offset_store.remove_offset(mq)
        self._kick_rebalance()

    async def consumer_status(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: this member's offsets of the topic's queues."""
        out: dict[MessageQueue, int] = {}
        if self.offset_store is None:
            return out
        for mq in [mq for mq in self._pqs if mq.topic == topic]:
            offset = await self.offset_store.read_offset(mq, ReadOffsetType.MEMORY)
            if offset >= 0:
                out[mq] = offset
        return out

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO: ConsumerRunningInfo, as mqadmin consumerStatus reads it.
        Rates are averages since start (this client keeps no per-minute windows)."""
        from pumice.client.client_remoting_processor import mq_key

        now_ms = time.time() * 1000
        now = time.monotonic()
        uptime_s = max((now_ms - (self._start_ms or now_ms)) / 1000, 1e-3)

        def wall_ms(t: float) -> int:
            return int(now_ms - (now - t) * 1000)

        mq_table: dict[str, Any] = {}
        for mq, pq in sorted(self._pqs.items()):
            offsets = pq.in_flight_offsets()
            commit = self.offset_store.offset_table.get(mq, -1) if self.offset_store is not None else -1
            mq_table[mq_key(mq)] = {
                "commitOffset": commit, "cachedMsgMinOffset": offsets[0] if offsets else 0,
                "cachedMsgMaxOffset": offsets[-1] if offsets else 0, "cachedMsgCount": len(offsets),
                "cachedMsgSizeInMiB": pq.msg_size // (1024 * 1024), "transactionMsgMinOffset": 0,
                "transactionMsgMaxOffset": 0, "transactionMsgCount": 0, "locked": pq.locked, "tryUnlockTimes": 0,
                "lastLockTimestamp": wall_ms(pq.last_lock_time) if pq.last_lock_time else 0, "droped": pq.dropped,
                "lastPullTimestamp": wall_ms(pq.last_pull_time), "lastConsumeTimestamp": wall_ms(pq.last_consume_time),
            }  # fmt: skip
        ok, failed = self.stats["consumed_ok"], self.stats["consumed_failed"]
        status = {"pullRT": 0.0, "pullTPS": 0.0, "consumeRT": 0.0, "consumeOKTPS": ok / uptime_s,
                  "consumeFailedTPS": failed / uptime_s, "consumeFailedMsgs": failed}  # fmt: skip
        properties = {
            "PROP_NAMESERVER_ADDR": self.namesrv_addr, "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(self.consume_thread_count),
            "PROP_CONSUMER_START_TIMESTAMP": str(self._start_ms), "PROP_CLIENT_VERSION": version_desc(DEFAULT_VERSION),
            "consumerGroup": self.group, "messageModel": self.message_model.value,
            "consumeFromWhere": self.consume_from_where.value, "pullBatchSize": str(self.pull_batch_size),
            "consumeMessageBatchMaxSize": str(self.consume_message_batch_max_size),
            "maxReconsumeTimes": str(self.max_reconsume_times), "language": "PYTHON",
        }  # fmt: skip
        return {
            "properties": properties,
            "subscriptionSet": [sub.to_json() for _, sub in sorted(self.subscriptions.items())],
            "mqTable": mq_table,
            "statusTable": {topic: dict(status) for topic in sorted(self.subscriptions)},
        }

    async def consume_directly(self, record: bytes, broker_name: str | None) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: the stored record handed to the handler once; its answer,
        nothing committed or sent back (Java's consumeMessageDirectly)."""
        from pumice.client.message import decode_messages

        begin = time.monotonic()
        try:
            msgs = decode_messages(record, broker_name=broker_name)
        except ValueError as e:
            return {"order": self.orderly, "autoCommit": True, "consumeResult": "CR_THROW_EXCEPTION",
                    "remark": f"the record cannot be decoded: {e}", "spentTimeMills": 0}  # fmt: skip
        if not msgs:
            return {"order": self.orderly, "autoCommit": True, "consumeResult": "CR_THROW_EXCEPTION",
                    "remark": "no message in the request", "spentTimeMills": 0}  # fmt: skip
        reset_retry_topic(msgs, self.group)
        ctx = ConsumeContext(MessageQueue(msgs[0].topic, broker_name or "", msgs[0].queue_id), orderly=self.orderly)
        try:
            status = await self._invoke(msgs, ctx)
            result, remark = ("CR_SUCCESS", None) if status is ConsumeStatus.SUCCESS else ("CR_LATER", None)
        except Exception as e:  # _invoke turns handler errors into RECONSUME_LATER; anything else is ours
            result, remark = "CR_THROW_EXCEPTION", f"{type(e).__name__}: {e}"
        spent = int((time.monotonic() - begin) * 1000)
        return {"order": self.orderly, "autoCommit": True, "consumeResult": result, "remark": remark,
                "spentTimeMills": spent}  # fmt: skip

    async def persist_offsets(self) -> None:
        """Store the offsets of every queue held (also every persist interval)."""
        if self.offset_store is not None:
            await self.offset_store.persist_all(list(self._pqs))

    async def committed_offset(self, mq: MessageQueue) -> int:
        """The offset in memory for ``mq`` (-1 if none)."""
        assert self.offset_store is not None
        return await self.offset_store.read_offset(mq, ReadOffsetType.MEMORY)


async def _cancel_all(tasks: list[asyncio.Task[Any]], timeout_s: float = 10.0) -> None:
    """Cancel ``tasks`` and wait for them (bounded; a task that ignores the cancel is left)."""
    for t in tasks:
        t.cancel()
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        if pending:
            log.warning("%d tasks did not stop within %ss", len(pending), timeout_s)
    tasks.clear()


class PushConsumer(SyncClient):
    """Blocking ``AsyncPushConsumer`` (same constructor arguments; ``self.impl``). Handlers
    are plain functions; they run in the consumer's pool of ``consume_thread_count`` threads."""

    impl: AsyncPushConsumer

    def __init__(self, group: str = DEFAULT_CONSUMER_GROUP, namesrv_addr: str = "127.0.0.1:9876", **kwargs: Any):
        super().__init__(f"pumice-push-{group}", lambda: AsyncPushConsumer(group, namesrv_addr, **kwargs))

    def shutdown_timeout_s(self) -> float:
        return self.impl.shutdown_await_s + 60

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        self._call(self.impl.subscribe, topic, sub_expression)

    def unsubscribe(self, topic: str) -> None:
        self._call(self.impl.unsubscribe, topic)

    def register_message_listener(self, listener: MessageListener, *, orderly: bool = False) -> None:
        self._call(self.impl.register_message_listener, listener, orderly=orderly)

    def register_message_listener_orderly(self, listener: MessageListener) -> None:
        self.register_message_listener(listener, orderly=True)

    def assignment(self) -> set[MessageQueue]:
        return self._call(self.impl.assignment)

    def persist_offsets(self) -> None:
        self._run(self.impl.persist_offsets())

    @property
    def client_id(self) -> str:
        return self.impl.client_id
