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

The parts (Java's DefaultMQPushConsumerImpl and what it delegates to):

===============================  ==============================================================
module                           what
===============================  ==============================================================
``push_consumer`` (this one)     the facade: settings, start/shutdown, the pull loop and its
                                 pure decisions (``decide_before_pull``, ``decide_pull_result``),
                                 offsets, the broker's calls (ConsumerInner)
``rebalance``                    RebalancePushImpl: the process-queue table, allocation, where
                                 a new queue starts, broker locks (orderly)
``consume_service``              ConsumeMessageConcurrentlyService / ...OrderlyService: worker
                                 pool, handler calls, send-back, the reconsume-times check
``process_queue``                ProcessQueue: a queue's in-flight messages; flow control
``offset_store``, ``allocate``   broker or local-file offsets; queue allocation strategies
===============================  ==============================================================

How it works:

* message model: CLUSTERING (default) shares the queues of the subscribed topics among the
  group's members and keeps offsets on the brokers (``RemoteBrokerOffsetStore``); the group's
  retry topic ``%RETRY%<group>`` is subscribed automatically. BROADCASTING gives every member
  every queue and keeps offsets in a local JSON file (``LocalFileOffsetStore``;
  ``offset_store_path``, default ``~/.pumice/offsets/<clientId>/<group>/offsets.json``).
* rebalance (``rebalance.Rebalance``): at start, every ``rebalance_interval_s`` (20 s) and when a
  broker sends NOTIFY_CONSUMER_IDS_CHANGED, each subscribed topic's queues are divided with
  ``allocate_strategy(group, client_id, mqs, cids)`` (default AllocateMessageQueueAveragely).
  A queue taken away stops being pulled, its offset is stored, and (orderly) it is unlocked.
* pulling (PullMessageService): one task per queue long-polls the broker (PULL_MESSAGE with
  the SUSPEND flag, ``pull_suspend_s`` 15 s held by the broker — brokerSuspendMaxTimeMillis —
  and ``pull_timeout_when_suspend_s`` 30 s for the answer, which must be longer), sending the
  queue's in-memory offset as commitOffset (CLUSTERING). Bodies are inflated and tags filtered
  again on the client (the broker filters by hash code). Flow control: with more than
  ``pull_threshold_for_queue`` (1000) messages or ``pull_threshold_size_for_queue_mib``
  (100 MiB) cached for a queue, or (concurrent) an offset span over
  ``consume_concurrently_max_span`` (2000), the next pull waits ``pull_delay_on_flow_control_s``
  (50 ms) instead; an orderly CLUSTERING queue not locked waits ``pull_delay_on_lock_fail_s``.
  Errors wait ``pull_delay_on_error_s`` (3 s). An answer without messages moves the offset on;
  OFFSET_ILLEGAL moves it to the broker's next offset and stores that at once.
* offsets (``process_queue.ProcessQueue``): the offset stored for a queue is the smallest one
  still in flight, so a crash never skips an unfinished message; they are written every
  ``persist_consumer_offset_interval_s`` (5 s), when a queue is dropped and at shutdown.
  Where a queue without an offset starts: ``consume_from_where`` LAST (max offset; retry
  queues from 0), FIRST (min offset) or TIMESTAMP (``consume_timestamp_ms``).
* consumption (``consume_service``): concurrent RECONSUME_LATER sends messages back
  (``max_reconsume_times``, 16, then the DLQ); orderly locks each queue on its broker
  (CLUSTERING; renewed every ``lock_interval_s``, 20 s), calls the handler once at a time per
  queue and suspends a failing queue for ``context.suspend_current_queue_time_s`` (1 s).
* shutdown: stop pulling and rebalancing, wait for running handlers (at most
  ``shutdown_await_s``, 10 s; handler calls not started yet are dropped, their messages come
  again), store offsets, unlock orderly queues, UNREGISTER_CLIENT (the broker tells the other
  members, which re-balance).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from pumice.client.allocate import AllocateStrategy, allocate_message_queue_averagely
from pumice.client.client_instance import MQClientInstance, consumer_data, own_instance
from pumice.client.consume_service import (
    DEFAULT_MAX_RECONSUME_TIMES,
    ORDERLY_UNLIMITED_RECONSUME_TIMES,
    ConsumeContext,
    ConsumeMessageConcurrentlyService,
    ConsumeMessageOrderlyService,
    ConsumeMessageService,
    ConsumeStatus,
    MessageListener,
    SendBack,
    cancel_all,
    reset_retry_topic,
)
from pumice.client.exceptions import MQClientError
from pumice.client.message import MessageExt, MessageQueue, PullResult, PullStatus
from pumice.client.offset_store import LocalFileOffsetStore, OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from pumice.client.process_queue import ProcessQueue, flow_control
from pumice.client.pull_consumer import ConsumeFromWhere, process_pull_result
from pumice.client.rebalance import MessageModel, Rebalance
from pumice.client.subscription import MessageSelector, SubscriptionData, build_subscription
from pumice.client.sync_loop import SyncClient
from pumice.common.fastjson import ObjectKey
from pumice.common.message_queue_map import message_queue_key
from pumice.common.mix_all import DEFAULT_CONSUMER_GROUP, RETRY_GROUP_TOPIC_PREFIX, get_retry_topic
from pumice.remoting.mq_version import version_desc
from pumice.remoting.remoting_command import DEFAULT_VERSION

__all__ = [
    "AsyncPushConsumer",
    "ConsumeContext",
    "ConsumeStatus",
    "MessageListener",
    "MessageModel",
    "PullAction",
    "PullDecision",
    "PullLimits",
    "PushConsumer",
    "decide_before_pull",
    "decide_pull_result",
    "reset_retry_topic",
]

log = logging.getLogger(__name__)


# -- the pull loop's decisions (pure) -------------------------------------------------------


class PullAction(Enum):
    PULL = "PULL"  # before a pull: go ahead
    FLOW_CONTROL = "FLOW_CONTROL"  # before a pull: too much cached, wait delay_s
    LOCK_WAIT = "LOCK_WAIT"  # before a pull: orderly queue without its broker lock, wait delay_s
    CONSUME = "CONSUME"  # FOUND: put msgs into the process queue and submit them
    NEXT_OFFSET = "NEXT_OFFSET"  # nothing to consume (no new / no matched / all filtered out)
    CORRECT_OFFSET = "CORRECT_OFFSET"  # OFFSET_ILLEGAL: move to the broker's offset, store it at once


@dataclass(frozen=True, slots=True)
class PullDecision:
    """What the pull loop does next for one queue."""

    action: PullAction
    delay_s: float = 0.0  # wait this long, then decide again
    next_offset: int = -1  # where the next pull starts (-1: unchanged)
    msgs: list[MessageExt] = field(default_factory=list)  # CONSUME: the pulled messages
    store_offset: int = -1  # >= 0: the offset to store (nothing of the queue in flight)
    reason: str = ""  # for the log


@dataclass(frozen=True, slots=True)
class PullLimits:
    """The settings ``decide_before_pull`` applies (RocketMQ's pullThreshold*, consumeConcurrentlyMaxSpan)."""

    threshold_count: int = 1000
    threshold_size_bytes: int = 100 * 1024 * 1024
    max_span: int | None = 2000  # None: orderly, no span limit
    lock_required: bool = False  # orderly CLUSTERING: pull only while the broker lock is held
    flow_control_delay_s: float = 0.05
    lock_fail_delay_s: float = 3.0


_PULL_NOW = PullDecision(PullAction.PULL)


def decide_before_pull(pq: ProcessQueue, limits: PullLimits) -> PullDecision:
    """PULL, or FLOW_CONTROL / LOCK_WAIT with the delay before deciding again. Reads ``pq``
    (cached count, size, span, lock), changes nothing."""
    reason = flow_control(pq, limits.threshold_count, limits.threshold_size_bytes, limits.max_span)
    if reason is not None:
        return PullDecision(PullAction.FLOW_CONTROL, delay_s=limits.flow_control_delay_s, reason=reason)
    if limits.lock_required and not pq.locked:
        return PullDecision(PullAction.LOCK_WAIT, delay_s=limits.lock_fail_delay_s, reason="not locked")
    return _PULL_NOW


def decide_pull_result(result: PullResult, *, pull_offset: int, has_messages: bool) -> PullDecision:
    """What to do with a decoded, tag-filtered pull ``result`` of a queue pulled at
    ``pull_offset``; ``has_messages``: the queue has messages in flight (then no offset is
    stored here: the smallest in-flight one is stored as they finish)."""
    nxt = result.next_begin_offset
    if result.status is PullStatus.FOUND and result.msgs:
        return PullDecision(PullAction.CONSUME, next_offset=nxt, msgs=result.msgs)
    store = -1 if has_messages else nxt  # everything before was consumed or filtered out
    if result.status in (PullStatus.FOUND, PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
        return PullDecision(PullAction.NEXT_OFFSET, next_offset=nxt, store_offset=store)
    return PullDecision(  # OFFSET_ILLEGAL
        PullAction.CORRECT_OFFSET,
        next_offset=nxt,
        store_offset=store,
        reason=f"offset {pull_offset} is illegal; moving to {nxt}",
    )


# -- the consumer ---------------------------------------------------------------------------


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
        access_key: str | None = None,
        secret_key: str | None = None,
        use_tls: bool | ssl.SSLContext = False,
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
        self.instance = own_instance(
            client_instance,
            namesrv_addr,
            instance_name=instance_name,
            access_key=access_key,
            secret_key=secret_key,
            use_tls=use_tls,
        )
        self.offset_store: OffsetStore | None = offset_store
        self.subscriptions: dict[str, SubscriptionData] = {}
        self._listener: MessageListener | None = None
        self.orderly = False
        self.stats = {"consumed_ok": 0, "consumed_failed": 0, "sent_back": 0, "send_back_failed": 0, "flow_control": 0}
        self.rebalance_impl: Rebalance | None = None  # built by start
        self.consume_service: ConsumeMessageService[Any] | None = None  # built by start
        self._sender = SendBack(self.instance, group, self.stats)
        self._tasks: list[asyncio.Task[None]] = []
        self._spawned: set[asyncio.Task[Any]] = set()
        self._running = False
        self.started = False
        self._start_ms = 0  # when start() ran (ConsumerRunningInfo)

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

    @property
    def _pqs(self) -> dict[MessageQueue, ProcessQueue]:
        return self.rebalance_impl.process_queue_table if self.rebalance_impl is not None else {}

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
        self.rebalance_impl = Rebalance(
            self.instance, self.group, self.message_model, self.allocate_strategy, self.subscriptions,
            self.offset_store, consume_from_where=self.consume_from_where,
            consume_timestamp_ms=self.consume_timestamp_ms, orderly=self.orderly, drop_wait_s=self.drop_wait_s,
            dispatch_pull_request=self._dispatch_pull_request, running=self._is_running, spawn=self._spawn,
        )  # fmt: skip
        self.consume_service = self._new_consume_service(self._listener, self.offset_store, self.rebalance_impl)
        self.instance.register_consumer(self.group, self._consumer_data, self)
        self._start_ms = int(time.time() * 1000)
        self.instance.add_consumer_ids_changed_listener(self._on_ids_changed)
        for topic in self.subscriptions:
            try:
                await self.instance.get_topic_route(topic)
            except MQClientError as e:
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # made by the broker on the group's first heartbeat
                    log.info("no route for %s yet: %s", topic, e)
                    continue
                # once, at start: later rebalances say it at INFO
                log.warning("%s subscribes to %s, which has no route yet (%s): nothing is consumed from it until "
                            "it is created", self.group, topic, e)  # fmt: skip
        await self.instance.send_heartbeat_to_all_brokers()
        self._running = True
        self.started = True
        self.consume_service.start()
        self._tasks = [
            asyncio.create_task(self.rebalance_impl.run(self.rebalance_interval_s)),
            asyncio.create_task(self._every(self.persist_consumer_offset_interval_s, self.persist_offsets)),
        ]
        if self.orderly and self.clustering:
            self._tasks.append(asyncio.create_task(self._every(self.lock_interval_s, self.lock_all)))
        self.rebalance_impl.wakeup()  # the first rebalance, at once

    def _new_consume_service(
        self, listener: MessageListener, offset_store: OffsetStore, rebalance: Rebalance
    ) -> ConsumeMessageService[Any]:
        common: dict[str, Any] = {
            "clustering": self.clustering, "consume_thread_count": self.consume_thread_count,
            "consume_message_batch_max_size": self.consume_message_batch_max_size,
            "max_reconsume_times": self.effective_max_reconsume_times, "send_back": self._send_back,
            "stats": self.stats, "running": self._is_running,
        }  # fmt: skip
        if self.orderly:
            return ConsumeMessageOrderlyService(
                self.group, listener, offset_store, suspend_current_queue_time_s=self.suspend_current_queue_time_s,
                lock=rebalance.lock, spawn=self._spawn, **common,
            )  # fmt: skip
        return ConsumeMessageConcurrentlyService(
            self.group, listener, offset_store, consume_retry_local_delay_s=self.consume_retry_local_delay_s, **common
        )

    async def shutdown(self) -> None:
        """Stop pulling, wait for running handlers (bounded), store offsets, unlock, unregister."""
        if not self.started:
            return
        self._running = False
        rebalance, service, store = self.rebalance_impl, self.consume_service, self.offset_store
        assert rebalance is not None and service is not None and store is not None
        async with rebalance.rebalance_lock:  # a rebalance in progress finishes first (no half-dropped queue)
            await cancel_all(self._tasks)
        await cancel_all([pq.pull_task for pq in rebalance.process_queue_table.values() if pq.pull_task is not None])
        await service.shutdown(self.shutdown_await_s)
        await cancel_all(list(self._spawned))
        await store.persist_all(list(rebalance.process_queue_table))
        await rebalance.destroy()
        await self.instance.unregister_consumer(self.group)
        await self._sender.shutdown()
        if self._owns_instance:
            await self.instance.shutdown()
        service.close()
        self.started = False

    async def __aenter__(self) -> AsyncPushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _is_running(self) -> bool:
        return self._running

    async def _every(self, interval_s: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except Exception as e:  # keep the periodic job alive
                log.warning("%s of %s failed: %s", getattr(job, "__name__", job), self.group, e)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    # -- rebalance (rebalance.Rebalance) ----------------------------------------------------

    def _on_ids_changed(self, group: str) -> None:
        if group == self.group and self._running:
            self._kick_rebalance()

    def _kick_rebalance(self, heartbeat: bool = False) -> None:
        if heartbeat:
            self._spawn(self.instance.send_heartbeat_to_all_brokers())
        if self.rebalance_impl is not None:
            self.rebalance_impl.wakeup()

    async def rebalance(self) -> bool:
        """One round; False when some topic could not be re-balanced (kept as it was)."""
        if self.rebalance_impl is None:
            return True
        return await self.rebalance_impl.do_rebalance()

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The stored offset of ``mq``, else the start ``consume_from_where`` gives."""
        assert self.rebalance_impl is not None, "start() first"
        return await self.rebalance_impl.compute_pull_from_where(mq)

    async def lock_all(self) -> None:
        """Renew the locks of every queue held (Java's lockAll, every 20 s)."""
        if self.rebalance_impl is not None:
            await self.rebalance_impl.lock_all()

    # -- pulling ----------------------------------------------------------------------------

    def _dispatch_pull_request(self, pq: ProcessQueue) -> None:
        pq.pull_task = asyncio.create_task(self._pull_loop(pq))

    def _pull_limits(self) -> PullLimits:
        return PullLimits(
            threshold_count=self.pull_threshold_for_queue,
            threshold_size_bytes=self.pull_threshold_size_for_queue_mib * 1024 * 1024,
            max_span=None if self.orderly else self.consume_concurrently_max_span,
            lock_required=self.orderly and self.clustering,
            flow_control_delay_s=self.pull_delay_on_flow_control_s,
            lock_fail_delay_s=self.pull_delay_on_lock_fail_s,
        )

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        limits = self._pull_limits()
        assert self.offset_store is not None
        while self._running and not pq.dropped:
            pq.last_pull_time = time.monotonic()  # a pull round, flow-controlled or not (Java's lastPullTimestamp)
            before = decide_before_pull(pq, limits)
            if before.action is not PullAction.PULL:
                if before.action is PullAction.FLOW_CONTROL:
                    self.stats["flow_control"] += 1
                    if self.stats["flow_control"] % 1000 == 1:
                        log.info("%s: flow control on %s: %s", self.group, mq, before.reason)
                await asyncio.sleep(before.delay_s)
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
            await self._apply_pull_decision(
                pq, decide_pull_result(res, pull_offset=offset, has_messages=pq.has_messages())
            )

    async def _apply_pull_decision(self, pq: ProcessQueue, decision: PullDecision) -> None:
        """Carry out ``decide_pull_result``'s decision for ``pq``."""
        assert self.offset_store is not None and self.consume_service is not None
        pq.pull_offset = decision.next_offset
        if decision.action is PullAction.CONSUME:
            reset_retry_topic(decision.msgs, self.group)
            dispatch = pq.put_messages(decision.msgs)
            self.consume_service.submit_consume_request(decision.msgs, pq, dispatch)
        elif decision.action is PullAction.CORRECT_OFFSET:
            log.warning("%s: %s of %s", self.group, decision.reason, pq.mq)
            if decision.store_offset >= 0:
                self.offset_store.update_offset(pq.mq, decision.store_offset)
                await self.offset_store.persist(pq.mq)
        elif decision.store_offset >= 0:
            self.offset_store.update_offset(pq.mq, decision.store_offset, increase_only=True)

    # -- consuming (consume_service) --------------------------------------------------------

    async def _send_back(self, msg: MessageExt, pq: ProcessQueue, delay_level: int) -> bool:
        """Java's sendMessageBack, which the consume services call (tests replace it)."""
        return await self._sender.send_back(msg, pq.mq, delay_level, self.effective_max_reconsume_times)

    # -- the broker's calls (client_remoting_processor) --------------------------------------

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET, as Java's MQClientInstance.resetOffset: the queues of
        ``topic`` this member holds and the table names are dropped, get their new offsets
        (stored here and on the broker), and are taken again from there by a rebalance."""
        if not self._running or self.rebalance_impl is None:
            return
        await self.rebalance_impl.reset_offset(topic, table)
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
        now_ms = time.time() * 1000
        now = time.monotonic()
        uptime_s = max((now_ms - (self._start_ms or now_ms)) / 1000, 1e-3)

        def wall_ms(t: float) -> int:
            return int(now_ms - (now - t) * 1000)

        mq_table: dict[ObjectKey, Any] = {}  # a TreeMap in Java: sorted
        for mq, pq in sorted(self._pqs.items()):
            offsets = pq.in_flight_offsets()
            commit = self.offset_store.offset_table.get(mq, -1) if self.offset_store is not None else -1
            mq_table[message_queue_key(mq.topic, mq.broker_name, mq.queue_id)] = {
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
            if self.consume_service is None:
                raise MQClientError("the consumer is not started")
            status = await self.consume_service.invoke(msgs, ctx)
            result, remark = ("CR_SUCCESS", None) if status is ConsumeStatus.SUCCESS else ("CR_LATER", None)
        except Exception as e:  # invoke turns handler errors into RECONSUME_LATER; anything else is ours
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
