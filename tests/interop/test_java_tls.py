"""The official Java client with TLS (``ClientConfig.setUseTLS(true)``, as ``-Dtls.enable=true``)
against `pumice namesrv` and `pumice broker` with ``tlsMode=enforcing``: it sends and pulls over
TLS; the same client without TLS is refused and stores nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pumice.client import MQAdmin
from pumice.remoting.tls import client_context
from tests.helpers.certs import make_ca, make_leaf
from tests.helpers.interop import InteropCluster
from tests.helpers.waiting import ROUTE_NOT_YET, eventually


@pytest.fixture(scope="module")
def interop_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InteropCluster]:
    certs = tmp_path_factory.mktemp("certs")
    ca = make_ca(certs)
    cert, key = make_leaf(ca, certs, "pumice")
    conf = f"tlsMode=enforcing\ntlsServerCertPath={cert}\ntlsServerKeyPath={key}\n"
    c = InteropCluster(tmp_path_factory.mktemp("cluster"), conf + "useTLS=true\n", conf)  # registers over TLS
    c.ca = ca.path  # type: ignore[attr-defined]
    try:
        yield c
    finally:
        c.close()


def test_java_client_over_tls(run_java, interop_cluster: InteropCluster) -> None:  # type: ignore[no-untyped-def]
    tls = client_context(ca_file=str(interop_cluster.ca))  # type: ignore[attr-defined]
    with MQAdmin(interop_cluster.ns, use_tls=tls) as admin:  # type: ignore[arg-type]
        admin.create_topic("JavaTlsTopic", cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
        eventually(lambda: admin.topic_route("JavaTlsTopic"), 20, "route of JavaTlsTopic", retry_on=ROUTE_NOT_YET)
    events = run_java("produce", topic="JavaTlsTopic", count=5, tls=True)
    assert not [e for e in events if e["event"] == "error"] and len([e for e in events if e["event"] == "sent"]) == 5
    got = run_java("pull", topic="JavaTlsTopic", group="JavaTlsReaders", tls=True)
    assert len([e for e in got if e["event"] == "received"]) == 5, got
    plain = run_java("produce", topic="JavaTlsTopic", count=1, retries=0, timeout_ms=3000, timeout_s=90)
    assert [e for e in plain if e["event"] == "error"], plain
    with MQAdmin(interop_cluster.ns, use_tls=tls) as admin:  # type: ignore[arg-type]
        assert sum(q.max_offset for q in admin.topic_status("JavaTlsTopic")) == 5


def test_java_client_and_the_test_certificate(run_java, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """4.9's defaults on both sides: a permissive server with its self-signed test certificate
    (no files), and the Java client's TLS, which trusts any certificate: TLS and plain clients
    both send."""
    c = InteropCluster(tmp_path, "tlsMode=permissive\nuseTLS=true\n", "tlsMode=permissive\n")
    try:
        with MQAdmin(c.ns) as admin:
            admin.create_topic("JavaTestCert", cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
            eventually(lambda: admin.topic_route("JavaTestCert"), 20, "route of JavaTestCert", retry_on=ROUTE_NOT_YET)
        for tls in (True, False):
            events = run_java("produce", namesrv=c.ns, topic="JavaTestCert", count=2, tls=tls)
            assert len([e for e in events if e["event"] == "sent"]) == 2, events
        with MQAdmin(c.ns) as admin:
            assert sum(q.max_offset for q in admin.topic_status("JavaTestCert")) == 4
    finally:
        c.close()
