"""The admin codes of issue 15 that answered REQUEST_CODE_NOT_SUPPORTED, over a real store and a
real loopback connection (the harness of tests/helpers/broker.py), and through a whole
broker where the broker's wiring matters (CHECK_CLIENT_CONFIG, the runtime info's pools)."""

from __future__ import annotations

import asyncio
import datetime
import os
import re
import time
from pathlib import Path

import orjson
import pytest

from pumice.broker.admin_broker_processor import AdminBrokerProcessor, format_date, format_runtime
from pumice.broker.broker_stats_manager import BrokerStats, BrokerStatsManager, next_morning_s
from pumice.common import fastjson
from pumice.common.mix_all import human_readable_byte_count
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store import MessageExtBrokerInner
from pumice.store.schedule_message_service import ScheduleMessageService
from tests.helpers.broker import (
    BROKER,
    CLUSTER,
    Harness,
    create_topic,
    heartbeat,
    loopback_controller,
    mq,
    mq_map,
    run,
    serving,
)
from tests.helpers.waiting import wait_dispatched


async def commit(h: Harness, group: str, topic: str, queue_id: int, offset: int) -> None:
    r = await h.call(15, consumerGroup=group, topic=topic, queueId=queue_id, commitOffset=offset)
    assert r.code == ResponseCode.SUCCESS


def test_the_new_codes_are_registered_by_name() -> None:
    names = {
        "QUERY_TOPIC_CONSUME_BY_WHO": 300, "QUERY_CONSUME_TIME_SPAN": 303, "GET_SYSTEM_TOPIC_LIST_FROM_BROKER": 305,
        "CLEAN_EXPIRED_CONSUMEQUEUE": 306, "QUERY_CORRECTION_OFFSET": 308, "CLONE_GROUP_OFFSET": 314,
        "VIEW_BROKER_STATS_DATA": 315, "CLEAN_UNUSED_TOPIC": 316, "GET_BROKER_CONSUME_STATS": 317,
        "QUERY_CONSUME_QUEUE": 321,
    }  # fmt: skip
    assert {name: int(RequestCode[name]) for name in names} == names
    assert set(names.values()) <= set(AdminBrokerProcessor.HANDLERS)


# -- 300 QUERY_TOPIC_CONSUME_BY_WHO ---------------------------------------------------------------


def test_query_topic_consume_by_who_online_subscribers_and_offset_holders(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        r = await h.call(300, topic="WhoT")
        assert (r.code, r.remark, bytes(r.body)) == (ResponseCode.SUCCESS, None, b'{"groupList":[]}')
        assert (await h.call(34, heartbeat("Online", "c1", "WhoT"))).code == ResponseCode.SUCCESS
        assert (await h.call(34, heartbeat("Elsewhere", "c2", "OtherT"))).code == ResponseCode.SUCCESS
        await commit(h, "Committed", "WhoT", 0, 3)
        await commit(h, "Online", "WhoT", 1, 1)  # in both: once
        await commit(h, "OtherOnly", "OtherT", 0, 1)
        r = await h.call(300, topic="WhoT")
        assert (r.code, bytes(r.body)) == (ResponseCode.SUCCESS, b'{"groupList":["Committed","Online"]}')
        r = await h.call(300)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'topic' field")

    run(tmp_path, scenario)


# -- 303 QUERY_CONSUME_TIME_SPAN ------------------------------------------------------------------


def test_query_consume_time_span_exact_shape(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.call(17, **create_topic("SpanT", read=4, write=3))).code == ResponseCode.SUCCESS
        stamps = []
        for i in range(3):
            stamps.append(h.put("SpanT", b"s%d" % i, 0))
            time.sleep(0.002)
        only = h.put("SpanT", b"one", 1)
        wait_dispatched(h.store)
        await commit(h, "G", "SpanT", 0, 1)
        await commit(h, "G", "SpanT", 1, 1)  # caught up
        before = int(time.time() * 1000)
        r = await h.call(303, topic="SpanT", group="G")
        after = int(time.time() * 1000)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        body = orjson.loads(r.body)
        assert list(body) == ["consumeTimeSpanSet"]
        spans = body["consumeTimeSpanSet"]
        assert len(spans) == 3  # write queues
        keys = ["consumeTimeStamp", "consumeTimeStampStr", "delayTime", "maxTimeStamp", "maxTimeStampStr",
                "messageQueue", "minTimeStamp", "minTimeStampStr"]  # fmt: skip
        assert all(list(s) == keys for s in spans)  # fastjson's order, the getters' *Str included
        q0, q1, q2 = spans
        assert q0["messageQueue"] == {"brokerName": BROKER, "queueId": 0, "topic": "SpanT"}
        assert (q0["minTimeStamp"], q0["maxTimeStamp"], q0["consumeTimeStamp"]) == (stamps[0], stamps[2], stamps[0])
        assert before - stamps[1] <= q0["delayTime"] <= after - stamps[1]  # the next message to consume waits
        assert (q1["minTimeStamp"], q1["maxTimeStamp"], q1["consumeTimeStamp"], q1["delayTime"]) == (
            only, only, only, 0,
        )  # fmt: skip
        # an empty queue and no offset: -1 times and, as upstream, now - (-1)
        assert (q2["minTimeStamp"], q2["maxTimeStamp"], q2["consumeTimeStamp"]) == (-1, -1, -1)
        assert before + 1 <= q2["delayTime"] <= after + 1
        assert q0["minTimeStampStr"] == format_date(stamps[0])
        assert q2["maxTimeStampStr"] == format_date(-1)
        # a group with no offset at all: consumeTimeStamp is the first message's, delay counts from now
        q0 = orjson.loads((await h.call(303, topic="SpanT", group="Nobody")).body)["consumeTimeSpanSet"][0]
        assert q0["consumeTimeStamp"] == stamps[0] and q0["delayTime"] >= before + 1
        r = await h.call(303, topic="NoSuchT", group="G")
        assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchT] not exist")
        r = await h.call(303, topic="SpanT")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'group' field")

    run(tmp_path, scenario)


def test_format_date_runtime_and_byte_counts_as_java_writes_them() -> None:
    ms = 1_700_000_000_123
    local = datetime.datetime.fromtimestamp(ms // 1000)
    assert format_date(ms) == local.strftime("%Y-%m-%d#%H:%M:%S:") + "123"
    epoch = datetime.datetime.fromtimestamp(-1)
    assert format_date(-1) == epoch.strftime("%Y-%m-%d#%H:%M:%S:") + "999"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d#\d\d:\d\d:\d\d:\d{3}", format_date(int(time.time() * 1000)))
    assert format_runtime(((2 * 24 + 3) * 60 + 4) * 60_000 + 5_999) == "[ 2 days, 3 hours, 4 minutes, 5 seconds ]"
    assert format_runtime(1234 * 86_400_000) == "[ 1,234 days, 0 hours, 0 minutes, 0 seconds ]"
    assert [human_readable_byte_count(n) for n in (0, 1023, 1024, 1536, 5 * 1024**3, 1024**6)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "5.0 GiB", "1.0 EiB",
    ]  # fmt: skip


# -- 305 GET_SYSTEM_TOPIC_LIST_FROM_BROKER --------------------------------------------------------


def test_system_topic_list_from_broker(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        r = await h.call(305)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        body = orjson.loads(r.body)
        assert list(body) == ["topicList"]
        assert body["topicList"] == sorted({
            "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
            "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
            CLUSTER, BROKER, f"{CLUSTER}_REPLY_TOPIC",
        })  # fmt: skip

    run(tmp_path, scenario)


# -- 316 CLEAN_UNUSED_TOPIC, 306 CLEAN_EXPIRED_CONSUMEQUEUE ---------------------------------------


def test_clean_unused_topic_destroys_queues_of_topics_without_config(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.call(17, **create_topic("Kept", 2, 2))).code == ResponseCode.SUCCESS
        for i in range(3):
            h.put("Gone", b"g%d" % i, 0)
            h.put("Gone", b"h%d" % i, 1)
            h.put("Kept", b"k%d" % i, 0)
        delayed = MessageExtBrokerInner(topic="Kept", body=b"later", queue_id=0, properties={"DELAY": "2"})
        assert h.store.put_message(delayed).is_ok()
        wait_dispatched(h.store)
        cq_root = Path(h.store_config.consume_queue_dir)
        assert (cq_root / "Gone" / "0").is_dir() and (cq_root / "Gone" / "1").is_dir()
        puts = h.proc.runtime_info()["msgPutTotalTodayNow"]
        assert puts == "9"
        r = await h.call(316)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert "Gone" not in h.store.consume_queue_table and not (cq_root / "Gone").exists()
        assert ("Gone", 0) not in h.store.commit_log.topic_queue_table
        assert h.store.get_max_offset_in_queue("Kept", 0) == 3 and (cq_root / "Kept" / "0").is_dir()
        assert h.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 1) == 1  # kept, as upstream
        assert h.proc.runtime_info()["msgPutTotalTodayNow"] == puts  # the count of puts stays
        # the next message to a destroyed queue starts it again at offset 0, as upstream
        result = h.store.put_message(MessageExtBrokerInner(topic="Gone", body=b"again", queue_id=0))
        assert result.is_ok() and result.append_message_result is not None
        assert result.append_message_result.logics_offset == 0
        wait_dispatched(h.store)
        assert h.store.get_max_offset_in_queue("Gone", 0) == 1
        assert h.proc.runtime_info()["msgPutTotalTodayNow"] == "10"
        # nothing to do: SUCCESS
        assert (await h.call(17, **create_topic("Gone", 2, 2))).code == ResponseCode.SUCCESS
        assert (await h.call(316)).code == ResponseCode.SUCCESS
        assert h.store.get_max_offset_in_queue("Gone", 0) == 1

    run(tmp_path, scenario)


def test_clean_unused_topic_keeps_a_queue_whose_puts_wait_for_dispatch(tmp_path: Path) -> None:
    """A put has taken an offset in the queue and dispatch has not written it: destroying the
    queue then would lose the entry (RocketMQ destroys it with no lock)."""

    async def scenario(h: Harness) -> None:
        h.put("Busy", b"first", 0)
        wait_dispatched(h.store)
        store = h.store
        real = store.reput_message_service.dispatch
        store.reput_message_service.dispatch = lambda reqs: False  # dispatch fails: retried
        try:
            h.put("Busy", b"second", 0)
            time.sleep(0.05)
            assert store.commit_log.topic_queue_table[("Busy", 0)] == 2
            assert store.get_max_offset_in_queue("Busy", 0) == 1
            assert (await h.call(316)).code == ResponseCode.SUCCESS
            assert store.get_consume_queue("Busy", 0) is not None
        finally:
            store.reput_message_service.dispatch = real
        wait_dispatched(store)
        assert store.get_max_offset_in_queue("Busy", 0) == 2
        assert (await h.call(316)).code == ResponseCode.SUCCESS  # dispatched now: it goes
        assert store.get_consume_queue("Busy", 0) is None

    run(tmp_path, scenario)


def test_clean_expired_consume_queue_destroys_queues_the_commit_log_outlived(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        store = h.store
        h.put("Early", b"e", 0)
        store.find_consume_queue("Empty", 0)  # opened, never written: kept ("created just now")
        file_size = h.store_config.mapped_file_size_commit_log
        while store.get_max_phy_offset() < file_size + 100:
            h.put("Late", b"x" * 1000, 0)
        wait_dispatched(store)
        r = await h.call(306)  # nothing expired yet
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert store.get_consume_queue("Early", 0) is not None
        mfq = store.commit_log.mapped_file_queue
        for _ in range(100):  # a flush may hold the file a moment: the next try forces it
            if mfq.delete_expired_file_by_time(0, 0, 0, True, delete_file_batch_max=1) == 1:
                break
            time.sleep(0.01)
        assert store.commit_log.get_min_offset() == file_size
        late_max = store.get_max_offset_in_queue("Late", 0)
        r = await h.call(306)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert store.get_consume_queue("Early", 0) is None
        assert not (Path(h.store_config.consume_queue_dir) / "Early").exists()
        assert store.get_consume_queue("Empty", 0) is not None
        assert store.get_max_offset_in_queue("Late", 0) == late_max  # its last entries are still there

    run(tmp_path, scenario)


# -- 308 QUERY_CORRECTION_OFFSET ------------------------------------------------------------------


def test_query_correction_offset_minimum_over_groups_and_filtered_offsets_stay(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        for i in range(10):
            h.put("CorrT", b"c%d" % i, 0)
            h.put("CorrT", b"d%d" % i, 1)
        wait_dispatched(h.store)
        await commit(h, "G1", "CorrT", 0, 5)
        await commit(h, "G1", "CorrT", 1, 3)
        await commit(h, "G2", "CorrT", 0, 2)
        await commit(h, "G2", "CorrT", 1, 7)
        await commit(h, "Slow", "CorrT", 0, 1)
        await commit(h, "Slow", "OtherT", 0, 4)
        await commit(h, "G1", "OtherT", 0, 0)
        r = await h.call(308, topic="CorrT", compareGroup="G1")
        assert (r.code, r.remark, bytes(r.body)) == (
            ResponseCode.SUCCESS, None, b'{"correctionOffsets":{"0":1,"1":3}}',
        )  # fmt: skip
        r = await h.call(308, topic="CorrT", compareGroup="G1", filterGroups="Slow,Nobody")
        assert orjson.loads(r.body) == {"correctionOffsets": {"0": 2, "1": 3}}
        # RocketMQ 4.9 removes the filtered groups' offsets, every topic's, from its table here
        assert h.offsets.query_offsets("Slow", "CorrT") == {0: 1}
        assert h.offsets.query_offsets("Slow", "OtherT") == {0: 4}
        r = await h.call(308, topic="CorrT", compareGroup="G1", filterGroups="G1,G2,Slow")
        assert orjson.loads(r.body) == {"correctionOffsets": {}}
        # offsets below the queue's min offset do not count
        h.store.get_consume_queue("CorrT", 0).min_logic_offset = 3 * 20  # type: ignore[union-attr]
        r = await h.call(308, topic="CorrT", compareGroup="G1")
        assert orjson.loads(r.body) == {"correctionOffsets": {"0": 5, "1": 3}}
        # upstream reads the compare offsets under "compareGroup@topic" (queryOffset's arguments
        # swapped): a group named like the topic, on a topic named like the compare group
        await commit(h, "CorrT", "Cmp", 0, 4)
        await commit(h, "CorrT", "Cmp", 1, 3)
        r = await h.call(308, topic="CorrT", compareGroup="Cmp")
        assert orjson.loads(r.body) == {"correctionOffsets": {"0": 0x7FFF_FFFF_FFFF_FFFF, "1": 3}}
        await commit(h, "CorrT", "Cmp", 5, 1)  # a queue no group has a minimum for: upstream's NPE
        r = await h.call(308, topic="CorrT", compareGroup="Cmp")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "queue 5 of Cmp@CorrT has no minimum to compare")
        r = await h.call(308, topic="NoSuchT", compareGroup="G1")
        assert (r.code, bytes(r.body)) == (ResponseCode.SUCCESS, b'{"correctionOffsets":{}}')
        r = await h.call(308, topic="CorrT")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'compareGroup' field")
        r = await h.call(308, compareGroup="G1")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'topic' field")

    run(tmp_path, scenario)


# -- 314 CLONE_GROUP_OFFSET -----------------------------------------------------------------------


def test_clone_group_offset(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        for topic in ("CloneA", "CloneB"):
            assert (await h.call(17, **create_topic(topic, 2, 2))).code == ResponseCode.SUCCESS
        await commit(h, "Src", "CloneA", 0, 4)
        await commit(h, "Src", "CloneA", 1, 6)
        await commit(h, "Src", "CloneB", 0, 9)
        await commit(h, "Src", "NoConfigT", 0, 1)
        await commit(h, "Dest", "CloneA", 0, 100)
        await commit(h, "Dest", "CloneA", 3, 100)
        r = await h.call(314, srcGroup="Src", destGroup="Dest", topic="CloneA")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert h.offsets.query_offsets("Dest", "CloneA") == {0: 4, 1: 6}  # replaced, not merged
        assert h.offsets.query_offsets("Dest", "CloneB") == {}
        # no topic: every topic Src has offsets for and a config
        assert (await h.call(314, srcGroup="Src", destGroup="Dest2")).code == ResponseCode.SUCCESS
        assert h.offsets.which_topic_by_consumer("Dest2") == {"CloneA", "CloneB"}
        assert h.offsets.query_offsets("Dest2", "CloneB") == {0: 9}
        # Src online, subscribing to CloneA only: CloneB is skipped unless offline
        assert (await h.call(34, heartbeat("Src", "c1", "CloneA"))).code == ResponseCode.SUCCESS
        assert (await h.call(314, srcGroup="Src", destGroup="Dest3", topic="CloneB")).code == ResponseCode.SUCCESS
        assert h.offsets.query_offsets("Dest3", "CloneB") == {}
        r = await h.call(314, srcGroup="Src", destGroup="Dest3", topic="CloneB", offline="true")
        assert r.code == ResponseCode.SUCCESS
        assert h.offsets.query_offsets("Dest3", "CloneB") == {0: 9}
        # a source with nothing: nothing changes
        assert (await h.call(314, srcGroup="Nobody", destGroup="Dest", topic="CloneA")).code == ResponseCode.SUCCESS
        assert h.offsets.query_offsets("Dest", "CloneA") == {0: 4, 1: 6}
        r = await h.call(314, destGroup="Dest")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'srcGroup' field")
        r = await h.call(314, srcGroup="Src")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'destGroup' field")
        h.offsets.persist()
        on_disk = orjson.loads((tmp_path / "store" / "config" / "consumerOffset.json").read_bytes())["offsetTable"]
        assert on_disk["CloneB@Dest3"] == {"0": 9}

    run(tmp_path, scenario)


# -- 315 VIEW_BROKER_STATS_DATA -------------------------------------------------------------------


def test_view_broker_stats_data_shape_and_unknown_item(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        h.proc.stats.inc_put("StatT", 5, 500)
        h.proc.stats.inc_put("StatT", 3, 300)
        r = await h.call(315, statsName="TOPIC_PUT_NUMS", statsKey="StatT")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        body = orjson.loads(r.body)
        assert list(body) == ["statsDay", "statsHour", "statsMinute"]
        for span in body.values():
            assert list(span) == ["avgpt", "sum", "tps"]
            assert (span["sum"], span["avgpt"]) == (8, 4.0)
        h.proc.stats.inc_get("G", "StatT", 2, 20)
        body = orjson.loads((await h.call(315, statsName="GROUP_GET_NUMS", statsKey="StatT@G")).body)
        assert body["statsMinute"]["sum"] == 2
        for name, key in (("TOPIC_PUT_NUMS", "NoSuchT"), ("NO_SUCH_STATS", "StatT")):
            r = await h.call(315, statsName=name, statsKey=key)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        r = await h.call(315, statsName="TOPIC_PUT_NUMS")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'statsKey' field")

    run(tmp_path, scenario)


def test_stats_item_hour_and_day_windows() -> None:
    m = BrokerStatsManager("C")
    m.inc_put("T", 1, 1)
    item = m.get_stats_item("TOPIC_PUT_NUMS", "T")
    assert item is not None and m.get_stats_item("TOPIC_PUT_NUMS", "U") is None
    assert m.get_stats_item("NOPE", "T") is None
    t0 = 1000.0
    item.value = item.times = 0
    for window in (item._minute, item._hour, item._day):
        window.clear()
        window.append((t0, 0, 0))
    m.sampling(now_s=t0)  # the first round starts the hour and day clocks
    for k in range(1, 8 * 6 + 1):  # 8 hours of 10-minute steps, a put of 10 in each
        item.value += 10
        item.times += 1
        for step in range(60):
            m.sampling(now_s=t0 + (k - 1) * 600 + step * 10 + 10)
    now = t0 + 8 * 3600
    assert item.value == 480
    # the hour: seven 10-minute snapshots, the oldest 60 minutes back
    hour = item.hour(now)
    assert (hour.sum, hour.tps, hour.avgpt) == (60, 60 / 3600, 10.0)
    day = item.day(now)  # 8 hours: from the item's first snapshot
    assert (day.sum, day.avgpt) == (480, 10.0) and day.tps == pytest.approx(480 / (8 * 3600))
    assert item.minute(now).sum == 0


# -- 317 GET_BROKER_CONSUME_STATS -----------------------------------------------------------------


def test_get_broker_consume_stats_exact_shape(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.call(17, **create_topic("BcT", read=1, write=2))).code == ResponseCode.SUCCESS
        assert (await h.call(17, **create_topic("OrdT", read=1, write=1, order="true"))).code == ResponseCode.SUCCESS
        stamps = [h.put("BcT", b"b%d" % i, 0) for i in range(3)]
        h.put("OrdT", b"o", 0)
        wait_dispatched(h.store)
        sub = orjson.dumps({"groupName": "BcG"})
        assert (await h.call(200, sub)).code == ResponseCode.SUCCESS
        await commit(h, "BcG", "BcT", 0, 2)
        await commit(h, "BcG", "OrdT", 0, 1)
        await commit(h, "BcG", "NoConfigT", 0, 1)
        await commit(h, "NotAGroup", "BcT", 0, 1)  # offsets without a subscription group: not listed
        r = await h.call(317, isOrder="false")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        body = fastjson.loads(r.body)
        assert list(body) == ["brokerAddr", "consumeStatsList", "totalDiff"]
        assert body["brokerAddr"] == h.broker_config.broker_addr
        groups = [next(iter(entry)) for entry in body["consumeStatsList"]]
        assert groups == sorted(h.groups.subscription_group_table) and "NotAGroup" not in groups
        assert all(len(entry) == 1 for entry in body["consumeStatsList"])
        (bcg,) = [entry["BcG"] for entry in body["consumeStatsList"] if "BcG" in entry]
        bct = mq_map({
            ("BcT", 0): f'{{"brokerOffset":3,"consumerOffset":2,"lastTimestamp":{stamps[1]}}}',
            ("BcT", 1): '{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0}',  # write queues, not read
        })  # fmt: skip
        ord_stamp = h.store.get_message_store_timestamp("OrdT", 0, 0)
        ordt = mq_map({("OrdT", 0): f'{{"brokerOffset":1,"consumerOffset":1,"lastTimestamp":{ord_stamp}}}'})
        expected = f'[{{"consumeTps":0.0,"offsetTable":{bct}}},{{"consumeTps":0.0,"offsetTable":{ordt}}}]'
        assert f'"BcG":{expected}' in bytes(r.body).decode()
        assert body["totalDiff"] == 1
        assert all(entry[g] == [] for entry in body["consumeStatsList"] for g in entry if g != "BcG")
        body = fastjson.loads((await h.call(317, isOrder="true")).body)
        (bcg,) = [entry["BcG"] for entry in body["consumeStatsList"] if "BcG" in entry]
        assert [list(s["offsetTable"]) for s in bcg] == [[mq("OrdT", 0)]] and body["totalDiff"] == 0
        # online and not subscribing to BcT: skipped
        assert (await h.call(34, heartbeat("BcG", "c1", "OrdT"))).code == ResponseCode.SUCCESS
        body = fastjson.loads((await h.call(317, isOrder="false")).body)
        (bcg,) = [entry["BcG"] for entry in body["consumeStatsList"] if "BcG" in entry]
        assert [list(s["offsetTable"]) for s in bcg] == [[mq("OrdT", 0)]]
        r = await h.call(317)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'isOrder' field")

    run(tmp_path, scenario)


# -- 321 QUERY_CONSUME_QUEUE ----------------------------------------------------------------------


def test_query_consume_queue(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        for i in range(5):
            h.put("CqT", b"q%d" % i, 0)
        wait_dispatched(h.store)
        cq = h.store.get_consume_queue("CqT", 0)
        assert cq is not None
        entries = [cq.get_entry(i) for i in range(5)]
        r = await h.call(321, topic="CqT", queueId=0, index=1, count=3)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        queue_data = ",".join(
            f'{{"eval":false,"physicOffset":{o},"physicSize":{s},"tagsCode":{t}}}' for o, s, t in entries[1:4]
        )
        assert bytes(r.body).decode() == f'{{"maxQueueIndex":5,"minQueueIndex":0,"queueData":[{queue_data}]}}'
        assert all(t == 65 for _, _, t in entries)  # "A".hashCode()
        # count past the end: up to the file's written end
        body = orjson.loads((await h.call(321, topic="CqT", queueId=0, index=3, count=100)).body)
        assert [e["physicOffset"] for e in body["queueData"]] == [entries[3][0], entries[4][0]]
        body = orjson.loads((await h.call(321, topic="CqT", queueId=0, index=0)).body)  # count 0
        assert body["queueData"] == []
        # a group: not online, then online with a subscription (upstream's TAG filter data is JSON null)
        body = orjson.loads((await h.call(321, topic="CqT", queueId=0, index=0, count=1, consumerGroup="QG")).body)
        assert list(body) == ["filterData", "maxQueueIndex", "minQueueIndex", "queueData"]
        assert body["filterData"] == "QG@CqT is not online!"
        assert (await h.call(34, heartbeat("QG", "c1", "CqT"))).code == ResponseCode.SUCCESS
        body = orjson.loads((await h.call(321, topic="CqT", queueId=0, index=0, count=1, consumerGroup="QG")).body)
        assert list(body) == ["filterData", "maxQueueIndex", "minQueueIndex", "queueData", "subscriptionData"]
        assert body["filterData"] == "null"
        assert body["subscriptionData"] == h.consumers.consumer_table["QG"].subscriptions["CqT"]
        # an index outside the queue: SUCCESS, a remark, no body
        for index in (5, 10_000, -1):
            r = await h.call(321, topic="CqT", queueId=0, index=index, count=1)
            assert (r.code, r.remark, bytes(r.body)) == (
                ResponseCode.SUCCESS, f"Index {index} of 0@CqT is not exist!", b"",
            )  # fmt: skip
        # a queue the store has not opened
        r = await h.call(321, topic="CqT", queueId=7, index=0, count=1)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "7@CqT is not exist!")
        r = await h.call(321, topic="NoSuchT", index=0, count=1)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "0@NoSuchT is not exist!")
        r = await h.call(321, queueId=0, index=0, count=1)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the request has no 'topic' field")

    run(tmp_path, scenario)


# -- GET_BROKER_RUNTIME_INFO: the daily counters and the other keys -------------------------------


def test_runtime_info_daily_counters_and_more_keys(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        table = orjson.loads((await h.call(28)).body)["table"]
        for key in ("msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgGetTotalYesterdayMorning",
                    "msgGetTotalTodayMorning"):  # fmt: skip
            assert table[key] == "0", key  # no midnight passed yet
        for i in range(3):
            h.put("DayT", b"d%d" % i, 0)
        wait_dispatched(h.store)
        h.proc.stats.inc_get("G", "DayT", 2, 20)
        h.proc.broker_stats.record()  # a midnight
        h.put("DayT", b"d3", 0)
        wait_dispatched(h.store)
        h.proc.stats.inc_get("G", "DayT", 1, 10)
        table = orjson.loads((await h.call(28)).body)["table"]
        assert (table["msgPutTotalYesterdayMorning"], table["msgPutTotalTodayMorning"],
                table["msgPutTotalTodayNow"]) == ("0", "3", "4")  # fmt: skip
        assert (table["msgGetTotalYesterdayMorning"], table["msgGetTotalTodayMorning"],
                table["msgGetTotalTodayNow"]) == ("0", "2", "3")  # fmt: skip
        h.proc.broker_stats.record()  # the next midnight
        table = orjson.loads((await h.call(28)).body)["table"]
        assert (table["msgPutTotalYesterdayMorning"], table["msgPutTotalTodayMorning"]) == ("3", "4")
        assert (table["msgGetTotalYesterdayMorning"], table["msgGetTotalTodayMorning"]) == ("2", "3")
        # the other keys of upstream's prepareRuntimeInfo and getRuntimeInfo
        assert re.fullmatch(r"\[ 0 days, 0 hours, \d+ minutes, \d+ seconds \]", table["runtime"])
        assert table[f"commitLogDiskRatio_{h.store_config.commit_log_dir}"] == table["commitLogDiskRatio"]
        assert table["startAcceptSendRequestTimeStamp"] == "0"
        assert table["remainTransientStoreBufferNumbs"] == "2147483647"  # no pool, as upstream
        assert "remainHowManyDataToCommit" not in table
        assert re.fullmatch(r"\d+ B|\d+\.\d (KiB|MiB)", table["remainHowManyDataToFlush"])
        capacity = table["commitLogDirCapacity"]
        assert re.fullmatch(r"Total : \d+\.\d [KMGTPE]iB, Free : \d+(\.\d [KMGTPE]iB| B)\.", capacity)
        assert not any(k.startswith("scheduleMessageOffset_") or "ThreadPool" in k for k in table)
        # a master's delay levels: next offset to deliver, and the level's queue max
        schedule = ScheduleMessageService(h.store)
        schedule.offset_table.update({1: 0, 3: 1})
        h.proc.schedule_message_service = schedule
        delayed = MessageExtBrokerInner(topic="DayT", body=b"later", queue_id=0, properties={"DELAY": "3"})
        assert h.store.put_message(delayed).is_ok()
        wait_dispatched(h.store)
        table = orjson.loads((await h.call(28)).body)["table"]
        assert (table["scheduleMessageOffset_1"], table["scheduleMessageOffset_3"]) == ("0,0", "1,1")

    run(tmp_path, scenario)


def test_runtime_info_with_the_transient_store_pool(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        table = orjson.loads((await h.call(28)).body)["table"]
        pool = h.store.transient_store_pool
        assert pool is not None
        assert table["remainTransientStoreBufferNumbs"] == str(pool.available_buffer_nums())
        assert re.fullmatch(r"\d+ B|\d+\.\d (KiB|MiB)", table["remainHowManyDataToCommit"])

    run(tmp_path, scenario, transient_store_pool_enable=True, transient_store_pool_size=2)


def test_next_morning_is_the_next_local_midnight() -> None:
    now = time.time()
    morning = next_morning_s(now)
    local = datetime.datetime.fromtimestamp(morning)
    assert (local.hour, local.minute, local.second, local.microsecond) == (0, 0, 0, 0)
    assert 0 < morning - now <= 25 * 3600
    assert local.date() == datetime.datetime.fromtimestamp(now).date() + datetime.timedelta(days=1)
    assert next_morning_s(morning) > morning and next_morning_s(morning - 0.001) == morning


def test_broker_stats_record_at_midnights_follows_the_wall_clock() -> None:
    totals = {"put": 10, "get": 4}
    stats = BrokerStats(lambda: totals["put"], lambda: totals["get"])
    midnight = next_morning_s(time.time())
    offset = [midnight - 0.05 - time.monotonic()]  # the fake wall clock: 50 ms before midnight

    def now() -> float:
        return time.monotonic() + offset[0]

    async def main() -> None:
        task = asyncio.create_task(stats.record_at_midnights(now, max_sleep_s=0.01))
        await asyncio.sleep(0.02)
        assert stats.msg_put_total_today_morning == 0  # not yet
        for _ in range(200):
            if stats.msg_put_total_today_morning:
                break
            await asyncio.sleep(0.01)
        assert (stats.msg_put_total_today_morning, stats.msg_get_total_today_morning) == (10, 4)
        assert stats.msg_put_total_yesterday_morning == 0
        totals.update(put=25, get=9)
        offset[0] += 24 * 3600  # a day later (the wall clock was set, or the machine slept)
        for _ in range(200):
            if stats.msg_put_total_today_morning == 25:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        assert (stats.msg_put_total_yesterday_morning, stats.msg_put_total_today_morning) == (10, 25)
        assert (stats.msg_get_total_yesterday_morning, stats.msg_get_total_today_morning) == (4, 9)

    asyncio.run(main())


# -- through a whole broker: CHECK_CLIENT_CONFIG, codes 4.9 does not serve, the pools' keys ----


def test_broker_check_client_config_unserved_codes_and_pool_keys(tmp_path: Path) -> None:
    controller = loopback_controller(tmp_path)

    def check(sub: object) -> bytes:
        return orjson.dumps({"clientId": "127.0.0.1@1", "group": "CG", "subscriptionData": sub})

    def sub(expression_type: object) -> dict[str, object]:
        data: dict[str, object] = {"topic": "T", "subString": "a > 1", "tagsSet": [], "codeSet": [],
                                   "subVersion": 1, "classFilterMode": False}  # fmt: skip
        if expression_type is not None:
            data["expressionType"] = expression_type
        return data

    async def main() -> None:
        async with serving(controller) as (client, addr):

            async def call(code: int, body: bytes = b"") -> RemotingCommand:
                return await client.invoke(addr, RemotingCommand(code=code, body=body))

            r = await call(RequestCode.CHECK_CLIENT_CONFIG)  # no body: 4.9 fails to decode it
            assert r.code == ResponseCode.SYSTEM_ERROR and "CheckClientRequestBody" in (r.remark or "")
            for body in (b"null", orjson.dumps({"clientId": "x"}), check(None), check(sub(None)),
                         check(sub("")), check(sub("TAG"))):  # fmt: skip
                r = await call(RequestCode.CHECK_CLIENT_CONFIG, body)
                assert (r.code, r.remark) == (ResponseCode.SUCCESS, None), body
            r = await call(RequestCode.CHECK_CLIENT_CONFIG, check(sub("SQL92")))
            assert (r.code, r.remark) == (
                ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92",
            )  # fmt: skip
            # enablePropertyFilter (live): SQL92 compiled; a bad one, or another type, SUBSCRIPTION_PARSE_FAILED
            r = await call(RequestCode.UPDATE_BROKER_CONFIG, b"enablePropertyFilter=true")
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (await call(RequestCode.CHECK_CLIENT_CONFIG, check(sub("SQL92")))).code == ResponseCode.SUCCESS
            bad = sub("SQL92") | {"subString": "a >"}
            r = await call(RequestCode.CHECK_CLIENT_CONFIG, check(bad))
            assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and r.remark.startswith("Invalid syntax: a >")
            r = await call(RequestCode.CHECK_CLIENT_CONFIG, check(sub("XPATH")))
            assert (r.code, r.remark) == (
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                "the expression type XPATH is not supported",
            )
            for body in (b"{not json", b"[1]", check("SQL92")):
                r = await call(RequestCode.CHECK_CLIENT_CONFIG, body)
                assert r.code == ResponseCode.SYSTEM_ERROR and "CheckClientRequestBody" in (r.remark or ""), body
            # RequestCode of 4.9.8 defines these; no 4.9 broker has a processor for them
            for code in (209, 210, 211, 212, 213, 214):
                r = await call(code)
                assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
                assert r.remark == f" request type {code} not supported"
            table = orjson.loads((await call(RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
            c = controller.config
            assert (table["sendThreadPoolQueueSize"], table["sendThreadPoolQueueCapacity"]) == (
                "0", str(c.send_thread_pool_queue_capacity),
            )  # fmt: skip
            assert (table["pullThreadPoolQueueSize"], table["pullThreadPoolQueueCapacity"]) == (
                "0", str(c.pull_thread_pool_queue_capacity),
            )  # fmt: skip
            assert (table["queryThreadPoolQueueSize"], table["queryThreadPoolQueueCapacity"]) == (
                "0", str(c.query_thread_pool_queue_capacity),
            )  # fmt: skip
            assert "scheduleMessageOffset_1" not in table or table["scheduleMessageOffset_1"].endswith(",0")
            # the daily record runs as one of the broker's tasks
            assert any("record_at_midnights" in repr(t.get_coro()) for t in controller._tasks)
            for code in (300, 305, 317):  # served through the broker's own registration
                fields = {"topic": "T"} if code == 300 else {"isOrder": "false"} if code == 317 else {}
                r = await client.invoke(addr, RemotingCommand(code=code, ext_fields=fields))
                assert r.code == ResponseCode.SUCCESS, code

    asyncio.run(asyncio.wait_for(main(), 30))
    assert not os.path.exists(tmp_path / "abort")
