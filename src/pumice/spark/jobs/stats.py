"""``stats``: per topic and queue of a store directory, what it holds.

==============  =====================================================================
column          meaning
==============  =====================================================================
topic, queueId  the queue
messages        how many messages
bodyBytes       the sum of their body lengths (as read: compressed bodies inflated)
firstStoreTime  the earliest storeTimestamp
lastStoreTime   the latest storeTimestamp
minQueueOffset  the lowest queue offset held
maxQueueOffset  the highest queue offset held
==============  =====================================================================

Without topics the whole CommitLog is read (every record, including SCHEDULE_TOPIC_XXXX and
transactional ones, under the topic and queue they were stored with); with topics, their
ConsumeQueues. Consumer-group lag needs the brokers' consumer offsets and comes with the
broker-read phase (``--namesrv``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pumice.spark.jobs.summary import JobSummary, Stopwatch


@dataclass(frozen=True)
class QueueStats:
    topic: str
    queue_id: int
    messages: int
    body_bytes: int
    first_store_time: datetime
    last_store_time: datetime
    min_queue_offset: int
    max_queue_offset: int


@dataclass(frozen=True)
class StatsResult:
    queues: list[QueueStats]
    summary: JobSummary


def stats_frame(spark, store_path: str, *, topics: tuple[str, ...] | list[str] = (), broker_name: str | None = None):
    """The statistics as a Spark DataFrame, one row per (topic, queueId), ordered by them."""
    from pyspark.sql import functions as F

    from pumice.spark.data_source import read_store

    df = read_store(spark, store_path, topics=topics, broker_name=broker_name)
    return (
        df.groupBy("topic", "queueId")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum(F.length("body")).alias("bodyBytes"),
            F.min("storeTimestamp").alias("firstStoreTime"),
            F.max("storeTimestamp").alias("lastStoreTime"),
            F.min("queueOffset").alias("minQueueOffset"),
            F.max("queueOffset").alias("maxQueueOffset"),
        )
        .orderBy("topic", "queueId")
    )


def stats(
    spark, store_path: str, *, topics: tuple[str, ...] | list[str] = (), broker_name: str | None = None
) -> StatsResult:
    """Collect ``stats_frame``; the summary counts messages and the files (segments or
    ConsumeQueue files) read."""
    from pumice.spark.options import ReadOptions
    from pumice.spark.store_reader import plan

    clock = Stopwatch()
    options = {"path": store_path, "topics": ",".join(topics)}
    files = len(plan(ReadOptions.parse(options)))
    frame = stats_frame(spark, store_path, topics=topics, broker_name=broker_name)
    queues = [QueueStats(*row) for row in frame.collect()]
    messages = sum(q.messages for q in queues)
    summary = JobSummary("stats", messages, files, clock.seconds, f"{len(queues)} queues")
    return StatsResult(queues, summary)
