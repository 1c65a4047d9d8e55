"""Streaming writes to brokers: ``df.writeStream.format("pumice").option("namesrv", …).start()``.

    q = (df.writeStream.format("pumice").option("namesrv", "127.0.0.1:9876").option("topic", "T")
         .option("checkpointLocation", "/ckpt/q1").start())

The columns and the options are those of the batch sink (``pumice.spark.broker_writer``,
``WriteOptions``); rows are checked and batched the same way, per micro-batch and task, and a
bad row fails the query with a message naming the partition, the row index and the column.

Guarantee: **exactly-once for readers that dedupe on UNIQ_KEY (msgId); at-least-once in the
topic itself.** (Spark's Kafka sink is at-least-once, with no such key.) UNIQ_KEY is the msgId
a Java client's ``MessageExt.getMsgId()`` shows; a ``pumice`` read has it in its ``msgId``
column (and ``properties["UNIQ_KEY"]``; the ``offsetMsgId`` column is the broker's id). Every message's UNIQ_KEY
is derived from where its row sits, not drawn at random, so a micro-batch (or a task) that Spark
runs again after a failure sends the same rows again under the same UNIQ_KEYs: the topic may
then hold a row twice, but both copies carry one UNIQ_KEY, and a reader that keeps the first
message of each UNIQ_KEY sees every row exactly once.

UNIQ_KEY layout, 32 upper-case hex characters (16 bytes, big-endian fields; not the client's
IP/pid/time layout of ``message_id.UniqKeyGenerator``):

=========  =====  ==========================================================================
hex chars  bytes  field
=========  =====  ==========================================================================
0-9        5      the first 5 bytes of SHA-256 of the query identity (below)
10-17      4      the micro-batch id (Spark's batchId)
18-23      3      the partition id of the task (``TaskContext.partitionId()``)
24-31      4      the row's index within the task's partition (0, 1, …)
=========  =====  ==========================================================================

The query identity is the streaming query's id (``StreamingQuery.id``, kept in the checkpoint
and so the same across restarts; tasks read it from Spark's local property
``sql.streaming.queryId``); without it, the ``checkpointLocation`` option's value. The batch id
is Spark's local property ``streaming.sql.batchId`` in the task (the writer API passes it to
``commit`` only). A batch id, partition or row index too large for its field fails the task.

Which batches are done is Spark's own commit log (``<checkpointLocation>/commits``): Spark
writes ``commits/<batchId>`` after ``commit`` returns, and replays a batch that has an entry in
``offsets/`` but none in ``commits/`` with the same batch id and the same source offsets. The
keys repeat only if a replayed batch puts the same rows in the same partitions in the same
order: true of replayable sources (files, Kafka, ``pumice`` streams) and deterministic
transformations; a query that reorders rows nondeterministically gets new keys on replay (and
so only at-least-once). ``commit`` and ``abort`` log what the tasks sent; messages sent by a
failed batch stay sent, and its replay sends them again under the same keys.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pumice.client.message import PROPERTY_UNIQ_KEY, Message
from pumice.spark.broker_writer import RowError, SentCount, check_schema, send_rows
from pumice.spark.options import OptionError, WriteOptions

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
_LIMITS = (("batch id", 1 << 32), ("partition", 1 << 24), ("row index", 1 << 32))


def query_hash(identity: str) -> str:
    """The key's first field: 10 hex characters of SHA-256 of the query identity."""
    return hashlib.sha256(identity.encode()).hexdigest()[:10].upper()


def uniq_key(query: str, batch_id: int, partition: int, row: int) -> str:
    """The UNIQ_KEY of a row (``query`` is ``query_hash(identity)``); see the module's layout."""
    for (name, limit), value in zip(_LIMITS, (batch_id, partition, row), strict=True):
        if not 0 <= value < limit:
            raise RowError(f"the {name} {value} does not fit the stream sink's UNIQ_KEY (0..{limit - 1})")
    return f"{query}{batch_id:08X}{partition:06X}{row:08X}"


def _task_context() -> tuple[int, str | None, str | None]:
    """The task's partition id, query id and batch id (the last two None outside a streaming query)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return -1, None, None
    return ctx.partitionId(), ctx.getLocalProperty(QUERY_ID_PROPERTY), ctx.getLocalProperty(BATCH_ID_PROPERTY)


class BrokerStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: WriteOptions, schema: StructType, checkpoint: str | None) -> None:
        check_schema(schema, opts)
        self.opts = opts
        self.fields = {f.name for f in schema.fields}
        self.checkpoint = checkpoint

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        pid, query_id, batch = _task_context()
        identity = query_id or self.checkpoint
        if not identity or batch is None or pid < 0:
            raise OptionError(
                "the pumice stream sink needs Spark's query id (or option checkpointLocation), batch id and "
                f"partition id in its tasks; got {query_id!r}, {batch!r}, {pid}"
            )
        qh, batch_id = query_hash(identity), int(batch)

        def stamp(msg: Message, i: int) -> None:
            msg.properties[PROPERTY_UNIQ_KEY] = uniq_key(qh, batch_id, pid, i)

        return send_rows(self.opts, self.fields, iterator, pid, stamp)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = [m for m in messages if isinstance(m, SentCount)]
        log.info(
            "pumice stream sink: batch %d: %d messages in %d batches from %d tasks",
            batchId,
            sum(m.messages for m in sent),
            sum(m.batches for m in sent),
            len(sent),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = [m for m in messages if isinstance(m, SentCount)]
        log.warning(
            "pumice stream sink: batch %d failed: %d messages were sent (and stay sent) by %d tasks; "
            "its replay sends them again under the same UNIQ_KEYs",
            batchId,
            sum(m.messages for m in sent),
            len(sent),
        )
