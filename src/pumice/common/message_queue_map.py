"""A ``Map<MessageQueue, V>`` as RocketMQ 4.9's broker writes it in a body (fastjson).

Each key is the MessageQueue's compact JSON, fields sorted (``{"brokerName":"b","queueId":3,
"topic":"T"}``), written bare (``fastjson.ObjectKey``); the entries come in ``HashMap``
iteration order of ``MessageQueue.hashCode()`` (``31 * (31 * (31 + brokerName.hashCode()) +
queueId) + topic.hashCode()``, int arithmetic), so the text is the Java broker's byte for byte.
Used by TopicStatsTable (202), ConsumeStats (208, 317), ResetOffsetBody (222, 220),
GetConsumerStatusBody (223, 221) and ConsumerRunningInfo's mqTable (307).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TypeVar

import orjson

from pumice.common.fastjson import ObjectKey
from pumice.common.java_hash import hash_map_order_by_hash, java_string_hash

V = TypeVar("V")
_string_hash = lru_cache(maxsize=4096)(java_string_hash)  # a table repeats its topic and broker


def message_queue_key(topic: str, broker_name: str, queue_id: int) -> ObjectKey:
    """A MessageQueue as a fastjson map key: its compact JSON, fields sorted."""
    return ObjectKey(orjson.dumps({"brokerName": broker_name, "queueId": queue_id, "topic": topic}).decode())


def message_queue_hash(topic: str, broker_name: str, queue_id: int) -> int:
    """``MessageQueue.hashCode()``, a Java int."""
    h = 31 * (31 * (31 + _string_hash(broker_name)) + queue_id) + _string_hash(topic)
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def message_queue_table(entries: Iterable[tuple[str, str, int, V]]) -> dict[ObjectKey, V]:
    """``(topic, brokerName, queueId, value)`` entries as a map in a ``HashMap``'s order."""
    items = list(entries)
    hashes = [message_queue_hash(t, b, q) for t, b, q, _ in items]
    return {message_queue_key(t, b, q): v for t, b, q, v in hash_map_order_by_hash(items, hashes)}


def message_queue_table_of(raw: Mapping[str, V]) -> dict[ObjectKey, V]:
    """A MessageQueue-keyed map as read (bare keys or quoted ones) in the form ``dumps`` writes.
    Raises ValueError for a key that is not a MessageQueue."""
    entries = []
    for key, value in raw.items():
        try:
            mq = orjson.loads(key)
            entries.append((str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"]), value))
        except (orjson.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"not a MessageQueue key: {key!r}") from e
    return message_queue_table(entries)
