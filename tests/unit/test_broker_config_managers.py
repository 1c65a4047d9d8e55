"""Broker config files: topics.json, consumerOffset.json, subscriptionGroup.json and their atomic writes."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import orjson
import pytest

from pumice.broker.config_file import ConfigFile, DataVersion, parse_json
from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.subscription_group_manager import SubscriptionGroupManager
from pumice.broker.topic_config_manager import (
    TopicConfig,
    TopicConfigManager,
    check_topic_name,
    is_not_allowed_send_topic,
)
from pumice.common.perm_name import PERM_INHERIT, PERM_READ, PERM_WRITE
from pumice.common.subscription_group import SubscriptionGroupConfig

RW = PERM_READ | PERM_WRITE


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def topics(tmp_path: Path, **kw) -> TopicConfigManager:
    return TopicConfigManager(str(tmp_path / "config" / "topics.json"), "broker-a", "DefaultCluster", **kw)


# -- ConfigFile ---------------------------------------------------------------------------------


class Box(ConfigFile):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.value: int | None = None

    def encode(self) -> dict:
        return {"value": self.value}

    def decode(self, data: dict) -> None:
        self.value = int(data["value"])


def test_persist_is_atomic_and_keeps_the_previous_version(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "box.json"
    box = Box(str(path))
    box.value = 1
    box.persist()
    assert read_json(path) == {"value": 1}
    assert not Path(f"{path}.bak").exists()
    box.value = 2
    box.persist()
    assert read_json(path) == {"value": 2}
    assert read_json(Path(f"{path}.bak")) == {"value": 1}
    assert sorted(os.listdir(path.parent)) == ["box.json", "box.json.bak"]  # no .tmp left


def test_load_falls_back_to_bak_when_main_is_corrupt_missing_or_empty(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    Path(f"{path}.bak").write_text('{"value": 7}')
    for main in ('{"value": ', "", None, '{"value": "x"}'):  # bad JSON, empty, missing, undecodable
        if main is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(main)
        box = Box(str(path))
        assert box.load() is True
        assert box.value == 7, main


def test_load_results(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    assert Box(str(path)).load() is True  # fresh start: nothing there
    path.write_text("not json")
    assert Box(str(path)).load() is False  # corrupt and no backup
    Path(f"{path}.bak").write_text("{also not json")
    assert Box(str(path)).load() is False
    path.write_text('{"value": 3}')
    box = Box(str(path))
    assert box.load() is True and box.value == 3


def test_persist_after_loading_the_backup_does_not_overwrite_it_with_the_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    path.write_text("garbage")
    Path(f"{path}.bak").write_text('{"value": 5}')
    box = Box(str(path))
    assert box.load()
    box.value = 6
    box.persist()
    assert read_json(path) == {"value": 6}
    assert read_json(Path(f"{path}.bak")) == {"value": 5}
    box.value = 8
    box.persist()
    assert read_json(Path(f"{path}.bak")) == {"value": 6}


def test_persist_error_is_logged_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    box = Box(str(blocker / "box.json"))  # parent is a file: makedirs fails
    box.value = 1
    box.persist()
    assert not (tmp_path / "file" / "box.json.tmp").exists()


def test_parse_json_accepts_fastjson_bare_numeric_keys() -> None:
    raw = b'{"offsetTable":{"T@g":{0:12,1 : 3},"a,{5:x}@b":{ 2:9}}}'
    assert parse_json(raw) == {"offsetTable": {"T@g": {"0": 12, "1": 3}, "a,{5:x}@b": {"2": 9}}}
    with pytest.raises(orjson.JSONDecodeError):
        parse_json(b'{"a": }')


def test_data_version() -> None:
    v = DataVersion(1000, 4)
    assert v.to_json() == {"timestamp": 1000, "counter": 4}
    v.next_version()
    assert v.counter == 5 and v.timestamp > 1000
    assert DataVersion.from_json(v.to_json()) == v


# -- TopicConfigManager -------------------------------------------------------------------------


def test_topic_config_json_keys() -> None:
    tc = TopicConfig("T", 4, 2, 6)
    assert tc.to_json() == {
        "topicName": "T",
        "readQueueNums": 4,
        "writeQueueNums": 2,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }
    assert TopicConfig.from_json(tc.to_json()) == tc
    # RocketMQ 5's extra keys are ignored; a missing topicName comes from the table key
    assert TopicConfig.from_json({"readQueueNums": 4, "writeQueueNums": 2, "attributes": {}}, "T") == tc
    # a topics.json (or a master's copy) with queue numbers no admin request may set is refused,
    # as the Java broker's parse of an int field past 2**31 fails, rather than looped over
    with pytest.raises(ValueError, match="topic T: writeQueueNums 2147483648 is out of range"):
        TopicConfig.from_json({"readQueueNums": 4, "writeQueueNums": 2**31}, "T")


def test_system_topics(tmp_path: Path) -> None:
    tcm = topics(tmp_path)
    expect = {
        "SELF_TEST_TOPIC": (1, 1, RW),
        "TBW102": (8, 8, RW | PERM_INHERIT),
        "BenchmarkTest": (1024, 1024, RW),
        "DefaultCluster": (16, 16, RW | PERM_INHERIT),
        "broker-a": (1, 1, RW | PERM_INHERIT),
        "OFFSET_MOVED_EVENT": (1, 1, RW),
        "SCHEDULE_TOPIC_XXXX": (18, 18, RW),
        "DefaultCluster_REPLY_TOPIC": (1, 1, RW),
        "RMQ_SYS_TRANS_HALF_TOPIC": (1, 1, RW),
    }
    got = {n: (tc.read_queue_nums, tc.write_queue_nums, tc.perm) for n, tc in tcm.topic_config_table.items()}
    assert got == expect
    assert "TBW102" not in topics(tmp_path, auto_create_topic_enable=False).topic_config_table
    assert topics(tmp_path, default_topic_queue_nums=4).select_topic_config("TBW102").write_queue_nums == 4
    off = topics(tmp_path, cluster_topic_enable=False, broker_topic_enable=False)
    assert off.select_topic_config("DefaultCluster").perm == PERM_INHERIT
    assert off.select_topic_config("broker-a").perm == PERM_INHERIT
    assert "RMQ_SYS_TRACE_TOPIC" in topics(tmp_path, trace_topic_enable=True).topic_config_table


def test_topics_json_shape_and_round_trip(tmp_path: Path) -> None:
    tcm = topics(tmp_path)
    tcm.update_topic_config(TopicConfig("TopicTest", 4, 4, 6, order=True))
    data = read_json(tmp_path / "config" / "topics.json")
    assert set(data) == {"topicConfigTable", "dataVersion"}
    assert set(data["dataVersion"]) == {"timestamp", "counter"}
    assert data["topicConfigTable"]["TopicTest"] == {
        "topicName": "TopicTest",
        "readQueueNums": 4,
        "writeQueueNums": 4,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": True,
    }
    assert data == tcm.topic_config_serialize_wrapper()
    again = topics(tmp_path)
    assert again.load()
    assert again.topic_config_table == tcm.topic_config_table
    assert again.data_version == tcm.data_version


def test_loaded_topics_override_system_defaults(tmp_path: Path) -> None:
    tcm = topics(tmp_path)
    tcm.update_topic_config(TopicConfig("TBW102", 2, 2, 7))
    again = topics(tmp_path)
    again.load()
    assert again.select_topic_config("TBW102").write_queue_nums == 2
    assert again.select_topic_config("SCHEDULE_TOPIC_XXXX") is not None


def test_topics_bak_fallback(tmp_path: Path) -> None:
    tcm = topics(tmp_path)
    tcm.update_topic_config(TopicConfig("A", 4, 4))
    tcm.update_topic_config(TopicConfig("B", 4, 4))
    main = tmp_path / "config" / "topics.json"
    assert "B" not in read_json(Path(f"{main}.bak"))["topicConfigTable"]
    main.write_bytes(main.read_bytes()[:40])  # torn
    again = topics(tmp_path)
    assert again.load()
    assert again.select_topic_config("A") is not None and again.select_topic_config("B") is None
    assert again.data_version.counter == 1


def test_data_version_bumps_on_every_change(tmp_path: Path) -> None:
    tcm = topics(tmp_path)
    assert tcm.data_version.counter == 0
    tcm.update_topic_config(TopicConfig("A", 4, 4))
    assert tcm.data_version.counter == 1
    tcm.create_topic_in_send_message_method("B", "TBW102", "1.2.3.4:5", 4, 0)
    assert tcm.data_version.counter == 2
    tcm.create_topic_in_send_message_method("B", "TBW102", "1.2.3.4:5", 4, 0)  # exists: no change
    tcm.create_topic_in_send_message_back_method("%RETRY%g", 1, RW, 0)
    assert tcm.data_version.counter == 3
    assert tcm.delete_topic_config("A") is True
    assert tcm.data_version.counter == 4
    assert tcm.delete_topic_config("A") is False
    assert tcm.data_version.counter == 4
    on_disk = read_json(tmp_path / "config" / "topics.json")
    assert on_disk["dataVersion"]["counter"] == 4
    assert "A" not in on_disk["topicConfigTable"] and "%RETRY%g" in on_disk["topicConfigTable"]


def test_auto_create_inherits_perm_and_takes_the_smaller_queue_number(tmp_path: Path) -> None:
    created: list[TopicConfig] = []
    tcm = topics(tmp_path, on_topic_created=created.append)
    tc = tcm.create_topic_in_send_message_method("NewTopic", "TBW102", "10.0.0.1:1234", 4, 0)
    assert tc == TopicConfig("NewTopic", 4, 4, RW)
    assert created == [tc]
    assert tcm.select_topic_config("NewTopic") is tc
    big = tcm.create_topic_in_send_message_method("Big", "TBW102", "10.0.0.1:1234", 64, 0)
    assert big is not None and (big.read_queue_nums, big.write_queue_nums) == (8, 8)
    # a template with another perm: the new topic keeps it minus INHERIT
    tcm.update_topic_config(TopicConfig("Tmpl", 3, 2, PERM_INHERIT | PERM_READ, "MULTI_TAG"))
    t2 = tcm.create_topic_in_send_message_method("FromTmpl", "Tmpl", "x", 4, 5)
    assert t2 == TopicConfig("FromTmpl", 2, 2, PERM_READ, "MULTI_TAG", 5)
    # existing topic: returned as it is, nothing created
    assert tcm.create_topic_in_send_message_method("NewTopic", "TBW102", "x", 1, 0) is tc
    assert created == [tc, big, t2]
    assert "NewTopic" in read_json(tmp_path / "config" / "topics.json")["topicConfigTable"]


def test_auto_create_refusals(tmp_path: Path) -> None:
    tcm = topics(tmp_path)
    tcm.update_topic_config(TopicConfig("NoInherit", 4, 4, RW))
    assert tcm.create_topic_in_send_message_method("X", "NoInherit", "x", 4, 0) is None
    assert tcm.create_topic_in_send_message_method("X", "Missing", "x", 4, 0) is None
    for bad in ("", "bad topic", "a" * 128, "ü", "TBW102x/"):
        assert tcm.create_topic_in_send_message_method(bad, "TBW102", "x", 4, 0) is None
    assert "X" not in tcm.topic_config_table and "bad topic" not in tcm.topic_config_table
    # auto-create off: TBW102 no longer lends its INHERIT, even if loaded from an older file
    off = topics(tmp_path, auto_create_topic_enable=False)
    assert off.create_topic_in_send_message_method("Y", "TBW102", "x", 4, 0) is None
    off.update_topic_config(TopicConfig("TBW102", 8, 8, RW | PERM_INHERIT))
    assert off.create_topic_in_send_message_method("Y", "TBW102", "x", 4, 0) is None
    assert off.select_topic_config("TBW102").perm == RW | PERM_INHERIT  # not changed in place
    # other inheriting templates still work with auto-create off
    assert off.create_topic_in_send_message_method("Z", "broker-a", "x", 4, 0) == TopicConfig("Z", 1, 1, RW)


def test_send_back_topic(tmp_path: Path) -> None:
    created: list[TopicConfig] = []
    tcm = topics(tmp_path, on_topic_created=created.append)
    tc = tcm.create_topic_in_send_message_back_method("%RETRY%G", 1, RW, 0)
    assert tc == TopicConfig("%RETRY%G", 1, 1, RW)
    assert tcm.create_topic_in_send_message_back_method("%RETRY%G", 4, PERM_WRITE, 0) is tc
    dlq = tcm.create_topic_in_send_message_back_method("%DLQ%G", 1, PERM_WRITE, 0)
    assert dlq.perm == PERM_WRITE
    assert created == [tc, dlq]


def test_concurrent_auto_create_makes_one_topic(tmp_path: Path) -> None:
    created: list[TopicConfig] = []
    tcm = topics(tmp_path, on_topic_created=created.append)
    results: list[TopicConfig | None] = []
    threads = [
        threading.Thread(target=lambda: results.append(tcm.create_topic_in_send_message_method("C", "TBW102", "x", 4)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(created) == 1 and all(r is created[0] for r in results)
    assert tcm.data_version.counter == 1


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        ("TopicTest", None),
        ("%RETRY%my-group_1|x", None),
        ("a" * 127, None),
        ("", "blank"),
        ("   ", "blank"),
        ("a" * 128, "longer"),
        ("has space", "illegal characters"),
        ("dot.ted", "illegal characters"),
        ("a@b", "illegal characters"),
        ("ümlaut", "illegal characters"),
        ("TBW102", None),  # 4.9's broker stores what is sent to it; the clients refuse it
    ],
)
def test_check_topic_name(topic: str, error: str | None) -> None:
    got = check_topic_name(topic)
    if error is None:
        assert got is None
    else:
        assert got is not None and error in got


def test_system_topics_clients_may_not_send_to() -> None:
    assert is_not_allowed_send_topic("SCHEDULE_TOPIC_XXXX") and not is_not_allowed_send_topic("TopicTest")


# -- ConsumerOffsetManager ----------------------------------------------------------------------


def offsets(tmp_path: Path) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(str(tmp_path / "config" / "consumerOffset.json"))


def test_offsets_commit_query_and_file_shape(tmp_path: Path) -> None:
    com = offsets(tmp_path)
    assert com.query_offset("G", "T", 0) == -1
    com.commit_offset("1.2.3.4:1", "G", "T", 0, 10)
    com.commit_offset("1.2.3.4:1", "G", "T", 3, 7)
    com.commit_offset("1.2.3.4:1", "G", "T", 1, -1)  # ignored
    com.commit_offset("1.2.3.4:1", "G", "T", 0, 8)  # smaller: accepted, as RocketMQ
    com.commit_offset("1.2.3.4:1", "G2", "%RETRY%G2", 0, 0)
    assert com.query_offset("G", "T", 0) == 8
    assert com.query_offset("G", "T", 1) == -1
    assert com.query_offsets("G", "T") == {0: 8, 3: 7}
    assert com.query_offsets("G", "nope") == {}
    com.persist()
    path = tmp_path / "config" / "consumerOffset.json"
    assert read_json(path) == {"offsetTable": {"T@G": {"0": 8, "3": 7}, "%RETRY%G2@G2": {"0": 0}}}
    again = offsets(tmp_path)
    assert again.load()
    assert again.offset_table == {"T@G": {0: 8, 3: 7}, "%RETRY%G2@G2": {0: 0}}


def test_offsets_which_and_clean(tmp_path: Path) -> None:
    com = offsets(tmp_path)
    for g, t in [("G1", "A"), ("G1", "B"), ("G2", "A"), ("G3", "C")]:
        com.commit_offset("h", g, t, 0, 1)
    assert com.which_topic_by_consumer("G1") == {"A", "B"}
    assert com.which_group_by_topic("A") == {"G1", "G2"}
    com.clean_offset_by_topic("A")
    assert com.which_group_by_topic("A") == set()
    assert com.query_offset("G1", "B", 0) == 1
    com.remove_offset("G3")
    assert set(com.offset_table) == {"B@G1"}


def test_offsets_persist_writes_only_after_a_change(tmp_path: Path) -> None:
    com = offsets(tmp_path)
    path = tmp_path / "config" / "consumerOffset.json"
    com.persist()
    assert not path.exists()
    com.commit_offset("h", "G", "T", 0, 5)
    com.persist()
    mtime = path.stat().st_mtime_ns
    com.commit_offset("h", "G", "T", 0, 5)  # same value: no change
    com.persist()
    assert path.stat().st_mtime_ns == mtime and not Path(f"{path}.bak").exists()
    com.commit_offset("h", "G", "T", 0, 6)
    com.persist()
    assert read_json(path)["offsetTable"]["T@G"] == {"0": 6}
    assert read_json(Path(f"{path}.bak"))["offsetTable"]["T@G"] == {"0": 5}


def test_offsets_load_rocketmq_fastjson_file_and_bak(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    path.parent.mkdir()
    path.write_text('{"offsetTable":{"TopicTest@please_rename_unique_group_name_4":{0:250,1:249,2:250,3:251}}}')
    com = offsets(tmp_path)
    assert com.load()
    assert com.query_offsets("please_rename_unique_group_name_4", "TopicTest") == {0: 250, 1: 249, 2: 250, 3: 251}
    Path(f"{path}.bak").write_text('{"offsetTable":{"T@G":{"0":3}}}')
    path.write_text('{"offsetTable":{"T@G":{"0":')
    again = offsets(tmp_path)
    assert again.load() and again.query_offset("G", "T", 0) == 3


def test_offsets_commit_while_persisting_from_another_thread(tmp_path: Path) -> None:
    com = offsets(tmp_path)
    stop = threading.Event()

    def persister() -> None:
        while not stop.is_set():
            com.persist()

    t = threading.Thread(target=persister)
    t.start()
    try:
        for i in range(3000):
            com.commit_offset("h", f"G{i % 7}", f"T{i % 11}", i % 4, i)
    finally:
        stop.set()
        t.join()
    com.persist()
    again = offsets(tmp_path)
    assert again.load()
    assert again.offset_table == com.offset_table


# -- SubscriptionGroupManager -------------------------------------------------------------------


def groups(tmp_path: Path, auto: bool = True) -> SubscriptionGroupManager:
    return SubscriptionGroupManager(str(tmp_path / "config" / "subscriptionGroup.json"), auto)


def test_subscription_group_json_keys() -> None:
    c = SubscriptionGroupConfig("G")
    assert c.to_json() == {
        "groupName": "G",
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": 16,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
        "consumeMessageOrderly": False,
    }
    assert SubscriptionGroupConfig.from_json(c.to_json()) == c


def test_subscription_group_consume_message_orderly(tmp_path: Path) -> None:
    """5.x's FIFO group flag: kept in subscriptionGroup.json as 5.3.3 writes it; 4.9 files lack it."""
    v49 = {"groupName": "Old", "retryMaxTimes": 3}
    assert SubscriptionGroupConfig.from_json(v49).consume_message_orderly is False
    fifo = SubscriptionGroupConfig.from_json({"groupName": "Fifo", "consumeMessageOrderly": "true"})
    assert fifo.consume_message_orderly is True
    sgm = groups(tmp_path)
    sgm.update_subscription_group_config(fifo)
    data = read_json(tmp_path / "config" / "subscriptionGroup.json")
    assert data["subscriptionGroupTable"]["Fifo"]["consumeMessageOrderly"] is True
    again = groups(tmp_path)
    assert again.load()
    assert again.find_subscription_group_config("Fifo") == fifo


def test_system_groups(tmp_path: Path) -> None:
    sgm = groups(tmp_path)
    assert set(sgm.subscription_group_table) == {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_RMQ_SYS_TRANS",
    }
    assert all(c.consume_broadcast_enable for c in sgm.subscription_group_table.values())


def test_subscription_group_auto_create_on(tmp_path: Path) -> None:
    sgm = groups(tmp_path)
    c = sgm.find_subscription_group_config("MyGroup")
    assert c == SubscriptionGroupConfig("MyGroup")
    assert sgm.find_subscription_group_config("MyGroup") is c
    assert sgm.data_version.counter == 1
    assert sgm.find_subscription_group_config("bad group") is None
    assert sgm.find_subscription_group_config("g" * 256) is None
    data = read_json(tmp_path / "config" / "subscriptionGroup.json")
    assert set(data) == {"subscriptionGroupTable", "dataVersion"}
    assert data["subscriptionGroupTable"]["MyGroup"] == c.to_json()
    assert data["dataVersion"]["counter"] == 1


def test_subscription_group_auto_create_off(tmp_path: Path) -> None:
    sgm = groups(tmp_path, auto=False)
    assert sgm.find_subscription_group_config("MyGroup") is None
    assert "MyGroup" not in sgm.subscription_group_table
    assert sgm.data_version.counter == 0
    assert not (tmp_path / "config" / "subscriptionGroup.json").exists()
    assert sgm.find_subscription_group_config("CID_RMQ_SYS_X") is not None  # system groups always
    assert sgm.find_subscription_group_config("TOOLS_CONSUMER") is not None


def test_subscription_group_update_delete_round_trip(tmp_path: Path) -> None:
    sgm = groups(tmp_path)
    sgm.update_subscription_group_config(SubscriptionGroupConfig("G", consume_enable=False, retry_max_times=3))
    assert sgm.delete_subscription_group_config("TOOLS_CONSUMER") is True
    assert sgm.delete_subscription_group_config("nope") is False
    assert sgm.data_version.counter == 2
    again = groups(tmp_path)
    assert again.load()
    g = again.find_subscription_group_config("G")
    assert g is not None and not g.consume_enable and g.retry_max_times == 3
    assert again.data_version == sgm.data_version
    # deleted system groups come back at construction (as in RocketMQ): the file only adds to them
    assert "TOOLS_CONSUMER" in again.subscription_group_table
    bak = read_json(tmp_path / "config" / "subscriptionGroup.json.bak")
    assert "TOOLS_CONSUMER" in bak["subscriptionGroupTable"] and bak["dataVersion"]["counter"] == 1
