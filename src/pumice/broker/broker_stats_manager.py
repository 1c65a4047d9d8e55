"""BrokerStatsManager: per-topic and per-group counters and their rates over the last minute.

As RocketMQ's BrokerStatsManager, each statistic is a set of items by key; an item adds up a
value and a count of additions. Every 10 s the broker takes a snapshot of every item and
keeps the last seven; a minute's rate runs from the oldest snapshot kept (about a minute
old, or the item's first addition) to the live value, so it shows at once rather than after
the next snapshot as RocketMQ's does.

=====================  ===================  ==================================================
statistic              key                  added by
=====================  ===================  ==================================================
TOPIC_PUT_NUMS         topic                a send that stored messages: their number (count 1
                                            per request)
TOPIC_PUT_SIZE         topic                ... their bytes in the CommitLog
GROUP_GET_NUMS         ``topic@group``      a pull that found messages: their number
GROUP_GET_SIZE         ``topic@group``      ... their bytes
SNDBCK_PUT_NUMS        ``topic@group``      a consumer's send-back (CONSUMER_SEND_MSG_BACK)
BROKER_PUT_NUMS        cluster name         messages stored, all topics
BROKER_GET_NUMS        cluster name         messages pulled, all groups
=====================  ===================  ==================================================

GET_CONSUME_STATS's ``consumeTps`` is GROUP_GET_NUMS's minute rate for the group, summed over
its topics; GET_BROKER_RUNTIME_INFO's ``msgGetTotalTodayNow`` is BROKER_GET_NUMS's value (since
the broker started).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
SAMPLING_INTERVAL_S = 10.0
MINUTE_SNAPSHOTS = 7  # 60 s of 10 s snapshots, both ends included


@dataclass(frozen=True)
class StatsSnapshot:
    sum: int = 0  # value added over the window
    tps: float = 0.0  # value per second
    avgpt: float = 0.0  # value per addition


class StatsItem:
    __slots__ = ("_minute", "times", "value")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self._minute: collections.deque[tuple[float, int, int]] = collections.deque(maxlen=MINUTE_SNAPSHOTS)

    def sampling(self, now_s: float) -> None:
        self._minute.append((now_s, self.value, self.times))

    def minute(self, now_s: float) -> StatsSnapshot:
        """Over the last minute: from the oldest snapshot kept to the live value (so a rate
        shows without waiting for the next snapshot); 0/s until a second has passed."""
        if not self._minute:
            return StatsSnapshot()
        t0, v0, n0 = self._minute[0]
        total, times, elapsed = self.value - v0, self.times - n0, now_s - t0
        return StatsSnapshot(total, total / elapsed if elapsed >= 1.0 else 0.0, total / times if times else 0.0)


class StatsItemSet:
    def __init__(self, name: str) -> None:
        self.name = name
        self.items: dict[str, StatsItem] = {}

    def add(self, key: str, value: int, times: int = 1) -> None:
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = StatsItem()
            item.sampling(time.monotonic())  # the rate counts from the item's first addition
        item.value += value
        item.times += times

    def value(self, key: str) -> int:
        item = self.items.get(key)
        return item.value if item is not None else 0

    def minute(self, key: str, now_s: float | None = None) -> StatsSnapshot:
        item = self.items.get(key)
        if item is None:
            return StatsSnapshot()
        return item.minute(time.monotonic() if now_s is None else now_s)

    def sampling(self, now_s: float) -> None:
        for item in list(self.items.values()):
            item.sampling(now_s)


def stats_key(topic: str, group: str) -> str:
    return f"{topic}@{group}"


class BrokerStatsManager:
    def __init__(self, cluster_name: str = "DefaultCluster") -> None:
        self.cluster_name = cluster_name
        self.sets = {
            name: StatsItemSet(name)
            for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
                         BROKER_PUT_NUMS, BROKER_GET_NUMS)
        }  # fmt: skip

    def inc_put(self, topic: str, nums: int, size: int) -> None:
        """A send stored ``nums`` messages of ``size`` bytes in ``topic``."""
        sets = self.sets
        sets[TOPIC_PUT_NUMS].add(topic, nums)
        sets[TOPIC_PUT_SIZE].add(topic, size)
        sets[BROKER_PUT_NUMS].add(self.cluster_name, nums)

    def inc_get(self, group: str, topic: str, nums: int, size: int) -> None:
        """A pull of ``group`` found ``nums`` messages of ``size`` bytes in ``topic``."""
        key = f"{topic}@{group}"
        sets = self.sets
        sets[GROUP_GET_NUMS].add(key, nums)
        sets[GROUP_GET_SIZE].add(key, size)
        sets[BROKER_GET_NUMS].add(self.cluster_name, nums)

    def inc_send_back(self, group: str, topic: str) -> None:
        self.sets[SNDBCK_PUT_NUMS].add(stats_key(topic, group), 1)

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        return self.sets[GROUP_GET_NUMS].minute(stats_key(topic, group)).tps

    def broker_get_nums(self) -> int:
        return self.sets[BROKER_GET_NUMS].value(self.cluster_name)

    def sampling(self, now_s: float | None = None) -> None:
        now = time.monotonic() if now_s is None else now_s
        for s in self.sets.values():
            s.sampling(now)
