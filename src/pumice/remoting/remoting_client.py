"""RemotingClient: asyncio requests to remoting servers, matched to responses by opaque.

One connection per address, opened on first use and reused; requests are pipelined on it.
``invoke`` waits for the response up to a timeout (``RemotingTimeoutError``); a closed
connection fails its outstanding requests (``RemotingConnectError``) and the next request
reconnects. Requests the server sends first (NOTIFY_CONSUMER_IDS_CHANGED, …) go to
``on_request``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import Callable

from pumice.remoting.remoting_codec import FrameDecoder, RemotingCodecError, encode
from pumice.remoting.remoting_command import RPC_ONEWAY, RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError

log = logging.getLogger(__name__)

_opaques = itertools.count(1)


class _ClientConnection(asyncio.Protocol):
    def __init__(self, client: RemotingClient, addr: str) -> None:
        self.client = client
        self.addr = addr
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.lost = False
        self.answered = False  # any bytes from the server yet
        self._out: list[bytes | bytearray | memoryview] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport

    def write(self, parts: list[bytes | bytearray | memoryview]) -> None:
        """Requests written in one loop turn leave in one ``writelines`` at its end."""
        if self._out is None:
            self._out = parts
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._out += parts

    def _flush(self) -> None:
        out, self._out = self._out, None
        if out and self.transport is not None and not self.lost:
            self.transport.writelines(out)

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            commands = self.decoder.feed(data)
        except RemotingCodecError as e:
            log.warning("close connection to %s: %s", self.addr, e)
            assert self.transport is not None
            self.transport.close()
            return
        for cmd in commands:
            if cmd.is_response:
                fut = self.pending.pop(cmd.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
            elif self.client.on_request is not None:
                self.client.on_request(self.addr, cmd)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        why = ""
        if self.pending and not self.answered and self.client.ssl_context is None:
            # what a server with tlsMode=enforcing does to a plain connection: close it unanswered
            why = (
                " before any answer: if the server enforces TLS (tlsMode=enforcing), connect with TLS "
                "(use_tls=True, --tls, or the Java client's setUseTLS(true))"
            )
        err = RemotingConnectError(f"connection to {self.addr} closed{why}")
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(err)
        self.pending.clear()
        self.client._connections.pop(self.addr, None)


def _expire(fut: asyncio.Future[RemotingCommand], addr: str, code: int, timeout_s: float) -> None:
    if not fut.done():
        fut.set_exception(RemotingTimeoutError(f"no response from {addr} to request {code} within {timeout_s:g}s"))


class RemotingClient:
    def __init__(self, connect_timeout_s: float = 3.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.ssl_context = ssl_context  # TLS to every address (pumice.remoting.tls.client_context)
        self._connections: dict[str, _ClientConnection] = {}
        self._connecting: dict[str, asyncio.Future[_ClientConnection]] = {}
        self.on_request: Callable[[str, RemotingCommand], None] | None = None
        # runs on every request before it is encoded (the client's ACL signature)
        self.rpc_hook: Callable[[RemotingCommand], None] | None = None

    async def _connection(self, addr: str) -> _ClientConnection:
        conn = self._connections.get(addr)
        if conn is not None and not conn.lost:
            return conn
        waiting = self._connecting.get(addr)
        if waiting is not None:
            return await waiting
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[_ClientConnection] = loop.create_future()
        self._connecting[addr] = fut
        try:
            host, _, port = addr.rpartition(":")
            if not host or not port.isdigit():
                raise RemotingConnectError(f"bad address {addr!r}: expected host:port")
            try:
                ctx = self.ssl_context
                _, made = await asyncio.wait_for(
                    loop.create_connection(lambda: _ClientConnection(self, addr), host, int(port), ssl=ctx,
                                           server_hostname=(host if ctx.check_hostname else "") if ctx else None),
                    self.connect_timeout_s,
                )  # fmt: skip
                conn = made
            except (OSError, TimeoutError) as e:
                raise RemotingConnectError(f"cannot connect to {addr}: {e}") from e
            self._connections[addr] = conn
            fut.set_result(conn)
            return conn
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            self._connecting.pop(addr, None)

    async def invoke(self, addr: str, request: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        conn = self._connections.get(addr)
        if conn is None or conn.lost:
            conn = await self._connection(addr)
        opaque = request.opaque = next(_opaques)
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        conn.pending[opaque] = fut
        conn.write(encode(request))
        # a timer handle rather than asyncio.wait_for: no extra task or callbacks per request
        timer = loop.call_later(timeout_s, _expire, fut, addr, request.code, timeout_s)
        try:
            return await fut
        finally:  # answered, timed out or cancelled: the opaque is no longer awaited
            timer.cancel()
            conn.pending.pop(opaque, None)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        conn = await self._connection(addr)
        request.opaque = next(_opaques)
        request.flag |= RPC_ONEWAY
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        conn.write(encode(request))

    def send_response(self, addr: str, response: RemotingCommand) -> bool:
        """Answer a request the server at ``addr`` sent first (``on_request``); False when
        that connection is gone (the server stops waiting on its own)."""
        conn = self._connections.get(addr)
        if conn is None or conn.lost or conn.transport is None:
            return False
        conn.write(encode(response))
        return True

    def close_connection(self, addr: str) -> None:
        """Drop the connection to ``addr`` at once (its pending calls fail); the next call
        connects again. After a time-out over a path that lost packets, TCP's retransmission
        back-off can keep the old connection silent for a minute or more after the path is back
        (Netty's clients close a channel whose call timed out for the same reason)."""
        conn = self._connections.pop(addr, None)
        if conn is not None and conn.transport is not None:
            conn.transport.abort()

    async def close(self) -> None:
        for conn in list(self._connections.values()):
            if conn.transport is not None:
                conn.transport.close()
        self._connections.clear()
        await asyncio.sleep(0)
