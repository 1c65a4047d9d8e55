"""Spark benchmark: a batch read straight from a store directory against the same rows in Parquet.

    python3 -m bench.spark_bench [--messages 1000000] [--body 1024] [--segment-mb 1024] [--master local[2]]
                                 [--max-partition-mb N] [--no-broker] [--no-kafka] [--no-store]
                                 [--pulls-in-flight 1,4]

Writes ``--messages`` messages of ``--body`` bytes into a temporary store through the store
API (batched puts, ASYNC_FLUSH), then, in one SparkSession:

1. the store-directory read, ``spark.read.format("pumice").load(store)`` (segments over
   ``maxPartitionBytes`` split into several tasks; the planning time is printed);
2. the same rows written to Parquet (timed, for reference) and read by ``spark.read.parquet``;
3. the same messages pulled from a ``pumice broker`` serving that store (``option("namesrv", …)``,
   one task per queue), unless ``--no-broker``;
4. the same bodies, keys and tags produced into a local Kafka (KRaft, bench/peers' launcher, one
   partition per queue) and read by Spark's own Kafka source, ``spark.read.format("kafka")``
   (``spark-sql-kafka-0-10`` from Maven Central), unless ``--no-kafka``. It needs
   ``bash bench/peers/install.sh`` (Kafka's jars and the source's, bench/peers/spark_kafka).

Each read runs one aggregate that forces every column (count, sum of body lengths, lengths of
the string columns, map sizes, sums of the numbers, max of the timestamps): once to warm up
(JVM, Python workers), then ``--runs`` timed runs; the best is reported as rows/s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import pumice.spark
from bench.processes import start_local_cluster
from pumice.store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig

TOPIC = "BenchTopic"
QUEUES = 8


def create_topic_routed(admin: Any, topic: str, queues: int, **where: str) -> None:
    """Create ``topic`` (``broker_addr=`` or ``cluster=``) and wait, at most 10 s, until the name
    server routes it."""
    admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues, **where)
    for _ in range(100):
        try:
            admin.topic_route(topic)
            return
        except Exception:
            time.sleep(0.1)


def write_store(root: str, messages: int, body_size: int, segment_bytes: int) -> float:
    config = MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=segment_bytes,
        preallocate_commit_log=False,
        prefault_commit_log=False,
    )
    noise = os.urandom(4 << 20)  # bodies are distinct slices of it (Parquet must not dictionary-encode them away)
    t0 = time.perf_counter()
    with DefaultMessageStore(config) as store:
        for first in range(0, messages, 1024):
            batch = [
                MessageExtBrokerInner(
                    topic=TOPIC,
                    body=noise[(k := (i * 4099) % ((4 << 20) - body_size)) : k + body_size],
                    queue_id=i % QUEUES,
                    properties={
                        "TAGS": f"Tag{i % 4}",
                        "KEYS": f"order-{i}",
                        "UNIQ_KEY": f"C0A8000A1F9018B4AAC2{i:012X}",
                        "WAIT": "true",
                    },
                    born_timestamp=1_700_000_000_000 + i,
                    born_host=(b"\xc0\xa8\x00\x0a", 40_000 + i % 16),
                    store_host=(b"\x7f\x00\x00\x01", 10911),
                )
                for i in range(first, min(messages, first + 1024))
            ]
            r = store.put_messages(batch, wait_flush=False)
            if not r.is_ok():
                raise RuntimeError(f"put failed: {r.status.name} {r.remark}")
    return time.perf_counter() - t0


def every_column(df: DataFrame) -> list:
    strings = ("topic", "brokerName", "msgId", "offsetMsgId", "keys", "tags", "bornHost", "storeHost")
    numbers = ("queueId", "queueOffset", "commitLogOffset", "reconsumeTimes", "sysFlag")
    return df.agg(
        F.count(F.lit(1)),
        F.sum(F.length("body")),
        F.sum(sum((F.coalesce(F.length(c), F.lit(0)) for c in strings), F.lit(0))),
        F.sum(F.size("properties")),
        F.sum(sum((F.col(c).cast("long") for c in numbers), F.lit(0))),
        F.max("bornTimestamp"),
        F.max("storeTimestamp"),
    ).collect()


def timed(
    label: str, df: DataFrame, runs: int, expect: int, aggregate: Callable[[DataFrame], list] | None = None
) -> float:
    aggregate = aggregate or every_column
    aggregate(df)  # warm-up
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        row = aggregate(df)[0]
        best = min(best, time.perf_counter() - t0)
        if row[0] != expect:
            raise AssertionError(f"{label}: read {row[0]} rows, expected {expect}")
    print(f"{label:<28} {expect / best:>12,.0f} rows/s  ({best:.2f} s for {expect:,} rows, best of {runs})")
    return expect / best


def read_through_broker(
    spark: SparkSession,
    root: str,
    store: str,
    messages: int,
    runs: int,
    in_flight: list[int],
    pull_batch_size: int = 32,
    broker_conf: str = "",
) -> float:
    """The same messages pulled from a `pumice broker` serving the store just read (its topic created
    over the admin API with the store's queues), through `option("namesrv", …)`, once per
    ``pullsInFlight`` value; the last one's rate is returned."""
    from pumice.client import MQAdmin

    procs, ns, br_addr = start_local_cluster(root, broker_conf, store=store)
    try:
        with MQAdmin(ns) as admin:
            create_topic_routed(admin, TOPIC, QUEUES, broker_addr=br_addr)
        rate = 0.0
        for n in in_flight:
            df = spark.read.format("pumice").option("namesrv", ns).option("topic", TOPIC)
            df = df.option("pullsInFlight", str(n)).option("pullBatchSize", str(pull_batch_size)).load()
            print(
                f"broker read: {df.rdd.getNumPartitions()} partitions, "
                f"pullsInFlight {n}, pullBatchSize {pull_batch_size}"
            )
            rate = timed(f"broker (pumice, {n} in flight)", df, runs, messages)
        return rate
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(30)


SPARK_KAFKA_CLASSPATH = os.path.join(os.path.dirname(__file__), "peers", "spark_kafka", "target", "classpath.txt")


def kafka_missing() -> str | None:
    from bench.peers.brokers import KafkaLauncher

    if not os.path.exists(SPARK_KAFKA_CLASSPATH):
        return "bench/peers/spark_kafka is not built (bash bench/peers/install.sh)"
    return KafkaLauncher().missing()


async def produce_to_kafka(bootstrap: str, messages: int, body_size: int, topic: str = TOPIC) -> float:
    """The store's messages (same bodies, KEYS as the key, TAGS and UNIQ_KEY as headers), in
    batches of up to 512 KiB (under the broker's message.max.bytes) per partition; acks=all."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=QUEUES, replication_factor=1)])
    finally:
        await admin.close()
    noise = os.urandom(4 << 20)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=0,
        max_batch_size=512 << 10,
        max_request_size=1 << 20,
        request_timeout_ms=60000,
    )
    await producer.start()
    t0 = time.perf_counter()
    try:
        for q in range(QUEUES):
            futures = []
            batch = producer.create_batch()
            for i in range(q, messages, QUEUES):
                k = (i * 4099) % ((4 << 20) - body_size)
                headers = [("TAGS", f"Tag{i % 4}".encode()), ("UNIQ_KEY", f"C0A8000A1F9018B4AAC2{i:012X}".encode())]
                args = {"key": f"order-{i}".encode(), "value": noise[k : k + body_size], "timestamp": None}
                if batch.append(**args, headers=headers) is None:
                    batch.close()
                    futures.append(await producer.send_batch(batch, topic, partition=q))
                    batch = producer.create_batch()
                    if batch.append(**args, headers=headers) is None:
                        raise RuntimeError("a message does not fit an empty batch")
            batch.close()
            futures.append(await producer.send_batch(batch, topic, partition=q))
            for f in futures:
                await f
    finally:
        await producer.stop()
    return time.perf_counter() - t0


def every_kafka_column(df: DataFrame) -> list:
    return df.agg(
        F.count(F.lit(1)),
        F.sum(F.length("value")),
        F.sum(F.length("topic") + F.length("key")),
        F.sum(F.size("headers")),
        F.sum(F.col("partition").cast("long") + F.col("offset") + F.col("timestampType")),
        F.max("timestamp"),
    ).collect()


def read_through_kafka(spark: SparkSession, root: str, messages: int, body_size: int, runs: int) -> float:
    """Spark's Kafka source reading the same messages from a local Kafka."""
    import asyncio
    from pathlib import Path

    from bench.peers.brokers import KafkaLauncher

    run = KafkaLauncher().start(Path(root) / "kafka", False)
    try:
        secs = asyncio.run(produce_to_kafka(run.endpoint["bootstrap"], messages, body_size))
        print(f"produced {messages:,} messages to Kafka in {secs:.1f} s")
        df = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", run.endpoint["bootstrap"])
            .option("subscribe", TOPIC)
            .option("includeHeaders", "true")
            .load()
        )
        print(f"kafka read: {df.rdd.getNumPartitions()} partitions")
        return timed("kafka (spark-sql-kafka-0-10)", df, runs, messages, every_kafka_column)
    finally:
        run.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--segment-mb", type=int, default=1024, help="mapedFileSizeCommitLog in MiB (RocketMQ: 1024)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-broker", action="store_true", help="skip the read through a pumice broker")
    ap.add_argument(
        "--pulls-in-flight",
        type=lambda v: [int(n) for n in v.split(",")],
        default=[16],
        help="the broker read's pullsInFlight; a comma-separated list reads once per value (A/B)",
    )
    ap.add_argument("--pull-batch-size", type=int, default=32, help="the broker read's pullBatchSize")
    ap.add_argument(
        "--broker-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf line for the broker read's broker (repeatable), e.g. maxTransferCountOnMessageInMemory=256",
    )
    ap.add_argument("--no-kafka", action="store_true", help="skip Spark's Kafka source reading a local Kafka")
    ap.add_argument("--no-store", action="store_true", help="skip the store-directory and Parquet reads")
    ap.add_argument(
        "--max-partition-mb",
        type=int,
        default=None,
        help="the store read's maxPartitionBytes in MiB (default: the source's, 128); a value at least "
        "--segment-mb reads one task per segment, as before segments were split",
    )
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="pumice-spark-bench-")
    try:
        store = os.path.join(root, "store")
        secs = write_store(store, args.messages, args.body, args.segment_mb << 20)
        segments = len(os.listdir(os.path.join(store, "commitlog")))
        print(
            f"wrote {args.messages:,} messages of {args.body} B in {secs:.1f} s ({segments} CommitLog segments of "
            f"{args.segment_mb} MiB)"
        )
        kafka_why = None if args.no_kafka else kafka_missing()
        if kafka_why:
            print(f"no Kafka row: {kafka_why}")
        builder = SparkSession.builder
        if not args.no_kafka and not kafka_why:
            with open(SPARK_KAFKA_CLASSPATH) as f:
                builder = builder.config("spark.jars", f.read().strip().replace(os.pathsep, ","))
        spark = (
            builder.master(args.master)
            .appName("pumice spark bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        pumice.spark.register(spark)
        try:
            parquet_rate = None
            if not args.no_store:
                _, parquet_rate = read_store_and_parquet(spark, root, store, args)
            broker_rate = None
            if not args.no_broker:
                broker_rate = read_through_broker(
                    spark,
                    root,
                    store,
                    args.messages,
                    args.runs,
                    args.pulls_in_flight,
                    args.pull_batch_size,
                    "".join(f"{kv}\n" for kv in args.broker_conf),
                )
                if parquet_rate:
                    print(f"broker read / parquet read: {broker_rate / parquet_rate:.2f}")
            if not args.no_kafka and not kafka_why:
                kafka_rate = read_through_kafka(spark, root, args.messages, args.body, args.runs)
                if broker_rate:
                    print(f"broker read / kafka read: {broker_rate / kafka_rate:.2f}")
        finally:
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def read_store_and_parquet(spark: SparkSession, root: str, store: str, args: argparse.Namespace) -> tuple[float, float]:
    """The store-directory read, then the same rows written to Parquet and read back."""
    reader = spark.read.format("pumice")
    if args.max_partition_mb:
        reader = reader.option("maxPartitionBytes", str(args.max_partition_mb << 20))
    df = reader.load(store)
    t0 = time.perf_counter()
    parts = df.rdd.getNumPartitions()  # plans the read: the segments' walk, once per DataFrame
    print(f"store read: {parts} partitions, planned in {time.perf_counter() - t0:.2f} s")
    store_rate = timed("store directory (pumice)", df, args.runs, args.messages)
    parquet = os.path.join(root, "parquet")
    t0 = time.perf_counter()
    df.write.parquet(parquet)
    print(f"wrote Parquet in {time.perf_counter() - t0:.1f} s")
    pq = spark.read.parquet(parquet)
    print(f"parquet read: {pq.rdd.getNumPartitions()} partitions")
    parquet_rate = timed("parquet (spark.read.parquet)", pq, args.runs, args.messages)
    print(f"store read / parquet read: {store_rate / parquet_rate:.2f}")
    return store_rate, parquet_rate


if __name__ == "__main__":
    main()
