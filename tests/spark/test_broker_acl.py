"""The pumice source and sink against a broker with aclEnable=true: with ``accessKey`` and
``secretKey`` every request (plan, pulls, sends) is signed and served; without them the write and
the read fail with the broker's ACL remark, and nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client import MQAdmin
from tests.helpers.clusters import Cluster
from tests.helpers.spark import read
from tests.helpers.waiting import ROUTE_NOT_YET, eventually

PLAIN_ACL = """\
accounts:
  - accessKey: sparkUser1
    secretKey: sparkSecret1
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: adminUser
    secretKey: adminSecret1
    admin: true
"""
KEYS = {"accessKey": "sparkUser1", "secretKey": "sparkSecret1"}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("rocketmq-home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    c = Cluster(tmp_path_factory.mktemp("broker"), f"aclEnable=true\nrocketmqHome={home}\n")
    try:
        with MQAdmin(c.ns, access_key="adminUser", secret_key="adminSecret1") as admin:
            admin.create_topic("SparkAclTopic", cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
            eventually(lambda: admin.topic_route("SparkAclTopic"), 20, "route of SparkAclTopic", retry_on=ROUTE_NOT_YET)
        yield c
    finally:
        c.close()


def write(spark, c: Cluster, rows: list[tuple[str, bytes]], **options: str) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame(rows, "tags string, body binary")
    writer = df.write.format("pumice").mode("append").option("namesrv", c.ns).option("topic", "SparkAclTopic")
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.save()


def test_signed_write_and_read(spark, acl_broker: Cluster) -> None:  # type: ignore[no-untyped-def]
    write(spark, acl_broker, [("A", b"one"), ("B", b"two"), ("A", b"three")], **KEYS)
    got = read(spark, acl_broker, topic="SparkAclTopic", **KEYS).select("tags", "body").collect()
    assert sorted((r.tags, bytes(r.body)) for r in got) == [("A", b"one"), ("A", b"three"), ("B", b"two")]


def test_unsigned_write_and_read_are_refused(spark, acl_broker: Cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    before = read(spark, acl_broker, topic="SparkAclTopic", **KEYS).count()
    with pytest.raises(Exception, match="No accessKey is configured"):
        write(spark, acl_broker, [("A", b"unsigned")])
    with pytest.raises(Exception, match="No accessKey is configured"):
        read(spark, acl_broker, topic="SparkAclTopic").count()
    with pytest.raises(Exception, match="give both options accessKey and secretKey"):
        read(spark, acl_broker, topic="SparkAclTopic", accessKey="sparkUser1").count()
    assert read(spark, acl_broker, topic="SparkAclTopic", **KEYS).count() == before
