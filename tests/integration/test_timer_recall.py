"""RECALL_MESSAGE (370, RocketMQ 5.3.3's RecallMessageProcessor) against a real `pumice broker`
with ``recallMessageEnable=true``: a timer message's send answer carries its ``recallHandle``; the
recall puts a TIMER_DEL_UNIQKEY marker into the same slot, so the message is never delivered,
while another in the slot is; bad requests get 5.3.3's codes and remarks."""

from __future__ import annotations

import base64
import time

import pytest

from pumice.client.message import MessageExt
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, req, run, running_cluster, send
from tests.integration.test_timer_put_paths import pull_until

pytestmark = pytest.mark.timeout(120)

RECALL_MESSAGE = 370
ILLEGAL_OPERATION = 604
cluster = running_cluster("timerrecall", "timerPrecisionMs=100\nrecallMessageEnable=true\n")


def timer_send(topic: str, body: bytes, uniq: str, delay_ms: int) -> RemotingCommand:
    r = send(topic, body, body.decode())
    r.ext_fields["i"] += f"\x02UNIQ_KEY\x01{uniq}\x02TIMER_DELAY_MS\x01{delay_ms}"
    return r


def recall(topic: str, handle: str) -> RemotingCommand:
    return req(RECALL_MESSAGE, producerGroup="PG", topic=topic, recallHandle=handle)


def test_a_recalled_timer_message_is_never_delivered(cluster: Cluster) -> None:
    topic = "TimerRecallT"
    kept, gone = "7F000001000000000000000000000D01", "7F000001000000000000000000000D02"

    async def scenario() -> tuple[RemotingCommand, RemotingCommand, list[RemotingCommand], list[MessageExt]]:
        c = RemotingClient()
        try:
            a = await c.invoke(cluster.br, timer_send(topic, b"kept", kept, 1500))
            b = await c.invoke(cluster.br, timer_send(topic, b"gone", gone, 1500))
            assert a.code == b.code == ResponseCode.SUCCESS, (a.remark, b.remark)
            handle = str(b.ext_fields.get("recallHandle", ""))
            bad = [
                await c.invoke(cluster.br, recall(topic, "not base64 !")),
                await c.invoke(cluster.br, recall("OtherTopic", handle)),
                await c.invoke(cluster.br, recall(topic, raw_handle(f"v1 {topic} other-broker 1 {gone}"))),
                await c.invoke(cluster.br, recall(topic, raw_handle(f"v1 {topic} broker-t 1 {gone}"))),
            ]
            done = await c.invoke(cluster.br, recall(topic, handle))
            got = await pull_until(c, cluster.br, topic, 2, 4)  # only one comes
            return b, done, bad, got
        finally:
            await c.close()

    sent, done, bad, got = run(scenario())
    handle = base64.urlsafe_b64decode(str(sent.ext_fields["recallHandle"])).decode().split(" ")
    assert handle[:3] == ["v1", "TimerRecallT", "broker-t"] and handle[4] == gone
    assert abs(int(handle[3]) - time.time() * 1000) < 5000
    assert (done.code, done.ext_fields.get("msgId")) == (ResponseCode.SUCCESS, gone), done.remark
    assert [(r.code, r.remark) for r in bad] == [
        (ILLEGAL_OPERATION, "recall handle is invalid"),
        (ResponseCode.TOPIC_NOT_EXIST, "recall failed, the topic[OtherTopic] not exist"),
        (ILLEGAL_OPERATION, "recall failed, broker service not available"),
        (ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
    ]
    assert [m.body for m in got] == [b"kept"]


def raw_handle(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def test_recall_is_refused_when_not_enabled(tmp_path) -> None:
    c = Cluster(tmp_path, "timerPrecisionMs=100\n")
    try:

        async def scenario() -> RemotingCommand:
            client = RemotingClient()
            try:
                return await client.invoke(c.br, recall("AnyT", raw_handle("v1 AnyT broker-t 1 X")))
            finally:
                await client.close()

        r = run(scenario())
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
    finally:
        c.close()
