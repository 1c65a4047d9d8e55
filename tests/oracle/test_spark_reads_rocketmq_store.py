"""The Spark store reader (``spark.read.format("pumice")``) on a store Apache RocketMQ 4.9.7
wrote (issue 17): the workload of test_store_both_ways.py goes to RocketMQ's own broker, which is
stopped; every message its pull served is a row of the store read, with the same queue id,
queue offset, msgIds, keys, tags and body."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from bench.processes import free_port

from tests.oracle.test_store_both_ways import TOPICS, Drivers, Side, write
from tests.spark.conftest import spark  # noqa: F401 (the session fixture)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, peer_classpath: str, java_classpath: str) -> tuple[Any, Path]:
    tmp = tmp_path_factory.mktemp("spark-oracle")
    store = tmp / "store"
    drivers = Drivers(java_classpath, tmp / "java")
    side = Side("rocketmq", tmp / "writer", store, free_port(), peer_classpath)
    try:
        w = write(drivers, side, "stop")
    finally:
        drivers.close()
        side.close()
    return w, store


def test_the_store_reader_reads_what_rocketmq_served(spark, written) -> None:  # noqa: F811
    w, store = written
    df = spark.read.format("pumice").load(str(store))
    rows = {
        (r.topic, r.queueId, r.queueOffset): r
        for r in df.where(df.topic.isin(list(TOPICS)))
        .select("topic", "queueId", "queueOffset", "msgId", "keys", "tags", "body", "properties", "commitLogOffset")
        .collect()
    }
    assert set(rows) == set(w.read), (sorted(set(rows) ^ set(w.read)))[:10]
    for key, m in w.read.items():
        r = rows[key]
        assert r.msgId == m["offsetMsgId"] and r.properties["UNIQ_KEY"] == m["msgId"], key
        assert (r.keys, r.tags, r.commitLogOffset) == (m["keys"], m["tags"], m["commitLogOffset"]), key
        assert (len(r.body), hashlib.sha256(r.body).hexdigest()) == (m["bodyLen"], m["bodySha256"]), key
