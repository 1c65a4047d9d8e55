"""The official Java v5 client (rocketmq-client-java 5.0.8, tests/java-v5grpc) against Pumice's
gRPC endpoint and RocketMQ 5.3.3's proxy in LOCAL mode, the same scenarios and exact counts for
both (``v5_server``, once per server per module): a Producer's normal and FIFO sends, a
SimpleConsumer receiving and acking exactly what was sent, a PushConsumer consuming it, and a
producer over TLS. Pumice runs with ``tlsMode=permissive`` and its test certificate, as 5.3.3's
proxy by default: every client here goes through the port's protocol negotiator, the plain ones
and the TLS one (the Java client trusts any certificate)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import java_v5grpc
from tests.helpers.pumice5 import PumiceV5
from tests.helpers.rocketmq5 import serve

# name -> how the module starts it (stopped after); None: the worker's shared RocketMQ 5.3.3
SERVERS: dict[str, Any] = {
    "rocketmq5": None,
    "pumice": lambda root: PumiceV5(root, "tlsMode=permissive\n"),
}


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_v5grpc.build()


@pytest.fixture(scope="module", params=sorted(SERVERS))
def v5_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Pumice (`pumice broker --enable-proxy`, started for the module) and RocketMQ 5.3.3."""
    yield from serve(request, tmp_path_factory, SERVERS)


def java(classpath: str, subcommand: str, server: Any, *args: str, home: Path) -> java_v5grpc.V5Run:
    return java_v5grpc.run(classpath, subcommand, server.grpc_endpoint, *args, home=home).ok()


def test_producer_normal_sends(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    v5_server.create_topic("J5Normal", queues=4)
    sent = java(classpath, "produce", v5_server, "--topic", "J5Normal", "--count", "5", "--body-prefix", "n-",
                home=tmp_path).of("sent")  # fmt: skip
    assert [e["body"] for e in sent] == [f"n-{i}" for i in range(5)]
    assert len({e["message_id"] for e in sent}) == 5 and all(e["message_id"] for e in sent)


def test_producer_over_tls(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    v5_server.create_topic("J5Tls", queues=4)
    sent = java(classpath, "produce", v5_server, "--topic", "J5Tls", "--count", "3", "--body-prefix", "t-", "--tls",
                home=tmp_path).of("sent")  # fmt: skip
    assert [e["body"] for e in sent] == [f"t-{i}" for i in range(3)]


def test_simple_consumer_receives_and_acks(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    v5_server.create_topic("J5Simple", queues=4)
    v5_server.create_group("J5SimpleGroup")
    java(classpath, "produce", v5_server, "--topic", "J5Simple", "--count", "5", "--body-prefix", "s-",
         home=tmp_path / "p")  # fmt: skip
    run = java(classpath, "simple-consume", v5_server, "--topic", "J5Simple", "--group", "J5SimpleGroup",
               "--count", "5", "--max-s", "40", home=tmp_path / "c")  # fmt: skip
    assert sorted(e["body"] for e in run.of("received")) == [f"s-{i}" for i in range(5)]
    assert len(run.of("acked")) == 5


def test_push_consumer_consumes(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    v5_server.create_topic("J5Push", queues=4)
    v5_server.create_group("J5PushGroup")
    java(classpath, "produce", v5_server, "--topic", "J5Push", "--count", "4", "--body-prefix", "p-",
         home=tmp_path / "p")  # fmt: skip
    run = java(classpath, "push-consume", v5_server, "--topic", "J5Push", "--group", "J5PushGroup", "--count", "4",
               "--max-s", "40", home=tmp_path / "c")  # fmt: skip
    assert sorted(e["body"] for e in run.of("consumed")) == [f"p-{i}" for i in range(4)]


def test_fifo_sends_and_receives_in_order(v5_server: Any, classpath: str, tmp_path: Path) -> None:
    v5_server.create_topic("J5Fifo", queues=4, message_type="FIFO")
    v5_server.create_group("J5FifoGroup", fifo=True)
    sent = java(classpath, "produce", v5_server, "--topic", "J5Fifo", "--count", "4", "--body-prefix", "f-",
                "--message-group", "g1", home=tmp_path / "p").of("sent")  # fmt: skip
    assert [e["body"] for e in sent] == [f"f-{i}" for i in range(4)]
    run = java(classpath, "simple-consume", v5_server, "--topic", "J5Fifo", "--group", "J5FifoGroup", "--count", "4",
               "--max-s", "40", home=tmp_path / "c")  # fmt: skip
    assert [e["body"] for e in run.of("received")] == [f"f-{i}" for i in range(4)]
    assert {e["message_group"] for e in run.of("received")} == {"g1"}
