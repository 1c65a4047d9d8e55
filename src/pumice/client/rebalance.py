"""RebalanceImpl of the push consumer: which queues this member consumes, and their process queues.

=========================================  ======================================================
``Rebalance`` member                        what
=========================================  ======================================================
``process_queue_table``                    MessageQueue → ProcessQueue of every queue held
``do_rebalance()``                         one round: each subscribed topic's queues divided by
                                           ``allocate_strategy`` (CLUSTERING) or all of them
                                           (BROADCASTING), then ``update_process_queue_table``
``run(interval_s)`` / ``wakeup()``         the RebalanceService loop: a round every interval and
                                           when woken (NOTIFY_CONSUMER_IDS_CHANGED, subscribe)
``update_process_queue_table(wanted)``     drop queues no longer wanted or whose pulling stopped,
                                           take new ones (locked first when orderly), start pulling
``remove_process_queue(mq)``               stop pulling, store the offset, unlock (orderly)
``compute_pull_from_where(mq)``            the stored offset, else where ``consume_from_where``
                                           says (RebalancePushImpl.computePullFromWhere)
``lock`` / ``unlock`` / ``lock_all``       LOCK_BATCH_MQ / UNLOCK_BATCH_MQ per broker (orderly,
                                           CLUSTERING)
``reset_offset(topic, table)``             RESET_CONSUMER_CLIENT_OFFSET: drop the queues, store
                                           the new offsets (a rebalance takes them again)
``destroy()``                              at shutdown: unlock (orderly), mark every queue dropped
=========================================  ======================================================

A round that could not see a route or the member list keeps the queues it has and reports
itself incomplete (``run`` retries after 1 s). A queue whose pulling stopped (its task ended,
or no pull round for PULL_MAX_IDLE_TIME, 120 s) is dropped and taken again from its stored
offset. Starting a queue's pull loop is the consumer's (``dispatch_pull_request``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from enum import Enum
from typing import Any

from pumice.client.allocate import AllocateStrategy
from pumice.client.client_instance import MQClientInstance
from pumice.client.exceptions import MQClientError
from pumice.client.message import MessageQueue
from pumice.client.offset_store import OffsetStore, ReadOffsetType
from pumice.client.process_queue import ProcessQueue
from pumice.client.pull_consumer import ConsumeFromWhere
from pumice.client.subscription import SubscriptionData
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger(__name__)


class MessageModel(Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class Rebalance:
    """RocketMQ's RebalancePushImpl for one consumer group (see the module docstring).

    ``subscriptions`` is the consumer's own dict (subscribe/unsubscribe show at the next
    round); ``running()`` says whether the consumer still runs; ``spawn`` runs a background
    coroutine the consumer cancels at shutdown."""

    def __init__(
        self,
        instance: MQClientInstance,
        group: str,
        message_model: MessageModel,
        allocate_strategy: AllocateStrategy,
        subscriptions: dict[str, SubscriptionData],
        offset_store: OffsetStore,
        *,
        consume_from_where: ConsumeFromWhere,
        consume_timestamp_ms: int | None,
        orderly: bool,
        drop_wait_s: float,
        dispatch_pull_request: Callable[[ProcessQueue], None],
        running: Callable[[], bool],
        spawn: Callable[[Awaitable[Any]], None],
    ) -> None:
        self.instance = instance
        self.group = group
        self.message_model = message_model
        self.allocate_strategy = allocate_strategy
        self.subscriptions = subscriptions
        self.offset_store = offset_store
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.orderly = orderly
        self.drop_wait_s = drop_wait_s
        self._dispatch_pull_request = dispatch_pull_request
        self._running = running
        self._spawn = spawn
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.rebalance_lock = asyncio.Lock()  # one round (or reset, or shutdown) at a time
        self._wakeup = asyncio.Event()

    @property
    def clustering(self) -> bool:
        return self.message_model is MessageModel.CLUSTERING

    @property
    def lock_required(self) -> bool:
        """Orderly CLUSTERING: a queue is consumed only while this member holds its broker lock."""
        return self.orderly and self.clustering

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    # -- the rounds ---------------------------------------------------------------------------

    def wakeup(self) -> None:
        self._wakeup.set()

    async def run(self, interval_s: float) -> None:
        """Re-balance every ``interval_s`` and when woken; until cancelled."""
        delay = interval_s
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel arriving together
            # with the wake-up, and this task would never stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wakeup.wait()
            self._wakeup.clear()
            try:
                complete = await self.do_rebalance()
            except Exception as e:  # keep re-balancing
                log.warning("rebalance of %s failed: %s", self.group, e)
                complete = False
            delay = interval_s if complete else min(1.0, interval_s)

    async def do_rebalance(self) -> bool:
        """One round; False when some topic could not be re-balanced (kept as it was)."""
        if not self._running():
            return True
        async with self.rebalance_lock:
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
            await self.update_process_queue_table(wanted)
            return complete

    async def update_process_queue_table(self, wanted: dict[str, list[MessageQueue]]) -> None:
        """Make the table hold ``wanted`` (topic → queues; topics left out keep their queues)."""
        table = self.process_queue_table
        drop = [
            mq
            for mq in table
            if mq.topic not in self.subscriptions or (mq.topic in wanted and mq not in wanted[mq.topic])
        ]
        for mq in drop:
            await self.remove_process_queue(mq)
        # as Java's rebalance: a queue whose pulling stopped (its task ended, or no pull round
        # for PULL_MAX_IDLE_TIME) is dropped here and, still wanted, taken again just below
        now = time.monotonic()
        stalled = [
            mq
            for mq, pq in table.items()
            if mq.topic in wanted and (pq.is_pull_expired(now) or (pq.pull_task is not None and pq.pull_task.done()))
        ]
        for mq in stalled:
            log.error("%s: pulling of %s stopped; dropping the queue to restart it", self.group, mq)
            await self.remove_process_queue(mq)
        new = sorted({mq for mqs in wanted.values() for mq in mqs if mq not in table})
        if new and self.lock_required:
            locked = await self.lock(new)
            for mq in new:
                if mq not in locked:
                    log.info("%s: %s is locked by another member; not consumed for now", self.group, mq)
            new = [mq for mq in new if mq in locked]
        added = []
        for mq in new:
            if not self._running():
                break
            self.offset_store.remove_offset(mq)
            try:
                offset = await self.compute_pull_from_where(mq)
            except (MQClientError, ValueError) as e:
                log.warning("%s: cannot tell where to start %s: %s", self.group, mq, e)
                continue
            pq = ProcessQueue(mq, offset)
            if self.lock_required:
                pq.locked, pq.last_lock_time = True, time.monotonic()
            table[mq] = pq
            self._dispatch_pull_request(pq)
            added.append(f"{mq}@{offset}")
        if drop or added:
            log.info(
                "%s (%s) rebalanced: +[%s] -[%s]",
                self.group,
                self.client_id,
                ", ".join(added),
                ", ".join(map(str, drop)),
            )

    async def remove_process_queue(self, mq: MessageQueue) -> None:
        """Stop pulling ``mq``, store its offset and forget it; orderly: unlock it once its
        handler call is over (Java's removeUnnecessaryMessageQueue)."""
        pq = self.process_queue_table.pop(mq)
        pq.dropped = True
        await _stop_pulling(pq)
        if self.lock_required:
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
                await self.unlock([mq])
            finally:
                pq.consume_lock.release()
            return
        await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The stored offset of ``mq``, else the start ``consume_from_where`` gives: LAST (max
        offset; retry queues from 0), FIRST (min offset) or TIMESTAMP (retry queues: max)."""
        last = await self.offset_store.read_offset(mq, ReadOffsetType.STORE)
        if last >= 0:
            return last
        is_retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        api = self.instance.api
        addr = await self.instance.broker_addr(mq)
        if self.consume_from_where is ConsumeFromWhere.LAST:
            return 0 if is_retry else int(await api.get_max_offset(addr, mq.topic, mq.queue_id))
        if self.consume_from_where is ConsumeFromWhere.FIRST:
            return int(await api.get_min_offset(addr, mq.topic, mq.queue_id))
        if is_retry:
            return int(await api.get_max_offset(addr, mq.topic, mq.queue_id))
        ts = self.consume_timestamp_ms
        if ts is None:  # Java's default: half an hour ago
            ts = int(time.time() * 1000) - 30 * 60 * 1000
        return int(await api.search_offset(addr, mq.topic, mq.queue_id, ts))

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """Drop the queues of ``topic`` held here that ``table`` names and store their new
        offsets (here and on the broker); the next round takes them again from there."""
        async with self.rebalance_lock:
            for mq in [mq for mq in self.process_queue_table if mq.topic == topic and mq in table]:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True  # in-flight results no longer move its offset
                await _stop_pulling(pq)
                self.offset_store.update_offset(mq, table[mq])
                try:
                    await self.offset_store.persist(mq)
                except MQClientError as e:
                    log.warning("%s: storing the reset offset of %s failed: %s", self.group, mq, e)
                self.offset_store.remove_offset(mq)

    async def destroy(self) -> None:
        """Shutdown (after the offsets were stored): unlock every queue (orderly), drop them all."""
        if self.lock_required:
            await self.unlock(list(self.process_queue_table))
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()

    # -- broker locks (orderly, CLUSTERING) ---------------------------------------------------

    async def lock(self, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ per broker; the queues this member holds now."""
        locked: set[MessageQueue] = set()
        for _, broker_mqs in sorted(_by_broker(mqs).items()):
            try:
                addr = await self.instance.broker_addr(broker_mqs[0])
                locked |= await self.instance.api.lock_batch_mq(addr, self.group, self.client_id, broker_mqs)
            except MQClientError as e:
                log.info("%s: lock of %s failed: %s", self.group, broker_mqs, e)
        return locked

    async def unlock(self, mqs: Iterable[MessageQueue]) -> None:
        for _, broker_mqs in sorted(_by_broker(mqs).items()):
            try:
                addr = await self.instance.broker_addr(broker_mqs[0])
                await self.instance.api.unlock_batch_mq(addr, self.group, self.client_id, broker_mqs)
            except MQClientError as e:
                log.info("%s: unlock of %s failed: %s", self.group, broker_mqs, e)
            for mq in broker_mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False

    async def lock_all(self) -> None:
        """Renew the locks of every queue held (Java's lockAll, every 20 s)."""
        mqs = list(self.process_queue_table)
        if not mqs:
            return
        locked = await self.lock(mqs)
        now = time.monotonic()
        for mq in mqs:
            pq = self.process_queue_table.get(mq)
            if pq is None:
                continue
            if mq in locked:
                pq.locked, pq.last_lock_time = True, now
            elif pq.locked:
                log.warning("%s: lost the lock of %s", self.group, mq)
                pq.locked = False


def _by_broker(mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
    out: dict[str, list[MessageQueue]] = {}
    for mq in mqs:
        out.setdefault(mq.broker_name, []).append(mq)
    return out


async def _stop_pulling(pq: ProcessQueue) -> None:
    if pq.pull_task is not None:
        pq.pull_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pq.pull_task
