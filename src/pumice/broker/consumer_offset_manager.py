"""ConsumerOffsetManager: each consumer group's committed offset per topic queue.

File ``<storeRoot>/config/consumerOffset.json`` (RocketMQ's format; also the body of
GET_ALL_CONSUMER_OFFSET)::

    {
      "offsetTable": {
        "TopicTest@please_rename_unique_group_name": {"0": 250, "1": 248, "2": 250, "3": 251},
        "%RETRY%please_rename_unique_group_name@please_rename_unique_group_name": {"0": 0}
      }
    }

Keys are ``topic@group`` (neither name may contain ``@``); queue ids are object keys, written
quoted (RocketMQ's fastjson writes them bare, ``{0:250}``, and both are read). An offset is the
next message the group will consume.

``commit_offset`` ignores negative offsets (clients commit -1 for queues they never consumed)
and, like RocketMQ, accepts an offset below the stored one (logged). ``persist()`` writes only
if something changed since the last write, so a 5 s timer costs nothing when idle; the table
is snapshotted under the lock and written outside it, so commits do not wait for the fsync.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pumice.broker.config_file import ConfigFile

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager(ConfigFile):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.offset_table: dict[str, dict[int, int]] = {}
        self._changes = 0  # bumped by every change
        self._persisted_changes = 0

    # -- ConfigFile -----------------------------------------------------------------------------

    def encode(self) -> dict[str, Any]:
        return {"offsetTable": self.offset_table}  # int keys are written as strings (OPT_NON_STR_KEYS)

    def decode(self, data: Any) -> None:
        table = data.get("offsetTable") or {}
        if not isinstance(table, dict):
            raise TypeError("offsetTable is not an object")
        loaded = {str(key): {int(q): int(o) for q, o in offsets.items()} for key, offsets in table.items()}
        self.offset_table = loaded
        self._changes = self._persisted_changes = 0

    def persist(self) -> bool:
        """Write the table if it changed since the last successful write; False if that failed."""
        with self._io_lock:
            with self._lock:
                changes = self._changes
                if changes == self._persisted_changes:
                    return True
                data = self.snapshot()
            if not self._write(data):
                return False
            self._persisted_changes = changes
            return True

    def merge_master_offsets(self, data: Any) -> None:
        """SlaveSynchronize: the master's offsets overwrite these, key by key (Java's putAll),
        then persist."""
        table = data.get("offsetTable") or {}
        if not isinstance(table, dict):
            raise TypeError("offsetTable is not an object")
        loaded = {str(key): {int(q): int(o) for q, o in offsets.items()} for key, offsets in table.items()}
        with self._lock:
            self.offset_table.update(loaded)
            self._changes += 1
        self.persist()

    # -- offsets --------------------------------------------------------------------------------

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        if offset < 0:
            return
        key = topic + TOPIC_GROUP_SEPARATOR + group
        with self._lock:
            offsets = self.offset_table.get(key)
            if offsets is None:
                offsets = self.offset_table[key] = {}
            stored = offsets.get(queue_id)
            if stored == offset:
                return
            offsets[queue_id] = offset
            self._changes += 1
        if stored is not None and offset < stored:
            log.warning("[NOTIFYME]update consumer offset less than store. clientHost=%s, key=%s, queueId=%d, "
                        "requestOffset=%d, storeOffset=%d", client_host, key, queue_id, offset, stored)  # fmt: skip

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if there is none."""
        offsets = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group)
        if offsets is None:
            return -1
        return offsets.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        """queueId → offset (a copy; empty if the group has none for the topic)."""
        with self._lock:
            return dict(self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group, {}))

    def _keys(self) -> list[tuple[str, str, str]]:
        with self._lock:
            keys = list(self.offset_table)
        out = []
        for key in keys:
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2:
                out.append((key, parts[0], parts[1]))
        return out

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return {t for _, t, g in self._keys() if g == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        return {g for _, t, g in self._keys() if t == topic}

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> bool:
        """CLONE_GROUP_OFFSET: ``dest_group``'s offsets for ``topic`` become a copy of
        ``src_group``'s (replacing what it had); nothing changes when ``src_group`` has none.
        True when something was copied."""
        with self._lock:
            offsets = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + src_group)
            if offsets is None:
                return False
            self.offset_table[topic + TOPIC_GROUP_SEPARATOR + dest_group] = dict(offsets)
            self._changes += 1
        return True

    def query_min_offset_in_all_group(
        self, topic: str, filter_groups: set[str], min_offset_in_queue: Callable[[int], int]
    ) -> dict[int, int]:
        """queueId → the smallest committed offset over every group with offsets for ``topic``
        but ``filter_groups``, counting only offsets at or above the queue's min offset
        (QUERY_CORRECTION_OFFSET). RocketMQ 4.9 removes the filtered groups' offsets, for
        every topic, from its live table while it does this; here nothing is removed."""
        with self._lock:
            tables = [
                dict(offsets)
                for key, offsets in self.offset_table.items()
                if (parts := key.split(TOPIC_GROUP_SEPARATOR))[0] == topic
                and not (len(parts) > 1 and parts[1] in filter_groups)
            ]
        mins: dict[int, int] = {}
        for offsets in tables:
            for queue_id, offset in offsets.items():
                if offset >= min_offset_in_queue(queue_id):
                    mins[queue_id] = min(offset, mins.get(queue_id, offset))
        return mins

    def clean_offset_by_topic(self, topic: str) -> None:
        """Drop every group's offsets for ``topic`` (topic deleted)."""
        self._remove([k for k, t, _ in self._keys() if t == topic])

    def remove_offset(self, group: str) -> None:
        """Drop all of ``group``'s offsets (subscription group deleted)."""
        self._remove([k for k, _, g in self._keys() if g == group])

    def _remove(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                if self.offset_table.pop(key, None) is not None:
                    self._changes += 1
                    log.warning("clean offsets %s", key)
