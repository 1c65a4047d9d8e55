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

With ``haAccessKey`` set (its secret key in ``secret_key``) the connection opens with an auth frame
(``ha_auth``), for a Pumice master with ``aclEnable=true``.

Each connection first checks that the two logs agree: the first report is not the slave's
end S but V, the start of its last dispatched record (``last_record_start``), so the master
sends [V, S) again, and the slave compares those bytes with its own before it appends
anything (its reports say how far they matched; a RocketMQ master serves such a report as
any other). It then appends from S. A 4.9 slave checks nothing.

When the logs do not agree the slave keeps its bytes, writes ``haDiverged.json``, says so
(log and runtimeInfo ``haDivergedFromMaster``) and *holds*: it reports S and appends nothing
until the operator acts (``ha_divergence``). That is when the master's end is below V (a
Pumice master sends a diverged slave only heartbeats at its end), or when a byte at X differs
(the master lost the records from there and wrote others): the tail from the last record
boundary at or below X (from V when the byte is in V's record) is to be set aside. After a
set-aside, V is the record before the cut (``verify_from``): a difference there means the
logs differ below the cut, and the slave stops replicating (``refused``) until its store is
rebuilt; once it matched, the file is removed.

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

import pumice.store.ha_divergence as ha_divergence
from pumice.remoting.tls_stream import TlsStream
from pumice.store.ha_auth import encode_auth_frame
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
        read_local: Callable[[int, int], bytes | None] = lambda offset, size: None,
        last_record_start: Callable[[], int] = lambda: -1,
    ) -> None:
        """``max_phy_offset``: the local CommitLog's end; ``append``: write bytes the master
        sent at their master offset (False: refused); ``read_local``: the local CommitLog's
        bytes at an offset (the check); ``last_record_start``: where its last dispatched record
        starts (-1: none)."""
        super().__init__("HAClient")
        self.config = config
        self.secret_key = ""  # haAccessKey's, set by the broker at start from its ACL files
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
        self.read_local = read_local
        self.last_record_start = last_record_start
        self.diverged = ""  # why this slave does not replicate as it should (runtimeInfo); "" when fine
        # holding (ahead of the master, until the operator acts): the offset reported, nothing
        # appended; -1 when not holding
        self.hold_report = -1
        self.refused = False  # the logs differ below the check: no replication until the store is rebuilt
        self.verify_from = -1  # set at load after a set-aside: where the check starts
        self._verified_to = -1  # this connection's check: bytes below it matched (-1: no check)
        self._check_start = -1  # where this connection's check started
        self._check_record_end = -1  # the end of the check's first record

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
        if addr is None or self.refused:
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
        self._start_check()
        self.current_reported_offset = self._reportable_offset()
        self.last_read = time.monotonic()
        log.info("HAClient connected to master %s, slave max offset %d, reports %d", addr, self.max_phy_offset(),
                 self.current_reported_offset)  # fmt: skip
        cfg = self.config
        if cfg.ha_access_key:
            try:
                stream.sendall(encode_auth_frame(cfg.ha_access_key, self.secret_key))
            except OSError as e:
                log.warning("send the HA auth frame to master %s failed: %s", addr, e)
                self._close_master()
                return False
        return self._report_slave_max_offset(self.current_reported_offset)

    def _start_check(self) -> None:
        """This connection's check of [V, S) (none while holding, or with no record before S)."""
        self._verified_to = self._check_record_end = -1
        end = self.max_phy_offset()
        v = self.verify_from if self.verify_from >= 0 else self.last_record_start()
        if self.hold_report >= 0 or not 0 < v < end:  # 0 would ask a master for its last file
            return
        head = self.read_local(v, 4)
        if head is None or len(head) < 4:
            return
        self._verified_to = self._check_start = v
        self._check_record_end = v + int.from_bytes(head, "big", signed=True)

    def _reportable_offset(self) -> int:
        """The local end; while checking against the master, how far the check got; while
        holding, ``hold_report``."""
        if self.hold_report >= 0:
            return self.hold_report
        return self._verified_to if self._verified_to >= 0 else self.max_phy_offset()

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
        current = self._reportable_offset()
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
        self._stop.wait(RECONNECT_INTERVAL_S if self.diverged else CLOSED_BY_MASTER_PAUSE_S)

    def _found_ahead(self, master_offset: int, slave_phy: int, by_master: bool) -> None:
        """The logs agree below ``master_offset`` at most (``by_master``: the master's end, as
        its heartbeats say; else where a byte differed): keep the bytes, hold, say so. Held, a
        slave reports its end to a master that found it ahead (which keeps it diverged), else
        only where the logs agreed (what it truly holds of the master's log)."""
        root = self.config.store_path_root_dir
        known = ha_divergence.read_marker(root) or {}
        if known.get("slaveOffset") != slave_phy or "verifyFrom" in known:
            known = {"master": self._connected_to, "masterOffset": master_offset, "slaveOffset": slave_phy,
                     "foundBy": "master" if by_master else "check", "foundAt": int(time.time() * 1000)}  # fmt: skip
            ha_divergence.write_marker(root, known)
        self.hold_report = ha_divergence.hold_report(known)
        self.verify_from = self._verified_to = -1
        line = ha_divergence.describe(known)
        if line != self.diverged:
            log.error("this slave's %s", line)
        self.diverged = line

    def _differs(self, offset: int) -> None:
        """The logs differ below a set-aside's cut: stop replicating."""
        root = self.config.store_path_root_dir
        known = ha_divergence.read_marker(root) or {"slaveOffset": self.max_phy_offset()}
        known.update(master=self._connected_to, failedAt=offset)
        ha_divergence.write_marker(root, known)
        self.diverged = ha_divergence.describe(known)
        self.refused = True
        log.error("this slave's %s (a byte at %d differs in the record before the cut)", self.diverged,
                  offset)  # fmt: skip

    def _check_frame(self, master_phy: int, body: memoryview, slave_phy: int) -> int | None:
        """Compare the part of a frame below this slave's end with the local bytes: how
        many bytes of the body were compared (the rest is appended), or None when the logs
        do not agree (the connection ends)."""
        if master_phy != self._verified_to:
            log.error("master pushed offset %d during the check, expected %d", master_phy, self._verified_to)
            return None
        n = min(len(body), slave_phy - master_phy)
        own = self.read_local(master_phy, n) if n else b""
        if own != body[:n]:
            own = own or b""
            at = master_phy + next((i for i in range(min(len(own), n)) if own[i] != body[i]), min(len(own), n))
            if self.verify_from >= 0:  # the record before a set-aside's cut
                self._differs(at)
            else:  # agreed below the byte, or (a byte of the first record) below its start
                self._found_ahead(at if at >= self._check_record_end else self._check_start, slave_phy, False)
            return None
        self._verified_to += n
        if self._verified_to >= slave_phy:
            log.info("this slave's CommitLog matches the master's up to its end %d: replicating", slave_phy)
            if self.verify_from >= 0:
                ha_divergence.remove_marker(self.config.store_path_root_dir)
                self.diverged = ""
            self._verified_to = self.verify_from = -1
        return n

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
                checking = self._verified_to >= 0
                if (checking and master_phy < self._verified_to) or (not checking and 0 < master_phy < slave_phy):
                    # the master ends below this slave's log: a Pumice master found it ahead
                    self._found_ahead(master_phy, slave_phy, by_master=True)
                if self.hold_report >= 0:  # appends nothing; heartbeats are fine
                    if body_size:
                        return False
                    pos += HEADER.size
                    continue
                if not checking and slave_phy != 0 and slave_phy != master_phy:
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
                        done = self._check_frame(master_phy, body, slave_phy) if checking else 0
                        ok = done is not None
                        if ok and done is not None and done < body_size:
                            with body[done:] as rest:
                                ok = self.append(master_phy + done, rest)
                    if not ok:
                        return False
                pos += HEADER.size + body_size
            return True
        finally:
            del buf[:pos]
