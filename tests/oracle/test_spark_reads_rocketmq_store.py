"""The Spark store reader (``spark.read.format("pumice")``) on a store Apache RocketMQ 4.9.7
wrote (issue 17): the workload of test_store_both_ways.py goes to RocketMQ's own broker, which is
stopped; every message its pull served is a row of the store read, with the same queue id,
queue offset, msgId (UNIQ_KEY) and offsetMsgId, keys, tags and body."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.ports import free_port
from tests.helpers.spark import spark_session
from tests.oracle.workload import TOPICS, Drivers, Side, write

pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
pytest.importorskip("pyarrow", reason="needs the spark extra: pip install -e '.[spark]'")


@pytest.fixture(scope="session")
def spark() -> Iterator:
    """The local SparkSession (the same one tests/spark uses when both run)."""
    with spark_session() as session:
        yield session


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


def test_the_store_reader_reads_what_rocketmq_served(spark, written) -> None:
    w, store = written
    df = spark.read.format("pumice").load(str(store))
    rows = {
        (r.topic, r.queueId, r.queueOffset): r
        for r in df.where(df.topic.isin(list(TOPICS)))
        .select(
            "topic",
            "queueId",
            "queueOffset",
            "msgId",
            "offsetMsgId",
            "keys",
            "tags",
            "body",
            "properties",
            "commitLogOffset",
        )
        .collect()
    }
    assert set(rows) == set(w.read), (sorted(set(rows) ^ set(w.read)))[:10]
    for key, m in w.read.items():
        r = rows[key]
        assert (r.msgId, r.offsetMsgId) == (m["msgId"], m["offsetMsgId"]), key  # as the Java consumer saw them
        assert r.properties["UNIQ_KEY"] == m["msgId"], key
        assert (r.keys, r.tags, r.commitLogOffset) == (m["keys"], m["tags"], m["commitLogOffset"]), key
        assert (len(r.body), hashlib.sha256(r.body).hexdigest()) == (m["bodyLen"], m["bodySha256"]), key
