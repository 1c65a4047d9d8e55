"""The pumice source and sink against a name server and broker with tlsMode=enforcing: with
``useTLS`` and ``tlsTrustCertPath`` the plan, the pulls and the sends go over TLS; without them
the read fails, and a tls* option without useTLS is an option error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client import MQAdmin
from pumice.remoting.tls import client_context
from tests.helpers.certs import make_ca, make_leaf
from tests.helpers.clusters import Cluster
from tests.helpers.spark import read
from tests.helpers.waiting import ROUTE_NOT_YET, eventually


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    certs = tmp_path_factory.mktemp("certs")
    ca = make_ca(certs)
    cert, key = make_leaf(ca, certs, "pumice")
    conf = f"tlsMode=enforcing\ntlsServerCertPath={cert}\ntlsServerKeyPath={key}\n"
    c = Cluster(tmp_path_factory.mktemp("broker"), conf + "useTLS=true\n", conf)  # registers over TLS
    try:
        with MQAdmin(c.ns, use_tls=client_context(ca_file=str(ca.path))) as admin:  # type: ignore[arg-type]
            admin.create_topic("SparkTlsTopic", cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
            eventually(lambda: admin.topic_route("SparkTlsTopic"), 20, "route of SparkTlsTopic", retry_on=ROUTE_NOT_YET)
        yield c, ca.path
    finally:
        c.close()


def test_write_and_read_over_tls(spark, tls_broker: tuple[Cluster, Path]) -> None:  # type: ignore[no-untyped-def]
    c, ca = tls_broker
    tls = {"useTLS": "true", "tlsTrustCertPath": str(ca)}
    df = spark.createDataFrame([("A", b"one"), ("B", b"two")], "tags string, body binary")
    writer = df.write.format("pumice").mode("append").option("namesrv", c.ns).option("topic", "SparkTlsTopic")
    for k, v in tls.items():
        writer = writer.option(k, v)
    writer.save()
    got = read(spark, c, topic="SparkTlsTopic", **tls).select("tags", "body").collect()
    assert sorted((r.tags, bytes(r.body)) for r in got) == [("A", b"one"), ("B", b"two")]
    with pytest.raises(Exception, match=r"cannot connect|closed|did not answer|no response"):
        read(spark, c, topic="SparkTlsTopic", timeoutMs="3000").count()
    with pytest.raises(Exception, match=r"the tls\* options need useTLS=true"):
        read(spark, c, topic="SparkTlsTopic", tlsTrustCertPath=str(ca)).count()
