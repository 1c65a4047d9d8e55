"""A consumer group's settings (``SubscriptionGroupConfig``), as subscriptionGroup.json and the
admin requests carry them.

=================================  =======  ==========================================
JSON key                           default  meaning
=================================  =======  ==========================================
groupName                          —        the group
consumeEnable                      true     false: pulls answer NO_PERMISSION
consumeFromMinEnable               true     a new group may start at the queue's minimum
consumeBroadcastEnable             true     broadcasting consumers allowed
retryQueueNums                     1        queues of ``%RETRY%group``; ≤ 0: no retry
retryMaxTimes                      16       reconsumes before the DLQ
brokerId                           0        the broker to pull from
whichBrokerWhenConsumeSlowly       1        the broker to pull from when behind
notifyConsumerIdsChangedEnable     true     tell members when the group changes
consumeMessageOrderly              false    5.x: a FIFO group (POP in order; the v5
                                            clients' Settings ``fifo``); 4.9 files lack it
=================================  =======  ==========================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pumice.common.mix_all import MAX_QUEUE_NUMS
from pumice.config import INT_MAX, LONG_MAX, json_int


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], name: str | None = None) -> SubscriptionGroupConfig:
        """From RocketMQ's JSON; ``name`` (the table key) is used when ``groupName`` is missing.
        Unknown keys (5.x ``groupRetryPolicy``, ``attributes``, …) are ignored."""
        group_name = data.get("groupName", name)
        if not isinstance(group_name, str) or not group_name:
            raise ValueError(f"subscription group config without a name: {data!r}")

        def flag(key: str, default: bool) -> bool:
            v = data.get(key, default)
            return v if isinstance(v, bool) else str(v).lower() == "true"

        def number(key: str, default: int, lo: int, hi: int) -> int:
            v = data.get(key, default)
            n = json_int(v, lo, hi)
            if n is None:
                raise ValueError(f"subscription group {group_name!r}: {key} {v!r} is not an integer of {lo} to {hi}")
            return n

        return cls(
            group_name,
            flag("consumeEnable", True),
            flag("consumeFromMinEnable", True),
            flag("consumeBroadcastEnable", True),
            # 0 or less: no retry (send-back drops the message); a retry topic has at most MAX_QUEUE_NUMS
            number("retryQueueNums", 1, -INT_MAX - 1, MAX_QUEUE_NUMS),
            number("retryMaxTimes", 16, -INT_MAX - 1, INT_MAX),
            number("brokerId", 0, 0, LONG_MAX),
            number("whichBrokerWhenConsumeSlowly", 1, 0, LONG_MAX),
            flag("notifyConsumerIdsChangedEnable", True),
            flag("consumeMessageOrderly", False),
        )
