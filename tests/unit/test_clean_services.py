"""Retention: CleanCommitLogService (time, space and manual triggers; hanged files; disk full) and
CleanConsumeQueueService (ConsumeQueue and index files below the CommitLog's min offset)."""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pumice.common.message_decoder import decode_message
from pumice.store import (
    DefaultMessageStore,
    GetMessageStatus,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
)
from pumice.store.clean_commit_log_service import (
    CleanCommitLogService,
    disk_partition_used_ratio,
    is_it_time_to_do,
)
from pumice.store.consume_queue import ConsumeQueue
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched

FILE_SIZE = 64 * 1024  # small_config CommitLog file
CQ_FILE_ENTRIES = 64  # small_config ConsumeQueue file
BODY = 1000
HOUR = 3600.0


class FakeClock:
    """Epoch seconds under test control (for deleteWhen and the redelete interval)."""

    def __init__(self, hour: int) -> None:
        self.t = 0.0
        self.at_hour(hour)

    def at_hour(self, hour: int, minute: int = 30) -> None:
        lt = time.localtime()
        self.t = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, hour, minute, 0, 0, 0, -1))

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def __call__(self) -> float:
        return self.t


class FakeDisk:
    """Used/total ratios of the CommitLog and the ConsumeQueue partitions, under test control."""

    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        self.physic = 0.10
        self.logics = 0.10
        self.paths: list[str] = []

    def set(self, ratio: float) -> None:
        self.physic = self.logics = ratio

    def __call__(self, path: str) -> float:
        self.paths.append(path)
        if path == self.config.commit_log_dir:
            return self.physic
        assert path == self.config.consume_queue_dir, path
        return self.logics


class Env:
    def __init__(self, store: DefaultMessageStore, clock: FakeClock, disk: FakeDisk) -> None:
        self.store = store
        self.clock = clock
        self.disk = disk
        self.cl: CleanCommitLogService = store.clean_commit_log_service


@pytest.fixture
def make_env(tmp_path: Path) -> Iterator[Callable[..., Env]]:
    """A started small store with a fake clock (10:30, outside deleteWhen "04") and a fake 10 %-used disk."""
    stores: list[DefaultMessageStore] = []

    def make(hour: int = 10, start: bool = True, **overrides: object) -> Env:
        values: dict[str, object] = {
            "delete_commit_log_files_interval": 0,
            "delete_consume_queue_files_interval": 0,
            # the flush threads hold a file while syncing it; let them pass old files quickly
            "flush_interval_commit_log": 5,
            "flush_interval_consume_queue": 5,
        }
        values.update(overrides)
        config = small_config(str(tmp_path / f"store{len(stores)}"), **values)
        store = DefaultMessageStore(config)
        clock = FakeClock(hour)
        disk = FakeDisk(config)
        store.clean_commit_log_service.clock = clock
        store.clean_commit_log_service.disk_usage = disk
        stores.append(store)
        assert store.load()
        if start:
            store.start()
        return Env(store, clock, disk)

    yield make
    for s in stores:
        s.shutdown()


def msg(i: int, queue_id: int = 0, topic: str = "T", keys: str | None = None) -> MessageExtBrokerInner:
    props = {"KEYS": keys} if keys else {}
    body = f"{i}:".encode().ljust(BODY, b".")
    return MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties=props)


def put_ok(store: DefaultMessageStore, m: MessageExtBrokerInner) -> PutMessageResult:
    r = store.put_message(m)
    assert r.is_ok(), r
    return r


def fill(store: DefaultMessageStore, n_files: int, queues: int = 1, keys: bool = False) -> list[tuple[int, int, int]]:
    """Put messages until the CommitLog uses ``n_files`` files; (queue id, queue offset, commit log offset) each."""
    out: list[tuple[int, int, int]] = []
    mfq = store.commit_log.mapped_file_queue
    for i in range(n_files * 100):
        if len(mfq.mapped_files) >= n_files:
            break
        qid = i % queues
        r = put_ok(store, msg(i, qid, keys=f"k{i} j{i}" if keys else None))
        res = r.append_message_result
        assert res is not None
        out.append((qid, res.logics_offset, res.wrote_offset))
    assert len(mfq.mapped_files) == n_files
    wait_dispatched(store)
    settle(store)
    return out


def settle(store: DefaultMessageStore, timeout_s: float = 10.0) -> None:
    """Wait until the flush threads are past every file but the last, so only the test holds files.

    A file being flushed is in use: destroying it then leaves it hanging, as a reader would.
    """
    deadline = time.monotonic() + timeout_s
    cqs = [cq for by_id in store.consume_queue_table.values() for cq in by_id.values()]
    queues = [store.commit_log.mapped_file_queue] + [cq.mapped_file_queue for cq in cqs]
    while True:
        busy = [
            mfq.store_path
            for mfq in queues
            if mfq.mapped_files
            and (
                mfq.flushed_where < mfq.mapped_files[-1].file_from_offset
                or any(mf.ref_count != 1 for mf in mfq.mapped_files[:-1])
            )
        ]
        busy += [f.file_name for f in store.index_service.index_file_list[:-1] if f.mapped_file.ref_count != 1]
        if not busy:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"still flushing or held after {timeout_s}s: {busy}")
        time.sleep(0.002)


def names(store: DefaultMessageStore) -> list[str]:
    return [os.path.basename(mf.file_name) for mf in store.commit_log.mapped_file_queue.mapped_files]


def path(store: DefaultMessageStore, name: str) -> str:
    return os.path.join(store.config.commit_log_dir, name)


def age(store: DefaultMessageStore, hours: float, which: slice | list[int] = slice(None)) -> None:
    """Set the mtime of CommitLog files (by position in the queue) ``hours`` into the past."""
    files = store.commit_log.mapped_file_queue.mapped_files
    chosen = files[which] if isinstance(which, slice) else [files[i] for i in which]
    t = time.time() - hours * HOUR
    for mf in chosen:
        os.utime(mf.file_name, (t, t))


def file_name(offset: int) -> str:
    return f"{offset:020d}"


# -- deleteWhen ----------------------------------------------------------------------------


def test_delete_when_lists_hours_separated_by_semicolons() -> None:
    assert is_it_time_to_do("04", 4)
    assert not is_it_time_to_do("04", 5)
    assert is_it_time_to_do("04;16", 4) and is_it_time_to_do("04;16", 16)
    assert not any(is_it_time_to_do("04;16", h) for h in range(24) if h not in (4, 16))
    assert is_it_time_to_do(" 4 ; 16 ", 16)
    assert is_it_time_to_do("0", 0) and not is_it_time_to_do("0", 12)
    assert not any(is_it_time_to_do("", h) for h in range(24))
    assert is_it_time_to_do("xx;04", 4)  # a bad entry is skipped, not fatal
    assert not is_it_time_to_do("xx;04", 5)


@pytest.mark.parametrize("hour", [4, 16])
def test_time_trigger_deletes_expired_files_in_delete_when_hours_only(make_env: Callable[..., Env], hour: int) -> None:
    env = make_env(delete_when="04;16")
    s = env.store
    fill(s, 5)
    before = names(s)
    age(s, 73)  # fileReservedTime is 72 h
    for h in (3, 5, 10, 15, 17, 23):
        env.clock.at_hour(h)
        s.clean_files_periodically()
        assert names(s) == before, h
    env.clock.at_hour(hour, 59)
    s.clean_files_periodically()
    assert names(s) == before[-1:]  # all but the last file
    assert not any(os.path.exists(path(s, n)) for n in before[:-1])
    assert os.path.exists(path(s, before[-1]))
    assert s.get_min_phy_offset() == 4 * FILE_SIZE
    put_ok(s, msg(9999))  # the store goes on writing


def test_file_reserved_time_and_oldest_first_without_gaps(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4, file_reserved_time=48)
    s = env.store
    fill(s, 6)
    before = names(s)
    age(s, 10)
    age(s, 50, [0, 1, 3])  # file 2 is younger than 48 h: it stops the pass, file 3 waits behind it
    s.clean_files_periodically()
    assert names(s) == before[2:]
    assert [os.path.exists(path(s, n)) for n in before] == [False, False, True, True, True, True]
    s.clean_files_periodically()
    assert names(s) == before[2:]
    age(s, 47, [0])  # now before[2]: still inside the reserved time
    s.clean_files_periodically()
    assert names(s) == before[2:]
    age(s, 49, [0])
    s.clean_files_periodically()
    assert names(s) == before[4:]  # before[2] and before[3]; before[4] is only 10 h old


def test_at_most_ten_files_per_pass_and_never_the_last(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4)
    s = env.store
    fill(s, 14)
    before = names(s)
    age(s, 100)
    assert env.cl.delete_expired_files() == 10
    assert names(s) == before[10:]
    assert env.cl.delete_expired_files() == 3
    assert names(s) == before[13:]
    for _ in range(3):
        assert env.cl.delete_expired_files() == 0
    assert names(s) == before[13:]
    assert os.path.exists(path(s, before[13]))


def test_delete_commit_log_files_interval_spaces_deletions(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4, delete_commit_log_files_interval=60)
    s = env.store
    fill(s, 4)
    age(s, 100)
    t0 = time.monotonic()
    assert env.cl.delete_expired_files() == 3
    assert time.monotonic() - t0 >= 2 * 0.060  # at least the pauses between the three deletions


# -- manual trigger --------------------------------------------------------------------------


def test_manual_trigger_deletes_expired_files_for_twenty_runs(make_env: Callable[..., Env]) -> None:
    env = make_env()  # 10:30, deleteWhen "04"
    s = env.store
    fill(s, 3)
    before = names(s)
    age(s, 100)
    s.clean_files_periodically()
    assert names(s) == before
    s.execute_delete_files_manually()
    assert env.cl.manual_delete_file_several_times == 20
    s.clean_files_periodically()
    assert names(s) == before[2:]
    assert env.cl.manual_delete_file_several_times == 19
    for _ in range(19):
        s.clean_files_periodically()
    assert env.cl.manual_delete_file_several_times == 0
    fill(s, 3)  # two more files, old again: no trigger is left
    now = names(s)
    age(s, 100)
    s.clean_files_periodically()
    assert names(s) == now


def test_manual_trigger_keeps_files_younger_than_the_reserved_time(make_env: Callable[..., Env]) -> None:
    env = make_env()
    s = env.store
    fill(s, 3)
    before = names(s)
    age(s, 71)
    s.execute_delete_files_manually()
    s.clean_files_periodically()
    assert names(s) == before


# -- disk space --------------------------------------------------------------------------------


def test_usage_over_disk_max_used_space_ratio_deletes_expired_files(make_env: Callable[..., Env]) -> None:
    env = make_env()  # diskMaxUsedSpaceRatio 75
    s = env.store
    fill(s, 5)
    before = names(s)
    age(s, 10)
    age(s, 100, [0, 1])
    env.disk.set(0.75)
    s.clean_files_periodically()
    assert names(s) == before  # not over 75 %
    env.disk.set(0.80)
    s.clean_files_periodically()
    assert names(s) == before[2:]  # only the expired files: 0.80 is below the forced clean-up ratio
    assert not env.cl.clean_immediately
    put_ok(s, msg(1))


def test_consume_queue_partition_is_checked_too(make_env: Callable[..., Env]) -> None:
    env = make_env()
    s = env.store
    fill(s, 3)
    before = names(s)
    age(s, 100, [0])
    env.disk.logics = 0.80
    assert env.cl.is_space_to_delete()
    assert env.store.config.commit_log_dir in env.disk.paths and env.store.config.consume_queue_dir in env.disk.paths
    s.clean_files_periodically()
    assert names(s) == before[1:]


@pytest.mark.parametrize(("configured", "below", "above"), [(5, 0.09, 0.11), (99, 0.84, 0.96), (60, 0.59, 0.61)])
def test_disk_max_used_space_ratio_is_clamped_to_10_95(
    make_env: Callable[..., Env], configured: int, below: float, above: float
) -> None:
    env = make_env(disk_max_used_space_ratio=configured)
    env.disk.set(below)
    assert not env.cl.is_space_to_delete()
    env.disk.set(above)
    assert env.cl.is_space_to_delete()


def test_unreadable_usage_counts_as_full(make_env: Callable[..., Env]) -> None:
    env = make_env()
    env.disk.physic = -1.0
    assert env.cl.is_space_to_delete()
    assert env.store.running_flags.is_writeable()


def test_over_clean_forcibly_ratio_deletes_young_files_at_once(make_env: Callable[..., Env]) -> None:
    env = make_env()
    s = env.store
    fill(s, 12)
    before = names(s)  # all just written
    env.disk.set(0.87)
    assert env.cl.delete_expired_files() == 10  # batch limit
    assert env.cl.clean_immediately
    assert names(s) == before[10:]
    assert env.cl.delete_expired_files() == 1
    assert names(s) == before[11:]  # never the last
    assert env.cl.delete_expired_files() == 0
    r = s.put_message(msg(1))
    assert r.status is PutMessageStatus.PUT_OK  # 0.87 < 0.90: writes go on


def test_clean_forcibly_disabled_only_deletes_expired_files(make_env: Callable[..., Env]) -> None:
    env = make_env(clean_file_forcibly_enable=False)
    s = env.store
    fill(s, 4)
    before = names(s)
    age(s, 100, [0])
    env.disk.set(0.87)
    s.clean_files_periodically()
    assert names(s) == before[1:]


def test_disk_full_refuses_puts_keeps_reads_and_recovers(make_env: Callable[..., Env]) -> None:
    env = make_env()
    s = env.store
    for i in range(3):
        put_ok(s, msg(i))
    wait_dispatched(s)
    env.disk.physic = 0.95
    s.clean_files_periodically()
    assert s.running_flags.is_writeable() is False
    r = s.put_message(msg(3))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "disk" in r.remark.lower() and "DISK_FULL" in r.remark
    assert s.get_max_offset_in_queue("T", 0) == 3
    res = s.get_message("g", "T", 0, 0, 32)
    assert res is not None
    with res:
        assert res.status is GetMessageStatus.FOUND
        assert [decode_message(b).body[:2] for b in res.buffers] == [b"0:", b"1:", b"2:"]
    assert s.look_message_by_offset(0) is not None

    env.disk.physic = 0.87  # between 0.85 and 0.90: still marked full
    s.clean_files_periodically()
    assert s.put_message(msg(3)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    env.disk.physic = 0.50
    s.clean_files_periodically()
    assert s.running_flags.is_writeable()
    put_ok(s, msg(3))
    wait_dispatched(s)
    assert s.get_max_offset_in_queue("T", 0) == 4


@pytest.mark.parametrize("full", ["physic", "logics"])
@pytest.mark.parametrize("max_ratio", [75, 95])
def test_either_partition_full_marks_the_disk_full(make_env: Callable[..., Env], full: str, max_ratio: int) -> None:
    # with 95, RocketMQ's sequence (CommitLog check, then ConsumeQueue check) would let the
    # healthy ConsumeQueue partition clear the mark the full CommitLog one had just set
    env = make_env(disk_max_used_space_ratio=max_ratio)
    s = env.store
    put_ok(s, msg(0))
    setattr(env.disk, full, 0.92)
    s.clean_files_periodically()
    assert s.put_message(msg(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    s.clean_files_periodically()  # a healthy other partition does not clear the mark
    assert not s.running_flags.is_writeable()
    setattr(env.disk, full, 0.20)
    s.clean_files_periodically()
    put_ok(s, msg(1))


def test_default_usage_function_measures_the_real_partition(tmp_path: Path) -> None:
    ratio = disk_partition_used_ratio(str(tmp_path / "not" / "yet" / "made"))
    assert 0.0 <= ratio <= 1.0
    assert ratio == pytest.approx(disk_partition_used_ratio(str(tmp_path)), abs=0.01)


def test_run_logs_errors_instead_of_raising(make_env: Callable[..., Env]) -> None:
    env = make_env()

    def broken(path: str) -> float:
        raise OSError("boom")

    env.cl.disk_usage = broken
    env.store.clean_files_periodically()  # no exception


# -- hanged files ------------------------------------------------------------------------------


def test_held_file_is_deleted_once_the_reader_releases_it(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4)
    s = env.store
    fill(s, 3)
    before = names(s)
    age(s, 100)
    res = s.get_message("g", "T", 0, 0, 1)
    assert res is not None and res.status is GetMessageStatus.FOUND
    assert [os.path.basename(mf.file_name) for mf in res.held_files] == [before[0]]
    for _ in range(3):  # destroyMapedFileIntervalForcibly (120 s) has not passed
        s.clean_files_periodically()
        assert names(s) == before
        assert os.path.exists(path(s, before[0]))
    assert s.get_min_phy_offset() == FILE_SIZE  # the CommitLog no longer offers the file
    assert decode_message(res.buffers[0]).body[:2] == b"0:"
    res.release()
    s.clean_files_periodically()
    assert names(s) == before[2:]
    assert not os.path.exists(path(s, before[0]))


def test_redelete_hanged_file_forces_a_held_file_out(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4, destroy_mapped_file_interval_forcibly=300, redelete_hanged_file_interval=1000)
    s = env.store
    fill(s, 3)
    before = names(s)
    age(s, 100)
    res = s.get_message("g", "T", 0, 0, 1)
    assert res is not None and res.status is GetMessageStatus.FOUND
    try:
        s.clean_files_periodically()  # deleteWhen: destroy refused, the file hangs
        first = s.commit_log.mapped_file_queue.mapped_files[0]
        assert names(s) == before and not first.available
        assert os.path.exists(path(s, before[0]))

        env.clock.at_hour(5)  # no trigger from now on: only redeleteHangedFile can act
        assert not env.cl.redelete_hanged_file()  # too early: the forcible interval has not passed
        assert names(s) == before
        env.clock.advance(0.5)
        assert not env.cl.redelete_hanged_file()  # within redeleteHangedFileInterval: not even tried
        time.sleep(0.35)  # past destroyMapedFileIntervalForcibly (300 ms, on the real clock)
        assert not env.cl.redelete_hanged_file()  # still within the 1000 ms interval
        assert names(s) == before
        env.clock.advance(1.0)
        s.clean_files_periodically()
        assert names(s) == before[1:]  # the hanged file only: deleteExpiredFiles did not fire
        assert not os.path.exists(path(s, before[0]))
        assert first.ref_count <= 0
        # the reader's view survives the forced unmap until it lets go
        assert decode_message(res.buffers[0]).body[:2] == b"0:"
    finally:
        res.release()
    assert not env.cl.redelete_hanged_file()
    assert names(s) == before[1:]


def test_a_hanged_file_blocks_later_files_until_it_is_gone(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4, destroy_mapped_file_interval_forcibly=0)
    s = env.store
    fill(s, 4)
    before = names(s)
    age(s, 100)
    mf = s.commit_log.mapped_file_queue.mapped_files[0]
    assert mf.hold()
    try:
        assert env.cl.delete_expired_files() == 0  # refused: the pass stops at the first file
        assert names(s) == before
        assert env.cl.delete_expired_files() == 3  # forcible interval 0: forced now, the rest follow
        assert names(s) == before[3:]
    finally:
        mf.release()


# -- ConsumeQueue and index files ----------------------------------------------------------------


def cq_with_entries(tmp_path: Path, offsets: list[int]) -> ConsumeQueue:
    """A standalone queue of 4-entry files whose entries point at ``offsets`` (size 10 each)."""
    cq = ConsumeQueue("T", 0, str(tmp_path / "cq"), 4 * 20)
    data = b"".join(struct.pack(">qiq", o, 10, 0) for o in offsets)
    assert cq.put_entries(0, data, offsets[-1] + 10)
    return cq


def test_consume_queue_delete_expired_file_rule(tmp_path: Path) -> None:
    cq = cq_with_entries(tmp_path, [i * 100 for i in range(14)])  # files of 4: last entries 300, 700, 1100; 1300
    files = [mf.file_name for mf in cq.mapped_file_queue.mapped_files]
    assert len(files) == 4
    assert cq.delete_expired_file(300) == 0  # the last entry must be below the offset, strictly
    assert cq.get_min_offset_in_queue() == 3
    assert cq.delete_expired_file(301) == 1
    assert not os.path.exists(files[0]) and os.path.exists(files[1])
    assert cq.get_min_offset_in_queue() == 4  # the entry pointing at 400
    assert cq.delete_expired_file(950) == 1
    assert cq.get_min_offset_in_queue() == 10  # the entry pointing at 1000
    assert cq.delete_expired_file(10**9) == 1  # everything is below: the last file stays
    assert [mf.file_name for mf in cq.mapped_file_queue.mapped_files] == files[3:]
    assert cq.get_min_offset_in_queue() == cq.get_max_offset_in_queue() == 14
    cq.shutdown()


def test_consume_queue_delete_expired_file_destroys_a_hanged_file(tmp_path: Path) -> None:
    cq = cq_with_entries(tmp_path, [i * 100 for i in range(12)])
    first = cq.mapped_file_queue.mapped_files[0]
    assert first.hold()
    assert cq.delete_expired_file(500) == 0  # held: refused, now unavailable
    assert not first.available and os.path.exists(first.file_name)
    assert cq.get_min_offset_in_queue() == 5  # past the hanging file, at the entry pointing at 500
    first.release()
    assert cq.delete_expired_file(500) == 1  # a hanged file is destroyed without reading it
    assert not os.path.exists(first.file_name)
    assert cq.get_min_offset_in_queue() == 5
    cq.shutdown()


def test_clean_consume_queue_follows_the_commit_log_min_offset(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4)
    s = env.store
    put_log = fill(s, 9, queues=2, keys=True)
    cqs = [s.get_consume_queue("T", q) for q in (0, 1)]
    assert all(cq is not None for cq in cqs)
    cq_files_before = [len(cq.mapped_file_queue.mapped_files) for cq in cqs]  # type: ignore[union-attr]
    assert min(cq_files_before) >= 4
    index_before = list(s.index_service.index_file_list)
    assert len(index_before) >= 4
    age(s, 100, slice(0, 6))
    s.clean_files_periodically()
    cl_min = s.get_min_phy_offset()
    assert cl_min == 6 * FILE_SIZE

    for qid, cq in enumerate(cqs):
        assert cq is not None
        mine = [(qoff, phy) for q, qoff, phy in put_log if q == qid]
        expect_min = next(qoff for qoff, phy in mine if phy >= cl_min)
        assert s.get_min_offset_in_queue("T", qid) == expect_min
        # every remaining file but the last still points at the CommitLog
        kept = cq.mapped_file_queue.mapped_files
        assert len(kept) < cq_files_before[qid]
        assert kept[0].file_from_offset // 20 <= expect_min < kept[0].file_from_offset // 20 + CQ_FILE_ENTRIES
        gone_before = [qoff for qoff, _ in mine if qoff < kept[0].file_from_offset // 20]
        assert gone_before and all(phy < cl_min for qoff, phy in mine if qoff in set(gone_before))

        res = s.get_message("g", "T", qid, 0, 32)
        assert res is not None
        assert res.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert res.next_begin_offset == expect_min
        res = s.get_message("g", "T", qid, expect_min, 1)
        assert res is not None
        with res:
            assert res.status is GetMessageStatus.FOUND
            m = decode_message(res.buffers[0])
            assert m.commit_log_offset >= cl_min and m.queue_offset == expect_min

    index_after = s.index_service.index_file_list
    assert index_after == [f for f in index_before if f.end_phy_offset >= cl_min]
    assert len(index_after) < len(index_before)
    assert all(not os.path.exists(f.file_name) for f in index_before if f not in index_after)
    first_kept = next(i for i, (_, _, phy) in enumerate(put_log) if phy >= cl_min)
    assert s.query_message("T", "k0") == []
    last = len(put_log) - 1
    assert [m.body.split(b":")[0] for m in s.query_message("T", f"k{last}")] == [str(last).encode()]
    assert [m.commit_log_offset for m in s.query_message("T", f"j{first_kept}")] == [put_log[first_kept][2]]


def test_clean_consume_queue_runs_only_when_the_commit_log_min_moved(
    make_env: Callable[..., Env], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(hour=4)
    s = env.store
    fill(s, 4)
    cq = s.get_consume_queue("T", 0)
    assert cq is not None
    calls: list[int] = []
    real = cq.delete_expired_file

    def spy(min_offset: int) -> int:
        calls.append(min_offset)
        return real(min_offset)

    monkeypatch.setattr(cq, "delete_expired_file", spy)
    cq_svc = s.clean_consume_queue_service
    assert cq_svc.delete_expired_files() == 0 and calls == []  # min offset 0: nothing moved
    age(s, 100, [0])
    s.clean_files_periodically()
    assert calls == [FILE_SIZE]
    assert cq_svc.last_physical_min_offset == FILE_SIZE
    for _ in range(3):
        s.clean_files_periodically()
    assert calls == [FILE_SIZE]
    age(s, 100, [0])
    s.clean_files_periodically()
    assert calls == [FILE_SIZE, 2 * FILE_SIZE]


def test_delete_consume_queue_files_interval_pauses_after_each_queue_that_lost_files(
    make_env: Callable[..., Env],
) -> None:
    env = make_env(hour=4, delete_consume_queue_files_interval=80)
    s = env.store
    fill(s, 6, queues=3)
    age(s, 100, slice(0, 4))
    assert env.cl.delete_expired_files() == 4
    t0 = time.monotonic()
    assert s.clean_consume_queue_service.delete_expired_files() >= 3
    assert time.monotonic() - t0 >= 3 * 0.080


# -- scheduling ------------------------------------------------------------------------------------


def test_scheduler_runs_after_the_initial_delay_and_stops_at_shutdown(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4, start=False, clean_resource_interval=20)
    s = env.store
    runs: list[float] = []
    real = s.clean_files_periodically

    def spy() -> None:
        runs.append(time.monotonic())
        real()

    s.clean_files_periodically = spy  # type: ignore[method-assign]
    s.clean_files_initial_delay_ms = 300
    t0 = time.monotonic()
    s.start()
    fill(s, 3)
    age(s, 100)
    before = names(s)
    deadline = time.monotonic() + 10
    while (names(s) != before[2:] or len(runs) < 5) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert names(s) == before[2:]
    # at a fixed rate: run k no earlier than the initial delay plus k cleanResourceIntervals (20 ms)
    assert all(runs[k] - t0 >= 0.3 + k * 0.020 for k in range(5)), [r - t0 for r in runs[:5]]
    thread = s._clean_thread
    assert thread is not None and thread.is_alive()
    s.shutdown()
    assert not thread.is_alive()
    n = len(runs)
    time.sleep(0.1)
    assert len(runs) == n


def test_no_clean_up_before_the_initial_delay(make_env: Callable[..., Env]) -> None:
    env = make_env(hour=4)  # the default: 60 s
    s = env.store
    assert s.clean_files_initial_delay_ms == 60_000
    fill(s, 3)
    before = names(s)
    age(s, 100)
    time.sleep(0.2)
    assert names(s) == before
