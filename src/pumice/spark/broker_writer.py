"""Writing to brokers: ``df.write.format("pumice").mode("append").option("namesrv", …).save()``.

Spark lets a Python data source be written in mode append or overwrite only (the default
mode, ErrorIfExists, fails in Spark's analysis); overwrite is refused: topics are appended to.

=============  ==============================  ================================================
column         type                            meaning
=============  ==============================  ================================================
body           binary or string (required)     the body (a string is sent as UTF-8); not null,
                                               not empty
topic          string (optional)               the topic of the row; null or absent: the
                                               ``topic`` option
tags           string (optional)               TAGS
keys           string or array<string>         KEYS (a string is split on spaces)
properties     map<string,string> (optional)   user properties (not TAGS, KEYS, WAIT, DELAY,
                                               UNIQ_KEY)
queueId        int (optional)                  send to this queue of the topic's first
                                               writable broker that has it; null: the producer
                                               picks
=============  ==============================  ================================================

Other columns (a read's brokerName, msgId, offsetMsgId, …) are ignored: a message sent gets a
new UNIQ_KEY (msgId). Each task starts a private ``AsyncProducer`` on a short-lived event loop
and sends its rows as SEND_BATCH_MESSAGE batches, one (topic, queueId) per batch, at most
``batchMessages`` messages and about ``batchBytes`` bytes each, in row order within a (topic,
queueId); a batch is sent once full, so a task holds at most one open batch per (topic,
queueId). A bad row fails the task with a message naming the partition, the row index and the
column (batches sent before it stay sent). The commit message counts what the task sent; the
driver logs the total.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, MapType, StringType, StructType

from pumice.client.message import RESERVED_PROPERTIES, Message, MessageQueue
from pumice.client.producer import AsyncProducer
from pumice.spark.options import OptionError, WriteOptions

log = logging.getLogger(__name__)

_TYPES: dict[str, tuple[type, ...]] = {
    "body": (BinaryType, StringType),
    "topic": (StringType,),
    "tags": (StringType,),
    "keys": (StringType, ArrayType),
    "properties": (MapType,),
    "queueId": (IntegerType,),
}


def check_schema(schema: StructType, opts: WriteOptions) -> None:
    """The columns' types, on the driver (rows are checked in the tasks)."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "body" not in fields:
        raise OptionError("a pumice write needs a body column (binary or string)")
    if "topic" not in fields and opts.topic is None:
        raise OptionError("a pumice write needs option topic or a topic column")
    for name, allowed in _TYPES.items():
        typ = fields.get(name)
        if typ is None:
            continue
        ok = isinstance(typ, allowed)
        if isinstance(typ, ArrayType):
            ok = ok and isinstance(typ.elementType, StringType)
        if isinstance(typ, MapType):
            ok = isinstance(typ.keyType, StringType) and isinstance(typ.valueType, StringType)
        if not ok:
            raise OptionError(f"column {name}: type {typ.simpleString()} is not supported")


class RowError(ValueError):
    """A row that cannot be sent."""


def row_message(row: Any, fields: set[str], default_topic: str | None, where: str) -> tuple[Message, int | None]:
    """The message of one row and its queueId (or None)."""

    def bad(column: str, why: str) -> RowError:
        return RowError(f"{where}, column {column}: {why}")

    body = row["body"]
    if body is None:
        raise bad("body", "is null")
    if isinstance(body, str):
        body = body.encode()
    elif isinstance(body, (bytes, bytearray, memoryview)):
        body = bytes(body)
    else:
        raise bad("body", f"expected binary or string, got {type(body).__name__}")
    if not body:
        raise bad("body", "is empty")
    topic = row["topic"] if "topic" in fields else None
    if topic is None:
        topic = default_topic
    if not isinstance(topic, str) or not topic:
        raise bad("topic", "is null and the topic option is not set" if topic is None else "is not a topic name")
    tags = row["tags"] if "tags" in fields else None
    if tags is not None and not isinstance(tags, str):
        raise bad("tags", f"expected a string, got {type(tags).__name__}")
    keys = row["keys"] if "keys" in fields else None
    if keys is not None and not isinstance(keys, str):
        if not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) for k in keys):
            raise bad("keys", "expected a string or an array of strings")
        keys = list(keys)
    props = row["properties"] if "properties" in fields else None
    properties: dict[str, str] = {}
    if props is not None:
        if not isinstance(props, dict):
            raise bad("properties", f"expected a map, got {type(props).__name__}")
        for k, v in props.items():
            if not isinstance(k, str) or not k or not isinstance(v, str) or not v:
                raise bad("properties", f"entry {k!r}: names and values must be non-empty strings")
            if k in RESERVED_PROPERTIES:
                raise bad("properties", f"{k!r} is reserved for the client (use the tags or keys column)")
            if "\x01" in k + v or "\x02" in k + v:
                raise bad("properties", f"entry {k!r} holds a \\x01 or \\x02 separator")
            properties[k] = v
    queue_id = row["queueId"] if "queueId" in fields else None
    if queue_id is not None and (not isinstance(queue_id, int) or queue_id < 0):
        raise bad("queueId", f"expected a non-negative int, got {queue_id!r}")
    return Message(topic, body, tags=tags, keys=keys, properties=properties), queue_id


@dataclass
class SentCount(WriterCommitMessage):
    partition: int
    messages: int
    batches: int


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else -1


class _Sender:
    """A private producer on a short-lived event loop, sending one batch at a time."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.loop = asyncio.new_event_loop()
        self.producer = AsyncProducer(opts.producer_group, opts.namesrv, send_msg_timeout_s=opts.timeout_s,
                                      access_key=opts.access_key, secret_key=opts.secret_key,
                                      use_tls=opts.tls.context() or False)  # fmt: skip
        self.queues: dict[tuple[str, int], MessageQueue] = {}
        self.messages = self.batches = 0
        self.loop.run_until_complete(self.producer.start())

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, self.opts.timeout_s * 3))

    def send(self, topic: str, queue_id: int | None, chunk: list[Message]) -> None:
        mq = None
        if queue_id is not None:
            mq = self.queues.get((topic, queue_id))
            if mq is None:
                queues = self._run(self.producer.fetch_publish_message_queues(topic))
                found = next((q for q in queues if q.queue_id == queue_id), None)
                if found is None:
                    raise RowError(f"topic {topic} has no writable queue {queue_id} ({len(queues)} queues)")
                mq = self.queues[(topic, queue_id)] = MessageQueue(topic, found.broker_name, queue_id)
        self._run(self.producer.send_batch(chunk, mq, timeout_s=self.opts.timeout_s))
        self.messages += len(chunk)
        self.batches += 1

    def close(self) -> None:
        try:
            self._run(self.producer.shutdown())
        finally:
            self.loop.close()


def send_rows(
    opts: WriteOptions,
    fields: set[str],
    rows: Iterator[Any],
    pid: int,
    stamp: Callable[[Message, int], None] | None = None,
) -> SentCount:
    """One task's rows, checked and sent in batches per (topic, queueId); ``stamp(msg, i)``, when
    given, may set properties of row ``i``'s message (the stream sink's UNIQ_KEY) before it is batched."""
    open_chunks: dict[tuple[str, int | None], tuple[list[Message], int]] = {}
    sender: _Sender | None = None
    try:
        for i, row in enumerate(rows):
            msg, queue_id = row_message(row, fields, opts.topic, f"partition {pid}, row {i}")
            if stamp is not None:
                stamp(msg, i)
            key = (msg.topic, queue_id)
            size = len(msg.body) + 64 + sum(len(k) + len(v) for k, v in msg.wire_properties().items())
            chunk, used = open_chunks.get(key, ([], 0))
            if chunk and (len(chunk) >= opts.batch_messages or used + size > opts.batch_bytes):
                sender = sender or _Sender(opts)
                sender.send(key[0], key[1], chunk)
                chunk, used = [], 0
            chunk.append(msg)
            open_chunks[key] = (chunk, used + size)
        for (topic, queue_id), (chunk, _) in open_chunks.items():
            sender = sender or _Sender(opts)
            sender.send(topic, queue_id, chunk)
    finally:
        if sender is not None:
            sender.close()
    return SentCount(pid, sender.messages if sender else 0, sender.batches if sender else 0)


class BrokerWriter(DataSourceWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_schema(schema, opts)
        self.opts = opts
        self.fields = {f.name for f in schema.fields}

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return send_rows(self.opts, self.fields, iterator, _partition_id())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = [m for m in messages if isinstance(m, SentCount)]
        log.info(
            "pumice write: %d messages in %d batches from %d tasks",
            sum(m.messages for m in sent),
            sum(m.batches for m in sent),
            len(sent),
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = [m for m in messages if isinstance(m, SentCount)]
        log.warning(
            "pumice write failed: %d messages were sent (and stay sent) by %d tasks before it did",
            sum(m.messages for m in sent),
            len(sent),
        )
