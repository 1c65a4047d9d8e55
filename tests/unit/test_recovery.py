"""Recovery: the abort file, normal and abnormal CommitLog recovery, ConsumeQueue and index repair.

Spec: seeds-001-002-004 §10.6, §11, §12, §15; seeds-000-003 A13. A crash is simulated in
process (``crash``): the store's threads stop and its files are unmapped without the clean
shutdown steps, so the abort file stays. What was written through the maps is in the page
cache, as after a killed process; the tests then damage the files directly.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import random
import re
import shutil
import struct
import threading
import time
import types
from collections.abc import Callable

import pytest

import pumice.store.commit_log as commit_log_module
import pumice.store.message_store as message_store_module
import pumice.store.reput_message_service as reput_module
from pumice.common.message_decoder import BLANK_MAGIC_CODE, encode_record
from pumice.store import (
    DefaultMessageStore,
    GetMessageStatus,
    MessageExtBrokerInner,
    MessageStoreConfig,
    MessageSysFlag,
    PutMessageResult,
    StoreLockedError,
)
from pumice.store import recovery_progress as recovery_progress_module
from pumice.store.consume_queue import ConsumeQueue
from pumice.store.message_check import scan_records
from pumice.store.recovery_progress import RecoveryProgress
from tests.helpers.store import (
    FILE_SIZE,
    HEAD,
    Rec,
    commit_log_path,
    crash,
    opened,
    read_queue,
    small_config,
    start_store,
    write_at,
    zero_tail,
)
from tests.helpers.waiting import wait_dispatched, wait_until

CQ_UNIT = 20


# -- helpers -------------------------------------------------------------------------------


def put(s: DefaultMessageStore, key: str, body: bytes, queue_id: int = 0, topic: str = "T") -> Rec:
    r: PutMessageResult = s.put_message(
        MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties={"KEYS": key})
    )
    assert r.is_ok(), r
    amr = r.append_message_result
    assert amr is not None
    return Rec(key, body, queue_id, amr.logics_offset, amr.wrote_offset, amr.wrote_bytes)


def put_many(
    s: DefaultMessageStore,
    n: int,
    body_size: int,
    queues: int = 1,
    prefix: str = "k",
    before_put: Callable[[int], None] | None = None,
) -> list[Rec]:
    recs = []
    for i in range(n):
        if before_put is not None:
            before_put(i)
        body = (b"%s%05d:" % (prefix.encode(), i) * body_size)[:body_size]
        recs.append(put(s, f"{prefix}{i}", body, queue_id=i % queues))
    return recs


def read_at(cfg: MessageStoreConfig, offset: int, n: int) -> bytes:
    with open(commit_log_path(cfg, offset), "rb") as f:
        f.seek(offset % FILE_SIZE)
        return f.read(n)


def flip_body_byte(cfg: MessageStoreConfig, rec: Rec, at: int = 3) -> None:
    (b,) = read_at(cfg, rec.phys + HEAD + at, 1)
    write_at(cfg, rec.phys + HEAD + at, bytes([b ^ 0x5A]))


def cq_entries(s: DefaultMessageStore, topic: str, queue_id: int) -> list[tuple[int, int, int]]:
    cq = s.get_consume_queue(topic, queue_id)
    assert cq is not None
    entries = []
    for i in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()):
        e = cq.get_entry(i)
        assert e is not None, i
        entries.append(e)
    return entries


def assert_found_by_key(s: DefaultMessageStore, recs: list[Rec], topic: str = "T") -> None:
    for r in recs:
        found = s.query_message(topic, r.key)
        assert [(m.body, m.queue_id, m.queue_offset, m.commit_log_offset) for m in found] == [
            (r.body, r.queue_id, r.queue_offset, r.phys)
        ], r.key


class FakeClock:
    """Stands in for the CommitLog's store clock: each put gets the time the test sets."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now


# -- the abort file ------------------------------------------------------------------------


def test_abort_file_marks_a_running_store_and_survives_a_crash(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    s = DefaultMessageStore(cfg)
    assert s.load()
    assert s.last_exit_ok  # a new directory counts as a clean stop
    assert os.path.exists(cfg.abort_path)  # made before recovery, so a crash while loading counts
    s.start()
    assert os.path.exists(cfg.abort_path)
    put(s, "a", b"a")
    wait_dispatched(s)
    crash(s)
    s.shutdown()  # no-op on a crashed store: must not remove the abort file
    assert os.path.exists(cfg.abort_path)

    s = DefaultMessageStore(cfg)
    assert s.load()
    assert not s.last_exit_ok
    s.start()
    assert os.path.exists(cfg.abort_path)
    s.shutdown()
    assert not os.path.exists(cfg.abort_path)

    s = DefaultMessageStore(cfg)
    assert s.load()
    assert s.last_exit_ok
    # a crash between load and start still leaves the store marked as not cleanly stopped
    fcntl.flock(s._lock_fd, fcntl.LOCK_UN)
    os.close(s._lock_fd)
    s._lock_fd = None
    s.allocate_mapped_file_service.shutdown()
    s = DefaultMessageStore(cfg)
    assert s.load()
    assert not s.last_exit_ok
    s.start()
    assert [m.body for m in s.query_message("T", "a")] == [b"a"]
    s.shutdown()


def test_second_store_on_the_directory_fails_fast_naming_it(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        put(s, "a", b"a")
        other = DefaultMessageStore(small_config(cfg.store_path_root_dir))
        try:
            t0 = time.monotonic()
            with pytest.raises(StoreLockedError, match=re.escape(cfg.store_path_root_dir)):
                other.load()
            assert time.monotonic() - t0 < 1.0
        finally:
            other.allocate_mapped_file_service.shutdown()
        assert os.path.exists(cfg.abort_path)
        assert put(s, "b", b"b").queue_offset == 1  # the running store is unharmed


# -- normal recovery -----------------------------------------------------------------------


def test_clean_restart_scans_only_the_last_three_files(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        recs = put_many(s, 160, 1900)  # ~2 KB records: 5 CommitLog files
        files = [mf.file_from_offset for mf in s.commit_log.mapped_file_queue.mapped_files]
    assert len(files) == 5
    end = recs[-1].end
    in_file = {f: [r for r in recs if r.phys - r.phys % FILE_SIZE == f] for f in files}

    # damage in file 0: normal recovery does not look there, so nothing is cut
    flip_body_byte(cfg, in_file[files[0]][3])
    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert s.last_exit_ok
        assert s.get_max_phy_offset() == end
        assert s.get_max_offset_in_queue("T", 0) == len(recs)

    # damage in the third-last file: found, and the CommitLog is cut at that record
    bad = in_file[files[2]][5]
    flip_body_byte(cfg, bad)
    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert s.get_max_phy_offset() == bad.phys
        assert [mf.file_from_offset for mf in s.commit_log.mapped_file_queue.mapped_files] == files[:3]
        assert not os.path.exists(commit_log_path(cfg, files[3]))
        assert s.get_max_offset_in_queue("T", 0) == bad.queue_offset
        assert s.commit_log.topic_queue_table[("T", 0)] == bad.queue_offset


@pytest.mark.parametrize("check_crc", [True, False], ids=["crc", "no-crc"])
def test_clean_restart_with_a_flipped_body_byte_in_the_last_file(tmp_path, check_crc: bool) -> None:
    cfg = small_config(str(tmp_path / "s"), check_crc_on_recover=check_crc)
    with opened(cfg) as s:
        recs = put_many(s, 90, 1500, queues=3)  # 2+ files; the flipped one is in the last
    bad_i = len(recs) - 7
    bad = recs[bad_i]
    assert bad.phys // FILE_SIZE == recs[-1].phys // FILE_SIZE
    flip_body_byte(cfg, bad)
    with opened(small_config(cfg.store_path_root_dir, check_crc_on_recover=check_crc)) as s:
        if not check_crc:  # without the CRC check the record is structurally fine and kept
            assert s.get_max_phy_offset() == recs[-1].end
            m = s.look_message_by_offset(bad.phys)
            assert m is not None and m.body != bad.body and len(m.body) == len(bad.body)
            return
        kept, gone = recs[:bad_i], recs[bad_i:]
        assert s.get_max_phy_offset() == bad.phys
        for q in range(3):
            kept_q = [r for r in kept if r.queue_id == q]
            assert s.get_max_offset_in_queue("T", q) == len(kept_q)
            assert s.commit_log.topic_queue_table[("T", q)] == len(kept_q)
            assert read_queue(s, "T", q) == [r.body for r in kept_q]
            assert all(off + size <= bad.phys for off, size, _ in cq_entries(s, "T", q))
        assert all(s.look_message_by_offset(r.phys) is None for r in gone)
        assert_found_by_key(s, kept[-5:])
        # new puts continue each queue where the kept records end, at the cut
        first_new = put(s, "new0", b"new0", queue_id=bad.queue_id)
        assert first_new.phys == bad.phys and first_new.queue_offset == bad.queue_offset
        for q in range(3):
            if q != bad.queue_id:
                assert put(s, f"new{q}", b"n", queue_id=q).queue_offset == len([r for r in kept if r.queue_id == q])
        wait_dispatched(s)
        assert read_queue(s, "T", bad.queue_id)[-1] == b"new0"


def test_clean_restart_that_cut_the_commit_log_still_indexes_new_messages(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        recs = put_many(s, 20, 100)
    flip_body_byte(cfg, recs[10])
    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert s.get_max_phy_offset() == recs[10].phys
        new = put(s, "fresh", b"fresh")
        assert new.phys == recs[10].phys
        wait_dispatched(s)
        assert [m.body for m in s.query_message("T", "fresh")] == [b"fresh"]


# -- abnormal recovery ---------------------------------------------------------------------


def garble_tail(cfg: MessageStoreConfig, rec: Rec) -> None:
    n = rec.size - HEAD - 4
    write_at(cfg, rec.end - n, random.Random(7).randbytes(n))


@pytest.mark.parametrize(
    ("damage", "torn_from_end", "checkpoint"),
    [
        (zero_tail, 1, {}),
        (garble_tail, 1, {}),
        (garble_tail, 6, {}),
        # the checkpoint covers everything: recovery starts at the last file and the index files are
        # kept at load, so the one indexing the torn records must be dropped after the scan
        (zero_tail, 3, {"physic_msg_timestamp": 2**62, "logics_msg_timestamp": 2**62, "index_msg_timestamp": 2**62}),
    ],
    ids=["zeroed-last-record", "garbled-last-record", "garbled-sixth-last-record", "checkpoint-covers-all"],
)
def test_crash_with_a_torn_record_truncates_everything_from_it(
    tmp_path, damage, torn_from_end: int, checkpoint: dict[str, int]
) -> None:
    cfg = small_config(str(tmp_path / "s"))
    s = start_store(cfg)
    recs = put_many(s, 120, 900, queues=3)  # ~1 KB records: 2 CommitLog files
    wait_dispatched(s)
    crash(s, **checkpoint)
    torn_i = len(recs) - torn_from_end
    torn = recs[torn_i]
    damage(cfg, torn)
    kept, gone = recs[:torn_i], recs[torn_i:]

    s = DefaultMessageStore(small_config(cfg.store_path_root_dir))
    assert s.load()
    assert not s.last_exit_ok
    if checkpoint:
        assert s.redispatch_from_offset >= 0 and s.index_service.index_file_list == []
    assert s.get_max_phy_offset() == torn.phys
    assert s.commit_log.mapped_file_queue.flushed_where == torn.phys
    s.start()
    try:
        for q in range(3):
            kept_q = [r for r in kept if r.queue_id == q]
            entries = cq_entries(s, "T", q)
            assert [e[0] for e in entries] == [r.phys for r in kept_q]  # nothing points past the end
            assert s.commit_log.topic_queue_table[("T", q)] == len(kept_q)
            assert read_queue(s, "T", q) == [r.body for r in kept_q]
        assert_found_by_key(s, kept)
        for r in gone:
            assert s.query_message("T", r.key) == []
            assert s.look_message_by_offset(r.phys) is None
        # the store takes new writes where the kept data ends
        first = put(s, "after0", b"after0", queue_id=torn.queue_id)
        assert first.phys == torn.phys
        assert first.queue_offset == len([r for r in kept if r.queue_id == torn.queue_id])
        more = [put(s, f"after{i}", b"after%d" % i, queue_id=i % 3) for i in range(1, 4)]
        wait_dispatched(s)
        assert_found_by_key(s, [first, *more])
    finally:
        s.shutdown()
    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert s.last_exit_ok
        assert sum(s.get_max_offset_in_queue("T", q) for q in range(3)) == len(kept) + 4
        assert_found_by_key(s, [kept[0], kept[-1], first, *more])


def test_crash_with_index_files_newer_than_the_checkpoint_rebuilds_the_index(tmp_path, caplog) -> None:
    cfg = small_config(str(tmp_path / "s"))
    s = start_store(cfg)
    recs = put_many(s, 300, 500)  # 3 CommitLog files, 2 index files (255 keys each)
    wait_dispatched(s)
    index_files = sorted(os.listdir(cfg.index_dir))
    assert len(index_files) == 2
    # the CommitLog and ConsumeQueue time points cover every file, the index one covers nothing
    crash(s, physic_msg_timestamp=2**62, logics_msg_timestamp=2**62, index_msg_timestamp=0)

    caplog.set_level(logging.INFO, logger="pumice.store")
    s = DefaultMessageStore(small_config(cfg.store_path_root_dir))
    assert s.load()
    destroyed = [r for r in caplog.records if "destroy index file" in r.getMessage()]
    assert len(destroyed) == 2
    assert s.index_service.index_file_list == []
    last_file = s.commit_log.mapped_file_queue.mapped_files[-1]
    assert any(f"recover abnormally from {last_file.file_name}" in r.getMessage() for r in caplog.records)
    assert s.redispatch_from_offset == 0  # the pruned index files covered everything from offset 0
    s.start()
    try:
        assert_found_by_key(s, recs)
        assert s.get_max_offset_in_queue("T", 0) == len(recs)
    finally:
        s.shutdown()


def put_with_clock(
    s: DefaultMessageStore, monkeypatch: pytest.MonkeyPatch, n: int, step_ms: int
) -> tuple[list[Rec], list[int]]:
    """Put n ~2 KB messages, each stored ``step_ms`` after the last; returns them and each file's first store time."""
    clock = FakeClock(int(time.time() * 1000) - 3_600_000)
    monkeypatch.setattr(commit_log_module, "_now_ms", clock)
    stamps: list[int] = []

    def tick(_: int) -> None:
        clock.now += step_ms
        stamps.append(clock.now)

    recs = put_many(s, n, 1900, before_put=tick)
    wait_dispatched(s)
    monkeypatch.undo()
    first_ts: dict[int, int] = {}
    for r, ts in zip(recs, stamps, strict=True):
        first_ts.setdefault(r.phys // FILE_SIZE, ts)
    return recs, [first_ts[k] for k in sorted(first_ts)]


@pytest.mark.parametrize(
    ("covered", "index_safe", "start_file"),
    [(3, False, 2), (0, False, 0), (5, True, 1), (5, False, 4)],
    ids=["last-two-uncovered", "nothing-covered", "index-safe-uses-index-time", "all-covered"],
)
def test_abnormal_recovery_starts_at_the_last_file_the_checkpoint_covers(
    tmp_path, monkeypatch: pytest.MonkeyPatch, caplog, covered: int, index_safe: bool, start_file: int
) -> None:
    """``covered``: how many files' first records are older than min(physic, logics) − 3 s.

    With messageIndexSafe the index time point counts too; it is set to cover only 2 files.
    """
    cfg = small_config(str(tmp_path / "s"), message_index_safe=index_safe)
    s = start_store(cfg)
    recs, first_ts = put_with_clock(s, monkeypatch, 160, 1000)  # 5 files, ~31 s apart
    assert len(first_ts) == 5
    # min(physic, logics) - 3000 lands exactly on the first record of the last covered file
    limit = first_ts[covered - 1] if covered else first_ts[0] - 1
    crash(s, physic_msg_timestamp=limit + 3000, logics_msg_timestamp=limit + 3000, index_msg_timestamp=first_ts[1])

    caplog.set_level(logging.INFO, logger="pumice.store.commit_log")
    s = DefaultMessageStore(small_config(cfg.store_path_root_dir, message_index_safe=index_safe))
    assert s.load()
    name = os.path.join(cfg.commit_log_dir, f"{start_file * FILE_SIZE:020d}")
    starts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("recover abnormally from")]
    assert starts == [f"recover abnormally from {name}"]
    assert s.redispatch_from_offset <= start_file * FILE_SIZE
    s.start()
    try:
        assert s.get_max_phy_offset() == recs[-1].end
        assert s.get_max_offset_in_queue("T", 0) == len(recs)
        assert_found_by_key(s, recs[::7] + recs[-3:])
    finally:
        s.shutdown()


def test_crash_with_no_commit_log_file_destroys_the_consume_queues(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    s = start_store(cfg)
    put_many(s, 30, 100, queues=2)
    wait_dispatched(s)
    crash(s)
    for name in os.listdir(cfg.commit_log_dir):
        os.remove(os.path.join(cfg.commit_log_dir, name))
    assert os.path.exists(os.path.join(cfg.consume_queue_dir, "T", "0"))

    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert not s.last_exit_ok
        assert s.consume_queue_table == {}
        assert not os.path.exists(os.path.join(cfg.consume_queue_dir, "T", "0"))
        assert s.get_max_offset_in_queue("T", 0) == 0
        assert s.commit_log.topic_queue_table == {}
        assert s.query_message("T", "k0") == []
        new = put(s, "k0", b"again", queue_id=1)
        assert (new.phys, new.queue_offset) == (0, 0)
        wait_dispatched(s)
        assert_found_by_key(s, [new])
    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert read_queue(s, "T", 1) == [b"again"]


def test_crash_with_a_leftover_preallocated_file_drops_it(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    s = start_store(cfg)
    recs = put_many(s, 40, 2000)  # the second file is partly written
    wait_dispatched(s)
    crash(s)
    spare = commit_log_path(cfg, 2 * FILE_SIZE)  # made ahead by the allocation thread, all zeros
    with open(spare, "wb") as f:
        f.truncate(FILE_SIZE)
    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert not os.path.exists(spare)
        assert s.get_max_phy_offset() == recs[-1].end
        new = put(s, "new", b"new")
        assert new.phys == recs[-1].end and new.queue_offset == len(recs)


def test_crash_right_after_a_file_roll_keeps_the_empty_new_file(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    s = start_store(cfg)
    recs = []
    while not recs or recs[-1].phys < FILE_SIZE:  # the last record opened file 1
        recs.append(put(s, f"k{len(recs)}", b"%04d" % len(recs) * 500))
    wait_dispatched(s)
    crash(s)
    last = recs[-1]
    zero_tail(cfg, last)  # the only record of file 1 is torn: file 0 ends in its blank record
    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert s.get_max_phy_offset() == FILE_SIZE
        assert s.get_max_offset_in_queue("T", 0) == len(recs) - 1
        new = put(s, "new", b"new")
        assert (new.phys, new.queue_offset) == (FILE_SIZE, len(recs) - 1)


def test_crash_with_the_transient_store_pool_loses_only_uncommitted_data(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = small_config(
        str(tmp_path / "s"),
        transient_store_pool_enable=True,
        transient_store_pool_size=2,
        commit_interval_commit_log=20,
        commit_commit_log_thorough_interval=20,
    )
    s = DefaultMessageStore(cfg)
    assert s.load()
    mfq = s.commit_log.mapped_file_queue
    real_commit = mfq.commit
    committing = threading.Event()
    committing.set()
    monkeypatch.setattr(mfq, "commit", lambda least: real_commit(least) if committing.is_set() else True)
    s.start()
    committed = put_many(s, 10, 300)
    wait_until(lambda: s.get_max_phy_offset() == committed[-1].end, what="the first puts committed")
    wait_dispatched(s)
    assert s.get_max_offset_in_queue("T", 0) == 10
    committing.clear()  # from here on appends stay in the pool buffer, as if the commit thread lagged
    uncommitted = put_many(s, 10, 300, prefix="u")
    assert mfq.get_max_wrote_position() == uncommitted[-1].end > s.get_max_phy_offset()
    crash(s)  # the commit thread's final commit is held back too: the buffer dies with the process
    monkeypatch.undo()

    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert not s.last_exit_ok
        assert s.get_max_phy_offset() == committed[-1].end
        assert s.get_max_offset_in_queue("T", 0) == 10
        assert read_queue(s, "T", 0) == [r.body for r in committed]
        assert s.query_message("T", "u0") == []
        new = put(s, "new", b"new")
        assert (new.phys, new.queue_offset) == (committed[-1].end, 10)


# -- ConsumeQueue recovery -----------------------------------------------------------------


def test_consume_queue_cut_at_a_bad_entry_is_rebuilt_from_the_commit_log(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        recs = put_many(s, 50, 200)
    cq_file = os.path.join(cfg.consume_queue_dir, "T", "0", f"{0:020d}")
    with open(cq_file, "r+b") as f:  # entry 30 gets size 0: the scan stops there
        f.seek(30 * CQ_UNIT)
        f.write(struct.pack(">qiq", recs[30].phys, 0, 0))
    s = DefaultMessageStore(small_config(cfg.store_path_root_dir))
    assert s.load()
    assert s.get_max_offset_in_queue("T", 0) == 30
    s.start()  # dispatch restarts after the last good entry
    try:
        assert s.get_max_offset_in_queue("T", 0) == 50
        assert [e[0] for e in cq_entries(s, "T", 0)] == [r.phys for r in recs]
        assert read_queue(s, "T", 0) == [r.body for r in recs]
    finally:
        s.shutdown()


def test_truncate_dirty_logic_files_drops_entries_past_the_end(tmp_path) -> None:
    cq = ConsumeQueue("T", 0, str(tmp_path), CQ_UNIT * 8)
    entries = b"".join(struct.pack(">qiq", 100 * i, 100, 0) for i in range(20))  # 3 files: 8 + 8 + 4
    assert cq.put_entries(0, entries, 2000)
    cq.truncate_dirty_logic_files(1250)  # records ending at or before 1250 stay: 0..11
    assert cq.get_max_offset_in_queue() == 12
    assert cq.max_physic_offset == 1200
    assert len(cq.mapped_file_queue.mapped_files) == 2
    cq.truncate_dirty_logic_files(700)  # the whole second file goes
    assert cq.get_max_offset_in_queue() == 7
    assert len(cq.mapped_file_queue.mapped_files) == 1
    cq.mapped_file_queue.shutdown()


def test_truncate_dirty_logic_files_looks_past_an_empty_last_file(tmp_path) -> None:
    # A kill between rolling to a new ConsumeQueue file and writing its first entry leaves
    # that file empty; the entries to drop are then in the full file before it.
    cq = ConsumeQueue("T", 0, str(tmp_path), CQ_UNIT * 8)
    entries = b"".join(struct.pack(">qiq", 100 * i, 100, 0) for i in range(8))
    assert cq.put_entries(0, entries, 800)
    cq.mapped_file_queue.get_last_mapped_file_create(8 * CQ_UNIT)  # the rolled, empty file
    cq.mapped_file_queue.shutdown()
    cq = ConsumeQueue("T", 0, str(tmp_path), CQ_UNIT * 8)
    assert cq.load()
    cq.recover()
    assert [mf.wrote_position for mf in cq.mapped_file_queue.mapped_files] == [8 * CQ_UNIT, 0]
    try:
        cq.truncate_dirty_logic_files(650)  # the CommitLog ends inside record 6
        assert cq.get_max_offset_in_queue() == 6
        assert cq.max_physic_offset == 600
        assert [cq.get_entry(i) for i in range(6)] == [(100 * i, 100, 0) for i in range(6)]
        assert cq.put_entries(6, struct.pack(">qiq", 650, 50, 0), 700)  # the next dispatch lands at 6
        assert cq.get_entry(6) == (650, 50, 0)
    finally:
        cq.mapped_file_queue.shutdown()


def test_truncate_dirty_logic_files_keeps_pre_blank_entries(tmp_path) -> None:
    cq = ConsumeQueue("T", 0, str(tmp_path), CQ_UNIT * 64)
    entries = b"".join(struct.pack(">qiq", 1000 + 100 * i, 100, 0) for i in range(5))
    assert cq.put_entries(10, entries, 1500)  # the queue starts at offset 10: 10 blank entries first
    assert (cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()) == (10, 15)
    try:
        cq.truncate_dirty_logic_files(1300)  # records at 1000, 1100, 1200 end by 1300 and stay
        assert cq.get_max_offset_in_queue() == 13
        assert [cq.get_entry(i) for i in range(10, 13)] == [(1000 + 100 * i, 100, 0) for i in range(3)]
    finally:
        cq.mapped_file_queue.shutdown()


def test_crash_after_consume_queues_were_rebuilt_past_retention_keeps_them(tmp_path) -> None:
    def config() -> MessageStoreConfig:
        return small_config(str(tmp_path / "s"), mapped_file_size_consume_queue=CQ_UNIT * 1000)

    cfg = config()
    with opened(cfg) as s:
        recs = put_many(s, 100, 1900, queues=2)  # ~4 CommitLog files
        wait_dispatched(s)
        mfq = s.commit_log.mapped_file_queue
        for _ in range(3):
            if mfq.delete_expired_file_by_time(0, 0, 0, True, 1):
                break
        assert mfq.get_min_offset() == FILE_SIZE
    # the operator rebuilds the ConsumeQueues: dispatch starts at the CommitLog's min offset,
    # so each queue's first file begins with blank entries
    shutil.rmtree(cfg.consume_queue_dir)
    s = start_store(config())
    kept = [r for r in recs if r.phys >= FILE_SIZE]
    assert [e[0] for e in cq_entries(s, "T", 0)] == [r.phys for r in kept if r.queue_id == 0]
    recs += [put(s, f"more{i}", b"more%d" % i, queue_id=i % 2) for i in range(4)]
    wait_dispatched(s)
    crash(s)
    zero_tail(cfg, recs[-2])  # the last record of queue 0 is torn
    with opened(config()) as s:
        expected = [r for r in recs[:-2] if r.queue_id == 0 and r.phys >= FILE_SIZE]
        assert s.get_max_offset_in_queue("T", 0) == expected[-1].queue_offset + 1
        assert [e[0] for e in cq_entries(s, "T", 0)] == [r.phys for r in expected]
        assert read_queue(s, "T", 0) == [r.body for r in expected]


def test_min_offsets_are_corrected_when_the_first_commit_log_file_is_gone(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        recs = put_many(s, 50, 1900, queues=2)  # ~31 records per file: file 0's entries fit in CQ file 0
        wait_dispatched(s)
        mfq = s.commit_log.mapped_file_queue
        # retention's call; a second call forces the unmap if a reader held the file the first time
        deleted = 0
        for _ in range(3):
            deleted += mfq.delete_expired_file_by_time(0, 0, 0, True, 1)
            if deleted:
                break
        assert deleted == 1 and mfq.get_min_offset() == FILE_SIZE
    assert not os.path.exists(commit_log_path(cfg, 0))
    with opened(small_config(cfg.store_path_root_dir)) as s:
        assert s.get_min_phy_offset() == FILE_SIZE
        for q in range(2):
            rest = [r for r in recs if r.queue_id == q and r.phys >= FILE_SIZE]
            assert s.get_min_offset_in_queue("T", q) == rest[0].queue_offset > 0
            assert s.get_max_offset_in_queue("T", q) == rest[-1].queue_offset + 1
            res = s.get_message("g", "T", q, 0, 32)
            assert res is not None and res.status is GetMessageStatus.OFFSET_TOO_SMALL
            assert res.next_begin_offset == rest[0].queue_offset
            assert read_queue(s, "T", q) == [r.body for r in rest]
        # dispatch restarted at the CommitLog's min offset, not before it
        assert s.reput_message_service.reput_from_offset == s.get_max_phy_offset()


# -- scan_records ------------------------------------------------------------------------


def records(*bodies: bytes, sys_flag: int = 0) -> list[bytes]:
    v6 = sys_flag & (MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
    host = (bytes(16), 1) if v6 else (b"\x7f\x00\x00\x01", 1)
    return [
        encode_record(
            body=b,
            topic="Topic",
            properties={"KEYS": f"k{i}"},
            sys_flag=sys_flag,
            born_host=host,
            store_host=host,
            store_timestamp=1,
        )
        for i, b in enumerate(bodies)
    ]


def layout(recs: list[bytes], limit: int, start: int = 0) -> tuple[bytearray, list[int]]:
    buf = bytearray(limit)
    offs = []
    pos = start
    for r in recs:
        offs.append(pos)
        buf[pos : pos + len(r)] = r
        pos += len(r)
    offs.append(pos)
    return buf, offs


@pytest.mark.parametrize("check_crc", [True, False])
def test_scan_records_counts_records_and_stops_at_unwritten_space(check_crc: bool) -> None:
    buf, offs = layout(records(b"a" * 10, b"", b"c" * 300), 1024)
    assert scan_records(buf, 0, 1024, check_crc) == (offs[3], 3, False)
    assert scan_records(buf, offs[1], 1024, check_crc) == (offs[3], 2, False)  # from a record boundary
    assert scan_records(memoryview(bytes(buf)), 0, offs[3], check_crc) == (offs[3], 3, False)  # limit at the end


def test_scan_records_reports_a_blank_record_that_fills_the_rest() -> None:
    buf, offs = layout(records(b"a", b"b"), 1024)
    struct.pack_into(">iI", buf, offs[2], 1024 - offs[2], BLANK_MAGIC_CODE)
    assert scan_records(buf, 0, 1024, True) == (offs[2], 2, True)
    struct.pack_into(">iI", buf, offs[2], 1000 - offs[2], BLANK_MAGIC_CODE)  # does not reach the limit
    assert scan_records(buf, 0, 1024, True) == (offs[2], 2, False)
    # a blank of exactly 8 bytes at the end of the limit (the smallest one)
    buf, offs = layout(records(b"a"), 0)
    buf = bytearray(buf) + bytearray(offs[1] + 8 - len(buf))
    struct.pack_into(">iI", buf, offs[1], 8, BLANK_MAGIC_CODE)
    assert scan_records(buf, 0, len(buf), True) == (offs[1], 1, True)


def test_scan_records_stops_at_a_bad_magic() -> None:
    buf, offs = layout(records(b"a", b"b", b"c"), 1024)
    struct.pack_into(">I", buf, offs[1] + 4, 0xDEADBEEF)
    assert scan_records(buf, 0, 1024, False) == (offs[1], 1, False)


@pytest.mark.parametrize(
    ("field_at", "value", "fmt"),
    [
        (0, 90, ">i"),  # TOTALSIZE below the fixed head
        (0, 5000, ">i"),  # TOTALSIZE past the limit
        (0, -1, ">i"),
        (84, 9999, ">i"),  # BODYLENGTH past the record
        (84, -1, ">i"),
        ("topic", 77, ">B"),  # TOPICLENGTH past the record
        ("props", 3, ">H"),  # PROPERTIESLENGTH does not add up to TOTALSIZE
    ],
)
def test_scan_records_stops_at_a_bad_length(field_at: int | str, value: int, fmt: str) -> None:
    recs = records(b"a" * 10, b"b" * 20, b"c")
    buf, offs = layout(recs, 1024)
    if field_at == "topic":
        pos = offs[1] + HEAD + 20
    elif field_at == "props":
        pos = offs[1] + HEAD + 20 + 1 + len("Topic")
    else:
        pos = offs[1] + int(field_at)
    struct.pack_into(fmt, buf, pos, value)
    assert scan_records(buf, 0, 1024, False) == (offs[1], 1, False)


def test_scan_records_checks_the_body_crc_only_when_asked() -> None:
    buf, offs = layout(records(b"a" * 10, b"b" * 20, b"c" * 30), 1024)
    buf[offs[1] + HEAD + 7] ^= 0xFF
    assert scan_records(buf, 0, 1024, True) == (offs[1], 1, False)
    assert scan_records(buf, 0, 1024, False) == (offs[3], 3, False)


def test_scan_records_reads_ipv6_hosts() -> None:
    flags = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    recs = records(b"x" * 5, b"y" * 6, sys_flag=flags)
    assert len(recs[0]) == 91 + 24 + 5 + len("Topic") + len("KEYS\x01k0")
    buf, offs = layout(recs, 512)
    assert scan_records(buf, 0, 512, True) == (offs[2], 2, False)
    buf[offs[1] + HEAD + 24 + 2] ^= 1  # a body byte (the head is 24 bytes longer)
    assert scan_records(buf, 0, 512, True) == (offs[1], 1, False)


# -- recovery progress ---------------------------------------------------------------------


def test_recovery_logs_progress_with_size_and_rate(tmp_path, caplog) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        put_many(s, 100, 1000)
    caplog.set_level(logging.INFO, logger="pumice.store.recovery_progress")
    with opened(small_config(cfg.store_path_root_dir)):
        pass
    done = [r.getMessage() for r in caplog.records if r.name == "pumice.store.recovery_progress"]
    assert len(done) == 1
    assert re.fullmatch(r"recover CommitLog done: [\d.,]+ of [\d.,]+ MB scanned, [\d,]+ MB/s", done[0]), done


def test_recovery_progress_logs_periodically_when_not_on_a_terminal(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setattr(recovery_progress_module.sys, "stderr", io.StringIO())  # not a TTY
    monkeypatch.setattr(recovery_progress_module, "LOG_EVERY_S", 0.0)
    caplog.set_level(logging.INFO, logger="pumice.store.recovery_progress")
    p = RecoveryProgress(total_bytes=10_000_000, what="Thing")
    p.advance(2_500_000)
    p.advance(2_500_000)
    p.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("recover Thing: 2.5 of 10.0 MB scanned, ")
    assert lines[1].startswith("recover Thing: 5.0 of 10.0 MB scanned, ")
    assert lines[-1].startswith("recover Thing done: 5.0 of 10.0 MB scanned, ") and lines[-1].endswith(" MB/s")


def test_parallel_file_scan_finds_the_same_end(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Big recoveries check files in worker processes; the valid end must be the same."""
    from pumice.store import commit_log

    cfg = small_config(str(tmp_path / "s"))
    s = start_store(cfg)
    recs = put_many(s, 200, 900, queues=2)  # ~3 CommitLog files
    wait_dispatched(s)
    crash(s)
    torn = recs[-5]
    garble_tail(cfg, torn)
    monkeypatch.setattr(commit_log, "PARALLEL_SCAN_MIN_BYTES", 0)
    pools: list[object] = []
    real_pool = commit_log.ProcessPoolExecutor

    def spy(*a: object, **kw: object) -> object:
        pools.append(real_pool(*a, **kw))  # type: ignore[arg-type]
        return pools[-1]

    monkeypatch.setattr(commit_log, "ProcessPoolExecutor", spy)
    s = DefaultMessageStore(small_config(cfg.store_path_root_dir))
    try:
        assert s.load()
        assert len(pools) == 1  # the scan did run in worker processes
        assert len(s.commit_log.mapped_file_queue.mapped_files) >= 3
        assert s.get_max_phy_offset() == torn.phys
    finally:
        s.shutdown()


# -- start-up waits for dispatch ----------------------------------------------------------------


def _store_with_undispatched_log(tmp_path) -> MessageStoreConfig:
    """A clean store whose ConsumeQueues were removed: the next start rebuilds them all."""
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        put_many(s, 40, 200)
    shutil.rmtree(cfg.consume_queue_dir)
    return cfg


def test_start_waits_for_a_slow_catch_up_however_long_it_takes(tmp_path, monkeypatch) -> None:
    # each check of the clock is 20 s later: a catch-up of a few dozen steps "takes" minutes
    cfg = _store_with_undispatched_log(tmp_path)
    fake_now = [0.0]

    def later() -> float:
        fake_now[0] += 20.0
        return fake_now[0]

    # the store module's clock only
    fake_time = types.SimpleNamespace(monotonic=later, sleep=time.sleep, time=time.time, time_ns=time.time_ns)
    monkeypatch.setattr(message_store_module, "time", fake_time)
    monkeypatch.setattr(message_store_module, "DISPATCH_STALL_LIMIT_S", 1e9)
    monkeypatch.setattr(reput_module, "MAX_CHUNK_BYTES", 600)  # about two records a step
    s = DefaultMessageStore(cfg)
    assert s.load()
    real_do_dispatch = s.reput_message_service.dispatch
    steps = [0]

    def slow_do_dispatch(reqs):  # type: ignore[no-untyped-def]
        steps[0] += 1
        time.sleep(0.05)
        return real_do_dispatch(reqs)

    s.reput_message_service.dispatch = slow_do_dispatch
    s.start()
    monkeypatch.setattr(message_store_module, "time", time)
    try:
        assert steps[0] > 10  # chunk by chunk, the catch-up outlasted the old 600 s limit on this clock
        assert s.get_max_offset_in_queue("T", 0) == 40
        assert put(s, "new", b"new").queue_offset == 40  # not an offset a rebuilt record holds
        wait_dispatched(s)
        assert read_queue(s, "T", 0)[-1] == b"new"
    finally:
        s.shutdown()


def test_start_fails_when_dispatch_stops_moving(tmp_path, monkeypatch) -> None:
    cfg = _store_with_undispatched_log(tmp_path)
    monkeypatch.setattr(message_store_module, "DISPATCH_STALL_LIMIT_S", 0.3)
    s = DefaultMessageStore(cfg)
    assert s.load()
    real_do_reput = s.reput_message_service.do_reput
    s.reput_message_service.do_reput = lambda: False  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="dispatch made no progress"):
            s.start()
    finally:
        s.reput_message_service.do_reput = real_do_reput  # type: ignore[method-assign]
        s.shutdown()


# -- index files at a crash ---------------------------------------------------------------------


def _put_keys(s: DefaultMessageStore, i: int, keys: str | None) -> int:
    props = {"KEYS": keys} if keys else {}
    r = s.put_message(MessageExtBrokerInner(topic="T", body=b"x%d" % i, queue_id=0, properties=props))
    assert r.is_ok() and r.append_message_result is not None
    return r.append_message_result.wrote_offset


def test_an_empty_index_file_after_a_full_one_is_not_refilled_by_the_redo(tmp_path, monkeypatch) -> None:
    cfg = small_config(str(tmp_path / "s"))
    s = start_store(cfg)
    clock = FakeClock(1_700_000_000_000)
    monkeypatch.setattr(commit_log_module, "_now_ms", clock)
    for i in range(255):  # fills the first index file (255 entries) exactly
        clock.now += 100
        _put_keys(s, i, f"k{i:04d}")
        wait_dispatched(s)
    for i in range(255, 260):  # no keys: the next index file is created and stays empty
        clock.now += 100
        _put_keys(s, i, None)
        wait_dispatched(s)
    monkeypatch.undo()
    crash(s)
    with opened(small_config(cfg.store_path_root_dir)) as s:
        for key in ("k0000", "k0128", "k0253"):
            assert len(s.index_service.query_offset("T", key, 32, 0, 2**62).phy_offsets) == 1, key
        # only the full file's last record is indexed again (see build_index_batch): once more
        assert len(s.index_service.query_offset("T", "k0254", 32, 0, 2**62).phy_offsets) == 2


def test_a_record_whose_keys_spanned_a_dropped_index_file_is_indexed_whole(tmp_path, monkeypatch) -> None:
    cfg = small_config(str(tmp_path / "s"))
    s = start_store(cfg)
    clock = FakeClock(1_700_000_000_000)
    monkeypatch.setattr(commit_log_module, "_now_ms", clock)
    for i in range(140):  # two keys a record: record 127's keys straddle the first file's end
        clock.now += 10
        _put_keys(s, i, f"a{i:04d} b{i:04d}")
        wait_dispatched(s)
    monkeypatch.undo()
    crash(s)  # the checkpoint's index time is the first file's end: the second is dropped at load
    with opened(small_config(cfg.store_path_root_dir)) as s:
        missing = [f"{k}{i:04d}" for i in range(140) for k in "ab" if not s.query_message("T", f"{k}{i:04d}")]
        assert missing == []
