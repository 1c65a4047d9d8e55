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

VIEW_BROKER_STATS_DATA reads one item's minute, hour and day (RocketMQ's StatsItem): besides the
seven 10 s snapshots, an item keeps seven taken every 10 minutes (the hour) and 25 taken every
hour (the day), each window running, like the minute, from its oldest snapshot kept (or the
item's first addition) to the live value.

BrokerStats (4.9's ``BrokerStats``): the put and get totals of GET_BROKER_RUNTIME_INFO as they
stood at the last two local midnights, ``msgPutTotalTodayMorning`` and
``msgPutTotalYesterdayMorning`` (the Get ones alike); 0 until the broker has passed a midnight
(two for the Yesterday ones), as upstream, which records at each local midnight after the start.
Here the next midnight is worked out again after each record, so a daylight-saving change does
not shift the record by an hour (upstream repeats every 24 h from the first).
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from pumice.metrics.histogram import MESSAGE_SIZE_BOUNDS, observe

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
SAMPLING_INTERVAL_S = 10.0
MINUTE_SNAPSHOTS = 7  # 60 s of 10 s snapshots, both ends included
HOUR_SAMPLING_INTERVAL_S = 600.0
HOUR_SNAPSHOTS = 7  # 60 min of 10 min snapshots
DAY_SAMPLING_INTERVAL_S = 3600.0
DAY_SNAPSHOTS = 25  # 24 h of hourly snapshots

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StatsSnapshot:
    sum: int = 0  # value added over the window
    tps: float = 0.0  # value per second
    avgpt: float = 0.0  # value per addition


class StatsItem:
    __slots__ = ("_day", "_hour", "_minute", "times", "value")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self._minute: collections.deque[tuple[float, int, int]] = collections.deque(maxlen=MINUTE_SNAPSHOTS)
        self._hour: collections.deque[tuple[float, int, int]] = collections.deque(maxlen=HOUR_SNAPSHOTS)
        self._day: collections.deque[tuple[float, int, int]] = collections.deque(maxlen=DAY_SNAPSHOTS)

    def first_snapshot(self, now_s: float) -> None:
        """Every window counts from here (the item's first addition)."""
        for window in (self._minute, self._hour, self._day):
            window.append((now_s, self.value, self.times))

    def sampling(self, now_s: float) -> None:
        self._minute.append((now_s, self.value, self.times))

    def sampling_hour(self, now_s: float) -> None:
        self._hour.append((now_s, self.value, self.times))

    def sampling_day(self, now_s: float) -> None:
        self._day.append((now_s, self.value, self.times))

    def _window(self, snapshots: collections.deque[tuple[float, int, int]], now_s: float) -> StatsSnapshot:
        if not snapshots:
            return StatsSnapshot()
        t0, v0, n0 = snapshots[0]
        total, times, elapsed = self.value - v0, self.times - n0, now_s - t0
        return StatsSnapshot(total, total / elapsed if elapsed >= 1.0 else 0.0, total / times if times else 0.0)

    def minute(self, now_s: float) -> StatsSnapshot:
        """Over the last minute: from the oldest snapshot kept to the live value (so a rate
        shows without waiting for the next snapshot); 0/s until a second has passed."""
        return self._window(self._minute, now_s)

    def hour(self, now_s: float) -> StatsSnapshot:
        return self._window(self._hour, now_s)

    def day(self, now_s: float) -> StatsSnapshot:
        return self._window(self._day, now_s)


class StatsItemSet:
    def __init__(self, name: str) -> None:
        self.name = name
        self.items: dict[str, StatsItem] = {}

    def add(self, key: str, value: int, times: int = 1) -> None:
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = StatsItem()
            item.first_snapshot(time.monotonic())  # the rates count from the item's first addition
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

    def get_stats_item(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def sampling(self, now_s: float) -> None:
        for item in list(self.items.values()):
            item.sampling(now_s)

    def sampling_hour(self, now_s: float) -> None:
        for item in list(self.items.values()):
            item.sampling_hour(now_s)

    def sampling_day(self, now_s: float) -> None:
        for item in list(self.items.values()):
            item.sampling_day(now_s)


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
        self._last_hour_sampling: float | None = None
        self._last_day_sampling: float | None = None
        # metrics on (pumice.metrics): topic → rocketmq_message_size's bucket counts, a send's bytes / messages
        self.message_sizes: dict[Hashable, list[float]] | None = None
        # metrics on: (group, topic, queueId) → the next offset its last pull that found messages gave
        self.pull_offsets: dict[tuple[str, str, int], int] | None = None

    def inc_put(self, topic: str, nums: int, size: int) -> None:
        """A send stored ``nums`` messages of ``size`` bytes in ``topic``."""
        sets = self.sets
        sets[TOPIC_PUT_NUMS].add(topic, nums)
        sets[TOPIC_PUT_SIZE].add(topic, size)
        sets[BROKER_PUT_NUMS].add(self.cluster_name, nums)
        if self.message_sizes is not None and nums:
            observe(self.message_sizes, topic, size / nums, MESSAGE_SIZE_BOUNDS)

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

    def get_stats_item(self, stats_name: str, stats_key: str) -> StatsItem | None:
        """One item (VIEW_BROKER_STATS_DATA), or None for an unknown name or key."""
        s = self.sets.get(stats_name)
        return s.get_stats_item(stats_key) if s is not None else None

    def sampling(self, now_s: float | None = None) -> None:
        """Every 10 s (the broker's schedule): the minute snapshots, and the hour's and the
        day's once 10 minutes and an hour have passed since their last."""
        now = time.monotonic() if now_s is None else now_s
        for s in self.sets.values():
            s.sampling(now)
        if self._last_hour_sampling is None or self._last_day_sampling is None:
            self._last_hour_sampling = self._last_day_sampling = now  # the items' first snapshots stand in
            return
        if now - self._last_hour_sampling >= HOUR_SAMPLING_INTERVAL_S:
            self._last_hour_sampling = now
            for s in self.sets.values():
                s.sampling_hour(now)
        if now - self._last_day_sampling >= DAY_SAMPLING_INTERVAL_S:
            self._last_day_sampling = now
            for s in self.sets.values():
                s.sampling_day(now)


def next_morning_s(now_s: float) -> float:
    """The next local midnight after ``now_s`` (epoch seconds), as UtilAll.computeNextMorningTimeMillis."""
    today = datetime.datetime.fromtimestamp(now_s).date()
    return datetime.datetime.combine(today + datetime.timedelta(days=1), datetime.time()).timestamp()


class BrokerStats:
    """4.9's BrokerStats: the totals as they stood at the last two local midnights (see the
    module docstring). ``put_total`` and ``get_total`` give the live totals (msgPutTotalTodayNow
    and msgGetTotalTodayNow)."""

    def __init__(self, put_total: Callable[[], int], get_total: Callable[[], int]) -> None:
        self.put_total = put_total
        self.get_total = get_total
        self.msg_put_total_yesterday_morning = 0
        self.msg_put_total_today_morning = 0
        self.msg_get_total_yesterday_morning = 0
        self.msg_get_total_today_morning = 0

    def record(self) -> None:
        """At midnight: today's morning figures become yesterday's, the live totals today's."""
        self.msg_put_total_yesterday_morning = self.msg_put_total_today_morning
        self.msg_get_total_yesterday_morning = self.msg_get_total_today_morning
        self.msg_put_total_today_morning = self.put_total()
        self.msg_get_total_today_morning = self.get_total()
        log.info("yesterday put message total: %d",
                 self.msg_put_total_today_morning - self.msg_put_total_yesterday_morning)  # fmt: skip
        log.info("yesterday get message total: %d",
                 self.msg_get_total_today_morning - self.msg_get_total_yesterday_morning)  # fmt: skip

    async def record_at_midnights(self, now: Callable[[], float] = time.time, max_sleep_s: float = 60.0) -> None:
        """``record()`` at each local midnight, for ever (the broker's task). It sleeps at
        most ``max_sleep_s`` at a time and looks at the wall clock again, so a clock that is
        set, or a machine that was suspended, does not move the record off midnight."""
        while True:
            target = next_morning_s(now())
            while (remaining := target - now()) > 0:
                await asyncio.sleep(min(remaining, max_sleep_s))
            try:
                self.record()
            except Exception:  # a failing total must not end the daily records
                log.exception("schedule record error.")
