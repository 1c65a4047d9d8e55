"""What the Spark tests (tests/spark, and tests/oracle's Spark read) share.

``spark_session()`` is the one local SparkSession (the pumice source registered), skipping the
test when no Java runtime is found. ``build_api_store`` writes a store through
``DefaultMessageStore`` with tiny files (several CommitLog segments, multi-file ConsumeQueues,
several index files): plain, compressed, batch, IPv6, delayed and transactional messages;
``BuiltStore.puts`` records what was put, and where. ``create_topic`` and ``read`` are a
broker read's set-up and call against a running Cluster; ``produce`` sends to given queues and
``run`` runs a streaming query with ``Trigger.AvailableNow`` (``as_bodies``: its rows).
``short_jvm_env`` is the environment of a process whose Spark JVM runs a job or two and ends.

Nothing here imports pyspark at module level: the Spark suites' conftests skip without it.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from pumice.client import Message, MessageQueue, MQAdmin, Producer
from pumice.common.message import MessageExtBatch
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from tests.helpers.store import small_config

if TYPE_CHECKING:
    from tests.helpers.clusters import Cluster

STORE_HOST = (b"\x7f\x00\x00\x01", 10911)
V6_HOST = (bytes(15) + b"\x01", 54321)  # ::1
BROKER = "broker-t"  # the broker name of a Cluster
# the driver JVM of a process that starts Spark for a job or two (a `pumice spark` command, a
# test's own driver): C1 only and the serial collector. Starting Spark, 22% less CPU (34 s
# instead of 43.5 s for `pumice spark stats` at a load average of 12); the JVM ends before C2
# would have paid off. spark-submit passes SPARK_SUBMIT_OPTS to the driver's java command line
SHORT_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def java_available() -> bool:
    """Spark can start: java in JAVA_HOME or on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


def short_jvm_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with SHORT_JVM_OPTS added to SPARK_SUBMIT_OPTS."""
    return env | {"SPARK_SUBMIT_OPTS": f"{env.get('SPARK_SUBMIT_OPTS', '')} {SHORT_JVM_OPTS}".strip()}


@contextmanager
def spark_session() -> Iterator:
    """The tests' local SparkSession (2 threads, UTC, no UI) with the pumice source registered;
    stopped on exit. The test is skipped when no Java runtime is found."""
    if not java_available():
        pytest.skip("no Java runtime (java on PATH or JAVA_HOME): Spark cannot start; .ci/run installs one")
    from pyspark.sql import SparkSession

    import pumice.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pumice tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    pumice.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@dataclass
class Put:
    """One message as it was put, and where it landed."""

    topic: str
    queue_id: int
    body: bytes  # as the producer meant it (before compression)
    properties: dict[str, str]
    sys_flag: int
    born_host: tuple[bytes, int]
    store_host: tuple[bytes, int]
    commit_log_offset: int = -1
    queue_offset: int = -1
    msg_id: str = ""


@dataclass
class BuiltStore:
    """A store directory and the messages put into it."""

    root: str
    puts: list[Put] = field(default_factory=list)


def body_of(i: int) -> bytes:
    """Distinct, deterministic bodies of 150 to ~1,000 bytes."""
    return (f"message {i} ".encode() * 90)[: 150 + (i * 37) % 850]


def batch_body(messages: list[tuple[bytes, str]]) -> bytes:
    """A SEND_BATCH_MESSAGE body (``MessageExtBatch``'s table)."""
    out = b""
    for body, props in messages:
        p = props.encode()
        out += struct.pack(">iiiii", 22 + len(body) + len(p), 0, 0, 0, len(body)) + body + struct.pack(">h", len(p))
        out += p
    return out


def _record(store: BuiltStore, msgs: list[MessageExtBrokerInner], bodies: list[bytes], result) -> None:
    amr = result.append_message_result
    offsets = amr.wrote_offsets or [amr.wrote_offset]
    logics = amr.logics_offsets or [amr.logics_offset]
    for m, body, off, lo, mid in zip(msgs, bodies, offsets, logics, amr.msg_ids, strict=True):
        store.puts.append(
            Put(m.topic, m.queue_id, body, dict(m.properties), m.sys_flag, m.born_host, m.store_host, off, lo, mid)
        )


def api_store_config(root: str):
    """Tiny files: 64 KiB CommitLog segments, 32-entry ConsumeQueue files, 255-entry index files."""
    return small_config(root, mapped_file_size_consume_queue=20 * 32)


def build_api_store(root: str) -> BuiltStore:
    """The api_store contents. TopicA's 240 messages carry 3 index keys each: 720 entries fill
    two 255-entry index files and part of a third."""
    built = BuiltStore(root)
    config = api_store_config(root)
    with DefaultMessageStore(config) as store:
        for first in range(0, 240, 15):
            msgs = [
                MessageExtBrokerInner(
                    topic="TopicA",
                    body=body_of(i),
                    queue_id=i % 4,
                    properties={
                        "TAGS": "TagNeg" if i % 5 == 0 else f"Tag{i % 3}",
                        "KEYS": f"k{i} kk{i}",
                        "UNIQ_KEY": f"0A0000010000{i:020X}",
                        "ключ": f"значение {i}",
                    },
                    born_timestamp=1_700_000_000_000 + i,
                    born_host=(bytes([10, 0, 0, i % 5]), 5000 + i % 3),
                    store_host=STORE_HOST,
                )
                for i in range(first, first + 15)
            ]
            r = store.put_messages(msgs)
            assert r.is_ok(), r
            _record(built, msgs, [m.body for m in msgs], r)
        # compressed bodies (sysFlag bit 0): the reader must inflate them
        plain = [b"compress me " * 40 + str(i).encode() for i in range(30)]
        msgs = [
            MessageExtBrokerInner(
                topic="TopicB",
                body=zlib.compress(p),
                queue_id=i % 2,
                sys_flag=1,
                properties={"TAGS": "Zipped"},
                born_timestamp=1_700_000_001_000 + i,
                store_host=STORE_HOST,
            )
            for i, p in enumerate(plain)
        ]
        for k in range(0, 30, 10):
            r = store.put_messages(msgs[k : k + 10])
            assert r.is_ok(), r
            _record(built, msgs[k : k + 10], plain[k : k + 10], r)
        # batches (SEND_BATCH_MESSAGE bodies), one record per message
        for b in range(3):
            items = [(f"batch {b} item {j}".encode() * 5, f"TAGS\x01Batch\x02seq\x01{b}-{j}") for j in range(10)]
            batch = MessageExtBatch(
                topic="TopicC",
                queue_id=1,
                body=batch_body(items),
                born_timestamp=1_700_000_002_000,
                born_host=(b"\xc0\xa8\x00\x0a", 40000),
                store_host=STORE_HOST,
            )
            r = store.put_message_batch(batch)
            assert r.is_ok(), r
            amr = r.append_message_result
            for (body, props), off, lo, mid in zip(
                items, amr.wrote_offsets, amr.logics_offsets, amr.msg_ids, strict=True
            ):
                pairs = dict(p.split("\x01") for p in props.split("\x02"))
                built.puts.append(Put("TopicC", 1, body, pairs, 0, batch.born_host, STORE_HOST, off, lo, mid))
        # IPv6 hosts move every later header field
        for sys_flag, born, stored in (
            (0x10, V6_HOST, STORE_HOST),
            (0x30, V6_HOST, V6_HOST),
            (0x20, STORE_HOST, V6_HOST),
        ):
            msg = MessageExtBrokerInner(
                topic="TopicV6",
                body=b"six" * sys_flag,
                queue_id=0,
                sys_flag=sys_flag,
                properties={"TAGS": "v6"},
                born_timestamp=1_700_000_003_000,
                born_host=born,
                store_host=stored,
            )
            r = store.put_messages([msg])
            assert r.is_ok(), r
            _record(built, [msg], [msg.body], r)
        # a delayed message lands in SCHEDULE_TOPIC_XXXX (tagsCode = delivery time)
        delayed = MessageExtBrokerInner(
            topic="TopicA", body=b"later", queue_id=2, properties={"DELAY": "2"}, store_host=STORE_HOST
        )
        r = store.put_messages([delayed])
        assert r.is_ok(), r
        _record(built, [delayed], [b"later"], r)
        # no properties at all
        bare = MessageExtBrokerInner(topic="TopicE", body=b"bare", queue_id=0, store_host=STORE_HOST)
        r = store.put_messages([bare])
        assert r.is_ok(), r
        _record(built, [bare], [b"bare"], r)
        # transactional records: PREPARED and ROLLBACK stay out of the ConsumeQueue
        for sys_flag in (0x4, 0x8, 0xC):
            msg = MessageExtBrokerInner(
                topic="TopicT",
                body=b"tx %d" % sys_flag,
                queue_id=0,
                sys_flag=sys_flag,
                properties={"TAGS": "tx"},
                store_host=STORE_HOST,
            )
            r = store.put_messages([msg])
            assert r.is_ok(), r
            _record(built, [msg], [msg.body], r)
    return built


def create_topic(c: Cluster, topic: str, queues: int) -> None:
    """Create (or update) the topic through the cluster's name server, and wait until the name
    server routes it with ``queues`` read queues (the broker registers it a moment later)."""
    from tests.helpers.waiting import ROUTE_NOT_YET, eventually

    with MQAdmin(c.ns) as admin:
        admin.create_topic(topic, cluster="TestCluster", read_queue_nums=queues, write_queue_nums=queues)

        def routed() -> bool:
            return [q.read_queue_nums for q in admin.topic_route(topic).queue_datas] == [queues]

        eventually(routed, what=f"the route of {topic} with {queues} queues", retry_on=ROUTE_NOT_YET)


def read(spark, c: Cluster, **options: str):
    """A batch broker read (``namesrv``: the cluster's name server) with ``options``, as a DataFrame."""
    reader = spark.read.format("pumice").option("namesrv", c.ns)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


QUERY_TIMEOUT_S = 60


def produce(c: Cluster, topic: str, per_queue: dict[int, int], tag: str) -> dict[str, bytes]:
    """``per_queue[q]`` messages into queue q; msgId (UNIQ_KEY, the SendResult's msgId) → body."""
    out: dict[str, bytes] = {}
    with Producer(f"PG_{topic}", c.ns) as p:
        for qid, n in per_queue.items():
            for i in range(n):
                body = f"{tag}-{qid}-{i}".encode()
                r = p.send(Message(topic, body), MessageQueue(topic, BROKER, qid))
                out[r.msg_id] = body
    return out


def run(
    spark, c: Cluster, topic: str, checkpoint: str | os.PathLike[str], progress: list | None = None, **options: str
) -> list[list]:
    """One AvailableNow run of a streaming query; the rows of each non-empty micro-batch, in order
    (``progress``: extended with the query's recentProgress)."""
    batches: dict[int, list] = {}

    def sink(df, batch_id: int) -> None:
        batches[batch_id] = df.collect()

    reader = spark.readStream.format("pumice").option("namesrv", c.ns).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the AvailableNow query did not end"
        assert query.exception() is None
        if progress is not None:
            progress.extend(query.recentProgress)
    finally:
        query.stop()
    return [batches[k] for k in sorted(batches) if batches[k]]


def as_bodies(batches: list[list]) -> list[tuple[str, bytes]]:
    return [(r["msgId"], bytes(r["body"])) for rows in batches for r in rows]
