"""Consumption of pulled messages: the push consumer's ConsumeMessage*Service.

======================================  ==========================================================
name                                    what
======================================  ==========================================================
``ConsumeStatus``, ``ConsumeContext``   a handler's answer; what a handler call is about
``ConsumeMessageService``               the shared base: ``consume_thread_count`` worker tasks
                                        on one request queue, a thread pool for plain handlers,
                                        ``invoke`` (call the handler), delayed re-submits
``ConsumeMessageConcurrentlyService``   up to ``consume_message_batch_max_size`` messages a
                                        call, in any order; RECONSUME_LATER sends them back
``ConsumeMessageOrderlyService``        one call at a time per queue, in offset order, under
                                        the queue's broker lock (CLUSTERING); RECONSUME_LATER
                                        suspends the queue, then the DLQ after the maximum
``SendBack``                            CONSUMER_SEND_MSG_BACK, else a resend to
                                        ``%RETRY%<group>`` by an inner producer
``reset_retry_topic``                   retried messages show their original topic
======================================  ==========================================================

Concurrent (ConsumeMessageConcurrentlyService): RECONSUME_LATER sends each message back
(delay level ``context.delay_level_when_next_consume``, 0 = the broker's 3 + reconsumeTimes;
after ``max_reconsume_times``, 16, the broker moves it to ``%DLQ%<group>``); when the send-back
fails the message is sent to ``%RETRY%<group>`` by an inner producer instead (as Java's client
does, with RECONSUME_TIME and MAX_RECONSUME_TIMES so the broker can choose the DLQ); when that
fails too it is consumed again locally after ``consume_retry_local_delay_s`` (5 s) with
reconsume_times + 1, and holds its queue's offset meanwhile. BROADCASTING drops failed messages
(as Java does).

Orderly (ConsumeMessageOrderlyService): RECONSUME_LATER (= SUSPEND_CURRENT_QUEUE_A_MOMENT)
suspends the queue for ``context.suspend_current_queue_time_s`` (1 s) and gives the same
messages again with reconsume_times + 1; once a message reached ``max_reconsume_times``
(unlimited by default for orderly) it is sent to the DLQ (send-back with delay level -1). A
queue whose lock is missing or expired is locked again first; a queue consumed for over
``MAX_TIME_CONSUME_CONTINUOUSLY_S`` gives its worker to the others.

A coroutine handler is awaited on the consumer's loop; a plain one runs in the thread pool.
Everything else runs on the event loop; the services hold no locks of their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from pumice.client.client_instance import MQClientInstance
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
)
from pumice.client.offset_store import OffsetStore
from pumice.client.process_queue import ProcessQueue
from pumice.client.producer import AsyncProducer
from pumice.common.message_const import MessageConst
from pumice.common.mix_all import CLIENT_INNER_PRODUCER_GROUP, get_retry_topic

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
# (message, its process queue, delay level) -> sent back (or re-sent); the consumer's sendMessageBack
SendBackFn = Callable[[MessageExt, ProcessQueue, int], Awaitable[bool]]


def reset_retry_topic(msgs: Iterable[MessageExt], group: str) -> None:
    """Messages from ``%RETRY%<group>`` show their original topic (RETRY_TOPIC), as in Java."""
    rt = get_retry_topic(group)
    for m in msgs:
        if m.topic == rt:  # first: most messages are not retries, and their properties stay unread
            original = m.properties.get(PROPERTY_RETRY_TOPIC)
            if original:
                m.topic = original


async def cancel_all(tasks: list[asyncio.Task[Any]], timeout_s: float = 10.0) -> None:
    """Cancel ``tasks`` and wait for them (bounded; a task that ignores the cancel is left)."""
    for t in tasks:
        t.cancel()
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        if pending:
            log.warning("%d tasks did not stop within %ss", len(pending), timeout_s)
    tasks.clear()


# -- send-back ------------------------------------------------------------------------------


class SendBack:
    """Giving a failed message back to the broker (Java's DefaultMQPushConsumerImpl.sendMessageBack).
    Counts ``sent_back`` and ``send_back_failed`` in ``stats``."""

    def __init__(self, instance: MQClientInstance, group: str, stats: dict[str, int]) -> None:
        self.instance = instance
        self.group = group
        self.stats = stats
        self._inner_producer: AsyncProducer | None = None  # started on the first failed send-back

    async def send_back(self, msg: MessageExt, mq: MessageQueue, delay_level: int, max_reconsume_times: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to ``mq``'s broker, else ``resend_to_retry_topic``; False when
        both failed."""
        try:
            addr = await self.instance.broker_addr(mq)
            await self.instance.api.consumer_send_message_back(addr, msg, self.group, delay_level, max_reconsume_times)
        except MQClientError as e:
            log.info(
                "%s: send-back of %s failed (%s); sending it to %s",
                self.group,
                msg.msg_id,
                e,
                get_retry_topic(self.group),
            )
            try:
                await self.resend_to_retry_topic(msg, delay_level, max_reconsume_times)
            except MQClientError as e2:
                self.stats["send_back_failed"] += 1
                log.info("%s: re-sending %s failed too: %s", self.group, msg.msg_id, e2)
                return False
        self.stats["sent_back"] += 1
        return True

    async def resend_to_retry_topic(self, msg: MessageExt, delay_level: int, max_reconsume_times: int) -> None:
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
        times = msg.reconsume_times + 1 if delay_level >= 0 else max(msg.reconsume_times + 1, max_reconsume_times)
        props[PROPERTY_RECONSUME_TIME] = str(times)
        props[PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
        resend = Message(
            get_retry_topic(self.group), msg.body, tags=tags, keys=keys, properties=props, flag=msg.flag,
            delay_time_level=delay_level if delay_level > 0 else 3 + msg.reconsume_times,
        )  # fmt: skip
        if self._inner_producer is None:
            self._inner_producer = AsyncProducer(CLIENT_INNER_PRODUCER_GROUP, client_instance=self.instance)
            await self._inner_producer.start()
        await self._inner_producer.send(resend)

    async def shutdown(self) -> None:
        if self._inner_producer is not None:
            await self._inner_producer.shutdown()
            self._inner_producer = None


# -- the services ---------------------------------------------------------------------------

RequestT = TypeVar("RequestT")


class ConsumeMessageService(ABC, Generic[RequestT]):
    """Worker tasks taking consume requests (``RequestT``) from one queue; ``invoke`` calls the
    handler. ``running()`` says whether the consumer still runs (nothing new starts once not);
    ``stats`` counts ``consumed_ok`` / ``consumed_failed`` messages. Built in the consumer's
    ``start`` (the thread pool is there for ``invoke`` at once); ``start`` starts the workers."""

    orderly = False

    def __init__(
        self,
        group: str,
        listener: MessageListener,
        offset_store: OffsetStore,
        *,
        clustering: bool,
        consume_thread_count: int,
        consume_message_batch_max_size: int,
        max_reconsume_times: int,
        send_back: SendBackFn,
        stats: dict[str, int],
        running: Callable[[], bool],
    ) -> None:
        self.group = group
        self.listener = listener
        self.listener_is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            getattr(listener, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        self.offset_store = offset_store
        self.clustering = clustering
        self.consume_thread_count = consume_thread_count
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.max_reconsume_times = max_reconsume_times
        self._send_back = send_back
        self.stats = stats
        self._running = running
        self.active = 0  # handler calls running
        self._executor = concurrent.futures.ThreadPoolExecutor(
            consume_thread_count, thread_name_prefix=f"pumice-consume-{group}"
        )
        self._requests: asyncio.Queue[RequestT] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._later_handles: set[asyncio.TimerHandle] = set()

    @abstractmethod
    def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, dispatch_to_consume: bool) -> None:
        """Pulled ``msgs`` were put into ``pq``; ``dispatch_to_consume``: ``put_messages`` asked for
        a consume request (Java's submitConsumeRequest)."""

    @abstractmethod
    async def _consume(self, req: RequestT) -> None:
        """Run one consume request (a worker calls it)."""

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._workers = [asyncio.create_task(self._worker()) for _ in range(self.consume_thread_count)]

    async def shutdown(self, await_s: float) -> None:
        """Drop pending re-submits, wait for running handler calls (at most ``await_s``; calls not
        started yet are dropped, their messages come again) and stop the workers."""
        for h in self._later_handles:
            h.cancel()
        self._later_handles.clear()
        try:
            async with asyncio.timeout(await_s):
                while self.active:  # polled: a per-call idle Event costs every call, this only shutdown
                    await asyncio.sleep(0.01)
        except TimeoutError:
            log.warning("%d handler calls of %s still running after %ss", self.active, self.group, await_s)
        await cancel_all(self._workers)

    def close(self) -> None:
        """Release the thread pool (after the consumer was unregistered: no more ``invoke``)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- running requests ---------------------------------------------------------------------

    async def _worker(self) -> None:
        q = self._requests
        while True:
            try:  # get_nowait first: no coroutine per request while a backlog lasts
                req = q.get_nowait()
            except asyncio.QueueEmpty:
                req = await q.get()
            if not self._running():
                continue  # shutting down: not started calls are dropped (their messages come again)
            try:
                await self._consume(req)
            except Exception:
                log.exception("%s: a consume request failed", self.group)

    def _submit(self, req: RequestT) -> None:
        if self._running():
            self._requests.put_nowait(req)

    def later(self, delay_s: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` after ``delay_s`` unless the consumer stopped meanwhile."""
        if not self._running():
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._later_handles.discard(handle)
            if self._running():
                fn()

        handle = loop.call_later(delay_s, fire)
        self._later_handles.add(handle)

    async def invoke(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        """The handler's answer; an exception or a non-ConsumeStatus counts as RECONSUME_LATER."""
        self.active += 1
        try:
            if self.listener_is_async:
                res = await self.listener(msgs, ctx)
            else:
                loop = asyncio.get_running_loop()
                res = await loop.run_in_executor(self._executor, self.listener, msgs, ctx)
                if inspect.isawaitable(res):
                    res = await res
        except Exception as e:
            log.warning("%s: the handler raised %s: %s (RECONSUME_LATER)", self.group, type(e).__name__, e)
            res = ConsumeStatus.RECONSUME_LATER
        finally:
            self.active -= 1
        if not isinstance(res, ConsumeStatus):
            log.warning("%s: the handler returned %r, not a ConsumeStatus (RECONSUME_LATER)", self.group, res)
            res = ConsumeStatus.RECONSUME_LATER
        self.stats["consumed_ok" if res is ConsumeStatus.SUCCESS else "consumed_failed"] += len(msgs)
        return res


class ConsumeMessageConcurrentlyService(ConsumeMessageService[tuple[list[MessageExt], ProcessQueue]]):
    """A request is (messages, their process queue); finished messages move the queue's offset
    to the smallest one still in flight."""

    def __init__(self, *args: Any, consume_retry_local_delay_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.consume_retry_local_delay_s = consume_retry_local_delay_s

    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, dispatch_to_consume: bool = True
    ) -> None:
        if not self._running():
            return
        put, n = self._requests.put_nowait, self.consume_message_batch_max_size
        if n == 1:
            for m in msgs:
                put(([m], pq))
        else:
            for i in range(0, len(msgs), n):
                put((msgs[i : i + n], pq))

    async def _consume(self, req: tuple[list[MessageExt], ProcessQueue]) -> None:
        msgs, pq = req
        if pq.dropped:
            return
        ctx = ConsumeContext(pq.mq)
        status = await self.invoke(msgs, ctx)
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
                    self.later(self.consume_retry_local_delay_s, lambda: self.submit_consume_request(failed, pq))
            else:
                log.warning("%s (BROADCASTING): %d messages failed and are dropped", self.group, len(msgs))
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(pq.mq, offset, increase_only=True)


class ConsumeMessageOrderlyService(ConsumeMessageService[ProcessQueue]):
    """A request is a process queue: consume its messages in order (``take_messages``) while
    there are some. ``lock`` is the rebalance's LOCK_BATCH_MQ (the queues held afterwards);
    ``spawn`` runs a background coroutine the consumer cancels at shutdown."""

    orderly = True

    def __init__(
        self,
        *args: Any,
        suspend_current_queue_time_s: float,
        lock: Callable[[list[MessageQueue]], Awaitable[set[MessageQueue]]],
        spawn: Callable[[Awaitable[Any]], None],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.suspend_current_queue_time_s = suspend_current_queue_time_s
        self._lock = lock
        self._spawn = spawn

    def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, dispatch_to_consume: bool) -> None:
        if dispatch_to_consume:
            self._submit(pq)

    def _submit_later(self, pq: ProcessQueue, delay_s: float) -> None:
        self.later(delay_s, lambda: self._submit(pq))

    async def _consume(self, pq: ProcessQueue) -> None:
        if pq.dropped:
            return
        async with pq.consume_lock:
            t0 = time.monotonic()
            while True:
                if pq.dropped or not self._running():
                    return
                if self.clustering and (not pq.locked or pq.is_lock_expired()):
                    self.later(0.1, lambda: self._spawn(self._try_lock_and_reconsume(pq, 3.0)))
                    return
                if time.monotonic() - t0 > MAX_TIME_CONSUME_CONTINUOUSLY_S:
                    self._submit_later(pq, 0.01)
                    return
                msgs = pq.take_messages(self.consume_message_batch_max_size)
                if not msgs:
                    return
                ctx = ConsumeContext(
                    pq.mq, orderly=True, suspend_current_queue_time_s=self.suspend_current_queue_time_s
                )
                status = await self.invoke(msgs, ctx)
                if status is ConsumeStatus.SUCCESS:
                    offset = pq.commit()
                else:
                    retry = await self._check_reconsume_times(msgs, pq)
                    pq.make_messages_to_consume_again(retry)
                    offset = pq.commit()  # the messages given to the DLQ, if any
                    if retry:
                        if offset >= 0:
                            self.offset_store.update_offset(pq.mq, offset)
                        self._submit_later(pq, max(ctx.suspend_current_queue_time_s, 0.01))
                        return
                if offset >= 0:
                    self.offset_store.update_offset(pq.mq, offset)

    async def _try_lock_and_reconsume(self, pq: ProcessQueue, delay_s: float) -> None:
        if pq.dropped or not self._running():
            return
        if pq.mq in await self._lock([pq.mq]):
            pq.locked, pq.last_lock_time = True, time.monotonic()
            self._submit_later(pq, 0.01)
        else:
            self._submit_later(pq, delay_s)

    async def _check_reconsume_times(self, msgs: list[MessageExt], pq: ProcessQueue) -> list[MessageExt]:
        """The messages to consume again (reconsume_times + 1); the others went to the DLQ."""
        retry = []
        for m in msgs:
            if m.reconsume_times >= self.max_reconsume_times:
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
