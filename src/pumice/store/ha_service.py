"""HAService: master/slave replication of the CommitLog.

Every broker runs one (as RocketMQ does): it listens on ``haListenPort`` (the broker's
listenPort + 1) for slaves, each served by an ``HAConnection``, and runs an ``HAClient``
that connects to a master once it knows the master's HA address (slaves only get one).
The wire protocol is plain TCP, not remoting; its frames are in ``ha_connection``. Under
``tlsMode`` permissive or enforcing the port also serves TLS, as the remoting ports do (4.9's
HA port is plain only: a 4.9 slave needs permissive), and a slave whose broker has
``useTLS=true`` connects with TLS.

State kept here:

- ``push2SlaveMaxOffset`` (in ``GroupTransferService``): the highest CommitLog offset any
  slave has acknowledged; it only grows.
- the connections; ``is_slave_ok(offset)`` is true when at least one slave is in sync
  (admitted, reported, not ahead of the master: ``HAConnection.in_sync``) and
  ``offset - push2SlaveMaxOffset`` is under ``haSlaveFallbehindMax`` (256 MiB). RocketMQ
  counts any connection, even one that never reported.
- the slaves found ahead of this master (diverged, see ``ha_connection``), by host and
  reported offset: a reconnection reporting the same offset stays diverged even once the
  master has grown past it. Named in the log, and in runtimeInfo (``haDivergedSlaves``)
  while seen within ``DIVERGED_SHOWN_S``.
- ``auth`` (the broker sets it with ``aclEnable=true``): who may replicate, ``ha_auth``.

A SYNC_MASTER put calls ``wait_for_slave(next_offset, callback)``; the callback gets True
once a slave acknowledged the put, False after ``syncFlushTimeout`` (FLUSH_SLAVE_TIMEOUT),
and ``wait_for_slave`` itself returns False when no slave is fit to wait for
(SLAVE_NOT_AVAILABLE). ``wakeup_all`` tells the connections' writers that new data is
readable (a put, or a commit from the transient store pool), so replication does not wait
for their 100 ms poll.

Threads: AcceptSocketService (accepts slaves, at most ``MAX_CONNECTIONS`` (32) at a time;
once a second it also expires overdue transfer waits), two per connection, and HAClient.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from pumice.remoting.tls import TlsContextHolder, accept_blocking
from pumice.store.group_transfer_service import GroupTransferService
from pumice.store.ha_auth import HAAuthenticator
from pumice.store.ha_client import HAClient
from pumice.store.ha_connection import HAConnection

if TYPE_CHECKING:
    from pumice.store.commit_log import CommitLog
    from pumice.store.mapped_file import SelectMappedBufferResult
    from pumice.store.message_store_config import MessageStoreConfig

log = logging.getLogger(__name__)

# Each connection has two threads: a flood of connections to the HA port must not exhaust
# them (a master has a slave or two; RocketMQ sets no limit).
MAX_CONNECTIONS = 32
# diverged slaves remembered (by host and offset), and how long one stays in runtimeInfo
MAX_DIVERGED = 64
DIVERGED_SHOWN_S = 60.0


class DivergedSlave:
    __slots__ = ("addr", "master_offset", "seen", "slave_offset")

    def __init__(self, addr: str, slave_offset: int, master_offset: int) -> None:
        self.addr = addr
        self.slave_offset = slave_offset
        self.master_offset = master_offset
        self.seen = time.monotonic()


class HAService:
    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        get_data: Callable[[int], SelectMappedBufferResult | None],
        append: Callable[[int, bytes | memoryview], bool],
        listen_host: str = "0.0.0.0",
        last_record_start: Callable[[], int] = lambda: -1,
    ) -> None:
        """A master serves ``get_data`` (the readable CommitLog from an offset) to its slaves;
        a slave's HAClient ``append``s what its master sends."""
        self.config = config
        self.commit_log = commit_log
        self.get_data = get_data
        self.listen_host = listen_host
        self.group_transfer_service = GroupTransferService(self.config.sync_flush_timeout)
        self.ha_client = HAClient(config, commit_log.get_max_offset, append, self._read_local, last_record_start)
        self._connections: list[HAConnection] = []
        self._diverged: dict[tuple[str, int], DivergedSlave] = {}
        self.auth: HAAuthenticator | None = None
        self._last_refusal_log = 0.0
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.port = self.config.ha_listen_port  # the bound port once started (for port 0)
        # tlsMode (set by the broker's start_tls): slaves connect with TLS or, when permissive, plain
        self.tls: TlsContextHolder | None = None

    # -- life cycle ----------------------------------------------------------------------

    def bind(self) -> None:
        """Listen on ``haListenPort``; OSError if it is taken. The store binds first thing in
        its load, so a taken port stops a start before the abort file is written."""
        if self._server is not None:
            return
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            srv.bind((self.listen_host, self.config.ha_listen_port))
        except OSError as e:
            srv.close()
            raise OSError(
                e.errno, f"cannot listen on the HA port {self.config.ha_listen_port} (listenPort + 1): {e.strerror}"
            ) from e
        srv.listen(16)
        srv.settimeout(1.0)
        self.port = int(srv.getsockname()[1])
        self._server = srv

    def start(self) -> None:
        self.bind()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="AcceptSocketService", daemon=True)
        self._accept_thread.start()
        self.ha_client.start()
        log.info("HAService listening on %s:%d", self.listen_host, self.port)

    def shutdown(self) -> None:
        self._stop.set()
        self.ha_client.shutdown()
        if self._server is not None:
            self._server.close()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=5)
        for conn in self.connections():
            conn.close()
            conn.join(5)
        self.group_transfer_service.shutdown()

    def _accept_loop(self) -> None:
        srv = self._server
        assert srv is not None
        while not self._stop.is_set():
            self.group_transfer_service.expire()
            try:
                sock, addr = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._stop.is_set():
                    log.exception("AcceptSocketService accept failed")
                    self._stop.wait(1.0)
                continue
            client = f"{addr[0]}:{addr[1]}"
            if self.connection_count >= MAX_CONNECTIONS and not self._evict_silent_connection():
                now = time.monotonic()
                if now - self._last_refusal_log > 10:  # a reconnecting flood must not flood the log
                    self._last_refusal_log = now
                    log.warning("HAService: %d slaves connected already, refusing %s", MAX_CONNECTIONS, client)
                sock.close()
                continue
            log.info("HAService receive new connection, %s", client)
            try:
                tls = self.tls
                prepare = partial(accept_blocking, tls) if tls is not None and tls.settings.enabled else None
                conn = HAConnection(
                    self.config, self.commit_log, self.get_data, self.notify_transfer_some, self.remove_connection,
                    sock, client, prepare, judge_first_report=self.judge_first_report, auth=self.auth,
                )  # fmt: skip
                with self._lock:
                    self._connections.append(conn)
                conn.start()
            except OSError:
                log.exception("new HAConnection for %s failed", client)
                sock.close()
        log.info("AcceptSocketService service end")

    def _evict_silent_connection(self) -> bool:
        """At the cap, close the oldest connection that never reported an offset (not a
        slave yet, perhaps never one), so idle connections cannot keep a real slave out."""
        with self._lock:
            silent = next((c for c in self._connections if c.slave_request_offset < 0), None)
        if silent is None:
            return False
        log.warning("HAService: %d connections, closing %s, which never reported an offset", MAX_CONNECTIONS,
                    silent.client_addr)  # fmt: skip
        silent.close()  # removes it from the list
        return True

    # -- connections ---------------------------------------------------------------------

    def connections(self) -> list[HAConnection]:
        with self._lock:
            return list(self._connections)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def remove_connection(self, conn: HAConnection) -> None:
        with self._lock:
            if conn in self._connections:
                self._connections.remove(conn)

    def wakeup_all(self) -> None:
        for conn in self._connections:
            conn.wakeup()

    # -- replication state ---------------------------------------------------------------

    @property
    def push2_slave_max_offset(self) -> int:
        return self.group_transfer_service.push2_slave_max_offset

    def notify_transfer_some(self, offset: int) -> None:
        self.group_transfer_service.notify_transfer_some(offset)

    def is_slave_ok(self, master_put_where: int) -> bool:
        return (
            any(c.in_sync for c in self.connections())
            and master_put_where - self.push2_slave_max_offset < self.config.ha_slave_fallbehind_max
        )

    def in_sync_count(self) -> int:
        return sum(1 for c in self.connections() if c.in_sync)

    def judge_first_report(self, conn: HAConnection, offset: int) -> int | None:
        """The master's end when ``offset`` shows the slave ahead of it (now, or when this
        host reported this offset before), else None."""
        master = self.commit_log.get_max_offset()
        host = conn.client_addr.rpartition(":")[0]
        with self._lock:
            known = self._diverged.get((host, offset))
            if known is None and offset <= master:
                return None
            if known is None:
                if len(self._diverged) >= MAX_DIVERGED:
                    del self._diverged[min(self._diverged, key=lambda k: self._diverged[k].seen)]
                known = self._diverged[(host, offset)] = DivergedSlave(conn.client_addr, offset, master)
                log.warning(
                    "slave[%s] is ahead of this master: its CommitLog ends at %d, the master's at %d (the master "
                    "lost its tail?). Its reports are not counted (SYNC_MASTER sends do not wait for it) and it is "
                    "sent no data. Its bytes past %d are not this master's: on a Pumice slave, set "
                    "haSlaveSetAsideDivergedTail=true and restart it to move them aside and replicate from %d",
                    conn.client_addr, offset, master, master, master,
                )  # fmt: skip
            else:
                known.addr, known.seen = conn.client_addr, time.monotonic()
                log.info("slave[%s] reported %d, still ahead of this master's end %d when found: not counted",
                         conn.client_addr, offset, known.master_offset)  # fmt: skip
            return known.master_offset

    def runtime_info(self) -> dict[str, object]:
        """The HA part of GET_BROKER_RUNTIME_INFO (Pumice's keys)."""
        now = time.monotonic()
        shown = {
            c.client_addr: (c.slave_ack_offset, c.diverged_at) for c in self.connections() if c.diverged_at is not None
        }
        with self._lock:  # and those seen lately (a Pumice slave found ahead reconnects every 5 s)
            recent = sorted(
                (d for d in self._diverged.values() if now - d.seen < DIVERGED_SHOWN_S), key=lambda d: d.seen
            )
        for d in reversed(recent):
            shown.setdefault(d.addr, (d.slave_offset, d.master_offset))
        return {
            "haConnectionCount": self.connection_count,
            "haInSyncSlaveCount": self.in_sync_count(),
            "haDivergedSlaves": ";".join(f"{a} slaveOffset={s} masterOffset={m}" for a, (s, m) in shown.items()),
            "haDivergedFromMaster": self.ha_client.diverged,
        }

    def _read_local(self, offset: int, size: int) -> bytes | None:
        """This store's CommitLog bytes [offset, offset + size) (within one file), or None."""
        sbr = self.commit_log.get_data(offset)
        if sbr is None:
            return None
        try:
            return bytes(sbr.buffer[: min(size, sbr.size)])
        finally:
            sbr.release()

    def wait_for_slave(self, next_offset: int, callback: Callable[[bool], None]) -> bool:
        """SYNC_MASTER: call ``callback(acknowledged)`` for the put ending at ``next_offset``;
        False (and no callback) when no slave is fit to wait for."""
        if not self.is_slave_ok(next_offset):
            return False
        # the put already woke the writers (DefaultMessageStore._wake_dispatch, or the commit)
        self.group_transfer_service.put_request(next_offset, callback)
        return True

    def update_master_address(self, addr: str | None) -> None:
        self.ha_client.update_master_address(addr)

    def slave_fall_behind_bytes(self) -> int:
        """How far the slowest connected slave is behind the master (0 without slaves)."""
        conns = [c for c in self.connections() if c.in_sync]
        if not conns:
            return 0
        master = self.commit_log.get_max_offset()
        return max(max(master - c.slave_ack_offset, 0) for c in conns)
