"""SQL92 filtering with the Pumice client against real `pumice namesrv` and `pumice broker`
processes (``enablePropertyFilter=true``): push and lite-pull consumers subscribed with
``MessageSelector.by_sql`` get exactly what their expressions select. (tests/interop runs the
Java client's ``MessageSelector.bySql``.)"""

from __future__ import annotations

import asyncio
import threading
import time

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


def test_push_and_lite_pull_consumers_get_what_their_sql_selects(cluster: Cluster) -> None:
    asyncio.run(create_topic(cluster, "SqlTopic"))
    with Producer("PSql", cluster.ns) as p:
        for n in range(30):
            p.send(Message("SqlTopic", b"n%d" % n, tags="even" if n % 2 == 0 else "odd", properties={"n": str(n)}))
    got: list[int] = []
    lock = threading.Lock()

    def handle(msgs, ctx) -> ConsumeStatus:
        with lock:
            got.extend(int(m.properties["n"]) for m in msgs)
        return ConsumeStatus.SUCCESS

    push = PushConsumer("CSqlPush", cluster.ns, consume_from_where=ConsumeFromWhere.FIRST)
    push.subscribe("SqlTopic", MessageSelector.by_sql("n >= 10 AND n < 20 AND TAGS = 'even'"))
    push.register_message_listener(handle)
    push.start()
    try:
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
    finally:
        push.shutdown()
    assert sorted(got) == [10, 12, 14, 16, 18]

    lite = LitePullConsumer("CSqlLite", cluster.ns, auto_commit=False)
    lite.subscribe("SqlTopic", MessageSelector.by_sql("n < 3 OR n IS NULL"))
    lite.start()
    pulled: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while len(pulled) < 3 and time.monotonic() < deadline:
            pulled += [int(m.properties["n"]) for m in lite.poll(0.5)]
        pulled += [int(m.properties["n"]) for m in lite.poll(1.0)]
    finally:
        lite.shutdown()
    assert sorted(pulled) == [0, 1, 2]


def test_an_expression_that_does_not_compile_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(Sql92Error, match="Invalid syntax: n >"):
        MessageSelector.by_sql("n >")
