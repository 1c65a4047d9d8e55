"""Config files that could not be saved (issue 30, point 4): saved again with back-off, logged
once per cause, and nothing answered as done (a send, a topic update, a KV put) before the
change is on disk.

A save is made to fail for real, without root: the config directory's place is taken by a
regular file (``makedirs`` then fails with EEXIST); removing it lets the next save land. The
full-disk version, on a loop-mounted ext4 image, is tests/faults/test_full_disk_configs.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import orjson

from pumice.broker.send_message_processor import SendMessageProcessor
from pumice.broker.topic_config_manager import TopicConfig, TopicConfigManager
from pumice.common.save_retry import RETRY_MAX_S, RETRY_MIN_S, SaveRetry
from pumice.namesrv.kv_config_manager import KVConfigManager
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import ProcessorPool, RemotingServer
from pumice.remoting.response_code import ResponseCode
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from tests.helpers.broker import Harness, create_topic, loopback_controller, run, serving
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def block(directory: Path) -> None:
    """Make every save into ``directory`` fail: a regular file takes its place."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    directory.write_text("in the way")


def unblock(directory: Path) -> None:
    directory.unlink()


def with_clock(owner: TopicConfigManager | KVConfigManager, clock: Clock) -> None:
    owner.save_state = SaveRetry(owner.path, clock)


def test_save_retry_backs_off_logs_once_per_cause_and_resets_when_saved(caplog) -> None:
    clock = Clock()
    s = SaveRetry("/x/topics.json", clock)
    assert not s.unsaved and not s.due()
    with caplog.at_level(logging.DEBUG, logger="pumice.common.save_retry"):
        delays = []
        for _ in range(5):
            s.failed(OSError(28, "No space left on device"))
            assert not s.due()
            start = clock.now
            while not s.due():
                clock.now += 0.25
            delays.append(clock.now - start)
        s.failed(OSError(5, "Input/output error"))
        s.saved()
    assert delays == [RETRY_MIN_S, 2 * RETRY_MIN_S, RETRY_MAX_S, RETRY_MAX_S, RETRY_MAX_S]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and "No space left" in errors[0] and "Input/output error" in errors[1]
    warns = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warns == ["persisted /x/topics.json again after 6 failed saves (Input/output error)"]
    assert not s.unsaved and s.failures == 0 and not s.due()
    s.failed(OSError(28, "No space left on device"))  # a new episode starts at the shortest delay
    clock.now += RETRY_MIN_S
    assert s.due()


def test_a_topic_created_while_topics_json_cannot_be_saved_is_unsaved_until_the_retry_lands(tmp_path) -> None:
    cfg = tmp_path / "config"
    clock = Clock()
    m = TopicConfigManager(str(cfg / "topics.json"), "broker-a", "DefaultCluster")
    with_clock(m, clock)
    m.update_topic_config(TopicConfig("Saved", 4, 4))
    assert m.unsaved_topic_cause("Saved") is None
    cfg.rename(tmp_path / "config-away")
    block(cfg)
    created = m.create_topic_in_send_message_method("New", "TBW102", "127.0.0.1:1", 4)
    assert created is not None and m.select_topic_config("New") is created  # kept, to be saved again
    assert m.unsaved_topic_cause("New") == "File exists"
    assert m.unsaved_topic_cause("Saved") is None  # what was on disk before stays durable
    assert m.update_topic_config(TopicConfig("Admin", 2, 2)) is False
    assert m.unsaved_topic_cause("Admin") == "File exists"
    assert m.retry_persist() is None  # not due yet: two failures, the next try 2 s after the last
    clock.now += 2 * RETRY_MIN_S
    assert m.retry_persist() is False  # still blocked: fails again, backs off to 4 s
    clock.now += 2 * RETRY_MIN_S
    assert m.retry_persist() is None
    unblock(cfg)
    clock.now += 2 * RETRY_MIN_S
    assert m.retry_persist() is True
    assert m.unsaved_topic_cause("New") is None and m.unsaved_topic_cause("Admin") is None
    on_disk = json.loads((cfg / "topics.json").read_text())["topicConfigTable"]
    assert {"New", "Admin"} <= set(on_disk) and "Saved" in on_disk
    assert m.retry_persist() is None  # nothing left to save


def test_consumer_offsets_that_failed_to_save_are_saved_by_the_retry(tmp_path) -> None:
    from pumice.broker.consumer_offset_manager import ConsumerOffsetManager

    cfg = tmp_path / "config"
    block(cfg)
    clock = Clock()
    offsets = ConsumerOffsetManager(str(cfg / "consumerOffset.json"))
    offsets.save_state = SaveRetry(offsets.path, clock)
    offsets.commit_offset("127.0.0.1", "G", "T", 0, 42)
    assert offsets.persist() is False and offsets.unsaved_cause == "File exists"
    unblock(cfg)
    clock.now += RETRY_MIN_S
    assert offsets.retry_persist() is True and offsets.unsaved_cause is None
    assert json.loads((cfg / "consumerOffset.json").read_text())["offsetTable"] == {"T@G": {"0": 42}}


def test_a_send_into_an_unsaved_topic_is_refused_and_stores_nothing_until_the_save_lands(tmp_path) -> None:
    store = DefaultMessageStore(small_config(str(tmp_path / "s")))
    assert store.load()
    store.start()
    cfg = tmp_path / "config"
    block(cfg)
    clock = Clock()
    topics = TopicConfigManager(str(cfg / "topics.json"), "broker-a", "DefaultCluster")
    with_clock(topics, clock)

    def send(key: str) -> RemotingCommand:
        return RemotingCommand(code=310, body=b"body-" + key.encode(), ext_fields={
            "a": "PG", "b": "NewTopic", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0,
            "i": f"KEYS\x01{key}\x02WAIT\x01true\x02"})  # fmt: skip

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)
        proc = SendMessageProcessor(store, topics, store_host="127.0.0.1:10911", cluster_name="DefaultCluster")
        server.register_processor(310, proc, ProcessorPool("send", 2, 100))
        await server.start()
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            for key in ("k1", "k2"):  # the creating send, then one into the created, unsaved topic
                r = await client.invoke(addr, send(key))
                assert r.code == ResponseCode.SYSTEM_ERROR, (r.code, r.remark)
                assert r.remark == (
                    "the config of topic[NewTopic] could not be saved (File exists): no message is "
                    "stored in it until it is (retried every few seconds), try again later"
                )
            assert store.get_max_phy_offset() == 0
            unblock(cfg)
            r = await client.invoke(addr, send("k3"))  # back-off not passed: still refused
            assert r.code == ResponseCode.SYSTEM_ERROR
            clock.now += RETRY_MAX_S
            r = await client.invoke(addr, send("k4"))  # the send saves the file first, then stores
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert "NewTopic" in json.loads((cfg / "topics.json").read_text())["topicConfigTable"]
            assert store.look_message_by_msg_id(r.ext_fields["msgId"]).body == b"body-k4"
        finally:
            await client.close()
            await server.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        store.shutdown()


def test_a_kv_put_that_cannot_be_saved_returns_false_and_the_retry_saves_it(tmp_path) -> None:
    d = tmp_path / "namesrv"
    block(d)
    clock = Clock()
    kv = KVConfigManager(str(d / "kvConfig.json"))
    with_clock(kv, clock)
    assert kv.put("NS", "k", "v") is False
    assert kv.get("NS", "k") == "v" and kv.unsaved_cause == "File exists"
    assert kv.delete("NS", "missing") is False  # nothing to delete, but the file is still unsaved
    assert kv.retry_persist() is None
    unblock(d)
    clock.now += RETRY_MIN_S
    assert kv.retry_persist() is True and kv.unsaved_cause is None
    assert json.loads((d / "kvConfig.json").read_text()) == {"configTable": {"NS": {"k": "v"}}}
    assert kv.delete("NS", "missing") is True


def test_admin_updates_are_not_answered_success_until_their_file_is_saved(tmp_path) -> None:
    blocked = tmp_path / "blocked"
    block(blocked)

    async def scenario(h: Harness) -> None:
        h.topics.path = str(blocked / "topics.json")
        h.groups.path = str(blocked / "subscriptionGroup.json")
        r = await h.call(17, **create_topic("AdminTopic"))
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == (
            "topic[AdminTopic] is updated but its config could not be saved (File exists): it is saved again every "
            "few seconds, and a crash before then undoes it"
        )
        assert h.topics.select_topic_config("AdminTopic") is not None  # applied, to be saved again
        r = await h.call(200, orjson.dumps({"groupName": "AdminGroup"}))
        assert r.code == ResponseCode.SYSTEM_ERROR and "subscriptionGroup.json could not be saved (File exists)" in (
            r.remark or ""
        )
        r = await h.call(207, groupName="AdminGroup")
        assert r.code == ResponseCode.SYSTEM_ERROR and "is deleted but" in (r.remark or "")
        unblock(blocked)
        assert h.topics.persist() and h.groups.persist()
        r = await h.call(215, topic="AdminTopic")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        r = await h.call(17, **create_topic("AdminTopic2"))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        r = await h.call(200, orjson.dumps({"groupName": "AdminGroup"}))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)

    run(tmp_path, scenario)


def test_a_topic_with_consume_queues_but_no_config_is_named_in_a_warning_at_start(tmp_path, caplog) -> None:
    store = DefaultMessageStore(small_config(str(tmp_path)))
    assert store.load()
    store.start()
    for topic in ("LostTopic", "%RETRY%SomeGroup"):
        assert store.put_message(MessageExtBrokerInner(topic=topic, body=b"x", queue_id=1)).is_ok()
    wait_dispatched(store)
    store.shutdown()
    controller = loopback_controller(tmp_path)

    async def main() -> None:
        async with serving(controller):
            pass

    with caplog.at_level(logging.WARNING, logger="pumice.broker.broker_controller"):
        asyncio.run(asyncio.wait_for(main(), 30))
    warned = [r.getMessage() for r in caplog.records if "but no config" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("1 topics have ConsumeQueues in the store but no config in ")
    assert warned[0].endswith(": LostTopic")  # a retry topic comes back by itself: not named
