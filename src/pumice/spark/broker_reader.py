"""Reading from brokers: the plan (on the driver) and what each task pulls.

=================  ==========================================================================
step               how
=================  ==========================================================================
plan (driver)      for each topic: its route from the name server, then for each readable
                   queue of each broker its min and max offsets (GET_MIN_OFFSET,
                   GET_MAX_OFFSET) and the range to read: ``startingOffsets`` /
                   ``endingOffsets``, or ``startingTimestamp`` / ``endingTimestamp`` through
                   SEARCH_OFFSET_BY_TIMESTAMP. A start below the min offset is data loss:
                   the query fails (``failOnDataLoss``, the default) or starts at the min
                   offset with a warning. One input partition per non-empty (broker, queue)
                   range; with ``minPartitions`` above that count, ranges are split evenly,
                   each in proportion to its size.
task (executor)    a private ``MQClientAPIImpl`` on a short-lived event loop pulls the range
                   (PULL_MESSAGE, ``pullBatchSize`` messages, no commit, no suspend) from the
                   broker that owns the queue, following ``suggestWhichBrokerId`` when the
                   route knows that broker id (a slave, with ``slaveReadEnable``). A slave
                   that is down, lacks the topic or lags behind the range is left for the
                   master at once. Each pull body (a run of CommitLog records)
                   becomes one Arrow batch through ``record_columns``; rows outside the range,
                   the tag filter (``subExpression``, checked again by tag string as the pull
                   consumer does) or the timestamps are dropped.
=================  ==========================================================================

Partitions hold plain values only (strings, ints, a dict of addresses): they are pickled to
the executors. Timestamps bound the range twice: SEARCH_OFFSET_BY_TIMESTAMP answers the
*nearest* offset, so the task also keeps only rows with ``startingTimestamp ≤ storeTimestamp
< endingTimestamp``.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import math
import re
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, InputPartition

from pumice.client.exceptions import MQBrokerError, MQClientError, RemotingError
from pumice.client.message import PullStatus, decode_messages
from pumice.client.mq_client_api import PULL_FLAG_SUBSCRIPTION, MQClientAPIImpl
from pumice.client.subscription import build_subscription
from pumice.common.acl_signer import credentials
from pumice.common.message_decoder import MIN_RECORD_SIZE
from pumice.common.mix_all import MASTER_ID
from pumice.common.perm_name import PERM_READ
from pumice.remoting.response_code import ResponseCode
from pumice.spark.options import EARLIEST, LATEST, BrokerReadOptions, OptionError, queue_timestamp

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

# the decode's imports (record_columns, pyarrow.compute, numpy) are made where a task decodes:
# Spark's driver-side Python processes (the stream reader's, the read planner's) only plan, and
# each one starts fresh

log = logging.getLogger(__name__)

READER_GROUP = "PUMICE_SPARK_READER"
_TOTALSIZE = struct.Struct(">i").unpack_from


class DataLossError(RuntimeError):
    """Messages the read asked for are gone from the broker (and ``failOnDataLoss`` is on)."""


@dataclass
class BrokerPartition(InputPartition):
    """Queue offsets [start, end) of one queue of one broker."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int
    addrs: dict[int, str] = field(default_factory=dict)  # broker id -> address, from the route


def client_api(opts: BrokerReadOptions) -> MQClientAPIImpl:
    """A client for the read's requests: TLS (useTLS), and signing them when the options name an
    ACL account."""
    api = MQClientAPIImpl(timeout_s=opts.timeout_s, ssl_context=opts.tls.context())
    keys = credentials(opts.access_key, opts.secret_key)
    if keys is not None:
        api.remoting.rpc_hook = keys.sign_request
    return api


def data_loss_message(topic: str, broker: str, queue_id: int, start: int, min_offset: int) -> str:
    return (
        f"data loss: topic {topic}, broker {broker}, queue {queue_id}: starting offset {start} is below the "
        f"queue's min offset {min_offset} (those messages were deleted); set failOnDataLoss=false to start "
        f"at {min_offset} instead"
    )


def resolve_start(
    opts: BrokerReadOptions, topic: str, broker: str, queue_id: int, requested: int, lo: int, hi: int
) -> int:
    """The first offset to read, given the queue's [lo, hi) and the requested start (-2/-1 or an offset)."""
    start = lo if requested == EARLIEST else hi if requested == LATEST else requested
    if start < lo:
        message = data_loss_message(topic, broker, queue_id, start, lo)
        if opts.fail_on_data_loss:
            raise DataLossError(message)
        log.warning("%s: starting at %d", message, lo)
        start = lo
    return min(start, hi)


def resolve_end(requested: int, lo: int, hi: int) -> int:
    end = lo if requested == EARLIEST else hi if requested == LATEST else requested
    return max(lo, min(end, hi))


def split(
    partitions: list[BrokerPartition], min_partitions: int | None, max_records: int | None = None
) -> list[BrokerPartition]:
    """Ranges of at most ``max_records`` offsets (``maxRecordsPerPartition``), then at least
    ``min_partitions`` partitions (when the offsets allow): each range in about
    ``size / total * min_partitions`` even pieces."""
    if max_records:
        capped: list[BrokerPartition] = []
        for p in partitions:
            pieces = math.ceil((p.end - p.start) / max_records)
            bounds = [p.start + (p.end - p.start) * i // pieces for i in range(pieces + 1)]
            capped += [replace(p, start=a, end=b) for a, b in itertools.pairwise(bounds) if a < b]
        partitions = capped
    if not min_partitions or len(partitions) >= min_partitions:
        return partitions
    total = sum(p.end - p.start for p in partitions)
    out: list[BrokerPartition] = []
    for p in partitions:
        size = p.end - p.start
        pieces = max(1, min(size, math.ceil(size * min_partitions / total)))
        bounds = [p.start + size * i // pieces for i in range(pieces + 1)]
        out += [replace(p, start=a, end=b) for a, b in itertools.pairwise(bounds) if a < b]
    return out


async def _route(api: MQClientAPIImpl, namesrv: str, topic: str):
    last: Exception | None = None
    for addr in [a.strip() for a in namesrv.split(";") if a.strip()]:
        try:
            return await api.get_topic_route_info_from_name_server(addr, topic)
        except MQBrokerError as e:
            if e.code == ResponseCode.TOPIC_NOT_EXIST:
                raise OptionError(f"topic {topic!r} has no route on the name server {addr}") from None
            last = e
        except Exception as e:  # an unreachable name server: try the next one
            last = e
    raise OptionError(f"no name server of {namesrv!r} answered for topic {topic!r}: {last}")


@dataclass(frozen=True)
class QueueBounds:
    """One readable queue as the route and its broker show it now: [min_offset, max_offset)."""

    topic: str
    broker_name: str
    queue_id: int
    addr: str  # the address asked (the master when there is one)
    addrs: dict[int, str]  # broker id -> address, from the route
    min_offset: int
    max_offset: int


_SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        "SELF_TEST_TOPIC",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SCHEDULE_TOPIC_XXXX",
        "TRANS_CHECK_MAX_TIME_TOPIC",
    }
)


async def matching_topics(api: MQClientAPIImpl, opts: BrokerReadOptions) -> list[str]:
    """The name server's topics whose whole name matches ``topicPattern``, without system topics
    (as Kafka's subscribePattern leaves internal topics out), sorted."""
    assert opts.topic_pattern is not None
    pattern = re.compile(opts.topic_pattern)
    last: Exception | None = None
    for addr in [a.strip() for a in opts.namesrv.split(";") if a.strip()]:
        try:
            names = await api.get_topic_list_from_name_server(addr)
            info = await api.get_broker_cluster_info(addr)
            break
        except Exception as e:  # an unreachable name server: try the next one
            last = e
    else:
        raise OptionError(f"no name server of {opts.namesrv!r} listed its topics: {last}")
    # RocketMQ registers each cluster and broker name as a topic too
    system = _SYSTEM_TOPICS | set(info.cluster_addr_table) | set(info.broker_addr_table)
    return sorted(
        t
        for t in names
        if t not in system and not t.startswith(("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_")) and pattern.fullmatch(t)
    )


async def scan_queues(api: MQClientAPIImpl, opts: BrokerReadOptions) -> list[QueueBounds]:
    """Every readable queue of ``opts.topics`` (or of the topics ``topicPattern`` matches now),
    from the name server's routes, with its min and max offsets."""
    out: list[QueueBounds] = []
    topics = opts.topics if opts.topic_pattern is None else await matching_topics(api, opts)
    for topic in topics:
        route = await _route(api, opts.namesrv, topic)
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            bd = route.broker(qd.broker_name)
            addr = bd.select_broker_addr() if bd is not None else None
            if not qd.perm & PERM_READ or bd is None or addr is None:
                log.warning("topic %s: broker %s is not readable or has no address", topic, qd.broker_name)
                continue
            for qid in range(qd.read_queue_nums):
                lo = await api.get_min_offset(addr, topic, qid)
                hi = await api.get_max_offset(addr, topic, qid)
                out.append(QueueBounds(topic, qd.broker_name, qid, addr, dict(bd.broker_addrs), lo, hi))
    return out


async def _store_time(api: MQClientAPIImpl, opts: BrokerReadOptions, q: QueueBounds, offset: int) -> int:
    """The store time (ms) of the message at ``offset`` of ``q``: one pull of one message."""
    r = await api.pull_message(
        q.addr, group=READER_GROUP, topic=q.topic, queue_id=q.queue_id, offset=offset, max_nums=1,
        sys_flag=PULL_FLAG_SUBSCRIPTION, subscription="*", timeout_s=opts.timeout_s,
    )  # fmt: skip
    msgs = decode_messages(r.raw_body, decompress=False) if r.status == PullStatus.FOUND else []
    if not msgs:
        raise DataLossError(f"{q.topic}/{q.broker_name}/{q.queue_id}: no message at offset {offset} ({r.status})")
    return int(msgs[0].store_timestamp)


async def first_offset_at(api: MQClientAPIImpl, opts: BrokerReadOptions, q: QueueBounds, ms: int) -> int | None:
    """The offset of ``q``'s first message stored at or after ``ms``; None when there is none.

    SEARCH_OFFSET_BY_TIMESTAMP answers the *nearest* message (ties to the earlier one), so it is
    either that first message or the one just before it: one message's store time tells which."""
    if q.min_offset >= q.max_offset:
        return None
    near = min(max(await api.search_offset(q.addr, q.topic, q.queue_id, ms), q.min_offset), q.max_offset - 1)
    if await _store_time(api, opts, q, near) >= ms:
        return near
    return near + 1 if near + 1 < q.max_offset else None


async def requested_start(api: MQClientAPIImpl, opts: BrokerReadOptions, q: QueueBounds) -> int:
    """The first offset to read from ``q``: ``startingOffsets``, ``startingTimestamp`` or
    ``startingOffsetsByTimestamp``, resolved."""
    want = opts.requested(q.topic, q.broker_name, q.queue_id)[0]
    if opts.starting_by_timestamp is not None:
        key = "startingOffsetsByTimestamp"
        ms = queue_timestamp(opts.starting_by_timestamp, key, q.topic, q.broker_name, q.queue_id)
        found = await first_offset_at(api, opts, q, ms)
        if found is None and not opts.starting_by_timestamp_latest:
            raise OptionError(
                f"{key}: topic {q.topic}, broker {q.broker_name}, queue {q.queue_id} has no message stored at or "
                f"after {ms}; set startingOffsetsByTimestampStrategy=latest to start such a queue at its end"
            )
        want = q.max_offset if found is None else found
    elif opts.starting_timestamp is not None:
        want = await api.search_offset(q.addr, q.topic, q.queue_id, opts.starting_timestamp)
    return resolve_start(opts, q.topic, q.broker_name, q.queue_id, want, q.min_offset, q.max_offset)


async def plan_async(opts: BrokerReadOptions) -> list[BrokerPartition]:
    api = client_api(opts)
    out: list[BrokerPartition] = []
    try:
        for q in await scan_queues(api, opts):
            want_end = opts.requested(q.topic, q.broker_name, q.queue_id)[1]
            if opts.ending_timestamp is not None:
                # the nearest offset may be just before the time: read it too, the task filters
                want_end = await api.search_offset(q.addr, q.topic, q.queue_id, opts.ending_timestamp) + 1
            elif opts.ending_by_timestamp is not None:
                ms = queue_timestamp(opts.ending_by_timestamp, "endingOffsetsByTimestamp", q.topic, q.broker_name,
                                     q.queue_id)  # fmt: skip
                found = await first_offset_at(api, opts, q, ms)
                want_end = q.max_offset if found is None else found  # none at that time: the end, as Kafka's
            start = await requested_start(api, opts, q)
            end = resolve_end(want_end, q.min_offset, q.max_offset)
            if start < end:
                out.append(BrokerPartition(q.topic, q.broker_name, q.queue_id, start, end, dict(q.addrs)))
    finally:
        await api.close()
    return split(out, opts.min_partitions, opts.max_records_per_partition)


class BrokerReader(DataSourceReader):
    def __init__(self, opts: BrokerReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return list(asyncio.run(plan_async(self.opts)))

    def read(self, partition: InputPartition) -> Iterator:
        if isinstance(partition, BrokerPartition):
            return read_range(partition, self.opts)
        return iter(())  # a plan with no partition: Spark still runs one task, with a placeholder


def record_starts(body: bytes) -> np.ndarray:
    """Record positions in a pull body, by TOTALSIZE (the body must be whole records)."""
    import numpy as np

    starts: list[int] = []
    pos, size = 0, len(body)
    while pos < size:  # each step moves on by at least MIN_RECORD_SIZE
        total = _TOTALSIZE(body, pos)[0] if size - pos >= 4 else 0
        if total < MIN_RECORD_SIZE or total > size - pos:
            raise ValueError(f"pull body: bad record length {total} at byte {pos} of {size}")
        starts.append(pos)
        pos += total
    return np.array(starts, dtype=np.int64)


def decode_body(body: bytes, broker_name: str, schema: pa.Schema) -> pa.RecordBatch:
    import numpy as np

    from pumice.spark.record_columns import layout, to_record_batch

    nb = np.frombuffer(body, dtype=np.uint8)
    lay = layout(nb, record_starts(body))
    if not lay.valid.all():
        bad = int(lay.starts[int(np.flatnonzero(~lay.valid)[0])])
        raise ValueError(f"pull body: the record at byte {bad} is not valid")
    return to_record_batch(nb, lay, broker_name=broker_name, schema=schema)


def _keep(batch: pa.RecordBatch, p: BrokerPartition, opts: BrokerReadOptions, tags: list[str]) -> pa.RecordBatch:
    import pyarrow as pa
    import pyarrow.compute as pc

    from pumice.sql92 import compile_sql92

    offsets = batch.column("queueOffset")
    mask = pc.and_(pc.greater_equal(offsets, p.start), pc.less(offsets, p.end))
    if tags:
        mask = pc.and_(mask, pc.fill_null(pc.is_in(batch.column("tags"), pa.array(tags, pa.string())), False))
    ts = batch.column("storeTimestamp")
    if opts.starting_timestamp is not None:
        mask = pc.and_(mask, pc.greater_equal(ts, pa.scalar(opts.starting_timestamp * 1000, ts.type)))
    if opts.ending_timestamp is not None:
        mask = pc.and_(mask, pc.less(ts, pa.scalar(opts.ending_timestamp * 1000, ts.type)))
    if opts.sql_filter is not None:  # per row: the properties are the selector's input
        selector = compile_sql92(opts.sql_filter)
        rows = batch.column("properties").to_pylist()
        matched = pa.array([selector.matches(dict(props or ())) for props in rows], pa.bool_())
        mask = pc.and_(mask, matched)
    return batch.filter(mask)


def _without_properties(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    import pyarrow as pa

    i = schema.get_field_index("properties")
    arrays = list(batch.columns)
    arrays[i] = pa.nulls(batch.num_rows, schema.field(i).type)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


ROWS_PER_BATCH = 4096


_QUEUE_OFFSET = struct.Struct(">q").unpack_from  # QUEUEOFFSET, byte 20 of a record


@dataclass
class _Window:
    """What the pulls of queue offsets [start, end) brought back."""

    bodies: list[bytes] = field(default_factory=list)
    rows: int = 0
    next_offset: int = 0
    ended: bool = False  # the queue ends before the range does (NO_NEW_MSG, OFFSET_ILLEGAL)


def _cut(body: bytes, end: int) -> bytes:
    """The records of a pull body whose queue offsets are below ``end``."""
    for pos in record_starts(body).tolist():
        if _QUEUE_OFFSET(body, pos + 20)[0] >= end:
            return body[:pos]
    return body


class _QueuePuller:
    """Pulls one partition's queue, from its master or the slave the broker suggests."""

    def __init__(self, p: BrokerPartition, opts: BrokerReadOptions, api: MQClientAPIImpl, sub_string: str) -> None:
        self.p, self.opts, self.api, self.sub_string = p, opts, api, sub_string
        self.broker_id = MASTER_ID if MASTER_ID in p.addrs else min(p.addrs)
        self.failed: set[int] = set()  # slaves that failed a pull: the master's suggestions of them are not followed

    async def window(self, start: int, end: int, max_nums: int, once: bool) -> _Window:
        """Pulls [start, end) to its end, or (``once``) until one answer moves the offset on."""
        p, opts = self.p, self.opts
        w = _Window(next_offset=start)
        offset = start
        # every round moves on by at least one offset, or ends, or (at most every other round)
        # turns from a lagging slave back to the master
        for _ in range(2 * (end - start) + 16):
            if offset >= end:
                break
            pulled_from = self.broker_id
            # a slave that cannot serve (yet) leaves the rest to the master, if it is up
            may_turn_back = pulled_from != MASTER_ID and MASTER_ID in p.addrs and MASTER_ID not in self.failed
            try:
                r = await self.api.pull_message(
                    p.addrs[pulled_from],
                    group=READER_GROUP,
                    topic=p.topic,
                    queue_id=p.queue_id,
                    offset=offset,
                    max_nums=min(max_nums, end - offset),
                    sys_flag=PULL_FLAG_SUBSCRIPTION,  # no commit, no suspend
                    subscription=self.sub_string,
                    sub_version=time.time_ns() // 1_000_000,
                    timeout_s=opts.timeout_s,
                )
            except MQClientError as e:
                self.failed.add(pulled_from)
                if may_turn_back:
                    # a slave that is down, or has not copied the topic's config yet (TOPIC_NOT_EXIST)
                    log.warning("%s/%s/%d: slave %s answered %s; reading from the master",
                                p.topic, p.broker_name, p.queue_id, p.addrs[pulled_from], e)  # fmt: skip
                    self.broker_id = MASTER_ID
                    continue
                others = sorted(b for b in p.addrs if b not in self.failed)
                if pulled_from != MASTER_ID or not others or not isinstance(e, RemotingError):
                    raise  # a master's own answer (a deleted topic, no permission) stands
                # the master went down mid-read: a slave holds what it had copied
                if self.broker_id == pulled_from:
                    self.broker_id = others[0]
                    log.warning("%s/%s/%d: master %s answered %s; reading from slave %s", p.topic, p.broker_name,
                                p.queue_id, p.addrs[pulled_from], e, p.addrs[self.broker_id])  # fmt: skip
                continue
            if r.suggest_which_broker_id in p.addrs and r.suggest_which_broker_id not in self.failed:
                self.broker_id = r.suggest_which_broker_id
            skipped = r.status == PullStatus.NO_MATCHED_MSG and r.next_begin_offset > offset
            if may_turn_back and r.status != PullStatus.FOUND and not skipped:
                # only the master's answers judge the range: a slave behind it answers NO_NEW_MSG,
                # or PULL_RETRY_IMMEDIATELY for an offset it does not have yet, and one that lacks
                # old files (offsetCheckInSlave) answers OFFSET_ILLEGAL with its own min offset
                self.broker_id = MASTER_ID
                continue
            if offset < r.min_offset and r.status != PullStatus.FOUND:
                message = data_loss_message(p.topic, p.broker_name, p.queue_id, offset, r.min_offset)
                if opts.fail_on_data_loss:
                    raise DataLossError(message)
                log.warning("%s: going on from %d", message, r.min_offset)
                offset = w.next_offset = r.min_offset
                continue
            if r.status == PullStatus.FOUND:
                w.bodies.append(bytes(r.raw_body))
                w.rows += max(r.next_begin_offset - offset, 1)
            elif r.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL):
                log.warning(
                    "%s/%s/%d: pull at %d answered %s (queue [%d, %d)); range ends at %d",
                    p.topic, p.broker_name, p.queue_id, offset, r.status.value, r.min_offset, r.max_offset, p.end,
                )  # fmt: skip
                w.ended = True
                break
            if r.next_begin_offset <= offset:
                raise RuntimeError(
                    f"{p.topic}/{p.broker_name}/{p.queue_id}: the broker answered nextBeginOffset "
                    f"{r.next_begin_offset} for a pull at {offset}"
                )
            offset = w.next_offset = r.next_begin_offset
            if once:
                return w
        if offset < end and not w.ended:
            # never reached in practice: only failover turns can use the rounds up
            raise RuntimeError(f"{p.topic}/{p.broker_name}/{p.queue_id}: no progress past offset {offset}")
        return w


def read_range(p: BrokerPartition, opts: BrokerReadOptions) -> Iterator[pa.RecordBatch]:
    """Batches of queue offsets [p.start, p.end) of one queue, pulled from its broker.

    Unfiltered, the range is pulled as windows of ``pullBatchSize`` offsets, ``pullsInFlight``
    at once, handed on in order: one pull at a time leaves the task waiting a round trip per 32
    messages. A filtered pull answers up to ``pullBatchSize`` *matches* and may scan past its
    window, so a filtered range is pulled one window after the other, each from where the last
    one ended."""
    from pumice.spark.schema import arrow_schema

    schema = arrow_schema(not opts.include_properties)
    sub = build_subscription(p.topic, opts.sub_expression)
    tags = list(sub.tags_set)
    loop = asyncio.new_event_loop()
    api = client_api(opts)
    puller = _QueuePuller(p, opts, api, sub.sub_string)
    width = opts.pull_batch_size
    pipelined = not tags
    # pulled bodies are decoded and handed to Spark a few thousand rows at a time: a batch per pull
    # (32 rows) costs Spark and Arrow more per row than the pull itself
    pending: list[bytes] = []
    pending_rows = 0

    def flush() -> Iterator[pa.RecordBatch]:
        nonlocal pending, pending_rows
        if not pending:
            return
        body = pending[0] if len(pending) == 1 else b"".join(pending)
        pending, pending_rows = [], 0
        batch = _keep(decode_body(body, p.broker_name, schema), p, opts, tags)
        if not opts.include_properties:
            batch = _without_properties(batch, schema)
        if batch.num_rows:
            yield batch

    in_flight: collections.deque[tuple[int, asyncio.Task[_Window]]] = collections.deque()
    next_start = p.start  # of the next window to launch

    def launch() -> None:
        nonlocal next_start
        if next_start >= p.end:
            return
        if pipelined:
            end = min(next_start + width, p.end)
            in_flight.append((end, loop.create_task(puller.window(next_start, end, width, False))))
            next_start = end
        else:  # one answer's worth, then on from where it ended
            in_flight.append((p.end, loop.create_task(puller.window(next_start, p.end, width, True))))

    try:
        for _ in range(opts.pulls_in_flight if pipelined else 1):
            launch()
        while in_flight:
            end, task = in_flight.popleft()
            w = loop.run_until_complete(task)
            if w.next_offset > end and w.bodies:
                # the broker skipped past the window (entries whose records are gone): the windows
                # after it answer those offsets themselves
                w.bodies[-1] = _cut(w.bodies[-1], end)
            pending.extend(w.bodies)
            pending_rows += w.rows
            if w.ended:
                break
            if not pipelined:
                next_start = w.next_offset
            launch()
            if pending_rows >= ROWS_PER_BATCH:
                yield from flush()
        yield from flush()
    finally:
        for _, task in in_flight:
            task.cancel()
        if in_flight:
            loop.run_until_complete(asyncio.gather(*(t for _, t in in_flight), return_exceptions=True))
        loop.run_until_complete(api.close())
        loop.close()
