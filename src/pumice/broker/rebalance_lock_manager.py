"""RebalanceLockManager: which client of a group holds which queue, for orderly consumers.

LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) carry ``{"consumerGroup", "clientId", "mqSet":
[{"topic", "brokerName", "queueId"}]}``. A queue is granted to the asking client when it is
free, already its own, or its lock has not been renewed for 60 s (RocketMQ's
``rocketmq.broker.rebalance.lockMaxLiveTime``); the reply to a lock is ``{"lockOKMQSet":
[…]}``, the queues the client now holds. Unlocking frees only the client's own queues.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pumice.remoting.remoting_command import MissingFieldError

LOCK_MAX_LIVE_TIME_S = 60.0

MQ = tuple[str, str, int]  # topic, brokerName, queueId


def mq_key(mq: Any) -> MQ:
    """A MessageQueue of a lock body; MissingFieldError (answered with its remark) when it is not one."""
    if not isinstance(mq, dict):
        raise MissingFieldError(f"mqSet entry {mq!r} is not a MessageQueue object")
    queue_id = mq.get("queueId", -1)
    try:
        qid = int(queue_id) if not isinstance(queue_id, bool | float) else None
    except (TypeError, ValueError):  # null, a list, text
        qid = None
    if qid is None or not -1 <= qid <= 0x7FFFFFFF:
        raise MissingFieldError(f"mqSet entry has a bad queueId: {queue_id!r}")
    return str(mq.get("topic", "")), str(mq.get("brokerName", "")), qid


def mq_set(body: dict[str, Any]) -> list[MQ]:
    """The ``mqSet`` of a LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body."""
    raw = body.get("mqSet") or []
    if not isinstance(raw, list):
        raise MissingFieldError("mqSet is not a JSON array")
    return [mq_key(m) for m in raw]


def mq_json(key: MQ) -> dict[str, Any]:
    return {"topic": key[0], "brokerName": key[1], "queueId": key[2]}


class RebalanceLockManager:
    def __init__(self, max_live_time_s: float = LOCK_MAX_LIVE_TIME_S) -> None:
        self.max_live_time_s = max_live_time_s
        self.mq_lock_table: dict[str, dict[MQ, tuple[str, float]]] = {}  # group → mq → (clientId, renewed)
        self._lock = threading.Lock()

    def try_lock_batch(self, group: str, mqs: list[MQ], client_id: str) -> list[MQ]:
        now = time.monotonic()
        granted: list[MQ] = []
        with self._lock:
            table = self.mq_lock_table.setdefault(group, {})
            for mq in mqs:
                holder = table.get(mq)
                if holder is None or holder[0] == client_id or now - holder[1] > self.max_live_time_s:
                    table[mq] = (client_id, now)
                    granted.append(mq)
        return granted

    def unlock_batch(self, group: str, mqs: list[MQ], client_id: str) -> None:
        with self._lock:
            table = self.mq_lock_table.get(group)
            if not table:
                return
            for mq in mqs:
                holder = table.get(mq)
                if holder is not None and holder[0] == client_id:
                    del table[mq]
