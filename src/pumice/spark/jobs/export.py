"""``export``: a store directory (optionally some topics and a store-time range) to Parquet.

Rows are the data source's (``pumice.spark.schema``) with one more column, ``date``: the UTC
date of ``storeTimestamp``. Files are partitioned by ``topic`` and ``date``::

    <output>/topic=TopicA/date=2026-11-22/part-….parquet

Read them back with ``spark.read.parquet(output)``; with
``spark.sql.sources.partitionColumnTypeInference.enabled=false`` (or a schema) a topic named
like a number stays a string. Topics given → read through their ConsumeQueues; none → the
whole CommitLog. ``since`` is inclusive, ``until`` exclusive.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from pumice.spark.jobs.summary import JobSummary, Stopwatch
from pumice.spark.jobs.topics import check_topics

MS_PER_DAY = 86_400_000


def to_epoch_ms(t: int | datetime | None) -> int | None:
    """Epoch ms from an int (already ms) or a datetime (naive means UTC)."""
    if t is None or isinstance(t, int):
        return t
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return int(t.timestamp() * 1000)


def _parquet_files(root: str) -> int:
    if not os.path.isdir(root):
        return 0
    return sum(1 for _, _, files in os.walk(root) for f in files if f.endswith(".parquet"))


def export(
    spark,
    store_path: str,
    output: str,
    *,
    topics: tuple[str, ...] | list[str] = (),
    since: int | datetime | None = None,
    until: int | datetime | None = None,
    broker_name: str | None = None,
    mode: str = "errorifexists",
) -> JobSummary:
    """Write the store's messages to Parquet at ``output``; ``mode`` is Spark's save mode. A topic
    the store does not have raises ``UnknownTopicError``."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from pumice.spark.data_source import read_store

    clock = Stopwatch()
    check_topics(store_path, topics)
    df = read_store(spark, store_path, topics=topics, broker_name=broker_name)
    since_ms, until_ms = to_epoch_ms(since), to_epoch_ms(until)
    stored_ms = F.unix_millis("storeTimestamp")
    if since_ms is not None:
        df = df.where(stored_ms >= F.lit(since_ms))
    if until_ms is not None:
        df = df.where(stored_ms < F.lit(until_ms))
    df = df.withColumn("date", F.date_from_unix_date(F.floor(stored_ms / F.lit(MS_PER_DAY)).cast("int")))
    observed = Observation("pumice export")
    files_before = _parquet_files(output)
    counted = df.observe(observed, F.count(F.lit(1)).alias("messages"))
    counted.write.mode(mode).partitionBy("topic", "date").parquet(output)
    messages = int(observed.get.get("messages", 0))
    what = f"topics {', '.join(topics)}" if topics else "all topics"
    files = _parquet_files(output) - (files_before if mode == "append" else 0)
    return JobSummary("export", messages, files, clock.seconds, f"{what} → {output}")
