"""ConsumerOrderInfoManager: orderly (FIFO) pops, one batch of a queue in flight at a time (RocketMQ 5's
ConsumerOrderInfoManager).

An orderly pop (``order=true``) of a queue takes messages from the group's offset, records
them here, and leaves the offset where it was; while a message of that batch is neither acked
nor past its invisible time, the queue is blocked for the group (the next pops skip it). An
ack moves the group's offset to the first message of the batch not acked (past the batch when
all are); a batch not acked in time is popped again, each message's count raised (the attempt
the client sees, through the response's orderCountInfo). No checkpoint is written: the offset
itself does not move until the acks.

File ``<storeRoot>/config/consumerOrderInfo.json`` (5.3.3's, fastjson's keys), persisted every
``flushConsumerOffsetInterval``; entries of a deleted topic or group, of a queue the topic no
longer has, or unused for 24 h are dropped when it is written::

    {"table": {"<topic>@<group>": {"<queueId>": {
        "a": attemptId, "cm": bits of the acked messages, "i": invisibleTime,
        "l": lastConsumeTimestamp, "o": [first offset, then each other's offset - first],
        "oc": {"<offset>": times popped before}, "ot": {"<offset>": next visible time},
        "popTime": popTime}}}}
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pumice.broker.config_file import ConfigFile
from pumice.common import extra_info_util as eiu

log = logging.getLogger(__name__)

CLEAN_SPAN_FROM_LAST_MS = 24 * 3600 * 1000


def _now() -> int:
    return int(time.time() * 1000)


@dataclass
class OrderInfo:
    pop_time: int
    invisible_time: int | None
    offset_list: list[int]  # first, then offset - first
    last_consume_timestamp: int
    commit_offset_bit: int = 0
    attempt_id: str | None = None
    offset_next_visible_time: dict[int, int] = field(default_factory=dict)
    offset_consumed_count: dict[int, int] = field(default_factory=dict)

    @staticmethod
    def build_offset_list(offsets: list[int]) -> list[int]:
        if len(offsets) == 1:
            return list(offsets)
        return [offsets[0]] + [o - offsets[0] for o in offsets[1:]]

    def queue_offset(self, i: int) -> int:
        return self.offset_list[0] if i == 0 else self.offset_list[0] + self.offset_list[i]

    def queue_offsets(self) -> list[int]:
        return [self.queue_offset(i) for i in range(len(self.offset_list))]

    def is_not_ack(self, i: int) -> bool:
        return not self.commit_offset_bit >> i & 1

    def need_block(self, attempt_id: str | None, invisible_time: int, now: int) -> bool:
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False  # the same attempt again (a client's retry of its request)
        if not self.invisible_time or self.invisible_time <= 0:
            self.invisible_time = invisible_time
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                visible = self.offset_next_visible_time.get(self.queue_offset(i), self.pop_time + self.invisible_time)
                if now < visible:
                    return True
        return False

    def next_offset(self) -> int:
        if not self.offset_list:
            return -2
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                return self.queue_offset(i)
        return self.queue_offset(len(self.offset_list) - 1) + 1

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"popTime": self.pop_time, "o": self.offset_list, "l": self.last_consume_timestamp,
                             "cm": self.commit_offset_bit}  # fmt: skip
        if self.invisible_time is not None:
            d["i"] = self.invisible_time
        if self.attempt_id is not None:
            d["a"] = self.attempt_id
        if self.offset_next_visible_time:
            d["ot"] = {str(k): v for k, v in self.offset_next_visible_time.items()}
        if self.offset_consumed_count:
            d["oc"] = {str(k): v for k, v in self.offset_consumed_count.items()}
        return dict(sorted(d.items()))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OrderInfo:
        i = d.get("i", d.get("invisibleTime"))
        return cls(
            pop_time=int(d.get("popTime", 0)), invisible_time=None if i is None else int(i),
            offset_list=[int(x) for x in d.get("o", d.get("offsetList")) or []],
            last_consume_timestamp=int(d.get("l", d.get("lastConsumeTimestamp", 0))),
            commit_offset_bit=int(d.get("cm", d.get("commitOffsetBit", 0))), attempt_id=d.get("a", d.get("attemptId")),
            offset_next_visible_time={int(k): int(v) for k, v in (d.get("ot") or {}).items()},
            offset_consumed_count={int(k): int(v) for k, v in (d.get("oc") or {}).items()},
        )  # fmt: skip


class ConsumerOrderInfoManager(ConfigFile):
    def __init__(self, path: str, topics: Any = None, subscription_groups: Any = None) -> None:
        super().__init__(path)
        self.topics = topics
        self.subscription_groups = subscription_groups
        self.table: dict[str, dict[int, OrderInfo]] = {}  # topic@group -> queue id -> its batch in flight

    def encode(self) -> dict[str, Any]:
        self._auto_clean()
        return {"table": {k: {str(q): oi.to_json() for q, oi in qs.items()} for k, qs in self.table.items()}}

    def decode(self, data: Any) -> None:
        table = data.get("table") or {}
        if not isinstance(table, dict):
            raise TypeError("table is not an object")
        self.table = {str(k): {int(q): OrderInfo.from_json(oi) for q, oi in qs.items()} for k, qs in table.items()}

    def _auto_clean(self) -> None:
        now = _now()
        for key in list(self.table):
            topic, _, group = key.partition("@")
            qs = self.table[key]
            tc = self.topics.select_topic_config(topic) if self.topics is not None else None
            gone = self.topics is not None and tc is None
            gone = gone or (self.subscription_groups is not None
                            and not self.subscription_groups.contains_subscription_group(group))  # fmt: skip
            if gone or not qs:
                del self.table[key]
                continue
            for q in list(qs):
                if (tc is not None and q >= tc.read_queue_nums) or now - qs[
                    q
                ].last_consume_timestamp > CLEAN_SPAN_FROM_LAST_MS:
                    del qs[q]

    # -- what the processors call (all on the broker's loop) -----------------------------------

    def update(self, attempt_id: str | None, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, offsets: list[int]) -> list[str]:  # fmt: skip
        """Record a pop's batch; the orderCountInfo entries of the response."""
        with self._lock:
            qs = self.table.setdefault(f"{topic}@{group}", {})
            new = OrderInfo(pop_time, invisible_time, OrderInfo.build_offset_list(offsets), _now(), 0, attempt_id)
            old = qs.get(queue_id)
            if old is not None:
                if old.attempt_id is not None and old.attempt_id == attempt_id:
                    new.offset_consumed_count = old.offset_consumed_count
                else:
                    before = set(old.queue_offsets())
                    new.offset_consumed_count = {o: old.offset_consumed_count.get(o, 0) + 1 for o in new.queue_offsets()
                                                 if o in before}  # fmt: skip
            qs[queue_id] = new
            out = []
            counts = new.offset_consumed_count
            for o, n in counts.items():
                out.append(f"{eiu.retry_flag(topic)} qo{queue_id}%{o} {n}")
            least = min(counts.values()) if counts and len(counts) == len(new.offset_list) else 0
            out.append(eiu.order_count_entry(topic, queue_id, least))  # what older clients read
            return out

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int) -> bool:
        with self._lock:
            oi = self.table.get(f"{topic}@{group}", {}).get(queue_id)
            return oi is not None and oi.need_block(attempt_id, invisible_time, _now())

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int) -> int:
        """Mark ``queue_offset`` acked: the group's next offset; −1 illegal, −2 nothing to commit."""
        with self._lock:
            oi = self.table.get(f"{topic}@{group}", {}).get(queue_id)
            if oi is None:
                return queue_offset + 1
            if not oi.offset_list:
                return -1
            if pop_time != oi.pop_time:
                log.warning("popTime is not equal to orderInfo saved. %s@%s, offset: %d, popTime: %d", topic, group,
                            queue_offset, pop_time)  # fmt: skip
                return -2
            offsets = oi.queue_offsets()
            if queue_offset not in offsets:
                return -1
            oi.commit_offset_bit |= 1 << offsets.index(queue_offset)
            oi.last_consume_timestamp = _now()
            return oi.next_offset()

    def update_next_visible_time(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int,
                                 next_visible_time: int) -> None:  # fmt: skip
        with self._lock:
            oi = self.table.get(f"{topic}@{group}", {}).get(queue_id)
            if oi is None or pop_time != oi.pop_time:
                log.warning("orderInfo of %s@%s:%d is not the one popped at %d", topic, group, queue_id, pop_time)
                return
            oi.offset_next_visible_time[queue_offset] = next_visible_time
            oi.last_consume_timestamp = _now()

    def persist_if_any(self) -> bool:
        return self.persist() if self.table else True
