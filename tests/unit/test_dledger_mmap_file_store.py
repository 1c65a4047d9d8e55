"""DLedgerMmapFileStore: placement, appends as leader and follower, truncation, recovery,
checkpoint and expiry, on small files (../shared/spec/DLEDGER.md §3, dledger 0.3.1.2's
DLedgerMmapFileStore and MmapFileList)."""

from __future__ import annotations

import errno
import os
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import (
    BODY_OFFSET,
    INDEX_UNIT_SIZE,
    DLedgerEntry,
    decode_entry,
    encode_entry,
    encode_index_unit,
)
from pumice.dledger.dledger_mmap_file_store import DLedgerMmapFileStore, parse_properties
from pumice.dledger.dledger_response_code import DLedgerError, DLedgerResponseCode
from pumice.store import disk_io

DATA_FILE = 1024
INDEX_FILE = 8 * INDEX_UNIT_SIZE  # 8 units a file, so index files roll too


def make_config(
    base: Path, node: str = "n0", data_size: int = DATA_FILE, index_size: int = INDEX_FILE
) -> DLedgerConfig:
    return DLedgerConfig(
        group="g",
        self_id=node,
        peers=f"{node}-127.0.0.1:40911",
        store_base_dir=str(base),
        mapped_file_size_for_entry_data=data_size,
        mapped_file_size_for_entry_index=index_size,
    )


def open_store(base: Path, node: str = "n0", **kw: int) -> DLedgerMmapFileStore:
    store = DLedgerMmapFileStore(make_config(base, node, **kw))
    store.load_and_recover()
    return store


def close(store: DLedgerMmapFileStore) -> None:
    store.shutdown()


def body(n: int, fill: int = 0x61) -> bytes:
    return bytes([fill]) * n


def lead(store: DLedgerMmapFileStore, sizes: list[int], term: int = 1, fill: int = 0x61) -> list[DLedgerEntry]:
    out: list[DLedgerEntry] = []
    for n in sizes:
        out += store.append_as_leader([DLedgerEntry(body=body(n, fill))], term)
    return out


def data_bytes(store: DLedgerMmapFileStore) -> bytes:
    """Every data file's bytes up to the write position, in order."""
    out = b""
    for mf in store.data_file_queue.mapped_files:
        out += bytes(mf.mmap[: mf.wrote_position])
    return out


def index_bytes(store: DLedgerMmapFileStore) -> bytes:
    out = b""
    for mf in store.index_file_queue.mapped_files:
        out += bytes(mf.mmap[: mf.wrote_position])
    return out


def file_names(directory: str) -> list[str]:
    return sorted(os.listdir(directory))


# -- placement ---------------------------------------------------------------------------


def test_blank_closes_a_file_when_the_entry_and_eight_bytes_do_not_fit(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    # 48 + 400 = 448 twice: 896 written, 128 left in the first file
    first = lead(store, [400, 400])
    assert [e.pos for e in first] == [0, 448]
    # 48 + 72 = 120: 120 + 8 == 128 fits exactly (the +8 rule's edge)
    (fits,) = lead(store, [72])
    assert fits.pos == 896
    # 8 bytes left: nothing more fits; a 1-byte body (49 bytes) goes to the next file
    (nxt,) = lead(store, [1])
    assert nxt.pos == DATA_FILE
    first_file = store.data_file_queue.mapped_files[0]
    assert struct.unpack(">ii", first_file.mmap[1016:1024]) == (-1, 8)
    # 128 bytes left in file 2 after 49 + 48 + 23 = 120? make an entry that fits without the 8
    (a,) = lead(store, [DATA_FILE - 49 - 48 - 4])  # leaves 4 bytes: it does not fit with the 8
    assert a.pos == 2 * DATA_FILE
    second = store.data_file_queue.mapped_files[1]
    assert struct.unpack(">ii", second.mmap[49:57]) == (-1, DATA_FILE - 49)
    assert file_names(store.config.data_path) == [f"{i * DATA_FILE:020d}" for i in range(3)]
    close(store)


def test_leader_append_sets_index_term_pos_runs_the_hook_and_writes_the_index(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    seen: list[tuple[int, int]] = []

    def hook(entry: DLedgerEntry, b: bytearray) -> None:
        b[0:8] = (entry.pos + BODY_OFFSET).to_bytes(8, "big")  # as the broker patches PHYSICALOFFSET

    appended: list[list[DLedgerEntry]] = []
    store.add_append_listener(appended.append)
    store.add_append_hook(lambda e, b: seen.append((e.index, e.pos)))
    entries = [DLedgerEntry(body=body(100)) for _ in range(10)]
    out = store.append_as_leader(entries, 3, hook)
    assert [e.index for e in out] == list(range(10))
    assert all(e.term == 3 and e.magic == 1 and e.size == 148 for e in out)
    assert seen == [(e.index, e.pos) for e in out]
    assert appended == [out]
    assert (store.ledger_begin_index, store.ledger_end_index, store.ledger_end_term) == (0, 9, 3)
    for e in out:
        got = store.get(e.index)
        assert got.same_as(e) and got.body[:8] == (e.pos + BODY_OFFSET).to_bytes(8, "big")
    expected = b"".join(encode_index_unit(1, e.pos, e.size, e.index, 3) for e in out)
    assert index_bytes(store) == expected
    assert len(file_names(store.config.index_path)) == 2  # 8 units a file
    with pytest.raises(DLedgerError) as ei:
        store.get(10)
    assert ei.value.code == DLedgerResponseCode.INDEX_OUT_OF_RANGE
    with pytest.raises(DLedgerError) as ei:
        store.get(-1)
    assert ei.value.code == DLedgerResponseCode.INDEX_OUT_OF_RANGE
    close(store)


# -- followers ---------------------------------------------------------------------------


def test_follower_copies_the_leader_byte_for_byte(tmp_path: Path) -> None:
    leader = open_store(tmp_path / "l")
    follower = open_store(tmp_path / "f")
    entries = lead(leader, [300, 500, 70, 900, 10, 400, 120])
    for e in entries:
        follower.append_as_follower(decode_entry(encode_entry(e)), 1, "n0")
    assert data_bytes(follower) == data_bytes(leader)
    assert index_bytes(follower) == index_bytes(leader)
    assert follower.ledger_end_index == leader.ledger_end_index == 6
    close(leader)
    close(follower)


def test_follower_refuses_a_wrong_pos_or_index_and_writes_nothing(tmp_path: Path) -> None:
    leader = open_store(tmp_path / "l")
    follower = open_store(tmp_path / "f")
    e0, e1 = lead(leader, [100, 100])
    follower.append_as_follower(e0, 1, "n0")
    before = data_bytes(follower)
    wrong = DLedgerEntry(body=e1.body, index=1, term=1, pos=e1.pos + 4)
    with pytest.raises(DLedgerError) as ei:
        follower.append_as_follower(wrong, 1, "n0")
    assert ei.value.code == DLedgerResponseCode.DISK_ERROR
    skip = DLedgerEntry(body=e1.body, index=2, term=1, pos=e1.pos)
    with pytest.raises(DLedgerError) as ei:
        follower.append_as_follower(skip, 1, "n0")
    assert ei.value.code == DLedgerResponseCode.INCONSISTENT_INDEX
    assert data_bytes(follower) == before and follower.write_pos == e1.pos
    assert follower.ledger_end_index == 0
    follower.append_as_follower(e1, 1, "n0")
    assert data_bytes(follower) == data_bytes(leader)
    close(leader)
    close(follower)


def test_follower_entry_that_needs_a_blank_lands_in_the_next_file(tmp_path: Path) -> None:
    leader = open_store(tmp_path / "l")
    follower = open_store(tmp_path / "f")
    entries = lead(leader, [400, 400, 200])
    assert entries[2].pos == DATA_FILE
    for e in entries:
        follower.append_as_follower(e, 1, "n0")
    assert data_bytes(follower) == data_bytes(leader)
    close(leader)
    close(follower)


# -- truncation --------------------------------------------------------------------------


def test_truncate_cuts_a_longer_follower_back_to_the_leader(tmp_path: Path) -> None:
    """The old leader holds entries 5..9 of term 1 that were never committed; the new leader
    has 5.. of term 2, of other sizes."""
    leader = open_store(tmp_path / "l")
    old = open_store(tmp_path / "o")
    common = lead(leader, [100] * 5)
    for e in common:
        old.append_as_follower(e, 1, "n0")
    lead(old, [200] * 5, term=1, fill=0x7A)  # the old leader's uncommitted tail
    old.update_committed_index(1, 3)
    new = lead(leader, [60, 700, 30], term=2, fill=0x62)
    assert old.truncate(new[0], 2, "n1") == 5
    assert (old.ledger_end_index, old.ledger_end_term) == (5, 2)
    with pytest.raises(DLedgerError):
        old.get(6)
    for e in new[1:]:
        old.append_as_follower(e, 2, "n1")
    assert data_bytes(old) == data_bytes(leader)
    assert index_bytes(old) == index_bytes(leader)
    # nothing of the old tail is left past the end (zeroed), so recovery cannot find it
    last = old.data_file_queue.mapped_files[-1]
    assert bytes(last.mmap[last.wrote_position :]).count(0x7A) == 0
    assert old.committed_index == 3
    close(leader)
    close(old)


def test_truncate_keeps_an_entry_it_already_holds(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    entries = lead(store, [100] * 6)
    assert store.truncate(entries[2], 1, "n1") == 2
    assert store.ledger_end_index == 2
    assert store.write_pos == entries[3].pos
    assert store.get(2).body == entries[2].body
    close(store)


def test_truncate_a_shorter_follower_writes_the_entry_at_its_end(tmp_path: Path) -> None:
    leader = open_store(tmp_path / "l")
    short = open_store(tmp_path / "s")
    entries = lead(leader, [100] * 4)
    for e in entries[:2]:
        short.append_as_follower(e, 1, "n0")
    assert short.truncate(entries[2], 1, "n0") == 2
    short.append_as_follower(entries[3], 1, "n0")
    assert data_bytes(short) == data_bytes(leader) and index_bytes(short) == index_bytes(leader)
    close(leader)
    close(short)


# -- recovery ----------------------------------------------------------------------------


def reopen(store: DLedgerMmapFileStore) -> DLedgerMmapFileStore:
    base = Path(store.config.store_base_dir)
    data_size = store.config.mapped_file_size_for_entry_data
    close(store)
    return open_store(base, store.config.self_id, data_size=data_size)


def test_recovery_finds_every_entry_across_blanks_and_files(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    entries = lead(store, [n * 37 % 600 + 1 for n in range(40)])
    store.update_committed_index(1, 30)
    before_data, before_index = data_bytes(store), index_bytes(store)
    store = reopen(store)
    assert (store.ledger_begin_index, store.ledger_end_index, store.ledger_end_term) == (0, 39, 1)
    assert data_bytes(store) == before_data and index_bytes(store) == before_index
    assert store.committed_index == 30
    assert store.committed_pos == entries[30].pos + entries[30].size
    (nxt,) = lead(store, [5])
    assert nxt.index == 40 and nxt.pos == entries[-1].pos + entries[-1].size
    close(store)


def test_recovery_drops_a_torn_last_entry(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    entries = lead(store, [100] * 5)
    last = entries[-1]
    mf = store.data_file_queue.mapped_files[-1]
    rel = last.pos - mf.file_from_offset
    mf.mmap[rel + 8 : rel + last.size] = bytes(last.size - 8)  # only magic and size reached the disk
    store = reopen(store)
    assert store.ledger_end_index == 3
    assert store.write_pos == last.pos
    assert len(index_bytes(store)) == 4 * INDEX_UNIT_SIZE
    (again,) = lead(store, [10], term=2)
    assert again.index == 4 and again.pos == last.pos
    close(store)


def test_recovery_rebuilds_an_index_that_disagrees(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    lead(store, [50] * 20)
    good = index_bytes(store)
    # unit 11: a wrong term; units after it garbage
    index_dir = store.config.index_path
    close(store)
    second = os.path.join(index_dir, f"{INDEX_FILE:020d}")
    with open(second, "r+b") as f:
        f.seek(3 * INDEX_UNIT_SIZE)
        f.write(encode_index_unit(1, 0, 98, 11, 7) + b"\xff" * 40)
    store = open_store(tmp_path)
    assert store.ledger_end_index == 19
    assert index_bytes(store) == good
    assert store.get(15).index == 15
    close(store)


def test_recovery_rebuilds_a_missing_index(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    lead(store, [50] * 20)
    good = index_bytes(store)
    index_dir = store.config.index_path
    close(store)
    for name in os.listdir(index_dir):
        os.remove(os.path.join(index_dir, name))
    store = open_store(tmp_path)
    assert store.ledger_end_index == 19 and index_bytes(store) == good
    close(store)


def test_recovery_stops_at_a_stale_entry_of_an_older_term(tmp_path: Path) -> None:
    """As DLedger leaves a follower's file after a truncation (it does not zero the cut
    tail): entry 3 of term 2 written over entry 3 of term 1, entry 4 of term 1 still after
    it, with the same sizes (so only the term rule can stop the walk)."""
    store = open_store(tmp_path)
    entries = lead(store, [100] * 5)
    e3 = entries[3]
    new3 = DLedgerEntry(body=body(100, 0x62), index=3, term=2, pos=e3.pos)
    mf = store.data_file_queue.mapped_files[0]
    mf.mmap[e3.pos : e3.pos + e3.size] = encode_entry(new3)
    imf = store.index_file_queue.mapped_files[0]
    imf.mmap[3 * 32 : 4 * 32] = encode_index_unit(1, e3.pos, e3.size, 3, 2)
    store = reopen(store)
    assert (store.ledger_end_index, store.ledger_end_term) == (3, 2)
    assert store.write_pos == entries[4].pos
    assert store.get(3).body == new3.body
    close(store)


def test_recovery_checks_the_third_last_file_first(tmp_path: Path) -> None:
    """Five data files: the scan starts at the third-last, whose first entry agrees with
    its index unit, so a broken entry in the first file is never read."""
    store = open_store(tmp_path)
    lead(store, [900] * 5)  # one entry per file
    assert len(store.data_file_queue.mapped_files) == 5
    first = store.data_file_queue.mapped_files[0]
    first.mmap[24:32] = (12345).to_bytes(8, "big")  # entry 0's pos: broken
    store = reopen(store)
    assert store.ledger_end_index == 4
    close(store)


def test_checkpoint_is_dledgers_lines_and_its_committed_index_is_capped(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    entries = lead(store, [80] * 6)
    store.update_committed_index(1, 4)
    store.persist_checkpoint()
    with open(store.checkpoint_path, "rb") as f:
        assert f.read() == b"committedIndex=4\nendIndex=5\n"
    store.persist_checkpoint()
    assert os.path.exists(store.checkpoint_path + ".bak")
    close(store)
    with open(os.path.join(tmp_path, "dledger-n0", "checkpoint"), "w") as f:
        f.write("#Properties\nendIndex=400\ncommittedIndex=400\n")
    store = open_store(tmp_path)
    assert store.committed_index == 5
    assert store.committed_pos == entries[5].pos + entries[5].size
    close(store)


def test_committed_index_never_goes_back_nor_past_the_end(tmp_path: Path) -> None:
    term = [1]
    store = DLedgerMmapFileStore(make_config(tmp_path), current_term=lambda: term[0])
    store.load_and_recover()
    store.update_committed_index(1, 0)
    assert store.committed_index == -1  # an empty ledger commits nothing
    lead(store, [10] * 5)
    store.update_committed_index(1, 3)
    store.update_committed_index(1, 2)
    assert store.committed_index == 3
    store.update_committed_index(1, 99)
    assert store.committed_index == 4
    term[0] = 2
    lead(store, [10], term=2)
    store.update_committed_index(1, 5)  # an older term's commit
    assert store.committed_index == 4
    close(store)


def test_properties_parser_reads_java_properties() -> None:
    assert parse_properties("#c\n! x\nendIndex=3\ncommittedIndex = 2\na:b\n") == {
        "endIndex": "3",
        "committedIndex": "2",
        "a": "b",
    }


def test_start_data_at_continues_an_old_commit_log(tmp_path: Path) -> None:
    store = DLedgerMmapFileStore(make_config(tmp_path))
    store.load()
    with pytest.raises(DLedgerError):
        store.start_data_at(100)
    store.start_data_at(3 * DATA_FILE)
    store.recover()
    (e,) = lead(store, [10])
    assert (e.index, e.pos) == (0, 3 * DATA_FILE)
    assert store.ledger_begin_index == 0
    store = reopen(store)
    assert (store.ledger_begin_index, store.ledger_end_index) == (0, 0)
    assert store.get(0).pos == 3 * DATA_FILE
    close(store)


# -- expiry ------------------------------------------------------------------------------


def test_expiry_deletes_old_files_but_the_last_and_moves_the_begin_index(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.config.file_reserved_hours = 1
    store.config.delete_when = "04"
    entries = lead(store, [400] * 12)  # two entries a file: 6 files; 12 units: 2 index files
    old = time.time() - 2 * 3600
    for mf in store.data_file_queue.mapped_files[:4]:
        os.utime(mf.file_name, (old, old))
    assert store.delete_expired_files(hour=5) == 0  # not the hour, disk not full
    assert store.delete_expired_files(hour=4) == 4
    assert file_names(store.config.data_path) == [f"{i * DATA_FILE:020d}" for i in range(4, 6)]
    assert store.ledger_begin_index == 8
    # index units 0..7 are the whole first index file: it goes; 8.. stay
    assert file_names(store.config.index_path) == [f"{INDEX_FILE:020d}"]
    with pytest.raises(DLedgerError) as ei:
        store.get(7)
    assert ei.value.code == DLedgerResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN
    assert store.get(8).pos == entries[8].pos
    store = reopen(store)
    assert (store.ledger_begin_index, store.ledger_end_index) == (8, 11)
    close(store)


def test_expiry_outside_the_delete_hour_once_the_disk_is_over_the_check_ratio(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.config.file_reserved_hours = 1
    store.config.delete_when = "04"
    store.config.disk_space_ratio_to_check_expired = 0.0  # any used disk is over it
    lead(store, [400] * 8)  # 4 data files
    old = time.time() - 2 * 3600
    mfs = store.data_file_queue.mapped_files
    for mf in (mfs[0], mfs[2]):  # the second file is young: deletion stops there
        os.utime(mf.file_name, (old, old))
    assert store.delete_expired_files(hour=5) == 1
    assert store.ledger_begin_index == 2
    close(store)


def test_expiry_never_deletes_the_last_file(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.config.delete_when = "04"
    lead(store, [400] * 2)
    old = time.time() - 100 * 3600
    for mf in store.data_file_queue.mapped_files:
        os.utime(mf.file_name, (old, old))
    assert store.delete_expired_files(hour=4) == 0
    assert store.ledger_end_index == 1
    close(store)


# -- threads -----------------------------------------------------------------------------


def test_the_clean_space_thread_expires_files_at_the_delete_hour(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.config.file_reserved_hours = 1
    store.config.delete_when = f"{time.localtime().tm_hour};{(time.localtime().tm_hour + 1) % 24}"
    lead(store, [400] * 8)  # 4 data files
    old = time.time() - 2 * 3600
    for mf in store.data_file_queue.mapped_files[:2]:
        os.utime(mf.file_name, (old, old))
    store.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and store.ledger_begin_index != 4:
            time.sleep(0.02)
        assert store.ledger_begin_index == 4
        assert len(store.data_file_queue.mapped_files) == 2
    finally:
        store.shutdown()


def test_start_flushes_and_writes_the_checkpoint_and_shutdown_persists(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.check_point_interval_ms = 50
    store = DLedgerMmapFileStore(cfg)
    store.enable_clean_space_service = False  # a host disk over 90 % would refuse the appends
    store.start()
    try:
        lead(store, [100] * 3)
        store.update_committed_index(1, 2)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and store.flush_pos != store.write_pos:
            time.sleep(0.01)
        assert store.flush_pos == store.write_pos
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not os.path.exists(store.checkpoint_path):
            time.sleep(0.02)
        assert os.path.exists(store.checkpoint_path)
    finally:
        store.shutdown()
    with open(store.checkpoint_path, "rb") as f:
        assert f.read() == b"committedIndex=2\nendIndex=2\n"


def test_leader_and_follower_threads_append_under_one_lock(tmp_path: Path) -> None:
    """Appends from two threads never interleave: every entry is where its index says."""
    store = open_store(tmp_path, data_size=64 * 1024, index_size=1024 * INDEX_UNIT_SIZE)
    errors: list[BaseException] = []

    def work(fill: int) -> None:
        try:
            for i in range(200):
                store.append_as_leader([DLedgerEntry(body=body(i % 90 + 1, fill))], 1)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(f,)) for f in (0x61, 0x62)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert store.ledger_end_index == 399
    pos = 0
    for i in range(400):
        e = store.get(i)
        if e.pos != pos:  # a blank closed the file before it
            assert e.pos % (64 * 1024) == 0
        pos = e.pos + e.size
        assert e.index == i
    close(store)


# -- failed writes -----------------------------------------------------------------------


@pytest.fixture
def faults() -> Iterator[disk_io.Faults]:
    disk_io.FAULTS.clear()
    yield disk_io.FAULTS
    disk_io.FAULTS.clear()


def test_an_index_unit_that_cannot_be_written_takes_its_data_back(tmp_path: Path, faults: disk_io.Faults) -> None:
    store = open_store(tmp_path)
    entries = lead(store, [50] * 8)  # the first index file is full: the next unit needs a new one
    pos = store.write_pos
    faults.fail("reserve", errno.ENOSPC, match=os.sep + "index" + os.sep)
    with pytest.raises(DLedgerError) as ei:
        lead(store, [50])
    assert ei.value.code == DLedgerResponseCode.DISK_FULL
    assert (store.ledger_end_index, store.write_pos) == (7, pos)
    faults.clear()
    (e,) = lead(store, [50])
    assert (e.index, e.pos) == (8, pos)
    store = reopen(store)
    assert store.ledger_end_index == 8 and store.get(8).pos == pos
    assert store.get(7).same_as(entries[7])
    close(store)


def test_a_truncation_that_cannot_write_its_entry_ends_the_log_before_it(
    tmp_path: Path, faults: disk_io.Faults
) -> None:
    leader = open_store(tmp_path / "l")
    old = open_store(tmp_path / "o")
    common = lead(leader, [100] * 3)
    for e in common:
        old.append_as_follower(e, 1, "n0")
    lead(old, [700, 700], term=1)  # the old leader's tail: two more data files
    (new,) = lead(leader, [600], term=2)  # goes to a second data file on the leader
    assert new.pos == DATA_FILE
    faults.fail("reserve", errno.ENOSPC, match=os.sep + "data" + os.sep)
    with pytest.raises(DLedgerError) as ei:
        old.truncate(new, 2, "n1")
    assert ei.value.code == DLedgerResponseCode.DISK_FULL
    assert (old.ledger_end_index, old.ledger_end_term) == (2, 1)
    assert old.get(2).same_as(common[2])
    with pytest.raises(DLedgerError):
        old.get(3)
    faults.clear()
    old.append_as_follower(new, 2, "n1")
    assert data_bytes(old) == data_bytes(leader) and index_bytes(old) == index_bytes(leader)
    close(leader)
    close(old)


def test_a_file_cut_while_read_is_not_reopened_with_its_old_entries(tmp_path: Path) -> None:
    """A truncation removes later files; one that a broker thread still reads cannot be
    deleted by destroy (it is held), and the next file made at its offset must not open
    the old entries (DLedger's recovery would then have to stop at them)."""
    leader = open_store(tmp_path / "l")
    old = open_store(tmp_path / "o")
    common = lead(leader, [400])
    old.append_as_follower(common[0], 1, "n0")
    lead(old, [400, 400, 400], term=1, fill=0x7A)  # files 0 and 1, 0x7A entries in file 1
    held = old.data_file_queue.mapped_files[1]
    sbr = held.select_mapped_buffer(0, 100)
    assert sbr is not None
    try:
        new = lead(leader, [100] * 8, term=2, fill=0x62)  # into file 1 too, shorter entries
        assert old.truncate(new[0], 2, "n1") == 1
        for e in new[1:]:
            old.append_as_follower(e, 2, "n1")
        assert bytes(sbr.buffer[48:52]) == b"zzzz"  # the reader's map still has its bytes
    finally:
        sbr.release()
    assert data_bytes(old) == data_bytes(leader)
    last = old.data_file_queue.mapped_files[-1]
    assert last.file_from_offset == DATA_FILE
    assert bytes(last.mmap[last.wrote_position :]).count(0x7A) == 0
    old = reopen(old)
    assert (old.ledger_end_index, old.ledger_end_term) == (8, 2)
    close(leader)
    close(old)
