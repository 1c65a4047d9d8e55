"""AdminBrokerProcessor answers that mqadmin 4.9.8 read differently from a Java broker's until
tests/interop/test_mqadmin.py found them (the harness of tests/helpers/broker.py: a real
store, real managers, a real loopback connection)."""

from __future__ import annotations

from pathlib import Path

import orjson

from pumice.broker.admin_broker_processor import ACL_CODES, ACL_OFF_REMARK
from pumice.common import fastjson
from pumice.config import parse_properties
from pumice.remoting.remoting_server import ProcessorPool
from pumice.remoting.response_code import ResponseCode
from tests.helpers.broker import Harness, create_topic, mq, run
from tests.helpers.waiting import wait_dispatched


def test_delete_topic_destroys_its_consume_queues(tmp_path: Path) -> None:
    """4.9.8's deleteTopic runs cleanUnusedTopic over the remaining topics: the deleted topic's
    ConsumeQueues go at once, so `mqadmin deleteTopic` then `updateTopic` gives a topic whose
    queues start at 0 (topicStatus shows 0/0, printMsg shows nothing), as on a Java broker.
    Before, the old queues stayed and the re-created topic showed the deleted messages."""

    async def scenario(h: Harness) -> None:
        for topic in ("Gone", "Kept"):
            assert (await h.call(17, **create_topic(topic))).code == ResponseCode.SUCCESS
            for i in range(3):
                h.put(topic, b"m%d" % i, queue_id=i % 2)
        wait_dispatched(h.store)
        queue_dir = tmp_path / "store" / "consumequeue" / "Gone"
        assert queue_dir.is_dir() and h.store.get_max_offset_in_queue("Gone", 0) == 2
        r = await h.call(215, topic="Gone")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert not queue_dir.exists()
        assert h.store.get_max_offset_in_queue("Gone", 0) == 0 and h.store.get_max_offset_in_queue("Gone", 1) == 0
        assert h.store.get_max_offset_in_queue("Kept", 0) == 2 and h.store.get_max_offset_in_queue("Kept", 1) == 1
        # created again: empty queues, and the next message is at offset 0
        assert (await h.call(17, **create_topic("Gone"))).code == ResponseCode.SUCCESS
        stats = fastjson.loads((await h.call(202, topic="Gone")).body)["offsetTable"]
        assert stats[mq("Gone", 0)]["maxOffset"] == 0 and stats[mq("Gone", 1)]["maxOffset"] == 0
        h.put("Gone", b"again", queue_id=0)
        wait_dispatched(h.store)
        assert h.store.get_max_offset_in_queue("Gone", 0) == 1

    run(tmp_path, scenario)


def test_broker_config_lists_the_java_keys_pumice_takes_with_one_value(tmp_path: Path) -> None:
    """mqadmin exportConfigs copies filterServerNums, useTLS and other keys from getBrokerConfig
    into a java.util.Properties, which throws on a missing one (NullPointerException): a Java
    broker lists every config field. The body still goes back through UPDATE_BROKER_CONFIG once
    its black-listed keys are left out (with them, a Java broker refuses it too: its body holds
    rocketmqHome and configBlackList)."""

    async def scenario(h: Harness) -> None:
        r = await h.call(26)
        props = parse_properties(bytes(r.body).decode())
        assert props["filterServerNums"] == "0" and props["useTLS"] == "false"
        assert props["aclEnable"] == "false" and props["enableDLegerCommitLog"] == "false"
        assert props["brokerName"] == "broker-t" and props["traceTopicEnable"] == "false"
        assert list(props).count("useTLS") == 1
        back = await h.call(25, bytes(r.body))
        assert back.code == ResponseCode.NO_PERMISSION
        assert (back.remark or "").startswith("Can not update config in black list. (configBlackList, ")
        body = "".join(f"{k}={v}\n" for k, v in props.items() if k not in h.proc.black_list)
        back = await h.call(25, body.encode())
        assert (back.code, back.remark) == (ResponseCode.SUCCESS, None)

    run(tmp_path, scenario)


def test_runtime_info_head_wait_time_of_idle_pools(tmp_path: Path) -> None:
    """clusterList prints ``InTPS(queue size, head wait ms)``: without
    sendThreadPoolQueueHeadWaitTimeMills it printed ``(0,nullms)`` where a Java broker prints
    ``(0,0ms)``. 0 while nothing waits; left out while requests wait (not recorded)."""

    async def scenario(h: Harness) -> None:
        pools = {name: ProcessorPool(name, 2, 100) for name in ("send", "pull", "query")}
        h.proc.thread_pools = {name: (pool, 2) for name, pool in pools.items()}
        table = orjson.loads((await h.call(28)).body)["table"]
        for name in pools:
            assert table[f"{name}ThreadPoolQueueHeadWaitTimeMills"] == "0", name
            assert table[f"{name}ThreadPoolQueueSize"] == "0", name
        pools["pull"].pending = 5  # 2 running, 3 waiting
        table = orjson.loads((await h.call(28)).body)["table"]
        assert table["pullThreadPoolQueueSize"] == "3" and "pullThreadPoolQueueHeadWaitTimeMills" not in table
        assert table["sendThreadPoolQueueHeadWaitTimeMills"] == "0"

    run(tmp_path, scenario)


def test_acl_codes_on_a_broker_without_acl_say_it_is_off(tmp_path: Path) -> None:
    """mqadmin updateAclConfig, deleteAclConfig, clusterAclConfigVersion and
    updateGlobalWhiteAddr print the broker's remark (4.9: a NullPointerException, or no answer)."""

    async def scenario(h: Harness) -> None:
        failed = (209, 210, ResponseCode.SYSTEM_ERROR, 211)
        for code, expected in zip(ACL_CODES, failed, strict=True):
            r = await h.call(code, accessKey="ak", globalWhiteAddrs="10.*")
            assert (r.code, r.remark) == (expected, ACL_OFF_REMARK), code

    run(tmp_path, scenario)
