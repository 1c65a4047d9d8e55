"""TLS and plain text on one gRPC port (5.3.3's ``ProxyAndTlsProtocolNegotiator``): a
``pumice broker --enable-proxy`` with ``tlsMode=permissive`` and a certificate for 127.0.0.1
serves the official Python client 5.1.2 with and without ``tls_enable`` on the same port, and a
client that stalls in its handshake or sends garbage blocks nobody."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proto import messaging_pb2_grpc as mpb_grpc
from pumice.proxy.protocol_negotiator import HANDSHAKE_TIMEOUT_S
from tests.helpers import v5_python
from tests.helpers.clients import create_topic
from tests.helpers.clusters import run
from tests.helpers.pumice5 import ProxyCluster
from tests.integration.test_grpc_proxy import message, metadata, stored


def write_certificate(path: Path) -> None:
    """A self-signed certificate for 127.0.0.1 and localhost and its key, in one PEM file."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2)).add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pkcs8, plain = serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    path.with_suffix(".key").write_bytes(key.private_bytes(serialization.Encoding.PEM, pkcs8, plain))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyCluster]:
    tmp = tmp_path_factory.mktemp("grpc-tls")
    write_certificate(tmp / "server")
    conf = f"tlsMode=permissive\ntlsServerCertPath={tmp / 'server.crt'}\ntlsServerKeyPath={tmp / 'server.key'}\n"
    c = ProxyCluster(tmp, conf)
    try:
        run(create_topic(c, "GrpcTls"))
        yield c
    finally:
        c.close()


def roots(cluster: ProxyCluster) -> str:
    return str(cluster.tmp / "server.crt")


def query_route(channel: Any, timeout_s: float = 5) -> Any:
    stub = mpb_grpc.MessagingServiceStub(channel)
    return stub.QueryRoute(mpb.QueryRouteRequest(topic=pb.Resource(name="GrpcTls")), metadata=metadata(),
                           timeout=timeout_s)  # fmt: skip


def tls_channel(cluster: ProxyCluster) -> Any:
    credentials = grpc.ssl_channel_credentials(Path(roots(cluster)).read_bytes())
    return grpc.secure_channel(cluster.grpc_endpoint, credentials)


def test_python_client_with_and_without_tls_on_one_port(cluster: ProxyCluster, tmp_path: Path) -> None:
    sent = v5_python.run("produce", cluster.grpc_endpoint, "--topic", "GrpcTls", "--count", "3", "--body-prefix",
                         "tls-", "--tls", "--tls-roots", roots(cluster), home=tmp_path / "tls")  # fmt: skip
    assert len(sent.ok().of("sent")) == 3, sent.describe()
    sent = v5_python.run("produce", cluster.grpc_endpoint, "--topic", "GrpcTls", "--count", "2",
                         "--body-prefix", "plain-", home=tmp_path / "plain")  # fmt: skip
    assert len(sent.ok().of("sent")) == 2, sent.describe()
    bodies = sorted(bytes(m.body).decode() for m in stored(cluster, "GrpcTls"))
    assert bodies == ["plain-0", "plain-1", "tls-0", "tls-1", "tls-2"]
    # and a raw grpcio client of each kind, its TLS one checking the certificate
    with tls_channel(cluster) as channel:
        assert query_route(channel).status.code == pb.OK
    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        assert query_route(channel).status.code == pb.OK


def test_stalled_and_garbage_connections_block_nobody(cluster: ProxyCluster) -> None:
    host, port = "127.0.0.1", cluster.grpc_port
    silent = socket.create_connection((host, port), timeout=5)
    half_hello = socket.create_connection((host, port), timeout=5)
    half_hello.sendall(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello's record header, then nothing
    garbage = socket.create_connection((host, port), timeout=5)
    garbage.sendall(b"GET / HTTP/1.1\r\n\r\n" + bytes(range(256)))
    try:
        started = time.monotonic()
        with tls_channel(cluster) as channel:
            assert query_route(channel).status.code == pb.OK
        with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
            stub = mpb_grpc.MessagingServiceStub(channel)
            answer = stub.SendMessage(mpb.SendMessageRequest(messages=[message("GrpcTls", b"beside-stalled")]),
                                      metadata=metadata(), timeout=5)  # fmt: skip
            assert answer.status.code == pb.OK, answer
        assert time.monotonic() - started < 4
        # garbage is answered by closing; a stalled handshake ends within the bound
        garbage.settimeout(5)
        while garbage.recv(4096):
            pass
        for sock in (silent, half_hello):
            sock.settimeout(HANDSHAKE_TIMEOUT_S + 5)
            waited = time.monotonic()
            while sock.recv(4096):
                pass
            assert time.monotonic() - waited < HANDSHAKE_TIMEOUT_S + 3
    finally:
        for sock in (silent, half_hello, garbage):
            sock.close()


def client_ports(server_port: int) -> list[int]:
    """The local ports of this machine's established TCP connections to ``server_port`` on
    127.0.0.1 (grpcio's may be IPv6 sockets with a v4-mapped address: tcp6)."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, remote, state = line.split()[1:4]
            address, port = remote.split(":")
            if state == "01" and address.endswith("0100007F") and int(port, 16) == server_port:
                out.append(int(local.split(":")[1], 16))
    return out


def test_the_proxy_sees_the_clients_address_not_the_splices(cluster: ProxyCluster) -> None:
    """A message sent without born_host gets the caller's address as __BORNHOST (5.3.3's
    proxy): the client's own port, though the grpc server's connection is the negotiator's."""
    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        stub = mpb_grpc.MessagingServiceStub(channel)
        answer = stub.SendMessage(mpb.SendMessageRequest(messages=[message("GrpcTls", b"whose-address")]),
                                  metadata=metadata(), timeout=5)  # fmt: skip
        assert answer.status.code == pb.OK, answer
        ports = client_ports(cluster.grpc_port)
    (m,) = [m for m in stored(cluster, "GrpcTls") if bytes(m.body) == b"whose-address"]
    assert m.properties["__BORNHOST"] in {f"127.0.0.1:{p}" for p in ports}, (m.properties, ports)
