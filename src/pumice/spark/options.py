"""The options of the ``pumice`` data source, checked once when a read is planned.

===================  ==============================  ===========================================
option               default                         meaning
===================  ==============================  ===========================================
path                 (required for a store read)     store root directory; ``load(path)`` sets it
commitLogPath        ``<path>/commitlog``            CommitLog directory (``storePathCommitLog``)
brokerName           see below                       the ``brokerName`` column
topic / topics       all (read the CommitLog)        comma-separated topics: read through their
                                                     ConsumeQueues instead
startingOffsets      ``earliest``                    ``earliest``, ``latest`` or JSON (below);
                                                     ConsumeQueue reads only
endingOffsets        ``latest``                      exclusive; same forms
batchSize            8192                            records per Arrow batch
checkCRC             ``false``                       also check each body's CRC; a record that
                                                     fails counts as not valid
maxPartitionBytes    134217728 (128 MiB)             CommitLog reads: a segment holding more
                                                     valid records than this is split into
                                                     ranges of about this size, one task each
minPartitions        --                              CommitLog reads: split segments further, so
                                                     that there are at least this many ranges
===================  ==============================  ===========================================

``brokerName`` defaults to the store directory's name (``/data/broker-b`` → ``broker-b``),
except when that is ``store`` (RocketMQ's default ``storePathRootDir``, which names no
broker): then ``broker-a``, RocketMQ's default broker name.

Offsets JSON, as Kafka's source has it, one level deeper: topic → brokerName → queueId →
offset, where -2 means earliest and -1 latest; a queue not named gets the default, and
entries for another broker name are ignored::

    {"TopicA": {"broker-a": {"0": 23, "1": -2}}, "TopicB": {"broker-a": {"0": 5}}}

"latest" is each queue's end when the read is planned, so every task reads one snapshot.

Reading from brokers (``option("namesrv", …)``, no path; ``BrokerReadOptions``):

===================  ==============================  ===========================================
option               default                         meaning
===================  ==============================  ===========================================
namesrv              (required)                      name server ``host:port`` (``;`` between
                                                     several: tried in turn)
topic / topics       (one of these three)            comma-separated topics
topicPattern                                         a Python regex the whole topic name must
                                                     match, among the name server's topics minus
                                                     system ones (TBW102, %RETRY%/%DLQ%, SCHEDULE_
                                                     TOPIC_XXXX, RMQ_SYS_*, cluster and broker
                                                     names); re-evaluated by each micro-batch
startingOffsets      ``earliest``                    ``earliest``, ``latest`` or the JSON above,
                                                     every broker name taken (not only one)
endingOffsets        ``latest``                      exclusive; same forms
startingTimestamp    --                              ms; instead of startingOffsets: per queue
                                                     SEARCH_OFFSET_BY_TIMESTAMP, and rows with
                                                     an earlier storeTimestamp are dropped
endingTimestamp      --                              ms, exclusive; instead of endingOffsets
startingOffsetsBy-   --                              JSON topic → brokerName → queueId → ms, every
Timestamp                                            queue named: each starts at its first message
                                                     stored at or after its time (exact)
startingOffsetsBy-   ``error``                       a queue with no message at or after its time:
TimestampStrategy                                    ``error`` fails the read, ``latest`` starts it
                                                     at its end
endingOffsetsBy-     --                              the same JSON: each queue ends (exclusive) at
Timestamp                                            its first message at or after its time, or
                                                     at its end when there is none
maxRecordsPerPartition  --                           a queue range longer than this is split into
                                                     tasks of at most this many offsets (before
                                                     minPartitions splits further)
subExpression        ``*``                           tag filter ``TagA || TagB``
sqlFilter            --                              an SQL92 selector (RocketMQ's, as
                                                     ``MessageSelector.bySql``) on each row's
                                                     properties, evaluated by the reader
failOnDataLoss       ``true``                        a start below a queue's min offset fails
                                                     the query; ``false``: start at the min
                                                     offset, with a warning
includeProperties    ``true``                        ``false``: the properties column is null
minPartitions        one per (broker, queue)         split ranges evenly to reach this count
pullBatchSize        32                              maxMsgNums of each pull (32..1024)
pullsInFlight        16                              pulls of one queue at once (1..64); refused
                                                     with a tag filter (those pull one at a time)
timeoutMs            10000                           each request's answer timeout
accessKey, secretKey --                              an ACL account: every request signed (a
                                                     broker with aclEnable=true)
useTLS               ``false``                       TLS to the name servers and brokers
tlsTrustCertPath     the system's CAs                a CA file the servers' certificates are
                                                     checked against
tlsVerify            ``true``                        ``false``: any server certificate (4.9's
                                                     client default)
tlsCertPath,         --                              a client certificate, for servers with
tlsKeyPath                                           tlsServerNeedClientAuth
===================  ==============================  ===========================================

Streaming from brokers (``spark.readStream.format("pumice")``, ``namesrv`` and ``topic``;
``StreamReadOptions``; ``pumice.spark.broker_stream``) takes the broker options above except
``endingOffsets`` / ``endingTimestamp``, and:

====================  =============================  ===========================================
option                default                        meaning
====================  =============================  ===========================================
startingOffsets       ``latest``                     where a *new* query starts (a restarted one
                                                     goes on from its checkpoint); queues found
                                                     later start at their beginning
maxOffsetsPerTrigger  --                             at most this many messages per micro-batch,
                                                     shared among the queues by their backlog
minOffsetsPerTrigger  --                             no micro-batch until this many messages wait,
                                                     or until maxTriggerDelay has passed since the
                                                     last one (the source applies both itself:
                                                     PySpark's ReadMinRows has no delay); ignored
                                                     by Trigger.AvailableNow, as Kafka's source
maxTriggerDelay       ``15m``                        ``500ms``, ``30s``, ``15m``, ``1h``, ``1d``
                                                     (a bare number is ms)
commitOffsetsToGroup  --                             a consumer group: each finished micro-batch's
                                                     end offsets are also committed to the brokers
                                                     (UPDATE_CONSUMER_OFFSET), for lag monitoring
                                                     only; the checkpoint stays the truth
initialOffsetsPath    --                             an absolute directory, best inside the query's
                                                     checkpoint: the initial offsets are written
                                                     there when first resolved and read back by a
                                                     restart (``pumice.spark.initial_offsets``); a
                                                     start from ``latest`` or a time without it
                                                     logs a warning
====================  =============================  ===========================================

Writing to brokers (``df.write.format("pumice")``, and ``df.writeStream`` with
``pumice.spark.broker_sink``; ``WriteOptions``; the columns are in ``pumice.spark.broker_writer``):

===================  ==============================  ===========================================
option               default                         meaning
===================  ==============================  ===========================================
namesrv              (required)                      name server ``host:port``
topic                --                              the topic of rows with no (or a null) topic
                                                     column
producerGroup        ``PUMICE_SPARK_WRITER``         the producer group
batchMessages        256                             messages per SEND_BATCH_MESSAGE (1..1024)
batchBytes           1048576                         about this many bytes per batch
timeoutMs            10000                           each send's timeout
accessKey, secretKey --                              an ACL account: every request signed
useTLS, tls*         as for reads                    TLS, as for reads
===================  ==============================  ===========================================

An option not in the table of its kind of read or write is refused by name, with the known
ones listed (as the broker refuses an unknown config key): a job ported from Kafka's source
must not run with an option it thinks it set. Spark's own ``path`` and ``checkpointLocation``
(and its ``queryName``) pass through.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from pumice.remoting.tls import client_context

EARLIEST = -2
LATEST = -1
DEFAULT_BATCH_SIZE = 8192
DEFAULT_MAX_PARTITION_BYTES = 128 << 20  # Spark's spark.sql.files.maxPartitionBytes

# topic -> queueId -> offset (this store's broker only)
QueueOffsets = dict[str, dict[int, int]]


class OptionError(ValueError):
    """An option of the pumice source is missing or malformed."""


_TLS_KEYS = ("useTLS", "tlsTrustCertPath", "tlsVerify", "tlsCertPath", "tlsKeyPath")
_SPARK_KEYS = ("path", "checkpointLocation", "queryName")  # set by Spark itself (load(path), the writer)
STORE_READ_KEYS = ("path", "commitLogPath", "brokerName", "topic", "topics", "startingOffsets", "endingOffsets",
                   "batchSize", "checkCRC", "maxPartitionBytes", "minPartitions")  # fmt: skip
BROKER_READ_KEYS = ("namesrv", "topic", "topics", "topicPattern", "startingOffsets", "endingOffsets",
                    "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
                    "startingOffsetsByTimestampStrategy", "endingOffsetsByTimestamp",
                    "maxRecordsPerPartition", "subExpression", "sqlFilter", "failOnDataLoss",
                    "includeProperties", "minPartitions", "pullBatchSize", "pullsInFlight", "timeoutMs",
                    "accessKey", "secretKey", *_TLS_KEYS)  # fmt: skip
_ENDING_KEYS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
STREAM_READ_KEYS = (*(k for k in BROKER_READ_KEYS if k not in _ENDING_KEYS), "maxOffsetsPerTrigger",
                    "minOffsetsPerTrigger", "maxTriggerDelay", "commitOffsetsToGroup",
                    "initialOffsetsPath")  # fmt: skip
WRITE_KEYS = ("namesrv", "topic", "producerGroup", "batchMessages", "batchBytes", "timeoutMs", "accessKey",
              "secretKey", *_TLS_KEYS)  # fmt: skip


def refuse_unknown(options: Mapping[str, str], known: tuple[str, ...], what: str) -> None:
    """An ``OptionError`` naming the first option not in ``known`` (Spark's options are case-insensitive)."""
    names = {k.lower(): k for k in (*known, *_SPARK_KEYS)}
    for key in options:
        if key.lower() not in names:
            near = difflib.get_close_matches(key.lower(), list(names), n=1)
            hint = f" (did you mean {names[near[0]]}?)" if near else ""
            raise OptionError(
                f"unknown option {key!r} for {what}{hint}; the known options are: {', '.join(sorted(set(known)))}"
            )


def default_broker_name(path: str) -> str:
    name = os.path.basename(os.path.normpath(os.path.abspath(path)))
    return "broker-a" if name in ("", "store") else name


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    v = str(raw).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {key}: expected true or false, got {raw!r}")


parse_bool = _bool  # for the data source, which chooses the schema from includeProperties


def parse_offsets_all(raw: str | None, key: str, default: int) -> tuple[int, dict[str, dict[str, dict[int, int]]]]:
    """``earliest``/``latest``/JSON into (default for unnamed queues, topic → broker → queue → offset)."""
    if raw is None or raw.strip() == "":
        return default, {}
    text = raw.strip()
    if text.lower() == "earliest":
        return EARLIEST, {}
    if text.lower() == "latest":
        return LATEST, {}
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise OptionError(f"option {key}: expected earliest, latest or JSON, got {raw!r}: {e}") from None
    if not isinstance(doc, dict):
        raise OptionError(f"option {key}: the JSON must be an object topic -> brokerName -> queueId -> offset")
    out: dict[str, dict[str, dict[int, int]]] = {}
    for topic, brokers in doc.items():
        if not isinstance(brokers, dict):
            raise OptionError(f"option {key}: {topic!r} must map broker names to queues")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise OptionError(f"option {key}: {topic!r}/{broker!r} must map queue ids to offsets")
            for qid, offset in queues.items():
                if not str(qid).isdigit() or not isinstance(offset, int) or isinstance(offset, bool) or offset < -2:
                    raise OptionError(
                        f"option {key}: {topic!r}/{broker!r}/{qid!r}: expected a queue id and an "
                        f"offset ≥ -2, got {offset!r}"
                    )
                out.setdefault(topic, {}).setdefault(broker, {})[int(qid)] = offset
    return default, out


def parse_offsets(raw: str | None, key: str, broker_name: str, default: int) -> tuple[int, QueueOffsets]:
    """``earliest``/``latest``/JSON into (default for unnamed queues, per-queue offsets of one broker)."""
    default, doc = parse_offsets_all(raw, key, default)
    out: QueueOffsets = {}
    for topic, brokers in doc.items():
        if broker_name in brokers:
            out[topic] = dict(brokers[broker_name])
    return default, out


@dataclass(frozen=True)
class ReadOptions:
    path: str
    commit_log_path: str
    broker_name: str
    topics: tuple[str, ...] = ()
    starting_default: int = EARLIEST
    starting: QueueOffsets = field(default_factory=dict)
    ending_default: int = LATEST
    ending: QueueOffsets = field(default_factory=dict)
    batch_size: int = DEFAULT_BATCH_SIZE
    check_crc: bool = False
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    min_partitions: int | None = None

    @property
    def consume_queue_path(self) -> str:
        return os.path.join(self.path, "consumequeue")

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        refuse_unknown(options, STORE_READ_KEYS, "a store directory read")
        path = options.get("path")
        if not path:
            raise OptionError(
                "the pumice source needs option path (a store directory), e.g. "
                'spark.read.format("pumice").load("/data/store"), or option namesrv to read from brokers'
            )
        if not os.path.isdir(path):
            raise OptionError(f"option path: {path!r} is not a directory")
        broker_name = options.get("brokerName") or default_broker_name(path)
        topics: list[str] = []
        for key in ("topic", "topics"):
            raw = options.get(key)
            if raw:
                topics += [t.strip() for t in str(raw).split(",") if t.strip()]
        start_default, starting = parse_offsets(
            options.get("startingOffsets"), "startingOffsets", broker_name, EARLIEST
        )
        end_default, ending = parse_offsets(options.get("endingOffsets"), "endingOffsets", broker_name, LATEST)
        given = options.get("startingOffsets") or options.get("endingOffsets")
        if given and not topics:
            raise OptionError("startingOffsets/endingOffsets apply to ConsumeQueue reads: give topic or topics too")
        try:
            batch_size = int(options.get("batchSize", DEFAULT_BATCH_SIZE))
        except ValueError:
            raise OptionError(f"option batchSize: expected an integer, got {options.get('batchSize')!r}") from None
        if not 1 <= batch_size <= 1_000_000:
            raise OptionError(f"option batchSize: expected 1..1000000, got {batch_size}")
        return cls(
            path=path,
            commit_log_path=options.get("commitLogPath") or os.path.join(path, "commitlog"),
            broker_name=broker_name,
            topics=tuple(dict.fromkeys(topics)),
            starting_default=start_default,
            starting=starting,
            ending_default=end_default,
            ending=ending,
            batch_size=batch_size,
            check_crc=_bool(options, "checkCRC", False),
            max_partition_bytes=_int(options, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES, 1, 1 << 40),  # type: ignore[arg-type]
            min_partitions=_int(options, "minPartitions", None, 1, 100_000),
        )

    def queue_range(self, topic: str, queue_id: int, queue_end: int) -> tuple[int, int]:
        """[start, end) of queue offsets to read, given the queue's current end."""

        def resolve(value: int) -> int:
            return 0 if value == EARLIEST else queue_end if value == LATEST else min(value, queue_end)

        start = resolve(self.starting.get(topic, {}).get(queue_id, self.starting_default))
        end = resolve(self.ending.get(topic, {}).get(queue_id, self.ending_default))
        return start, end


def _topics(options: Mapping[str, str]) -> list[str]:
    topics: list[str] = []
    for key in ("topic", "topics"):
        raw = options.get(key)
        if raw:
            topics += [t.strip() for t in str(raw).split(",") if t.strip()]
    return list(dict.fromkeys(topics))


def _int(options: Mapping[str, str], key: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {key}: expected an integer, got {raw!r}") from None
    if not lo <= value <= hi:
        raise OptionError(f"option {key}: expected {lo}..{hi}, got {value}")
    return value


# broker offsets: topic -> brokerName -> queueId -> offset
BrokerOffsets = dict[str, dict[str, dict[int, int]]]
DEFAULT_PULL_BATCH = 32
DEFAULT_PULLS_IN_FLIGHT = 16
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class BrokerReadOptions:
    """A batch read from brokers (option ``namesrv``); see the broker table in the module docstring."""

    namesrv: str
    topics: tuple[str, ...]  # empty with topic_pattern: resolved against the name server when planning
    starting_default: int = EARLIEST
    starting: BrokerOffsets = field(default_factory=dict)
    ending_default: int = LATEST
    ending: BrokerOffsets = field(default_factory=dict)
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: BrokerOffsets | None = None  # startingOffsetsByTimestamp: queue -> ms
    starting_by_timestamp_latest: bool = False  # startingOffsetsByTimestampStrategy=latest
    ending_by_timestamp: BrokerOffsets | None = None
    max_records_per_partition: int | None = None
    sub_expression: str = "*"
    sql_filter: str | None = None
    fail_on_data_loss: bool = True
    include_properties: bool = True
    min_partitions: int | None = None
    pull_batch_size: int = DEFAULT_PULL_BATCH
    pulls_in_flight: int = DEFAULT_PULLS_IN_FLIGHT
    timeout_s: float = DEFAULT_TIMEOUT_S
    topic_pattern: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls: ClientTlsOptions = field(default_factory=lambda: ClientTlsOptions())

    @classmethod
    def parse(cls, options: Mapping[str, str], *, checked: bool = False) -> BrokerReadOptions:
        """``checked``: the caller (a streaming read) has refused unknown options already."""
        if not checked:
            refuse_unknown(options, BROKER_READ_KEYS, "a batch read from brokers")
        namesrv = str(options.get("namesrv") or "").strip()
        if not namesrv:
            raise OptionError("a broker read needs option namesrv (host:port of a name server)")
        if options.get("path"):
            raise OptionError("give either path (a store directory) or namesrv (brokers), not both")
        topics = _topics(options)
        pattern = str(options.get("topicPattern") or "").strip() or None
        if bool(topics) == bool(pattern):
            raise OptionError("a broker read needs exactly one of the options topic, topics and topicPattern")
        if options.get("pullsInFlight") and str(options.get("subExpression") or "*").strip() not in ("", "*"):
            # a filtered pull answers matches and may scan past its window: such a read goes one pull at a time
            raise OptionError("option pullsInFlight applies to reads without a tag filter (subExpression)")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as e:
                raise OptionError(f"option topicPattern: not a regular expression ({e}): {pattern!r}") from None
        start_default, starting = parse_offsets_all(options.get("startingOffsets"), "startingOffsets", EARLIEST)
        end_default, ending = parse_offsets_all(options.get("endingOffsets"), "endingOffsets", LATEST)
        start_ts = _int(options, "startingTimestamp", None, 0, 1 << 62)
        end_ts = _int(options, "endingTimestamp", None, 0, 1 << 62)
        if start_ts is not None and options.get("startingOffsets"):
            raise OptionError("give startingOffsets or startingTimestamp, not both")
        if end_ts is not None and options.get("endingOffsets"):
            raise OptionError("give endingOffsets or endingTimestamp, not both")
        start_by_ts = _timestamps(options, "startingOffsetsByTimestamp", ("startingOffsets", "startingTimestamp"))
        end_by_ts = _timestamps(options, "endingOffsetsByTimestamp", ("endingOffsets", "endingTimestamp"))
        strategy = str(options.get("startingOffsetsByTimestampStrategy") or "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise OptionError(f"option startingOffsetsByTimestampStrategy: expected error or latest, got {strategy!r}")
        timeout_ms = _int(options, "timeoutMs", int(DEFAULT_TIMEOUT_S * 1000), 100, 600_000)
        sql_filter = str(options.get("sqlFilter") or "").strip() or None
        if sql_filter is not None:
            from pumice.sql92 import Sql92Error, compile_sql92  # its parser (lark) only for a read with one

            try:
                compile_sql92(sql_filter)
            except Sql92Error as e:
                raise OptionError(f"option sqlFilter: {e}") from None
        return cls(
            namesrv=namesrv,
            topics=tuple(topics),
            starting_default=start_default,
            starting=starting,
            ending_default=end_default,
            ending=ending,
            starting_timestamp=start_ts,
            ending_timestamp=end_ts,
            starting_by_timestamp=start_by_ts,
            starting_by_timestamp_latest=strategy == "latest",
            ending_by_timestamp=end_by_ts,
            max_records_per_partition=_int(options, "maxRecordsPerPartition", None, 1, 1 << 62),
            sub_expression=str(options.get("subExpression") or "*").strip() or "*",
            sql_filter=sql_filter,
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            include_properties=_bool(options, "includeProperties", True),
            min_partitions=_int(options, "minPartitions", None, 1, 100_000),
            pull_batch_size=_int(options, "pullBatchSize", DEFAULT_PULL_BATCH, 32, 1024),  # type: ignore[arg-type]
            pulls_in_flight=_int(options, "pullsInFlight", DEFAULT_PULLS_IN_FLIGHT, 1, 64),  # type: ignore[arg-type]
            timeout_s=(timeout_ms or 0) / 1000,
            topic_pattern=pattern,
            **_acl_keys(options),
            tls=ClientTlsOptions.parse(options),
        )

    def requested(self, topic: str, broker: str, queue_id: int) -> tuple[int, int]:
        """The starting and ending offsets asked for (-2 earliest, -1 latest), before resolving."""
        start = self.starting.get(topic, {}).get(broker, {}).get(queue_id, self.starting_default)
        end = self.ending.get(topic, {}).get(broker, {}).get(queue_id, self.ending_default)
        return start, end


def _timestamps(options: Mapping[str, str], key: str, others: tuple[str, ...]) -> BrokerOffsets | None:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: topic → broker → queue → ms."""
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return None
    for other in others:
        if options.get(other):
            raise OptionError(f"give {key} or {other}, not both")
    default, doc = parse_offsets_all(str(raw), key, 0)
    if default != 0 or any(ms < 0 for b in doc.values() for q in b.values() for ms in q.values()):
        raise OptionError(f"option {key}: expected JSON topic -> brokerName -> queueId -> timestamp (ms ≥ 0)")
    return doc


def queue_timestamp(doc: BrokerOffsets, key: str, topic: str, broker: str, queue_id: int) -> int:
    """The queue's time in a by-timestamp option; every queue must be named, as Kafka's source
    wants every partition."""
    ms = doc.get(topic, {}).get(broker, {}).get(queue_id)
    if ms is None:
        raise OptionError(f"option {key} names no time for topic {topic}, broker {broker}, queue {queue_id}: "
                          "name every queue of the read")  # fmt: skip
    return ms


_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(raw: str | None, key: str, default: int) -> int:
    """Spark's duration strings (``500ms``, ``30s``, ``15m``, ``1h``, ``1d``; a bare number is ms)."""
    if raw is None or str(raw).strip() == "":
        return default
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(raw).lower())
    if not m or m.group(2) not in ("", *_DURATION_UNITS):
        raise OptionError(f"option {key}: expected a duration such as 500ms, 30s, 15m or 1h, got {raw!r}")
    return int(m.group(1)) * _DURATION_UNITS.get(m.group(2), 1)


class _Overlay(Mapping[str, str]):
    """``options`` with some keys set: Spark's options are case-insensitive, a copy into a dict is not."""

    def __init__(self, options: Mapping[str, str], extra: dict[str, str]) -> None:
        self.options, self.extra = options, extra

    def __getitem__(self, key: str) -> str:
        return self.extra[key] if key in self.extra else self.options[key]

    def __iter__(self):
        return iter([*self.extra, *(k for k in self.options if k not in self.extra)])

    def __len__(self) -> int:
        return len(list(iter(self)))


@dataclass(frozen=True)
class StreamReadOptions:
    """A streaming read from brokers (``spark.readStream``); see the streaming table in the module docstring."""

    read: BrokerReadOptions
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_s: float = 15 * 60.0
    commit_group: str | None = None
    initial_offsets_path: str | None = None

    @property
    def start_moves(self) -> bool:
        """Whether resolving the start again later may give other offsets (``latest``, a time)."""
        r = self.read
        return (
            r.starting_default == LATEST
            or r.starting_timestamp is not None
            or r.starting_by_timestamp is not None
            or any(off == LATEST for brokers in r.starting.values() for qs in brokers.values() for off in qs.values())
        )

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamReadOptions:
        for key in _ENDING_KEYS:
            if options.get(key):
                raise OptionError(f"option {key} does not apply to a streaming read (it has no end)")
        refuse_unknown(options, STREAM_READ_KEYS, "a streaming read from brokers")
        given: Mapping[str, str] = options
        if not any(options.get(k) for k in ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp")):
            # as Kafka's source: a new query reads what comes next
            given = _Overlay(options, {"startingOffsets": "latest"})
        max_rows = _int(options, "maxOffsetsPerTrigger", None, 1, 1 << 62)
        min_rows = _int(options, "minOffsetsPerTrigger", None, 1, 1 << 62)
        if max_rows is not None and min_rows is not None and min_rows > max_rows:
            raise OptionError(f"option minOffsetsPerTrigger ({min_rows}) is above maxOffsetsPerTrigger ({max_rows})")
        if options.get("maxTriggerDelay") and min_rows is None:
            raise OptionError("option maxTriggerDelay applies with minOffsetsPerTrigger")
        kept = str(options.get("initialOffsetsPath") or "").strip() or None
        if kept is not None and not os.path.isabs(kept):
            # Spark's Python workers run in a directory of their own, not the driver's
            raise OptionError(f"option initialOffsetsPath: expected an absolute path, got {kept!r}")
        if kept is not None and os.path.exists(kept) and not os.path.isdir(kept):
            raise OptionError(f"option initialOffsetsPath: {kept} is not a directory")
        return cls(
            read=BrokerReadOptions.parse(given, checked=True),
            max_offsets_per_trigger=max_rows,
            min_offsets_per_trigger=min_rows,
            max_trigger_delay_s=parse_duration_ms(options.get("maxTriggerDelay"), "maxTriggerDelay", 15 * 60_000)
            / 1000,
            commit_group=str(options.get("commitOffsetsToGroup") or "").strip() or None,
            initial_offsets_path=kept,
        )


@dataclass(frozen=True)
class ClientTlsOptions:
    """useTLS and its files: plain strings, pickled to the executors (a context is not)."""

    use_tls: bool = False
    trust_cert_path: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    verify: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ClientTlsOptions:
        given = {
            k: str(options.get(k) or "").strip() or None for k in ("tlsTrustCertPath", "tlsCertPath", "tlsKeyPath")
        }
        out = cls(_bool(options, "useTLS", False), given["tlsTrustCertPath"], given["tlsCertPath"],
                  given["tlsKeyPath"], _bool(options, "tlsVerify", True))  # fmt: skip
        if not out.use_tls and (any(given.values()) or options.get("tlsVerify")):
            raise OptionError("the tls* options need useTLS=true")
        for name, path in given.items():
            if path and not os.path.isfile(path):
                raise OptionError(f"option {name}: {path} is not a file")
        return out

    def context(self) -> ssl.SSLContext | None:
        if not self.use_tls:
            return None
        return client_context(self.trust_cert_path, self.cert_path, self.key_path, self.verify)


def _acl_keys(options: Mapping[str, str]) -> dict[str, str | None]:
    """accessKey and secretKey: both or neither."""
    ak = str(options.get("accessKey") or "").strip() or None
    sk = str(options.get("secretKey") or "").strip() or None
    if bool(ak) != bool(sk):
        raise OptionError("give both options accessKey and secretKey (an ACL account), or neither")
    return {"access_key": ak, "secret_key": sk}


MAX_BATCH_MESSAGES = 256
MAX_BATCH_BYTES = 1 << 20


@dataclass(frozen=True)
class WriteOptions:
    """A batch write to brokers (``df.write.format("pumice")``)."""

    namesrv: str
    topic: str | None = None
    producer_group: str = "PUMICE_SPARK_WRITER"
    batch_messages: int = MAX_BATCH_MESSAGES
    batch_bytes: int = MAX_BATCH_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls: ClientTlsOptions = field(default_factory=lambda: ClientTlsOptions())

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        refuse_unknown(options, WRITE_KEYS, "a write to brokers")
        namesrv = str(options.get("namesrv") or "").strip()
        if not namesrv:
            raise OptionError("a pumice write needs option namesrv (host:port of a name server)")
        topic = str(options.get("topic") or "").strip() or None
        timeout_ms = _int(options, "timeoutMs", int(DEFAULT_TIMEOUT_S * 1000), 100, 600_000)
        return cls(
            namesrv=namesrv,
            topic=topic,
            producer_group=str(options.get("producerGroup") or "PUMICE_SPARK_WRITER"),
            batch_messages=_int(options, "batchMessages", MAX_BATCH_MESSAGES, 1, 1024),  # type: ignore[arg-type]
            batch_bytes=_int(options, "batchBytes", MAX_BATCH_BYTES, 1024, 4 << 20),  # type: ignore[arg-type]
            timeout_s=(timeout_ms or 0) / 1000,
            **_acl_keys(options),
            tls=ClientTlsOptions.parse(options),
        )
