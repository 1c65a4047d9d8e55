"""Malformed frames and a flood of connections: the broker keeps serving."""

from __future__ import annotations

import asyncio
import os
import struct

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, send

GARBAGE = [
    struct.pack(">i", 1 << 30),  # a frame larger than frameMaxLength
    struct.pack(">ii", 9, 5) + b"{nope",  # a header that is not JSON
    struct.pack(">ii", 17, 13) + b'{"opaque":12}',  # no code
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # another protocol
]


def test_flood_and_garbage(cluster: Cluster) -> None:
    host, port = cluster.br.split(":")

    async def junk(i: int) -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 10)
        except OSError:
            return
        try:
            data = GARBAGE[i % len(GARBAGE)] if i % 5 else os.urandom(64)
            writer.write(data)
            await writer.drain()
            await asyncio.wait_for(reader.read(1 << 16), 5)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    async def idle(i: int) -> asyncio.StreamWriter | None:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 10)
            return writer
        except OSError:
            return None

    async def main() -> None:
        # 300 connections that say nothing stay open while 300 others send garbage
        idlers = [w for w in await asyncio.gather(*(idle(i) for i in range(300))) if w is not None]
        assert len(idlers) >= 250
        await asyncio.gather(*(junk(i) for i in range(300)))
        c = RemotingClient()
        try:
            for i in range(20):
                r = await c.invoke(cluster.br, send("FloodTopic", b"ok%d" % i, f"f{i}"))
                assert r.code == ResponseCode.SUCCESS, r.remark
            ask = RemotingCommand(code=30, ext_fields={"topic": "FloodTopic", "queueId": 0})
            for _ in range(50):  # dispatch runs behind the appends
                r = await c.invoke(cluster.br, ask)
                if r.ext_fields["offset"] == "20":
                    break
                await asyncio.sleep(0.05)
            assert r.ext_fields["offset"] == "20"
        finally:
            await c.close()
            for w in idlers:
                w.close()

    asyncio.run(asyncio.wait_for(main(), 120))
    assert cluster.broker.poll() is None  # still running
