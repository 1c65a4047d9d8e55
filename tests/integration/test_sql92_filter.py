"""SQL92 filtering with the Pumice client against real `pumice namesrv` and `pumice broker`
processes (``enablePropertyFilter=true``): push and lite-pull consumers subscribed with
``MessageSelector.by_sql`` get exactly what their expressions select. (tests/interop runs the
Java client's ``MessageSelector.bySql``.)"""

from __future__ import annotations

import asyncio

import pytest

from pumice.client import (
    Message,
    MessageSelector,
    Producer,
)
from pumice.sql92 import Sql92Error
from tests.helpers.clients import create_topic, settle, sql_lite_pull, sql_push
from tests.helpers.clusters import Cluster, running_cluster

cluster = running_cluster("sql92", "enablePropertyFilter=true\n")


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
