"""TLS and plain text on one gRPC port, as 5.3.3's ``ProxyAndTlsProtocolNegotiator``: the
first byte of a connection picks its protocol (grpcio's server has no such mode).

==============  =============================================================================
tlsMode         a new connection on ``grpcServerPort``
==============  =============================================================================
disabled        no negotiator: grpcio listens on the port itself, plain text only
permissive      first byte 0x16 (a TLS handshake record): the TLS port; anything else: plain
enforcing       first byte 0x16: the TLS port; anything else is closed
==============  =============================================================================

The public port is an asyncio server on the broker's loop. It reads a connection's first
bytes (within ``HANDSHAKE_TIMEOUT_S``, else it closes it), then splices it, bytes as they
are, to one of the two ports the grpc.aio server listens on at 127.0.0.1 (an insecure one,
one with ``ssl_server_credentials``): grpcio's C core does TLS and HTTP/2; the splice only
copies (docs/v5/grpc.md has the design and its cost). The grpc server sees the splice's
loopback address: ``original_peer`` gives the client's, as grpcio writes a peer
(``ipv4:1.2.3.4:5678``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pumice.remoting.tls import TLS_RECORD_HANDSHAKE

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0  # the first byte, and grpcio's TLS handshake (server_handshake_timeout_ms)
LOOPBACK = "127.0.0.1"

_peers: dict[str, str] = {}  # the splice's own peer (as the grpc server sees it) → the client's


def original_peer(peer: str) -> str:
    return _peers.get(peer, peer)


def grpc_peer(address: Any) -> str:
    """A socket address as grpcio writes a peer."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
    return str(address)


class _Client(asyncio.Protocol):
    """A connection on the public port; its bytes go to ``upstream`` once it is open."""

    def __init__(self, negotiator: ProtocolNegotiator) -> None:
        self.negotiator = negotiator
        self.transport: Any = None
        self.upstream: Any = None
        self.pending = bytearray()
        self.connecting = False
        self.closed = False
        self.peer = ""
        self.key: str | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.peer = grpc_peer(transport.get_extra_info("peername"))
        self.timer = asyncio.get_running_loop().call_later(HANDSHAKE_TIMEOUT_S, self._expire)
        self.negotiator.clients.add(self)

    def _expire(self) -> None:
        if self.upstream is None:
            log.info("gRPC port: %s sent nothing within %.0fs, closed", self.peer, HANDSHAKE_TIMEOUT_S)
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.upstream is not None:
            self.upstream.write(data)
            return
        self.pending += data
        if self.connecting:
            return
        self.connecting = True
        port = self.negotiator.target(data[0])
        if port is None:
            log.info("gRPC port: %s is not TLS (tlsMode=enforcing), closed", self.peer)
            self.transport.close()
            return
        self.transport.pause_reading()
        self.negotiator.tasks.add(task := asyncio.ensure_future(self._connect(port)))
        task.add_done_callback(self.negotiator.tasks.discard)

    async def _connect(self, port: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            upstream, _ = await loop.create_connection(lambda: _Upstream(self), LOOPBACK, port)
        except OSError as e:
            log.warning("gRPC port: cannot reach the gRPC server on %s:%d for %s: %s", LOOPBACK, port, self.peer, e)
            self.transport.close()
            return
        if self.closed:
            upstream.close()
            return
        if self.timer is not None:  # grpcio bounds the TLS handshake from here
            self.timer.cancel()
        self.key = grpc_peer(upstream.get_extra_info("sockname"))
        _peers[self.key] = self.peer
        upstream.write(bytes(self.pending))
        self.pending.clear()
        self.upstream = upstream
        self.transport.resume_reading()

    def pause_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.negotiator.clients.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        if self.upstream is not None:
            self.upstream.close()

    def upstream_lost(self) -> None:
        if self.key is not None:
            _peers.pop(self.key, None)
        self.transport.close()


class _Upstream(asyncio.Protocol):
    """The splice's connection to the grpc server: its bytes go back to the client."""

    def __init__(self, client: _Client) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.transport.write(data)

    def pause_writing(self) -> None:
        self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        self.client.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.upstream_lost()


class ProtocolNegotiator:
    """The public gRPC port: each connection to ``plain_port`` or ``tls_port`` on 127.0.0.1."""

    def __init__(self, mode: str, plain_port: int, tls_port: int) -> None:
        self.mode = mode
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.clients: set[_Client] = set()
        self.tasks: set[asyncio.Future[None]] = set()
        self._server: asyncio.AbstractServer | None = None

    def target(self, first_byte: int) -> int | None:
        if first_byte == TLS_RECORD_HANDSHAKE:
            return self.tls_port
        return None if self.mode == "enforcing" else self.plain_port

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port``; the port bound (OSError when it cannot)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Client(self), host, port, reuse_address=True)
        return int(self._server.sockets[0].getsockname()[1])

    def stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        """Stop listening and close every connection."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for client in list(self.clients):
            client.transport.close()
        await server.wait_closed()
