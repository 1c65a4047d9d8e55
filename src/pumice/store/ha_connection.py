"""HAConnection: the master's end of one slave's replication connection.

Two threads per connection, as in RocketMQ:

- ReadSocketService reads the slave's reports: a stream of 8-byte big-endian longs, each the
  slave's CommitLog max offset. Only the latest complete value counts. The first one is
  ``slave_request_offset`` (where transfer starts); every one is an acknowledgement
  (``slave_ack_offset``), handed to ``HAService.notify_transfer_some``.
- WriteSocketService sends CommitLog data as frames (below), from ``slave_request_offset``,
  or, when the slave reports 0 (it has nothing), from the start of the master's last
  CommitLog file. A frame's body is a raw byte range of one file, at most
  ``haTransferBatchSize`` (32 KiB) long; it may end inside a record. With nothing new it
  waits up to 100 ms for a put's wake-up; with nothing sent for
  ``haSendHeartbeatInterval`` (5 s) it sends a heartbeat (an empty frame).

Master → slave frame:

======  =====  ===========================================================
offset  bytes  field
======  =====  ===========================================================
0       8      phyOffset: CommitLog offset of the body's first byte (int64 BE)
8       4      bodySize (int32 BE); 0 for a heartbeat
12      n      body: CommitLog bytes [phyOffset, phyOffset + bodySize)
======  =====  ===========================================================

Slave → master: ``[maxPhyOffset: int64 BE]`` per report, after an optional auth frame
(``ha_auth``; required by a master with ``aclEnable=true`` unless the slave's address is
allowed without one). Nothing is read as a report, and nothing sent, before the connection
is admitted.

A slave whose first report is past this master's end (the master lost its tail) is
*diverged*: ``HAService.judge_first_report`` names it (and remembers its host and offset,
so it stays diverged once the master grows past that offset). A diverged connection's
reports never acknowledge anything and never count it as a slave in sync; it is sent only
heartbeats at the master's end as it was when found, which tells a Pumice slave where the
master's log ends (``ha_divergence``). RocketMQ 4.9 takes such a first report as an
acknowledgement, pushes from it once the master grows past it, and closes only on a later
report past its end.

On a TLS port (``tlsMode``, see ``pumice.remoting.tls``) the reader's thread first sniffs the
first byte and does the handshake (``prepare``), then starts the writer; the frames are the
same inside TLS.

Either thread ending closes the socket and ends the other. The read side also gives up
when nothing arrived for ``haHousekeepingInterval`` (20 s; a live slave reports every 5 s).
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pumice.remoting.tls_stream import TlsStream
from pumice.store.ha_auth import MAGIC, HAAuthenticator, HAAuthError, read_auth_frame

if TYPE_CHECKING:
    from pumice.store.commit_log import CommitLog
    from pumice.store.mapped_file import SelectMappedBufferResult
    from pumice.store.message_store_config import MessageStoreConfig

log = logging.getLogger(__name__)

HEADER = struct.Struct(">qi")
REPORT = struct.Struct(">q")


def send_parts(sock: socket.socket | TlsStream, head: bytes, body: memoryview) -> None:
    """Header and body in one system call (one TCP segment when small), the rest if the
    kernel took less."""
    sent = sock.sendmsg([head, body])
    total = len(head) + len(body)
    if sent < total:
        if sent < len(head):
            sock.sendall(head[sent:])
            sent = len(head)
        sock.sendall(body[sent - len(head) :])


class HAConnection:
    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        get_data: Callable[[int], SelectMappedBufferResult | None],
        on_ack: Callable[[int], None],
        on_close: Callable[[HAConnection], None],
        sock: socket.socket,
        client_addr: str,
        prepare: Callable[[socket.socket], socket.socket | TlsStream | None] | None = None,
        *,
        judge_first_report: Callable[[HAConnection, int], int | None] = lambda conn, offset: None,
        auth: HAAuthenticator | None = None,
    ) -> None:
        """``get_data``: the readable CommitLog bytes from an offset (None once the store is
        shut down); ``on_ack``: a slave acknowledged up to an offset; ``on_close``: this
        connection ended; ``prepare``: run first, in the reader's thread (the TLS sniff and
        handshake, ``pumice.remoting.tls.accept_blocking``): the stream to use, or None to
        close; ``judge_first_report``: the master's end if a report shows the slave ahead of
        it (diverged), else None; ``auth``: the admission rules (aclEnable=true), None admits all."""
        self.config = config
        self.commit_log = commit_log
        self.get_data = get_data
        self.on_ack = on_ack
        self.on_close = on_close
        self.sock: socket.socket | TlsStream = sock
        self._prepare = prepare
        # one timeout serves both sides: a read that waits this long means the slave is gone
        # (it reports every 5 s), and a write that takes this long means it stopped reading
        sock.settimeout(config.ha_housekeeping_interval / 1000)
        # small frames and reports must leave at once: with Nagle's algorithm a frame's body
        # waited for the slave's delayed ACK of its header (40 ms a SYNC_MASTER send)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_addr = client_addr
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from_where = -1
        self.judge_first_report = judge_first_report
        self.auth = auth
        self.authenticated_as: str | None = None
        # the master's end when this slave was found ahead of it: never counted, only heartbeats
        self.diverged_at: int | None = None
        self._closed = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def in_sync(self) -> bool:
        """A slave whose reports count: it reported, and is not ahead of the master."""
        return self.slave_request_offset >= 0 and self.diverged_at is None

    def start(self) -> None:
        self._start_thread(self._read_side, "ReadSocketService")

    def _start_thread(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=f"{name}-{self.client_addr}", daemon=True)
        self._threads.append(t)
        t.start()

    def _read_side(self) -> None:
        if self._prepare is not None:
            try:
                stream = self._prepare(self.sock)  # type: ignore[arg-type]
            except OSError as e:
                if not self._closed.is_set():
                    log.warning("HA connection %s: no TLS handshake: %s", self.client_addr, e)
                self.close()
                return
            if stream is None:
                log.info("HA connection %s: plain, closed (tlsMode=enforcing)", self.client_addr)
                self.close()
                return
            self.sock = stream
            if self._closed.is_set():  # closed during the handshake
                stream.close()
                return
        self._start_thread(self._write_loop, "WriteSocketService")
        self._read_loop()

    def wakeup(self) -> None:
        if not self._wake.is_set():
            self._wake.set()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.on_close(self)

    def join(self, timeout_s: float) -> None:
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout_s)

    # -- ReadSocketService ---------------------------------------------------------------

    def _recv_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the peer")
            out += chunk
        return bytes(out)

    def _admit(self) -> bytes | None:
        """Read the auth frame or the first report: the bytes to read as reports, or None
        when this connection may not replicate (logged)."""
        first = self._recv_exact(8)
        try:
            if first == MAGIC:
                frame = read_auth_frame(self._recv_exact)
                first = b""
                if self.auth is not None:
                    self.auth.check_frame(frame)
                    self.authenticated_as = frame.access_key
                    log.info("HA connection %s authenticated as %s", self.client_addr, frame.access_key)
            elif self.auth is not None:
                self.auth.check_unauthenticated(self.client_addr.rpartition(":")[0])
        except HAAuthError as e:
            log.warning("HA connection %s refused, closed: %s", self.client_addr, e)
            return None
        return first

    def _read_loop(self) -> None:
        housekeeping_s = self.config.ha_housekeeping_interval / 1000
        buf = bytearray()
        try:
            first = self._admit()
            if first is None:
                return
            buf += first
            while not self._closed.is_set():
                if len(buf) >= 8:
                    end = len(buf) - len(buf) % 8
                    (offset,) = REPORT.unpack_from(buf, end - 8)
                    del buf[:end]
                    self._on_report(offset)
                try:
                    data = self.sock.recv(4096)
                except TimeoutError:
                    log.warning(
                        "ha housekeeping, found this connection[%s] expired, %d ms",
                        self.client_addr, int(housekeeping_s * 1000),
                    )  # fmt: skip
                    break
                if not data:
                    log.info("read socket[%s] < 0: the slave closed the connection", self.client_addr)
                    break
                buf += data
        except TimeoutError:
            log.warning("HA connection %s sent no report within %d ms, closed", self.client_addr,
                        int(housekeeping_s * 1000))  # fmt: skip
        except OSError as e:
            if not self._closed.is_set():
                log.warning("ha read from slave %s failed: %s", self.client_addr, e)
        finally:
            self.close()
            log.info("ReadSocketService for %s service end", self.client_addr)

    def _on_report(self, offset: int) -> None:
        if offset < 0:
            log.warning("slave[%s] reported a negative offset %d, ignored", self.client_addr, offset)
            return
        first = self.slave_request_offset < 0
        if first or (self.diverged_at is None and offset > self.commit_log.get_max_offset()):
            # past the master's end: not a copy of this CommitLog (it would ack sends never sent)
            self.diverged_at = self.judge_first_report(self, offset)
        elif self.diverged_at is not None and offset != self.slave_ack_offset:
            self.judge_first_report(self, offset)  # remembered too (a held Pumice slave reports its end)
        self.slave_ack_offset = offset
        if first:
            self.slave_request_offset = offset
            log.info("slave[%s] request offset %d", self.client_addr, offset)
            self.wakeup()
        if self.diverged_at is None:
            self.on_ack(offset)

    # -- WriteSocketService --------------------------------------------------------------

    def _write_loop(self) -> None:
        cfg = self.config
        heartbeat_s = cfg.ha_send_heartbeat_interval / 1000
        batch = cfg.ha_transfer_batch_size
        file_size = cfg.mapped_file_size_commit_log
        commit_log = self.commit_log
        last_write = 0.0
        warned_gone = False
        try:
            while not self._closed.is_set():
                if self.slave_request_offset < 0:
                    self._wake.wait(0.01)
                    self._wake.clear()
                    continue
                if self.diverged_at is not None:  # only where the master's log ends
                    if time.monotonic() - last_write > heartbeat_s:
                        self.sock.sendall(HEADER.pack(self.diverged_at, 0))
                        last_write = time.monotonic()
                    self._closed.wait(0.1)
                    continue
                if self.next_transfer_from_where < 0:
                    if self.slave_request_offset == 0:
                        master_offset = commit_log.get_max_offset()
                        master_offset = max(master_offset - master_offset % file_size, 0)
                    else:
                        master_offset = self.slave_request_offset
                    self.next_transfer_from_where = master_offset
                    log.info(
                        "master transfer data from %d to slave[%s], and slave request %d",
                        master_offset, self.client_addr, self.slave_request_offset,
                    )  # fmt: skip
                now = time.monotonic()
                if now - last_write > heartbeat_s:
                    self.sock.sendall(HEADER.pack(self.next_transfer_from_where, 0))
                    last_write = now
                sbr = self.get_data(self.next_transfer_from_where)
                if sbr is None:
                    # clear, then look again: a put's wake-up between the look and the wait
                    # is not lost (it would cost a SYNC_MASTER send the 100 ms wait)
                    self._wake.clear()
                    sbr = self.get_data(self.next_transfer_from_where)
                if sbr is None:
                    if not warned_gone and self.next_transfer_from_where < commit_log.get_min_offset():
                        warned_gone = True
                        log.warning(
                            "slave[%s] needs offset %d, below the master's min offset %d (deleted): it cannot "
                            "catch up from this master", self.client_addr, self.next_transfer_from_where,
                            commit_log.get_min_offset(),
                        )  # fmt: skip
                    self._wake.wait(0.1)
                    continue
                try:
                    size = min(sbr.size, batch)
                    this_offset = self.next_transfer_from_where
                    send_parts(self.sock, HEADER.pack(this_offset, size), sbr.buffer[:size])
                finally:
                    sbr.release()
                self.next_transfer_from_where = this_offset + size
                last_write = time.monotonic()
        except OSError as e:
            if not self._closed.is_set():
                log.warning("ha transfer to slave %s failed: %s", self.client_addr, e)
        finally:
            self.close()
            log.info("WriteSocketService for %s service end", self.client_addr)
