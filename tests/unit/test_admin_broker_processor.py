"""AdminBrokerProcessor over a real store, real managers and a real loopback connection."""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from pumice.broker.admin_broker_processor import SLAVE_REMARK
from pumice.broker.broker_config import default_broker_ip1
from pumice.broker.topic_config_manager import TopicConfig
from pumice.common import fastjson
from pumice.config import parse_properties
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store import BrokerRole, DefaultMessageStore, MessageExtBrokerInner
from tests.helpers.broker import BROKER, CLUSTER, Harness, create_topic, heartbeat, mq, mq_map, run
from tests.helpers.waiting import wait_dispatched

# -- topics -------------------------------------------------------------------------------------


def test_update_and_create_topic_persists_registers_and_replaces(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        version = h.topics.data_version.counter
        r = await h.call(17, **create_topic("AdminT", 3, 2, 6, topicFilterType="MULTI_TAG", topicSysFlag="1",
                                            order="true"))  # fmt: skip
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert h.topics.select_topic_config("AdminT") == TopicConfig("AdminT", 3, 2, 6, "MULTI_TAG", 1, True)
        assert h.topics.data_version.counter == version + 1
        assert len(h.registrations) == 1
        on_disk = orjson.loads((tmp_path / "store" / "config" / "topics.json").read_bytes())
        assert on_disk["topicConfigTable"]["AdminT"] == {
            "topicName": "AdminT", "readQueueNums": 3, "writeQueueNums": 2, "perm": 6,
            "topicFilterType": "MULTI_TAG", "topicSysFlag": 1, "order": True,
        }  # fmt: skip
        # an update replaces the whole config (ints as JSON numbers work too)
        r = await h.call(17, **create_topic("AdminT", 8, 8, 4))
        assert r.code == ResponseCode.SUCCESS
        assert h.topics.select_topic_config("AdminT") == TopicConfig("AdminT", 8, 8, 4, "SINGLE_TAG", 0, False)
        assert len(h.registrations) == 2
        # TBW102 is refused to producers but is a system topic here; %RETRY% names are fine
        assert (await h.call(17, **create_topic("%RETRY%G1"))).code == ResponseCode.SUCCESS

    run(tmp_path, scenario)


def test_get_all_topic_config_is_the_serialize_wrapper(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.call(17, **create_topic("AllT", 2, 2))).code == ResponseCode.SUCCESS
        r = await h.call(21)
        assert r.code == ResponseCode.SUCCESS
        body = orjson.loads(r.body)
        assert set(body) == {"topicConfigTable", "dataVersion"}
        assert body == h.topics.topic_config_serialize_wrapper()
        assert body["topicConfigTable"]["AllT"] == {
            "topicName": "AllT", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
        }  # fmt: skip
        assert set(body["dataVersion"]) == {"timestamp", "counter"}
        assert {"TBW102", CLUSTER, BROKER, "SCHEDULE_TOPIC_XXXX"} <= set(body["topicConfigTable"])

    run(tmp_path, scenario)


def test_topic_refusals_change_nothing(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        before = h.topics.topic_config_serialize_wrapper()
        cases = {
            "": "The specified topic is blank.",
            "bad topic": "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
            "x" * 128: "The specified topic is longer than topic max length.",
        }
        for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
                      "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", CLUSTER,
                      BROKER, f"{CLUSTER}_REPLY_TOPIC", "rmq_sys_anything"):  # fmt: skip
            cases[topic] = f"The topic[{topic}] is conflict with system topic."
        for topic, remark in cases.items():
            for code in (17, 215):
                r = await h.call(code, **create_topic(topic))
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), (code, topic)
        r = await h.call(17, **create_topic("T1", topicFilterType="EVERYTHING"))
        assert r.code == ResponseCode.SYSTEM_ERROR and "EVERYTHING" in (r.remark or "")
        r = await h.call(17, **create_topic("T1", read=-1))
        assert r.code == ResponseCode.SYSTEM_ERROR and "readQueueNums -1 is out of range" in (r.remark or "")
        # past MAX_QUEUE_NUMS: GET_TOPIC_STATS_INFO would loop over 2**31 queues on the event loop
        r = await h.call(17, **create_topic("T1", writeQueueNums=16_385))
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == "writeQueueNums 16385 is out of range: a topic has 0 to 16384 queues"
        r = await h.call(17, **create_topic("T1", writeQueueNums=str(2**31)))  # not a Java int
        assert (r.code, r.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "field 'writeQueueNums' is out of the int range: '2147483648'",
        )
        # a perm or sys flag the name server would hand every client
        for perm in (-1, 16):
            r = await h.call(17, **create_topic("T1", perm=perm))
            assert (r.code, r.remark) == (
                ResponseCode.SYSTEM_ERROR,
                f"perm {perm} is not 0 to 15 (2 write, 4 read, 1 inherit)",
            )
        r = await h.call(17, **create_topic("T1", topicSysFlag=-5))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "topicSysFlag -5 is negative")
        fields = create_topic("T1")
        del fields["perm"]
        r = await h.call(17, **fields)
        assert r.code == ResponseCode.SYSTEM_ERROR and "'perm'" in (r.remark or "")
        r = await h.call(17, **create_topic("T1", writeQueueNums="many"))
        assert r.code == ResponseCode.SYSTEM_ERROR and "writeQueueNums" in (r.remark or "")
        assert (await h.call(215)).code == ResponseCode.SYSTEM_ERROR  # no topic field
        assert h.topics.topic_config_serialize_wrapper() == before
        assert h.registrations == []

    run(tmp_path, scenario)


def test_delete_topic_drops_config_and_its_offsets_only(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.call(17, **create_topic("Gone"))).code == ResponseCode.SUCCESS
        assert (await h.call(17, **create_topic("Kept"))).code == ResponseCode.SUCCESS
        for topic in ("Gone", "Kept"):
            for group in ("G1", "G2"):
                r = await h.call(15, consumerGroup=group, topic=topic, queueId=1, commitOffset=7)
                assert r.code == ResponseCode.SUCCESS
        version = h.topics.data_version.counter
        r = await h.call(215, topic="Gone")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert not h.topics.contains_topic("Gone") and h.topics.contains_topic("Kept")
        assert h.topics.data_version.counter == version + 1
        assert set(h.offsets.offset_table) == {"Kept@G1", "Kept@G2"}
        assert len(h.registrations) == 3
        assert (
            "Gone" not in orjson.loads((tmp_path / "store" / "config" / "topics.json").read_bytes())["topicConfigTable"]
        )
        # unknown topic: SUCCESS, as upstream
        assert (await h.call(215, topic="NeverWas")).code == ResponseCode.SUCCESS

    run(tmp_path, scenario)


def test_slave_refuses_topic_and_group_changes(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        body = orjson.dumps({"groupName": "GS"})
        for code, fields, req_body in (
            (17, create_topic("SlaveT"), b""),
            (215, {"topic": "SlaveT"}, b""),
            (200, {}, body),
            (207, {"groupName": "GS"}, b""),
        ):
            r = await h.call(code, req_body, **fields)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK), code
        assert not h.topics.contains_topic("SlaveT") and not h.groups.contains_subscription_group("GS")
        # reads still work
        assert (await h.call(21)).code == ResponseCode.SUCCESS

    run(tmp_path, scenario, broker_role=BrokerRole.SLAVE)


# -- stats --------------------------------------------------------------------------------------


def test_topic_stats_info_exact_fastjson_shape(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.call(17, **create_topic("StatT", read=4, write=2))).code == ResponseCode.SUCCESS
        h.put("StatT", b"a", 0)
        h.put("StatT", b"b", 0)
        last = h.put("StatT", b"c", 0)
        wait_dispatched(h.store)
        r = await h.call(202, topic="StatT")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        table = mq_map({
            ("StatT", 0): f'{{"lastUpdateTimestamp":{last},"maxOffset":3,"minOffset":0}}',
            ("StatT", 1): '{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}',
        })  # fmt: skip
        expected = '{"offsetTable":' + table + "}"
        assert bytes(r.body).decode() == expected  # one entry per WRITE queue, keys are MessageQueue JSON, bare
        assert '{{"brokerName":"broker-t","queueId":' in expected
        r = await h.call(202, topic="Nope")
        assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")

    run(tmp_path, scenario)


def test_consumer_connection_list(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        r = await h.call(203, consumerGroup="CG")
        assert (r.code, r.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[CG] not online")
        assert r.code == 206
        assert (await h.call(34, heartbeat("CG", "127.0.0.1@cpp", "ConnT"))).code == ResponseCode.SUCCESS
        r = await h.call(203, consumerGroup="CG")
        assert r.code == ResponseCode.SUCCESS
        body = orjson.loads(r.body)
        (channel,) = [c.channel for c in h.consumers.consumer_table["CG"].channels.values()]
        host, _, port = channel.remote_addr.rpartition(":")
        assert host == "127.0.0.1" and port.isdigit()
        assert body == {
            "connectionSet": [
                # the consumer manager does not record the heartbeat's language and version yet
                {"clientAddr": channel.remote_addr, "clientId": "127.0.0.1@cpp", "language": "PYTHON", "version": 409}
            ],
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",  # C++ ordinals become RocketMQ's names
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "subscriptionTable": {
                "ConnT": {"topic": "ConnT", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 5,
                          "classFilterMode": False, "expressionType": "TAG"}
            },
        }  # fmt: skip
        assert list(body) == sorted(body)  # fastjson's field order
        # Java clients send names: kept as they are
        java = heartbeat("JG", "10.0.0.1@java", "ConnT", consumeType="CONSUME_ACTIVELY",
                         messageModel="BROADCASTING", consumeFromWhere="CONSUME_FROM_TIMESTAMP")  # fmt: skip
        assert (await h.call(34, java)).code == ResponseCode.SUCCESS
        body = orjson.loads((await h.call(203, consumerGroup="JG")).body)
        assert (body["consumeType"], body["messageModel"], body["consumeFromWhere"]) == (
            "CONSUME_ACTIVELY", "BROADCASTING", "CONSUME_FROM_TIMESTAMP",
        )  # fmt: skip
        assert (await h.call(203)).code == ResponseCode.SYSTEM_ERROR  # consumerGroup is required

    run(tmp_path, scenario)


def test_consume_stats_exact_shape_and_topic_selection(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.call(17, **create_topic("CsT", read=2, write=2))).code == ResponseCode.SUCCESS
        assert (await h.call(17, **create_topic("Other", read=1, write=1))).code == ResponseCode.SUCCESS
        stamps = [h.put("CsT", b"m%d" % i, 0) for i in range(4)]
        h.put("CsT", b"q1", 1)
        h.put("Other", b"o", 0)
        wait_dispatched(h.store)
        for topic, queue_id, offset in (("CsT", 0, 3), ("Other", 0, 1)):
            r = await h.call(15, consumerGroup="G", topic=topic, queueId=queue_id, commitOffset=offset)
            assert r.code == ResponseCode.SUCCESS
        r = await h.call(208, consumerGroup="G", topic="CsT")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        table = mq_map({
            ("CsT", 0): f'{{"brokerOffset":4,"consumerOffset":3,"lastTimestamp":{stamps[2]}}}',
            ("CsT", 1): '{"brokerOffset":1,"consumerOffset":0,"lastTimestamp":0}',
        })  # fmt: skip
        expected = '{"consumeTps":0.0,"offsetTable":' + table + "}"
        assert bytes(r.body).decode() == expected
        # no topic: every topic the group has offsets for
        body = fastjson.loads((await h.call(208, consumerGroup="G")).body)
        assert set(body["offsetTable"]) == {mq("CsT", 0), mq("CsT", 1), mq("Other", 0)}
        assert body["offsetTable"][mq("Other", 0)]["consumerOffset"] == 1
        # an online group skips topics it does not subscribe to
        assert (await h.call(34, heartbeat("G", "c1", "Other"))).code == ResponseCode.SUCCESS
        body = fastjson.loads((await h.call(208, consumerGroup="G")).body)
        assert list(body["offsetTable"]) == [mq("Other", 0)]
        # unknown group or unknown topic: empty table
        for fields in ({"consumerGroup": "Nobody"}, {"consumerGroup": "G", "topic": "NoSuchTopic"}):
            r = await h.call(208, **fields)
            assert (r.code, bytes(r.body)) == (ResponseCode.SUCCESS, b'{"consumeTps":0.0,"offsetTable":{}}')

    run(tmp_path, scenario)


def test_broker_runtime_info(tmp_path: Path) -> None:
    def preload(store: DefaultMessageStore) -> None:  # before the processor exists: not counted
        for i in range(2):
            m = MessageExtBrokerInner(topic="Old", body=b"old%d" % i, queue_id=0)
            assert store.put_message(m).is_ok()

    async def scenario(h: Harness) -> None:
        t0 = time.time() * 1000
        for i in range(5):
            h.put("RtT", b"x" * 100, i % 2)
        # a delayed message waits in SCHEDULE_TOPIC_XXXX (no schedule service here): counted when delivered
        delayed = MessageExtBrokerInner(topic="RtT", body=b"later", queue_id=0, properties={"DELAY": "3"})
        assert h.store.put_message(delayed).is_ok() and delayed.topic == "SCHEDULE_TOPIC_XXXX"
        wait_dispatched(h.store)
        r = await h.call(28)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        body = orjson.loads(r.body)
        assert list(body) == ["table"]
        table = body["table"]
        assert all(isinstance(v, str) for v in table.values())
        assert table["brokerVersionDesc"] == "V4_9_8" and table["brokerVersion"] == "409"
        assert table["msgPutTotalTodayNow"] == "5"
        assert table["commitLogMinOffset"] == "0"
        assert table["commitLogMaxOffset"] == str(h.store.get_max_phy_offset()) != "0"
        assert table["dispatchBehindBytes"] == "0"
        assert table["runningFlags"] == "OK"
        old = h.store.look_message_by_offset(0)
        assert old is not None and old.body == b"old0"
        assert table["earliestMessageTimeStamp"] == str(old.store_timestamp)
        assert table["pageCacheLockTimeMills"] == "0"
        for key in ("commitLogDiskRatio", "consumeQueueDiskRatio"):
            assert 0.0 < float(table[key]) <= 1.0, (key, table[key])
        assert abs(int(table["bootTimestamp"]) - t0) < 60_000
        # the store's totals count every put since it started (the preloaded two too)
        assert table["putMessageTimesTotal"] == "8" and table["putMessageFailedTimes"] == "0"
        assert int(table["putMessageSizeTotal"]) == h.store.get_max_phy_offset()
        for key in ("putTps", "getTransferedTps", "getFoundTps", "getMissTps", "getTotalTps"):
            assert len([float(x) for x in table[key].split(" ")]) == 3, key
        assert table["msgGetTotalTodayNow"] == "0"  # no pull went through a pull processor
        h.store.running_flags.get_and_make_disk_full()
        try:
            table = orjson.loads((await h.call(28)).body)["table"]
            assert table["runningFlags"] == "DISK_FULL"
        finally:
            h.store.running_flags.get_and_make_disk_ok()

    run(tmp_path, scenario, preload=preload)


def test_trigger_delete_files_both_codes(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        service = h.store.clean_commit_log_service
        for code in (RequestCode.TRIGGER_DELETE_FILES, RequestCode.DELETE_EXPIRED_COMMITLOG):
            service.manual_delete_file_several_times = 0
            r = await h.call(code)
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
            assert service.manual_delete_file_several_times == 20
        assert (RequestCode.TRIGGER_DELETE_FILES, RequestCode.DELETE_EXPIRED_COMMITLOG) == (27, 329)
        assert RequestCode.GET_BROKER_RUNTIME_INFO == 28

    run(tmp_path, scenario)


# -- subscription groups and offsets -----------------------------------------------------------


def test_subscription_groups_update_get_delete(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        body = orjson.dumps({"groupName": "GA", "consumeEnable": False, "retryMaxTimes": 3, "brokerId": 1,
                             "groupRetryPolicy": {"type": "CUSTOMIZED"}})  # fmt: skip
        version = h.groups.data_version.counter
        r = await h.call(200, body)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert h.groups.data_version.counter == version + 1
        ga = {"groupName": "GA", "consumeEnable": False, "consumeFromMinEnable": True, "consumeBroadcastEnable": True,
              "retryQueueNums": 1, "retryMaxTimes": 3, "brokerId": 1, "whichBrokerWhenConsumeSlowly": 1,
              "notifyConsumerIdsChangedEnable": True, "consumeMessageOrderly": False}  # fmt: skip
        on_disk = orjson.loads((tmp_path / "store" / "config" / "subscriptionGroup.json").read_bytes())
        assert on_disk["subscriptionGroupTable"]["GA"] == ga
        # 5.x's FIFO group flag (mqadmin 5's updateSubGroup -o true), kept
        r = await h.call(200, orjson.dumps({"groupName": "GF", "consumeMessageOrderly": True}))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        on_disk = orjson.loads((tmp_path / "store" / "config" / "subscriptionGroup.json").read_bytes())
        assert on_disk["subscriptionGroupTable"]["GF"]["consumeMessageOrderly"] is True
        r = await h.call(201)
        assert r.code == ResponseCode.SUCCESS
        got = orjson.loads(r.body)
        assert bytes(r.body) == h.groups.snapshot()  # the file's content
        assert set(got) == {"subscriptionGroupTable", "dataVersion"}
        assert got["subscriptionGroupTable"]["GA"] == ga and "TOOLS_CONSUMER" in got["subscriptionGroupTable"]
        # bad bodies and names
        for bad in (b"", b"not json", b"[1]", b'{"consumeEnable":true}', b'{"groupName":"a b"}',
                    orjson.dumps({"groupName": "g" * 256})):  # fmt: skip
            r = await h.call(200, bad)
            assert r.code == ResponseCode.SYSTEM_ERROR and r.remark, bad
        # numbers a Java int (or long) cannot hold, or that would make a retry topic past MAX_QUEUE_NUMS:
        # refused, and nothing kept (a kept one failed every later save of the file)
        for bad, remark in (
            (b'{"groupName":"G5","retryMaxTimes":99999999999999999999999}', "retryMaxTimes 1e+23"),
            (b'{"groupName":"G5","retryMaxTimes":2147483648}', "retryMaxTimes 2147483648"),
            (b'{"groupName":"G5","retryMaxTimes":true}', "retryMaxTimes True"),
            (b'{"groupName":"G5","retryQueueNums":16385}', "retryQueueNums 16385 is not an integer of"),
            (b'{"groupName":"G5","brokerId":-1}', "brokerId -1"),
            (b'{"groupName":"G5","whichBrokerWhenConsumeSlowly":"x"}', "whichBrokerWhenConsumeSlowly 'x'"),
        ):
            r = await h.call(200, bad)
            assert r.code == ResponseCode.SYSTEM_ERROR and remark in (r.remark or ""), (bad, r.remark)
        assert not h.groups.contains_subscription_group("G5")
        assert (
            await h.call(200, orjson.dumps({"groupName": "GC", "retryQueueNums": "3"}))
        ).code == ResponseCode.SUCCESS
        assert h.groups.find_subscription_group_config("GC").retry_queue_nums == 3  # digits, as fastjson reads them
        assert (await h.call(207, groupName="GC")).code == ResponseCode.SUCCESS
        assert set(h.groups.subscription_group_table) - {"GA"} == set(got["subscriptionGroupTable"]) - {"GA"}
        # delete, keeping then removing offsets
        for group in ("GA", "GB"):
            assert (await h.call(200, orjson.dumps({"groupName": group}))).code == ResponseCode.SUCCESS
            r = await h.call(15, consumerGroup=group, topic="T", queueId=0, commitOffset=4)
            assert r.code == ResponseCode.SUCCESS
        assert (await h.call(207, groupName="GA")).code == ResponseCode.SUCCESS
        assert not h.groups.contains_subscription_group("GA") and h.offsets.query_offset("GA", "T", 0) == 4
        assert (await h.call(207, groupName="GB", removeOffset="true")).code == ResponseCode.SUCCESS
        assert not h.groups.contains_subscription_group("GB") and h.offsets.query_offset("GB", "T", 0) == -1
        assert h.offsets.query_offset("GA", "T", 0) == 4
        assert (await h.call(207, groupName="NeverWas")).code == ResponseCode.SUCCESS
        assert (await h.call(207)).code == ResponseCode.SYSTEM_ERROR  # groupName is required

    run(tmp_path, scenario)


def test_get_all_consumer_offset_is_the_file_content(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        r = await h.call(43)
        assert (r.code, orjson.loads(r.body)) == (ResponseCode.SUCCESS, {"offsetTable": {}})
        for topic, group, queue_id, offset in (("T", "G", 0, 5), ("T", "G", 3, 9), ("%RETRY%G", "G", 0, 1)):
            r = await h.call(15, consumerGroup=group, topic=topic, queueId=queue_id, commitOffset=offset)
            assert r.code == ResponseCode.SUCCESS
        r = await h.call(43)
        assert r.code == ResponseCode.SUCCESS
        assert orjson.loads(r.body) == {"offsetTable": {"T@G": {"0": 5, "3": 9}, "%RETRY%G@G": {"0": 1}}}
        h.offsets.persist()
        assert bytes(r.body) == (tmp_path / "store" / "config" / "consumerOffset.json").read_bytes()

    run(tmp_path, scenario)


# -- broker config ------------------------------------------------------------------------------


def test_get_broker_config_properties_and_version(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        r = await h.call(26)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        text = bytes(r.body).decode()
        assert text.endswith("\n") and all("=" in line for line in text.splitlines())
        props = parse_properties(text)
        assert props["brokerName"] == BROKER and props["brokerClusterName"] == CLUSTER
        # BrokerConfig() listens on 0.0.0.0: the host's address, as RocketMQ (issue 31.4)
        assert props["brokerIP1"] == default_broker_ip1("0.0.0.0") and "brokerIp1" not in props
        assert props["autoCreateTopicEnable"] == "true" and props["listenPort"] == "10911"
        assert props["flushDiskType"] == "ASYNC_FLUSH" and props["brokerRole"] == "ASYNC_MASTER"
        assert props["mappedFileSizeCommitLog"] == str(64 * 1024)
        assert props["storePathRootDir"] == str(tmp_path / "store")
        assert props["destroyMapedFileIntervalForcibly"] == "120000"
        assert "namesrvAddr" not in props  # unset: left out, as Java's Properties cannot hold null
        assert not any(v in ("True", "False", "None") for v in props.values())
        version = r.ext_fields["version"]
        assert list(orjson.loads(version)) == ["counter", "timestamp"]
        assert orjson.loads(version)["counter"] == 0

    run(tmp_path, scenario)


def test_update_broker_config_applies_live_and_bumps_version(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        config_dir = tmp_path / "store" / "config"
        files_before = {p.name: p.read_bytes() for p in config_dir.iterdir()}
        body = b"# from mqadmin\nflushConsumerOffsetInterval=3000\nfileReservedTime = 24\ndeleteWhen=01;13\n"
        body += b"namesrvAddr=1.2.3.4:9876\n"
        r = await h.call(25, body)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert h.broker_config.flush_consumer_offset_interval == 3000
        assert h.broker_config.namesrv_addrs() == ["1.2.3.4:9876"]
        assert h.store_config.file_reserved_time == 24 and h.store_config.delete_when == "01;13"
        assert h.store.config.file_reserved_time == 24  # the store's own config object
        r = await h.call(26)
        props = parse_properties(bytes(r.body).decode())
        assert props["flushConsumerOffsetInterval"] == "3000" and props["namesrvAddr"] == "1.2.3.4:9876"
        assert orjson.loads(r.ext_fields["version"])["counter"] == 1
        # GET_BROKER_CONFIG's body back: refused for its black-listed keys, as RocketMQ 4.9.8's
        # (rocketmqHome, configBlackList, the store paths); every other key, start-only ones
        # included, is accepted back unchanged
        r2 = await h.call(25, r.body)
        assert r2.code == ResponseCode.NO_PERMISSION
        assert r2.remark == ("Can not update config in black list. (configBlackList, storePathRootDir, "
                             "readOnlyCommitLogStorePaths)")  # fmt: skip
        black = {k for k in props if k in h.proc.black_list}
        assert black == {"configBlackList", "storePathRootDir", "readOnlyCommitLogStorePaths"}
        body = "".join(f"{k}={v}\n" for k, v in props.items() if k not in black).encode()
        r2 = await h.call(25, body)
        assert (r2.code, r2.remark) == (ResponseCode.SUCCESS, None)
        assert parse_properties(bytes((await h.call(26)).body).decode()) == props
        # an empty body changes nothing
        assert (await h.call(25, b"")).code == ResponseCode.SUCCESS
        # nothing is persisted
        assert {p.name: p.read_bytes() for p in config_dir.iterdir()} == files_before

    run(tmp_path, scenario)


def test_update_broker_config_is_atomic(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        def snapshot() -> str:
            return repr((h.broker_config, h.store_config))

        before = snapshot()
        version = h.proc.config_version.counter
        cases = [
            (b"flushConsumerOffsetInterval=6000\nnoSuchKey=1\n", "noSuchKey"),
            (b"fileReservedTime=12\nflushConsumerOffsetInterval=seven\n", "flushConsumerOffsetInterval"),
            (b"flushConsumerOffsetInterval=6000\nautoCreateTopicEnable=maybe\n", "autoCreateTopicEnable"),
            (b"flushConsumerOffsetInterval=6000\nflushDiskType=SOMETIMES\n", "flushDiskType"),
            (b"flushConsumerOffsetInterval=6000\nlistenPort=70000\n", "listenPort"),
            # named under 4.9.8's spelling, whichever was sent (issue 31.12)
            (b"flushConsumerOffsetInterval=6000\nmapedFileSizeConsumeQueue=30\n", "mappedFileSizeConsumeQueue 30"),
            (b"flushConsumerOffsetInterval=6000\njust-a-key-without-value\n", "just-a-key-without-value"),
            # start-only keys: a new value would break the running broker
            (b"flushConsumerOffsetInterval=6000\nflushDiskType=SYNC_FLUSH\n", "flushDiskType"),
            (b"flushConsumerOffsetInterval=6000\nbrokerIP1=10.1.1.1\n", "brokerIP1"),
            (b"flushConsumerOffsetInterval=6000\nmessageDelayLevel=1s 2s\n", "messageDelayLevel"),
            (b"flushConsumerOffsetInterval=6000\nmapedFileSizeCommitLog=8192\n", "mappedFileSizeCommitLog"),
            (b"flushConsumerOffsetInterval=6000\nbrokerRole=SLAVE\n", "brokerRole"),
            (b"flushConsumerOffsetInterval=6000\ndefaultTopicQueueNums=4\n", "defaultTopicQueueNums"),
            (b"flushConsumerOffsetInterval=6000\npullMessageThreadPoolNums=2\n", "pullMessageThreadPoolNums"),
            (b"flushConsumerOffsetInterval=6000\nuseTLS=true\n", "useTLS"),  # read at start only
            (b"flushConsumerOffsetInterval=6000\ntlsMode=enforcing\n", "tlsMode"),
            # the HA port's admission and the slave's account are set up at start (issue 30.2, 30.5)
            (b"flushConsumerOffsetInterval=6000\nhaAllowUnauthenticated=true\n", "haAllowUnauthenticated"),
            (b"flushConsumerOffsetInterval=6000\nhaWhiteRemoteAddresses=*\n", "haWhiteRemoteAddresses"),
            (b"flushConsumerOffsetInterval=6000\nhaAccessKey=admin\n", "haAccessKey"),
            (b"flushConsumerOffsetInterval=6000\nhaSlaveSetAsideDivergedTail=true\n", "haSlaveSetAsideDivergedTail"),
            # DLedger's node is built at start (issue 32)
            (b"flushConsumerOffsetInterval=6000\nenableDLegerCommitLog=true\n", "enableDLegerCommitLog"),
            (b"flushConsumerOffsetInterval=6000\ndLegerPeers=n0-127.0.0.1:1\n", "dLegerPeers"),
            (b"flushConsumerOffsetInterval=6000\ndLedgerMaxWaitAckTimeMs=9000\n", "dLedgerMaxWaitAckTimeMs"),
            (b"\xff\xfe=1\n", "UTF-8"),
            # values that would break the running broker, or that Java could not parse
            (b"flushConsumerOffsetInterval=0\n", "flushConsumerOffsetInterval 0 must be 1 ms or more"),
            (b"brokerPermission=-8\n", "brokerPermission -8 is not 0 to 15"),
            (b"brokerPermission=8589934592\n", "brokerPermission: '8589934592'"),
            (b"maxMessageSize=99999999999999\n", "out of range for a Java int"),
            (b"maxMessageSize=0\n", "maxMessageSize 0 is not 1 to 16711680"),
            (b"maxMessageSize=16777216\n", "maxMessageSize 16777216 is not 1 to 16711680"),
            (b"shortPollingTimeMills=-1\n", "shortPollingTimeMills -1 is negative"),
            (b"syncFlushTimeout=99999999999999999999\n", "out of range for a Java long"),
        ]
        # a black-listed key (pumice.config_black_list): NO_PERMISSION
        black = [(b"flushConsumerOffsetInterval=6000\nstorePathRootDir=/elsewhere\n", "storePathRootDir"),
                 (b"flushConsumerOffsetInterval=6000\nrocketmq_home=/elsewhere\n", "rocketmq_home")]  # fmt: skip
        for body, key in [*cases, *black]:
            r = await h.call(25, body)
            assert r.code == (ResponseCode.NO_PERMISSION if (body, key) in black else ResponseCode.SYSTEM_ERROR), body
            assert key in (r.remark or ""), (body, r.remark)
            assert snapshot() == before, body
        assert h.proc.config_version.counter == version
        assert h.broker_config.flush_consumer_offset_interval == 5000 and h.store_config.file_reserved_time == 72

    run(tmp_path, scenario)


def test_unregistered_code_is_not_supported(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        r = await h.proc.process_request(None, RemotingCommand(code=RequestCode.GET_KV_CONFIG))  # type: ignore[arg-type]
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    run(tmp_path, scenario)
