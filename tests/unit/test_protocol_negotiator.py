"""The gRPC port's protocol negotiator in-process, with two echo servers standing for grpcio's
plain and TLS ports: the first byte picks the port, enforcing closes plain text, a silent
connection is closed within the bound, and the upstream sees bytes as they were sent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from pumice.proxy import protocol_negotiator
from pumice.proxy.protocol_negotiator import ProtocolNegotiator, grpc_peer, original_peer


async def echo_server(tag: bytes) -> asyncio.Server:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = grpc_peer(writer.get_extra_info("peername")).encode()
        while data := await reader.read(65536):
            writer.write(tag + b"|" + original_peer(peer.decode()).encode() + b"|" + data)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


@asynccontextmanager
async def negotiator_on(mode: str) -> AsyncIterator[int]:
    """A negotiator in ``mode`` in front of the two echo servers; its port."""
    plain, tls = await echo_server(b"plain"), await echo_server(b"tls")
    negotiator = ProtocolNegotiator(mode, plain.sockets[0].getsockname()[1], tls.sockets[0].getsockname()[1])
    try:
        yield await negotiator.start("127.0.0.1", 0)
    finally:
        await negotiator.close()
        plain.close()
        tls.close()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))


async def exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
def test_the_first_byte_picks_the_port(mode: str) -> None:
    async def scenario() -> None:
        async with negotiator_on(mode) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x16\x03\x01hello")
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(65536), 5)
            tag, peer, data = answer.split(b"|", 2)
            assert (tag, data) == (b"tls", b"\x16\x03\x01hello")
            assert peer.decode() == grpc_peer(writer.get_extra_info("sockname"))  # the client's, not the splice's
            writer.close()
            plain = await exchange(port, b"PRI * HTTP/2.0")
            assert plain == (b"" if mode == "enforcing" else b"plain|" + plain.split(b"|")[1] + b"|PRI * HTTP/2.0")

    run(scenario)


def test_a_silent_connection_is_closed_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol_negotiator, "HANDSHAKE_TIMEOUT_S", 0.3)

    async def scenario() -> None:
        async with negotiator_on("permissive") as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            loop = asyncio.get_running_loop()
            started = loop.time()
            assert await asyncio.wait_for(reader.read(1), 5) == b""
            assert loop.time() - started < 2
            writer.close()
            # another client meanwhile and after is served
            assert (await exchange(port, b"x")).startswith(b"plain|")

    run(scenario)
