"""Streaming from brokers: ``spark.readStream.format("pumice")`` as a ``DataSourceStreamReader``.

======================  =======================================================================
step                    how
======================  =======================================================================
offsets                 ``{topic: {brokerName: {"queueId": next offset}}}`` (JSON keys are
                        strings), written in a fixed order so equal offsets are equal JSON
initialOffset           ``startingOffsets`` (default ``latest``) or ``startingTimestamp`` per
                        queue, resolved as the batch read resolves them; kept in and read back
                        from ``initialOffsetsPath`` when given
latestOffset            the route is read again (new queues and brokers are found here; a
                        queue not in the start offsets starts at 0, its beginning), then each
                        queue's max offset; with ``ReadMaxRows`` (``maxOffsetsPerTrigger``)
                        the rows are shared among the queues in proportion to their backlog;
                        after ``prepareForTriggerAvailableNow`` no queue goes past the offsets
                        seen then; with ``minOffsetsPerTrigger`` a smaller backlog is held
                        (``start`` answered) until ``maxTriggerDelay`` has passed
partitions / read       one ``BrokerPartition`` per queue with new offsets, pulled on the
                        executors by the batch read's task (``broker_reader.read_range``)
commit                  with ``commitOffsetsToGroup``: UPDATE_CONSUMER_OFFSET of each queue's
                        end offset, for lag monitoring; failures are logged, the query goes on.
                        Spark calls ``commit`` late (when it plans the next batch), so
                        ``latestOffset`` also writes its ``start``: the end of a finished batch
======================  =======================================================================

Lag: PySpark's Python streaming sources cannot fill a progress's ``metrics`` (Spark's
``PythonMicroBatchStream`` does not implement ``ReportsSourceMetrics``, the hook Kafka's source
fills avgOffsetsBehindLatest/maxOffsetsBehindLatest/minOffsetsBehindLatest through), so
``reportLatestOffset`` puts each queue's max offset into the progress's ``latestOffset`` and
``offsets_behind(query.lastProgress["sources"][0])`` computes Kafka's three figures (and each
queue's) from it and ``endOffset``.

Spark's checkpoint holds the offsets: a restarted query goes on from it whatever the group's
offsets on the brokers say. It does not hold the initial offsets: Spark asks ``initialOffset``
when it plans the first micro-batch and again when it runs it (MicroBatchExecution's
``committedOffsets.get(stream).getOrElse(stream.initialOffset)``), and after a restart whose
checkpoint has no finished batch, and a Python source is not told where the checkpoint is
(``pumice.spark.initial_offsets``). So the reader answers the same offsets to the calls of
one run, and ``latest`` or a time resolved again after a kill before the first batch ended
would skip what arrived in between: with ``initialOffsetsPath`` the first resolution is written
there and read back; without it ``initialOffset`` logs a warning. ``earliest`` and explicit
offsets are stable.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from pumice.client.mq_client_api import MQClientAPIImpl
from pumice.common.mix_all import MASTER_ID
from pumice.spark.broker_reader import (
    BrokerPartition,
    DataLossError,
    QueueBounds,
    client_api,
    read_range,
    requested_start,
    scan_queues,
    split,
)
from pumice.spark.initial_offsets import load as load_initial
from pumice.spark.initial_offsets import store as store_initial
from pumice.spark.options import StreamReadOptions

log = logging.getLogger(__name__)

# topic -> brokerName -> str(queueId) -> next offset to read
StreamOffsets = dict[str, dict[str, dict[str, int]]]
QueueKey = tuple[str, str, int]


def flatten(offsets: StreamOffsets) -> dict[QueueKey, int]:
    return {
        (topic, broker, int(qid)): int(off)
        for topic, brokers in offsets.items()
        for broker, queues in brokers.items()
        for qid, off in queues.items()
    }


def nest(flat: dict[QueueKey, int]) -> StreamOffsets:
    """The offsets JSON, topics, brokers and queue ids in order (equal offsets, equal JSON)."""
    out: StreamOffsets = {}
    for (topic, broker, qid), off in sorted(flat.items()):
        out.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = off
    return out


def offsets_behind(source_progress: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka's lag metrics from one source's progress (``query.lastProgress["sources"][0]``): each
    queue's ``latestOffset - endOffset`` (``offsetsBehindLatest``, nested as the offsets are) and
    their ``avg``/``max``/``minOffsetsBehindLatest``; empty when the progress has no latestOffset."""

    def offsets(key: str) -> dict[QueueKey, int]:
        raw = source_progress.get(key)
        doc = json.loads(raw) if isinstance(raw, str) else raw
        return flatten(doc) if isinstance(doc, dict) else {}

    end, latest = offsets("endOffset"), offsets("latestOffset")
    behind = {k: max(0, hi - end.get(k, 0)) for k, hi in latest.items()}
    if not behind:
        return {}
    return {
        "offsetsBehindLatest": nest(behind),
        "avgOffsetsBehindLatest": sum(behind.values()) / len(behind),
        "maxOffsetsBehindLatest": max(behind.values()),
        "minOffsetsBehindLatest": min(behind.values()),
    }


def share(backlogs: dict[QueueKey, int], max_rows: int) -> dict[QueueKey, int]:
    """How many of its backlog each queue may read when all together may read ``max_rows``:
    in proportion to the backlogs, the remainder to the largest fractions; the sum is
    ``min(max_rows, total)``, so a batch always moves on when there is a backlog."""
    total = sum(backlogs.values())
    if total <= max_rows:
        return dict(backlogs)
    taken = {k: b * max_rows // total for k, b in backlogs.items()}
    rest = max_rows - sum(taken.values())
    by_fraction = sorted(backlogs, key=lambda k: (-(backlogs[k] * max_rows % total), k))
    for k in by_fraction:
        if rest <= 0:
            break
        if taken[k] < backlogs[k]:
            taken[k] += 1
            rest -= 1
    return taken


class BrokerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Runs in two places: on the driver (offsets, partitions, commit; one instance per query run)
    and on the executors (``read`` only, from pickled plain values)."""

    def __init__(self, opts: StreamReadOptions) -> None:
        self.sopts = opts
        self.opts = opts.read
        self._addrs: dict[tuple[str, str], dict[int, str]] = {}  # (topic, broker) -> broker id -> address
        self._target: dict[QueueKey, int] | None = None  # set by prepareForTriggerAvailableNow
        self._latest: StreamOffsets | None = None
        self._committed: dict[QueueKey, int] = {}  # what commitOffsetsToGroup last wrote
        self._last_trigger = 0.0  # monotonic time of the last batch let through (0: the first is never held)
        self._initial: StreamOffsets | None = None  # what initialOffset answered first

    # -- driver ------------------------------------------------------------------------------------

    def _run(self, work):
        async def go():
            api = client_api(self.opts)
            try:
                return await work(api)
            finally:
                await api.close()

        return asyncio.run(go())

    async def _scan_async(self, api: MQClientAPIImpl) -> list[QueueBounds]:
        queues = await scan_queues(api, self.opts)
        for q in queues:
            self._addrs[(q.topic, q.broker_name)] = dict(q.addrs)
        return queues

    def initialOffset(self) -> StreamOffsets:
        """Spark asks when its checkpoint has no committed offsets yet: a new query, or one killed
        before its first micro-batch ended (then the kept offsets, if any, are the answer). It asks
        twice for a first batch (planning it, then running it): the first answer is kept for the second."""
        if self._initial is None:
            self._initial = self._resolve_initial()
        return self._initial

    def _resolve_initial(self) -> StreamOffsets:
        kept_in = self.sopts.initial_offsets_path
        if kept_in is not None:
            kept = load_initial(kept_in, self.opts)
            if kept is not None:
                log.info("initial offsets read from %s", kept_in)
                return kept
        elif self.sopts.start_moves:
            log.warning(
                "the stream starts from latest or a timestamp and option initialOffsetsPath is not set: if the "
                "query stops before its first micro-batch is in its checkpoint, a restart resolves the start again "
                "and skips what arrived in between (Spark gives a Python source no checkpoint to keep it in); "
                "set initialOffsetsPath to a directory inside the query's checkpoint"
            )

        async def work(api: MQClientAPIImpl) -> StreamOffsets:
            queues = await self._scan_async(api)
            return nest(
                {(q.topic, q.broker_name, q.queue_id): await requested_start(api, self.opts, q) for q in queues}
            )

        offsets = self._run(work)
        if kept_in is not None:
            store_initial(kept_in, self.opts, offsets)
        return offsets

    def _max_offsets(self) -> dict[QueueKey, int]:
        queues = self._run(self._scan_async)
        return {(q.topic, q.broker_name, q.queue_id): q.max_offset for q in queues}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._max_offsets()

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.sopts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: StreamOffsets, limit: ReadLimit) -> StreamOffsets:
        begin = flatten(start)
        latest = self._max_offsets()
        # start is where a finished micro-batch ended (Spark calls commit(end) only when it plans the
        # next one, so the last batch of an AvailableNow run would otherwise never reach the group)
        self._commit_to_group(begin)
        self._latest = nest(latest)
        if self._target is not None:  # Trigger.AvailableNow: nothing past what was there at the start
            latest = {k: min(v, self._target[k]) for k, v in latest.items() if k in self._target}
        backlogs = {k: max(0, hi - begin.get(k, 0)) for k, hi in latest.items()}
        if self._held(sum(backlogs.values())):
            return start
        if isinstance(limit, ReadMaxRows):
            backlogs = share(backlogs, limit.max_rows)
        end = dict(begin)  # queues no longer in the route keep their offsets
        for k, n in backlogs.items():
            end[k] = begin.get(k, 0) + n
        return start if end == begin else nest(end)

    def _held(self, backlog: int) -> bool:
        """``minOffsetsPerTrigger``: hold the batch while fewer messages wait, until ``maxTriggerDelay``
        has passed since the last batch let through (Trigger.AvailableNow is never held)."""
        least = self.sopts.min_offsets_per_trigger
        if backlog == 0 or not least or self._target is not None:
            return False
        now = time.monotonic()
        if backlog < least and self._last_trigger and now - self._last_trigger < self.sopts.max_trigger_delay_s:
            return True
        self._last_trigger = now
        return False

    def reportLatestOffset(self) -> StreamOffsets | None:
        return self._latest

    def _addrs_of(self, topic: str, broker: str) -> dict[int, str] | None:
        if (topic, broker) not in self._addrs:
            self._run(self._scan_async)
        return self._addrs.get((topic, broker))

    def partitions(self, start: StreamOffsets, end: StreamOffsets) -> list[InputPartition]:
        begin = flatten(start)
        out: list[BrokerPartition] = []
        for (topic, broker, qid), stop in sorted(flatten(end).items()):
            first = begin.get((topic, broker, qid), 0)
            if first >= stop:
                continue
            addrs = self._addrs_of(topic, broker)
            if not addrs:
                message = f"{topic}/{broker}/{qid}: the broker left the route; offsets [{first}, {stop}) are lost"
                if self.opts.fail_on_data_loss:
                    raise DataLossError(message)
                log.warning("%s", message)
                continue
            out.append(BrokerPartition(topic, broker, qid, first, stop, dict(addrs)))
        return list(split(out, self.opts.min_partitions, self.opts.max_records_per_partition))

    def commit(self, end: StreamOffsets) -> None:
        self._commit_to_group(flatten(end))

    def _commit_to_group(self, offsets: dict[QueueKey, int]) -> None:
        """``commitOffsetsToGroup``: UPDATE_CONSUMER_OFFSET of the queues that moved since the last time."""
        group = self.sopts.commit_group
        changed = {k: v for k, v in offsets.items() if self._committed.get(k) != v}
        if not group or not changed:
            return

        async def work(api: MQClientAPIImpl) -> None:
            for (topic, broker, qid), off in sorted(changed.items()):
                addr = (self._addrs.get((topic, broker)) or {}).get(MASTER_ID)
                if addr is None:
                    log.warning("commitOffsetsToGroup %s: %s/%s has no master address", group, topic, broker)
                    continue
                await api.update_consumer_offset(addr, group, topic, qid, off)
                self._committed[(topic, broker, qid)] = off

        try:
            if any(k[:2] not in self._addrs for k in changed):
                self._run(self._scan_async)
            self._run(work)
        except Exception as e:  # a convenience only: the checkpoint has the offsets
            log.warning("commitOffsetsToGroup %s: %s", group, e)

    # -- executors ---------------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator:
        if isinstance(partition, BrokerPartition):
            return read_range(partition, self.opts)
        return iter(())
