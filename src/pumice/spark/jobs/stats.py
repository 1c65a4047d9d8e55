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
ConsumeQueues.

With name servers (``namesrv``), each consumer group that has committed offsets for one of
those topics on a master broker also gets its lag per queue, as mqadmin consumerProgress
reports it (from the live brokers, GET_CONSUME_STATS):

==============  =====================================================================
column          meaning
==============  =====================================================================
group, topic    the consumer group and the topic
brokerName      the broker holding the queue
queueId         the queue
brokerOffset    the queue's max offset on the broker
consumerOffset  the group's committed offset
lag             brokerOffset − consumerOffset (never negative)
==============  =====================================================================
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

from pumice.spark.jobs.summary import JobSummary, Stopwatch, plural
from pumice.spark.jobs.topics import check_topics


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
class GroupLag:
    group: str
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    lag: int


@dataclass(frozen=True)
class StatsResult:
    queues: list[QueueStats]
    summary: JobSummary
    lags: list[GroupLag] = field(default_factory=list)


def group_lags(namesrv: str, topics: set[str]) -> list[GroupLag]:
    """Each consumer group's lag on ``topics``: the groups are those with offsets committed on a
    master broker (GET_ALL_CONSUMER_OFFSET); the figures come from GET_CONSUME_STATS."""
    import asyncio

    from pumice.client import AsyncMQAdmin

    async def collect() -> list[GroupLag]:
        async with AsyncMQAdmin(namesrv) as admin:
            pairs: set[tuple[str, str]] = set()
            for addr in (await admin.cluster_info()).master_addrs():
                for key in await admin.api.get_all_consumer_offset(addr):
                    topic, _, group = key.partition("@")
                    if topic in topics and group:
                        pairs.add((group, topic))
            out: list[GroupLag] = []
            for group, topic in sorted(pairs):
                progress = await admin.consumer_progress(group, topic)
                out += [
                    GroupLag(group, topic, q.mq.broker_name, q.mq.queue_id, q.broker_offset, q.consumer_offset, q.lag)
                    for q in progress.queues
                ]
            return out

    return asyncio.run(collect())


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
    spark,
    store_path: str,
    *,
    topics: tuple[str, ...] | list[str] = (),
    broker_name: str | None = None,
    namesrv: str | None = None,
) -> StatsResult:
    """Collect ``stats_frame``; the summary counts messages and the files (segments or
    ConsumeQueue files) read. With ``namesrv``, also each consumer group's lag (``group_lags``).
    A topic the store does not have raises ``UnknownTopicError``."""
    from pumice.spark.options import ReadOptions
    from pumice.spark.store_reader import plan

    clock = Stopwatch()
    check_topics(store_path, topics)
    options = {"path": store_path, "topics": ",".join(topics)}
    # the files, not the tasks: a plan that splits no segment (and so walks none) counts them
    whole_files = dataclasses.replace(ReadOptions.parse(options), max_partition_bytes=1 << 62, min_partitions=None)
    files = len(plan(whole_files))
    frame = stats_frame(spark, store_path, topics=topics, broker_name=broker_name)
    queues = [QueueStats(*row) for row in frame.collect()]
    messages = sum(q.messages for q in queues)
    lags = group_lags(namesrv, {q.topic for q in queues}) if namesrv else []
    detail = plural(len(queues), "queue")
    if namesrv:
        detail += f", {plural(len({(g.group, g.topic) for g in lags}), 'consumer group')}"
    summary = JobSummary("stats", messages, files, clock.seconds, detail)
    return StatsResult(queues, summary, lags)
