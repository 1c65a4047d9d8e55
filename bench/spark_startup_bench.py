"""Spark streaming start-up: the first micro-batch after a driver starts, pumice source against Kafka's.

    python3 -m bench.spark_startup_bench [--messages 2000] [--per-batch 500] [--body 1024]
                                         [--master local[2]] [--no-kafka] [--rounds 1]

The same ``--messages`` messages (``--body`` bytes, 8 queues / partitions) go into a ``pumice
broker`` and, unless ``--no-kafka``, a local Kafka 3.9.1 (bench/peers' launcher; needs ``bash
bench/peers/install.sh``, as ``bench.spark_bench``'s Kafka row). Then, for each source, a fresh
driver process (this module with ``--driver``) starts a SparkSession and runs one
``Trigger.AvailableNow`` query from ``earliest`` with ``maxOffsetsPerTrigger=--per-batch`` into
``foreachBatch`` (each batch written to Spark's ``noop`` sink), and reports:

=================  ===================================================================
column             what
=================  ===================================================================
session            the driver's SparkSession start (JVM, Spark context)
load               ``readStream…load()`` (for a Python source Spark starts a Python process
                   that builds the data source and answers its schema)
to batch 0         ``writeStream.start()`` until batch 0's rows are written
batch 0            batch 0's ``triggerExecution`` (Spark's progress), and in it
                   ``latestOffset``, ``queryPlanning`` and ``addBatch`` (the read itself)
later batches      the median ``triggerExecution`` of the other batches (same rows each), and
                   their median ``addBatch``
=================  ===================================================================

``to batch 0`` minus ``batch 0`` is the stream's set-up before its first trigger (for the
pumice source: the driver-side Python process Spark starts for the reader and its
``initialOffset``). ``--rounds`` repeats each source's driver, sources alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "StartupTopic"
QUEUES = 8
PROGRESS_KEYS = ("triggerExecution", "latestOffset", "queryPlanning", "addBatch")


def drive(source: str, endpoint: str, per_batch: int, master: str, jars: str | None) -> dict:
    """In the driver process: one AvailableNow query; the figures of the module's table (ms)."""
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(f"startup {source}")
    if jars:
        builder = builder.config("spark.jars", jars)
    spark = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    session_ms = (time.perf_counter() - t0) * 1000
    if source == "pumice":
        import pumice.spark

        pumice.spark.register(spark)
        reader = spark.readStream.format("pumice").option("namesrv", endpoint).option("topic", TOPIC)
    else:
        reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", endpoint)
        reader = reader.option("subscribe", TOPIC)
    reader = reader.option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_batch))
    done: dict[int, float] = {}

    def sink(df, batch_id: int) -> None:
        df.write.format("noop").mode("overwrite").save()
        done[batch_id] = time.perf_counter()

    checkpoint = tempfile.mkdtemp(prefix="pumice-startup-ckpt-")
    try:
        t1 = time.perf_counter()
        df = reader.load()
        load_ms = (time.perf_counter() - t1) * 1000
        started = time.perf_counter()
        query = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
        query = query.trigger(availableNow=True).start()
        if not query.awaitTermination(600):
            query.stop()
            raise RuntimeError(f"{source}: the query did not end within 600 s")
        if query.exception() is not None:
            raise RuntimeError(f"{source}: {query.exception()}")
        progress = [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        spark.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    first = min(done)
    return {
        "source": source,
        "session_ms": session_ms,
        "load_ms": load_ms,
        "to_batch0_ms": (done[first] - started) * 1000,
        "batch0": {k: progress[0]["durationMs"].get(k, 0) for k in PROGRESS_KEYS},
        "later_ms": statistics.median(p["durationMs"]["triggerExecution"] for p in progress[1:]) if progress[1:] else 0,
        "later_add_ms": statistics.median(p["durationMs"]["addBatch"] for p in progress[1:]) if progress[1:] else 0,
        "rows": [p["numInputRows"] for p in progress],
    }


def run_driver(source: str, endpoint: str, args: argparse.Namespace, jars: str | None) -> dict:
    cmd = [sys.executable, "-m", "bench.spark_startup_bench", "--driver", source, "--endpoint", endpoint,
           "--per-batch", str(args.per_batch), "--master", args.master]  # fmt: skip
    if jars:
        cmd += ["--jars", jars]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{source} driver failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def produce_to_pumice(ns: str, messages: int, body_size: int) -> None:
    from bench.spark_bench import create_topic_routed
    from pumice.client import Message, MessageQueue, MQAdmin, Producer

    with MQAdmin(ns) as admin:
        create_topic_routed(admin, TOPIC, QUEUES, cluster="DefaultCluster")
    noise = os.urandom(1 << 20)
    with Producer("STARTUP_BENCH", ns) as p:
        for i in range(messages):
            k = (i * 4099) % ((1 << 20) - body_size)
            msg = Message(TOPIC, noise[k : k + body_size], tags=f"Tag{i % 4}", keys=f"order-{i}")
            p.send(msg, MessageQueue(TOPIC, "broker-a", i % QUEUES))


def row(r: dict) -> str:
    s = {k: v / 1000 for k, v in r.items() if k.endswith("_ms")}
    b = {k: v / 1000 for k, v in r["batch0"].items()}
    return (f"| {r['source']} | {s['session_ms']:.1f} | {s['load_ms']:.1f} | **{s['to_batch0_ms']:.1f}** | "
            f"{b['triggerExecution']:.1f} ({b['latestOffset']:.1f} / {b['queryPlanning']:.1f} / {b['addBatch']:.1f}) | "
            f"{s['later_ms']:.2f} ({s['later_add_ms']:.2f}) |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--per-batch", type=int, default=500)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--driver", help=argparse.SUPPRESS)
    ap.add_argument("--endpoint", help=argparse.SUPPRESS)
    ap.add_argument("--jars", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.driver:
        print(json.dumps(drive(args.driver, args.endpoint, args.per_batch, args.master, args.jars)))
        return

    from bench.processes import start_local_cluster
    from bench.spark_bench import SPARK_KAFKA_CLASSPATH, kafka_missing

    root = tempfile.mkdtemp(prefix="pumice-startup-bench-")
    procs: list[subprocess.Popen[str]] = []
    kafka = None
    try:
        procs, ns, _ = start_local_cluster(root)
        produce_to_pumice(ns, args.messages, args.body)
        endpoints: dict[str, tuple[str, str | None]] = {"pumice": (ns, None)}
        why = None if args.no_kafka else kafka_missing()
        if why:
            print(f"no Kafka row: {why}")
        elif not args.no_kafka:
            from bench.peers.brokers import KafkaLauncher
            from bench.spark_bench import produce_to_kafka

            kafka = KafkaLauncher().start(Path(root) / "kafka", False)
            bootstrap = kafka.endpoint["bootstrap"]
            asyncio.run(produce_to_kafka(bootstrap, args.messages, args.body, topic=TOPIC))
            jars = Path(SPARK_KAFKA_CLASSPATH).read_text().strip().replace(os.pathsep, ",")
            endpoints["kafka"] = (bootstrap, jars)
        print(f"{args.messages:,} messages of {args.body} B, {QUEUES} queues; batches of {args.per_batch}; "
              f"{args.master}; {os.cpu_count()} CPUs")  # fmt: skip
        print("| source | session (s) | load (s) | start() → batch 0 written (s) | batch 0 (latestOffset / "
              "queryPlanning / addBatch) (s) | later batches, median (addBatch) (s) |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for _ in range(args.rounds):
            for source, (endpoint, jars) in endpoints.items():
                r = run_driver(source, endpoint, args, jars)
                print(row(r), flush=True)
    finally:
        if kafka is not None:
            kafka.stop()
        for p in reversed(procs):
            p.terminate()
            p.wait(30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
