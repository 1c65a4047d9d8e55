"""SQL92 filtering with the Pumice client against real `pumice namesrv` and `pumice broker`
processes (``enablePropertyFilter=true``): push and lite-pull consumers subscribed with
``MessageSelector.by_sql`` get exactly what their expressions select. (tests/interop runs the
Java client's ``MessageSelector.bySql``.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

import pytest

from pumice.client import (
    ConsumeFromWhere,
    ConsumeStatus,
    LitePullConsumer,
    Message,
    MessageSelector,
    Producer,
    PushConsumer,
)
from pumice.sql92 import Sql92Error
from tests.integration.conftest import running_cluster
from tests.integration.test_broker_process import Cluster
from tests.integration.test_client_producer import create_topic

cluster = running_cluster("sql92", "enablePropertyFilter=true\n")


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


def test_push_and_lite_pull_consumers_get_what_their_sql_selects(cluster: Cluster) -> None:
    asyncio.run(create_topic(cluster, "SqlTopic"))
    with Producer("PSql", cluster.ns) as p:
        for n in range(30):
            p.send(Message("SqlTopic", b"n%d" % n, tags="even" if n % 2 == 0 else "odd", properties={"n": str(n)}))
    with sql_push(cluster.ns, "CSqlPush", "SqlTopic", "n >= 10 AND n < 20 AND TAGS = 'even'") as got:
        assert settle(got, 5) == [10, 12, 14, 16, 18]
    assert sql_lite_pull(cluster.ns, "CSqlLite", "SqlTopic", "n < 3 OR n IS NULL", 3) == [0, 1, 2]


def test_an_expression_that_does_not_compile_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(Sql92Error, match="Invalid syntax: n >"):
        MessageSelector.by_sql("n >")
