"""Pumice as RocketMQ 5's clients see it: a `pumice namesrv` and a `pumice broker
--enable-proxy` process on loopback (``ProxyCluster``), and the same as a ``V5Server`` of the
RocketMQ 5 reference suite (``PumiceV5``: name server, broker and gRPC addresses, topics with a
``message.type`` attribute, groups with consumeMessageOrderly and retryMaxTimes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from pumice.client import MQAdmin
from pumice.remoting.request_code import RequestCode
from tests.helpers.broker import create_topic as topic_fields
from tests.helpers.clusters import Cluster, call, req, start
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually


class ProxyCluster(Cluster):
    """A name server and a broker started with --enable-proxy on a free grpcServerPort
    (``proxy_conf`` into rmq-proxy.json, in $RMQ_PROXY_HOME/conf)."""

    def __init__(self, tmp: Path, extra_conf: str = "", proxy_conf: dict[str, Any] | None = None) -> None:
        self.grpc_port = free_port()
        conf = tmp / "proxy-home" / "conf"
        conf.mkdir(parents=True)
        (conf / "rmq-proxy.json").write_text(
            json.dumps({"grpcServerPort": self.grpc_port, "grpcShutdownTimeSeconds": 1, **(proxy_conf or {})})
        )
        self.proxy_home = conf.parent
        super().__init__(tmp, extra_conf)

    def start_broker(self) -> Any:
        return start(["broker", "-c", str(self.tmp / "broker.conf"), "--enable-proxy"], "gRPC proxy",
                     env={"RMQ_PROXY_HOME": str(self.proxy_home)})  # fmt: skip

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


class PumiceV5:
    """A ``V5Server`` (tests/helpers/rocketmq5.py) made of a ProxyCluster."""

    cluster_name = "TestCluster"

    def __init__(self, root: Path, extra_conf: str = "", proxy_conf: dict[str, Any] | None = None) -> None:
        self.cluster = ProxyCluster(root, extra_conf, proxy_conf)

    @property
    def namesrv(self) -> str:
        return self.cluster.ns

    @property
    def broker_addr(self) -> str:
        return self.cluster.br

    @property
    def grpc_endpoint(self) -> str:
        return self.cluster.grpc_endpoint

    @property
    def store_dir(self) -> Path:
        return self.cluster.tmp / "store"

    def create_topic(self, name: str, queues: int = 8, message_type: str | None = "NORMAL") -> None:
        create_topic(self.broker_addr, self.namesrv, name, queues, message_type)

    def create_group(self, name: str, fifo: bool = False, max_retries: int = 16) -> None:
        create_group(self.broker_addr, name, fifo, max_retries)

    def stop(self) -> None:
        self.cluster.close()


def create_topic(broker_addr: str, namesrv: str, name: str, queues: int = 8, message_type: str | None = "NORMAL"
                 ) -> None:  # fmt: skip
    """UPDATE_AND_CREATE_TOPIC with ``attributes=+message.type=<type>`` (what mqadmin 5's
    ``updateTopic -a`` sends) to a broker, Pumice's or RocketMQ 5.3.3's (without mqadmin's JVM),
    then waits for the name server's route."""
    extra = {"attributes": f"+message.type={message_type}"} if message_type is not None else {}
    (r,) = call(
        broker_addr, None, req(RequestCode.UPDATE_AND_CREATE_TOPIC, **topic_fields(name, queues, queues, **extra))
    )
    assert r.code == 0, r
    with MQAdmin(namesrv) as admin:
        eventually(lambda: admin.topic_route(name), what=f"the route of {name}")


def create_group(broker_addr: str, name: str, fifo: bool = False, max_retries: int = 16) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (mqadmin's ``updateSubGroup``): consumeMessageOrderly =
    fifo (a FIFO group for the v5 clients), retryMaxTimes = max_retries."""
    body = {"groupName": name, "consumeEnable": True, "consumeFromMinEnable": True,
            "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": max_retries, "brokerId": 0,
            "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True,
            "consumeMessageOrderly": fifo}  # fmt: skip
    (r,) = call(broker_addr, None, req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, orjson.dumps(body)))
    assert r.code == 0, r
