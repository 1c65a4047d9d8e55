"""HAClient: the slave's end of replication; it copies the master's CommitLog byte for byte.

One thread. Once it knows the master's HA address (``haMasterAddress``, or the name
server's answer to the broker's registration) it connects and reports its CommitLog max
offset (8 bytes, big-endian). The master then streams frames ``[phyOffset: int64]
[bodySize: int32][body]`` (see ``ha_connection``). Each body is appended to the CommitLog
at ``phyOffset``, which must equal the slave's own max offset (unless the slave is empty):
replication is contiguous, and a frame that does not continue the log closes the
connection. After each read's frames are appended the new max offset is reported (the
master's acknowledgement; RocketMQ reports after every frame, but only the latest counts),
and every ``haSendHeartbeatInterval`` (5 s) even when nothing changed.
The slave's own dispatch builds ConsumeQueue and index entries from the appended bytes.

With ``ssl_context`` set (the broker's ``useTLS``) the connection is TLS, any certificate
trusted as the broker's other calls do.

The connection is dropped when nothing was read for ``haHousekeepingInterval`` (the master
sends a heartbeat every 5 s) and re-made after 5 s. RocketMQ's client first reports only
after a heartbeat interval; this one reports at once on connecting, so a slave starts
receiving without waiting 5 s.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pumice.remoting.tls_stream import TlsStream
from pumice.store.ha_connection import HEADER, REPORT
from pumice.store.service_thread import ServiceThread

if TYPE_CHECKING:
    from pumice.store.message_store_config import MessageStoreConfig

log = logging.getLogger(__name__)

RECONNECT_INTERVAL_S = 5.0
CLOSED_BY_MASTER_PAUSE_S = 1.0
READ_BUFFER_SIZE = 256 * 1024


def parse_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"HA master address {addr!r} is not host:port")
    return host, int(port)


class HAClient(ServiceThread):
    def __init__(
        self,
        config: MessageStoreConfig,
        max_phy_offset: Callable[[], int],
        append: Callable[[int, bytes | memoryview], bool],
    ) -> None:
        """``max_phy_offset``: the local CommitLog's end; ``append``: write bytes the master
        sent at their master offset (False: refused)."""
        super().__init__("HAClient")
        self.config = config
        self.max_phy_offset = max_phy_offset
        self.append = append
        self._master_address: str | None = None
        self._sock: socket.socket | TlsStream | None = None
        self.ssl_context: ssl.SSLContext | None = None  # the broker's useTLS: connect with TLS
        self._buf = bytearray()  # bytes read from the current connection, not yet a whole frame
        self._connected_to: str | None = None
        self.current_reported_offset = 0
        self.last_write = 0.0
        self.last_read = 0.0

    def update_master_address(self, addr: str | None) -> None:
        addr = (addr or "").strip() or None
        if addr is not None:
            parse_addr(addr)
        if addr != self._master_address:
            log.info("update master address, OLD: %s NEW: %s", self._master_address, addr)
            self._master_address = addr
            self.wakeup()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        # the thread owns the socket and the buffer (it may hold a view of the buffer), so
        # only wake its read here; it closes both itself
        self._stop.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        super().shutdown(timeout_s)
        t = self._thread
        if t is None or not t.is_alive():
            self._close_master()

    # -- connection ----------------------------------------------------------------------

    def _connect_master(self) -> bool:
        if self._sock is not None:
            if self._connected_to == self._master_address:
                return True
            self._close_master()  # the master moved
        addr = self._master_address
        if addr is None:
            return False
        try:
            sock = socket.create_connection(parse_addr(addr), timeout=3)
        except (OSError, ValueError) as e:
            log.warning("connect to master %s failed: %s", addr, e)
            return False
        if self.stopped:  # shut down while connecting: nothing will read this socket
            sock.close()
            return False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # reports are 8 bytes: no Nagle delay
        stream: socket.socket | TlsStream = sock
        if self.ssl_context is not None:
            stream = TlsStream(sock, self.ssl_context, server_side=False, host=parse_addr(addr)[0])
            self._sock = stream  # shutdown() can wake the handshake
            try:
                stream.do_handshake()  # within the connect's 3 s
            except OSError as e:
                log.warning("TLS handshake with master %s failed: %s", addr, e)
                self._sock = None
                sock.close()
                return False
        sock.settimeout(1.0)
        self._sock = stream
        self._connected_to = addr
        self.current_reported_offset = self.max_phy_offset()
        self.last_read = time.monotonic()
        log.info("HAClient connected to master %s, slave max offset %d", addr, self.current_reported_offset)
        return self._report_slave_max_offset(self.current_reported_offset)

    def _close_master(self) -> None:
        self._buf.clear()  # a part-frame of this connection must never join the next one's bytes
        sock, self._sock = self._sock, None
        if sock is not None:
            log.info("HAClient close connection to master %s", self._connected_to)
            try:
                sock.close()
            except OSError:
                pass
        self._connected_to = None

    def _report_slave_max_offset(self, offset: int) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.sendall(REPORT.pack(offset))
        except OSError as e:
            log.warning("report slave max offset %d to master failed: %s", offset, e)
            self._close_master()
            return False
        self.last_write = time.monotonic()
        return True

    def _report_slave_max_offset_plus(self) -> bool:
        current = self.max_phy_offset()
        if current > self.current_reported_offset:
            self.current_reported_offset = current
            return self._report_slave_max_offset(current)
        return True

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        heartbeat_s = self.config.ha_send_heartbeat_interval / 1000
        housekeeping_s = self.config.ha_housekeeping_interval / 1000
        while not self.stopped:
            try:
                self._run_once(heartbeat_s, housekeeping_s)
            except Exception:
                log.exception("HAClient service has exception")
                self._close_master()
                self._stop.wait(RECONNECT_INTERVAL_S)
        self._close_master()

    def _run_once(self, heartbeat_s: float, housekeeping_s: float) -> None:
        """Connect if needed, heartbeat if due, read once and apply what was read."""
        if not self._connect_master():
            self.wait_for_running(RECONNECT_INTERVAL_S)
            return
        if time.monotonic() - self.last_write > heartbeat_s and not self._report_slave_max_offset(
            self.current_reported_offset
        ):
            return
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(READ_BUFFER_SIZE)
        except TimeoutError:
            data = None
        except OSError as e:  # reset by the master
            if not self.stopped:
                log.warning("HAClient: read from master %s failed: %s", self._connected_to, e)
            self._drop_master()
            return
        if data == b"":
            if not self.stopped:
                log.warning("HAClient: the master %s closed the connection", self._connected_to)
            self._drop_master()
            return
        if data:
            self.last_read = time.monotonic()
            self._buf += data
            if not self._dispatch_read_request(self._buf):
                self._report_slave_max_offset_plus()  # what the good frames before it appended
                self._drop_master()
                return
        # one report for every frame of this read: the master only needs the latest
        if not self._report_slave_max_offset_plus():
            return
        if time.monotonic() - self.last_read > housekeeping_s:
            log.warning("HAClient, housekeeping, found this connection[%s] expired", self._connected_to)
            self._close_master()

    def _drop_master(self) -> None:
        """Close the connection the master ended or broke, and wait before the next one: a
        master that refuses us at once was tried ~9,000 times a second."""
        self._close_master()
        self._stop.wait(CLOSED_BY_MASTER_PAUSE_S)

    def _dispatch_read_request(self, buf: bytearray) -> bool:
        """Apply every whole frame in ``buf`` and drop it from ``buf``; False when a frame
        does not continue this slave's CommitLog or cannot be appended."""
        pos = 0
        n = len(buf)
        try:
            while n - pos >= HEADER.size:
                master_phy, body_size = HEADER.unpack_from(buf, pos)
                if master_phy < 0:
                    log.error("master sent a frame at negative offset %d", master_phy)
                    return False
                slave_phy = self.max_phy_offset()
                if slave_phy != 0 and slave_phy != master_phy:
                    log.error(
                        "master pushed offset not equal the max phy offset in slave, SLAVE: %d MASTER: %d",
                        slave_phy, master_phy,
                    )  # fmt: skip
                    return False
                if body_size < 0 or body_size > self.config.mapped_file_size_commit_log:
                    # a frame never spans files: this is not a master (and must not grow buf)
                    log.error("master sent a frame body of %d bytes, not 0..%d", body_size,
                              self.config.mapped_file_size_commit_log)  # fmt: skip
                    return False
                if n - pos < HEADER.size + body_size:
                    break
                if body_size:
                    start = pos + HEADER.size
                    with memoryview(buf) as mv, mv[start : start + body_size] as body:
                        ok = self.append(master_phy, body)
                    if not ok:
                        return False
                pos += HEADER.size + body_size
            return True
        finally:
            del buf[:pos]
