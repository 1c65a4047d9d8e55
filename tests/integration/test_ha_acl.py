"""A master and a slave with aclEnable=true (real processes): the CommitLog reaches the slave
over the HA port, which has no ACL (as 4.9); the slave's SlaveSynchronize calls are not signed
(as 4.9), so the master refuses them until the slave's address is in its
globalWhiteRemoteAddresses, and then the slave copies the master's topics."""

from __future__ import annotations

import os
import time

import pytest

from pumice.client import Message, MQAdmin, Producer
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


def test_replication_with_acl_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    acl = home / "conf" / "plain_acl.yml"
    acl.write_text(PLAIN_ACL)
    c = HACluster(tmp_path, extra_conf=f"aclEnable=true\nrocketmqHome={home}\n")
    try:
        with MQAdmin(c.ns, **KEYS) as admin:  # type: ignore[arg-type]
            admin.create_topic("HaAclTopic", cluster="HACluster", read_queue_nums=2, write_queue_nums=2)
            eventually(lambda: admin.topic_route("HaAclTopic"), 20, "route of HaAclTopic", retry_on=ROUTE_NOT_YET)
        with Producer("HaAclProducer", c.ns, **KEYS) as p:  # type: ignore[arg-type]
            for i in range(5):
                assert p.send(Message("HaAclTopic", b"m%d" % i)).send_status.name == "SEND_OK"
        c.start_slave()
        eventually(lambda: same_commit_log(c), 20, "the slave's CommitLog equals the master's (HA: no ACL)")
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


pytestmark = pytest.mark.timeout(120)
