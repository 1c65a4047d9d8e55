"""RocketMQ 4.9's plain ACL on `pumice broker` (aclEnable=true, $ROCKETMQ_HOME/conf/plain_acl.yml),
with the official Java client signing through its own AclClientRPCHook, and the Pumice client
signing with access_key/secret_key: signed requests within their perms are served; unsigned,
wrongly signed, unknown-account and denied ones are refused with 4.9's remark and store nothing;
a changed file takes effect while the broker runs."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pumice.client import Message, MQAdmin, Producer
from pumice.client.exceptions import MQBrokerError
from tests.helpers.interop import InteropCluster
from tests.helpers.waiting import eventually

PLAIN_ACL = """\
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopicA=PUB|SUB
      - AclTopicDeny=DENY
  - accessKey: adminUser
    secretKey: adminSecret1
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
"""
TOPICS = ("AclTopicA", "AclTopicB", "AclTopicDeny")
ADMIN = {"access_key": "adminUser", "secret_key": "adminSecret1"}
USER = {"access_key": "RocketMQ", "secret_key": "12345678"}


@pytest.fixture(scope="module")
def rocketmq_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("rocketmq-home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return home


@pytest.fixture(scope="module")
def interop_cluster(tmp_path_factory: pytest.TempPathFactory, rocketmq_home: Path) -> Iterator[InteropCluster]:
    c = InteropCluster(tmp_path_factory.mktemp("cluster"), f"aclEnable=true\nrocketmqHome={rocketmq_home}\n")
    try:
        with MQAdmin(c.ns, **ADMIN) as admin:  # topics made by the admin account, signed
            for topic in TOPICS:
                admin.create_topic(topic, cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
            for topic in TOPICS:
                eventually(lambda t=topic: admin.topic_route(t), 20, f"route of {topic}")
        yield c
    finally:
        c.close()


def max_offsets(ns: str, topic: str) -> list[int]:
    with MQAdmin(ns, **ADMIN) as admin:
        return sorted(q.max_offset for q in admin.topic_status(topic))


def errors(events: list[dict[str, Any]]) -> list[str]:
    return [e["error"] for e in events if e["event"] == "error"]


def test_java_client_signed_sends_and_pulls(run_java, interop_cluster: InteropCluster) -> None:  # type: ignore[no-untyped-def]
    events = run_java("produce", topic="AclTopicA", count=6, access_key="RocketMQ", secret_key="12345678")
    assert errors(events) == [] and len([e for e in events if e["event"] == "sent"]) == 6, events
    got = run_java("pull", topic="AclTopicA", group="AclReaders", access_key="RocketMQ", secret_key="12345678")
    assert len([e for e in got if e["event"] == "received"]) == 6, got


@pytest.mark.parametrize(
    ("keys", "topic", "remark"),
    [
        ({}, "AclTopicB", "No accessKey is configured"),
        ({**USER, "secret_key": "not-the-secret"}, "AclTopicB", "Check signature failed for accessKey=RocketMQ"),
        ({**USER, "access_key": "nobody12"}, "AclTopicB", "No acl config for nobody12"),
        (USER, "AclTopicB", "No default permission for topic:AclTopicB"),  # not in topicPerms: DENY
        (USER, "AclTopicDeny", "No default permission for topic:AclTopicDeny"),  # topicPerms: DENY
    ],
)  # fmt: skip
def test_java_sends_refused_store_nothing(run_java, interop_cluster: InteropCluster, keys, topic, remark) -> None:  # type: ignore[no-untyped-def]
    before = max_offsets(interop_cluster.ns, topic)
    events = run_java("produce", topic=topic, count=1, retries=0, **keys)
    (error,) = errors(events)
    assert "CODE: 1" in error and f"org.apache.rocketmq.acl.common.AclException: {remark}" in error, error
    assert max_offsets(interop_cluster.ns, topic) == before


def test_pumice_client_signs(interop_cluster: InteropCluster) -> None:
    with Producer("AclPumiceProducer", interop_cluster.ns, **USER) as p:  # type: ignore[arg-type]
        assert p.send(Message("AclTopicA", b"signed by pumice")).send_status.name == "SEND_OK"
    with Producer("AclPumiceProducer2", interop_cluster.ns) as p, pytest.raises(MQBrokerError) as e:
        p.send(Message("AclTopicA", b"unsigned"))
    assert "No accessKey is configured" in str(e.value)
    with MQAdmin(interop_cluster.ns, **USER) as admin, pytest.raises(MQBrokerError) as e:
        admin.create_topic("AclNotAdmin", cluster="TestCluster")
    assert "Need admin permission for request code=17, but accessKey=RocketMQ is not" in str(e.value)


def test_a_changed_file_takes_effect(run_java, interop_cluster: InteropCluster, rocketmq_home: Path) -> None:  # type: ignore[no-untyped-def]
    acl = rocketmq_home / "conf" / "plain_acl.yml"
    try:
        acl.write_text(PLAIN_ACL + "  - accessKey: lateUser1\n    secretKey: lateSecret1\n    defaultTopicPerm: PUB\n")
        os.utime(acl, (time.time() + 1, time.time() + 1))

        def served() -> bool:
            events = run_java("produce", topic="AclTopicB", count=1, retries=0, access_key="lateUser1",
                              secret_key="lateSecret1")  # fmt: skip
            return not errors(events)

        eventually(served, 30, "the new account served (the broker re-reads the file every 5 s)", every=1.0)
    finally:
        acl.write_text(PLAIN_ACL)
        os.utime(acl, (time.time() + 2, time.time() + 2))
