"""Pumice clients against running processes: what several test files do with them.

``create_topic`` creates a topic through a cluster's name server and waits for its route;
``responding`` is a consumer that answers request messages; ``sql_push`` / ``sql_lite_pull``
consume with a SQL92 selector and ``settle`` waits for what they get; ``FAST`` are push
consumer settings for tests.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pumice.client import (
    AsyncMQAdmin,
    ConsumeFromWhere,
    ConsumeStatus,
    LitePullConsumer,
    MessageSelector,
    Producer,
    PushConsumer,
    create_reply_message,
)
from tests.helpers.waiting import eventually_async

if TYPE_CHECKING:
    from tests.helpers.clusters import Cluster


# consumers tuned for tests: quick persistence and retries (the protocol timings stay as in Java)
FAST = {"persist_consumer_offset_interval_s": 0.5, "pull_delay_on_error_s": 0.5, "shutdown_await_s": 5.0}


async def create_topic(cluster: Cluster, topic: str, queues: int = 4, cluster_name: str = "TestCluster") -> None:
    """Create ``topic`` through ``cluster.ns`` (Pumice's admin client) and wait for its route."""
    async with AsyncMQAdmin(cluster.ns) as admin:
        await admin.create_topic(topic, cluster=cluster_name, read_queue_nums=queues, write_queue_nums=queues)
        await eventually_async(lambda: admin.topic_route(topic), what=f"route of {topic}")


@contextlib.contextmanager
def responding(ns: str, topic: str, group: str) -> Iterator[list[dict[str, str]]]:
    """A Pumice consumer of ``topic`` answering each request with ``create_reply_message``
    (body "re:" + the request's); yields the requests' properties, as they come."""
    replier = Producer(f"{group}-reply", ns)
    replier.start()
    seen: list[dict[str, str]] = []
    lock = threading.Lock()

    def handle(msgs, ctx) -> ConsumeStatus:
        for m in msgs:
            with lock:
                seen.append(dict(m.properties))
            replier.send(create_reply_message(m, b"re:" + m.body))
        return ConsumeStatus.SUCCESS

    consumer = PushConsumer(group, ns, consume_from_where=ConsumeFromWhere.FIRST)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(handle)
    consumer.start()
    try:
        yield seen
    finally:
        consumer.shutdown()
        replier.shutdown()


@contextlib.contextmanager
def sql_push(ns: str, group: str, topic: str, sql: str) -> Iterator[list[int]]:
    """A push consumer of ``topic`` with the SQL92 selector ``sql``, from the first offset: the
    "n" property of each message it gets, as they come."""
    got: list[int] = []
    lock = threading.Lock()

    def handle(msgs, ctx) -> ConsumeStatus:
        with lock:
            got.extend(int(m.properties["n"]) for m in msgs)
        return ConsumeStatus.SUCCESS

    push = PushConsumer(group, ns, consume_from_where=ConsumeFromWhere.FIRST)
    push.subscribe(topic, MessageSelector.by_sql(sql))
    push.register_message_listener(handle)
    push.start()
    try:
        yield got
    finally:
        push.shutdown()


def settle(got: list[int], want: int, timeout_s: float = 30) -> list[int]:
    """Wait for ``want`` entries, then a second more for any that should not come."""
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    return sorted(got)


def sql_lite_pull(ns: str, group: str, topic: str, sql: str, want: int) -> list[int]:
    """The "n" of every message a lite-pull consumer with ``sql`` polls (``want``, then 1 s more)."""
    lite = LitePullConsumer(group, ns, auto_commit=False)
    lite.subscribe(topic, MessageSelector.by_sql(sql))
    lite.start()
    pulled: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while len(pulled) < want and time.monotonic() < deadline:
            pulled += [int(m.properties["n"]) for m in lite.poll(0.5)]
        pulled += [int(m.properties["n"]) for m in lite.poll(1.0)]
    finally:
        lite.shutdown()
    return sorted(pulled)
