"""`pumice dev` serves RocketMQ 5's gRPC clients by default (`--grpc-port` chooses the port) and
not with `--no-proxy`."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proto import messaging_pb2_grpc as mpb_grpc
from tests.helpers.clusters import start, stop
from tests.helpers.ports import free_port

MD = [("x-mq-client-id", "dev-test"), ("x-mq-language", "PYTHON")]


def _heartbeat(port: int) -> object:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = mpb_grpc.MessagingServiceStub(channel)
        return stub.Heartbeat(mpb.HeartbeatRequest(client_type=pb.PRODUCER), metadata=MD, timeout=5)


def test_pumice_dev_serves_grpc_by_default_and_not_with_no_proxy(tmp_path: Path) -> None:
    ns, br, gp = free_port(), free_port(), free_port()
    args = ["dev", "--store-dir", str(tmp_path / "store"), "--namesrv-port", str(ns), "--broker-port", str(br),
            "--no-dashboard"]  # fmt: skip
    proc = start([*args, "--grpc-port", str(gp)], f"gRPC proxy (RocketMQ 5 clients) on 127.0.0.1:{gp}")
    try:
        r = _heartbeat(gp)
        assert r.status.code == pb.UNRECOGNIZED_CLIENT_TYPE, r  # the endpoint answers: no settings yet
    finally:
        stop(proc)
    proc = start([*args, "--no-proxy", "--grpc-port", str(gp)], "Ctrl-C stops")
    try:
        with pytest.raises(grpc.RpcError) as e:
            _heartbeat(gp)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        stop(proc)
    # the whole output, to its end (a banner would come after "Ctrl-C stops")
    assert not any("gRPC" in line for line in proc.output_lines)  # type: ignore[attr-defined]
