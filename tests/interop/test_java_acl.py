"""RocketMQ 4.9's plain ACL on `pumice broker` (aclEnable=true, $ROCKETMQ_HOME/conf/plain_acl.yml),
with the official Java client signing through its own AclClientRPCHook, and the Pumice client
signing with access_key/secret_key: signed requests within their perms are served; unsigned,
wrongly signed, unknown-account and denied ones are refused with 4.9's remark and store nothing;
a changed file takes effect while the broker runs; mqadmin's ACL commands, signed with the keys of
its conf/tools.yml, edit the file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pumice.client import Message, MQAdmin, Producer
from pumice.client.exceptions import MQBrokerError
from tests.helpers.interop import InteropCluster
from tests.helpers.mqadmin import ROCKETMQ_HOME, mqadmin_classpath
from tests.helpers.mqadmin import MQAdmin as JavaMQAdmin
from tests.helpers.waiting import ROUTE_NOT_YET, eventually

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
    # the name server's ACL on too (beyond 4.9): the Java clients only read from it, and the
    # broker signs its registrations as adminUser
    c = InteropCluster(tmp_path_factory.mktemp("cluster"),
                       f"aclEnable=true\nrocketmqHome={rocketmq_home}\nnamesrvAccessKey=adminUser\n",
                       ns_conf=f"aclEnable=true\nrocketmqHome={rocketmq_home}\n")  # fmt: skip
    try:
        with MQAdmin(c.ns, **ADMIN) as admin:  # topics made by the admin account, signed
            for topic in TOPICS:
                admin.create_topic(topic, cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
            for topic in TOPICS:
                eventually(lambda t=topic: admin.topic_route(t), 20, f"route of {topic}", retry_on=ROUTE_NOT_YET)
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


@pytest.fixture(scope="module")
def mqadmin(tmp_path_factory: pytest.TempPathFactory, interop_cluster: InteropCluster) -> JavaMQAdmin:
    """mqadmin signing as adminUser (its $ROCKETMQ_HOME/conf/tools.yml)."""
    home = tmp_path_factory.mktemp("mqadmin-home")
    (home / "conf").mkdir()
    shutil.copy(ROCKETMQ_HOME / "conf" / "logback_tools.xml", home / "conf")
    (home / "conf" / "tools.yml").write_text("accessKey: adminUser\nsecretKey: adminSecret1\n")
    return JavaMQAdmin(mqadmin_classpath(), interop_cluster.ns, tmp_path_factory.mktemp("mqadmin"), home)


def accounts(rocketmq_home: Path) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((rocketmq_home / "conf" / "plain_acl.yml").read_text())
    return {a["accessKey"]: a for a in data.get("accounts") or []}


def test_mqadmin_acl_commands(
    run_java, mqadmin: JavaMQAdmin, interop_cluster: InteropCluster, rocketmq_home: Path
) -> None:  # type: ignore[no-untyped-def]
    br, user = interop_cluster.br, {"access_key": "mqUser123", "secret_key": "mqSecret123"}
    try:
        out = mqadmin("updateAclConfig", "-b", br, "-a", "mqUser123", "-s", "mqSecret123", "-i", "DENY",
                      "-t", "AclTopicB=PUB", "-g", "AclGroupX=SUB").ok()  # fmt: skip
        assert f"create or update plain access config to {br} success." in out.stdout
        written = accounts(rocketmq_home)["mqUser123"]
        assert (written["secretKey"], written["topicPerms"], written["admin"]) == (
            "mqSecret123",
            ["AclTopicB=PUB"],
            False,
        )
        # served at once: the broker re-read its file when it wrote it
        assert errors(run_java("produce", topic="AclTopicB", count=1, retries=0, **user)) == []
        refused = errors(run_java("produce", topic="AclTopicA", count=1, retries=0, **user))
        assert "No default permission for topic:AclTopicA" in refused[0], refused
        # a bad update is refused (209) and leaves the file as it was
        mqadmin("updateAclConfig", "-b", br, "-a", "mqUser123", "-s", "short").failed(
            "CODE: 209", "The accessKey=mqUser123 and secretKey=***** cannot be null and length should longer than 6"
        )
        assert accounts(rocketmq_home)["mqUser123"]["secretKey"] == "mqSecret123"
        version = mqadmin("clusterAclConfigVersion", "-c", "TestCluster").ok()
        row = version.row("TestCluster")
        assert row[2:5] == [br, str(rocketmq_home / "conf" / "plain_acl.yml"), "1"], version.stdout
        mqadmin("updateGlobalWhiteAddr", "-b", br, "-g", "10.10.103.*,192.168.0.*").ok()
        data = yaml.safe_load((rocketmq_home / "conf" / "plain_acl.yml").read_text())
        assert data["globalWhiteRemoteAddresses"] == ["10.10.103.*", "192.168.0.*"]
        assert data["dataVersion"][0]["counter"] == 2
        mqadmin("updateGlobalWhiteAddr", "-b", br, "-g", "*.168.1.1").failed("CODE: 211", "*.168.1.1")
        mqadmin("deleteAclConfig", "-b", br, "-a", "mqUser123").ok()
        assert "mqUser123" not in accounts(rocketmq_home)
        gone = errors(run_java("produce", topic="AclTopicB", count=1, retries=0, **user))
        assert "No acl config for mqUser123" in gone[0], gone
        mqadmin("deleteAclConfig", "-b", br, "-a", "mqUser123").failed(
            "CODE: 210", "The accesskey[mqUser123] corresponding to accessConfig has been deleted failed."
        )
    finally:
        (rocketmq_home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)


def test_mqadmin_signs_name_server_writes(
    mqadmin: JavaMQAdmin, interop_cluster: InteropCluster, tmp_path: Path
) -> None:
    """The Java AclClientRPCHook's signature of a name-server write verifies at a Pumice name
    server with aclEnable; unsigned, the write is refused and not made."""
    unsigned = JavaMQAdmin(mqadmin_classpath(), interop_cluster.ns, tmp_path)  # no tools.yml
    unsigned("updateKvConfig", "-s", "AclNS", "-k", "k1", "-v", "unsigned").failed(
        "CODE: 1", "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
    )
    with MQAdmin(interop_cluster.ns) as admin:
        assert admin.get_kv_config("AclNS", "k1") is None
    mqadmin("updateKvConfig", "-s", "AclNS", "-k", "k1", "-v", "signed").ok()
    with MQAdmin(interop_cluster.ns) as admin:  # reads stay open
        assert admin.get_kv_config("AclNS", "k1") == "signed"
    mqadmin("deleteKvConfig", "-s", "AclNS", "-k", "k1").ok()


def test_mqadmin_without_tools_yml_is_refused(interop_cluster: InteropCluster, tmp_path: Path) -> None:
    unsigned = JavaMQAdmin(mqadmin_classpath(), interop_cluster.ns, tmp_path)  # the suite's home: no tools.yml
    unsigned("updateTopic", "-b", interop_cluster.br, "-t", "AclUnsignedTopic").failed(
        "CODE: 1", "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
    )


def pumice_admin(ns: str, *args: str, keys: dict[str, str] = ADMIN) -> subprocess.CompletedProcess[str]:
    signing = ["--access-key", keys["access_key"], "--secret-key", keys["secret_key"]] if keys else []
    return subprocess.run([sys.executable, "-m", "pumice.cli", "admin", args[0], "-n", ns, *signing, *args[1:]],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_pumice_admin_acl_commands(interop_cluster: InteropCluster, rocketmq_home: Path) -> None:
    ns, br = interop_cluster.ns, interop_cluster.br
    try:
        p = pumice_admin(ns, "updateAclConfig", "-b", br, "-a", "cliUser12", "-s", "cliSecret12", "-i", "SUB")
        assert p.returncode == 0 and f"create or update plain access config to {br} success." in p.stdout, p
        assert accounts(rocketmq_home)["cliUser12"]["defaultTopicPerm"] == "SUB"
        p = pumice_admin(ns, "clusterAclConfigVersion", "-c", "TestCluster", "--json")
        (info,) = json.loads(p.stdout)
        assert info["brokerAddr"] == br and info["allAclFileVersion"][str(rocketmq_home / "conf" / "plain_acl.yml")]
        p = pumice_admin(ns, "updateAclConfig", "-b", br, "-a", "cliUser12", "-s", "short")
        assert p.returncode == 1 and "UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209)" in p.stderr, p
        p = pumice_admin(ns, "deleteAccessConfig", "-b", br, "-a", "cliUser12")
        assert p.returncode == 0 and "cliUser12" not in accounts(rocketmq_home), p
        # unsigned: the broker's ACL refuses the admin command itself
        p = pumice_admin(ns, "updateGlobalWhiteAddr", "-b", br, "-g", "10.1.1.*", keys={})
        assert p.returncode == 1 and "No accessKey is configured" in p.stderr, p
    finally:
        (rocketmq_home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)


def test_no_code_54_as_in_4_9_8(interop_cluster: InteropCluster) -> None:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54) answered every account's secret key in plain text up
    to 4.9.7; 4.9.8 removed it (apache/rocketmq#7653), and so does Pumice: an admin's signed
    request gets REQUEST_CODE_NOT_SUPPORTED, an unsigned one the ACL's refusal, and neither a key."""
    from pumice.common.acl_signer import SessionCredentials
    from pumice.remoting.remoting_client import RemotingClient
    from pumice.remoting.remoting_command import RemotingCommand
    from tests.helpers.clusters import run

    async def call(signed: bool) -> RemotingCommand:
        c = RemotingClient()
        if signed:
            c.rpc_hook = SessionCredentials(ADMIN["access_key"], ADMIN["secret_key"]).sign_request
        try:
            return await c.invoke(interop_cluster.br, RemotingCommand(code=54), 5)
        finally:
            await c.close()

    signed = run(call(True))
    assert (signed.code, signed.remark) == (3, " request type 54 not supported")  # REQUEST_CODE_NOT_SUPPORTED
    unsigned = run(call(False))
    assert unsigned.code == 1 and "No accessKey is configured" in (unsigned.remark or "")
    for r in (signed, unsigned):
        assert not r.body and "Secret" not in (r.remark or "")
