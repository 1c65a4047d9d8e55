"""The name server's codes after issue 15: GET_SYSTEM_TOPIC_LIST_FROM_NS (304), the unit topic
lists (311–313), UPDATE_NAMESRV_CONFIG (318), GET_NAMESRV_CONFIG (319), ADD_WRITE_PERM_OF_BROKER
(327) and DELETE_TOPIC_IN_NAMESRV with a cluster, as RocketMQ 4.9.8's DefaultRequestProcessor
answers them; a NamesrvController in this process, driven over a real loopback socket."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import orjson

from pumice.config import parse_properties
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.namesrv.namesrv_controller import NamesrvController
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


class Namesrv:
    def __init__(self, controller: NamesrvController, client: RemotingClient) -> None:
        self.controller = controller
        self.client = client
        self.addr = f"127.0.0.1:{controller.server.port}"

    async def call(self, code: int, body: bytes = b"", **fields: Any) -> RemotingCommand:
        return await self.client.invoke(self.addr, RemotingCommand(code=code, ext_fields=fields, body=body))

    async def register(self, cluster: str, name: str, addr: str, topics: dict[str, dict[str, int]],
                       broker_id: int = 0) -> None:  # fmt: skip
        table = {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0} | tc
                 for t, tc in topics.items()}  # fmt: skip
        body = {"topicConfigSerializeWrapper": {"topicConfigTable": table,
                                                "dataVersion": {"timestamp": 1700000000000, "counter": 1}}}  # fmt: skip
        r = await self.call(RequestCode.REGISTER_BROKER, orjson.dumps(body), brokerName=name, brokerAddr=addr,
                            clusterName=cluster, brokerId=broker_id, haServerAddr="")  # fmt: skip
        assert r.code == ResponseCode.SUCCESS, r.remark

    async def perms(self, topic: str) -> dict[str, int]:
        r = await self.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return {q["brokerName"]: q["perm"] for q in orjson.loads(r.body)["queueDatas"]}


@contextlib.asynccontextmanager
async def namesrv(tmp_path: Path, **config: Any) -> AsyncIterator[Namesrv]:
    cfg = NamesrvConfig(listen_port=0, listen_host="127.0.0.1", kv_config_path=str(tmp_path / "kvConfig.json"),
                        config_store_path=str(tmp_path / "namesrv.properties"), **config)  # fmt: skip
    controller = NamesrvController(cfg)
    await controller.start()
    client = RemotingClient()
    try:
        yield Namesrv(controller, client)
    finally:
        await client.close()
        await controller.shutdown()


def test_system_topic_list_is_the_cluster_and_broker_names_and_a_broker_to_ask(tmp_path: Path) -> None:
    """GET_SYSTEM_TOPIC_LIST_FROM_NS (304), for DefaultMQAdminExt.getSystemTopicList: the
    client then asks ``brokerAddr`` for its own system topics (305)."""

    async def main() -> None:
        async with namesrv(tmp_path) as ns:
            r = await ns.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
            assert (r.code, orjson.loads(r.body)) == (ResponseCode.SUCCESS, {"topicList": []})  # no brokerAddr
            await ns.register("ClusterB", "broker-b", "127.0.0.1:20911", {"TB": {}})
            await ns.register("ClusterA", "broker-a", "127.0.0.1:10921", {"TA": {}}, broker_id=1)
            await ns.register("ClusterA", "broker-a", "127.0.0.1:10911", {"TA": {}})
            r = await ns.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
            assert r.code == ResponseCode.SUCCESS
            assert orjson.loads(r.body) == {
                "topicList": ["ClusterA", "broker-a", "ClusterB", "broker-b"],
                "brokerAddr": "127.0.0.1:10911",  # the first broker's master
            }

    run(main())


def test_unit_topic_lists_follow_the_topic_sys_flag(tmp_path: Path) -> None:
    """GET_UNIT_TOPIC_LIST (311): flag 1; GET_HAS_UNIT_SUB_TOPIC_LIST (312): flag 2;
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313): flag 2 without flag 1 (TopicSysFlag)."""

    async def main() -> None:
        async with namesrv(tmp_path) as ns:
            for code in (311, 312, 313):
                r = await ns.call(code)
                assert (r.code, orjson.loads(r.body)) == (ResponseCode.SUCCESS, {"topicList": []})
            flags = {"Plain": 0, "Unit": 1, "UnitSub": 2, "UnitAndSub": 3}
            await ns.register("DefaultCluster", "broker-a", "127.0.0.1:10911",
                              {t: {"topicSysFlag": f} for t, f in flags.items()})  # fmt: skip
            want = {
                RequestCode.GET_UNIT_TOPIC_LIST: ["Unit", "UnitAndSub"],
                RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: ["UnitAndSub", "UnitSub"],
                RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: ["UnitSub"],
            }
            for code, topics in want.items():
                r = await ns.call(code)
                assert (r.code, orjson.loads(r.body)) == (ResponseCode.SUCCESS, {"topicList": topics}), code

    run(main())


def test_add_write_perm_of_broker_undoes_a_wipe(tmp_path: Path) -> None:
    """ADD_WRITE_PERM_OF_BROKER (327, mqadmin addWritePerm): every queue data of the broker gets
    perm 6, even a read-only topic's, as RocketMQ 4.9.8's RouteInfoManager sets it; the count
    of topics comes back in addTopicCount."""

    async def main() -> None:
        async with namesrv(tmp_path) as ns:
            await ns.register("DefaultCluster", "broker-a", "127.0.0.1:10911", {"TA": {}, "TRead": {"perm": 4}})
            await ns.register("DefaultCluster", "broker-b", "127.0.0.1:20911", {"TA": {}})
            r = await ns.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, brokerName="broker-a")
            assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"wipeTopicCount": "2"})
            assert await ns.perms("TA") == {"broker-a": 4, "broker-b": 6}
            r = await ns.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, brokerName="broker-a")
            assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"addTopicCount": "2"})
            assert await ns.perms("TA") == {"broker-a": 6, "broker-b": 6}
            assert await ns.perms("TRead") == {"broker-a": 6}
            r = await ns.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, brokerName="nobody")
            assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"addTopicCount": "0"})
            r = await ns.call(RequestCode.ADD_WRITE_PERM_OF_BROKER)
            assert r.code == ResponseCode.SYSTEM_ERROR and "brokerName" in (r.remark or "")

    run(main())


def test_order_topic_conf_rides_on_the_route_only_with_order_message_enable(tmp_path: Path) -> None:
    """GET_ROUTEINFO_BY_TOPIC (105): as RocketMQ 4.9.8's name server, the topic's
    ORDER_TOPIC_CONFIG entry (mqadmin updateOrderConf, updateTopic -o) is added as
    ``orderTopicConf`` only while orderMessageEnable is true (false by default; a Java producer
    given one builds the topic's queues from it); turning it on with UPDATE_NAMESRV_CONFIG
    (mqadmin updateNamesrvConfig) takes effect at once."""

    async def main() -> None:
        async with namesrv(tmp_path) as ns:
            await ns.register("DefaultCluster", "broker-a", "127.0.0.1:10911", {"TOrder": {}})
            r = await ns.call(RequestCode.PUT_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="TOrder",
                              value="broker-a:4")  # fmt: skip
            assert r.code == ResponseCode.SUCCESS
            r = await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TOrder")
            assert r.code == ResponseCode.SUCCESS and "orderTopicConf" not in orjson.loads(r.body)
            r = await ns.call(RequestCode.UPDATE_NAMESRV_CONFIG, b"orderMessageEnable=true\n")
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TOrder")
            assert orjson.loads(r.body)["orderTopicConf"] == "broker-a:4"
            r = await ns.call(RequestCode.UPDATE_NAMESRV_CONFIG, b"orderMessageEnable=false\n")
            r = await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TOrder")
            assert "orderTopicConf" not in orjson.loads(r.body)

    run(main())


def test_get_namesrv_config_is_the_config_as_properties(tmp_path: Path) -> None:
    """GET_NAMESRV_CONFIG (319, mqadmin getNamesrvConfig): the body is read with
    MixAll.string2Properties."""

    async def main() -> None:
        async with namesrv(tmp_path, order_message_enable=True) as ns:
            r = await ns.call(RequestCode.GET_NAMESRV_CONFIG)
            assert r.code == ResponseCode.SUCCESS
            props = parse_properties(bytes(r.body).decode())
            assert props["orderMessageEnable"] == "true" and props["listenPort"] == "0"
            assert props["kvConfigPath"] == str(tmp_path / "kvConfig.json")
            assert props["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
            assert props["serverChannelMaxIdleTimeSeconds"] == "120"

    run(main())


def test_update_namesrv_config(tmp_path: Path) -> None:
    """UPDATE_NAMESRV_CONFIG (318, mqadmin updateNamesrvConfig): the keys are applied all or
    none, live, and the whole config written to configStorePath; a black-listed key is
    NO_PERMISSION with RocketMQ's remark; a key that is not the name server's, a bad value, a
    feature Pumice lacks or a key read at start only is refused by name."""

    async def main() -> None:
        black = "configBlackList;configStorePath;kvConfigPath;productEnvName"
        async with namesrv(tmp_path, config_black_list=black, scan_not_active_broker_interval=100) as ns:
            cfg, stored = ns.controller.config, tmp_path / "namesrv.properties"
            update = b"orderMessageEnable=true\nbrokerChannelExpiredTime=5000\nserverWorkerThreads=16\n"
            r = await ns.call(RequestCode.UPDATE_NAMESRV_CONFIG, update)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert cfg.order_message_enable is True and cfg.broker_channel_expired_time == 5000
            assert ns.controller.route_info_manager.expired_ms == 5000  # in effect at once
            props = parse_properties(bytes((await ns.call(RequestCode.GET_NAMESRV_CONFIG)).body).decode())
            assert (props["orderMessageEnable"], props["brokerChannelExpiredTime"]) == ("true", "5000")
            written = parse_properties(stored.read_text())
            assert (written["orderMessageEnable"], written["brokerChannelExpiredTime"]) == ("true", "5000")
            for body, code, remark in [
                (b"kvConfigPath=/tmp/kv.json", ResponseCode.NO_PERMISSION, "Can not update config in black list."),
                (b"rocketmqHome=/opt", ResponseCode.NO_PERMISSION, "(rocketmqHome)"),
                (b"configBlackList=", ResponseCode.NO_PERMISSION, "(configBlackList)"),
                (b"productEnvName=x", ResponseCode.NO_PERMISSION, "(productEnvName)"),  # configBlackList's own
                (b"brokerName=broker-a", ResponseCode.SYSTEM_ERROR, "unknown key 'brokerName'"),
                (b"orderMessageEnable=false\nscanNotActiveBrokerInterval=soon", ResponseCode.SYSTEM_ERROR,
                 "bad value for scanNotActiveBrokerInterval: 'soon'"),
                (b"orderMessageEnable=false\nbrokerChannelExpiredTime=0", ResponseCode.SYSTEM_ERROR,
                 "brokerChannelExpiredTime 0 must be 1 ms or more"),
                (b"clusterTest=true", ResponseCode.SYSTEM_ERROR, "clusterTest=true is not supported"),
                (b"listenPort=9877", ResponseCode.SYSTEM_ERROR, "listenPort is read at start only"),
            ]:  # fmt: skip
                r = await ns.call(RequestCode.UPDATE_NAMESRV_CONFIG, body)
                assert r.code == code and remark in (r.remark or ""), (body, r.code, r.remark)
            # nothing of a refused update was applied
            assert cfg.order_message_enable is True and cfg.broker_channel_expired_time == 5000
            assert cfg.scan_not_active_broker_interval == 100 and cfg.listen_port == 0
            assert (await ns.call(RequestCode.UPDATE_NAMESRV_CONFIG)).code == ResponseCode.SUCCESS  # no body
            # the new expiry is what the running scan goes by: a broker silent for 300 ms goes
            r = await ns.call(RequestCode.UPDATE_NAMESRV_CONFIG, b"brokerChannelExpiredTime=300\n")
            assert r.code == ResponseCode.SUCCESS, r.remark
            await ns.register("DefaultCluster", "broker-a", "127.0.0.1:10911", {"TA": {}})
            for _ in range(100):
                r = await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TA")
                if r.code == ResponseCode.TOPIC_NOT_EXIST:
                    break
                await asyncio.sleep(0.05)
            assert r.code == ResponseCode.TOPIC_NOT_EXIST

    run(main())


def test_delete_topic_in_namesrv_with_a_cluster_keeps_the_other_clusters(tmp_path: Path) -> None:
    """mqadmin deleteTopic -c sends clusterName (DeleteTopicFromNamesrvRequestHeader): only
    that cluster's brokers lose the topic; without it the topic goes everywhere."""

    async def main() -> None:
        async with namesrv(tmp_path) as ns:
            await ns.register("ClusterA", "broker-a", "127.0.0.1:10911", {"T": {}, "U": {}})
            await ns.register("ClusterB", "broker-b", "127.0.0.1:20911", {"T": {}, "U": {}})
            r = await ns.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="T", clusterName="ClusterA")
            assert r.code == ResponseCode.SUCCESS
            assert await ns.perms("T") == {"broker-b": 6}
            await ns.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="T", clusterName="NoSuchCluster")
            assert await ns.perms("T") == {"broker-b": 6}
            await ns.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="T", clusterName="ClusterB")
            r = await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T")
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            await ns.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="U")
            r = await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="U")
            assert r.code == ResponseCode.TOPIC_NOT_EXIST

    run(main())
