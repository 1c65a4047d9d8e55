"""RemotingServer and RemotingClient over real loopback sockets."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_codec import FrameDecoder, encode_bytes
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError, RequestRefused
from pumice.remoting.remoting_server import (
    WRITE_HIGH_WATER,
    Channel,
    PartialFrameBudget,
    ProcessorPool,
    RemotingServer,
    run_eagerly,
)
from pumice.remoting.response_code import ResponseCode


class Echo:
    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.seen: list[int] = []

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        self.seen.append(request.opaque)
        await self.gate.wait()
        if request.ext_str("boom"):
            raise RuntimeError("kaboom")
        topic = request.ext_str("topic", required=True)
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"topic": topic, "n": 7}, body=request.body)


async def _server(echo: Echo | CallBack, workers: int = 4, capacity: int = 100) -> RemotingServer:
    """A started server with ``echo`` as the processor of code 105."""
    server = RemotingServer("127.0.0.1", 0)
    server.register_processor(105, echo, ProcessorPool("echo", workers, capacity))
    await server.start()
    return server


def run(coro):  # one loop per test
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_request_response_and_pipelining() -> None:
    async def main() -> None:
        echo = Echo()
        server = await _server(echo)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            reqs = [RemotingCommand(code=105, ext_fields={"topic": f"T{i}"}, body=b"x" * i) for i in range(50)]
            resps = await asyncio.gather(*(client.invoke(addr, r) for r in reqs))
            for i, resp in enumerate(resps):
                assert resp.code == ResponseCode.SUCCESS and resp.is_response
                assert resp.ext_fields == {"topic": f"T{i}", "n": "7"}  # strings on the wire
                assert resp.body == b"x" * i
        finally:
            await client.close()
            await server.close()

    run(main())


def test_unknown_code_missing_field_and_exception_get_answers() -> None:
    async def main() -> None:
        echo = Echo()
        server = await _server(echo)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            r = await client.invoke(addr, RemotingCommand(code=9999))
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999" in (r.remark or "")
            r = await client.invoke(addr, RemotingCommand(code=105))
            assert r.code == ResponseCode.SYSTEM_ERROR and "'topic'" in (r.remark or "")
            r = await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T", "boom": "1"}))
            assert r.code == ResponseCode.SYSTEM_ERROR and "kaboom" in (r.remark or "")
            r = await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T"}))
            assert r.code == ResponseCode.SUCCESS  # the connection and server are fine
        finally:
            await client.close()
            await server.close()

    run(main())


def test_oneway_gets_no_reply() -> None:
    async def main() -> None:
        echo = Echo()
        server = await _server(echo)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            await client.invoke_oneway(addr, RemotingCommand(code=105, ext_fields={"topic": "T"}))
            r = await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "U"}))
            assert r.ext_fields["topic"] == "U"  # the oneway request's would have arrived first
            assert len(echo.seen) == 2
        finally:
            await client.close()
            await server.close()

    run(main())


def test_a_full_pool_answers_system_busy() -> None:
    async def main() -> None:
        echo = Echo()
        echo.gate.clear()  # requests pile up
        server = await _server(echo, workers=1, capacity=3)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            tasks = [asyncio.create_task(client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T"})))
                     for _ in range(5)]  # fmt: skip
            done, _ = await asyncio.wait(tasks, timeout=2, return_when=asyncio.FIRST_COMPLETED)
            busy = [t.result() for t in done]
            assert busy and all(r.code == ResponseCode.SYSTEM_BUSY for r in busy)
            echo.gate.set()
            results = await asyncio.gather(*tasks)
            assert sorted(r.code for r in results) == [0, 0, 0, 2, 2]
        finally:
            await client.close()
            await server.close()

    run(main())


@pytest.mark.parametrize(
    "garbage",
    [struct.pack(">i", 1 << 30), struct.pack(">ii", 9, 5) + b"{nope", struct.pack(">ii", 17, 13) + b'{"opaque":12}'],
    ids=["huge-length", "not-json", "no-code"],
)
def test_malformed_frame_closes_only_that_connection(garbage: bytes) -> None:
    async def main() -> None:
        echo = Echo()
        server = await _server(echo)
        closed: list[Channel] = []
        server.on_channel_close.append(closed.append)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(garbage)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # the server closed it
            writer.close()
            # a well-behaved connection still works
            reader2, writer2 = await asyncio.open_connection("127.0.0.1", server.port)
            writer2.write(encode_bytes(RemotingCommand(code=105, opaque=5, ext_fields={"topic": "T"})))
            await writer2.drain()
            dec = FrameDecoder()
            got: list[RemotingCommand] = []
            for _ in range(100):
                got += dec.feed(await asyncio.wait_for(reader2.read(4096), 5))
                if got:
                    break
            assert got[0].opaque == 5 and got[0].code == 0
            writer2.close()
            assert len(closed) >= 1
        finally:
            await server.close()

    run(main())


def test_unfinished_frames_share_a_budget_that_complete_and_closed_ones_give_back() -> None:
    """serverMaxPartialFrameBytes: the bytes of frames not yet complete, over all connections
    of the servers sharing the budget; past it the connection that grows is closed, and its
    bytes come back, as do those of a frame that completes or a connection that goes."""
    full = encode_bytes(RemotingCommand(code=105, opaque=9, ext_fields={"topic": "T"}, body=b"b" * 3000))

    async def main() -> None:
        budget = PartialFrameBudget(4096)
        echo = Echo()
        servers = [RemotingServer("127.0.0.1", 0, partial_frames=budget) for _ in range(2)]
        for server in servers:
            server.register_processor(105, echo, ProcessorPool("echo", 4, 100))
            await server.start()

        async def until(cond) -> None:  # type: ignore[no-untyped-def]
            for _ in range(250):
                if cond():
                    return
                await asyncio.sleep(0.02)
            raise AssertionError(f"budget at {budget.used}, {budget.refused} refused")

        try:
            r1, w1 = await asyncio.open_connection("127.0.0.1", servers[0].port)
            w1.write(full[:2500])  # a frame's first 2500 bytes, on one port
            await until(lambda: budget.used == 2500)
            r2, w2 = await asyncio.open_connection("127.0.0.1", servers[1].port)
            w2.write(full[:2000])  # 4500 in all, on the other port: refused
            assert await asyncio.wait_for(r2.read(), 5) == b""
            assert budget.used == 2500 and budget.refused == 1
            w1.write(full[2500:])  # the first frame completes: answered, its bytes given back
            dec = FrameDecoder()
            got: list[RemotingCommand] = []
            for _ in range(100):
                got += dec.feed(await asyncio.wait_for(r1.read(65536), 5))
                if got:
                    break
            assert got[0].opaque == 9 and got[0].code == ResponseCode.SUCCESS
            assert budget.used == 0
            w1.write(full[:1000])
            await until(lambda: budget.used == 1000)
            w1.close()  # a connection that goes gives back its partial frame
            await until(lambda: budget.used == 0)
            w2.close()
        finally:
            for server in servers:
                await server.close()

    run(main())


def test_a_connection_idle_past_the_limit_is_closed_and_a_busy_one_is_not() -> None:
    """serverChannelMaxIdleTimeSeconds (Netty's ALL_IDLE): a connection that never speaks, or
    a peer gone silent, is closed; one with traffic inside the limit stays open."""

    async def main() -> None:
        echo = Echo()
        server = RemotingServer("127.0.0.1", 0, max_idle_s=0.4)
        server.register_processor(105, echo, ProcessorPool("echo", 4, 100))
        await server.start()
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", server.port)
            for _ in range(8):  # 1.6 s: four idle limits, with a request every 0.2 s
                r = await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T"}))
                assert r.code == ResponseCode.SUCCESS
                await asyncio.sleep(0.2)
            assert await asyncio.wait_for(silent_reader.read(), 2) == b""  # closed by the server
            assert len(server.channels) == 1  # only the busy client's connection is left
            silent_writer.close()
        finally:
            await client.close()
            await server.close()

    run(main())


def test_client_errors_are_typed() -> None:
    async def main() -> None:
        client = RemotingClient(connect_timeout_s=1)
        with pytest.raises(RemotingConnectError, match="host:port"):
            await client.invoke("nonsense", RemotingCommand(code=105))
        server = RemotingServer("127.0.0.1", 0)
        await server.start()
        port = server.port
        await server.close()
        with pytest.raises(RemotingConnectError, match="cannot connect"):
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand(code=105))
        echo = Echo()
        echo.gate.clear()
        server = await _server(echo)
        try:
            with pytest.raises(RemotingTimeoutError, match=r"within 0\.2s"):
                await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand(code=105, ext_fields={"topic": "T"}),
                                    timeout_s=0.2)  # fmt: skip
        finally:
            echo.gate.set()
            await client.close()
            await server.close()

    run(main())


def test_cancelled_or_timed_out_invokes_leave_no_pending_entry() -> None:
    async def main() -> None:
        echo = Echo()
        echo.gate.clear()
        server = await _server(echo)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            task = asyncio.create_task(client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T"})))
            for _ in range(100):
                if echo.seen:
                    break
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T"}), timeout_s=0.05)
            assert client._connections[addr].pending == {}
        finally:
            echo.gate.set()
            await client.close()
            await server.close()

    run(main())


def test_client_answers_a_request_the_server_sent_first() -> None:
    """NOTIFY_CONSUMER_IDS_CHANGED and the like: the server writes a request; the client's
    on_request hook answers it with send_response, matched by opaque."""

    async def main() -> None:
        got: asyncio.Queue[RemotingCommand] = asyncio.Queue()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            decoder = FrameDecoder()
            head = await reader.readexactly(4)
            (n,) = struct.unpack(">i", head)
            for cmd in decoder.feed(head + await reader.readexactly(n)):
                writer.write(encode_bytes(cmd.make_response(ResponseCode.SUCCESS)))  # answer the client's request
            writer.write(encode_bytes(RemotingCommand(code=40, opaque=4242, ext_fields={"consumerGroup": "G"})))
            await writer.drain()
            head = await reader.readexactly(4)
            (n,) = struct.unpack(">i", head)
            for cmd in decoder.feed(head + await reader.readexactly(n)):
                await got.put(cmd)
            writer.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        addr = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        client = RemotingClient()
        answered: list[bool] = []
        client.on_request = lambda a, req: answered.append(
            client.send_response(a, req.make_response(ResponseCode.SUCCESS, remark=req.ext_str("consumerGroup")))
        )
        try:
            r = await client.invoke(addr, RemotingCommand(code=105))
            assert r.code == ResponseCode.SUCCESS
            reply = await asyncio.wait_for(got.get(), 5)
            assert reply.is_response and reply.opaque == 4242 and reply.remark == "G"
            assert answered == [True]
            assert client.send_response("127.0.0.1:1", reply) is False  # no such connection
        finally:
            await client.close()
            srv.close()
            await srv.wait_closed()

    run(main())


def test_replies_of_one_loop_turn_leave_in_one_write_and_hooks_run_after_it() -> None:
    events: list[object] = []

    class Transport:
        def get_extra_info(self, name: str) -> tuple[str, int]:
            return ("127.0.0.1", 5555)

        def writelines(self, parts: list[bytes]) -> None:
            events.append(b"".join(parts))

        def get_write_buffer_size(self) -> int:
            return 0

        def close(self) -> None:
            events.append("closed")

    async def main() -> None:
        ch = Channel(Transport())  # type: ignore[arg-type]
        a = RemotingCommand(code=0, opaque=1, flag=1, body=b"first")
        b = RemotingCommand(code=0, opaque=2, flag=1, body=b"second")
        b.after_send = lambda: events.append("released")
        ch.send(a)
        ch.send(b)
        assert events == []  # nothing written until the loop turn ends
        await asyncio.sleep(0)
        assert len(events) == 2 and events[1] == "released"
        decoded = FrameDecoder().feed(events[0])
        assert [(c.opaque, bytes(c.body)) for c in decoded] == [(1, b"first"), (2, b"second")]
        # a reply to a closed channel is dropped, and its hook still runs
        ch.close()
        c = RemotingCommand(code=0, opaque=3, flag=1)
        c.after_send = lambda: events.append("released again")
        ch.send(c)
        await asyncio.sleep(0)
        assert events[2:] == ["closed", "released again"]

    run(main())


def test_pipelined_invokes_of_one_turn_share_a_write_and_each_gets_its_answer() -> None:
    async def main() -> None:
        echo = Echo()
        server = await _server(echo, workers=8)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "warm"}))
            conn = client._connections[addr]
            writes: list[int] = []
            real = conn.transport.writelines

            def counting(parts: list[bytes]) -> None:
                writes.append(len(parts))
                real(parts)

            conn.transport.writelines = counting  # type: ignore[method-assign]
            rs = await asyncio.gather(
                *(client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": f"T{i}"})) for i in range(20))
            )
            assert [r.ext_str("topic") for r in rs] == [f"T{i}" for i in range(20)]
            assert len(writes) == 1  # twenty requests, one system call
        finally:
            await client.close()
            await server.close()

    run(main())


# -- run_eagerly: a request runs at once, and becomes a task only when it waits ------------


def test_run_eagerly_finishes_a_coroutine_that_never_waits_without_a_task() -> None:
    async def main() -> None:
        done: list[str] = []

        async def quick() -> None:
            done.append("ran")

        before = len(asyncio.all_tasks())
        run_eagerly(asyncio.get_running_loop(), quick())
        assert done == ["ran"] and len(asyncio.all_tasks()) == before

    run(main())


def test_run_eagerly_resumes_a_waiting_coroutine_with_results_errors_and_loop_turns() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        seen: list[object] = []
        ok, bad = loop.create_future(), loop.create_future()

        async def waits() -> None:
            seen.append("started")
            seen.append(await ok)
            await asyncio.sleep(0)
            try:
                await bad
            except KeyError as e:
                seen.append(f"error {e}")
            await asyncio.sleep(0.01)
            seen.append("end")

        run_eagerly(loop, waits())
        assert seen == ["started"]  # ran to its first wait, inside the call
        ok.set_result(41)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        bad.set_exception(KeyError("k"))
        for _ in range(100):
            if "end" in seen:
                break
            await asyncio.sleep(0.01)
        assert seen == ["started", 41, "error 'k'", "end"]

    run(main())


@pytest.mark.parametrize("turns_before_cancel", [0, 2])  # cancelled before its first step, and while waiting
def test_run_eagerly_passes_a_cancellation_into_the_coroutine(turns_before_cancel: int) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        never = loop.create_future()
        outcome: list[str] = []

        async def held() -> None:
            try:
                await never
            except asyncio.CancelledError:
                outcome.append("cancelled")
                raise

        before = asyncio.all_tasks()
        run_eagerly(loop, held())
        (task,) = asyncio.all_tasks() - before  # it waited, so it is a task now
        for _ in range(turns_before_cancel):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert outcome == ["cancelled"] and never.cancelled()

    run(main())


def test_a_client_that_does_not_read_its_replies_is_not_read_either() -> None:
    """Pipelined requests whose big replies the client never reads: the server stops taking
    its requests once WRITE_HIGH_WATER bytes wait (memory stays bounded), serves other
    clients meanwhile, and answers every held request, in order, once the client reads."""
    reply = b"r" * (256 * 1024)
    n = 300  # unbounded, these replies would take 75 MB

    class Big:
        def __init__(self) -> None:
            self.seen = 0

        async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
            self.seen += 1
            return request.make_response(ResponseCode.SUCCESS, body=reply)

    async def main() -> None:
        big = Big()
        server = RemotingServer("127.0.0.1", 0)
        server.register_processor(11, big, ProcessorPool("big", 4, 10_000))
        server.register_processor(105, Echo(), ProcessorPool("echo", 4, 100))
        await server.start()
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        client = RemotingClient()
        try:
            await loop.sock_connect(sock, ("127.0.0.1", server.port))
            frames = b"".join(encode_bytes(RemotingCommand(code=11, opaque=i + 1)) for i in range(n))
            await loop.sock_sendall(sock, frames)
            seen = -1
            for _ in range(50):  # until the server stops taking requests (at most 5 s)
                await asyncio.sleep(0.1)
                if big.seen == seen:
                    break
                seen = big.seen
            (ch,) = [c for c in server.channels]
            waiting = ch._transport.get_write_buffer_size()
            assert waiting <= WRITE_HIGH_WATER + len(reply) + 1024
            assert big.seen < n // 3  # the kernel's socket buffers hold a few MB; not 75 MB
            # another client is served meanwhile
            r = await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand(code=105, ext_fields={"topic": "T"}))
            assert r.code == ResponseCode.SUCCESS
            # reading drains the backlog: every reply, in order
            dec = FrameDecoder(64 * 1024 * 1024)
            got: list[int] = []
            deadline = loop.time() + 20
            while len(got) < n and loop.time() < deadline:
                data = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 5)
                assert data, "the server closed the connection"
                got += [c.opaque for c in dec.feed(data)]
            assert got == list(range(1, n + 1))
            assert big.seen == n
        finally:
            sock.close()
            await client.close()
            await server.close()

    run(main())


def test_closing_a_client_that_does_not_read_frees_its_connection_at_once() -> None:
    """transport.close() waits for the unsent replies to drain, and a client that never reads
    never drains them: an idle (or malformed-frame) close kept the connection, its ~4 MiB of
    replies and its backlog for ever, and logged the idle close again every period."""

    class Big:
        async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
            return request.make_response(ResponseCode.SUCCESS, body=b"r" * (256 * 1024))

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0, max_idle_s=0.5)
        server.register_processor(11, Big(), ProcessorPool("big", 4, 10_000))
        lost: list[Channel] = []
        server.on_channel_close.append(lost.append)
        await server.start()
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, ("127.0.0.1", server.port))
            await loop.sock_sendall(
                sock, b"".join(encode_bytes(RemotingCommand(code=11, opaque=i)) for i in range(100))
            )
            for _ in range(50):  # the idle close comes after 0.5 s (checked every 0.125 s)
                if lost:
                    break
                await asyncio.sleep(0.1)
            assert len(lost) == 1 and not server.channels
        finally:
            sock.close()
            await server.close()

    run(main())


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_record_views_go_out_as_they_are_and_stay_held_until_sent(loop_name: str) -> None:
    """A body of large record views (a pull's) is written as the views themselves, not joined
    into a copy, and its after_send hook (releasing the mapped file) runs only once the
    transport has sent those bytes, not when it merely took them."""
    records = [bytes([65 + i]) * 300_000 for i in range(4)]  # 1.2 MB a reply
    backing = memoryview(bytearray(b"".join(records)))
    views = [backing[i * 300_000 : (i + 1) * 300_000] for i in range(4)]
    released: list[int] = []
    answered: list[int] = []

    class Views:
        async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
            answered.append(request.opaque)
            resp = request.make_response(ResponseCode.SUCCESS, body_parts=list(views))
            resp.after_send = lambda: released.append(request.opaque)
            return resp

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)
        server.register_processor(11, Views(), ProcessorPool("views", 4, 100))
        await server.start()
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, ("127.0.0.1", server.port))
            await loop.sock_sendall(sock, b"".join(encode_bytes(RemotingCommand(code=11, opaque=i)) for i in (1, 2, 3)))
            for _ in range(100):  # the three replies reach the transport
                if len(answered) == 3:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            (ch,) = server.channels
            assert ch._transport.get_write_buffer_size() > 0  # the client has not read them
            assert released == []  # so the views are still referenced
            dec = FrameDecoder(64 * 1024 * 1024)
            got: list[RemotingCommand] = []
            deadline = loop.time() + 10
            while len(got) < 3 and loop.time() < deadline:
                got += dec.feed(await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 5))
            assert [(c.opaque, bytes(c.body)) for c in got] == [(i, b"".join(records)) for i in (1, 2, 3)]
            for _ in range(200):  # released once sent (checked on a timer)
                if len(released) == 3:
                    break
                await asyncio.sleep(0.01)
            assert sorted(released) == [1, 2, 3]
        finally:
            sock.close()
            await server.close()

    if loop_name == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(asyncio.wait_for(main(), 20))
    else:
        run(main())


def test_small_records_are_joined_and_a_close_releases_views_still_held() -> None:
    parts: list[list[object]] = []
    events: list[str] = []

    class Transport:
        buffered = 0

        def get_extra_info(self, name: str) -> tuple[str, int]:
            return ("127.0.0.1", 5555)

        def writelines(self, out: list[object]) -> None:
            parts.append(list(out))
            self.buffered += sum(len(p) for p in out)  # type: ignore[arg-type]

        def get_write_buffer_size(self) -> int:
            return self.buffered

        def abort(self) -> None:
            events.append("aborted")

    async def main() -> None:
        tr = Transport()
        ch = Channel(tr)  # type: ignore[arg-type]
        small = memoryview(b"s" * 100)
        big = memoryview(b"b" * 8192)
        a = RemotingCommand(code=0, opaque=1, flag=1, body_parts=[small, small])
        a.after_send = lambda: events.append("small released")
        b = RemotingCommand(code=0, opaque=2, flag=1, body_parts=[big, big])
        b.after_send = lambda: events.append("big released")
        ch.send(a)
        ch.send(b)
        await asyncio.sleep(0)
        (out,) = parts
        assert out[1] == b"s" * 200 and out[3] is big and out[4] is big  # joined; then the views themselves
        frames = FrameDecoder().feed(b"".join(bytes(p) for p in out))  # type: ignore[arg-type]
        assert [bytes(f.body) for f in frames] == [b"s" * 200, b"b" * 16384]
        await asyncio.sleep(0.05)
        assert events == []  # the transport still holds the bytes
        tr.buffered = 100  # all but the last 100 bytes sent: still held
        await asyncio.sleep(0.05)
        assert events == []
        ch.close()  # dropped with the connection: released at once
        assert events == ["aborted", "small released", "big released"]

    run(main())


class CallBack:
    """A processor that, on code 105, calls the client back on its own connection (the
    broker's calls to clients) and answers with what the client said."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.channel: Channel | None = None

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        self.channel = channel
        call = RemotingCommand(code=307, ext_fields={"consumerGroup": request.ext_str("group") or ""})
        try:
            answer = await channel.invoke(call, self.timeout_s)
        except RemotingTimeoutError as e:
            return request.make_response(ResponseCode.CONSUME_MSG_TIMEOUT, str(e))
        return request.make_response(answer.code, answer.remark, body=answer.body)


def test_the_server_calls_a_client_and_matches_its_answer_by_opaque() -> None:
    async def main() -> None:
        cb = CallBack(timeout_s=5)
        server = await _server(cb)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"

        def answer(a: str, req: RemotingCommand) -> None:
            client.send_response(a, req.make_response(ResponseCode.SUCCESS, remark=req.ext_str("consumerGroup")))

        client.on_request = answer
        try:
            replies = await asyncio.gather(
                *(client.invoke(addr, RemotingCommand(code=105, ext_fields={"group": f"G{i}"})) for i in range(20))
            )
            assert [r.remark for r in replies] == [f"G{i}" for i in range(20)]  # each call got its own answer
            assert cb.channel is not None and not cb.channel._pending
        finally:
            await client.close()
            await server.close()

    run(main())


def test_a_client_that_never_answers_costs_a_timeout_and_leaves_nothing_behind() -> None:
    async def main() -> None:
        cb = CallBack(timeout_s=0.3)
        server = await _server(cb)
        client = RemotingClient()  # no on_request: the server's calls are never answered
        addr = f"127.0.0.1:{server.port}"
        try:
            r = await client.invoke(addr, RemotingCommand(code=105, ext_fields={"group": "G"}))
            assert r.code == ResponseCode.CONSUME_MSG_TIMEOUT and "did not answer" in (r.remark or "")
            assert cb.channel is not None and not cb.channel._pending
            # a call pending when the connection closes fails at once, not at its timeout
            cb.timeout_s = 30
            call = asyncio.ensure_future(cb.channel.invoke(RemotingCommand(code=307), 30))
            await asyncio.sleep(0.05)
            t0 = asyncio.get_running_loop().time()
            await client.close()
            with pytest.raises(RemotingConnectError):
                await asyncio.wait_for(call, 5)
            assert asyncio.get_running_loop().time() - t0 < 2
            assert not cb.channel._pending
            with pytest.raises(RemotingConnectError):
                await cb.channel.invoke(RemotingCommand(code=307), 1)
        finally:
            await client.close()
            await server.close()

    run(main())


def test_before_request_refuses_and_a_failing_hook_refuses_too() -> None:
    """The broker's ACL hook: RequestRefused answers SYSTEM_ERROR with its remark and the processor
    never sees the request; a oneway one gets no answer; a hook that raises anything else refuses."""

    async def main() -> None:
        echo = Echo()
        server = await _server(echo)

        def hook(addr: str, request: RemotingCommand) -> None:
            assert addr.startswith("127.0.0.1:")
            who = request.ext_str("who")
            if who == "stranger":
                raise RequestRefused("No accessKey is configured")
            if who == "broken":
                raise KeyError("a bug in the hook")

        server.before_request = hook
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            r = await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T", "who": "stranger"}))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "No accessKey is configured")
            await client.invoke_oneway(addr, RemotingCommand(code=105, ext_fields={"topic": "T", "who": "stranger"}))
            r = await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T", "who": "broken"}))
            assert r.code == ResponseCode.SYSTEM_ERROR and "a bug in the hook" in (r.remark or "")
            assert echo.seen == []  # none of them reached the processor
            r = await client.invoke(addr, RemotingCommand(code=105, ext_fields={"topic": "T", "who": "friend"}))
            assert r.code == ResponseCode.SUCCESS and len(echo.seen) == 1
        finally:
            await client.close()
            await server.close()

    run(main())
