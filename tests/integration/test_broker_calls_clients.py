"""The broker's calls to clients (Broker2Client) against real `pumice namesrv` and `pumice
broker` processes, with the Pumice push consumer as the client being called: running info
(307), consume directly (309), consumer status (223 → 221) and reset offset (222 → 220)."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import orjson

from pumice.client import AsyncProducer, AsyncPushConsumer, ConsumeFromWhere, ConsumeStatus, Message
from pumice.common import fastjson
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clients import FAST, create_topic
from tests.helpers.clusters import Cluster, run
from tests.helpers.waiting import eventually_async

TOPIC = "CallsTopic"
GROUP = "CallsGroup"


def mq_key(queue_id: int) -> str:
    return orjson.dumps({"brokerName": "broker-t", "queueId": queue_id, "topic": TOPIC}).decode()


async def admin_call(rc: RemotingClient, addr: str, code: int, timeout_s: float = 15, **ext: Any) -> RemotingCommand:
    return await rc.invoke(addr, RemotingCommand(code=code, ext_fields={k: str(v) for k, v in ext.items()}), timeout_s)


def test_the_broker_calls_a_running_consumer(cluster: Cluster) -> None:
    async def main() -> None:
        await create_topic(cluster, TOPIC, queues=2)
        sent = []
        async with AsyncProducer("CallsProducer", cluster.ns) as p:
            for i in range(20):
                r = await p.send(Message(TOPIC, b"body-%02d" % i, keys=f"k{i}"))
                sent.append(r)
        seen: collections.Counter[bytes] = collections.Counter()

        def handle(msgs: Any, ctx: Any) -> ConsumeStatus:
            for m in msgs:
                seen[m.body] += 1
            return ConsumeStatus.SUCCESS

        consumer = AsyncPushConsumer(GROUP, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, **FAST)
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(handle)
        rc = RemotingClient()
        await consumer.start()
        try:
            await eventually_async(lambda: len(seen) == 20, 30, "all 20 consumed")
            cid = consumer.client_id

            # 307: relayed to the client, its ConsumerRunningInfo returned
            r = await admin_call(rc, cluster.br, RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup=GROUP,
                                 clientId=cid, jstackEnable="false")  # fmt: skip
            assert r.code == ResponseCode.SUCCESS, r.remark
            info = fastjson.loads(r.body)
            assert info["properties"]["consumerGroup"] == GROUP
            assert {s["topic"] for s in info["subscriptionSet"]} >= {TOPIC}
            assert set(info["mqTable"]) >= {mq_key(0), mq_key(1)}
            r = await admin_call(rc, cluster.br, RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup=GROUP,
                                 clientId="nobody@1")  # fmt: skip
            assert r.code == ResponseCode.SYSTEM_ERROR and "not online" in r.remark

            # 223 → 221: each member's offsets of the topic
            async def status() -> dict[str, int]:
                r = await admin_call(rc, cluster.br, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                     topic=TOPIC, group=GROUP)  # fmt: skip
                assert r.code == ResponseCode.SUCCESS, r.remark
                return fastjson.loads(r.body)["consumerTable"].get(cid, {})

            per_queue = collections.Counter(s.message_queue.queue_id for s in sent)
            want = {mq_key(q): n for q, n in per_queue.items()}
            await eventually_async(lambda: status_is(status, want), 15, "the consumer's offsets reported")

            # 309: the stored record handed to the handler once
            before = seen[b"body-03"]
            r = await admin_call(rc, cluster.br, RequestCode.CONSUME_MESSAGE_DIRECTLY, consumerGroup=GROUP,
                                 clientId=cid, msgId=sent[3].offset_msg_id)  # fmt: skip
            assert r.code == ResponseCode.SUCCESS, r.remark
            result = fastjson.loads(r.body)
            assert result["consumeResult"] == "CR_SUCCESS"
            assert seen[b"body-03"] == before + 1

            # 222 → 220: offsets back to the start; the member consumes everything again
            # (4.9 answers "not exist" until the member has stored offsets on the broker: wait for them)
            async def stored() -> bool:
                r = await admin_call(rc, cluster.br, RequestCode.GET_ALL_CONSUMER_OFFSET)
                want_stored = {str(q): n for q, n in per_queue.items()}
                return fastjson.loads(r.body)["offsetTable"].get(f"{TOPIC}@{GROUP}") == want_stored

            await eventually_async(stored, 15, "the member's offsets stored on the broker")
            r = await admin_call(rc, cluster.br, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic=TOPIC,
                                 group=GROUP, timestamp=0, isForce="true")  # fmt: skip
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert fastjson.loads(r.body)["offsetTable"] == {mq_key(0): 0, mq_key(1): 0}
            await eventually_async(
                lambda: all(seen[b"body-%02d" % i] >= 2 for i in range(20)), 30, "all consumed again"
            )
        finally:
            await consumer.shutdown()
            await rc.close()

        # no member online: CONSUMER_NOT_ONLINE, as 4.9 (mqadmin then writes offsets itself)
        rc = RemotingClient()
        try:
            deadline = time.monotonic() + 15
            while True:
                r = await admin_call(rc, cluster.br, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic=TOPIC,
                                     group=GROUP, timestamp=-1, isForce="true")  # fmt: skip
                if r.code == ResponseCode.CONSUMER_NOT_ONLINE or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert r.code == ResponseCode.CONSUMER_NOT_ONLINE, (r.code, r.remark)
        finally:
            await rc.close()

    run(main(), 120)


async def status_is(status: Any, want: dict[str, int]) -> bool:
    return await status() == want
