"""A master and a slave with aclEnable=true (real processes): the CommitLog reaches the slave
over the HA port, which the slave signs into with haAccessKey (4.9's HA port has
no ACL); the slave's SlaveSynchronize calls are not signed (as 4.9), so the master refuses
them until the slave's address is in its globalWhiteRemoteAddresses, and then the slave copies
the master's topics. A raw HA client that does not sign gets nothing and acknowledges nothing,
unless its address is in haWhiteRemoteAddresses (a RocketMQ slave cannot sign)."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from pumice.client import Message, MessageQueue, MQAdmin, Producer, SendStatus
from pumice.store.ha_auth import encode_auth_frame
from tests.helpers.clusters import HACluster, json_file, same_commit_log
from tests.helpers.waiting import ROUTE_NOT_YET, eventually

PLAIN_ACL = """\
accounts:
  - accessKey: adminUser
    secretKey: adminSecret1
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
"""
KEYS = {"access_key": "adminUser", "secret_key": "adminSecret1"}
HA_KEYS = "haAccessKey=adminUser\n"  # its secret key from the slave's own plain_acl.yml
FRAME = struct.Struct(">qi")


def test_replication_with_acl_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    acl = home / "conf" / "plain_acl.yml"
    acl.write_text(PLAIN_ACL)
    c = HACluster(tmp_path, extra_conf=f"aclEnable=true\nrocketmqHome={home}\n{HA_KEYS}")
    try:
        with MQAdmin(c.ns, **KEYS) as admin:  # type: ignore[arg-type]
            admin.create_topic("HaAclTopic", cluster="HACluster", read_queue_nums=2, write_queue_nums=2)
            eventually(lambda: admin.topic_route("HaAclTopic"), 20, "route of HaAclTopic", retry_on=ROUTE_NOT_YET)
        with Producer("HaAclProducer", c.ns, **KEYS) as p:  # type: ignore[arg-type]
            for i in range(5):
                assert p.send(Message("HaAclTopic", b"m%d" % i)).send_status.name == "SEND_OK"
        c.start_slave()
        eventually(lambda: same_commit_log(c), 20, "the slave's CommitLog equals the master's (HA: signed)")
        with MQAdmin(c.ns, **KEYS) as admin:  # type: ignore[arg-type]
            conf = admin.get_broker_config(c.s)
        # the account's secret is read from the ACL files: GET_BROKER_CONFIG has only its name
        assert conf.get("haAccessKey") == "adminUser"
        assert not any("adminSecret1" in v for v in conf.values()), conf
        assert c.master is not None
        eventually(
            lambda: any("refused request 21" in line and "No accessKey is configured" in line
                        for line in getattr(c.master, "output_lines", [])),
            20, "the master refusing the slave's unsigned GET_ALL_TOPIC_CONFIG",
        )  # fmt: skip
        topics = tmp_path / "s" / "config" / "topics.json"
        assert "HaAclTopic" not in json_file(topics).get("topicConfigTable", {})
        acl.write_text("globalWhiteRemoteAddresses:\n  - 127.0.0.1\n" + PLAIN_ACL)
        os.utime(acl, (time.time() + 1, time.time() + 1))
        # the watcher (5 s) and the slave's next round (10 s)
        eventually(lambda: "HaAclTopic" in json_file(topics).get("topicConfigTable", {}), 30,
                   "HaAclTopic copied to the slave once its address is white-listed")  # fmt: skip
    finally:
        c.close()


def _acl_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return home


class RawHAClient:
    """A HA client that stores nothing: it reports offset 0, then the end of every frame it
    reads (what a slave acknowledges), for at most ``seconds``."""

    def __init__(self, port: int, first: bytes = b"") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(first + struct.pack(">q", 0))
        self.received = 0
        self.closed_by_master = False

    def run(self, seconds: float) -> None:
        buf = b""
        deadline = time.monotonic() + seconds
        self.sock.settimeout(0.5)
        try:
            while time.monotonic() < deadline:
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    self.closed_by_master = True
                    return
                self.received += len(data)
                buf += data
                while len(buf) >= FRAME.size:
                    offset, size = FRAME.unpack_from(buf)
                    if len(buf) < FRAME.size + size:
                        break
                    buf = buf[FRAME.size + size :]
                    self.sock.sendall(struct.pack(">q", offset + size))  # acknowledged, never stored
        except ConnectionError:
            self.closed_by_master = True
        finally:
            self.sock.close()


@pytest.mark.parametrize("first", [b"", encode_auth_frame("adminUser", "wrongSecret")], ids=["plain", "bad-key"])
def test_a_rogue_ha_client_reads_nothing_and_acknowledges_nothing(tmp_path: Path, first: bytes) -> None:
    home = _acl_home(tmp_path)
    c = HACluster(tmp_path, role="SYNC_MASTER", extra_conf=f"aclEnable=true\nrocketmqHome={home}\n")
    try:
        with MQAdmin(c.ns, **KEYS) as admin:  # type: ignore[arg-type]
            admin.create_topic("RogueTopic", cluster="HACluster", read_queue_nums=1, write_queue_nums=1)
            eventually(lambda: admin.topic_route("RogueTopic"), 20, "route of RogueTopic", retry_on=ROUTE_NOT_YET)
        rogue = RawHAClient(c.master_port + 1, first)
        reader = threading.Thread(target=rogue.run, args=(12,), daemon=True)
        reader.start()
        statuses = []
        with Producer("RoguePG", c.ns, **KEYS) as p:  # type: ignore[arg-type]
            for i in range(5):
                statuses.append(
                    p.send(
                        Message("RogueTopic", b"secret-%d" % i), MessageQueue("RogueTopic", "broker-ha", 0)
                    ).send_status
                )
        reader.join(15)
        assert SendStatus.SEND_OK not in statuses, statuses
        assert rogue.received == 0 and rogue.closed_by_master
        assert c.master is not None
        eventually(lambda: any("HA connection" in line and "refused, closed" in line
                               for line in c.master.output_lines), 10, "the refusal in the master's log")  # type: ignore[union-attr]  # fmt: skip
    finally:
        c.close()


def test_an_unsigned_ha_client_from_a_white_listed_address_replicates(tmp_path: Path) -> None:
    home = _acl_home(tmp_path)
    conf = f"aclEnable=true\nrocketmqHome={home}\nhaWhiteRemoteAddresses=10.0.0.*;127.0.0.1\n"
    c = HACluster(tmp_path, role="SYNC_MASTER", extra_conf=conf)
    try:
        with MQAdmin(c.ns, **KEYS) as admin:  # type: ignore[arg-type]
            admin.create_topic("WhiteTopic", cluster="HACluster", read_queue_nums=1, write_queue_nums=1)
            eventually(lambda: admin.topic_route("WhiteTopic"), 20, "route of WhiteTopic", retry_on=ROUTE_NOT_YET)
        with Producer("WhitePG", c.ns, **KEYS) as p:  # type: ignore[arg-type]
            assert p.send(Message("WhiteTopic", b"before")).send_status is SendStatus.SLAVE_NOT_AVAILABLE
        client = RawHAClient(c.master_port + 1)  # as a RocketMQ slave: a plain report
        reader = threading.Thread(target=client.run, args=(3,), daemon=True)
        reader.start()
        reader.join(10)
        assert client.received > 0 and not client.closed_by_master
    finally:
        c.close()


pytestmark = pytest.mark.timeout(120)
