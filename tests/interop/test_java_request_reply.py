"""Request-reply with the official Java client (rocketmq-client 4.9.8) through `pumice broker`:
DefaultMQProducer.request answered by a Java responder (MessageUtil.createReplyMessage), and
each side against the Pumice client's ``request`` / ``create_reply_message``."""

from __future__ import annotations

from pumice.client import Message, Producer
from tests.helpers.clients import responding
from tests.helpers.interop import create_topic


def replies(events: list[dict]) -> dict[int, dict]:
    assert not [e for e in events if e["event"] == "error"], events
    return {e["i"]: e for e in events if e["event"] == "reply"}


def test_java_request_answered_by_a_java_responder(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JReq")
    responder = java("responder", topic="JReq", group="CJReq", duration=60)
    responder.wait_event("started", 30)
    got = replies(run_java("request", topic="JReq", count=5, label="jq", timeout_ms=15_000, timeout_s=90))
    assert sorted(got) == list(range(5))
    for i, r in got.items():
        assert (r["topic"], r["bodyText"]) == ("TestCluster_REPLY_TOPIC", f"re:jq-{i}")
        assert r["props"]["MSG_TYPE"] == "reply" and "CORRELATION_ID" in r["props"]


def test_pumice_request_answered_by_a_java_responder(java, interop_cluster) -> None:
    create_topic(interop_cluster, "JReqPy")
    responder = java("responder", topic="JReqPy", group="CJReqPy", duration=60)
    responder.wait_event("started", 30)
    with Producer("PPyRequester", interop_cluster.ns) as p:
        for i in range(3):
            reply = p.request(Message("JReqPy", b"py-%d" % i), timeout_s=15)
            assert (reply.topic, reply.body) == ("TestCluster_REPLY_TOPIC", b"re:py-%d" % i)
    # the responder logs "replied" after its reply is sent, so the last may trail our answer
    assert len(responder.wait_event("replied", 15, count=3)) == 3


def test_java_request_answered_by_a_pumice_responder(run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JReqJava")
    with responding(interop_cluster.ns, "JReqJava", "CPyResponder") as seen:
        got = replies(run_java("request", topic="JReqJava", count=3, label="jv", timeout_ms=15_000, timeout_s=90))
    assert {i: r["bodyText"] for i, r in got.items()} == {i: f"re:jv-{i}" for i in range(3)}
    assert len({m["REPLY_TO_CLIENT"] for m in seen}) == 1  # the Java requester's client id
