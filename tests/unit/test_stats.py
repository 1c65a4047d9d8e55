"""StoreStatsService and BrokerStatsManager: totals, and rates over their windows."""

from __future__ import annotations

import pytest

from pumice.broker.broker_stats_manager import (
    BROKER_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
)
from pumice.store.store_stats_service import StoreStatsService


def test_store_stats_rates_over_10s_1min_and_10min_windows() -> None:
    s = StoreStatsService()
    s._samples.clear()
    # 600 one-second samples: 100 puts/s for the first 540 s, then 1,000 puts/s for 60 s
    puts = 0
    for t in range(601):
        s.put_message_times_total = puts
        s.get_message_transfered_msg_count = puts // 2
        s.get_message_times_total_found = t
        s.get_message_times_total_miss = 3 * t
        s.sampling(now_s=float(t))
        puts += 100 if t < 540 else 1000
    assert s.put_tps(10) == pytest.approx(1000.0)
    assert s.put_tps(60) == pytest.approx(1000.0)
    assert s.put_tps(600) == pytest.approx((540 * 100 + 60 * 1000) / 600)
    info = s.runtime_info()
    assert info["putTps"] == f"1000.00 1000.00 {(540 * 100 + 60 * 1000) / 600:.2f}"
    assert info["getTransferedTps"].split() == ["500.00", "500.00", f"{(540 * 50 + 60 * 500) / 600:.2f}"]
    assert info["getFoundTps"] == "1.00 1.00 1.00" and info["getMissTps"] == "3.00 3.00 3.00"
    assert info["getTotalTps"] == "4.00 4.00 4.00"
    # a sample beyond ten minutes pushes the oldest out
    s.sampling(now_s=601.0)
    assert len(s._samples) == 601 and s._samples[0][0] == 1.0


def test_store_stats_young_windows_use_the_oldest_sample_and_totals_count_puts() -> None:
    s = StoreStatsService()
    s._samples.clear()
    s.sampling(now_s=0.0)
    assert s.put_tps(10) == 0.0  # one sample: no rate yet
    s.put_message_times_total, s.put_message_size_total = 30, 6000
    s.sampling(now_s=2.0)
    assert [s.put_tps(w) for w in (10, 60, 600)] == [15.0, 15.0, 15.0]
    info = s.runtime_info()
    assert (info["putMessageTimesTotal"], info["putMessageSizeTotal"], info["putMessageAverageSize"]) == (
        "30", "6000", "200.0",
    )  # fmt: skip
    assert StoreStatsService().runtime_info()["putMessageTimesTotal"] == "1"  # as upstream: never 0


def test_broker_stats_keys_values_and_minute_rate() -> None:
    m = BrokerStatsManager("C1")
    item_start = 100.0
    m.inc_put("T", 32, 32 * 1100)
    m.inc_get("G", "T", 10, 11_000)
    m.inc_send_back("G", "T")
    # items take their first snapshot when created: move it to a known time
    for s in m.sets.values():
        for item in s.items.values():
            item._minute.clear()
            item.value, item.times = 0, 0
            item.sampling(item_start)
    for second in range(1, 61):
        m.inc_get("G", "T", 5, 5_500)
        if second % 10 == 0:
            m.sampling(now_s=item_start + second)
    assert m.sets[GROUP_GET_SIZE].value("T@G") == 60 * 5_500
    snap = m.sets["GROUP_GET_NUMS"].minute("T@G", now_s=item_start + 60)
    assert (snap.sum, snap.tps, snap.avgpt) == (300, 5.0, 5.0)
    assert m.tps_group_get_nums("G", "T") >= 0.0
    assert m.tps_group_get_nums("Other", "T") == 0.0
    assert m.broker_get_nums() == 300 == m.sets[BROKER_GET_NUMS].value("C1")
    # seven snapshots a minute: the rate forgets what is older
    for k in range(7):
        m.sampling(now_s=item_start + 70 + 10 * k)
    assert m.sets["GROUP_GET_NUMS"].minute("T@G", now_s=item_start + 130).tps == 0.0
    m.inc_put("T", 4, 400)
    assert (m.sets[TOPIC_PUT_NUMS].value("T"), m.sets[TOPIC_PUT_SIZE].value("T")) == (4, 400)
    assert m.sets[SNDBCK_PUT_NUMS].items.keys() == {"T@G"}


def test_broker_stats_rate_waits_for_a_second() -> None:
    m = BrokerStatsManager()
    m.inc_get("G", "T", 1000, 1)
    item = m.sets["GROUP_GET_NUMS"].items["T@G"]
    t0 = item._minute[0][0]
    assert m.sets["GROUP_GET_NUMS"].minute("T@G", now_s=t0 + 0.001).tps == 0.0  # not 10^6/s
    assert m.sets["GROUP_GET_NUMS"].minute("T@G", now_s=t0 + 2.0).tps == 500.0
