"""Master/slave replication (HAService, HAConnection, HAClient, GroupTransferService) between
real stores over loopback sockets, and the HA wire format checked against raw sockets."""

from __future__ import annotations

import functools
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from pumice.store import ha_service as ha_service_module
from pumice.store.group_transfer_service import GroupTransferService
from pumice.store.message_store_config import BrokerRole
from pumice.store.put_message_result import PutMessageStatus
from tests.helpers import waiting
from tests.helpers.ports import free_port
from tests.helpers.store import opened, read_queue, small_config
from tests.helpers.waiting import wait_dispatched

FILE = 64 * 1024


def msg(i: int, queue_id: int = 0) -> MessageExtBrokerInner:
    body = f"{i}:".encode().ljust(700, b"h")
    return MessageExtBrokerInner(topic="T", body=body, queue_id=queue_id, properties={"KEYS": f"k{i}", "TAGS": "a"})


def running(root: Path, **overrides: object) -> contextmanager[DefaultMessageStore]:  # type: ignore[type-arg]
    return opened(small_config(str(root), **overrides), ha_listen_host="127.0.0.1")


def master(root: Path, **overrides: object) -> contextmanager[DefaultMessageStore]:  # type: ignore[type-arg]
    return running(root, ha_listen_port=free_port(), **overrides)


def slave(root: Path, master_store: DefaultMessageStore, **overrides: object):  # type: ignore[no-untyped-def]
    assert master_store.ha_service is not None
    return running(
        root, ha_listen_port=0, broker_role=BrokerRole.SLAVE,
        ha_master_address=f"127.0.0.1:{master_store.ha_service.port}", **overrides,
    )  # fmt: skip


# replication across threads and sockets: give it longer than a store's own threads
wait_until = functools.partial(waiting.wait_until, timeout_s=10.0)


def transferring(m: DefaultMessageStore) -> None:
    """A slave is connected and the master has fixed where its transfer starts (an empty
    slave starts at the master's last file, so tests wait for this before writing)."""
    ha = m.ha_service
    assert ha is not None
    wait_until(lambda: any(c.next_transfer_from_where >= 0 for c in ha.connections()), what="transfer started")


def caught_up(m: DefaultMessageStore, s: DefaultMessageStore) -> None:
    wait_until(lambda: s.get_max_phy_offset() == m.get_max_phy_offset(), what="slave caught up")
    wait_dispatched(s)
    wait_dispatched(m)  # tests compare both sides' queues: under load the master's dispatch can trail


def log_bytes(store: DefaultMessageStore, start: int, end: int) -> bytes:
    out = bytearray()
    off = start
    while off < end:
        sbr = store.get_commit_log_data(off)
        assert sbr is not None, off
        with sbr:
            n = min(sbr.size, end - off)
            out += sbr.buffer[:n]
        off += n
    return bytes(out)


def test_slave_copies_the_commit_log_byte_for_byte_across_files_and_builds_its_queues(tmp_path: Path) -> None:
    with master(tmp_path / "m") as m, slave(tmp_path / "s", m) as s:
        transferring(m)
        for i in range(300):  # about 4 files of 64 KiB
            assert m.put_message(msg(i, i % 2)).status is PutMessageStatus.PUT_OK
        caught_up(m, s)
        assert len(s.commit_log.mapped_file_queue.mapped_files) >= 4
        assert s.get_min_phy_offset() == 0
        assert log_bytes(s, 0, s.get_max_phy_offset()) == log_bytes(m, 0, m.get_max_phy_offset())
        for q in (0, 1):
            assert read_queue(s, "T", q) == read_queue(m, "T", q)
            assert s.get_max_offset_in_queue("T", q) == 150
        found = s.query_message("T", "k123", 10, 0, 2**62)
        assert [mm.queue_offset for mm in found] == [61]
        # the slave keeps taking what the master gets later
        for i in range(300, 310):
            m.put_message(msg(i))
        caught_up(m, s)
        assert read_queue(s, "T", 0)[-1].startswith(b"309:")
        # Both ends turn Nagle's algorithm off: with it, a report (8 bytes) waited for the
        # master's delayed ACK, and SYNC_MASTER sends ran at 1.5k msg/s instead of 30k (ha_bench).
        nodelay = (socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert [c.sock.getsockopt(*nodelay) for c in m.ha_service.connections()] == [1]  # type: ignore[union-attr]
        assert s.ha_service.ha_client._sock.getsockopt(*nodelay) == 1  # type: ignore[union-attr]


def test_an_empty_slave_starts_at_the_masters_last_file(tmp_path: Path) -> None:
    with master(tmp_path / "m") as m:
        for i in range(300):
            m.put_message(msg(i))
        last_start = m.commit_log.mapped_file_queue.get_last_mapped_file().file_from_offset  # type: ignore[union-attr]
        assert last_start >= 3 * FILE
        with slave(tmp_path / "s", m) as s:
            caught_up(m, s)
            assert s.get_min_phy_offset() == last_start
            assert log_bytes(s, last_start, s.get_max_phy_offset()) == log_bytes(m, last_start, m.get_max_phy_offset())
            # its queue starts where its log does; every entry it has reads back
            first = s.get_min_offset_in_queue("T", 0)
            assert 0 < first < 300
            assert read_queue(s, "T", 0) == read_queue(m, "T", 0)[first:]


def test_a_restarted_slave_resumes_from_its_own_end(tmp_path: Path) -> None:
    with master(tmp_path / "m") as m:
        with slave(tmp_path / "s", m) as s:
            transferring(m)
            for i in range(50):
                m.put_message(msg(i))
            caught_up(m, s)
        for i in range(50, 120):  # written while the slave is down
            m.put_message(msg(i))
        with slave(tmp_path / "s", m) as s:
            caught_up(m, s)
            assert s.get_min_phy_offset() == 0
            bodies = read_queue(s, "T", 0)
            assert [int(b.split(b":")[0]) for b in bodies] == list(range(120))
            assert log_bytes(s, 0, s.get_max_phy_offset()) == log_bytes(m, 0, m.get_max_phy_offset())


@contextmanager
def fake_master(root: Path) -> Iterator[tuple[DefaultMessageStore, socket.socket]]:
    """A slave whose master is a raw socket the test plays: yields the slave's store and the
    master's connection to it, past the slave's first report (8 zero bytes: it is empty)."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(10)
    cfg = {
        "ha_listen_port": 0,
        "broker_role": BrokerRole.SLAVE,
        "ha_master_address": f"127.0.0.1:{srv.getsockname()[1]}",
    }
    try:
        with running(root, **cfg) as s:
            conn, _ = srv.accept()
            conn.settimeout(10)
            try:
                assert conn.recv(8) == b"\x00" * 8  # the slave reports at once
                yield s, conn
            finally:
                conn.close()
    finally:
        srv.close()


def closed_by_slave(conn: socket.socket) -> bytes:
    """What the slave sent until it closed the connection."""
    data = b""
    for _ in range(100):
        chunk = conn.recv(64)
        if not chunk:
            return data
        data += chunk
    raise AssertionError("the slave did not close the connection")


def test_master_wire_format_against_a_raw_slave(tmp_path: Path) -> None:
    """A raw socket plays the slave: it reports 8 big-endian bytes, and reads frames of
    [phyOffset int64][bodySize int32][body], then an empty heartbeat frame."""
    with master(tmp_path / "m", ha_send_heartbeat_interval=300, ha_housekeeping_interval=5000) as m:
        for i in range(3):
            m.put_message(msg(i))
        end = m.get_max_phy_offset()
        assert m.ha_service is not None
        with socket.create_connection(("127.0.0.1", m.ha_service.port), timeout=5) as sock:
            sock.sendall(b"\x00\x00\x00\x00\x00\x00\x00\x00")  # "I have nothing": start of the last file (0)
            got = bytearray()
            frames: list[tuple[int, int]] = []
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                got += sock.recv(65536)
                while len(got) >= 12:
                    off, size = struct.unpack(">qi", got[:12])
                    if len(got) < 12 + size:
                        break
                    frames.append((off, size))
                    if size:
                        assert bytes(got[12 : 12 + size]) == log_bytes(m, off, off + size)
                    del got[: 12 + size]
                if any(size == 0 for _, size in frames[1:]):
                    break
            # the first frame is a heartbeat at 0 (nothing was written yet), the data follows
            assert frames[0] == (0, 0)
            data = [f for f in frames if f[1]]
            assert data[0][0] == 0 and sum(sz for _, sz in data) == end
            assert frames[-1] == (end, 0), frames  # a heartbeat at the next offset
            # an acknowledgement moves push2SlaveMaxOffset
            sock.sendall(struct.pack(">q", end))
            wait_until(lambda: m.ha_service.push2_slave_max_offset == end, what="ack")  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", ["gap", "oversized"])
def test_a_frame_that_does_not_continue_the_log_closes_the_connection(tmp_path: Path, bad: str) -> None:
    """A raw socket plays the master and sends a frame at the wrong offset, or one longer
    than a CommitLog file (which the slave must not wait for and buffer)."""
    with master(tmp_path / "p") as filled:
        for i in range(5):
            filled.put_message(msg(i))
        good = log_bytes(filled, 0, filled.get_max_phy_offset())
    with fake_master(tmp_path / "s") as (s, conn):
        conn.sendall(struct.pack(">qi", 0, len(good)) + good)
        wait_until(lambda: s.get_max_phy_offset() == len(good), what="first frame applied")
        if bad == "gap":
            conn.sendall(struct.pack(">qi", len(good) + 100, 4) + b"oops")
        else:
            conn.sendall(struct.pack(">qi", len(good), 2**31 - 1) + b"oops")
        data = closed_by_slave(conn)  # it acknowledges, then closes
        assert struct.pack(">q", len(good)) in data
        assert s.get_max_phy_offset() == len(good)
        wait_dispatched(s)
        assert len(read_queue(s, "T", 0)) == 5


def test_a_part_frame_from_an_old_master_never_joins_the_new_masters_bytes(tmp_path: Path) -> None:
    """Raw sockets play two masters. A sends a frame header and half its body; the slave
    is then pointed at B, which sends whole frames. The slave's log is B's, byte for byte."""
    logs = []
    for name, first in (("a", 100), ("b", 0)):
        with master(tmp_path / name) as filled:
            for i in range(first, first + 5):
                filled.put_message(msg(i))
            logs.append(log_bytes(filled, 0, filled.get_max_phy_offset()))
    log_a, log_b = logs
    srv_a, srv_b = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    for srv in (srv_a, srv_b):
        srv.settimeout(10)
    addr_a, addr_b = (f"127.0.0.1:{srv.getsockname()[1]}" for srv in (srv_a, srv_b))
    cfg = {"ha_listen_port": 0, "broker_role": BrokerRole.SLAVE, "ha_master_address": addr_a}
    with running(tmp_path / "s", **cfg) as s:
        assert s.ha_service is not None
        client = s.ha_service.ha_client
        conn_a, _ = srv_a.accept()
        conn_a.settimeout(10)
        assert conn_a.recv(8) == b"\x00" * 8
        conn_a.sendall(struct.pack(">qi", 0, len(log_a)) + log_a[: len(log_a) // 2])
        wait_until(lambda: len(client._buf) > 0, what="the part-frame read")
        s.ha_service.update_master_address(addr_b)
        conn_b, _ = srv_b.accept()
        conn_b.settimeout(10)
        assert conn_b.recv(8) == b"\x00" * 8  # nothing was appended from A
        conn_b.sendall(struct.pack(">qi", 0, len(log_b)) + log_b)
        wait_until(lambda: s.get_max_phy_offset() >= len(log_b), what="B's frame applied")
        assert log_bytes(s, 0, s.get_max_phy_offset()) == log_b
        wait_dispatched(s)
        assert len(read_queue(s, "T", 0)) == 5
        conn_a.close()
        conn_b.close()
    srv_a.close()
    srv_b.close()


def test_sync_master_waits_for_a_slave(tmp_path: Path) -> None:
    with master(tmp_path / "m", broker_role=BrokerRole.SYNC_MASTER, sync_flush_timeout=400) as m:
        r = m.put_message(msg(0))
        assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE  # stored, but no slave
        wait_dispatched(m)
        assert m.get_max_offset_in_queue("T", 0) == 1
        with slave(tmp_path / "s", m) as s:
            wait_until(lambda: m.ha_service.connection_count == 1, what="slave connected")  # type: ignore[union-attr]
            caught_up(m, s)
            for i in range(1, 21):
                r = m.put_message(msg(i))
                assert r.status is PutMessageStatus.PUT_OK
                # acknowledged means the slave has it now
                assert (
                    s.get_max_phy_offset() >= r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes
                )  # type: ignore[union-attr]
        wait_until(lambda: m.ha_service.connection_count == 0, what="slave gone")  # type: ignore[union-attr]
        assert m.put_message(msg(99)).status is PutMessageStatus.SLAVE_NOT_AVAILABLE


def test_sync_master_times_out_when_the_slave_does_not_acknowledge(tmp_path: Path) -> None:
    with master(tmp_path / "m", broker_role=BrokerRole.SYNC_MASTER, sync_flush_timeout=300) as m:
        assert m.ha_service is not None
        with socket.create_connection(("127.0.0.1", m.ha_service.port), timeout=5) as sock:
            sock.sendall(struct.pack(">q", 0))  # connected, never acknowledges anything more
            # its report read: a slave that has not reported is no slave to wait for (SLAVE_NOT_AVAILABLE)
            wait_until(lambda: m.ha_service.in_sync_count() == 1, what="reported")  # type: ignore[union-attr]
            t0 = time.monotonic()
            r = m.put_message(msg(0))
            waited = time.monotonic() - t0
            assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
            assert waited >= 0.25
            wait_dispatched(m)
            assert m.get_max_offset_in_queue("T", 0) == 1  # stored all the same


def test_slave_refuses_puts(tmp_path: Path) -> None:
    with running(tmp_path / "s", ha_listen_port=0, broker_role=BrokerRole.SLAVE) as s:
        r = s.put_message(msg(0))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert s.get_max_phy_offset() == 0


def test_the_ha_port_taken_stops_the_start_before_the_abort_file(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        s = DefaultMessageStore(small_config(str(tmp_path / "s"), ha_listen_port=port), ha_listen_host="127.0.0.1")
        with pytest.raises(OSError, match="HA port"):
            s.load()
        assert not (tmp_path / "s" / "abort").exists()
    # The lock was let go: the same directory loads once the port is free.
    s = DefaultMessageStore(small_config(str(tmp_path / "s"), ha_listen_port=port), ha_listen_host="127.0.0.1")
    assert s.load()
    s.start()
    s.shutdown()


def test_group_transfer_service_completes_in_order_and_expires() -> None:
    g = GroupTransferService(timeout_ms=200)
    seen: list[tuple[int, bool]] = []
    lock = threading.Lock()

    def cb(n: int):  # type: ignore[no-untyped-def]
        def done(ok: bool) -> None:
            with lock:
                seen.append((n, ok))

        return done

    for n in (100, 200, 300):
        g.put_request(n, cb(n))
    g.notify_transfer_some(250)
    assert seen == [(100, True), (200, True)]
    g.notify_transfer_some(250)  # not higher: nothing happens
    g.notify_transfer_some(120)  # lower: push2SlaveMaxOffset does not go back
    assert g.push2_slave_max_offset == 250
    g.put_request(240, cb(240))  # already acknowledged: at once
    assert seen[-1] == (240, True)
    time.sleep(0.25)
    g.expire()
    assert seen[-1] == (300, False) and g.pending == 0
    g.put_request(400, cb(400))
    g.shutdown()  # fails what still waits
    assert seen[-1] == (400, False) and g.pending == 0


def test_a_flood_of_connections_to_the_ha_port_is_capped_and_cannot_keep_a_slave_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the cap, a newcomer takes the place of the oldest connection that never reported an
    offset (idle connections kept a real slave out for the 20 s housekeeping timeout); once
    every connection is a reporting slave, newcomers are refused."""
    monkeypatch.setattr(ha_service_module, "MAX_CONNECTIONS", 3)
    with master(tmp_path / "m") as m:
        ha = m.ha_service
        assert ha is not None
        silent = [socket.create_connection(("127.0.0.1", ha.port), timeout=5) for _ in range(3)]
        wait_until(lambda: ha.connection_count == 3, what="three connections")
        slaves = []
        for i in range(3):  # each reporting newcomer evicts the oldest silent connection
            s = socket.create_connection(("127.0.0.1", ha.port), timeout=5)
            s.sendall(struct.pack(">q", 0))
            slaves.append(s)
            assert silent[i].recv(16) == b""  # closed, oldest first
            wait_until(lambda n=i + 1: sum(c.slave_request_offset >= 0 for c in ha.connections()) == n, what="report")
        assert ha.connection_count == 3
        with socket.create_connection(("127.0.0.1", ha.port), timeout=5) as extra:
            assert extra.recv(16) == b""  # three slaves: refused
        assert ha.connection_count == 3
        for s in silent + slaves:
            s.close()
        wait_until(lambda: ha.connection_count == 0, what="connections gone")


def test_a_report_past_the_masters_end_is_ignored(tmp_path: Path) -> None:
    """One forged report of 2**62 set push2SlaveMaxOffset for good, and every SYNC_MASTER send
    was then acknowledged as replicated. A connection that reported past the master's end is
    not a copy of its log: none of its later reports counts; another connection's does."""
    with master(tmp_path / "m") as m:
        m.put_message(msg(0))
        end = m.get_max_phy_offset()
        ha = m.ha_service
        assert ha is not None
        with socket.create_connection(("127.0.0.1", ha.port), timeout=5) as sock:
            sock.sendall(struct.pack(">q", 2**62))
            wait_until(lambda: any(c.diverged_at == end for c in ha.connections()), what="found ahead")
            assert ha.push2_slave_max_offset < end and ha.in_sync_count() == 0
            assert f"slaveOffset={2**62} masterOffset={end}" in str(ha.runtime_info()["haDivergedSlaves"])
            sock.settimeout(5)
            assert struct.unpack(">qi", sock.recv(12)) == (end, 0)  # a heartbeat at the master's end, no data
            sock.sendall(struct.pack(">q", end))
            time.sleep(0.3)  # read and handled on its own
            assert ha.push2_slave_max_offset < end and ha.in_sync_count() == 0
        with socket.create_connection(("127.0.0.1", ha.port), timeout=5) as sock:
            sock.sendall(struct.pack(">q", end))  # a true report on a new connection counts
            wait_until(lambda: ha.push2_slave_max_offset == end, what="ack")
            assert ha.in_sync_count() == 1


def test_a_slave_refuses_a_frame_at_a_negative_offset(tmp_path: Path) -> None:
    """An empty slave took any first frame: at -4096 it made a CommitLog file named -0000000000004194304."""
    with fake_master(tmp_path / "s") as (s, conn):
        conn.sendall(struct.pack(">qi", -4096, 100) + b"x" * 100)
        closed_by_slave(conn)
        assert s.get_max_phy_offset() == 0 and s.get_min_phy_offset() == -1  # no file at all
        commit_log_dir = tmp_path / "s" / "commitlog"
        assert not commit_log_dir.exists() or not [f for f in os.listdir(commit_log_dir) if f.startswith("-")]


def test_a_slave_pauses_before_reconnecting_to_a_master_that_closed_it(tmp_path: Path) -> None:
    """A master that closes each connection at once (its HA port full) got ~9,000 connections
    a second from one slave, and both logs a line each."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.settimeout(0.2)
    cfg = {"ha_listen_port": 0, "broker_role": BrokerRole.SLAVE, "ha_master_address": f"127.0.0.1:{port}"}
    for bad_frame in (False, True):  # closed at once; or sent a frame the slave refuses
        accepted = 0
        with running(tmp_path / f"s{bad_frame}", **cfg):
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                try:
                    conn, _ = srv.accept()
                except TimeoutError:
                    continue
                accepted += 1
                if bad_frame:
                    conn.settimeout(5)
                    conn.recv(8)
                    conn.sendall(struct.pack(">qi", -1, 0))
                    conn.recv(64)
                conn.close()
        assert 1 <= accepted <= 4, (bad_frame, accepted)
    srv.close()
