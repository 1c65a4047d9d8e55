"""TLS on `pumice namesrv` and `pumice broker` (tlsMode, real processes on loopback): enforcing
serves TLS only, permissive serves TLS and plain connections on one port, a client certificate
is required when asked (an expired one is refused), a renewed certificate is served to new
connections without a restart, and a refused connection stores nothing."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from pumice.client import Message, MQAdmin, MQClientError, Producer
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.remoting.tls import client_context
from tests.helpers.certs import make_ca, make_leaf
from tests.helpers.clusters import Cluster, run
from tests.helpers.waiting import ROUTE_NOT_YET, eventually

REFUSED = (RemotingConnectError, RemotingTimeoutError)  # closed at once, or never answered


def tls_conf(mode: str, cert: Path, key: Path, extra: str = "") -> str:
    return f"tlsMode={mode}\ntlsServerCertPath={cert}\ntlsServerKeyPath={key}\n{extra}"


def served_cn(port: int, ctx: ssl.SSLContext) -> str:
    """The common name of the certificate a new TLS connection to ``port`` is served."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
    ):
        der = s.getpeercert(binary_form=True)  # also when the context verifies nothing
        assert der is not None
        cn = x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return str(cn[0].value)


def ping(addr: str, ctx: ssl.SSLContext | None) -> int:
    """GET_BROKER_RUNTIME_INFO (28) over a fresh connection: the answer's code."""

    async def call() -> int:
        c = RemotingClient(connect_timeout_s=5, ssl_context=ctx)
        try:
            return (await c.invoke(addr, RemotingCommand(code=28), 5)).code
        finally:
            await c.close()

    return run(call(), 30)


def test_enforcing_serves_tls_only(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    cert, key = make_leaf(ca, tmp_path, "broker")
    # the name server takes TLS only too: the broker registers over TLS (useTLS)
    c = Cluster(tmp_path, tls_conf("enforcing", cert, key, "useTLS=true\n"), tls_conf("enforcing", cert, key))
    tls = client_context(ca_file=str(ca.path))
    try:
        with MQAdmin(c.ns, use_tls=tls) as admin:  # type: ignore[arg-type]
            admin.create_topic("TlsTopic", cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
            eventually(lambda: admin.topic_route("TlsTopic"), 20, "route of TlsTopic", retry_on=ROUTE_NOT_YET)
        with Producer("TlsProducer", c.ns, use_tls=tls) as p:  # type: ignore[arg-type]
            for i in range(3):
                assert p.send(Message("TlsTopic", b"over tls %d" % i)).send_status.name == "SEND_OK"
        assert ping(c.br, tls) == 0
        # a plain connection is closed at its first byte; one that trusts another CA fails its handshake
        with pytest.raises(REFUSED):
            ping(c.br, None)
        with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            other = tmp_path / "other"
            other.mkdir()
            ping(c.br, client_context(ca_file=str(make_ca(other, "Other CA").path)))
        with pytest.raises(MQClientError), Producer("PlainProducer", c.ns) as p:  # the name server refuses it
            p.send(Message("TlsTopic", b"plain"))
        with MQAdmin(c.ns, use_tls=tls) as admin:  # type: ignore[arg-type]
            assert sum(q.max_offset for q in admin.topic_status("TlsTopic")) == 3
        # pumice admin: --tls-ca, or refused
        cli = [sys.executable, "-m", "pumice.cli", "admin", "topicStatus", "-n", c.ns, "-t", "TlsTopic"]
        p = subprocess.run([*cli, "--tls-ca", str(ca.path)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and "broker-t" in p.stdout, p
        p = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and p.stderr.startswith("Error: "), p
    finally:
        c.close()


def test_permissive_serves_both_on_one_port(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    cert, key = make_leaf(ca, tmp_path, "broker")
    c = Cluster(tmp_path, tls_conf("permissive", cert, key), tls_conf("permissive", cert, key))
    try:
        assert ping(c.br, client_context(ca_file=str(ca.path))) == 0
        assert ping(c.br, None) == 0
        with Producer("PlainProducer", c.ns) as p:
            assert p.send(Message("TBW102Auto", b"plain")).send_status.name == "SEND_OK"
    finally:
        c.close()


def test_the_test_certificate_without_files(tmp_path: Path) -> None:
    """tlsTestModeEnable (true, 4.9's default) without certificate files: a self-signed
    certificate for localhost, which clients that trust any certificate accept (4.9's client
    default) and clients that verify refuse; false: permissive is plain only."""
    c = Cluster(tmp_path, "tlsMode=enforcing\nuseTLS=true\n", "tlsMode=enforcing\n")
    trust_any = client_context(verify=False)
    try:
        assert served_cn(c.broker_port, trust_any) == "localhost"
        assert ping(c.br, trust_any) == 0
        with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            ping(c.br, client_context())
        with pytest.raises(REFUSED):
            ping(c.br, None)
        with Producer("TestCertProducer", c.ns, use_tls=trust_any) as p:  # registered over TLS (useTLS)
            assert p.send(Message("TBW102Auto", b"over the test certificate")).send_status.name == "SEND_OK"
    finally:
        c.close()
    off = tmp_path / "off"
    off.mkdir()
    c = Cluster(off, "tlsMode=permissive\ntlsTestModeEnable=false\n")
    try:
        assert ping(c.br, None) == 0
        with pytest.raises(REFUSED):
            ping(c.br, trust_any)
    finally:
        c.close()


def test_client_certificates_and_a_renewed_server_certificate(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    cert, key = make_leaf(ca, tmp_path, "broker-old")
    good = make_leaf(ca, tmp_path, "client-good", server=False)
    expired = make_leaf(ca, tmp_path, "client-expired", server=False, expired=True)
    extra = f"tlsServerNeedClientAuth=require\ntlsServerTrustCertPath={ca.path}\n"
    c = Cluster(tmp_path, tls_conf("enforcing", cert, key, extra))
    try:
        with_good = client_context(ca_file=str(ca.path), cert_file=str(good[0]), key_file=str(good[1]))
        assert ping(c.br, with_good) == 0
        with pytest.raises(REFUSED):  # the server refuses the handshake
            ping(c.br, client_context(ca_file=str(ca.path), cert_file=str(expired[0]), key_file=str(expired[1])))
        with pytest.raises(REFUSED):  # no client certificate at all
            ping(c.br, client_context(ca_file=str(ca.path)))
        # renew: new files in place; new connections get the new certificate, no restart
        assert served_cn(c.broker_port, with_good) == "broker-old"
        new_cert, new_key = make_leaf(ca, tmp_path, "broker-new")
        os.replace(new_key, key)
        os.replace(new_cert, cert)
        later = time.time() + 2
        os.utime(cert, (later, later))
        eventually(lambda: served_cn(c.broker_port, with_good) == "broker-new", 10, "the renewed certificate served")
        assert ping(c.br, with_good) == 0
    finally:
        c.close()
