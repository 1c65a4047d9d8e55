"""Spark jobs over a store directory, each callable from Python and as ``pumice spark <job>``.

=========  ==================================================================================
job        what it does
=========  ==================================================================================
export     messages (optionally some topics and a store-time range) to Parquet, partitioned by
           ``topic`` and ``date`` (the UTC date of storeTimestamp)
stats      per topic and queue: messages, body bytes, first and last store time, offset range
reindex    rebuild ConsumeQueue and IndexFile from the CommitLog, byte-identical to the
           broker's own dispatch, into a new directory (or in place, broker stopped)
=========  ==================================================================================

Each returns a ``JobSummary`` (or a result carrying one) whose ``line()`` is the one-line
summary the command line prints ("stats: 308 messages, 4 files, 7.1 s (11 queues)"). A topic
asked for that the store does not have (no ConsumeQueue directory, not in config/topics.json)
raises ``UnknownTopicError`` before Spark reads anything. Consumer-group lag needs brokers
(``--namesrv``).
"""

from __future__ import annotations

from pumice.spark.jobs.export import export
from pumice.spark.jobs.reindex import ReindexResult, reindex
from pumice.spark.jobs.stats import QueueStats, StatsResult, stats
from pumice.spark.jobs.summary import JobSummary
from pumice.spark.jobs.topics import UnknownTopicError

__all__ = [
    "JobSummary",
    "QueueStats",
    "ReindexResult",
    "StatsResult",
    "UnknownTopicError",
    "export",
    "reindex",
    "stats",
]
