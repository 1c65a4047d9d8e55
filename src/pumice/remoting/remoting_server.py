"""RemotingServer: the asyncio side of the remoting protocol, dispatching requests by code.

One ``asyncio.Protocol`` per connection feeds a ``FrameDecoder``; each request goes to the
processor registered for its code, through that processor's ``ProcessorPool`` (RocketMQ's
per-processor executors):

* a pool runs its processor's coroutines up to ``workers`` at a time and holds at most
  ``capacity`` waiting requests; past that the reply is SYSTEM_BUSY at once;
* an unknown code gets REQUEST_CODE_NOT_SUPPORTED, a ``MissingFieldError`` or any other
  exception SYSTEM_ERROR with a remark; the process never goes down for one request;
* oneway requests (flag bit 1) get no reply; every other request gets exactly one;
* a malformed frame (too large, header not JSON, no code) is logged and closes that
  connection only;
* the bytes of unfinished frames, over all connections (``PartialFrameBudget``, shared by the
  broker's two ports), stay under ``serverMaxPartialFrameBytes``: a connection whose partial
  frame would pass it is closed (logged once per peer host). A frame is buffered as its bytes
  arrive, never allocated at its declared length; complete frames do not count;
* a connection that neither reads nor writes for ``max_idle_s`` is closed
  (``serverChannelMaxIdleTimeSeconds``);
* a client that does not read its replies is not read either: once more than
  ``WRITE_HIGH_WATER`` bytes of replies wait for it (``Channel.congested``), the requests it
  already sent wait in a backlog and the connection stops reading, until its replies drain
  below ``WRITE_LOW_WATER`` (memory stays bounded; other clients are served meanwhile).
  Processors that answer later (a parked pull) check ``congested`` themselves before they
  answer with a body, and count what they hold in ``Channel.held``/``held_bytes``.

Replies per connection:

=============================  ==========================================================
WRITE_HIGH_WATER (4 MiB)       past it the connection is congested: no new request runs
WRITE_LOW_WATER (1 MiB)        below it a congested connection is read again
ZERO_COPY_MIN_RECORD (4 KiB)   a body of record views averaging at least this is written
                               as the views themselves (no copy); smaller ones are joined
                               into one buffer first (cheaper than a write part each)
=============================  ==========================================================

Record views handed to the transport stay referenced (their ``after_send`` hooks wait) until
the transport has sent those bytes, checked after the write and then on a timer backing off
from ``SENT_POLL_S`` to 1 s; a close releases them at once.

A request starts at once, inside ``data_received`` (as Python 3.12's eager tasks do): most
finish without waiting for anything and cost no task and no loop turn; one that waits (a
held pull, a flush, a full pool) becomes a task from there on (``run_eagerly``).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from pumice.remoting.remoting_codec import (
    DEFAULT_MAX_FRAME_LENGTH,
    DEFAULT_MAX_PARTIAL_FRAME_BYTES,
    FrameDecoder,
    RemotingCodecError,
    encode,
)
from pumice.remoting.remoting_command import MissingFieldError, RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError, RequestRefused
from pumice.remoting.response_code import ResponseCode
from pumice.remoting.tls import TLS_RECORD_HANDSHAKE, TlsContextHolder

log = logging.getLogger(__name__)

# replies waiting for one client: past the high mark its requests wait and it is not read
WRITE_HIGH_WATER = 4 * 1024 * 1024
WRITE_LOW_WATER = 1024 * 1024
# record views at least this large on average go out as they are (measured on uvloop: below
# ~4 KiB a write part per record costs more than one join)
ZERO_COPY_MIN_RECORD = 4096
SENT_POLL_S = 0.01  # first check that views the transport kept have been sent
TLS_SNIFF_TIMEOUT_S = 10.0  # a new connection must send its first byte (and finish a handshake) within this
_SENT_POLL_MAX_S = 1.0
# a request whose processing took longer is logged (WARNING); pulls are excluded: a
# long-polling pull is parked for up to 30 s by design
SLOW_REQUEST_S = 1.0
PARKED_CODES = frozenset({11})  # PULL_MESSAGE
_TOTAL = struct.Struct(">i")
_OPAQUES = itertools.count(1)  # of the requests the server sends to clients


def encode_records(cmd: RemotingCommand, body: list[memoryview]) -> tuple[list[Any], int, bool]:
    """The frame of ``cmd`` whose body is a list of record views: (parts, bytes, zero_copy).
    Large records are parts of their own, straight from the map; small ones are joined."""
    size = sum(map(len, body))
    if not body or size < ZERO_COPY_MIN_RECORD * len(body):
        parts = encode(cmd)
        return parts, len(parts[0]) + (len(parts[1]) if len(parts) > 1 else 0), False
    cmd.body_parts = None
    try:
        (head,) = encode(cmd)
    finally:
        cmd.body_parts = body
    # the total length field counts the body the header-only encoding left out
    head = _TOTAL.pack(len(head) - 4 + size) + head[4:]
    return [head, *body], len(head) + size, True


def run_eagerly(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` now up to its first wait; only a coroutine that waits becomes a task."""
    try:
        waited = coro.send(None)
    except StopIteration:
        return
    task = loop.create_task(_resume(coro, waited))
    task.add_done_callback(lambda t: _cancelled_before_resuming(t, coro, waited))


def _cancelled_before_resuming(task: asyncio.Task[None], coro: Coroutine[Any, Any, None], waited: Any) -> None:
    """A task cancelled before its first step never runs ``_resume``: tell the coroutine
    here, as a task would have (its future cancelled, CancelledError raised where it waits)."""
    if not task.cancelled() or inspect.getcoroutinestate(coro) != inspect.CORO_SUSPENDED:
        return
    if waited is not None:
        waited.cancel()
    try:
        coro.throw(asyncio.CancelledError())
    except (asyncio.CancelledError, StopIteration):
        return
    coro.close()  # it caught the cancellation and waits again: nobody can drive it on


async def _resume(coro: Coroutine[Any, Any, None], waited: Any) -> None:
    """Drive ``coro`` on from a wait it yielded outside a task: await the same future here,
    then resume it, and it reads the future's outcome (result, error or cancellation)."""
    while True:
        cancelled_here = False  # this task was cancelled while the future was not
        try:
            if waited is None:  # a bare yield (asyncio.sleep(0)): give the loop one turn
                await asyncio.sleep(0)
            else:
                waited._asyncio_future_blocking = False
                await waited
        except asyncio.CancelledError:
            cancelled_here = waited is None or not waited.cancelled()
        except BaseException:
            pass  # an error of the future: the coroutine reads it from the future when resumed
        try:
            waited = coro.throw(asyncio.CancelledError()) if cancelled_here else coro.send(None)
        except StopIteration:
            return


class Channel:
    """One client connection, as processors see it.

    Replies written in one turn of the event loop leave in one ``writelines`` at the end of
    that turn: under load, many responses share a system call; alone, one costs a
    ``call_soon`` more. ``after_send`` hooks (releasing mapped CommitLog views) run once
    the transport has taken the bytes, or, for record views written without a copy, once it
    has sent them.
    """

    __slots__ = (
        "_after", "_out", "_pending", "_poll", "_poll_s", "_queued", "_transport", "_unsent", "_views", "_written",
        "closed", "held", "held_bytes", "last_active", "on_flushed", "remote_addr",
    )  # fmt: skip

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.remote_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.closed = False
        self.last_active = time.monotonic()  # the last read or write (idle connections are closed)
        self._out: list[bytes | bytearray | memoryview] | None = None
        self._queued = 0  # bytes in _out
        self._views = False  # _out holds record views (not copies)
        self._written = 0  # bytes handed to the transport, ever
        self._after: list[Callable[[], None]] = []
        # hooks of views the transport still holds: (self._written once they are sent, hooks)
        self._unsent: deque[tuple[int, list[Callable[[], None]]]] = deque()
        self._poll: asyncio.TimerHandle | None = None
        self._poll_s = SENT_POLL_S
        self.on_flushed: Callable[[], None] | None = None  # set while the connection holds a backlog
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}  # requests sent to the client, by opaque
        self.held = 0  # requests a processor holds to answer later (parked pulls)
        self.held_bytes = 0  # and their size, as that processor counts it

    def send(self, cmd: RemotingCommand) -> None:
        if cmd.after_send is not None:
            self._after.append(cmd.after_send)
        if self.closed:
            self._run_after()
            return
        try:
            body = cmd.body_parts
            if body is not None:
                parts, size, views = encode_records(cmd, body)
                self._views |= views
            else:
                parts = encode(cmd)
                size = len(parts[0]) + (len(parts[1]) if len(parts) > 1 else 0)
        except Exception:
            if self._out is None:  # no flush is scheduled to run the hook
                self._run_after()
            raise
        self._queued += size
        if self._out is None:
            self._out = parts
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._out += parts

    @property
    def congested(self) -> bool:
        """More than WRITE_HIGH_WATER bytes of replies wait for this client."""
        return self._queued + self._transport.get_write_buffer_size() > WRITE_HIGH_WATER

    def _flush(self) -> None:
        out, self._out = self._out, None
        queued, self._queued = self._queued, 0
        views, self._views = self._views, False
        try:
            if out and not self.closed:
                self._transport.writelines(out)  # asyncio copies what it cannot send now; uvloop keeps the views
                self._written += queued
                self.last_active = time.monotonic()
        finally:
            if views and self._after and not self.closed and self._transport.get_write_buffer_size():
                self._unsent.append((self._written, self._after))  # the transport may still hold the views
                self._after = []
                if self._poll is None:
                    self._poll_s = SENT_POLL_S
                    self._poll = asyncio.get_running_loop().call_later(self._poll_s, self._release_sent)
            else:
                self._run_after()
        if self.on_flushed is not None:
            self.on_flushed()

    def _release_sent(self) -> None:
        """Run the hooks of views the transport has sent (bytes leave in order); check again
        later, less often, while some are still waiting."""
        self._poll = None
        unsent = self._unsent
        sent = self._written - (0 if self.closed else self._transport.get_write_buffer_size())
        progressed = False
        while unsent and unsent[0][0] <= sent:
            _run_hooks(unsent.popleft()[1])
            progressed = True
        if unsent:
            self._poll_s = SENT_POLL_S if progressed else min(self._poll_s * 2, _SENT_POLL_MAX_S)
            self._poll = asyncio.get_running_loop().call_later(self._poll_s, self._release_sent)

    def release_all(self) -> None:
        """The connection is closed: release every view it still holds."""
        if self._poll is not None:
            self._poll.cancel()
            self._poll = None
        while self._unsent:
            _run_hooks(self._unsent.popleft()[1])

    def _run_after(self) -> None:
        after, self._after = self._after, []
        _run_hooks(after)

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``request`` to the client and wait for its response, matched by opaque (Netty's
        ``invokeSync``, the broker's calls to clients): RemotingTimeoutError after ``timeout_s``,
        RemotingConnectError if the connection is or gets closed first. Nothing is left behind
        either way."""
        if self.closed:
            raise RemotingConnectError(f"the connection to {self.remote_addr} is closed")
        request.opaque = opaque = next(_OPAQUES)
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[opaque] = fut
        try:
            self.send(request)
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            raise RemotingTimeoutError(
                f"{self.remote_addr} did not answer request code {request.code} within {timeout_s:g} s"
            ) from None
        finally:
            self._pending.pop(opaque, None)

    def complete(self, response: RemotingCommand) -> None:
        """A response the client sent: it ends the ``invoke`` waiting for its opaque."""
        fut = self._pending.pop(response.opaque, None)
        if fut is None:
            log.debug("%s: response to no pending request (opaque %d), dropped", self, response.opaque)
        elif not fut.done():
            fut.set_result(response)

    def fail_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(RemotingConnectError(f"the connection to {self.remote_addr} closed"))

    def close(self) -> None:
        """Close now, dropping replies not yet sent (as Netty's close does): a graceful close
        waits for the client to read them, and one that never reads kept the connection open
        for ever."""
        if not self.closed:
            self.closed = True
            if self._transport.get_write_buffer_size():
                self._transport.abort()
            else:
                self._transport.close()
            self.release_all()
            self.fail_pending()

    def __repr__(self) -> str:
        return f"Channel({self.remote_addr})"


def _run_hooks(hooks: list[Callable[[], None]]) -> None:
    for cb in hooks:
        try:
            cb()
        except Exception:
            log.exception("after-send hook failed")


def error_response(channel: Channel, request: RemotingCommand, e: Exception) -> RemotingCommand:
    """SYSTEM_ERROR for a request whose processing raised (call it in the ``except``): a
    missing field's remark as it is, anything else logged and answered as type and message."""
    if isinstance(e, MissingFieldError):
        return request.make_response(ResponseCode.SYSTEM_ERROR, str(e))
    log.exception("process request %d from %s failed", request.code, channel)
    return request.make_response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")


class RequestProcessor(Protocol):
    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """The response, or None when the processor answers later by itself (long polling)."""
        ...


class Waiting:
    """A request waiting for a worker of its pool (fast failure may answer it meanwhile)."""

    __slots__ = ("channel", "done", "request", "since")

    def __init__(self, channel: Channel, request: RemotingCommand) -> None:
        self.since = time.monotonic()
        self.channel = channel
        self.request = request
        self.done = False  # it got its worker, or it was answered while it waited


class ProcessorPool:
    """Bounded concurrency and queue for one processor (RocketMQ's per-processor executor):
    at most ``workers`` requests run at once, and past ``capacity`` waiting ones the server
    answers SYSTEM_BUSY. With ``track_waiting`` the requests that wait for a worker are listed
    in ``waiting``, oldest first, so that fast failure can answer them (``answer_waiting``)."""

    def __init__(self, name: str, workers: int, capacity: int, track_waiting: bool = False) -> None:
        self.name = name
        self.capacity = capacity
        self.sem = asyncio.Semaphore(workers)
        self.pending = 0
        self.waiting: deque[Waiting] | None = deque() if track_waiting else None
        self.on_waiting: Callable[[], None] | None = None  # a request started waiting in an empty list

    def drop_done(self) -> None:
        """Forget the entries that got their worker or an answer (in place: ``_process`` appends
        to this deque), so the list holds only what still waits."""
        waiting = self.waiting
        if waiting:
            for _ in range(len(waiting)):
                w = waiting.popleft()
                if not w.done:
                    waiting.append(w)

    def answer_waiting(self, older_than_s: float, remark: str) -> int:
        """Answer SYSTEM_BUSY to the waiting requests that have waited ``older_than_s`` or more
        (all of them for 0), oldest first, as 4.9's BrokerFastFailure cleans a queue; ``remark``
        is formatted with the wait in ms and the queue's size. How many were answered."""
        waiting = self.waiting
        if not waiting:
            return 0
        now, answered = time.monotonic(), 0
        while waiting:
            w = waiting[0]
            if w.done:
                waiting.popleft()
                continue
            behind = now - w.since
            if behind < older_than_s:
                break
            waiting.popleft()
            w.done = True
            answered += 1
            response = w.request.make_response(ResponseCode.SYSTEM_BUSY, remark % (int(behind * 1000), len(waiting)))
            RemotingServer._reply(w.channel, w.request, response)
        return answered


class PartialFrameBudget:
    """The bytes connections hold of frames not yet complete (before any request, and so any
    authentication, runs), against a limit: without one, each connection could hold a frame
    of up to ``serverMaxFrameLength`` and a few dozen stalled ones took gigabytes."""

    MAX_LOGGED_PEERS = 1024  # hosts remembered so each is logged once; forgotten past this

    def __init__(self, limit: int = DEFAULT_MAX_PARTIAL_FRAME_BYTES) -> None:
        self.limit = limit
        self.used = 0
        self.refused = 0  # connections closed for it, ever
        self._logged: set[str] = set()

    def grow(self, by: int) -> bool:
        """Count ``by`` more buffered bytes; False (counting nothing) when that would pass the limit."""
        if self.used + by > self.limit:
            return False
        self.used += by
        return True

    def refuse(self, server: str, channel: Channel, wanted: int) -> None:
        self.refused += 1
        host = channel.remote_addr.rpartition(":")[0]
        if host in self._logged:
            return
        if len(self._logged) >= self.MAX_LOGGED_PEERS:
            self._logged.clear()
        self._logged.add(host)
        log.warning(
            "%s: close %s: its unfinished frame would hold %d bytes while all connections' unfinished frames "
            "hold %d of serverMaxPartialFrameBytes=%d (logged once for this host)",
            server, channel, wanted, self.used, self.limit,
        )  # fmt: skip


class RemotingServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_idle_s: float = 0.0,
        name: str = "RemotingServer",
        partial_frames: PartialFrameBudget | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.name = name
        self.max_frame_length = max_frame_length
        self.partial_frames = partial_frames if partial_frames is not None else PartialFrameBudget()
        self.max_idle_s = max_idle_s  # serverChannelMaxIdleTimeSeconds; 0: never close
        # more words for REQUEST_CODE_NOT_SUPPORTED's remark (4.9's code and words kept), by code
        self.not_supported_hint: Callable[[int], str] | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._processors: dict[int, tuple[RequestProcessor, ProcessorPool]] = {}
        self._default: tuple[RequestProcessor, ProcessorPool] | None = None
        self._server: asyncio.base_events.Server | None = None
        self.channels: set[Channel] = set()
        self.on_channel_close: list[Callable[[Channel], None]] = []
        # runs before every request's processor (the broker's ACL): RequestRefused answers it
        self.before_request: Callable[[str, RemotingCommand], None] | None = None
        # called with each request its processor answered and the seconds it took (pumice.metrics)
        self.on_rpc_done: Callable[[RemotingCommand, RemotingCommand, float], None] | None = None
        # tlsMode permissive or enforcing (pumice.remoting.tls): connections accepted here, each
        # sniffed; None or disabled: asyncio's server, plain
        self.tls: TlsContextHolder | None = None
        self._listen_sock: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._accepting: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by start()

    def register_processor(self, code: int, processor: RequestProcessor, pool: ProcessorPool) -> None:
        self._processors[int(code)] = (processor, pool)

    def processor_pools(self) -> list[ProcessorPool]:
        """Each pool a processor is registered with, once."""
        pools = {id(pool): pool for _, pool in self._processors.values()}
        if self._default is not None:
            pools.setdefault(id(self._default[1]), self._default[1])
        return list(pools.values())

    def register_default_processor(self, processor: RequestProcessor, pool: ProcessorPool) -> None:
        self._default = (processor, pool)

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        if self.tls is not None and self.tls.settings.enabled:
            await self._start_tls()
            return
        self._server = await loop.create_server(lambda: _Connection(self), self.host, self.port)
        server: Any = self._server  # its sockets are a list under uvloop, a tuple in typeshed
        sockets = server.sockets
        self.port = sockets[0].getsockname()[1]
        if self.max_idle_s > 0:
            self._idle_task = loop.create_task(self._close_idle_loop())
        log.info("%s listening on %s:%d", self.name, self.host, self.port)

    async def _start_tls(self) -> None:
        sock = socket.create_server((self.host, self.port), reuse_port=False, backlog=1024)
        sock.setblocking(False)
        self._listen_sock = sock
        self.port = sock.getsockname()[1]
        self._accept_task = self._loop.create_task(self._accept_loop(sock))
        if self.max_idle_s > 0:
            self._idle_task = self._loop.create_task(self._close_idle_loop())
        assert self.tls is not None
        log.info("%s listening on %s:%d (tlsMode=%s)", self.name, self.host, self.port, self.tls.settings.mode)

    async def _accept_loop(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = await self._loop.sock_accept(sock)
            except OSError as e:  # out of file descriptors, say: the next accept may work
                log.warning("%s: accept failed: %s", self.name, e)
                await asyncio.sleep(0.1)
                continue
            task = self._loop.create_task(self._serve_accepted(conn))
            self._accepting.add(task)
            task.add_done_callback(self._accepting.discard)

    async def _serve_accepted(self, conn: socket.socket) -> None:
        """Plain or TLS by the connection's first byte (it stays in the socket: MSG_PEEK)."""
        assert self.tls is not None
        conn.setblocking(False)
        loop = self._loop
        try:
            readable: asyncio.Future[None] = loop.create_future()

            def ready() -> None:
                if not readable.done():
                    readable.set_result(None)

            loop.add_reader(conn.fileno(), ready)
            try:
                await asyncio.wait_for(readable, TLS_SNIFF_TIMEOUT_S)
            finally:
                loop.remove_reader(conn.fileno())
            first = conn.recv(1, socket.MSG_PEEK)
            if not first:
                conn.close()
                return
            use_tls = first[0] == TLS_RECORD_HANDSHAKE
            if not use_tls and self.tls.settings.mode == "enforcing":
                log.info("%s: close a plain connection (tlsMode=enforcing)", self.name)
                conn.close()
                return
            if use_tls:
                await loop.connect_accepted_socket(
                    lambda: _Connection(self), conn, ssl=self.tls.context, ssl_handshake_timeout=TLS_SNIFF_TIMEOUT_S
                )
            else:
                await loop.connect_accepted_socket(lambda: _Connection(self), conn)
        except (OSError, ssl.SSLError, TimeoutError) as e:  # silent, gone, or a failed handshake
            log.info("%s: connection not served: %s", self.name, e)
            conn.close()
        except BaseException:  # the server closing (cancelled), or a bug: the socket is not left open
            conn.close()
            raise

    async def _close_idle_loop(self) -> None:
        """Netty's IdleStateHandler(ALL_IDLE) as RocketMQ sets it: a connection that has neither
        read nor written for ``max_idle_s`` is closed (clients heartbeat every 30 s; a dead peer
        behind a firewall, or a connection that never speaks, would stay open for ever)."""
        while True:
            await asyncio.sleep(min(self.max_idle_s / 4, 10.0))
            limit = time.monotonic() - self.max_idle_s
            for ch in [c for c in self.channels if c.last_active < limit and not c.closed]:
                log.info("%s: close %s, idle for over %.0f s", self.name, ch, self.max_idle_s)
                ch.close()

    async def close(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        if self._accept_task is not None:
            self._accept_task.cancel()
            for t in list(self._accepting):
                t.cancel()
            await asyncio.gather(self._accept_task, *self._accepting, return_exceptions=True)
            self._accept_task = None
        if self._listen_sock is not None:
            self._listen_sock.close()
            self._listen_sock = None
            for ch in list(self.channels):
                ch.close()
        if self._server is not None:
            self._server.close()
            for ch in list(self.channels):
                ch.close()
            await self._server.wait_closed()
            self._server = None

    # -- dispatch --------------------------------------------------------------------

    def dispatch(self, channel: Channel, request: RemotingCommand) -> None:
        entry = self._processors.get(request.code, self._default)
        if entry is None:
            # 4.9's servers hand unknown codes to a default processor, after the hooks (ACL)
            if not self._refused(channel, request):
                self._reply(
                    channel, request,
                    request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                          f" request type {request.code} not supported"
                                          + (self.not_supported_hint(request.code) if self.not_supported_hint
                                             else "")),
                )  # fmt: skip
            return
        processor, pool = entry
        if pool.pending >= pool.capacity:
            self._reply(
                channel, request,
                request.make_response(ResponseCode.SYSTEM_BUSY,
                                      f"[OVERLOAD]system busy, {pool.name} has {pool.pending} requests waiting"),
            )  # fmt: skip
            return
        if self.before_request is not None and self._refused(channel, request):
            return
        pool.pending += 1
        run_eagerly(self._loop, self._process(processor, pool, channel, request))

    def _refused(self, channel: Channel, request: RemotingCommand) -> bool:
        """Runs ``before_request``; True (and the refusal answered) when it refused."""
        if self.before_request is None:
            return False
        try:
            self.before_request(channel.remote_addr, request)
        except RequestRefused as e:  # oneway requests get no answer, as from a Java server
            log.warning("refused request %d from %s: %s", request.code, channel.remote_addr, e.remark)
            self._reply(channel, request, request.make_response(ResponseCode.SYSTEM_ERROR, e.remark))
            return True
        except Exception as e:  # a hook that fails refuses: a check never waved through
            self._reply(channel, request, error_response(channel, request, e))
            return True
        return False

    async def _process(
        self, processor: RequestProcessor, pool: ProcessorPool, channel: Channel, request: RemotingCommand
    ) -> None:
        # one task per request, without a closure or a wrapper coroutine: this is the hot path
        try:
            entry = None
            if pool.waiting is not None and pool.sem.locked():  # it waits: fast failure may answer it
                entry = Waiting(channel, request)
                if not pool.waiting and pool.on_waiting is not None:
                    pool.on_waiting()
                pool.waiting.append(entry)
            async with pool.sem:
                if entry is not None:
                    if entry.done:  # answered SYSTEM_BUSY while it waited
                        return
                    entry.done = True
                started = time.monotonic()
                try:
                    response = await processor.process_request(channel, request)
                except Exception as e:
                    response = error_response(channel, request, e)
                took = time.monotonic() - started
                if took > SLOW_REQUEST_S and request.code not in PARKED_CODES:
                    log.warning("slow request: code %d from %s took %d ms", request.code, channel.remote_addr,
                                int(took * 1000))  # fmt: skip
                if response is not None:
                    if self.on_rpc_done is not None:
                        self.on_rpc_done(request, response, took)
                    self._reply(channel, request, response)
        finally:
            pool.pending -= 1

    @staticmethod
    def _reply(channel: Channel, request: RemotingCommand, response: RemotingCommand) -> None:
        if request.is_oneway:
            if response.after_send is not None:
                response.after_send()
            return
        response.opaque = request.opaque
        channel.send(response)


class _Connection(asyncio.Protocol):
    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.max_frame_length)
        self.channel: Channel | None = None
        self.transport: asyncio.Transport | None = None
        self.backlog: deque[RemotingCommand] = deque()  # requests read while the client was congested
        self._counted = 0  # bytes of an unfinished frame counted in server.partial_frames

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if hasattr(transport, "set_write_buffer_limits"):
            transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)
        self.channel = Channel(transport)  # type: ignore[arg-type]  # uvloop's is not an asyncio.Transport
        self.server.channels.add(self.channel)
        log.debug("%s: connection from %s", self.server.name, self.channel.remote_addr)

    def data_received(self, data: bytes) -> None:
        ch = self.channel
        assert ch is not None
        ch.last_active = time.monotonic()
        decoder = self.decoder
        try:
            commands = decoder.feed(data)
        except RemotingCodecError as e:
            log.warning("close %s: malformed frame: %s", ch, e)
            self._drop_partial()
            ch.close()
            return
        buffered, counted = decoder.buffered, self._counted
        if buffered != counted:  # the unfinished frame's bytes go into the server-wide budget
            budget = self.server.partial_frames
            if buffered < counted:
                budget.used -= counted - buffered
            elif not budget.grow(buffered - counted):
                self._drop_partial()
                budget.refuse(self.server.name, ch, buffered)
                ch.close()
                return
            self._counted = buffered
        if self.backlog:
            self.backlog.extend(commands)
            return
        dispatch = self.server.dispatch
        for i, cmd in enumerate(commands):
            if cmd.is_response:
                ch.complete(cmd)  # a client's answer to the broker's call: never held back
                continue
            if ch.congested:
                self._hold(commands[i:])
                return
            dispatch(ch, cmd)

    def _hold(self, commands: list[RemotingCommand]) -> None:
        """The client is not reading its replies: keep its requests, stop reading it."""
        ch = self.channel
        assert ch is not None and self.transport is not None
        self.backlog.extend(commands)
        ch.on_flushed = self._drain_backlog
        if not ch.closed:
            self.transport.pause_reading()

    def _drain_backlog(self) -> None:
        """After a flush or once the transport drained: go on with held requests while the
        client keeps up; read it again when none is left."""
        ch = self.channel
        if ch is None or ch.closed or not self.backlog:
            return
        backlog = self.backlog
        dispatch = self.server.dispatch
        while backlog:
            if ch.congested:
                return  # the next flush or resume_writing comes back here
            cmd = backlog.popleft()
            if cmd.is_response:
                ch.complete(cmd)
            else:
                dispatch(ch, cmd)
        ch.on_flushed = None
        if self.transport is not None and not ch.closed:
            self.transport.resume_reading()

    def resume_writing(self) -> None:
        self._drain_backlog()

    def _drop_partial(self) -> None:
        """Forget the unfinished frame and give back the bytes it counted in the budget."""
        self.server.partial_frames.used -= self._counted
        self._counted = 0
        self.decoder.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        self.backlog.clear()
        self._drop_partial()
        ch = self.channel
        if ch is None:
            return
        ch.closed = True
        ch.on_flushed = None
        ch.release_all()
        ch.fail_pending()
        self.server.channels.discard(ch)
        log.debug("%s: connection from %s closed%s", self.server.name, ch.remote_addr, f": {exc}" if exc else "")
        for cb in self.server.on_channel_close:
            try:
                cb(ch)
            except Exception:
                log.exception("channel close listener failed")
