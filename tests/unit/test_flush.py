"""Flushing: SYNC_FLUSH group commit, ASYNC_FLUSH, the transient store pool, and the checkpoint file.

Spec: seeds-001-002-004 §11 and §16, seeds-000-003 A20–A23. The segment sync
(``disk_io.msync``) is replaced by wrappers that count calls or hold them back, so flush
timing is under the test's control.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pumice.store import (
    BrokerRole,
    DefaultMessageStore,
    FlushDiskType,
    GetMessageStatus,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
    disk_io,
)
from pumice.store.mapped_file import MappedFile
from pumice.store.transient_store_pool import TransientStorePool
from tests.helpers.store import read_queue, small_config
from tests.helpers.waiting import wait_dispatched, wait_until

FILE_SIZE = 64 * 1024
PAGE = 4096
REAL_MSYNC = disk_io.msync


def msg(body: bytes = b"x", queue_id: int = 0, topic: str = "T", **props: str) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties=dict(props))


def put_ok(store: DefaultMessageStore, m: MessageExtBrokerInner) -> PutMessageResult:
    r = store.put_message(m)
    assert r.is_ok(), r
    return r


def end_of(r: PutMessageResult) -> int:
    amr = r.append_message_result
    assert amr is not None
    return amr.wrote_offset + amr.wrote_bytes


def stays(cond: Callable[[], bool], for_s: float) -> None:
    """Assert ``cond`` holds throughout ``for_s`` seconds (checked every few ms)."""
    deadline = time.monotonic() + for_s
    while time.monotonic() < deadline:
        assert cond()
        time.sleep(0.005)
    assert cond()


@contextmanager
def opened(cfg: MessageStoreConfig, before_start: Callable[[DefaultMessageStore], None] | None = None):
    s = DefaultMessageStore(cfg)
    assert s.load()
    if before_start is not None:
        before_start(s)
    s.start()
    try:
        yield s
    finally:
        s.shutdown()


class GatedFdatasync:
    """``disk_io.msync`` that blocks (up to 5 s) while the gate is closed, and counts calls."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.calls = 0
        self.blocked = 0

    def __call__(self, path: str, address: int, length: int) -> None:
        self.calls += 1
        if not self.open.is_set():
            self.blocked += 1
            self.open.wait(5.0)
        REAL_MSYNC(path, address, length)


@pytest.fixture
def gated_fdatasync(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedFdatasync]:
    g = GatedFdatasync()
    monkeypatch.setattr(disk_io, "msync", g)
    try:
        yield g
    finally:
        g.open.set()  # never leave a flush thread blocked


# -- SYNC_FLUSH ----------------------------------------------------------------------------


def test_sync_flush_put_returns_after_its_data_is_flushed(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with opened(cfg) as s:
        mfq = s.commit_log.mapped_file_queue
        for i in range(70):  # ~1 KiB each: crosses into a second CommitLog file
            r = put_ok(s, msg(b"%04d" % i * 250, queue_id=i % 2))
            assert mfq.flushed_where >= end_of(r)
        assert len(mfq.mapped_files) >= 2
        assert mfq.flushed_where == s.get_max_phy_offset()
        # the group commit moves the checkpoint's CommitLog time to the flushed data
        assert s.store_checkpoint is not None
        assert s.store_checkpoint.physic_msg_timestamp == r.append_message_result.store_timestamp


def test_sync_flush_group_commit_shares_fdatasync_between_concurrent_puts(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers, per_writer = 8, 50
    calls: list[int] = []

    def counting_msync(path: str, address: int, length: int) -> None:
        calls.append(address)
        time.sleep(0.001)  # a disk that takes a millisecond per sync
        REAL_MSYNC(path, address, length)

    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with opened(cfg) as s:
        mfq = s.commit_log.mapped_file_queue
        monkeypatch.setattr(disk_io, "msync", counting_msync)
        start = threading.Barrier(writers)
        results: list[list[tuple[PutMessageResult, int]]] = [[] for _ in range(writers)]
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                start.wait(5)
                for i in range(per_writer):
                    r = s.put_message(msg(b"w%d-%03d:" % (w, i) + b"." * 400, queue_id=w))
                    results[w].append((r, mfq.flushed_where))
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
        assert not errors
        n_syncs = len(calls)
        monkeypatch.undo()
        puts = writers * per_writer
        for w in range(writers):
            assert len(results[w]) == per_writer
            for r, flushed_after in results[w]:
                assert r.status is PutMessageStatus.PUT_OK, r
                assert flushed_after >= end_of(r)
            assert [r.append_message_result.logics_offset for r, _ in results[w]] == list(range(per_writer))
        assert len(mfq.mapped_files) >= 3  # the puts crossed files while being group-committed
        # one fdatasync serves a whole group of waiting puts
        assert 0 < n_syncs <= puts // 2, f"{n_syncs} fdatasync calls for {puts} puts"
        wait_dispatched(s)
        assert read_queue(s, "T", 3, per_writer) == [b"w3-%03d:" % i + b"." * 400 for i in range(per_writer)]


def test_sync_flush_timeout_keeps_the_message(tmp_path, gated_fdatasync: GatedFdatasync) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=200)
    with opened(cfg) as s:
        mfq = s.commit_log.mapped_file_queue
        put_ok(s, msg(b"before"))
        gated_fdatasync.open.clear()  # the disk hangs
        t0 = time.monotonic()
        r = s.put_message(msg(b"slow disk", KEYS="late"))
        took = time.monotonic() - t0
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert r.remark and "syncFlushTimeout" in r.remark and "200" in r.remark
        assert not r.is_ok()
        assert 0.15 <= took < 2.0, took
        assert mfq.flushed_where < end_of(r)
        # the record is stored all the same: dispatched, readable, found by key
        wait_dispatched(s)
        assert read_queue(s, "T", 0, 2) == [b"before", b"slow disk"]
        assert [m.body for m in s.query_message("T", "late")] == [b"slow disk"]
        gated_fdatasync.open.set()  # the disk recovers: the data gets flushed
        wait_until(lambda: mfq.flushed_where >= end_of(r), what="flush after the disk recovered")
        assert put_ok(s, msg(b"after")).append_message_result.logics_offset == 2


def test_sync_flush_put_with_wait_false_does_not_wait_for_the_disk(tmp_path, gated_fdatasync: GatedFdatasync) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=3000)
    with opened(cfg) as s:
        mfq = s.commit_log.mapped_file_queue
        put_ok(s, msg(b"before"))
        gated_fdatasync.open.clear()
        t0 = time.monotonic()
        r = s.put_message(msg(b"no wait", WAIT="false"))
        took = time.monotonic() - t0
        assert r.status is PutMessageStatus.PUT_OK, r
        assert took < 0.5, took
        assert mfq.flushed_where < end_of(r)  # returned before its data reached the disk
        # the put still woke the group commit, which flushes it once the disk answers
        wait_until(lambda: gated_fdatasync.blocked > 0, what="a flush attempt")
        gated_fdatasync.open.set()
        wait_until(lambda: mfq.flushed_where >= end_of(r), what="flush of the WAIT=false put")


# -- ASYNC_FLUSH ---------------------------------------------------------------------------


def no_thorough_flush_at_start(s: DefaultMessageStore) -> None:
    # The first round of FlushRealTimeService is a thorough one (its last flush time is 0);
    # pretend one just happened so only the page threshold applies.
    s.commit_log.flush_service.last_flush_timestamp = int(time.time() * 1000)


def async_config(
    tmp_path: Path, interval_ms: int, thorough_ms: int = 60_000, **overrides: object
) -> MessageStoreConfig:
    """ASYNC_FLUSH with the flush thread's page threshold at 4 (RocketMQ's), flushing every
    ``interval_ms`` and everything every ``thorough_ms``."""
    return small_config(
        str(tmp_path / "s"),
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        flush_commit_log_least_pages=4,
        flush_interval_commit_log=interval_ms,
        flush_commit_log_thorough_interval=thorough_ms,
        **overrides,
    )


def test_async_flush_waits_for_least_pages_then_thorough_interval(tmp_path) -> None:
    cfg = async_config(tmp_path, 50)
    with opened(cfg, no_thorough_flush_at_start) as s:
        mfq = s.commit_log.mapped_file_queue
        for _ in range(3):
            put_ok(s, msg(b"a" * 3900))
        assert s.get_max_phy_offset() < 4 * PAGE
        stays(lambda: mfq.flushed_where == 0, 0.3)  # six intervals, fewer than 4 pages: no flush
        r = put_ok(s, msg(b"b" * 3900))
        assert end_of(r) < 4 * PAGE
        stays(lambda: mfq.flushed_where == 0, 0.15)
        r = put_ok(s, msg(b"c" * 3900))  # now 4 pages are dirty
        assert end_of(r) >= 4 * PAGE
        wait_until(lambda: mfq.flushed_where == end_of(r), what="flush of 4 pages")
        # one more small message: below the threshold again, so it waits for a thorough flush
        small = put_ok(s, msg(b"small"))
        stays(lambda: mfq.flushed_where == end_of(r), 0.2)
        s.config.flush_commit_log_thorough_interval = 100  # read by the service every round
        wait_until(lambda: mfq.flushed_where == end_of(small), what="thorough flush")
        assert s.store_checkpoint is not None
        wait_until(
            lambda: s.store_checkpoint.physic_msg_timestamp == small.append_message_result.store_timestamp,
            what="physicMsgTimestamp after the thorough flush",
        )


def count_wakeups(s: DefaultMessageStore) -> list[int]:
    """The flush thread's wake-ups from now on, counted in the list's one item."""
    service = s.commit_log.flush_service
    wakeups = [0]
    real_wakeup = service.wakeup

    def counted() -> None:
        wakeups[0] += 1
        real_wakeup()

    service.wakeup = counted  # type: ignore[method-assign]
    return wakeups


def test_async_flush_thread_is_woken_only_once_least_pages_are_unflushed(tmp_path) -> None:
    # the timer never fires here: only a wake-up flushes (puts wake it: RocketMQ's default before 4.9.1)
    cfg = async_config(tmp_path, 60_000, flush_commit_log_timed=False)
    with opened(cfg, no_thorough_flush_at_start) as s:
        mfq = s.commit_log.mapped_file_queue
        wakeups = count_wakeups(s)
        small = [put_ok(s, msg(b"a" * 1000)) for _ in range(12)]  # about 3 pages
        assert end_of(small[-1]) < 4 * PAGE and wakeups[0] == 0
        r = put_ok(s, msg(b"b" * 4000))  # 4 pages unflushed now
        assert wakeups[0] == 1
        wait_until(lambda: mfq.flushed_where == end_of(r), what="flush after the wake-up")


def test_async_flush_is_timed_by_default_puts_do_not_wake_it(tmp_path) -> None:
    """flushCommitLogTimed is true, as in RocketMQ 4.9.8: 4 dirty pages do not wake the flush
    thread; the next interval flushes them."""
    assert MessageStoreConfig().flush_commit_log_timed is True
    cfg = async_config(tmp_path, 1_000)
    with opened(cfg, no_thorough_flush_at_start) as s:
        mfq = s.commit_log.mapped_file_queue
        wakeups = count_wakeups(s)
        time.sleep(0.05)  # the thread is in its sleep
        r = [put_ok(s, msg(b"b" * 4000)) for _ in range(6)][-1]  # 6 pages unflushed
        assert end_of(r) >= 4 * PAGE and wakeups[0] == 0
        stays(lambda: mfq.flushed_where == 0, 0.3)  # not woken: a woken thread flushes at once
        wait_until(lambda: mfq.flushed_where == end_of(r), what="the timed flush")


def test_async_flush_with_short_thorough_interval_flushes_one_small_message(tmp_path) -> None:
    cfg = async_config(tmp_path, 50, thorough_ms=100)
    with opened(cfg, no_thorough_flush_at_start) as s:
        mfq = s.commit_log.mapped_file_queue
        r = put_ok(s, msg(b"one"))
        wait_until(lambda: mfq.flushed_where == end_of(r), what="thorough flush of one message")
        assert s.store_checkpoint is not None
        ts = r.append_message_result.store_timestamp
        wait_until(lambda: s.store_checkpoint.physic_msg_timestamp == ts, what="physicMsgTimestamp")


# -- transient store pool ------------------------------------------------------------------


def pool_config(root: str, **overrides: object) -> MessageStoreConfig:
    values: dict[str, object] = {
        "flush_disk_type": FlushDiskType.ASYNC_FLUSH,
        "transient_store_pool_enable": True,
        "transient_store_pool_size": 2,
        "commit_interval_commit_log": 50,
        "flush_interval_commit_log": 50,
    }
    values.update(overrides)
    return small_config(root, **values)


class CommitGate:
    """Stands in for ``MappedFileQueue.commit``: nothing is committed while the gate is closed."""

    def __init__(self, real: Callable[[int], bool]) -> None:
        self.real = real
        self.open = threading.Event()

    def __call__(self, least_pages: int) -> bool:
        return self.real(least_pages) if self.open.is_set() else True


def test_transient_store_pool_data_is_visible_only_once_committed(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = DefaultMessageStore(pool_config(str(tmp_path / "s")))
    pool = s.transient_store_pool
    assert pool is not None and pool.available_buffer_nums() == 2
    assert s.load()
    mfq = s.commit_log.mapped_file_queue
    gate = CommitGate(mfq.commit)
    monkeypatch.setattr(mfq, "commit", gate)
    s.start()
    try:
        r0 = put_ok(s, msg(b"first"))
        f0 = mfq.mapped_files[0]
        assert f0.write_buffer is not None  # appends went to the pool buffer
        assert f0.wrote_position == end_of(r0) and f0.read_position == 0
        # the file made ahead by the allocation thread borrowed the other buffer
        wait_until(lambda: pool.available_buffer_nums() == 0, what="second buffer borrowed")
        stays(lambda: s.get_max_phy_offset() == 0, 0.2)  # not committed: invisible to readers
        res = s.get_message("g", "T", 0, 0, 32)
        assert res is not None and res.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
        assert s.get_max_offset_in_queue("T", 0) == 0
        assert s.look_message_by_offset(0) is None

        # fill file 0 and file 1, roll into file 2: while nothing is committed no buffer comes back,
        # so file 2 (made ahead when file 1 was taken) is written directly
        bodies = [b"first", *fill_three_files(s)]
        f0, f1, f2 = mfq.mapped_files
        assert f0.write_buffer is not None and f1.write_buffer is not None
        assert f2.write_buffer is None
        assert f0.is_full() and f1.is_full() and f0.read_position == f1.read_position == 0
        assert f2.read_position == f2.wrote_position > 0  # no buffer: readable at once
        assert pool.available_buffer_nums() == 0
        # the allocation thread makes file 3 ahead when file 2 is taken; let it finish first, or it
        # would borrow a buffer the moment one comes back
        ahead = os.path.join(s.config.commit_log_dir, f"{3 * FILE_SIZE:020d}")
        wait_until(lambda: os.path.exists(ahead), what="file 3 made ahead")
        time.sleep(0.05)

        gate.open.set()
        wait_until(lambda: f0.write_buffer is None and f1.write_buffer is None, what="full files committed")
        wait_until(lambda: pool.available_buffer_nums() == 2, what="buffers back in the pool")
        assert f0.read_position == f1.read_position == FILE_SIZE
        wait_until(lambda: mfq.committed_where == s.get_max_phy_offset(), what="committed_where at the end")
        wait_dispatched(s)
        assert read_queue(s, "T", 0, len(bodies)) == bodies
    finally:
        gate.open.set()
        s.shutdown()
    assert pool.available_buffer_nums() == 0  # destroyed at shutdown


def fill_three_files(s: DefaultMessageStore) -> list[bytes]:
    """Put 2 KB messages on T/0 until the CommitLog has 3 files; returns their bodies."""
    mfq = s.commit_log.mapped_file_queue
    bodies: list[bytes] = []
    for i in range(200):
        if len(mfq.mapped_files) >= 3:
            break
        bodies.append(b"%05d" % i + b"-" * 1995)
        put_ok(s, msg(bodies[-1]))
    assert len(mfq.mapped_files) == 3
    return bodies


def test_transient_store_pool_dispatch_does_not_run_ahead_of_uncommitted_files(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = DefaultMessageStore(pool_config(str(tmp_path / "s")))
    assert s.load()
    mfq = s.commit_log.mapped_file_queue
    gate = CommitGate(mfq.commit)
    monkeypatch.setattr(mfq, "commit", gate)
    s.start()
    try:
        bodies = fill_three_files(s)
        assert mfq.mapped_files[0].read_position == 0 and mfq.mapped_files[2].write_buffer is None
        # file 2 is readable, but dispatch must not pass the data still in file 0's and 1's buffers,
        # or a consumer reading from offset 0 would be handed file 2's records and skip the rest
        assert s.get_max_phy_offset() == 0
        stays(lambda: s.get_max_offset_in_queue("T", 0) == 0, 0.1)
        res = s.get_message("g", "T", 0, 0, 32)
        assert res is not None
        with res:
            assert res.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE, (res.status, res.queue_offsets)
            assert res.next_begin_offset == 0
        gate.open.set()
        wait_until(lambda: s.get_max_phy_offset() == mfq.get_max_wrote_position(), what="all committed")
        wait_dispatched(s)
        assert read_queue(s, "T", 0, len(bodies)) == bodies
    finally:
        gate.open.set()
        s.shutdown()


def test_transient_store_pool_clean_shutdown_commits_everything(tmp_path) -> None:
    # Commits only when 4 pages are new or every 60 s: small puts stay in the buffer until shutdown.
    cfg = pool_config(
        str(tmp_path / "s"), commit_interval_commit_log=60_000, commit_commit_log_thorough_interval=60_000
    )
    bodies = [b"m%02d" % i * 20 for i in range(20)]
    with opened(cfg) as s:
        for b in bodies:
            put_ok(s, msg(b, KEYS=b[:3].decode()))
        assert s.commit_log.mapped_file_queue.get_max_wrote_position() > 0
        stays(lambda: s.get_max_phy_offset() == 0, 0.15)
    with opened(small_config(cfg.store_path_root_dir)) as again:
        assert again.last_exit_ok  # the stop was clean
        assert again.get_max_offset_in_queue("T", 0) == len(bodies)
        assert read_queue(again, "T", 0, len(bodies)) == bodies
        assert [m.body for m in again.query_message("T", "m07")] == [bodies[7]]


def test_transient_store_pool_without_a_free_buffer_writes_the_file_directly(tmp_path) -> None:
    pool = TransientStorePool(1, PAGE * 2)
    pool.init()
    a = MappedFile(str(tmp_path / f"{0:020d}"), PAGE * 2, transient_store_pool=pool)
    b = MappedFile(str(tmp_path / f"{PAGE * 2:020d}"), PAGE * 2, transient_store_pool=pool)
    try:
        assert a.write_buffer is not None and b.write_buffer is None
        assert pool.available_buffer_nums() == 0
        assert a.append_message(b"A" * 100) and b.append_message(b"B" * 100)
        assert a.read_position == 0 and bytes(a.mmap[:100]) == bytes(100)
        assert b.read_position == 100 and bytes(b.mmap[:100]) == b"B" * 100
        assert a.commit(0) == 100 and bytes(a.mmap[:100]) == b"A" * 100
        assert a.write_buffer is not None  # not full yet: keeps its buffer
        assert a.append_message(b"a" * (PAGE * 2 - 100))
        assert a.commit(4) == PAGE * 2  # a full file commits whatever the page threshold
        assert a.write_buffer is None and pool.available_buffer_nums() == 1
    finally:
        a.close()
        b.close()
        pool.destroy()


def test_transient_store_pool_is_not_used_by_a_slave(tmp_path) -> None:
    cfg = pool_config(str(tmp_path / "s"), broker_role=BrokerRole.SLAVE)
    with opened(cfg) as s:
        assert not s.is_transient_store_pool_enable()
        assert s.transient_store_pool is None
        mf = s.commit_log.mapped_file_queue.get_last_mapped_file_create(0)  # as replication would
        assert mf is not None and mf.write_buffer is None


@pytest.mark.parametrize("enable", [True, False])
@pytest.mark.parametrize("flush", list(FlushDiskType))
@pytest.mark.parametrize("role", list(BrokerRole))
def test_the_pool_is_used_only_when_enabled_with_async_flush_on_a_master(
    tmp_path, enable: bool, flush: FlushDiskType, role: BrokerRole
) -> None:
    """RocketMQ 4.9's rule (MessageStoreConfig.isTransientStorePoolEnable): the key, ASYNC_FLUSH
    and not a slave; the store borrows buffers only then."""
    expected = enable and flush is FlushDiskType.ASYNC_FLUSH and role is not BrokerRole.SLAVE
    cfg = pool_config(str(tmp_path / "s"), transient_store_pool_enable=enable, flush_disk_type=flush, broker_role=role)
    assert cfg.transient_store_pool_in_effect is expected
    with opened(cfg) as s:
        assert s.is_transient_store_pool_enable() is expected
        assert (s.transient_store_pool is not None) is expected
        assert (s.commit_log.commit_service is not None) is expected


def test_sync_flush_writes_the_files_directly_even_with_the_pool_key(tmp_path) -> None:
    """Under SYNC_FLUSH the pool is off whatever the key says (as in RocketMQ): the group
    commit flushes appends written into the map, and they are readable once acknowledged."""
    cfg = pool_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with opened(cfg) as s:
        assert s.transient_store_pool is None and s.commit_log.commit_service is None
        mfq = s.commit_log.mapped_file_queue
        r = put_ok(s, msg(b"direct"))
        assert mfq.mapped_files[0].write_buffer is None
        assert mfq.flushed_where >= end_of(r)
        assert s.get_max_phy_offset() == end_of(r)
        assert s.look_message_by_offset(0).body == b"direct"


def test_a_returned_pool_buffer_gives_its_pages_back(tmp_path) -> None:
    """A buffer back in the pool holds no data (its pages went back to the kernel), so the
    pool keeps resident only the buffers files are using, not transientStorePoolSize files."""
    pool = TransientStorePool(1, PAGE * 4)
    pool.init()
    try:
        buf = pool.borrow_buffer()
        assert buf is not None
        buf[:] = b"x" * len(buf)
        pool.return_buffer(buf)
        again = pool.borrow_buffer()
        assert again is buf and again[:] == bytes(len(buf))
    finally:
        pool.destroy()


# -- ConsumeQueue flush and the checkpoint file -------------------------------------------


def read_checkpoint_file(cfg: MessageStoreConfig) -> tuple[int, int, int]:
    with open(cfg.checkpoint_path, "rb") as f:
        raw = f.read(24)
    return struct.unpack(">qqq", raw)


def test_flush_consume_queue_service_writes_the_checkpoint_on_thorough_flushes(tmp_path) -> None:
    cfg = small_config(
        str(tmp_path / "s"), flush_interval_consume_queue=50, flush_consume_queue_thorough_interval=60_000
    )

    def no_thorough_flush_yet(s: DefaultMessageStore) -> None:
        s.flush_consume_queue_service.last_flush_timestamp = int(time.time() * 1000)

    with opened(cfg, no_thorough_flush_yet) as s:
        assert os.path.getsize(cfg.checkpoint_path) == 4096
        r = put_ok(s, msg(b"x", KEYS="k"))
        ts = r.append_message_result.store_timestamp
        wait_dispatched(s)
        assert s.store_checkpoint is not None
        wait_until(lambda: s.store_checkpoint.dispatched_logics_timestamp == ts, what="dispatched time in memory")
        # dispatch does not set logicsMsgTimestamp, nor write the file: only a thorough flush does
        assert s.store_checkpoint.logics_msg_timestamp == 0
        stays(lambda: read_checkpoint_file(cfg)[1] == 0, 0.2)
        s.config.flush_consume_queue_thorough_interval = 100
        wait_until(lambda: read_checkpoint_file(cfg)[1] == ts, what="checkpoint file written")
        cq = s.get_consume_queue("T", 0)
        assert cq is not None and cq.mapped_file_queue.flushed_where == 20  # the queue was flushed too
    # a clean shutdown writes the final time points
    physic, logics, _ = read_checkpoint_file(cfg)
    assert logics == ts and physic == ts


def test_async_flush_waiter_answers_every_future_whatever_the_threads_interleaving() -> None:
    """Completions from two store threads (flush, HA) while the loop drains: every waiting
    send is answered, with one loop wake-up per batch, none left behind to time out."""
    import asyncio

    from pumice.broker.put_message_waiter import AsyncFlushWaiter

    async def main() -> None:
        loop = asyncio.get_running_loop()
        waiter = AsyncFlushWaiter(loop)
        futures = [loop.create_future() for _ in range(20_000)]
        callbacks = [waiter.callback_for(f) for f in futures]

        def complete(part: list[Callable[[bool], None]]) -> None:
            for i, cb in enumerate(part):
                cb(i % 3 != 0)
                if i % 500 == 0:
                    time.sleep(0)  # let the loop drain mid-stream

        threads = [threading.Thread(target=complete, args=(callbacks[k::2],)) for k in range(2)]
        for t in threads:
            t.start()
        results = await asyncio.wait_for(asyncio.gather(*futures), 20)
        for t in threads:
            t.join()
        assert len(results) == 20_000 and results.count(True) == sum(i % 3 != 0 for i in range(10_000)) * 2

    asyncio.run(main())
