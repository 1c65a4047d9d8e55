"""TLS on the HA port (real processes on loopback): with tlsMode=enforcing a slave whose broker
has useTLS=true replicates over TLS and acknowledges SYNC_MASTER sends, while a plain
connection to the HA port is closed without a byte of the CommitLog; a TLS connection gets the
same frames a plain one gets on a plain port, and a renewed certificate without a restart."""

from __future__ import annotations

import socket
import ssl
import struct
from pathlib import Path

import pytest

from pumice.client import Message, MQAdmin, Producer
from pumice.remoting.tls import client_context
from tests.helpers.certs import make_ca, make_leaf
from tests.helpers.clusters import HACluster, same_commit_log
from tests.helpers.waiting import ROUTE_NOT_YET, eventually

FRAME_HEADER = struct.Struct(">qi")


def served_cn(s: ssl.SSLSocket) -> str:
    subject = dict(x[0] for x in s.getpeercert()["subject"])  # type: ignore[index]
    return str(subject["commonName"])


def recv_exactly(s: socket.socket | ssl.SSLSocket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def test_replication_over_tls(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    cert, key = make_leaf(ca, tmp_path, "broker")
    tls = f"tlsMode=enforcing\ntlsServerCertPath={cert}\ntlsServerKeyPath={key}\n"
    c = HACluster(tmp_path, role="SYNC_MASTER", extra_conf=tls + "useTLS=true\n", ns_conf=tls)
    ctx = client_context(ca_file=str(ca.path))
    try:
        c.start_slave()
        with MQAdmin(c.ns, use_tls=ctx) as admin:  # type: ignore[arg-type]
            admin.create_topic("HaTlsTopic", cluster="HACluster", read_queue_nums=2, write_queue_nums=2)
            eventually(lambda: admin.topic_route("HaTlsTopic"), 20, "route of HaTlsTopic", retry_on=ROUTE_NOT_YET)
        with Producer("HaTlsProducer", c.ns, use_tls=ctx) as p:  # type: ignore[arg-type]
            # SYNC_MASTER: SEND_OK only once the slave acknowledged it, over the TLS HA connection
            def sent_ok() -> bool:
                return p.send(Message("HaTlsTopic", b"first")).send_status.name == "SEND_OK"

            eventually(sent_ok, 30, "a SYNC_MASTER send acknowledged by the slave")
            for i in range(20):
                assert p.send(Message("HaTlsTopic", b"x" * 3000 + b"%d" % i)).send_status.name == "SEND_OK"
        eventually(lambda: same_commit_log(c), 20, "the slave's CommitLog equals the master's")

        ha = ("127.0.0.1", c.master_port + 1)
        # plain: closed at its first byte, nothing of the CommitLog sent
        with socket.create_connection(ha, timeout=10) as plain:
            plain.sendall(struct.pack(">q", 0))
            try:
                assert plain.recv(64) == b""
            except ConnectionResetError:
                pass
        # TLS: the slave's report, then a frame from the start of the master's CommitLog
        with socket.create_connection(ha, timeout=10) as raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(struct.pack(">q", 0))
            phy, size = FRAME_HEADER.unpack(recv_exactly(s, FRAME_HEADER.size))
            assert phy == 0 and size >= 0, (phy, size)
            assert served_cn(s) == "broker"

        # a renewed certificate: new HA connections get it without a restart
        new_cert, new_key = make_leaf(ca, tmp_path, "broker-renewed")
        cert.write_bytes(new_cert.read_bytes())
        key.write_bytes(new_key.read_bytes())

        def renewed() -> bool:
            with (
                socket.create_connection(ha, timeout=10) as raw,
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
            ):
                return served_cn(s) == "broker-renewed"

        eventually(renewed, 15, "the renewed certificate on the HA port")
    finally:
        c.close()


pytestmark = pytest.mark.timeout(150)
