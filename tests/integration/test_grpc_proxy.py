"""RocketMQ 5's gRPC endpoint (`pumice broker --enable-proxy`) against real `pumice namesrv`
and `pumice broker` processes, called with raw gRPC (the generated stubs, grpcio's blocking
client) as RocketMQ 5's clients call it: metadata, Telemetry settings, routes, sends,
transactions (commit, rollback, an orphan recovered through Telemetry), consumer registration,
assignments, bad input, and the ACL signature. Expected answers are 5.3.3's proxy's
(docs/v5/grpc.md; ../shared/spec/V5-CLIENTS.md). The official Python client runs in
tests/oracle5/test_grpc_*.py.
"""

from __future__ import annotations

import hashlib
import hmac
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from pumice.common.message_decoder import decode_message
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proto import messaging_pb2_grpc as mpb_grpc
from tests.helpers.clients import create_topic
from tests.helpers.clusters import Cluster, call, pull, run
from tests.helpers.pumice5 import ProxyCluster
from tests.helpers.waiting import eventually

MAX_BODY = 64 * 1024  # the proxy's maxMessageSize here, to test the limit with small bodies


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyCluster]:
    c = ProxyCluster(tmp_path_factory.mktemp("grpc"), "transactionTimeOut=1000\ntransactionCheckInterval=300\n",
                     {"maxMessageSize": MAX_BODY})  # fmt: skip
    try:
        for topic in ("GrpcRoute", "GrpcSend", "GrpcTx", "GrpcOrphan", "GrpcSub"):
            run(create_topic(c, topic))
        yield c
    finally:
        c.close()


def metadata(client_id: str | None = "grpc-test-client", keys: tuple[str, str] | None = None) -> list[tuple[str, str]]:
    """What the Python client 5.1.2 sends with every call; ``keys`` signs it (MQv2-HMAC-SHA1)."""
    date_time = time.strftime("%Y%m%dT%H%M%SZ")
    md = [("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"), ("x-mq-client-version", "5.1.2"),
          ("x-mq-date-time", date_time), ("x-mq-request-id", str(uuid.uuid4())), ("x-mq-namespace", "")]  # fmt: skip
    if client_id is not None:
        md.append(("x-mq-client-id", client_id))
    if keys is not None:
        signature = hmac.new(keys[1].encode(), date_time.encode(), hashlib.sha1).hexdigest().upper()
        md.append(("authorization", f"MQv2-HMAC-SHA1 Credential={keys[0]}, SignedHeaders=x-mq-date-time, "
                                    f"Signature={signature}"))  # fmt: skip
    return md


@pytest.fixture(scope="module")
def stub(cluster: ProxyCluster) -> Iterator[Any]:
    with grpc.insecure_channel(f"127.0.0.1:{cluster.grpc_port}") as channel:
        yield mpb_grpc.MessagingServiceStub(channel)


class Telemetry:
    """A client's Telemetry stream: ``send`` commands, ``next`` answers (bounded waits)."""

    def __init__(self, stub: Any, client_id: str, keys: tuple[str, str] | None = None) -> None:
        self._out: queue.Queue[Any] = queue.Queue()
        self._in: queue.Queue[Any] = queue.Queue()
        self._call = stub.Telemetry(self._requests(), metadata=metadata(client_id, keys), timeout=60)
        threading.Thread(target=self._read, daemon=True).start()

    def _requests(self) -> Iterator[Any]:
        while (item := self._out.get()) is not None:
            yield item

    def _read(self) -> None:
        try:
            for answer in self._call:
                self._in.put(answer)
        except grpc.RpcError as e:
            self._in.put(e)

    def send(self, command: Any) -> None:
        self._out.put(command)

    def next(self, timeout_s: float = 10) -> Any:
        answer = self._in.get(timeout=timeout_s)
        assert not isinstance(answer, grpc.RpcError), answer
        return answer

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()


def producer_settings(*topics: str) -> Any:
    return mpb.TelemetryCommand(settings=pb.Settings(
        client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics]),
        user_agent=pb.UA(language=pb.PYTHON, version="5.1.2")))  # fmt: skip


def message(topic: str, body: bytes = b"hello", **system: Any) -> Any:
    sp = pb.SystemProperties(message_id=system.pop("message_id", uuid.uuid4().hex.upper()), **system)
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=sp)


def stored(cluster: Cluster, topic: str) -> list[Any]:
    """Every message of ``topic`` on the broker (PULL_MESSAGE on each of its 4 queues)."""
    out = []
    for queue_id in range(4):
        (response,) = call(cluster.br, None, pull(topic, 0, queue_id, sys_flag=0, suspend_ms=0))
        body, pos = bytes(response.body), 0
        while response.code == 0 and pos < len(body):
            m = decode_message(body, pos)
            out.append(m)
            pos += m.store_size
    return out


# -- metadata and routes -----------------------------------------------------------------


def test_a_call_without_client_id_is_refused_client_id_required(stub: Any) -> None:
    r = stub.QueryRoute(mpb.QueryRouteRequest(topic=pb.Resource(name="GrpcRoute")), metadata=metadata(None))
    assert r.status.code == pb.CLIENT_ID_REQUIRED, r
    assert r.status.message == "client id cannot be empty"


def test_query_route_answers_the_brokers_host_and_grpc_port(cluster: ProxyCluster, stub: Any) -> None:
    endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=cluster.grpc_port)])
    r = stub.QueryRoute(mpb.QueryRouteRequest(topic=pb.Resource(name="GrpcRoute"), endpoints=endpoints),
                        metadata=metadata())  # fmt: skip
    assert r.status.code == pb.OK, r
    assert [q.id for q in r.message_queues] == [0, 1, 2, 3]
    for q in r.message_queues:
        assert q.permission == pb.READ_WRITE
        assert (q.broker.name, q.broker.id) == ("broker-t", 0)
        assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [("127.0.0.1", cluster.grpc_port)]
        assert list(q.accept_message_types) == [pb.NORMAL]  # no message.type attribute: NORMAL, as 5.3.3


def test_query_route_of_an_unknown_topic_is_topic_not_found(stub: Any) -> None:
    r = stub.QueryRoute(mpb.QueryRouteRequest(topic=pb.Resource(name="NoSuchGrpcTopic")), metadata=metadata())
    assert r.status.code == pb.TOPIC_NOT_FOUND, r
    assert "NoSuchGrpcTopic" in r.status.message


# -- telemetry, heartbeat, connections -------------------------------------------------------


def test_heartbeat_before_settings_is_unrecognized_client_type(stub: Any) -> None:
    r = stub.Heartbeat(mpb.HeartbeatRequest(client_type=pb.PRODUCER), metadata=metadata("never-said-settings"))
    assert r.status.code == pb.UNRECOGNIZED_CLIENT_TYPE, r


def test_producer_settings_answer_and_the_connection_admin_tools_see(cluster: ProxyCluster, stub: Any) -> None:
    from pumice.client import MQAdmin

    t = Telemetry(stub, "grpc-producer-1")
    try:
        t.send(producer_settings("GrpcSend"))
        answer = t.next()
        assert answer.status.code == pb.OK, answer
        s = answer.settings
        assert s.publishing.max_body_size == MAX_BODY  # maxMessageSize of rmq-proxy.json
        assert s.publishing.validate_message_type is True
        assert s.backoff_policy.max_attempts == 3
        assert s.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
        assert s.backoff_policy.exponential_backoff.max.ToMilliseconds() == 1000
        assert s.backoff_policy.exponential_backoff.multiplier == 2.0
        r = stub.Heartbeat(mpb.HeartbeatRequest(client_type=pb.PRODUCER), metadata=metadata("grpc-producer-1"))
        assert r.status.code == pb.OK, r
        with MQAdmin(cluster.ns) as admin:  # the producer group of a gRPC producer is the topic (5.x)
            conns = admin.producer_connection("GrpcSend", "GrpcSend")
        assert [(c.client_id, c.language) for c in conns] == [("grpc-producer-1", "PYTHON")]
        r = stub.NotifyClientTermination(mpb.NotifyClientTerminationRequest(), metadata=metadata("grpc-producer-1"))
        assert r.status.code == pb.OK, r
    finally:
        t.close()


def test_consumer_settings_answer_and_registration(cluster: ProxyCluster, stub: Any) -> None:
    from pumice.client import MQAdmin

    t = Telemetry(stub, "grpc-consumer-1")
    try:
        sub = pb.Subscription(
            group=pb.Resource(name="GrpcGroup"),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=pb.Resource(name="GrpcSub"), expression=pb.FilterExpression(type=pb.TAG, expression="TagA")
                )
            ],
        )
        t.send(mpb.TelemetryCommand(settings=pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=sub)))
        s = t.next().settings
        assert s.subscription.receive_batch_size == 32
        assert s.subscription.long_polling_timeout.ToMilliseconds() == 20_000
        assert s.subscription.fifo is False
        assert s.backoff_policy.max_attempts == 17  # retryMaxTimes 16 + 1
        assert [d.ToMilliseconds() for d in s.backoff_policy.customized_backoff.next][:4] == [1000, 5000, 10000, 30000]
        with MQAdmin(cluster.ns) as admin:
            conn = eventually(lambda: admin.consumer_connection("GrpcGroup"), what="the gRPC consumer registered")
        assert [c.client_id for c in conn.connections] == ["grpc-consumer-1"]
        assert conn.subscriptions["GrpcSub"]["subString"] == "TagA"
        r = stub.QueryAssignment(mpb.QueryAssignmentRequest(topic=pb.Resource(name="GrpcSub"),
                                                            group=pb.Resource(name="GrpcGroup")),
                                 metadata=metadata("grpc-consumer-1"))  # fmt: skip
        assert r.status.code == pb.OK, r
        assert [(a.message_queue.id, a.message_queue.broker.id) for a in r.assignments] == [(-1, 0)]
    finally:
        t.close()


# -- send ------------------------------------------------------------------------------------


def test_send_stores_the_message_with_5x_properties(cluster: ProxyCluster, stub: Any) -> None:
    m = message("GrpcSend", b"grpc body", tag="TagA", keys=["k1", "k2"], message_group="order-7")
    m.user_properties["color"] = "blue"
    m.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 2 * 86_400_000)
    r = stub.SendMessage(mpb.SendMessageRequest(messages=[m]), metadata=metadata("grpc-sender"))
    assert r.status.code == pb.ILLEGAL_DELIVERY_TIME, r  # more than maxDelayTimeMills (1 day) ahead
    # a time already passed: stored in the topic at once (also once timers merge), property kept
    m.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) - 1000)
    r = stub.SendMessage(mpb.SendMessageRequest(messages=[m]), metadata=metadata("grpc-sender"))
    assert r.status.code == pb.OK, r
    (entry,) = r.entries
    assert entry.status.code == pb.OK and entry.message_id == m.system_properties.message_id
    (found,) = [s for s in stored(cluster, "GrpcSend") if s.properties.get("UNIQ_KEY") == entry.message_id]
    assert found.body == b"grpc body"
    assert found.queue_offset == entry.offset
    p = found.properties
    assert (p["TAGS"], p["KEYS"], p["__SHARDINGKEY"], p["color"], p["PGROUP"]) == (
        "TagA",
        "k1 k2",
        "order-7",
        "blue",
        "GrpcSend",
    )
    assert p["TIMER_DELIVER_MS"] == str(m.system_properties.delivery_timestamp.ToMilliseconds())
    # one message group always lands on the same queue (Guava's consistentHash of its hashCode)
    again = stub.SendMessage(mpb.SendMessageRequest(messages=[message("GrpcSend", message_group="order-7")]),
                             metadata=metadata("grpc-sender"))  # fmt: skip
    (second,) = [s for s in stored(cluster, "GrpcSend")
                 if s.properties.get("UNIQ_KEY") == again.entries[0].message_id]  # fmt: skip
    assert second.queue_id == found.queue_id


@pytest.mark.parametrize(
    ("build", "code"),
    [
        (lambda: message("GrpcSend", b"x" * (MAX_BODY + 1)), pb.MESSAGE_BODY_TOO_LARGE),
        (lambda: message("GrpcSend", b""), pb.MESSAGE_BODY_EMPTY),
        (lambda: message("GrpcSend", message_id=" "), pb.ILLEGAL_MESSAGE_ID),
        (lambda: message("GrpcSend", tag="a|b"), pb.ILLEGAL_MESSAGE_TAG),
        (lambda: message("NoSuchGrpcTopic"), pb.TOPIC_NOT_FOUND),
        (lambda: message("bad topic!"), pb.ILLEGAL_TOPIC),
    ],
    ids=["body-over-max", "empty-body", "blank-id", "tag-with-bar", "unknown-topic", "illegal-topic"],
)
def test_send_refuses_bad_input_with_5x_codes(stub: Any, build: Any, code: int) -> None:
    r = stub.SendMessage(mpb.SendMessageRequest(messages=[build()]), metadata=metadata("grpc-sender"))
    assert r.status.code == code, r


def test_send_refuses_a_system_property_name(stub: Any) -> None:
    m = message("GrpcSend")
    m.user_properties["UNIQ_KEY"] = "mine"
    r = stub.SendMessage(mpb.SendMessageRequest(messages=[m]), metadata=metadata("grpc-sender"))
    assert r.status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY, r
    assert r.status.message == "property is used by system: UNIQ_KEY"


# -- transactions ----------------------------------------------------------------------------


def _half(stub: Any, client_id: str, topic: str, body: bytes) -> Any:
    m = message(topic, body, message_type=pb.TRANSACTION)
    r = stub.SendMessage(mpb.SendMessageRequest(messages=[m]), metadata=metadata(client_id))
    assert r.status.code == pb.OK, r
    (entry,) = r.entries
    assert entry.transaction_id, "a transactional send needs a transaction id"
    return entry


def _end(stub: Any, client_id: str, topic: str, entry: Any, resolution: int,
         source: int = pb.SOURCE_CLIENT) -> Any:  # fmt: skip
    return stub.EndTransaction(mpb.EndTransactionRequest(
        topic=pb.Resource(name=topic), message_id=entry.message_id, transaction_id=entry.transaction_id,
        resolution=resolution, source=source), metadata=metadata(client_id))  # fmt: skip


def test_transaction_commit_delivers_and_rollback_does_not(cluster: ProxyCluster, stub: Any) -> None:
    t = Telemetry(stub, "grpc-tx-1")
    try:
        t.send(producer_settings("GrpcTx"))
        assert t.next().status.code == pb.OK
        committed = _half(stub, "grpc-tx-1", "GrpcTx", b"commit me")
        rolled_back = _half(stub, "grpc-tx-1", "GrpcTx", b"roll me back")
        assert stored(cluster, "GrpcTx") == []  # halves are not in the topic
        assert _end(stub, "grpc-tx-1", "GrpcTx", committed, pb.COMMIT).status.code == pb.OK
        assert _end(stub, "grpc-tx-1", "GrpcTx", rolled_back, pb.ROLLBACK).status.code == pb.OK
        bodies = eventually(lambda: [m.body for m in stored(cluster, "GrpcTx")] or None, what="the commit")
        assert bodies == [b"commit me"]
        again = _end(stub, "grpc-tx-1", "GrpcTx", committed, pb.COMMIT)  # its data is gone once ended
        assert again.status.code == pb.INVALID_TRANSACTION_ID, again
    finally:
        t.close()


def test_an_orphaned_transaction_is_recovered_through_telemetry(cluster: ProxyCluster, stub: Any) -> None:
    t = Telemetry(stub, "grpc-tx-orphan")
    try:
        t.send(producer_settings("GrpcOrphan"))
        assert t.next().status.code == pb.OK
        entry = _half(stub, "grpc-tx-orphan", "GrpcOrphan", b"orphan")
        command = t.next(timeout_s=15)  # transactionTimeOut 1 s, checks every 0.3 s
        recover = command.recover_orphaned_transaction_command
        assert command.WhichOneof("command") == "recover_orphaned_transaction_command", command
        assert recover.message.system_properties.message_id == entry.message_id
        assert recover.message.topic.name == "GrpcOrphan" and recover.message.body == b"orphan"
        assert recover.transaction_id
        r = stub.EndTransaction(mpb.EndTransactionRequest(
            topic=pb.Resource(name="GrpcOrphan"), message_id=entry.message_id, transaction_id=recover.transaction_id,
            resolution=pb.COMMIT, source=pb.SOURCE_SERVER_CHECK), metadata=metadata("grpc-tx-orphan"))  # fmt: skip
        assert r.status.code == pb.OK, r
        bodies = eventually(lambda: [m.body for m in stored(cluster, "GrpcOrphan")] or None, what="the recovery")
        assert bodies == [b"orphan"]
    finally:
        t.close()


# -- consuming: POP ----------------------------------------------------------------------------


def test_simple_consumer_cycle(stub: Any) -> None:
    sent = stub.SendMessage(mpb.SendMessageRequest(messages=[message("GrpcSub", b"pop me", tag="TagA")]),
                            metadata=metadata("grpc-sender"))  # fmt: skip
    assert sent.status.code == pb.OK
    request = mpb.ReceiveMessageRequest(
        group=pb.Resource(name="GrpcPopGroup"), message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcSub")),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="TagA"), batch_size=16,
        invisible_duration=pb_duration(15_000), long_polling_timeout=pb_duration(5_000))  # fmt: skip
    answers = list(stub.ReceiveMessage(request, metadata=metadata("grpc-consumer-3"), timeout=20))
    got = [a.message for a in answers if a.WhichOneof("content") == "message"]
    assert [m.body for m in got] == [b"pop me"], answers
    assert got[0].system_properties.delivery_attempt == 1 and got[0].system_properties.receipt_handle
    ack = stub.AckMessage(mpb.AckMessageRequest(
        group=pb.Resource(name="GrpcPopGroup"), topic=pb.Resource(name="GrpcSub"),
        entries=[mpb.AckMessageEntry(message_id=got[0].system_properties.message_id,
                                     receipt_handle=got[0].system_properties.receipt_handle)]),
        metadata=metadata("grpc-consumer-3"))  # fmt: skip
    assert ack.status.code == pb.OK, ack


def pb_duration(ms: int) -> Any:
    from google.protobuf.duration_pb2 import Duration

    d = Duration()
    d.FromMilliseconds(ms)
    return d


# -- ACL -------------------------------------------------------------------------------------

PLAIN_ACL = """\
accounts:
  - accessKey: grpcAdmin
    secretKey: grpcSecret1
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: grpcReader
    secretKey: grpcSecret2
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyCluster]:
    home = tmp_path_factory.mktemp("rocketmq-home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    c = ProxyCluster(
        tmp_path_factory.mktemp("grpc-acl"), f"aclEnable=true\nrocketmqHome={home}\n", {"maxMessageSize": MAX_BODY}
    )
    try:
        from pumice.client import MQAdmin

        with MQAdmin(c.ns, access_key="grpcAdmin", secret_key="grpcSecret1") as admin:
            admin.create_topic("GrpcAcl", cluster="TestCluster", read_queue_nums=1, write_queue_nums=1)
        yield c
    finally:
        c.close()


def test_acl_checks_the_mqv2_signature(acl_cluster: ProxyCluster) -> None:
    def route(md: list[tuple[str, str]]) -> Any:
        return stub.QueryRoute(mpb.QueryRouteRequest(topic=pb.Resource(name="GrpcAcl")), metadata=md)

    with grpc.insecure_channel(f"127.0.0.1:{acl_cluster.grpc_port}") as channel:
        stub = mpb_grpc.MessagingServiceStub(channel)
        ok = eventually(lambda: route(metadata(keys=("grpcAdmin", "grpcSecret1"))).status.code == pb.OK or None,
                        what="the route of GrpcAcl")  # fmt: skip
        assert ok
        for md, message_text in [
            (metadata(keys=("grpcAdmin", "wrongSecret")), "check signature failed."),
            (metadata(keys=("nobody", "x")), "User:nobody is not found."),
            (metadata(), "username cannot be null."),
        ]:
            r = route(md)
            assert (r.status.code, r.status.message) == (pb.UNAUTHORIZED, message_text), r
        # a reader may not send (PUB), and the refusal says which resource
        sent = stub.SendMessage(mpb.SendMessageRequest(messages=[message("GrpcAcl")]),
                                metadata=metadata(keys=("grpcReader", "grpcSecret2")))  # fmt: skip
        assert sent.status.code == pb.UNAUTHORIZED and "GrpcAcl" in sent.status.message, sent
        sent = stub.SendMessage(mpb.SendMessageRequest(messages=[message("GrpcAcl")]),
                                metadata=metadata(keys=("grpcAdmin", "grpcSecret1")))  # fmt: skip
        assert sent.status.code == pb.OK, sent


def test_tls_is_refused_when_tls_mode_is_disabled(cluster: ProxyCluster) -> None:
    """With tlsMode=disabled (Pumice's default) grpcio listens on the gRPC port itself, plain
    text only: a TLS client's handshake fails, nothing is served to it (permissive and
    enforcing: tests/integration/test_grpc_tls.py)."""
    with grpc.secure_channel(f"127.0.0.1:{cluster.grpc_port}", grpc.ssl_channel_credentials()) as channel:
        stub = mpb_grpc.MessagingServiceStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            stub.Heartbeat(mpb.HeartbeatRequest(client_type=pb.PRODUCER), metadata=metadata(), timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
