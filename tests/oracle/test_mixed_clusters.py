"""Pumice and Apache RocketMQ 4.9.7 in one cluster (issue 17): RocketMQ's name server and
`pumice namesrv` side by side, and one RocketMQ broker and one `pumice broker` in the cluster
``MixedCluster``, each broker registered with both name servers.

* mqadmin (4.9.8) sees the same cluster, brokers and routes through either name server;
* a topic made with ``updateTopic -c`` lives on both brokers; the Java client's producer, through
  RocketMQ's name server, spreads its sends over both; a Java push consumer group, through Pumice's
  name server, gets every message from both brokers;
* the Pumice client does the same the other way round.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pumice.client import ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer
from tests.helpers.clusters import start
from tests.helpers.java_driver import JavaDriver
from tests.helpers.mqadmin import MQAdmin, mqadmin_classpath
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually
from tests.oracle.rocketmq_peer import JavaBroker, JavaNamesrv, stop_all

CLUSTER = "MixedCluster"
TOPIC = "MixedTopic"


@dataclass
class Mixed:
    java_ns: JavaNamesrv
    pumice_ns: str
    java_broker: JavaBroker
    pumice_broker_addr: str
    admin_java: MQAdmin
    admin_pumice: MQAdmin
    work: Path

    @property
    def both(self) -> str:
        return f"{self.java_ns.addr};{self.pumice_ns}"


@pytest.fixture(scope="module")
def mixed(peer_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mixed]:
    tmp = tmp_path_factory.mktemp("mixed")
    started: list = []
    try:
        java_ns = JavaNamesrv(tmp / "java-ns", free_port(), classpath=peer_classpath)
        started.append(java_ns)
        ns_port = free_port()
        (tmp / "namesrv.conf").write_text(f"listenPort={ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp}/kv.json\n")
        pumice_ns = start(["namesrv", "-c", str(tmp / "namesrv.conf")], "boot success")
        started.append(pumice_ns)
        both = f"{java_ns.addr};127.0.0.1:{ns_port}"
        jport = free_port()
        java_broker = JavaBroker(
            tmp / "java-broker",
            f"brokerClusterName={CLUSTER}\nbrokerName=broker-java\nbrokerId=0\nlistenPort={jport}\n"
            f"namesrvAddr={both}\nbrokerIP1=127.0.0.1\nstorePathRootDir={tmp}/java-store\n"
            f"storePathCommitLog={tmp}/java-store/commitlog\nflushDiskType=ASYNC_FLUSH\n"
            "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\nautoCreateTopicEnable=false\n",
            classpath=peer_classpath,
        )
        started.append(java_broker)
        pport = free_port()
        (tmp / "broker.conf").write_text(
            f"brokerClusterName={CLUSTER}\nbrokerName=broker-pumice\nlistenPort={pport}\nlistenHost=127.0.0.1\n"
            f"brokerIP1=127.0.0.1\nnamesrvAddr={both}\nstorePathRootDir={tmp}/pumice-store\n"
            "mapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\npreallocateCommitLog=false\n"
            "prefaultCommitLog=false\nautoCreateTopicEnable=false\n"
        )
        pumice_broker = start(["broker", "-c", str(tmp / "broker.conf")], "boot success")
        started.append(pumice_broker)
        classpath = mqadmin_classpath()
        yield Mixed(
            java_ns, f"127.0.0.1:{ns_port}", java_broker, f"127.0.0.1:{pport}",
            MQAdmin(classpath, java_ns.addr, tmp / "admin-java"),
            MQAdmin(classpath, f"127.0.0.1:{ns_port}", tmp / "admin-pumice"), tmp,
        )  # fmt: skip
    finally:
        stop_all(started)


def create_topic_on_both(mixed: Mixed) -> None:
    """Both brokers registered with both name servers, then TOPIC made on both brokers (mqadmin
    through RocketMQ's name server) and routed by both name servers."""

    def cluster_list(admin: MQAdmin) -> str | None:
        out = admin("clusterList")
        return out.stdout if out.rc == 0 and "broker-java" in out.stdout and "broker-pumice" in out.stdout else None

    for admin in (mixed.admin_java, mixed.admin_pumice):
        text = eventually(lambda a=admin: cluster_list(a), 60, "both brokers registered", every=0.5, retry_on=())
        rows = [line.split() for line in text.splitlines() if line.startswith(CLUSTER)]
        assert sorted(r[1] for r in rows) == ["broker-java", "broker-pumice"], text
        assert {r[2] for r in rows} == {"0"}  # both masters
    out = mixed.admin_java("updateTopic", "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4")
    assert out.rc == 0 and out.stdout.count("create topic to") == 2, out.describe()
    for admin in (mixed.admin_java, mixed.admin_pumice):

        def route(a: MQAdmin = admin) -> str | None:
            out = a("topicRoute", "-t", TOPIC)
            return out.stdout if out.rc == 0 and out.stdout.count('"readQueueNums":4') == 2 else None

        text = eventually(route, 60, "the route of both brokers", every=0.5, retry_on=())
        assert '"brokerName":"broker-java"' in text and '"brokerName":"broker-pumice"' in text, text


@pytest.fixture(scope="module")
def mixed_topic(mixed: Mixed) -> Mixed:
    """``mixed`` with TOPIC on both brokers, whichever test of the module runs first (a parallel
    run may start the module's fixture for a later test alone)."""
    create_topic_on_both(mixed)
    return mixed


def test_both_name_servers_show_both_brokers_and_the_topic_on_both(mixed: Mixed) -> None:
    create_topic_on_both(mixed)


def test_java_clients_spread_over_both_brokers(mixed_topic: Mixed, java_classpath: str) -> None:
    mixed = mixed_topic
    """Sends through RocketMQ's name server land on both brokers; a push group through Pumice's
    name server gets every one of them."""
    work = mixed.work / "java-clients"
    consumer = JavaDriver(java_classpath, work, "push", {"namesrv": mixed.pumice_ns, "topic": TOPIC,
                          "group": "CMixedJava", "count": 40, "duration": 90}, name="push")  # fmt: skip
    try:
        consumer.wait_event("started", 30)
        producer = JavaDriver(java_classpath, work, "produce", {"namesrv": mixed.java_ns.addr, "topic": TOPIC,
                              "count": 40, "label": "mix"}, name="produce")  # fmt: skip
        sent = [e for e in producer.wait(90) if e["event"] == "sent"]
        assert len(sent) == 40 and {e["brokerName"] for e in sent} == {"broker-java", "broker-pumice"}
        consumer.wait_for(lambda d: len(d.received()) >= 40, 60, "all 40 messages")
        time.sleep(1)
        got = consumer.received()
        assert sorted(m["bodyText"] for m in got) == sorted(f"mix-{e['i']}" for e in sent)
        assert {(m["brokerName"], m["queueId"], m["queueOffset"]) for m in got} == {
            (e["brokerName"], e["queueId"], e["queueOffset"]) for e in sent
        }
    finally:
        consumer.stop()


def test_the_pumice_client_spreads_over_both_brokers(mixed_topic: Mixed) -> None:
    mixed = mixed_topic
    got: list[str] = []
    lock = threading.Lock()

    def handle(msgs, ctx) -> ConsumeStatus:
        with lock:
            got.extend(m.body.decode() for m in msgs)
        return ConsumeStatus.SUCCESS

    consumer = PushConsumer("CMixedPy", mixed.java_ns.addr, consume_from_where=ConsumeFromWhere.FIRST)
    consumer.subscribe(TOPIC, "py")
    consumer.register_message_listener(handle)
    consumer.start()
    try:
        with Producer("PMixedPy", mixed.pumice_ns) as p:
            results = [p.send(Message(TOPIC, f"py-{i}".encode(), tags="py")) for i in range(24)]
        assert {r.message_queue.broker_name for r in results} == {"broker-java", "broker-pumice"}
        eventually(lambda: len(got) >= 24, 60, "all 24 messages", every=0.5, retry_on=())
        time.sleep(1)
    finally:
        consumer.shutdown()
    assert sorted(got) == sorted(f"py-{i}" for i in range(24))
    assert re.fullmatch(r"[0-9A-F]{32}", results[0].msg_id)
