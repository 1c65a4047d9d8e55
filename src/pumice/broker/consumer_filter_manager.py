"""ConsumerFilterManager: the SQL92 subscriptions of consumer groups, per topic, as 4.9 keeps them.

Every consumer heartbeat registers its group's non-TAG subscriptions (REGISTER); a group whose
last member leaves is marked dead (UNREGISTER), and a filter dead for ``filterDataCleanTimeSpan``
(24 h) is dropped when the file is next written. A pull whose subscription came from heartbeats
evaluates the registered filter (FILTER_DATA_NOT_EXIST without one, FILTER_DATA_NOT_LATEST when
the pull's subVersion is newer). Each filter owns the bloom-filter positions of
``group#topic`` (``bloom_filter.py``); with ``enableCalcFilterBitMap`` the dispatcher
(``calc_bit_map``, 4.9's CommitLogDispatcherCalcBitMap) sets in each new message's map the
positions of every filter that matches it, for the ConsumeQueueExt.

Registration (FilterDataMapByTopic.register), for a group's filter on a topic:

==================================  ============================================================
no filter yet                       a new one (born now), unless the expression does not compile
clientVersion <= the stored one     kept (a dead one of the same version comes back to life)
newer, same expression and bloom    kept, with the new version (and back to life)
newer, changed                      replaced by a new one (born now); dropped if it does not
                                    compile (the client reports its own error)
==================================  ============================================================

File ``<storeRoot>/config/consumerFilter.json`` (4.9's, fields as fastjson writes them)::

    {"filterDataByTopic": {"TopicA": {"topic": "TopicA", "groupFilterData": {"CID_1": {
        "consumerGroup": "CID_1", "topic": "TopicA", "expression": "a > 1",
        "expressionType": "SQL92", "bornTime": 1700000000000, "deadTime": 0, "dead": false,
        "clientVersion": 1, "bloomFilterData": {"bitNum": 112, "bitPos": [73, 2, 65]}}}}}}

On load every live filter is taken as dead since 30 s ago (its consumers reconnect), and a file
written with another bloom filter size (``maxErrorRateOfBloomFilter``,
``expectConsumerNumUseFilter``) is ignored whole, as 4.9 does.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from pumice.broker.bloom_filter import BloomFilter, BloomFilterData
from pumice.broker.config_file import ConfigFile
from pumice.common.message_decoder import string_to_message_properties
from pumice.sql92 import Sql92Error, Sql92Filter, compile_sql92
from pumice.store.dispatch_request import DispatchRequest

log = logging.getLogger(__name__)

SQL92 = "SQL92"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: absent, empty or TAG."""
    return not expression_type or expression_type == "TAG"


@dataclass
class ConsumerFilterData:
    consumer_group: str
    topic: str
    expression: str
    expression_type: str
    born_time: int
    dead_time: int = 0
    client_version: int = 0
    bloom_filter_data: BloomFilterData | None = None
    compiled: Sql92Filter | None = None

    @property
    def is_dead(self) -> bool:
        return self.dead_time >= self.born_time

    def how_long_after_death(self, now: int) -> int:
        return now - self.dead_time if self.is_dead else -1

    def is_msg_in_live(self, msg_store_time: int) -> bool:
        return msg_store_time > self.born_time

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bornTime": self.born_time,
            "clientVersion": self.client_version,
            "consumerGroup": self.consumer_group,
            "dead": self.is_dead,
            "deadTime": self.dead_time,
            "expression": self.expression,
            "expressionType": self.expression_type,
            "topic": self.topic,
        }
        if self.bloom_filter_data is not None:
            out["bloomFilterData"] = self.bloom_filter_data.to_json()
        return dict(sorted(out.items()))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConsumerFilterData:
        fd = cls(
            consumer_group=str(data["consumerGroup"]),
            topic=str(data["topic"]),
            expression=str(data.get("expression") or ""),
            expression_type=str(data.get("expressionType") or ""),
            born_time=int(data.get("bornTime", 0)),
            dead_time=int(data.get("deadTime", 0)),
            client_version=int(data.get("clientVersion", 0)),
            bloom_filter_data=BloomFilterData.from_json(data.get("bloomFilterData")),
        )
        fd.compiled = _compile(fd.expression_type, fd.expression)
        return fd


def _compile(expression_type: str, expression: str) -> Sql92Filter | None:
    if expression_type != SQL92:  # 4.9 has no other expression type
        return None
    try:
        return compile_sql92(expression)
    except Sql92Error:
        return None


def build(
    topic: str, group: str, expression: str, expression_type: str, client_version: int
) -> ConsumerFilterData | None:
    """A filter born now, or None (a TAG subscription, or an expression that does not compile)."""
    if is_tag_type(expression_type):
        return None
    compiled = _compile(expression_type, expression)
    if compiled is None:
        log.error("parse error: expr=%s, topic=%s, group=%s", expression, topic, group)
        return None
    return ConsumerFilterData(group, topic, expression, expression_type, _now_ms(), 0, client_version, None, compiled)


class ConsumerFilterManager(ConfigFile):
    def __init__(self, path: str, bloom_filter: BloomFilter, clean_time_span_ms: int = 24 * 3600 * 1000) -> None:
        super().__init__(path)
        self.bloom_filter = bloom_filter
        self.clean_time_span_ms = clean_time_span_ms
        self.filter_data_by_topic: dict[str, dict[str, ConsumerFilterData]] = {}  # topic -> group -> filter

    # -- registration ---------------------------------------------------------------------------

    def register_group(self, group: str, subscriptions: list[dict[str, Any]]) -> None:
        """A heartbeat's subscriptions (``topic``, ``subString``, ``expressionType``, ``subVersion``);
        the group's filters on topics it no longer subscribes die."""
        topics = set()
        for sub in subscriptions:
            topic = str(sub.get("topic") or "")
            topics.add(topic)
            try:
                version = int(sub.get("subVersion") or 0)
            except (TypeError, ValueError):
                version = 0
            self.register(topic, group, str(sub.get("subString") or ""), str(sub.get("expressionType") or ""), version)
        now = _now_ms()
        with self._lock:
            for topic, groups in self.filter_data_by_topic.items():
                fd = groups.get(group)
                if fd is not None and topic not in topics and not fd.is_dead:
                    fd.dead_time = now
                    log.info("Consumer filter changed: %s, make illegal topic dead: %s", group, topic)

    def register(self, topic: str, group: str, expression: str, expression_type: str, client_version: int) -> bool:
        if is_tag_type(expression_type) or not expression:
            return False
        bloom = self.bloom_filter.generate(f"{group}#{topic}")
        with self._lock:
            groups = self.filter_data_by_topic.setdefault(topic, {})
            old = groups.get(group)
            if old is not None:
                if client_version <= old.client_version:
                    if client_version == old.client_version and old.is_dead:
                        old.dead_time = 0
                        return True
                    return False
                changed = (old.expression, old.expression_type, old.bloom_filter_data) != (
                    expression, expression_type, bloom)  # fmt: skip
                if not changed:
                    old.client_version = client_version
                    old.dead_time = 0
                    return True
            fd = build(topic, group, expression, expression_type, client_version)
            if fd is None:
                groups.pop(group, None)
                return False
            fd.bloom_filter_data = bloom
            groups[group] = fd
            log.info("New consumer filter registered: %s", fd)
            return True

    def unregister(self, group: str) -> None:
        now = _now_ms()
        with self._lock:
            for groups in self.filter_data_by_topic.values():
                fd = groups.get(group)
                if fd is not None and not fd.is_dead:
                    fd.dead_time = now
                    log.info("Unregister consumer filter: %s %s", group, fd.topic)

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        groups = self.filter_data_by_topic.get(topic)
        return groups.get(group) if groups else None

    def get_by_topic(self, topic: str) -> list[ConsumerFilterData]:
        groups = self.filter_data_by_topic.get(topic)
        return list(groups.values()) if groups else []

    # -- CommitLogDispatcherCalcBitMap ------------------------------------------------------------

    def calc_bit_map(self, topic: str, reqs: list[DispatchRequest]) -> None:
        """Set each request's bit map: the positions of every live filter of ``topic`` that
        matches the message (none with a filter: no map, so no unit carries one)."""
        filters = [fd for fd in self.get_by_topic(topic) if fd.compiled is not None and fd.bloom_filter_data]
        if not filters:
            return
        bloom = self.bloom_filter
        for r in reqs:
            bits = bloom.new_bits()
            props = string_to_message_properties(r.properties_string)
            for fd in filters:
                if fd.compiled.matches(props):  # type: ignore[union-attr]
                    bloom.hash_to(fd.bloom_filter_data, bits)  # type: ignore[arg-type]
            r.bit_map = bytes(bits)

    # -- ConfigFile -----------------------------------------------------------------------------

    def clean(self) -> None:
        """Drop filters dead for longer than the clean time span, and topics left without any."""
        now = _now_ms()
        for topic, groups in list(self.filter_data_by_topic.items()):
            for group, fd in list(groups.items()):
                if fd.how_long_after_death(now) >= self.clean_time_span_ms:
                    log.info("Remove filter consumer %s of %s, died too long!", group, topic)
                    del groups[group]
            if not groups:
                del self.filter_data_by_topic[topic]

    def encode(self) -> dict[str, Any]:
        self.clean()
        return {
            "filterDataByTopic": {
                topic: {"groupFilterData": {g: fd.to_json() for g, fd in groups.items()}, "topic": topic}
                for topic, groups in self.filter_data_by_topic.items()
            }
        }

    def decode(self, data: Any) -> None:
        table = data.get("filterDataByTopic") or {}
        if not isinstance(table, dict):
            raise TypeError("filterDataByTopic is not an object")
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        dead_since = _now_ms() - 30_000  # the consumers reconnect and register again
        for topic, by_topic in table.items():
            if not isinstance(by_topic, dict):
                continue
            groups = loaded.setdefault(str(topic), {})
            for group, raw in (by_topic.get("groupFilterData") or {}).items():
                if not isinstance(raw, dict):
                    continue
                fd = ConsumerFilterData.from_json(raw)
                if not self.bloom_filter.is_valid(fd.bloom_filter_data):
                    log.info("Bloom filter is changed! So ignore all filter data persisted! %s", self.bloom_filter)
                    return
                if fd.dead_time == 0:
                    fd.dead_time = max(dead_since, fd.born_time)
                groups[str(group)] = fd
        self.filter_data_by_topic = loaded
