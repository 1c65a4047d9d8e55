"""`pumice namesrv` as a real process on 127.0.0.1, driven over a real socket."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import register, running_namesrv


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[str]:
    # configStorePath: UPDATE_NAMESRV_CONFIG writes there (its default is under ~)
    extra = "scanNotActiveBrokerInterval=200\nbrokerChannelExpiredTime=1500\n"
    extra += f"configStorePath={tmp_path / 'ns.properties'}\n"
    with running_namesrv(tmp_path, extra) as addr:
        yield addr


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_register_route_cluster_and_topic_list(namesrv: str) -> None:
    async def main() -> None:
        c = RemotingClient()
        try:
            r = await c.invoke(namesrv, register("broker-a", "127.0.0.1:10911", {"TopicTest": 4, "TBW102": 8}))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert r.ext_fields == {"haServerAddr": "", "masterAddr": ""}
            r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "TopicTest"}))
            assert r.code == ResponseCode.SUCCESS
            route = orjson.loads(r.body)
            assert route["queueDatas"] == [
                {"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}
            ]
            assert route["brokerDatas"] == [
                {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": "127.0.0.1:10911"}}
            ]
            # a slave of broker-a learns its master and HA address
            r = await c.invoke(namesrv, register("broker-a", "127.0.0.1:20911", {"TopicTest": 4}, broker_id=1))
            assert r.ext_fields == {"haServerAddr": "127.0.0.1:10912", "masterAddr": "127.0.0.1:10911"}
            r = await c.invoke(namesrv, RemotingCommand(code=106))
            info = orjson.loads(r.body)
            assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
            assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {
                "0": "127.0.0.1:10911",
                "1": "127.0.0.1:20911",
            }
            r = await c.invoke(namesrv, RemotingCommand(code=206))
            assert orjson.loads(r.body) == {"topicList": ["TBW102", "TopicTest"]}
            r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "Nope"}))
            assert r.code == ResponseCode.TOPIC_NOT_EXIST and "Nope" in (r.remark or "")
            r = await c.invoke(namesrv, RemotingCommand(code=216, ext_fields={"topic": "TBW102"}))
            assert r.code == 0
            r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "TBW102"}))
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await c.invoke(
                namesrv,
                RemotingCommand(
                    code=104,
                    ext_fields={
                        "brokerName": "broker-a",
                        "brokerAddr": "127.0.0.1:10911",
                        "clusterName": "DefaultCluster",
                        "brokerId": 0,
                    },
                ),
            )
            assert r.code == 0
            r = await c.invoke(namesrv, RemotingCommand(code=106))
            assert orjson.loads(r.body)["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"1": "127.0.0.1:20911"}
            r = await c.invoke(namesrv, RemotingCommand(code=105))  # no topic field: no route, as 4.9.7 answers
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await c.invoke(namesrv, RemotingCommand(code=9999))
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await c.close()

    run(main())


def test_kv_config(namesrv: str) -> None:
    async def main() -> None:
        c = RemotingClient()
        try:
            kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicOrder", "value": "broker-a:4"}
            assert (await c.invoke(namesrv, RemotingCommand(code=100, ext_fields=kv))).code == 0
            r = await c.invoke(
                namesrv, RemotingCommand(code=101, ext_fields={"namespace": kv["namespace"], "key": kv["key"]})
            )
            assert r.code == 0 and r.ext_fields["value"] == "broker-a:4"
            r = await c.invoke(namesrv, RemotingCommand(code=219, ext_fields={"namespace": kv["namespace"]}))
            assert orjson.loads(r.body) == {"table": {"TopicOrder": "broker-a:4"}}
            # the order config rides on the route only with orderMessageEnable (false here), as 4.9
            await c.invoke(namesrv, register("broker-a", "127.0.0.1:10911", {"TopicOrder": 4}))
            r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "TopicOrder"}))
            assert r.code == 0 and "orderTopicConf" not in orjson.loads(r.body)
            update = RemotingCommand(code=318, body=b"orderMessageEnable=true\n")
            assert (await c.invoke(namesrv, update)).code == 0
            r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "TopicOrder"}))
            assert orjson.loads(r.body)["orderTopicConf"] == "broker-a:4"
            assert (await c.invoke(namesrv, RemotingCommand(code=102, ext_fields=kv))).code == 0
            r = await c.invoke(
                namesrv, RemotingCommand(code=101, ext_fields={"namespace": kv["namespace"], "key": kv["key"]})
            )
            assert r.code == ResponseCode.QUERY_NOT_FOUND
        finally:
            await c.close()

    run(main())


def test_brokers_drop_on_close_and_on_silence(namesrv: str) -> None:
    async def main() -> None:
        # broker-b's connection closes: it is dropped at once
        b = RemotingClient()
        await b.invoke(namesrv, register("broker-b", "127.0.0.1:30911", {"TopicB": 2}))
        await b.close()
        c = RemotingClient()
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "TopicB"}))
                if r.code == ResponseCode.TOPIC_NOT_EXIST:
                    break
                await asyncio.sleep(0.05)
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            # broker-c stays connected but silent: expired after brokerChannelExpiredTime (1.5 s here)
            await c.invoke(namesrv, register("broker-c", "127.0.0.1:40911", {"TopicC": 2}))
            r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "TopicC"}))
            assert r.code == 0
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "TopicC"}))
                if r.code == ResponseCode.TOPIC_NOT_EXIST:
                    break
                await asyncio.sleep(0.1)
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await c.close()

    run(main())


def test_garbage_does_not_hurt_the_name_server(namesrv: str) -> None:
    host, port = namesrv.split(":")
    for junk in (struct.pack(">i", 1 << 30), struct.pack(">ii", 9, 5) + b"{nope", os.urandom(64)):
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(junk)
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except (ConnectionResetError, TimeoutError):
                pass

    async def main() -> None:
        c = RemotingClient()
        try:
            r = await c.invoke(namesrv, RemotingCommand(code=206))
            assert r.code == 0
            # REGISTER_BROKER bodies RocketMQ could not deserialize: a remark, and nothing registered
            fields = {"brokerName": "fb", "brokerAddr": "127.0.0.1:1", "clusterName": "fc", "brokerId": "0"}
            table = {"T": {"topicName": "T", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}
            for wrapper, remark in [
                ("x", "topicConfigSerializeWrapper is not a JSON object"),
                ({"topicConfigTable": [1]}, "must be JSON objects"),
                ({"topicConfigTable": {"T": 5}}, "the topic config of 'T' is not a JSON object"),
                ({"topicConfigTable": {"T": table["T"] | {"readQueueNums": "x"}}}, "readQueueNums 'x'"),
                ({"topicConfigTable": {"T": table["T"] | {"perm": 2**31}}}, "perm 2147483648"),
            ]:
                body = orjson.dumps({"topicConfigSerializeWrapper": wrapper})
                r = await c.invoke(namesrv, RemotingCommand(code=103, ext_fields=fields, body=body))
                assert r.code == ResponseCode.SYSTEM_ERROR and remark in (r.remark or ""), (wrapper, r.remark)
            r = await c.invoke(namesrv, RemotingCommand(code=103, ext_fields=fields | {"brokerId": str(2**64)}))
            assert r.code == ResponseCode.SYSTEM_ERROR and "'brokerId' is out of the long range" in (r.remark or "")
            r = await c.invoke(namesrv, RemotingCommand(code=106))
            assert orjson.loads(r.body) == {"brokerAddrTable": {}, "clusterAddrTable": {}}
            # any Java int is read, as RocketMQ reads it: one odd topic does not cost the broker its route
            odd = {"Odd": {"topicName": "Odd", "readQueueNums": 1, "writeQueueNums": 1, "perm": -1, "topicSysFlag": -5}}
            body = orjson.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table | odd}})
            r = await c.invoke(namesrv, RemotingCommand(code=103, ext_fields=fields, body=body))
            assert r.code == ResponseCode.SUCCESS
            r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "T"}))
            assert orjson.loads(r.body)["queueDatas"][0]["readQueueNums"] == 4
            r = await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "Odd"}))
            assert orjson.loads(r.body)["queueDatas"][0]["perm"] == -1
        finally:
            await c.close()

    run(main())


def test_an_unreadable_kv_config_stops_the_start_and_is_left_as_it_was(tmp_path: Path) -> None:
    """It started with an empty KV table (ORDER_TOPIC_CONFIG and the rest gone), and the next
    two saves rotated the unreadable file away; upstream's name server exits."""
    kv = tmp_path / "kv.json"
    kv.write_bytes(b'{"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"')  # cut short
    conf = tmp_path / "ns.conf"
    conf.write_text(f"listenPort=0\nlistenHost=127.0.0.1\nkvConfigPath={kv}\n")
    p = subprocess.run([sys.executable, "-m", "pumice.cli", "namesrv", "-c", str(conf)], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert p.returncode != 0 and f"cannot read {kv} nor its .bak" in p.stderr and "Traceback" not in p.stderr
    assert kv.read_bytes().endswith(b'"broker-a:4"') and not (tmp_path / "kv.json.bak").exists()


def test_topics_by_cluster_wipe_write_perm_and_query_data_version(namesrv: str) -> None:
    """GET_TOPICS_BY_CLUSTER (mqadmin topicList -c), WIPE_WRITE_PERM_OF_BROKER (mqadmin
    wipeWritePerm) and QUERY_DATA_VERSION (a Java broker asks it before re-registering)."""

    async def main() -> None:
        c = RemotingClient()
        try:
            assert (await c.invoke(namesrv, register("broker-a", "127.0.0.1:10911", {"TA": 4, "TAB": 4}))).code == 0
            other = register("broker-b", "127.0.0.1:20911", {"TB": 2, "TAB": 2})
            other.ext_fields["clusterName"] = "OtherCluster"
            assert (await c.invoke(namesrv, other)).code == 0
            for cluster, topics in (("DefaultCluster", ["TA", "TAB"]), ("OtherCluster", ["TAB", "TB"]), ("None", [])):
                r = await c.invoke(namesrv, RemotingCommand(code=224, ext_fields={"cluster": cluster}))
                assert (r.code, orjson.loads(r.body)) == (ResponseCode.SUCCESS, {"topicList": topics})
            r = await c.invoke(namesrv, RemotingCommand(code=205, ext_fields={"brokerName": "broker-a"}))
            assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"wipeTopicCount": "2"})
            route = orjson.loads((await c.invoke(namesrv, RemotingCommand(code=105, ext_fields={"topic": "TAB"}))).body)
            assert {q["brokerName"]: q["perm"] for q in route["queueDatas"]} == {"broker-a": 4, "broker-b": 6}
            query = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster",
                     "brokerId": 0}  # fmt: skip
            registered = {"timestamp": 1700000000000, "counter": 1}
            for version, changed in ((registered, "false"), ({"timestamp": 1700000000000, "counter": 2}, "true")):
                r = await c.invoke(namesrv, RemotingCommand(code=322, ext_fields=query, body=orjson.dumps(version)))
                assert (r.code, r.ext_fields, orjson.loads(r.body)) == (ResponseCode.SUCCESS, {"changed": changed},
                                                                        registered)  # fmt: skip
            query["brokerAddr"] = "127.0.0.1:1"  # never registered
            r = await c.invoke(namesrv, RemotingCommand(code=322, ext_fields=query, body=orjson.dumps(registered)))
            assert (r.code, r.ext_fields, len(r.body)) == (ResponseCode.SUCCESS, {"changed": "true"}, 0)
            r = await c.invoke(namesrv, RemotingCommand(code=322, ext_fields=query, body=b"[1]"))
            assert r.code == ResponseCode.SYSTEM_ERROR and "DataVersion" in (r.remark or "")
        finally:
            await c.close()

    run(main())
