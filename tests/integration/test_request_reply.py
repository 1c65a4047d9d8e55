"""Request-reply against real `pumice namesrv` and `pumice broker` processes: the Pumice
producer's ``request`` and a consumer answering with ``create_reply_message``; the broker's
SEND_REPLY_MESSAGE(_V2) pushing the reply to the requester and refusing what it cannot push.
(tests/interop runs the Java client's ``request()``.)"""

from __future__ import annotations

import asyncio
import time

import pytest

from pumice.client import (
    Message,
    Producer,
    RequestTimeoutError,
)
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clients import create_topic, responding
from tests.helpers.clusters import Cluster, running_cluster

cluster = running_cluster("reply")


def test_a_request_gets_its_reply_and_one_without_a_responder_times_out(cluster: Cluster) -> None:
    asyncio.run(create_topic(cluster, "ReqTopic"))
    asyncio.run(create_topic(cluster, "NoReplyTopic"))
    with responding(cluster.ns, "ReqTopic", "CReq") as answered:
        with Producer("PReq", cluster.ns) as requester:
            for i in range(5):
                reply = requester.request(Message("ReqTopic", b"q-%d" % i), timeout_s=15)
                assert reply.body == b"re:q-%d" % i
                assert reply.topic == "TestCluster_REPLY_TOPIC"
                props = reply.properties
                assert props["MSG_TYPE"] == "reply" and props["CORRELATION_ID"] == answered[-1]["CORRELATION_ID"]
                assert props["REPLY_TO_CLIENT"] == requester.impl.instance.client_id
                assert int(props["ARRIVE_TIME"]) >= int(props["PUSH_REPLY_TIME"]) > 0
            t0 = time.monotonic()
            with pytest.raises(RequestTimeoutError, match=r"no reply message within 1\.5s"):
                requester.request(Message("NoReplyTopic", b"nobody answers"), timeout_s=1.5)
            assert 1.4 < time.monotonic() - t0 < 5
    assert len({a["CORRELATION_ID"] for a in answered}) == 5


BASE = "MSG_TYPE\x01reply\x02CORRELATION_ID\x01x"


def test_a_reply_the_broker_cannot_push_is_refused_and_still_stored(cluster: Cluster) -> None:
    def reply(props: str) -> RemotingCommand:
        fields = {"a": "PReply", "b": "TestCluster_REPLY_TOPIC", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1,
                  "h": 0, "i": props}  # fmt: skip
        return RemotingCommand(code=325, ext_fields=fields, body=b"late reply")

    async def main() -> None:
        c = RemotingClient()
        try:
            r = await c.invoke(
                cluster.br, reply("MSG_TYPE\x01reply\x02CORRELATION_ID\x01x\x02REPLY_TO_CLIENT\x01gone@1")
            )
            assert (r.code, r.remark) == (
                ResponseCode.SYSTEM_ERROR,
                "push reply message fail, channel of <gone@1> not found.",
            )
            assert r.ext_fields["msgId"] != "0"  # storeReplyMessageEnable: stored all the same
            r = await c.invoke(cluster.br, reply("MSG_TYPE\x01reply\x02CORRELATION_ID\x01x"))
            assert (r.code, r.remark) == (
                ResponseCode.SYSTEM_ERROR,
                "reply message properties[REPLY_TO_CLIENT] is null",
            )
        finally:
            await c.close()

    asyncio.run(asyncio.wait_for(main(), 30))
