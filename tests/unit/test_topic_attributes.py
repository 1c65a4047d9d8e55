"""Topic attributes (pumice.common.topic_attributes) and their place in TopicConfig and
topics.json: 5.3.3's AttributeParser/AttributeUtil rules and messages, a 4.9 topics.json
(no attributes) still loading, and the attributes surviving a save and a load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pumice.broker.topic_config_manager import TopicConfig, TopicConfigManager
from pumice.common.topic_attributes import (
    AttributeRefused,
    alter_current_attributes,
    message_type_of,
    parse_to_map,
    topic_message_type,
)


def test_parse_to_map_keeps_the_signs() -> None:
    assert parse_to_map("+message.type=FIFO,-reserve.time") == {"+message.type": "FIFO", "-reserve.time": ""}
    assert parse_to_map("") == {} and parse_to_map(None) == {}
    with pytest.raises(AttributeRefused, match=r"^key duplication: \+a$"):
        parse_to_map("+a=1,+a=2")
    with pytest.raises(AttributeRefused, match=r"^delete attribute format is wrong: reserve\.time$"):
        parse_to_map("reserve.time")


@pytest.mark.parametrize(
    ("create", "current", "modification", "want"),
    [
        (True, {}, {"+message.type": "DELAY"}, {"message.type": "DELAY"}),
        (False, {"message.type": "FIFO"}, {}, {"message.type": "FIFO"}),
        (False, {"message.type": "FIFO", "reserve.time": "5"}, {"-reserve.time": ""}, {"message.type": "FIFO"}),
        (False, {"queue.type": "SimpleCQ"}, {"+reserve.time": "-1"}, {"queue.type": "SimpleCQ", "reserve.time": "-1"}),
    ],
)
def test_alter_current_attributes(create: bool, current: dict, modification: dict, want: dict) -> None:
    assert alter_current_attributes(create, current, modification) == want


@pytest.mark.parametrize(
    ("create", "modification", "remark"),
    [
        (True, {"-message.type": ""}, "only add attribute is supported while creating topic. key: message.type"),
        (False, {"+nope": "1"}, "unsupported key: nope"),
        (False, {"+cleanup.policy": "DELETE"}, "attempt to update an unchangeable attribute. key: cleanup.policy"),
        (True, {"+reserve.time": "-2"}, "value is not in range(-1, 9223372036854775807)"),
        (True, {"+reserve.time": "x"}, 'For input string: "x"'),
        (True, {"+queue.type": "BatchCQ"}, "queue.type=BatchCQ is not supported: Pumice has no batch ConsumeQueues"),
        (True, {"+cleanup.policy": "COMPACTION"}, "cleanup.policy=COMPACTION is not supported"),
        (False, {"-queue.type": ""}, "attempt to delete a nonexistent key: queue.type"),
        (True, {"+a+b": "1"}, "kv string format wrong."),
    ],
)
def test_alter_refusals_carry_5_3_3s_messages(create: bool, modification: dict, remark: str) -> None:
    with pytest.raises(AttributeRefused) as e:
        alter_current_attributes(create, {}, modification)
    assert str(e.value).startswith(remark)


def test_message_types() -> None:
    assert topic_message_type({}) == "NORMAL" and topic_message_type({"message.type": "FIFO"}) == "FIFO"
    assert message_type_of({"TRAN_MSG": "true", "DELAY": "3"}) == "TRANSACTION"
    assert message_type_of({"TIMER_DELIVER_MS": "1"}) == "DELAY"
    assert message_type_of({"__SHARDINGKEY": "g"}) == "FIFO"
    assert message_type_of({"KEYS": "k"}) == "NORMAL"


def manager(path: Path) -> TopicConfigManager:
    return TopicConfigManager(str(path), "broker-a", "DefaultCluster")


def test_a_4_9_topics_json_loads_and_attributes_survive_a_save(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_text(json.dumps({
        "topicConfigTable": {"Old": {"topicName": "Old", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                                     "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}},
        "dataVersion": {"timestamp": 1, "counter": 1},
    }))  # fmt: skip
    m = manager(path)
    assert m.load()
    old = m.select_topic_config("Old")
    assert old is not None and old.attributes == {}
    assert "attributes" not in old.to_json()  # written as 4.9 wrote it
    assert m.update_topic_config(TopicConfig("Fifo", 2, 2), {"+message.type": "FIFO"})
    with pytest.raises(AttributeRefused):  # refused: nothing changes
        m.update_topic_config(TopicConfig("Fifo", 8, 8), {"+cleanup.policy": "DELETE"})
    assert m.select_topic_config("Fifo") == TopicConfig("Fifo", 2, 2, attributes={"message.type": "FIFO"})
    saved = json.loads(path.read_text())["topicConfigTable"]["Fifo"]
    assert saved["attributes"] == {"message.type": "FIFO"}
    again = manager(path)
    assert again.load()
    assert again.select_topic_config("Fifo") == TopicConfig("Fifo", 2, 2, attributes={"message.type": "FIFO"})
    assert TopicConfig("X").to_json(with_attributes=True)["attributes"] == {}
