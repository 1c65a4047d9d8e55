"""The dashboard's view logic (pumice.dashboard.views): input checks and runtime-info rows."""

from __future__ import annotations

import time

import pytest

from pumice.client.admin_types import BrokerInfo
from pumice.dashboard import views
from pumice.dashboard.views import BadInput


@pytest.mark.parametrize(
    ("value", "said"),
    [("", "is missing"), ("zz", "is malformed"), ("AB" * 15, "is malformed"), ("0A" * 16 + "G", "is malformed")],
)
def test_a_malformed_msg_id_is_refused_with_why(value: str, said: str) -> None:
    with pytest.raises(BadInput, match=said):
        views.check_msg_id(value)


def test_msg_ids_of_32_and_56_hex_digits_pass_upper_cased() -> None:
    assert views.check_msg_id(" 7f0000010000271100000000000000a0 ") == "7F0000010000271100000000000000A0"
    assert len(views.check_msg_id("ab" * 28)) == 56


@pytest.mark.parametrize("name", ["", "a b", "x" * 128, "t/1"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(BadInput):
        views.check_name(name, "topic")


def test_names_as_rocketmq_accepts_them() -> None:
    assert views.check_name(" %RETRY%g_1|x-y ", "topic") == "%RETRY%g_1|x-y"


def test_times_from_the_browser_text_or_epoch_ms() -> None:
    local = views.parse_time("2026-01-02T03:04", "t")
    assert local == int(time.mktime((2026, 1, 2, 3, 4, 0, 0, 0, -1)) * 1000)
    assert views.parse_time("2026-01-02 03:04:05", "t") == local + 5000
    assert views.parse_time("1700000000000", "t") == 1700000000000
    with pytest.raises(BadInput, match="is not a time"):
        views.parse_time("yesterday", "begin time")
    with pytest.raises(BadInput, match="out of range"):
        views.check_int("0", "read queue number", 1, 1024)


def test_body_as_text_pretty_json_and_hex() -> None:
    v = views.body_views(b'{"a":1,"b":"\xc3\xa9"}')
    assert v["json"] == '{\n  "a": 1,\n  "b": "\u00e9"\n}'
    assert v["hex"].startswith("00000000  7b 22 61 22")
    assert views.body_views(b"\xff\x00plain")["json"] == ""
    big = views.body_views(bytes(5000))["hex"].splitlines()
    assert len(big) == views.HEX_SHOWN // 16 + 1 and big[-1] == f"... {5000 - views.HEX_SHOWN} more bytes"


def test_broker_rows_take_tps_disk_and_today_counts_and_keep_the_error() -> None:
    up = BrokerInfo("C", "b", 0, "h:1", {
        "putTps": "12.5 11.0 10.0", "getTransferedTps": "3.0 2.0 1.0", "commitLogDiskRatio": "0.42",
        "brokerVersionDesc": "V4_9_8", "msgPutTotalTodayNow": "150", "msgPutTotalTodayMorning": "50",
        "msgGetTotalTodayNow": "7", "msgGetTotalTodayMorning": "7",
    })  # fmt: skip
    down = BrokerInfo("C", "b", 1, "h:2", error="connect failed")
    rows = views.broker_rows([up, down])
    assert (rows[0].role, rows[0].tps_in, rows[0].tps_out, rows[0].disk_ratio) == ("MASTER", 12.5, 3.0, 0.42)
    assert (rows[0].today_in, rows[0].today_out, rows[0].version) == ("100", "0", "V4_9_8")
    assert (rows[1].role, rows[1].error, rows[1].version) == ("SLAVE", "connect failed", "")


@pytest.mark.parametrize(
    ("ratio", "state"),
    [
        ("0.5", "ok"),
        ("0.76", "cleaning expired files"),
        ("0.86", "cleaning forcibly"),
        ("0.95", "FULL: writes refused"),
    ],
)
def test_store_health_places_the_disk_ratio_against_the_thresholds(ratio: str, state: str) -> None:
    rt = {"commitLogDiskRatio": ratio, "diskMaxUsedSpaceRatio": "75", "diskSpaceCleanForciblyRatio": "0.85",
          "diskSpaceWarningLevelRatio": "0.9", "commitLogFiles": "00000000000000000000:1073741824;"
          "00000000001073741824:1024", "commitLogFileSize": "1073741824", "lastRecoveryMode": "abnormal",
          "lastRecoveryTruncatedBytes": "96"}  # fmt: skip
    h = views.store_health("h:1", rt)
    assert h.state == state
    assert h.files == [("00000000000000000000", "1.0 GiB"), ("00000000001073741824", "1.0 KiB")]
    assert h.recovery["mode"] == "abnormal" and h.recovery["ConsumeQueue bytes truncated"] == "96"


def test_store_health_of_a_broker_that_does_not_tell_is_unknown() -> None:
    h = views.store_health("h:1", {"brokerVersionDesc": "V4_9_7"})
    assert (h.state, h.files, h.file_count, h.recovery) == ("unknown", [], "-", {})
    # RocketMQ's own broker: the ratio, no thresholds
    assert views.store_health("h:1", {"commitLogDiskRatio": "0.2"}).state == "thresholds unknown"


def test_slaves_behind_rows() -> None:
    rt = {"haSlaves": "127.0.0.1:50001 behindBytes=2048 behindSeconds=1.5;127.0.0.1:50002 behindBytes=-1 "
          "behindSeconds=-1"}  # fmt: skip
    rows = views.slaves_behind("m:1", rt)
    assert [(r.slave, r.behind_bytes, r.behind_seconds) for r in rows] == [
        ("127.0.0.1:50001", 2048, 1.5), ("127.0.0.1:50002", -1, -1.0)]  # fmt: skip
    assert views.slaves_behind("m:1", {}) == []


def test_dledger_nodes_from_runtime_info() -> None:
    b = BrokerInfo("C", "RaftNode00", 0, "h:1", {"dLedgerGroup": "RaftNode00", "dLedgerSelfId": "n0",
                   "dLedgerRole": "LEADER", "dLedgerTerm": "3", "dLedgerLeaderId": "n0",
                   "dLedgerMembers": '{"n1": {"endIndex": 5, "behind": 2, "live": true}}'})  # fmt: skip
    (n,) = views.dledger_nodes([b, BrokerInfo("C", "x", 0, "h:2")])
    assert (n.role, n.term, n.members["n1"]["behind"]) == ("LEADER", "3", 2)
    assert views.broker_rows([b])[0].role == "LEADER (DLedger)"


def test_svg_chart_draws_a_line_per_series_escaped() -> None:
    svg = views.svg_chart({"g<1>": [(0.0, 1.0), (10.0, 4.0)], "h": [(5.0, 2.0)]})
    assert svg.count("<polyline") == 2 and "g&lt;1>" in svg and ">4<" in svg
    assert "no samples yet" in views.svg_chart({})
