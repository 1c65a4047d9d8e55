"""Producers: ``AsyncProducer`` (asyncio) and ``Producer`` (the same calls, blocking).

``AsyncProducer`` is RocketMQ's DefaultMQProducer for asyncio code; every method is a
coroutine run on the caller's loop. ``Producer`` owns a private loop in a background thread
(``sync_loop.BackgroundLoop``) and forwards each call to an ``AsyncProducer`` there;
``Producer.send_async`` takes a callback ``callback(result, error)`` run in that thread.

Sending, as the Java client does:

* validation: topic name (``^[%|a-zA-Z0-9_-]+$``, ≤ 127 characters, not TBW102), a
  non-empty body of at most ``max_message_size`` (4 MiB);
* a UNIQ_KEY property (``message_id``) unless the message has one; ``SendResult.msg_id`` is it;
* bodies longer than ``compress_msg_body_over_howmuch`` (4096) bytes are zlib-compressed
  (level 5) and sent with sysFlag bit 0 (COMPRESSED_FLAG); batches are never compressed;
* route: the topic's write queues; a topic the name server does not know is sent to the
  queues of TBW102's brokers (``default_topic_queue_nums`` = 4 per broker) with defaultTopic
  TBW102, so a broker with autoCreateTopicEnable creates it;
* queue: round robin (``queue_selector``), skipping the broker that failed last and, with
  ``send_latency_fault_enable`` (on by default here, off in Java), brokers the
  ``LatencyFaultTolerance`` marks unavailable; or ``mq=`` given, or ``selector(mqs, msg, arg)``;
* retries: up to ``retry_times_when_send_failed`` (2) more attempts, each on a queue picked
  again, when no answer came or the broker answered TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE,
  SYSTEM_ERROR, NO_PERMISSION, NO_BUYER_ID or NOT_IN_CURRENT_UNIT; all attempts share the
  ``send_msg_timeout_s`` (3 s) budget; sends to a given ``mq`` or through a selector and
  oneway sends are tried once. The last attempt's error is raised (``MQBrokerError`` or
  ``RemotingError``).
* to a ``%RETRY%<group>`` topic, the RECONSUME_TIME and MAX_RECONSUME_TIMES properties go in
  the request header (reconsumeTimes, maxReconsumeTimes) instead, as the Java producer sends
  them: the broker moves a message that has used up its retries to ``%DLQ%<group>``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import ssl
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from pumice.client.client_instance import MQClientInstance, own_instance
from pumice.client.exceptions import MQBrokerError, MQClientError, RemotingError, RequestTimeoutError
from pumice.client.latency_fault_tolerance import LatencyFaultTolerance
from pumice.client.message import (
    COMPRESSED_FLAG,
    PROPERTY_UNIQ_KEY,
    Message,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
)
from pumice.client.message_batch import check_batch, encode_batch
from pumice.client.message_id import UniqKeyGenerator
from pumice.client.queue_selector import QueueSelector, RoundRobin, by_arg_hash, select_one_message_queue
from pumice.client.request_reply import REPLY_MESSAGE_FLAG
from pumice.client.sync_loop import SyncClient
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import message_properties_to_string
from pumice.common.mix_all import AUTO_CREATE_TOPIC_KEY_TOPIC, DEFAULT_PRODUCER_GROUP, RETRY_GROUP_TOPIC_PREFIX
from pumice.remoting.response_code import ResponseCode

PROPERTY_RECONSUME_TIME = MessageConst.PROPERTY_RECONSUME_TIME
PROPERTY_MAX_RECONSUME_TIMES = MessageConst.PROPERTY_MAX_RECONSUME_TIMES


def _int_or(value: str | None, default: int | None) -> int | None:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


log = logging.getLogger(__name__)

MAX_TOPIC_LENGTH = 127
_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
_UNIQ = UniqKeyGenerator()  # one per process, as Java's static MessageClientIDSetter


_CHECKED_TOPICS: set[str] = set()  # topics that passed check_topic: a producer sends to few


def check_topic(topic: str) -> None:
    if topic in _CHECKED_TOPICS:
        return
    if not topic or not topic.strip():
        raise MQClientError("the topic is blank")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise MQClientError(f"the topic is longer than {MAX_TOPIC_LENGTH} characters: {topic!r}")
    if not _TOPIC_RE.match(topic):
        raise MQClientError(f"the topic {topic!r} has characters outside ^[%|a-zA-Z0-9_-]+$")
    if topic == AUTO_CREATE_TOPIC_KEY_TOPIC:
        raise MQClientError(f"the topic {topic} is reserved for auto-creation")
    if len(_CHECKED_TOPICS) < 4096 and type(topic) is str:
        _CHECKED_TOPICS.add(topic)


def check_message(msg: Message, max_message_size: int) -> None:
    check_topic(msg.topic)
    if not msg.body:
        raise MQClientError("the message body is empty")
    if len(msg.body) > max_message_size:
        raise MQClientError(f"the message body is {len(msg.body)} bytes, more than max_message_size {max_message_size}")


def compress_body(body: bytes, threshold: int, level: int = 5) -> tuple[bytes, int]:
    """(body to send, sysFlag bits): zlib and COMPRESSED_FLAG when ``len(body) > threshold``."""
    if len(body) > threshold:
        return zlib.compress(body, level), COMPRESSED_FLAG
    return body, 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AsyncProducer:
    """RocketMQ's DefaultMQProducer for asyncio (see the module docstring)."""

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        namesrv_addr: str = "127.0.0.1:9876",
        *,
        client_instance: MQClientInstance | None = None,
        instance_name: str | None = None,
        send_msg_timeout_s: float = 3.0,
        retry_times_when_send_failed: int = 2,
        compress_msg_body_over_howmuch: int = 4096,
        compress_level: int = 5,
        max_message_size: int = 4 * 1024 * 1024,
        default_topic_queue_nums: int = 4,
        send_latency_fault_enable: bool = True,
        retry_another_broker_when_not_store_ok: bool = False,
        access_key: str | None = None,
        secret_key: str | None = None,
        use_tls: bool | ssl.SSLContext = False,
    ) -> None:
        self.group = group
        self.namesrv_addr = namesrv_addr
        self.send_msg_timeout_s = send_msg_timeout_s
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.fault = LatencyFaultTolerance() if send_latency_fault_enable else None
        self._owns_instance = client_instance is None
        self.instance = own_instance(
            client_instance,
            namesrv_addr,
            instance_name=instance_name,
            access_key=access_key,
            secret_key=secret_key,
            use_tls=use_tls,
        )
        self._counter = RoundRobin()
        self._auto_create: dict[str, float] = {}  # topic → when the name server last had no route
        self._pending: set[asyncio.Task[Any]] = set()
        self.started = False

    async def start(self) -> None:
        if self.started:
            return
        self.instance.register_producer(self.group)
        await self.instance.start()
        self.started = True

    async def shutdown(self) -> None:
        if not self.started:
            return
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        self.started = False
        await self.instance.unregister_producer(self.group)
        if self._owns_instance:
            await self.instance.shutdown()

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- routes -----------------------------------------------------------------------------

    def _known_publish_queues(self, topic: str) -> list[MessageQueue] | None:
        """The write queues of a topic whose route is cached (no coroutine on the send path)."""
        route = self.instance.topic_routes.get(topic)
        if route is None:
            return None
        return route.publish_queues(topic) or None

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's write queues (TBW102's brokers, 4 queues each, while the topic has no route)."""
        route = self.instance.topic_routes.get(topic)
        checked = self._auto_create.get(topic)
        if route is None and (
            checked is None or time.monotonic() - checked > self.instance.poll_name_server_interval_s
        ):
            try:
                route = await self.instance.update_topic_route(topic)
                self._auto_create.pop(topic, None)
            except MQBrokerError as e:
                if e.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
                self._auto_create[topic] = time.monotonic()
        if route is not None:
            mqs = route.publish_queues(topic)
            if mqs:
                return mqs
            if route.queue_datas:
                # The topic exists but takes no sends: its queues are read-only, or its brokers
                # have no master. As RocketMQ's client, do not fall back to TBW102 then.
                names = sorted({qd.broker_name for qd in route.queue_datas})
                if not any((bd := route.broker(n)) is not None and bd.master_addr for n in names):
                    raise MQClientError(
                        f"topic {topic} has no writable queue: no master broker of {', '.join(names)} is in its "
                        "route (a slave cannot take sends)"
                    )
                raise MQClientError(f"topic {topic} has no writable queue: its queues are read-only")
        try:
            default = await self.instance.get_topic_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
        except MQBrokerError as e:
            if e.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            # the user's topic is what was asked for; TBW102 (the template) only tells why
            raise MQClientError(
                f"No route info of this topic: {topic}: the name server knows no broker that has it, and no "
                f"broker that creates topics is registered (no route for {AUTO_CREATE_TOPIC_KEY_TOPIC}). Is a "
                f"broker running and registered with this name server? Or create the topic: pumice admin "
                f"updateTopic -t {topic} -c <cluster>"
            ) from None
        mqs = []
        for qd in default.queue_datas:
            bd = default.broker(qd.broker_name)
            if bd is not None and bd.master_addr is not None and qd.perm & 2:
                mqs += [
                    MessageQueue(topic, qd.broker_name, i)
                    for i in range(min(self.default_topic_queue_nums, qd.write_queue_nums))
                ]
        if not mqs:
            raise MQClientError(
                f"No route info of this topic: {topic}: no broker has it, and no registered broker creates "
                f"topics (autoCreateTopicEnable=false everywhere). Create it: pumice admin updateTopic -t {topic} "
                "-c <cluster>"
            )
        return mqs

    # -- send -------------------------------------------------------------------------------

    def _prepare(self, msg: Message) -> tuple[dict[str, str], bytes, int]:
        check_message(msg, self.max_message_size)
        props = msg.wire_properties()
        props.setdefault(PROPERTY_UNIQ_KEY, _UNIQ.next_id())
        body, sys_flag = compress_body(msg.body, self.compress_msg_body_over_howmuch, self.compress_level)
        return props, body, sys_flag

    async def _send_to(
        self,
        mq: MessageQueue,
        msg: Message,
        props: dict[str, str],
        body: bytes,
        sys_flag: int,
        *,
        batch: bool,
        oneway: bool,
        timeout_s: float,
    ) -> SendResult | None:
        instance = self.instance
        addr = instance.find_broker_addr(mq.broker_name, only_this_broker=False) or await instance.broker_addr(mq)
        uniq = props.get(PROPERTY_UNIQ_KEY) if not batch else None
        reconsume = 0
        max_reconsume: int | None = None
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # as the Java producer: a retry message's counts travel in the header, where the
            # broker reads them to choose between the retry topic and the DLQ
            props = dict(props)  # a later retry on another broker needs them again
            reconsume = _int_or(props.pop(PROPERTY_RECONSUME_TIME, None), 0) or 0
            max_reconsume = _int_or(props.pop(PROPERTY_MAX_RECONSUME_TIMES, None), None)
        return await self.instance.api.send_message(
            addr,
            mq.broker_name,
            group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            body=body,
            properties=message_properties_to_string(props),
            sys_flag=sys_flag,
            born_timestamp=_now_ms(),
            flag=msg.flag,
            batch=batch,
            default_topic_queue_nums=self.default_topic_queue_nums,
            reconsume_times=reconsume,
            max_reconsume_times=max_reconsume,
            uniq_id=uniq,
            oneway=oneway,
            timeout_s=timeout_s,
            reply=props.get(MessageConst.PROPERTY_MESSAGE_TYPE) == REPLY_MESSAGE_FLAG,
            mq=mq,
        )

    async def _send(
        self,
        msg: Message,
        props: dict[str, str],
        body: bytes,
        sys_flag: int,
        *,
        mq: MessageQueue | None,
        selector: QueueSelector | None,
        arg: Any,
        timeout_s: float | None,
        batch: bool,
        oneway: bool,
    ) -> SendResult | None:
        if not self.started:
            raise MQClientError("the producer is not started")
        timeout = self.send_msg_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        if mq is not None or selector is not None:
            if mq is None:
                assert selector is not None
                mqs = await self.fetch_publish_message_queues(msg.topic)
                mq = selector(mqs, msg, arg)
            return await self._send_to(
                mq,
                msg,
                props,
                body,
                sys_flag,
                batch=batch,
                oneway=oneway,
                timeout_s=max(deadline - time.monotonic(), 0.001),
            )
        mqs = self._known_publish_queues(msg.topic) or await self.fetch_publish_message_queues(msg.topic)
        times = 1 if oneway else 1 + max(self.retry_times_when_send_failed, 0)
        last_broker: str | None = None
        last_error: Exception | None = None
        for attempt in range(times):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            mq = select_one_message_queue(mqs, self._counter, last_broker, self.fault)
            last_broker = mq.broker_name
            begin = time.monotonic()
            try:
                result = await self._send_to(
                    mq, msg, props, body, sys_flag, batch=batch, oneway=oneway, timeout_s=remaining
                )
            except RemotingError as e:
                self._fault(mq.broker_name, begin, isolation=True)
                last_error = e
                log.info("send to %s failed (attempt %d): %s", mq, attempt + 1, e)
                continue
            except MQBrokerError as e:
                self._fault(mq.broker_name, begin, isolation=True)
                last_error = e
                if e.code in RETRY_RESPONSE_CODES:
                    log.info("send to %s failed (attempt %d): %s", mq, attempt + 1, e)
                    continue
                raise
            self._fault(mq.broker_name, begin, isolation=False)
            if (
                result is not None
                and result.send_status != SendStatus.SEND_OK
                and self.retry_another_broker_when_not_store_ok
                and attempt + 1 < times
            ):
                continue
            return result
        if last_error is None:
            raise MQClientError(f"send of a message to {msg.topic} timed out after {timeout:g} s")
        raise last_error

    def _fault(self, broker_name: str, begin: float, isolation: bool) -> None:
        if self.fault is not None:
            self.fault.update_fault_item(broker_name, (time.monotonic() - begin) * 1000, isolation)

    async def send(
        self,
        msg: Message,
        mq: MessageQueue | None = None,
        *,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer (retrying as the module docstring says)."""
        props, body, sys_flag = self._prepare(msg)
        result = await self._send(
            msg,
            props,
            body,
            sys_flag,
            mq=mq,
            selector=selector,
            arg=arg,
            timeout_s=timeout_s,
            batch=False,
            oneway=False,
        )
        assert result is not None
        return result

    async def send_orderly(self, msg: Message, sharding_key: Any, timeout_s: float | None = None) -> SendResult:
        """Send to the queue ``sharding_key`` hashes to (messages of one key stay in order)."""
        return await self.send(msg, selector=by_arg_hash, arg=sharding_key, timeout_s=timeout_s)

    def send_async(
        self,
        msg: Message,
        mq: MessageQueue | None = None,
        *,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout_s: float | None = None,
    ) -> asyncio.Task[SendResult]:
        """Start a send and return its task at once (await it, or add a done callback)."""
        task = asyncio.ensure_future(self.send(msg, mq, selector=selector, arg=arg, timeout_s=timeout_s))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def request(self, msg: Message, timeout_s: float = 3.0) -> MessageExt:
        """Request-reply (DefaultMQProducer.request): send ``msg`` with CORRELATION_ID,
        REPLY_TO_CLIENT (this client) and TTL, and wait for the reply a consumer sends with
        ``create_reply_message``; the broker pushes it here (PUSH_REPLY_MESSAGE_TO_CLIENT).
        RequestTimeoutError if none comes within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        correlation_id = str(uuid.uuid4())
        msg.properties[MessageConst.PROPERTY_CORRELATION_ID] = correlation_id
        msg.properties[MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT] = self.instance.client_id
        msg.properties[MessageConst.PROPERTY_MESSAGE_TTL] = str(int(timeout_s * 1000))
        if msg.topic not in self.instance.topic_routes:  # as the Java producer: the broker must know us first
            await self.fetch_publish_message_queues(msg.topic)
            await self.instance.send_heartbeat_to_all_brokers()
        waiter = self.instance.expect_reply(correlation_id)
        try:
            await self.send(msg, timeout_s=max(deadline - time.monotonic(), 0.001))
            return await asyncio.wait_for(waiter, max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            raise RequestTimeoutError(
                f"request timeout, no reply message within {timeout_s:g}s (CORRELATION_ID {correlation_id})"
            ) from None
        finally:
            self.instance.forget_reply(correlation_id)

    async def send_oneway(
        self, msg: Message, mq: MessageQueue | None = None, *, selector: QueueSelector | None = None, arg: Any = None
    ) -> None:
        """Send without waiting for (or getting) an answer: one attempt."""
        props, body, sys_flag = self._prepare(msg)
        await self._send(
            msg, props, body, sys_flag, mq=mq, selector=selector, arg=arg, timeout_s=None, batch=False, oneway=True
        )

    async def send_batch(
        self, msgs: Sequence[Message], mq: MessageQueue | None = None, timeout_s: float | None = None
    ) -> SendResult:
        """Several messages of one topic in one SEND_BATCH_MESSAGE (stored together, in order,
        in one queue). ``msg_id`` and ``offset_msg_id`` of the result are comma-joined."""
        topic = check_batch(msgs)
        check_topic(topic)
        props_list = []
        for m in msgs:
            if not m.body:
                raise MQClientError("a batch message has an empty body")
            p = m.wire_properties()
            p.setdefault(PROPERTY_UNIQ_KEY, _UNIQ.next_id())
            props_list.append(p)
        body = encode_batch(msgs, props_list)
        if len(body) > self.max_message_size:
            raise MQClientError(f"the batch is {len(body)} bytes, more than max_message_size {self.max_message_size}")
        head = Message(topic, body, wait_store_msg_ok=msgs[0].wait_store_msg_ok)
        result = await self._send(
            head,
            {"WAIT": "true" if head.wait_store_msg_ok else "false"},
            body,
            0,
            mq=mq,
            selector=None,
            arg=None,
            timeout_s=timeout_s,
            batch=True,
            oneway=False,
        )
        assert result is not None
        result.msg_id = ",".join(p[PROPERTY_UNIQ_KEY] for p in props_list)
        return result


SendCallback = Callable[[SendResult | None, BaseException | None], Any]


class Producer(SyncClient):
    """The blocking producer: an ``AsyncProducer`` on a private background loop.

    Same constructor arguments as ``AsyncProducer``; ``self.impl`` is that producer.
    """

    impl: AsyncProducer

    def __init__(
        self, group: str = DEFAULT_PRODUCER_GROUP, namesrv_addr: str = "127.0.0.1:9876", **kwargs: Any
    ) -> None:
        super().__init__(f"pumice-producer-{group}", lambda: AsyncProducer(group, namesrv_addr, **kwargs))

    def send(
        self,
        msg: Message,
        mq: MessageQueue | None = None,
        *,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        return self._loop.run(self.impl.send(msg, mq, selector=selector, arg=arg, timeout_s=timeout_s))

    def send_orderly(self, msg: Message, sharding_key: Any, timeout_s: float | None = None) -> SendResult:
        return self._loop.run(self.impl.send_orderly(msg, sharding_key, timeout_s))

    def request(self, msg: Message, timeout_s: float = 3.0) -> MessageExt:
        """``AsyncProducer.request``: the reply, or RequestTimeoutError."""
        return self._loop.run(self.impl.request(msg, timeout_s))

    def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        mq: MessageQueue | None = None,
        *,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout_s: float | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Return at once; ``callback(result, None)`` or ``callback(None, error)`` runs in the
        client's loop thread when the send ends (it must not call this producer's blocking methods)."""
        fut = self._loop.submit(self.impl.send(msg, mq, selector=selector, arg=arg, timeout_s=timeout_s))
        if callback is not None:

            def done(f: concurrent.futures.Future[SendResult]) -> None:
                try:
                    if f.cancelled():
                        callback(None, concurrent.futures.CancelledError())
                        return
                    err = f.exception()
                    callback(None if err else f.result(), err)
                except Exception as e:  # the user's callback must not kill the loop thread
                    log.warning("send callback failed: %s", e)

            fut.add_done_callback(done)
        return fut

    def send_oneway(
        self, msg: Message, mq: MessageQueue | None = None, *, selector: QueueSelector | None = None, arg: Any = None
    ) -> None:
        self._loop.run(self.impl.send_oneway(msg, mq, selector=selector, arg=arg))

    def send_batch(
        self, msgs: Sequence[Message], mq: MessageQueue | None = None, timeout_s: float | None = None
    ) -> SendResult:
        return self._loop.run(self.impl.send_batch(msgs, mq, timeout_s))

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._loop.run(self.impl.fetch_publish_message_queues(topic))
