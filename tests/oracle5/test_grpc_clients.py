"""The official Python v5 client (rocketmq-python-client 5.1.2, tests/peers5) against Pumice's
gRPC endpoint (`pumice broker --enable-proxy`) and against RocketMQ 5.3.3's proxy in LOCAL
mode, the same scenario and the same expectations for both (``v5_server``, once per server
per module): a Producer's normal, FIFO and transactional sends (commit, rollback, an orphan
recovered through the check-back), a SimpleConsumer receiving and acking exactly what was
sent; and raw gRPC calls of bad input answered with 5.3.3's status codes (a missing client id, an
unknown topic, a body over maxMessageSize, an empty body, a blank message id, a system property
name, a heartbeat before any settings)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proto import messaging_pb2_grpc as mpb_grpc
from tests.helpers import v5_python
from tests.helpers.pumice5 import PumiceV5
from tests.helpers.rocketmq5 import SHARED_PROXY_CONF, serve
from tests.integration.test_grpc_proxy import message, metadata

MAX_BODY = 64 * 1024  # the proxies' maxMessageSize here (SHARED_PROXY_CONF): the limit tested with small bodies
assert MAX_BODY == SHARED_PROXY_CONF["maxMessageSize"]
# name -> how the module starts it (stopped after); None: the worker's shared RocketMQ 5.3.3,
# whose SHARED_BROKER_CONF checks transactions back after 1 s as the Pumice broker here does
SERVERS: dict[str, Any] = {
    "rocketmq5": None,
    "pumice": lambda root: PumiceV5(
        root, "transactionTimeOut=1000\ntransactionCheckInterval=1000\n", {"maxMessageSize": MAX_BODY}
    ),
}


@pytest.fixture(scope="module", params=sorted(SERVERS))
def v5_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Pumice (`pumice broker --enable-proxy`, started for the module) and RocketMQ 5.3.3."""
    yield from serve(request, tmp_path_factory, SERVERS)


def _is_pumice(server: Any) -> bool:
    return isinstance(server, PumiceV5)


def test_producer_normal_sends(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    v5_server.create_topic("V5Normal", queues=4)
    run = v5_python.run("produce", v5_server.grpc_endpoint, "--topic", "V5Normal", "--count", "5",
                        "--body-prefix", "n-", "--tag", "TagA", "--keys", "k1", "--property", "color=blue",
                        home=tmp_path / "p").ok()  # fmt: skip
    sent = run.of("sent")
    assert [e["body"] for e in sent] == [f"n-{i}" for i in range(5)]
    assert len({e["message_id"] for e in sent}) == 5 and all(e["message_id"] for e in sent)


def test_producer_fifo_sends(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    v5_server.create_topic("V5Fifo", queues=4, message_type="FIFO")
    run = v5_python.run("produce", v5_server.grpc_endpoint, "--topic", "V5Fifo", "--count", "4",
                        "--body-prefix", "f-", "--message-group", "g1", home=tmp_path / "p").ok()  # fmt: skip
    assert [e["body"] for e in run.of("sent")] == [f"f-{i}" for i in range(4)]


@pytest.mark.parametrize("resolution", ["commit", "rollback"])
def test_producer_transactions(v5_server: Any, tmp_path: Path, v5_client: Path, resolution: str) -> None:
    topic = f"V5Tx{resolution.capitalize()}"
    v5_server.create_topic(topic, queues=4, message_type="TRANSACTION")
    run = v5_python.run("produce", v5_server.grpc_endpoint, "--topic", topic, "--count", "2",
                        "--transaction", resolution, home=tmp_path / "p").ok()  # fmt: skip
    sent = run.of("sent")
    assert len(sent) == 2 and all(e["transaction_id"] for e in sent)
    done = run.of("committed" if resolution == "commit" else "rolled_back")
    assert [e["message_id"] for e in done] == [e["message_id"] for e in sent]


def test_producer_orphaned_transaction_is_checked_back(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    v5_server.create_topic("V5TxOrphan", queues=4, message_type="TRANSACTION")
    run = v5_python.run("produce", v5_server.grpc_endpoint, "--topic", "V5TxOrphan", "--count", "1",
                        "--transaction", "unknown", "--check-answer", "commit", "--await-checks", "1",
                        "--check-wait-s", "90", "--linger-s", "1", home=tmp_path / "p", timeout_s=150).ok()  # fmt: skip
    (sent,) = run.of("sent")
    checked = run.of("checked")
    assert checked and checked[0]["message_id"] == sent["message_id"]


def test_simple_consumer_receives_and_acks(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    v5_server.create_topic("V5Simple", queues=4)
    v5_server.create_group("V5SimpleGroup")
    v5_python.run("produce", v5_server.grpc_endpoint, "--topic", "V5Simple", "--count", "5",
                  "--body-prefix", "s-", "--tag", "TagA", home=tmp_path / "p").ok()  # fmt: skip
    run = v5_python.run("simple-consume", v5_server.grpc_endpoint, "--topic", "V5Simple", "--group",
                        "V5SimpleGroup", "--count", "5", "--invisible-s", "15", "--await-s", "3", "--max-s", "40",
                        home=tmp_path / "c").ok()  # fmt: skip
    assert sorted(e["body"] for e in run.of("received")) == [f"s-{i}" for i in range(5)]
    assert len(run.of("acked")) == 5


# -- raw gRPC calls of bad input: the status codes 5.3.3 answers -----------------------------


@pytest.fixture(scope="module")
def stub(v5_server: Any) -> Iterator[Any]:
    v5_server.create_topic("RawTopic", queues=4, message_type=None)
    with grpc.insecure_channel(v5_server.grpc_endpoint) as channel:
        yield mpb_grpc.MessagingServiceStub(channel)


def send(stub: Any, m: Any, client_id: str | None = "raw-client") -> Any:
    return stub.SendMessage(mpb.SendMessageRequest(messages=[m]), metadata=metadata(client_id), timeout=10)


def test_a_good_send_is_ok(stub: Any) -> None:
    r = send(stub, message("RawTopic", b"fine"))
    assert r.status.code == pb.OK, r
    assert len(r.entries) == 1 and r.entries[0].status.code == pb.OK


def test_missing_client_id(stub: Any) -> None:
    assert send(stub, message("RawTopic"), client_id=None).status.code == pb.CLIENT_ID_REQUIRED


def test_unknown_topic(stub: Any) -> None:
    r = stub.QueryRoute(mpb.QueryRouteRequest(topic=pb.Resource(name="RawNoSuchTopic")), metadata=metadata(),
                        timeout=10)  # fmt: skip
    assert r.status.code == pb.TOPIC_NOT_FOUND, r


@pytest.mark.parametrize(
    ("build", "code"),
    [
        (lambda: message("RawTopic", b"x" * (MAX_BODY + 1)), pb.MESSAGE_BODY_TOO_LARGE),
        (lambda: message("RawTopic", b""), pb.MESSAGE_BODY_EMPTY),
        (lambda: message("RawTopic", message_id=" "), pb.ILLEGAL_MESSAGE_ID),
    ],
    ids=["body-over-max", "empty-body", "blank-message-id"],
)
def test_bad_messages(stub: Any, build: Any, code: int) -> None:
    assert send(stub, build()).status.code == code


def test_a_system_property_name(stub: Any) -> None:
    m = message("RawTopic")
    m.user_properties["UNIQ_KEY"] = "mine"
    assert send(stub, m).status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY


def test_heartbeat_before_settings(stub: Any) -> None:
    r = stub.Heartbeat(mpb.HeartbeatRequest(client_type=pb.PRODUCER), metadata=metadata("raw-no-settings"), timeout=10)
    assert r.status.code == pb.UNRECOGNIZED_CLIENT_TYPE, r
