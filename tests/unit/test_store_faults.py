"""The store under injected faults (issue 22): failed reservations, syncs and ConsumeQueue writes.

Faults come from the store's own seam (``disk_io.FAULTS``), which fails the system call
itself: nothing acknowledged may be unwritten or unsynced, no service thread may die, and
the store says why it refuses writes. The same on a real full disk is tests/faults.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from collections.abc import Iterator

import pytest

from pumice.store import (
    FlushDiskType,
    MessageExtBrokerInner,
    PutMessageStatus,
    disk_io,
)
from pumice.store.disk_io import FAULTS, Faults, StoreIOError
from pumice.store.mapped_file import MappedFile, offset_to_file_name, reserve_chunk
from pumice.store.running_flags import FLUSH_FAILED_BIT, WRITE_LOGICS_QUEUE_ERROR_BIT
from tests.helpers.store import opened, read_queue, small_config
from tests.helpers.waiting import wait_dispatched, wait_until


@pytest.fixture(autouse=True)
def no_faults_left() -> Iterator[None]:
    FAULTS.clear()
    yield
    FAULTS.clear()


def msg(i: int, queue_id: int = 0, topic: str = "T") -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, body=b"m%05d" % i * 20, queue_id=queue_id, properties={"KEYS": f"k{i}"})


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- MappedFile ---------------------------------------------------------------------------


def test_a_mapped_file_holds_one_descriptor(tmp_path) -> None:
    before = open_fds()
    files = [MappedFile(str(tmp_path / offset_to_file_name(i * 65536)), 65536) for i in range(8)]
    try:
        assert open_fds() - before == 8  # the map's own; the file's was closed once mapped
    finally:
        for mf in files:
            mf.destroy(0)
    assert open_fds() == before


def test_writes_reserve_blocks_before_touching_the_map(tmp_path) -> None:
    size = 1 << 20
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), size)
    try:
        assert mf.reserved == 0
        assert os.stat(mf.file_name).st_blocks == 0  # sparse until written
        mf.append_message(b"x" * 100)
        chunk = reserve_chunk(size)
        assert mf.reserved == chunk
        assert os.stat(mf.file_name).st_blocks * 512 >= chunk  # the blocks are there
        FAULTS.fail("reserve", errno.ENOSPC)
        mf.append_message(b"y" * (chunk - 200))  # inside the reservation: no call, no failure
        with pytest.raises(StoreIOError) as e:
            mf.append_message(b"z" * 200)
        assert e.value.disk_full and e.value.op == "reserve"
        assert mf.wrote_position == chunk - 100  # nothing written, the pointer did not move
        assert bytes(mf.mmap[chunk - 100 : chunk + 100]) == bytes(200)
    finally:
        mf.destroy(0)


def test_preallocation_that_fails_leaves_no_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    path = str(tmp_path / offset_to_file_name(0))
    with pytest.raises(StoreIOError) as e:
        MappedFile(path, 1 << 20, preallocate=True)
    assert e.value.disk_full
    assert not os.path.exists(path)


def test_zero_range_needs_no_new_space(tmp_path) -> None:
    size = 1 << 20
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), size)
    try:
        mf.append_message(b"\x01" * 300_000)
        FAULTS.fail("reserve", errno.ENOSPC)  # a full disk: truncation must still work
        mf.zero_range(1000, 300_000)
        assert bytes(mf.mmap[:1000]) == b"\x01" * 1000
        assert bytes(mf.mmap[1000:300_000]) == bytes(299_000)
        assert mf.reserved <= 1000  # the punched blocks are reserved again before the next write
    finally:
        mf.destroy(0)


def test_failed_sync_never_advances_the_flushed_position(tmp_path) -> None:
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 1 << 16)
    try:
        mf.append_message(b"a" * 5000)
        assert mf.flush(0) == 5000
        mf.append_message(b"b" * 5000)
        FAULTS.fail("msync", errno.EIO, times=1)
        with pytest.raises(StoreIOError):
            mf.flush(0)
        assert mf.flushed_position == 5000
        # the fault is gone, but the kernel may have dropped the pages: no later sync counts
        with pytest.raises(StoreIOError):
            mf.flush(0)
        assert mf.flushed_position == 5000
    finally:
        mf.destroy(0)


def test_faults_from_the_environment(tmp_path) -> None:
    switch = tmp_path / "on"
    f = Faults()
    f._from_env(f"msync:ENOSPC:{switch},reserve")
    f.check("msync", "/x")  # no switch file: no fault
    switch.touch()
    with pytest.raises(StoreIOError) as e:
        f.check("msync", "/x")
    assert e.value.errno == errno.ENOSPC
    with pytest.raises(StoreIOError) as e:
        f.check("reserve", "/x")
    assert e.value.errno == errno.EIO
    with pytest.raises(ValueError):
        f._from_env("fsync:EIO")


# -- the CommitLog's puts -----------------------------------------------------------------


def test_put_without_space_is_refused_and_changes_nothing(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.ASYNC_FLUSH)
    with opened(cfg) as s:
        r = s.put_message(msg(0))
        assert r.status is PutMessageStatus.PUT_OK
        FAULTS.fail("reserve", errno.ENOSPC, match="/commitlog/")
        refused = 0
        for i in range(1, 400):  # crosses reservation chunks and files
            r = s.put_message(msg(i))
            if r.status is not PutMessageStatus.PUT_OK:
                assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE, r
                assert "DISK_FULL" in r.remark and "No space left" in r.remark, r.remark
                refused += 1
                break
        assert refused
        assert s.running_flags.describe() == "DISK_FULL"
        end = s.commit_log.get_max_offset()
        table = dict(s.commit_log.topic_queue_table)
        r2 = s.put_message(msg(999))
        assert r2.status is PutMessageStatus.SERVICE_NOT_AVAILABLE  # the mark holds until the disk check clears it
        assert s.commit_log.get_max_offset() == end and s.commit_log.topic_queue_table == table
        FAULTS.clear()
        # the disk check (every 0.5 s) sees a disk with room and clears the mark
        wait_until(lambda: s.running_flags.is_writeable(), 3.0, "the disk-full mark cleared")
        r3 = s.put_message(msg(1000))
        assert r3.status is PutMessageStatus.PUT_OK
        assert r3.append_message_result.logics_offset == table[("T", 0)]  # no gap in the queue
        wait_dispatched(s)
        bodies = read_queue(s, "T", 0)
        assert bodies[-1] == msg(1000).body and len(bodies) == table[("T", 0)] + 1


def test_sync_flush_failure_is_never_acknowledged_and_stops_writes_until_restart(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=5000)
    with opened(cfg) as s:
        ok = s.put_message(msg(0))
        assert ok.status is PutMessageStatus.PUT_OK
        FAULTS.fail("msync", errno.EIO, match="/commitlog/")
        t0 = time.monotonic()
        r = s.put_message(msg(1))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT, r
        assert time.monotonic() - t0 < 2.0  # told at once, not after syncFlushTimeout
        assert s.running_flags.flag_bits & FLUSH_FAILED_BIT
        mfq = s.commit_log.mapped_file_queue
        amr = ok.append_message_result
        assert mfq.flushed_where == amr.wrote_offset + amr.wrote_bytes  # only the synced put
        FAULTS.clear()
        time.sleep(0.1)  # the group commit goes on; the disk "recovered"
        r = s.put_message(msg(2))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "FLUSH_FAILED" in r.remark and "restart" in r.remark
        assert s.commit_log.flush_service._thread.is_alive()
        assert mfq.flushed_where == amr.wrote_offset + amr.wrote_bytes  # never passes the failed sync
    # the abort file stays (the store was not writeable): the next start recovers and writes again
    assert os.path.exists(cfg.abort_path)
    with opened(cfg) as s2:
        assert not s2.last_exit_ok
        assert s2.put_message(msg(3)).status is PutMessageStatus.PUT_OK
        wait_dispatched(s2)
        assert read_queue(s2, "T", 0)[0] == msg(0).body


def test_sync_flush_waiters_behind_a_failing_flush_get_an_error(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Puts made without waiting (the broker's way), queued while a sync hangs and then fails:
    each waiter is told False."""
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.SYNC_FLUSH)
    fail_now = threading.Event()

    def hanging_then_failing(path: str, address: int, length: int) -> None:
        fail_now.wait(5)
        raise StoreIOError(errno.EIO, "msync", path)

    with opened(cfg) as s:
        monkeypatch.setattr(disk_io, "msync", hanging_then_failing)
        futures = []
        for i in range(20):
            r = s.put_messages((msg(i),), wait_flush=False)
            assert r.status is PutMessageStatus.PUT_OK  # appended; not acknowledged yet
            futures.append(s.flush_future(r))
        fail_now.set()
        assert [f.result(timeout=3) for f in futures] == [False] * 20
        assert s.running_flags.is_flush_failed()
        monkeypatch.undo()


def test_async_flush_failure_stops_writes_and_holds_the_checkpoint(tmp_path) -> None:
    cfg = small_config(
        str(tmp_path / "s"),
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        flush_interval_commit_log=10,
        flush_commit_log_thorough_interval=50,
    )
    with opened(cfg) as s:
        assert s.put_message(msg(0)).status is PutMessageStatus.PUT_OK
        mfq = s.commit_log.mapped_file_queue
        wait_until(lambda: mfq.flushed_where == s.commit_log.get_max_offset(), 3.0, "the first flush")
        assert s.store_checkpoint is not None
        physic = s.store_checkpoint.physic_msg_timestamp
        FAULTS.fail("msync", errno.EIO, match="/commitlog/")
        time.sleep(0.01)
        assert s.put_message(msg(1)).status is PutMessageStatus.PUT_OK  # before the flush fails
        wait_until(lambda: s.running_flags.is_flush_failed(), 5.0, "the failed flush marked")
        assert s.put_message(msg(2)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert mfq.flushed_where < s.commit_log.get_max_offset()
        assert s.store_checkpoint.physic_msg_timestamp == physic
        assert s.commit_log.flush_service._thread.is_alive()


# -- dispatch -----------------------------------------------------------------------------


def test_a_consume_queue_that_cannot_be_written_stops_dispatch_there_and_it_retries(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.ASYNC_FLUSH)
    with opened(cfg) as s:
        for i in range(5):
            assert s.put_message(msg(i, queue_id=0)).status is PutMessageStatus.PUT_OK
        wait_dispatched(s)
        FAULTS.fail("reserve", errno.ENOSPC, match="/consumequeue/")
        # queue 1 has no file yet: its first entry needs space; queue 0 may still have room
        r = s.put_messages([msg(100, queue_id=1)])
        assert r.status is PutMessageStatus.PUT_OK
        wait_until(lambda: s.running_flags.flag_bits & WRITE_LOGICS_QUEUE_ERROR_BIT, 3.0, "the CQ failure marked")
        stuck_at = s.reput_message_service.reput_from_offset
        assert stuck_at == r.append_message_result.wrote_offset  # before the failed record, not past it
        refused = s.put_message(msg(101, queue_id=1))
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "consume queue" in refused.remark and "retried" in refused.remark
        time.sleep(0.3)  # retries go on, and fail, without moving
        assert s.reput_message_service.reput_from_offset == stuck_at
        FAULTS.clear()
        wait_until(lambda: s.running_flags.is_writeable(), 3.0, "dispatch retried and the store writeable")
        wait_dispatched(s)
        assert read_queue(s, "T", 1) == [msg(100).body]
        assert s.put_message(msg(102, queue_id=1)).append_message_result.logics_offset == 1
        wait_dispatched(s)
        assert read_queue(s, "T", 1) == [msg(100).body, msg(102).body]
        assert len(read_queue(s, "T", 0)) == 5


def test_an_index_that_cannot_be_written_stops_dispatch_and_it_retries(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.ASYNC_FLUSH)
    with opened(cfg) as s:
        FAULTS.fail("reserve", errno.ENOSPC, match="/index/")
        r = s.put_message(msg(7))
        assert r.status is PutMessageStatus.PUT_OK
        wait_until(lambda: not s.running_flags.is_writeable(), 3.0, "the index failure marked")
        assert s.query_message("T", "k7") == []
        FAULTS.clear()
        wait_until(lambda: s.running_flags.is_writeable(), 3.0, "dispatch retried")
        wait_dispatched(s)
        assert [m.body for m in s.query_message("T", "k7")] == [msg(7).body]  # indexed once
        assert read_queue(s, "T", 0) == [msg(7).body]


def test_store_refuses_writes_while_the_disk_is_past_its_warning_level(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.ASYNC_FLUSH)
    usage = [0.5]
    with opened(cfg) as s:
        s.clean_commit_log_service.disk_usage = lambda path: usage[0]
        assert s.put_message(msg(0)).status is PutMessageStatus.PUT_OK
        usage[0] = 0.95  # filled by something else in seconds: the 0.5 s check sees it
        wait_until(lambda: not s.running_flags.is_writeable(), 3.0, "the disk marked full")
        r = s.put_message(msg(1))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "DISK_FULL" in r.remark
        got = s.get_message("g", "T", 0, 0, 10)
        assert got is not None and got.message_count == 1  # reads go on
        got.release()
        usage[0] = 0.5
        wait_until(lambda: s.running_flags.is_writeable(), 3.0, "the disk marked OK")
        assert s.put_message(msg(2)).status is PutMessageStatus.PUT_OK


def test_a_start_whose_dispatch_cannot_finish_serves_reads_and_takes_writes_once_it_has(tmp_path) -> None:
    """A full disk at start-up: dispatch cannot build what it must, yet the store starts."""
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.ASYNC_FLUSH)
    with opened(cfg) as s:
        for i in range(3):
            assert s.put_message(msg(i, queue_id=0)).status is PutMessageStatus.PUT_OK
        wait_dispatched(s)
        FAULTS.fail("reserve", errno.ENOSPC, match="/consumequeue/")
        for i in range(3, 6):  # appended, never dispatched: their queue has no file yet
            assert s.put_message(msg(i, queue_id=1)).status is PutMessageStatus.PUT_OK
        wait_until(lambda: not s.running_flags.is_writeable(), 3.0, "dispatch failing")
    t0 = time.monotonic()
    with opened(cfg) as s2:
        assert time.monotonic() - t0 < 10  # not the 120 s stall limit
        assert s2.queue_table_stale
        assert read_queue(s2, "T", 0) == [msg(i).body for i in range(3)]  # reads are served
        r = s2.put_message(msg(99, queue_id=1))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE, r
        FAULTS.clear()
        wait_until(lambda: s2.running_flags.is_writeable(), 5.0, "dispatch caught up")
        assert not s2.queue_table_stale
        r = s2.put_message(msg(6, queue_id=1))
        assert r.append_message_result.logics_offset == 3  # the queue's next offset, read again
        wait_dispatched(s2)
        assert read_queue(s2, "T", 1) == [msg(i).body for i in range(3, 7)]


def test_a_mapped_file_that_cannot_be_set_up_is_not_left_behind(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An IndexFile is named by the time: each failed try would leave one more full-size file."""

    def no_descriptor(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr("pumice.store.mapped_file.mmap.mmap", no_descriptor)
    path = tmp_path / offset_to_file_name(0)
    with pytest.raises(OSError):
        MappedFile(str(path), 1 << 20)
    assert not path.exists()
    monkeypatch.undo()
    existing = MappedFile(str(path), 1 << 20)  # a file that exists is never removed on failure
    existing.append_message(b"x")
    existing.close()
    monkeypatch.setattr("pumice.store.mapped_file.mmap.mmap", no_descriptor)
    with pytest.raises(OSError):
        MappedFile(str(path), 1 << 20)
    assert path.exists()


def test_a_file_made_after_its_waiter_gave_up_is_freed(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The allocation thread finishes a file nobody waits for any more: it must not keep its
    map, its write descriptor and its pool buffer for ever."""
    from pumice.store import allocate_mapped_file_service as ams
    from pumice.store.transient_store_pool import TransientStorePool

    pool = TransientStorePool(2, 1 << 16)
    pool.init()
    gate = threading.Event()
    real = ams.MappedFile

    def slow_mapped_file(*args: object, **kwargs: object) -> MappedFile:
        gate.wait(5)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ams, "MappedFile", slow_mapped_file)
    service = ams.AllocateMappedFileService(preallocate=False, wait_timeout_s=0.2, transient_store_pool=pool)
    before = open_fds()
    try:
        first = str(tmp_path / offset_to_file_name(0))
        ahead = str(tmp_path / offset_to_file_name(1 << 16))
        assert service.put_request_and_return_mapped_file(first, ahead, 1 << 16) is None  # timed out
        gate.set()
        wait_until(lambda: not os.path.exists(first), 5.0, "the orphan file removed")
        assert pool.available_buffer_nums() >= 1  # the orphan's buffer came back (the file ahead holds one)
    finally:
        gate.set()
        service.shutdown()
        pool.destroy()
    assert open_fds() == before


def test_async_flush_pool_write_failure_holds_until_the_write_is_retried(tmp_path) -> None:
    """With the transient pool under ASYNC_FLUSH, a pass that commits nothing (fewer than the
    least pages pending) must not count as the retried write succeeding."""
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.ASYNC_FLUSH, transient_store_pool_enable=True)
    with opened(cfg) as s:
        assert s.commit_log.buffered
        FAULTS.fail("write", errno.ENOSPC, match="/commitlog/")  # a quota: the disk check sees room
        wait_until(lambda: s.put_message(msg(0)).status is not PutMessageStatus.PUT_OK, 5.0, "the failed write marked")
        mfq = s.commit_log.mapped_file_queue
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # every pass fails or commits nothing: never writeable
            assert "WRITE_FAILED" in s.running_flags.describe()
            r = s.put_message(msg(1))
            assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "WRITE_FAILED" in r.remark
            time.sleep(0.02)
        assert mfq.committed_where < mfq.get_max_wrote_position()
        FAULTS.clear()
        wait_until(lambda: s.running_flags.is_writeable(), 5.0, "the retried write")
        assert mfq.committed_where == mfq.get_max_wrote_position()
        assert s.put_message(msg(2)).status is PutMessageStatus.PUT_OK


def test_a_start_with_a_large_backlog_it_cannot_dispatch_stops_waiting(tmp_path) -> None:
    """Each retry parses megabytes before it fails again: start-up must see a dispatch that
    keeps failing, not one that keeps starting over (it waited for the 120 s stall limit)."""
    cfg = small_config(str(tmp_path / "s"), flush_disk_type=FlushDiskType.ASYNC_FLUSH,
                       mapped_file_size_commit_log=8 << 20)  # fmt: skip
    with opened(cfg) as s:
        big = [MessageExtBrokerInner(topic="T", body=b"%05d" % i * 200, queue_id=0) for i in range(64)]
        for _ in range(100):  # about 6.5 MB
            assert s.put_messages(big).status is PutMessageStatus.PUT_OK
        wait_dispatched(s)
    shutil.rmtree(cfg.consume_queue_dir)  # lost: the next start rebuilds it all from the CommitLog...
    FAULTS.fail("reserve", errno.ENOSPC, match="/consumequeue/")  # ...on a disk with no room for it
    t0 = time.monotonic()
    with opened(cfg) as s2:
        assert time.monotonic() - t0 < 15
        assert s2.queue_table_stale and not s2.running_flags.is_writeable()
        FAULTS.clear()
        wait_until(lambda: s2.running_flags.is_writeable(), 20.0, "dispatch caught up")
        assert s2.get_max_offset_in_queue("T", 0) == 6400
        assert s2.put_message(msg(7)).append_message_result.logics_offset == 6400
