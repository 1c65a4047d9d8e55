"""The pumice stream sink (``df.writeStream.format("pumice")``, ``broker_sink``) against running brokers.

One `pumice namesrv` + `pumice broker` pair serves the module; each test uses its own topic.
The queries read JSON files the test writes into a directory (Spark's file source, which
replays a batch from its checkpoint) and run with ``Trigger.AvailableNow``; every query is
stopped in ``finally``. What reached the topic is read back with a batch broker read.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client.message import PROPERTY_UNIQ_KEY
from pumice.spark.broker_sink import query_hash, uniq_key
from pumice.spark.broker_writer import RowError
from tests.helpers.clusters import Cluster
from tests.helpers.spark import create_topic, read

QUERY_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("sink-broker"))
    try:
        yield c
    finally:
        c.close()


def write_json(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name)  # the file source must not see a half-written file
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(path)


def run(spark, c: Cluster, topic: str, source: Path, checkpoint: Path) -> str:
    """One AvailableNow run of source → topic; the query's id."""
    df = spark.readStream.schema("body string, tags string").option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        df.writeStream.format("pumice")
        .option("namesrv", c.ns)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the AvailableNow query did not end"
        exc = query.exception()
        if exc is not None:
            raise exc
        return str(query.id)
    finally:
        query.stop()


def topic_rows(spark, c: Cluster, topic: str) -> list[tuple[str, str, str | None]]:
    """(UNIQ_KEY, body, tags) of every message of the topic."""
    rows = read(spark, c, topic=topic).collect()
    return [(r["properties"][PROPERTY_UNIQ_KEY], bytes(r["body"]).decode(), r["tags"]) for r in rows]


def test_uniq_key_layout() -> None:
    qh = query_hash("4b1f0c1e-0000-4000-8000-000000000000")
    assert len(qh) == 10 and qh == qh.upper()
    assert uniq_key(qh, 7, 1, 258) == qh + "00000007" + "000001" + "00000102"
    assert len(uniq_key(qh, (1 << 32) - 1, (1 << 24) - 1, (1 << 32) - 1)) == 32
    with pytest.raises(RowError, match="partition 16777216 does not fit"):
        uniq_key(qh, 0, 1 << 24, 0)


def test_stream_sink_delivers_and_replays_with_the_same_keys(spark, broker: Cluster, tmp_path: Path) -> None:
    topic = "TopicSink1"
    create_topic(broker, topic, 2)
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    write_json(source / "a.json", [{"body": f"a{i}", "tags": "TagA"} for i in range(5)])
    write_json(source / "b.json", [{"body": f"b{i}"} for i in range(3)])
    qid = run(spark, broker, topic, source, checkpoint)
    first = topic_rows(spark, broker, topic)
    assert sorted(b for _, b, _ in first) == [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(3)]
    assert {t for _, b, t in first if b.startswith("a")} == {"TagA"}
    keys = {b: k for k, b, _ in first}
    assert len(set(keys.values())) == 8
    qh = query_hash(qid)
    # one file per micro-batch (maxFilesPerTrigger 1), one partition per file: key = query, batch, 0, row
    batch_of = {k[10:18] for k in keys.values()}
    assert len(batch_of) == 2 and all(k.startswith(qh) and k[18:24] == "000000" for k in keys.values())
    by_batch = {bt: sorted((int(k[24:], 16), b) for b, k in keys.items() if k[10:18] == bt) for bt in batch_of}
    assert sorted(by_batch.values()) == [[(i, f"a{i}") for i in range(5)], [(i, f"b{i}") for i in range(3)]]

    # a failure after the last batch's messages were sent but before Spark committed it: the restart
    # replays that batch, sending its rows again under the same UNIQ_KEYs, and only then goes on
    last = max(int(bt, 16) for bt in batch_of)
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    write_json(source / "c.json", [{"body": "c0"}])
    assert run(spark, broker, topic, source, checkpoint) == qid  # the query id is kept in the checkpoint
    second = Counter(topic_rows(spark, broker, topic))
    assert second - Counter(first) == Counter(
        [r for r in first if int(r[0][10:18], 16) == last] + [(uniq_key(qh, last + 1, 0, 0), "c0", None)]
    )  # the replayed batch again, row for row under the same keys, then the new file's batch
    dedup = {k: (b, t) for k, b, t in second}  # a reader deduping on UNIQ_KEY sees every row once
    assert sorted(b for b, _ in dedup.values()) == sorted([*keys, "c0"])


def test_stream_sink_bad_row(spark, broker: Cluster, tmp_path: Path) -> None:
    create_topic(broker, "TopicSinkBad", 1)
    source = tmp_path / "in"
    write_json(source / "a.json", [{"body": "ok"}, {"tags": "no body"}])
    with pytest.raises(Exception, match=r"partition 0, row 1, column body: is null"):
        run(spark, broker, "TopicSinkBad", source, tmp_path / "ckpt")
