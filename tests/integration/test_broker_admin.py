"""Admin request codes against real `pumice namesrv` and `pumice broker` processes."""

from __future__ import annotations

import asyncio
import time

import orjson

from pumice.common import fastjson
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, pull, run, send


def mq(topic: str, queue_id: int) -> str:
    return f'{{"brokerName":"broker-t","queueId":{queue_id},"topic":"{topic}"}}'


def test_created_topic_is_routable_at_once_and_stats_follow_sends_and_commits(cluster: Cluster) -> None:
    async def main() -> None:
        c = RemotingClient()
        try:
            create = RemotingCommand(code=17, ext_fields={
                "topic": "AdminTopic", "defaultTopic": "TBW102", "readQueueNums": "6", "writeQueueNums": "6",
                "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})  # fmt: skip
            t0 = time.monotonic()
            r = await c.invoke(cluster.br, create)
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
            # on the name server within a few seconds, not at the next 30 s registration
            route = None
            for _ in range(50):
                route = await c.invoke(cluster.ns, RemotingCommand(code=105, ext_fields={"topic": "AdminTopic"}))
                if route.code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.1)
            assert route is not None and route.code == ResponseCode.SUCCESS, route
            assert time.monotonic() - t0 < 10
            data = orjson.loads(route.body)
            assert data["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.br}
            (queue_data,) = data["queueDatas"]
            assert (queue_data["brokerName"], queue_data["readQueueNums"], queue_data["writeQueueNums"]) == (
                "broker-t", 6, 6,
            )  # fmt: skip

            for i in range(3):
                r = await c.invoke(cluster.br, send("AdminTopic", b"m%d" % i, f"k{i}", queue_id=2))
                assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == str(i)
            # dispatch is asynchronous: wait (bounded) until the stats show all three
            stats: dict = {}
            for _ in range(50):
                r = await c.invoke(cluster.br, RemotingCommand(code=202, ext_fields={"topic": "AdminTopic"}))
                assert r.code == ResponseCode.SUCCESS
                stats = fastjson.loads(r.body)["offsetTable"]
                if stats[mq("AdminTopic", 2)]["maxOffset"] == 3:
                    break
                await asyncio.sleep(0.1)
            assert sorted(stats) == sorted(mq("AdminTopic", q) for q in range(6))
            q2 = stats[mq("AdminTopic", 2)]
            assert q2["minOffset"] == 0 and q2["maxOffset"] == 3 and q2["lastUpdateTimestamp"] > 0
            for q in (0, 1, 3, 4, 5):
                assert stats[mq("AdminTopic", q)] == {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0}

            commit = RemotingCommand(code=15, ext_fields={"consumerGroup": "AdminCG", "topic": "AdminTopic",
                                                          "queueId": 2, "commitOffset": 2})  # fmt: skip
            assert (await c.invoke(cluster.br, commit)).code == ResponseCode.SUCCESS
            r = await c.invoke(cluster.br, RemotingCommand(code=208, ext_fields={"consumerGroup": "AdminCG"}))
            assert r.code == ResponseCode.SUCCESS
            consume = fastjson.loads(r.body)
            assert consume["consumeTps"] == 0.0
            assert sorted(consume["offsetTable"]) == sorted(mq("AdminTopic", q) for q in range(6))
            w2 = consume["offsetTable"][mq("AdminTopic", 2)]
            assert (w2["brokerOffset"], w2["consumerOffset"]) == (3, 2)
            assert 0 < w2["lastTimestamp"] <= q2["lastUpdateTimestamp"]
            assert consume["offsetTable"][mq("AdminTopic", 0)] == {
                "brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0,
            }  # fmt: skip

            r = await c.invoke(cluster.br, RemotingCommand(code=28))
            assert r.code == ResponseCode.SUCCESS
            table = fastjson.loads(r.body)["table"]
            assert table["msgPutTotalTodayNow"] == "3" and table["runningFlags"] == "OK"
        finally:
            await c.close()

    run(main())


def test_put_and_consume_rates_follow_real_traffic(cluster: Cluster) -> None:
    """The rates mqadmin shows: putTps / getTransferedTps in the runtime info, and a group's
    consumeTps in GET_CONSUME_STATS, from sends and pulls through the broker."""

    async def main() -> None:
        c = RemotingClient()
        try:
            t0 = time.monotonic()
            for i in range(40):
                r = await c.invoke(cluster.br, send("RateTopic", b"r%d" % i, f"r{i}", queue_id=0))
                assert r.code == ResponseCode.SUCCESS
            offset = got = 0
            for _ in range(50):  # bounded: dispatch is asynchronous
                r = await c.invoke(cluster.br, pull("RateTopic", offset, sys_flag=0))
                if r.code == ResponseCode.SUCCESS:
                    offset = int(r.ext_fields["nextBeginOffset"])
                    got = offset
                if got >= 40:
                    break
                await asyncio.sleep(0.05)
            assert got == 40
            await asyncio.sleep(max(0.0, 2.2 - (time.monotonic() - t0)))  # the store samples once a second
            elapsed = time.monotonic() - t0
            r = await c.invoke(cluster.br, RemotingCommand(code=208, ext_fields={"consumerGroup": "CG",
                                                                                 "topic": "RateTopic"}))  # fmt: skip
            tps = fastjson.loads(r.body)["consumeTps"]
            assert 40 / (elapsed + 2) <= tps <= 40 / 0.9, tps  # 40 messages over the item's life so far
            table = orjson.loads((await c.invoke(cluster.br, RemotingCommand(code=28))).body)["table"]
            assert int(table["putMessageTimesTotal"]) >= 40 and int(table["msgGetTotalTodayNow"]) >= 40
            put_10s, put_1m, put_10m = (float(x) for x in table["putTps"].split(" "))
            assert put_10s > 0 and put_1m > 0 and put_10m > 0
            assert float(table["getTransferedTps"].split(" ")[0]) > 0
        finally:
            await c.close()

    run(main())
