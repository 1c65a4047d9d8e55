"""TlsStream (TLS over a blocking socket, one reader and one writer thread at once) and the HA
port's sniff (accept_blocking): over socket pairs, with certificates from tests.helpers.certs."""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import threading
from pathlib import Path

import pytest

from pumice.remoting.tls import TlsContextHolder, TlsSettings, accept_blocking, client_context
from pumice.remoting.tls_stream import TlsStream
from tests.helpers.certs import make_ca, make_leaf

MB = 1024 * 1024


@pytest.fixture(scope="module")
def holder_factory(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    d: Path = tmp_path_factory.mktemp("certs")
    ca = make_ca(d)
    cert, key = make_leaf(ca, d, "server")

    def make(mode: str) -> TlsContextHolder:
        return TlsContextHolder(TlsSettings(mode=mode, cert_path=str(cert), key_path=str(key)))

    return make, client_context(ca_file=str(ca.path))


def pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    return a, b


def tls_pair(holder: TlsContextHolder, client_ctx: ssl.SSLContext) -> tuple[TlsStream, TlsStream]:
    a, b = pair()
    server = TlsStream(a, holder.context, server_side=True)
    client = TlsStream(b, client_ctx, server_side=False, host="127.0.0.1")
    t = threading.Thread(target=server.do_handshake)
    t.start()
    client.do_handshake()
    t.join(10)
    return server, client


def test_both_directions_at_once_from_two_threads_each(holder_factory) -> None:  # type: ignore[no-untyped-def]
    make, cctx = holder_factory
    server, client = tls_pair(make("enforcing"), cctx)
    assert client.version() in ("TLSv1.2", "TLSv1.3")
    payload = {"s2c": os.urandom(8 * MB), "c2s": os.urandom(8 * MB)}
    got: dict[str, str] = {}
    errors: list[BaseException] = []

    def write(stream: TlsStream, data: bytes) -> None:
        try:
            view = memoryview(data)
            for i in range(0, len(data), 40_000):  # frames of uneven size, some sent as two parts
                head, body = view[i : i + 12], view[i + 12 : i + 40_000]
                assert stream.sendmsg([head, body]) == len(head) + len(body)
        except BaseException as e:
            errors.append(e)

    def read(stream: TlsStream, n: int, name: str) -> None:
        h = hashlib.sha256()
        left = n
        try:
            while left:
                chunk = stream.recv(65536)
                assert chunk, "closed early"
                h.update(chunk)
                left -= len(chunk)
            got[name] = h.hexdigest()
        except BaseException as e:
            errors.append(e)

    threads = [
        threading.Thread(target=write, args=(server, payload["s2c"])),
        threading.Thread(target=write, args=(client, payload["c2s"])),
        threading.Thread(target=read, args=(client, 8 * MB, "s2c")),
        threading.Thread(target=read, args=(server, 8 * MB, "c2s")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert got == {k: hashlib.sha256(v).hexdigest() for k, v in payload.items()}
    client.close()
    assert server.recv(100) == b""  # the peer's end reads as a plain socket's close
    server.close()


def test_a_silent_peer_times_out(holder_factory) -> None:  # type: ignore[no-untyped-def]
    make, cctx = holder_factory
    server, client = tls_pair(make("enforcing"), cctx)
    server.settimeout(0.2)
    with pytest.raises(TimeoutError):
        server.recv(10)
    server.close()
    client.close()


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
def test_the_ha_sniff(holder_factory, mode: str) -> None:  # type: ignore[no-untyped-def]
    make, cctx = holder_factory
    holder = make(mode)
    # plain: the socket itself under permissive, None (close it) under enforcing
    a, b = pair()
    b.sendall(b"\x00" * 8)
    got = accept_blocking(holder, a)
    assert got is (a if mode == "permissive" else None)
    if got is a:
        assert a.recv(8) == b"\x00" * 8  # only peeked: the slave's report is still there
    a.close()
    b.close()
    # TLS: a stream after the handshake, under both modes
    a, b = pair()
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(accept_blocking(holder, a)))
    t.start()
    client = TlsStream(b, cctx, server_side=False, host="127.0.0.1")
    client.do_handshake()
    t.join(10)
    assert isinstance(result[0], TlsStream)
    client.sendall(b"\x00" * 7 + b"\x05")
    assert result[0].recv(8) == b"\x00" * 7 + b"\x05"
    a.close()
    b.close()


def test_a_client_that_does_not_trust_the_server_fails(holder_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    make, _ = holder_factory
    other = client_context(ca_file=str(make_ca(tmp_path, "Other CA").path))
    a, b = pair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            accept_blocking(make("enforcing"), a)
        except OSError as e:
            errors.append(e)

    t = threading.Thread(target=serve)
    t.start()
    with pytest.raises(ssl.SSLCertVerificationError):
        TlsStream(b, other, server_side=False, host="127.0.0.1").do_handshake()
    b.close()
    t.join(10)
    assert errors and isinstance(errors[0], OSError)
    a.close()
