"""A `pumice namesrv` with aclEnable=true (beyond 4.9, as RocketMQ 5's name server): every
state-changing request needs a valid signature of an admin account from its plain_acl.yml, and
changes nothing otherwise; the read-only codes stay open. A `pumice broker` with
namesrvAccessKey signs its registrations; one without is refused. `pumice admin` signs its
name-server writes with its keys."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from pumice.acl.permission import NAMESRV_WRITE_CODES
from pumice.common.acl_signer import SessionCredentials
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, call, register, register_body, req, start, stop
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually

PLAIN_ACL = """\
accounts:
  - accessKey: brokerUser1
    secretKey: brokerSecret1
    admin: true
  - accessKey: adminUser
    secretKey: adminSecret1
    admin: true
  - accessKey: plainUser1
    secretKey: plainSecret1
    defaultTopicPerm: PUB|SUB
"""
ADMIN = SessionCredentials("adminUser", "adminSecret1")
USER = SessionCredentials("plainUser1", "plainSecret1")
FORGED = SessionCredentials("adminUser", "notTheSecret")
HIJACK = "127.0.0.1:1"  # a broker address nobody listens on


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("rocketmq-home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return home


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("cluster"),
        f"rocketmqHome={home}\nnamesrvAccessKey=brokerUser1\n",
        ns_conf=f"aclEnable=true\nrocketmqHome={home}\n",
    )
    try:
        yield c
    finally:
        c.close()


def writes() -> dict[int, RemotingCommand]:
    """One request of each state-changing code, aimed at the broker the fixture registered."""
    broker = {"brokerName": "broker-t", "brokerAddr": HIJACK, "clusterName": "TestCluster", "brokerId": 0}
    made = {
        RequestCode.REGISTER_BROKER: register("broker-t", HIJACK, {"HijackTopic": 4}),
        RequestCode.UNREGISTER_BROKER: req(RequestCode.UNREGISTER_BROKER, **broker),
        RequestCode.QUERY_DATA_VERSION: req(
            RequestCode.QUERY_DATA_VERSION, orjson.dumps({"timestamp": 1, "counter": 1}), **broker
        ),
        RequestCode.DELETE_TOPIC_IN_NAMESRV: req(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="TBW102"),
        RequestCode.WIPE_WRITE_PERM_OF_BROKER: req(RequestCode.WIPE_WRITE_PERM_OF_BROKER, brokerName="broker-t"),
        RequestCode.ADD_WRITE_PERM_OF_BROKER: req(RequestCode.ADD_WRITE_PERM_OF_BROKER, brokerName="broker-t"),
        RequestCode.UPDATE_NAMESRV_CONFIG: req(RequestCode.UPDATE_NAMESRV_CONFIG, b"orderMessageEnable=true\n"),
        RequestCode.PUT_KV_CONFIG: req(RequestCode.PUT_KV_CONFIG, namespace="NS", key="k", value="hijacked"),
        RequestCode.DELETE_KV_CONFIG: req(RequestCode.DELETE_KV_CONFIG, namespace="NS", key="k"),
    }
    assert set(made) == NAMESRV_WRITE_CODES  # every one of them is tried
    return made


def snapshot(c: Cluster) -> tuple[bytes, bytes, int, bytes]:
    """The routes, the cluster, the KV entry and the config, read unsigned (reads stay open)."""
    route, info, kv, config = call(
        c.ns, None,
        req(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TBW102"),
        req(RequestCode.GET_BROKER_CLUSTER_INFO),
        req(RequestCode.GET_KV_CONFIG, namespace="NS", key="k"),
        req(RequestCode.GET_NAMESRV_CONFIG),
    )  # fmt: skip
    assert route.code == info.code == config.code == ResponseCode.SUCCESS, (route.remark, info.remark)
    return bytes(route.body), bytes(info.body), kv.code, bytes(config.body)


def registered(c: Cluster) -> bool:
    (info,) = call(c.ns, None, req(RequestCode.GET_BROKER_CLUSTER_INFO))
    return c.br in bytes(info.body).decode()


@pytest.mark.parametrize(
    ("keys", "why"),
    [(None, "No accessKey is configured"), (FORGED, "Check signature failed for accessKey=adminUser"),
     (USER, "Need admin permission for request code=")],
    ids=["unsigned", "wrong-signature", "not-admin"],
)  # fmt: skip
def test_writes_refused_change_nothing(cluster: Cluster, keys: SessionCredentials | None, why: str) -> None:
    eventually(lambda: registered(cluster), 20, "the signed broker registered")
    before = snapshot(cluster)
    assert HIJACK not in before[0].decode() and before[2] == ResponseCode.QUERY_NOT_FOUND
    made = writes()
    for code, r in zip(made, call(cluster.ns, keys, *made.values()), strict=True):
        remark = r.remark or ""
        assert r.code == ResponseCode.SYSTEM_ERROR and "AclException" in remark and why in remark, (code, r.remark)
    after = snapshot(cluster)
    assert after[1:] == before[1:]
    assert orjson.loads(after[0])["brokerDatas"] == orjson.loads(before[0])["brokerDatas"]


def test_an_admin_signature_is_accepted(cluster: Cluster) -> None:
    eventually(lambda: registered(cluster), 20, "the signed broker registered")
    try:
        # one connection: the name server drops a broker whose registering connection closes
        put, reg, kv, route = call(
            cluster.ns, ADMIN,
            req(RequestCode.PUT_KV_CONFIG, namespace="NS", key="k", value="by-admin"),
            req(RequestCode.REGISTER_BROKER, register_body({"AdminTopic": 2}), brokerName="broker-x",
                brokerAddr=HIJACK, clusterName="OtherCluster", brokerId=0, haServerAddr="", compressed="false"),
            req(RequestCode.GET_KV_CONFIG, namespace="NS", key="k"),
            req(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="AdminTopic"),
        )  # fmt: skip
        assert put.code == reg.code == ResponseCode.SUCCESS, (put.remark, reg.remark)
        assert kv.ext_fields["value"] == "by-admin" and route.code == ResponseCode.SUCCESS
    finally:
        done = call(
            cluster.ns, ADMIN,
            req(RequestCode.DELETE_KV_CONFIG, namespace="NS", key="k"),
            req(RequestCode.UNREGISTER_BROKER, brokerName="broker-x", brokerAddr=HIJACK, clusterName="OtherCluster",
                brokerId=0),
        )  # fmt: skip
        assert [r.code for r in done] == [ResponseCode.SUCCESS] * 2


def test_a_broker_without_keys_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "unsigned.conf"
    conf.write_text(
        (cluster.tmp / "broker.conf").read_text().replace("namesrvAccessKey=brokerUser1\n", "")
        .replace(f"listenPort={cluster.broker_port}", f"listenPort={port}")
        .replace("brokerName=broker-t", "brokerName=broker-unsigned")
        .replace(f"storePathRootDir={cluster.tmp / 'store'}", f"storePathRootDir={tmp_path / 'store'}")
    )  # fmt: skip
    proc = start(["broker", "-c", str(conf)], "boot success")
    try:
        eventually(
            lambda: any("refused the registration" in line and "No accessKey is configured" in line
                        for line in getattr(proc, "output_lines", [])),
            20, "the name server refusing the unsigned registration",
        )  # fmt: skip
        assert f"127.0.0.1:{port}" not in snapshot(cluster)[1].decode()
    finally:
        stop(proc)


def pumice_admin(ns: str, keys: SessionCredentials | None, *args: str) -> subprocess.CompletedProcess[str]:
    signing = ["--access-key", keys.access_key, "--secret-key", keys.secret_key] if keys else []
    env_free = {"PUMICE_ACCESS_KEY": "", "PUMICE_SECRET_KEY": "", "ROCKETMQ_HOME": "/nonexistent"}
    return subprocess.run([sys.executable, "-m", "pumice.cli", "admin", args[0], "-n", ns, *signing, *args[1:]],
                          capture_output=True, text=True, timeout=60, env={**os.environ, **env_free})  # fmt: skip


def test_pumice_admin_signs_namesrv_writes(cluster: Cluster) -> None:
    args = ("updateKvConfig", "-s", "CliNS", "-k", "ck", "-v", "cv")
    unsigned = pumice_admin(cluster.ns, None, *args)
    assert unsigned.returncode != 0 and "No accessKey is configured" in unsigned.stdout + unsigned.stderr, unsigned
    signed = pumice_admin(cluster.ns, ADMIN, *args)
    assert signed.returncode == 0 and "success" in signed.stdout, signed
    (kv,) = call(cluster.ns, None, req(RequestCode.GET_KV_CONFIG, namespace="CliNS", key="ck"))
    assert kv.ext_fields.get("value") == "cv"
    gone = pumice_admin(cluster.ns, ADMIN, "deleteKvConfig", "-s", "CliNS", "-k", "ck")
    assert gone.returncode == 0, gone


pytestmark = pytest.mark.timeout(120)


def test_acl_cannot_be_switched_off_while_running(cluster: Cluster) -> None:
    (r,) = call(cluster.ns, ADMIN, req(RequestCode.UPDATE_NAMESRV_CONFIG, b"aclEnable=false\n"))
    assert r.code == ResponseCode.SYSTEM_ERROR and "aclEnable is read at start only" in (r.remark or ""), r.remark
    (still,) = call(cluster.ns, None, req(RequestCode.PUT_KV_CONFIG, namespace="NS", key="k", value="v"))
    assert "No accessKey is configured" in (still.remark or ""), still.remark


def test_acl_without_a_home_stops_start_up(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={free_port()}\nlistenHost=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n"
                    "aclEnable=true\n")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"}
    p = subprocess.run([sys.executable, "-m", "pumice.cli", "namesrv", "-c", str(conf)], capture_output=True,
                       text=True, timeout=60, env=env)  # fmt: skip
    assert p.returncode == 1 and "cannot start" in p.stderr and "aclEnable=true needs ROCKETMQ_HOME" in p.stderr, p
