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
===================  ==============================  ===========================================

``brokerName`` defaults to the store directory's name (``/data/broker-b`` → ``broker-b``),
except when that is ``store`` (RocketMQ's default ``storePathRootDir``, which names no
broker): then ``broker-a``, RocketMQ's default broker name.

Offsets JSON, as Kafka's source has it, one level deeper: topic → brokerName → queueId →
offset, where -2 means earliest and -1 latest; a queue not named gets the default, and
entries for another broker name are ignored::

    {"TopicA": {"broker-a": {"0": 23, "1": -2}}, "TopicB": {"broker-a": {"0": 5}}}

"latest" is each queue's end when the read is planned, so every task reads one snapshot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

EARLIEST = -2
LATEST = -1
DEFAULT_BATCH_SIZE = 8192

# topic -> queueId -> offset (this store's broker only)
QueueOffsets = dict[str, dict[int, int]]


class OptionError(ValueError):
    """An option of the pumice source is missing or malformed."""


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


def parse_offsets(raw: str | None, key: str, broker_name: str, default: int) -> tuple[int, QueueOffsets]:
    """``earliest``/``latest``/JSON into (default for unnamed queues, per-queue offsets)."""
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
    out: QueueOffsets = {}
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
                if broker == broker_name:
                    out.setdefault(topic, {})[int(qid)] = offset
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

    @property
    def consume_queue_path(self) -> str:
        return os.path.join(self.path, "consumequeue")

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        path = options.get("path")
        if not path:
            raise OptionError(
                "the pumice source needs option path (a store directory), e.g. "
                'spark.read.format("pumice").load("/data/store"); reading from brokers comes later'
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
        )

    def queue_range(self, topic: str, queue_id: int, queue_end: int) -> tuple[int, int]:
        """[start, end) of queue offsets to read, given the queue's current end."""

        def resolve(value: int) -> int:
            return 0 if value == EARLIEST else queue_end if value == LATEST else min(value, queue_end)

        start = resolve(self.starting.get(topic, {}).get(queue_id, self.starting_default))
        end = resolve(self.ending.get(topic, {}).get(queue_id, self.ending_default))
        return start, end
