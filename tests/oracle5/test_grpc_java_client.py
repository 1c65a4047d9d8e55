"""The official Java v5 client (rocketmq-client-java 5.0.8, tests/java-v5grpc) against Pumice's
gRPC endpoint and RocketMQ 5.3.3's proxy in LOCAL mode, the same scenarios and exact counts for
both (``v5_server``, once per server per module), as the Python and Node.js clients' modules:

- Producer: normal sends with a tag, keys and a user property; FIFO sends; a producer over TLS;
  transactions committed (delivered), rolled back (never delivered) and left open (the orphan
  checked back through Telemetry by the client's TransactionChecker, answered COMMIT, then
  delivered); a delay message (delivered once due, not before); a delay message recalled by
  the handle of its send answer (RecallMessage: never delivered; refused while the broker's
  ``recallMessageEnable`` is off, and its bad input refused, raw gRPC, with 5.3.3's codes and texts).
- SimpleConsumer: receives and acks exactly what was sent; a FIFO message group in order; an
  unacked message back after its invisible time with attempt 2; ChangeInvisibleDuration shortening
  it; past max attempts the message in ``%DLQ%<group>``; a tag filter and an SQL92 filter.
- PushConsumer: N messages consumed exactly; the listener's first failures redelivered.

A scenario with a producer and a consumer runs both in one JVM (``produce+simple-consume``,
``produce+push-consume``): a JVM start is the cost here. Topics and groups are made over remoting
(tests/helpers/pumice5.py) on either server, not by an mqadmin JVM per call.

RocketMQ 5.3.3 is the worker's shared one (``rocketmq5_shared``: SHARED_BROKER_CONF and
SHARED_PROXY_CONF, transactions checked back after 1 s, SQL92 on, invisible times from 2 s);
Pumice runs with the same settings and ``tlsMode=permissive`` with its test certificate, as
5.3.3's proxy by default (the Java client trusts any certificate). The timed scenarios
(redelivery, invisible time, DLQ, delivery time, push failures) run against 5.3.3 with
PUMICE_ORACLE_ALL=1 only, as in test_grpc_node_client.py."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from pumice.common.mix_all import DLQ_GROUP_TOPIC_PREFIX
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proto import messaging_pb2_grpc as mpb_grpc
from tests.helpers import java_v5grpc, pumice5
from tests.helpers.pumice5 import PumiceV5
from tests.helpers.rocketmq5 import (
    SHARED_BROKER_CONF,
    SHARED_PROXY_CONF,
    RocketMQ5,
    _conf_value,
    cached_classpath,
    serve,
    timed_duplicate_on_the_reference,
)
from tests.integration.test_grpc_proxy import metadata
from tests.oracle5.test_grpc_consumers import _pull_all

# name -> how the module starts it (stopped after); None: the worker's shared RocketMQ 5.3.3
SERVERS: dict[str, Any] = {
    "rocketmq5": None,
    "pumice": lambda root: PumiceV5(
        root,
        "tlsMode=permissive\n" + "".join(f"{k}={_conf_value(v)}\n" for k, v in SHARED_BROKER_CONF.items()),
        dict(SHARED_PROXY_CONF),
    ),
}


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_v5grpc.build()


@pytest.fixture(scope="module", params=sorted(SERVERS))
def v5_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Pumice (`pumice broker --enable-proxy`, started for the module) and RocketMQ 5.3.3."""
    yield from serve(request, tmp_path_factory, SERVERS)


def _setup(server: Any, topic: str, group: str | None = None, kind: str = "NORMAL", max_retries: int = 16) -> None:
    pumice5.create_topic(server.broker_addr, server.namesrv, topic, queues=2, message_type=kind)
    if group is not None:
        pumice5.create_group(server.broker_addr, group, fifo=kind == "FIFO", max_retries=max_retries)


def java(classpath: str, subcommand: str, server: Any, *args: str, home: Path,
         timeout_s: float = java_v5grpc.DEFAULT_TIMEOUT_S) -> java_v5grpc.V5Run:  # fmt: skip
    return java_v5grpc.run(classpath, subcommand, server.grpc_endpoint, *args, home=home, timeout_s=timeout_s).ok()


def _simple(classpath: str, server: Any, home: Path, topic: str, group: str, *args: str, produce: bool = False,
            timeout_s: float = 60) -> java_v5grpc.V5Run:  # fmt: skip
    """A SimpleConsumer (after a producer in the same JVM with ``produce``)."""
    sub = "produce+simple-consume" if produce else "simple-consume"
    return java(classpath, sub, server, "--topic", topic, "--group", group, "--await-s", "3", *args, home=home,
                timeout_s=timeout_s)  # fmt: skip


def test_producer_normal_sends_received_and_acked(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    _setup(v5_server, "J5Normal", "J5NormalGroup")
    run = _simple(classpath, v5_server, tmp_path, "J5Normal", "J5NormalGroup", "--count", "5", "--body-prefix", "n-",
                  "--tag", "TagA", "--keys", "k1", "--keys", "k2", "--property", "color=blue", "--invisible-s", "15",
                  "--linger-s", "2", "--max-s", "30", produce=True)  # fmt: skip
    sent = run.of("sent")
    assert [e["body"] for e in sent] == [f"n-{i}" for i in range(5)]
    assert len({e["message_id"] for e in sent}) == 5 and all(e["message_id"] for e in sent)
    received = run.of("received")
    assert sorted((e["message_id"], e["body"]) for e in received) == sorted((e["message_id"], e["body"]) for e in sent)
    assert {(e["tag"], tuple(e["keys"]), e["properties"].get("color"), e["attempt"]) for e in received} == {
        ("TagA", ("k1", "k2"), "blue", 1)
    }
    assert len(run.of("acked")) == 5 and not run.of("ack_error")


def test_producer_over_tls(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    _setup(v5_server, "J5Tls")
    sent = java(classpath, "produce", v5_server, "--topic", "J5Tls", "--count", "3", "--body-prefix", "t-", "--tls",
                home=tmp_path).of("sent")  # fmt: skip
    assert [e["body"] for e in sent] == [f"t-{i}" for i in range(3)]


def test_push_consumer_consumes_exactly(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    _setup(v5_server, "J5Push", "J5PushGroup")
    run = java(classpath, "produce+push-consume", v5_server, "--topic", "J5Push", "--group", "J5PushGroup",
               "--count", "4", "--body-prefix", "p-", "--linger-s", "3", "--max-s", "40", home=tmp_path)  # fmt: skip
    consumed = run.of("consumed")
    assert sorted(e["message_id"] for e in consumed) == sorted(e["message_id"] for e in run.of("sent"))
    assert sorted(e["body"] for e in consumed) == [f"p-{i}" for i in range(4)]
    assert {(e["result"], e["attempt"]) for e in consumed} == {("SUCCESS", 1)}


def test_fifo_sends_and_receives_in_order(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    """Two message groups of a FIFO group, received one message at a time and acked: each group in
    send order."""
    _setup(v5_server, "J5Fifo", "J5FifoGroup", kind="FIFO")
    sent = java(classpath, "produce", v5_server, "--topic", "J5Fifo", "--count", "3", "--body-prefix", "g1-",
                "--message-group", "g1", home=tmp_path / "p").of("sent")  # fmt: skip
    assert [(e["body"], e["message_group"]) for e in sent] == [(f"g1-{i}", "g1") for i in range(3)]
    run = _simple(classpath, v5_server, tmp_path / "c", "J5Fifo", "J5FifoGroup", "--count", "6", "--send-count", "3",
                  "--body-prefix", "g2-", "--message-group", "g2", "--batch", "1", "--invisible-s", "10",
                  "--linger-s", "2", "--max-s", "40", produce=True)  # fmt: skip
    received = run.of("received")
    assert len(received) == 6 and len(run.of("acked")) == 6
    for g in ("g1", "g2"):
        assert [e["body"] for e in received if e["message_group"] == g] == [f"{g}-{i}" for i in range(3)]


def test_transactions_commit_delivered_rollback_not(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    _setup(v5_server, "J5Tx", "J5TxGroup", kind="TRANSACTION")
    rolled_back = java(classpath, "produce", v5_server, "--topic", "J5Tx", "--count", "2", "--body-prefix",
                       "rollback-", "--transaction", "rollback", "--check-answer", "rollback",
                       home=tmp_path / "r")  # fmt: skip
    assert [e["message_id"] for e in rolled_back.of("rolled_back")] == [e["message_id"] for e in rolled_back.of("sent")]
    # the same producer group (gRPC producers use the topic's name): 5.3.3 may check the rolled-back
    # halves back with this producer before their rollback's op message is written (it batches them,
    # transactionOpBatchInterval 3 s; seen here), so its checker answers ROLLBACK too
    run = _simple(classpath, v5_server, tmp_path / "c", "J5Tx", "J5TxGroup", "--count", "2", "--body-prefix",
                  "commit-", "--transaction", "commit", "--check-answer", "rollback", "--invisible-s", "10",
                  "--linger-s", "4", "--max-s", "30", produce=True)  # fmt: skip
    assert [e["message_id"] for e in run.of("committed")] == [e["message_id"] for e in run.of("sent")]
    received = run.of("received")
    assert sorted(e["body"] for e in received) == ["commit-0", "commit-1"], rolled_back.describe() + run.describe()


def test_orphaned_transaction_checked_back_then_delivered(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    _setup(v5_server, "J5TxOrphan", "J5TxOrphanGroup", kind="TRANSACTION")
    run = _simple(classpath, v5_server, tmp_path, "J5TxOrphan", "J5TxOrphanGroup", "--count", "1", "--body-prefix",
                  "orphan-", "--transaction", "unknown", "--check-answer", "commit", "--await-checks", "1",
                  "--check-wait-s", "40", "--invisible-s", "10", "--linger-s", "2", "--max-s", "30", produce=True,
                  timeout_s=90)  # fmt: skip
    (sent,) = run.of("sent")
    checked = run.of("checked")
    assert checked and {(e["message_id"], e["body"]) for e in checked} == {(sent["message_id"], "orphan-0")}
    assert not run.of("committed")  # the client never ended it itself
    received = run.of("received")
    assert {(e["message_id"], e["body"]) for e in received} == {(sent["message_id"], "orphan-0")}
    # each check answered COMMIT may commit it once more (5.3.3 batches its op messages, see
    # test_grpc_node_client.py): at most one delivery per check-back
    assert 1 <= len(received) <= len(checked), run.describe()


def test_delay_message_delivered_once_due(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "J5Delay", "J5DelayGroup", kind="DELAY")
    run = _simple(classpath, v5_server, tmp_path, "J5Delay", "J5DelayGroup", "--count", "1", "--body-prefix", "t-",
                  "--delay-s", "4", "--invisible-s", "10", "--linger-s", "1", "--max-s", "30",
                  produce=True)  # fmt: skip
    (sent,) = run.of("sent")
    (got,) = run.of("received")
    due_ms = sent["delivery_timestamp"]  # ms, as the Java client sends it
    print(f"delay: received {got['t'] * 1000 - due_ms:+.0f} ms from due")
    assert got["message_id"] == sent["message_id"] and got["delivery_timestamp"] == due_ms
    assert got["t"] * 1000 >= due_ms


def test_unacked_message_back_after_invisible_time(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "J5Unacked", "J5UnackedGroup")
    run = _simple(classpath, v5_server, tmp_path, "J5Unacked", "J5UnackedGroup", "--count", "2", "--send-count", "1",
                  "--body-prefix", "u-", "--invisible-s", "3", "--ack-from-attempt", "2", "--linger-s", "2",
                  "--max-s", "40", produce=True)  # fmt: skip
    (sent,) = run.of("sent")
    received = run.of("received")
    assert [(e["message_id"], e["attempt"]) for e in received] == [(sent["message_id"], 1), (sent["message_id"], 2)]
    assert [e["attempt"] for e in run.of("acked")] == [2]
    assert received[1]["t"] - received[0]["t"] >= 2.5  # not before its invisible time


def test_change_invisible_duration(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "J5Change", "J5ChangeGroup")
    run = _simple(classpath, v5_server, tmp_path, "J5Change", "J5ChangeGroup", "--count", "2", "--send-count", "1",
                  "--body-prefix", "c-", "--invisible-s", "40", "--change-invisible-s", "3", "--ack-from-attempt",
                  "2", "--max-s", "35", produce=True)  # fmt: skip
    (sent,) = run.of("sent")
    assert len(run.of("changed")) == 1 and not run.of("change_error")
    received = run.of("received")
    assert [(e["message_id"], e["attempt"]) for e in received] == [(sent["message_id"], 1), (sent["message_id"], 2)]
    waited = received[1]["t"] - received[0]["t"]
    assert 2.5 <= waited < 30, waited  # the new time (3 s), not the old (40 s)
    assert [e["attempt"] for e in run.of("acked")] == [2] and not run.of("ack_error")


def test_max_attempts_then_dlq(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "J5Dlq", "J5DlqGroup", max_retries=1)  # max attempts 2
    run = _simple(classpath, v5_server, tmp_path, "J5Dlq", "J5DlqGroup", "--count", "2", "--send-count", "1",
                  "--body-prefix", "d-", "--invisible-s", "2", "--no-ack", "--linger-s", "8", "--max-s", "40",
                  produce=True)  # fmt: skip
    (sent,) = run.of("sent")
    assert [e["attempt"] for e in run.of("received")] == [1, 2]  # never a third delivery
    dlq = asyncio.run(_pull_all(v5_server.broker_addr, f"{DLQ_GROUP_TOPIC_PREFIX}J5DlqGroup", 1))
    assert [m.body for m in dlq] == [b"d-0"]
    assert dlq[0].properties.get("UNIQ_KEY") == sent["message_id"]


def test_tag_filter(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    _setup(v5_server, "J5Tags", "J5TagsGroup")
    java(classpath, "produce", v5_server, "--topic", "J5Tags", "--count", "2", "--body-prefix", "b-", "--tag", "TagB",
         home=tmp_path / "b")  # fmt: skip
    run = _simple(classpath, v5_server, tmp_path / "a", "J5Tags", "J5TagsGroup", "--count", "3", "--body-prefix",
                  "a-", "--tag", "TagA", "--invisible-s", "10", "--tag-expr", "TagA || TagC", "--linger-s", "3",
                  "--max-s", "30", produce=True)  # fmt: skip
    assert sorted(e["body"] for e in run.of("received")) == ["a-0", "a-1", "a-2"]


def test_sql92_filter(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    _setup(v5_server, "J5Sql", "J5SqlGroup")
    java(classpath, "produce", v5_server, "--topic", "J5Sql", "--count", "3", "--body-prefix", "red-", "--property",
         "color=red", home=tmp_path / "r")  # fmt: skip
    run = _simple(classpath, v5_server, tmp_path / "b", "J5Sql", "J5SqlGroup", "--count", "2", "--body-prefix",
                  "blue-", "--property", "color=blue", "--invisible-s", "10", "--sql", "color = 'blue'",
                  "--linger-s", "3", "--max-s", "30", produce=True)  # fmt: skip
    assert sorted(e["body"] for e in run.of("received")) == ["blue-0", "blue-1"]


def test_push_consumer_failures_redelivered(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "J5PushRetry", "J5PushRetryGroup")
    run = java(classpath, "produce+push-consume", v5_server, "--topic", "J5PushRetry", "--group", "J5PushRetryGroup",
               "--count", "3", "--body-prefix", "r-", "--fail-first", "2", "--linger-s", "3", "--max-s", "50",
               home=tmp_path, timeout_s=75)  # fmt: skip
    consumed = run.of("consumed")
    failed = [e for e in consumed if e["result"] == "FAILURE"]
    succeeded = [e for e in consumed if e["result"] == "SUCCESS"]
    assert len(failed) == 2
    assert sorted(e["message_id"] for e in succeeded) == sorted(e["message_id"] for e in run.of("sent"))
    for f in failed:  # each failure came back: a later attempt of the same message succeeded
        again = [e for e in succeeded if e["message_id"] == f["message_id"]]
        assert again and again[0]["attempt"] > f["attempt"], (f, again)


def _decoded(handle: str) -> list[str]:
    return base64.urlsafe_b64decode(handle).decode().split(" ")


def test_delay_message_recall_handle_and_a_forbidden_recall(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    """A delay message's send answer carries its recall handle (5.3.3's ``v1 <topic> <broker>
    <timer slot ms + 1> <message id>``), and the client's RecallMessage reaches the broker: both servers
    run with ``recallMessageEnable`` off, its default, so the broker's refusal comes back."""
    _setup(v5_server, "J5RecallOff", kind="DELAY")
    run = java(classpath, "produce", v5_server, "--topic", "J5RecallOff", "--count", "1", "--delay-s", "30",
               "--recall-first", "1", home=tmp_path)  # fmt: skip
    (sent,) = run.of("sent")
    version, topic, _broker, due, message_id = _decoded(sent["recall_handle"])
    assert (version, topic, message_id) == ("v1", "J5RecallOff", sent["message_id"])
    slot = int(due) - 1  # the timer's slot of the delivery time: floored to timerPrecisionMs (1 s)
    assert slot % 1000 == 0 and sent["delivery_timestamp"] - 1000 < slot <= sent["delivery_timestamp"]
    assert not run.of("recalled")
    (refused,) = run.of("recall_error")
    assert "recall failed, operation is forbidden" in refused["message"], run.describe()


@pytest.fixture
def recall_server(v5_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A server of the same kind as ``v5_server`` with ``recallMessageEnable=true`` (a 5.3.3 of its
    own only with PUMICE_ORACLE_ALL=1: a timed scenario, and a JVM start)."""
    conf = {**SHARED_BROKER_CONF, "recallMessageEnable": True}
    root = tmp_path_factory.mktemp("recall")
    if isinstance(v5_server, RocketMQ5):
        timed_duplicate_on_the_reference(v5_server)
        server: Any = RocketMQ5(root, broker_conf=conf, proxy_conf=SHARED_PROXY_CONF, classpath=cached_classpath())
    else:
        server = PumiceV5(root, "".join(f"{k}={_conf_value(v)}\n" for k, v in conf.items()), dict(SHARED_PROXY_CONF))
    try:
        yield server
    finally:
        server.stop()


def test_recalled_delay_message_never_delivered(recall_server: Any, classpath: str, tmp_path: Path) -> None:
    """Two delay messages, the first recalled by its handle: only the second comes, once due."""
    _setup(recall_server, "J5Recall", "J5RecallGroup", kind="DELAY")
    run = _simple(classpath, recall_server, tmp_path, "J5Recall", "J5RecallGroup", "--send-count", "2",
                  "--count", "1", "--body-prefix", "r-", "--delay-s", "3", "--recall-first", "1",
                  "--invisible-s", "10", "--linger-s", "3", "--max-s", "30", produce=True)  # fmt: skip
    sent = run.of("sent")
    assert not run.of("recall_error"), run.describe()
    assert [e["message_id"] for e in run.of("recalled")] == [sent[0]["message_id"]]
    assert [(e["message_id"], e["body"]) for e in run.of("received")] == [(sent[1]["message_id"], "r-1")]


@pytest.mark.parametrize(
    ("topic", "handle", "code", "message"),
    [
        ("J5RecallNormal", "x", pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
         "TopicMessageType validate failed, the expected type is NORMAL, but actual type is DELAY"),
        ("J5RecallNoSuchTopic", "x", pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
         "TopicMessageType validate failed, the expected type is UNSPECIFIED, but actual type is DELAY"),
        ("J5Recall bad", "x", pb.ILLEGAL_TOPIC, None),
        ("J5RecallOff", "not a handle", pb.INTERNAL_SERVER_ERROR, "recall handle is invalid"),
        ("J5RecallOff", base64.urlsafe_b64encode(b"v1 J5RecallOff b 1 id").decode(), pb.INTERNAL_SERVER_ERROR,
         "recall failed, operation is forbidden"),
    ],
    ids=["normal-topic", "no-topic", "illegal-topic-name", "bad-handle", "recall-disabled"],
)  # fmt: skip
def test_recall_message_refusals(v5_server: Any, topic: str, handle: str, code: int, message: str | None) -> None:
    """RecallMessage's bad input, raw gRPC: the proxy's topic and type checks, its handle check,
    then the broker's refusal (``recallMessageEnable`` off) as INTERNAL_SERVER_ERROR with its remark."""
    _setup(v5_server, "J5RecallOff", kind="DELAY")
    _setup(v5_server, "J5RecallNormal")
    with grpc.insecure_channel(v5_server.grpc_endpoint) as channel:
        stub = mpb_grpc.MessagingServiceStub(channel)
        request = mpb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle=handle)
        answer = stub.RecallMessage(request, metadata=metadata("java5-recall-test"), timeout=10)
    assert pb.Code.Name(answer.status.code) == pb.Code.Name(code), answer
    if message is not None:  # 5.3.3's text: its exception's, class name first
        assert answer.status.message == f"org.apache.rocketmq.proxy.common.ProxyException: {message}"
    assert not answer.message_id
