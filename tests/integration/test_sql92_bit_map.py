"""The SQL92 bloom-filter bit maps in a real `pumice broker` (``enableConsumeQueueExt`` and
``enableCalcFilterBitMap``) with the Pumice client: the maps are written to ConsumeQueueExt files,
the consumer filters to config/consumerFilter.json, and both are there again after a restart.
(tests/interop/test_java_sql92.py runs the Java client against the same settings.)"""

from __future__ import annotations

import asyncio
import time

import orjson

from pumice.client import (
    Message,
    Producer,
)
from pumice.store.consume_queue_ext import ConsumeQueueExt
from tests.helpers.clients import create_topic, settle, sql_lite_pull, sql_push
from tests.helpers.clusters import Cluster, running_cluster, stop

cluster = running_cluster(
    "sqlmap", "enablePropertyFilter=true\nenableConsumeQueueExt=true\nenableCalcFilterBitMap=true\n"
)


def test_bit_maps_and_consumer_filters_are_kept_across_a_restart(cluster: Cluster) -> None:
    asyncio.run(create_topic(cluster, "SqlMap"))
    with sql_push(cluster.ns, "CSqlMap", "SqlMap", "n >= 5") as got:
        time.sleep(1)  # registered at its first heartbeat: the maps of later messages carry its bits
        with Producer("PSqlMap", cluster.ns) as p:
            for n in range(10):
                p.send(Message("SqlMap", b"n%d" % n, properties={"n": str(n)}))
        assert settle(got, 5) == [5, 6, 7, 8, 9]

    stop(cluster.broker)
    store = cluster.tmp / "store"
    saved = orjson.loads((store / "config" / "consumerFilter.json").read_bytes())
    fd = saved["filterDataByTopic"]["SqlMap"]["groupFilterData"]["CSqlMap"]
    assert (fd["expression"], fd["expressionType"], fd["dead"]) == ("n >= 5", "SQL92", True)  # its member left
    assert fd["bloomFilterData"]["bitNum"] == 112 and len(fd["bloomFilterData"]["bitPos"]) == 3
    # every entry of the topic has a unit; the maps carry the group's bits exactly for n >= 5
    hits = []
    for qdir in sorted((store / "consumequeue_ext" / "SqlMap").iterdir()):
        ext = ConsumeQueueExt("SqlMap", int(qdir.name), str(store / "consumequeue_ext"), 48 * 1024 * 1024)
        assert ext.load()
        ext.recover()
        pos, units = 0, []
        while (unit := ext.get(ext.get_min_address() + pos)) is not None:
            units.append(unit)
            pos += unit.size
        ext.shutdown()
        for u in units:
            assert u.filter_bit_map is not None and len(u.filter_bit_map) == 14
            hits.append(all(u.filter_bit_map[p >> 3] & (1 << (p & 7)) for p in fd["bloomFilterData"]["bitPos"]))
    assert sorted(hits) == [False] * 5 + [True] * 5

    cluster.broker = cluster.start_broker()
    assert sql_lite_pull(cluster.ns, "CSqlMapAfter", "SqlMap", "n < 2", 2) == [0, 1]
