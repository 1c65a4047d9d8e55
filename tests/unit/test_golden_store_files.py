"""Golden vectors for the ConsumeQueue entry (GOLDEN.md §5), the IndexFile (§6A/6B) and the checkpoint (§9)."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pumice.common.java_hash import index_key_hashes, tags_code
from pumice.store import disk_io
from pumice.store.consume_queue import ENTRY_DTYPE, ConsumeQueue
from pumice.store.dispatch_request import DispatchRequest
from pumice.store.index_file import IndexFile
from pumice.store.index_service import IndexService
from pumice.store.message_check import check_message_and_return_size
from pumice.store.message_store_config import MessageStoreConfig
from pumice.store.store_checkpoint import StoreCheckpoint
from tests.helpers.golden import CQ_3A, ENTRIES_6A, REC_3A

# -- §5 ConsumeQueue -------------------------------------------------------------------------

# §3A's entry (CQ_3A) and §6A's index entries (ENTRIES_6A): tests/helpers/golden.py
CQ_SIZE_3B = bytes.fromhex("000000aa")
TAGS_CODE_NEG = {"TagNeg": bytes.fromhex("ffffffff94ddffb6"), "Tag-negative": bytes.fromhex("ffffffff816d1128")}


@pytest.fixture
def cq(tmp_path: Path) -> Iterator[ConsumeQueue]:
    q = ConsumeQueue("TopicTest", 3, str(tmp_path / "consumequeue"), 20 * 64)
    try:
        yield q
    finally:
        q.shutdown()


def _cq_bytes(q: ConsumeQueue, start: int, end: int) -> bytes:
    return bytes(q.mapped_file_queue.mapped_files[0].mmap[start:end])


def test_consume_queue_entry_3a(cq: ConsumeQueue) -> None:
    """§5: the entry for record 3A is ``00000000000004d2 000000a9 000000000027a807``."""
    assert cq.put_message_position_info(1234, 169, tags_code("TagA"), 0)
    assert _cq_bytes(cq, 0, 20) == CQ_3A
    assert cq.get_entry(0) == (1234, 169, 2598919)
    assert cq.get_max_offset_in_queue() == 1


@pytest.mark.parametrize("tag", ["TagNeg", "Tag-negative"])
def test_consume_queue_entry_negative_tags_code(cq: ConsumeQueue, tag: str) -> None:
    """§5/§0.3: a negative hashCode is sign-extended in the 8-byte tagsCode; 3B size is ``000000aa``."""
    assert cq.put_message_position_info(1234, 169, tags_code("TagA"), 0)
    assert cq.put_message_position_info(1403, 170, tags_code(tag), 1)
    assert _cq_bytes(cq, 0, 20) == CQ_3A
    assert _cq_bytes(cq, 20, 40) == bytes.fromhex("000000000000057b") + CQ_SIZE_3B + TAGS_CODE_NEG[tag]


def test_consume_queue_entry_from_dispatch(cq: ConsumeQueue) -> None:
    """§3A→§5: the dispatch parse of the golden record, written to a ConsumeQueue, gives the golden entry."""
    req, _, ok = check_message_and_return_size(REC_3A, 0, len(REC_3A))
    assert ok and req is not None
    assert cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code, 0)
    assert _cq_bytes(cq, 0, 20) == CQ_3A


def test_consume_queue_skip_rule(cq: ConsumeQueue) -> None:
    """§0.4: an entry is skipped only when ``offset + size <= maxPhysicOffset`` (not ``offset <= max``)."""
    assert cq.put_message_position_info(1234, 169, tags_code("TagA"), 0)
    assert cq.put_message_position_info(1234, 169, tags_code("TagA"), 0)  # re-dispatch: skipped
    assert cq.get_max_offset_in_queue() == 1
    assert cq.put_message_position_info(1300, 200, 0, 1)  # 1300 <= 1403 but 1500 > 1403: written
    assert cq.get_max_offset_in_queue() == 2
    assert _cq_bytes(cq, 0, 20) == CQ_3A
    assert cq.get_entry(1) == (1300, 200, 0)


def test_entry_dtype_reads_golden_entries() -> None:
    """§5: ``ENTRY_DTYPE`` is 20 big-endian bytes and reads the golden entries, including a negative tagsCode."""
    assert ENTRY_DTYPE.itemsize == 20
    raw = CQ_3A + bytes.fromhex("000000000000057b") + CQ_SIZE_3B + TAGS_CODE_NEG["TagNeg"]
    arr = np.frombuffer(raw, dtype=ENTRY_DTYPE)
    assert arr["offset"].tolist() == [1234, 1403]
    assert arr["size"].tolist() == [169, 170]
    assert arr["tags_code"].tolist() == [2598919, -1797390410]


# -- §6 IndexFile ----------------------------------------------------------------------------

SLOTS = 5_000_000
ENTRIES = 20_000_000
FILE_SIZE = 420_000_040
KEY_UNIQ = "TopicTest#7F00000100002A9F0000000000000001"
KEY_K1 = "TopicTest#k-1"
KEY_K2 = "TopicTest#k-2"
KEY_COLLIDE = "TopicTest#k-23157418"
TS_1 = 1700000000123
TS_2 = 1700000002123

HEADER_6A = bytes.fromhex("0000018bcfe5687b0000018bcfe5687b00000000000004d200000000000004d20000000300000004")
HEADER_6B = bytes.fromhex("0000018bcfe5687b0000018bcfe5704b00000000000004d2000000000000057b0000000300000005")
# (slot byte position, slot value) after §6A
SLOTS_6A = [(7653348, "00000001"), (506716, "00000002"), (506720, "00000003")]
ENTRY_6B = (20000120, "6935b20d000000000000057b0000000200000002")
FAR_FUTURE = 2**63 - 1


def _raw(f: IndexFile, pos: int, n: int) -> bytes:
    return bytes(f.mapped_file.mmap[pos : pos + n])


def _assert_6a(f: IndexFile) -> None:
    assert _raw(f, 0, 40) == HEADER_6A
    for pos, value in SLOTS_6A:
        assert _raw(f, pos, 4) == bytes.fromhex(value), pos
    for pos, entry in ENTRIES_6A:
        assert _raw(f, pos, 20) == bytes.fromhex(entry), pos
    assert _raw(f, 20000040, 20) == bytes(20)  # entry 0 is never used


def _assert_6b(f: IndexFile) -> None:
    assert _raw(f, 0, 40) == HEADER_6B
    assert _raw(f, 506716, 4) == bytes.fromhex("00000004")
    assert _raw(f, 7653348, 4) == bytes.fromhex("00000001")
    assert _raw(f, 506720, 4) == bytes.fromhex("00000003")
    for pos, entry in [*ENTRIES_6A, ENTRY_6B]:
        assert _raw(f, pos, 20) == bytes.fromhex(entry), pos


@pytest.fixture
def index_path(tmp_path: Path) -> str:
    return str(tmp_path / "20231114221320123")


@pytest.fixture
def index_file(index_path: str) -> Iterator[IndexFile]:
    f = IndexFile(index_path, SLOTS, ENTRIES)
    try:
        yield f
    finally:
        f.close()


def _second_request() -> DispatchRequest:
    """§6B's second message: phyOffset 1403, storeTimestamp 1700000002123, KEYS=k-23157418, no UNIQ_KEY."""
    return DispatchRequest(
        topic="TopicTest", queue_id=3, commit_log_offset=1403, msg_size=169, tags_code=0, store_timestamp=TS_2,
        consume_queue_offset=8, keys="k-23157418", uniq_key=None, sys_flag=0, prepared_transaction_offset=0,
    )  # fmt: skip


def _put_6a(f: IndexFile) -> None:
    for key in (KEY_UNIQ, KEY_K1, KEY_K2):
        assert f.put_key(key, 1234, TS_1)


def test_index_file_geometry(index_file: IndexFile, index_path: str) -> None:
    """§6: 40-byte header, 5,000,000 slots, entries from byte 20,000,040; file of 420,000,040 bytes."""
    assert os.path.getsize(index_path) == FILE_SIZE
    assert len(index_file.mapped_file.mmap) == FILE_SIZE
    assert index_file.index_count == 1
    assert index_file.hash_slot_count == 0


def test_index_file_6a(index_file: IndexFile) -> None:
    """§6A: header, slots and entries 1-3 after indexing record 3A (UNIQ_KEY, k-1, k-2)."""
    _put_6a(index_file)
    _assert_6a(index_file)
    f = index_file
    assert (f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset) == (TS_1, TS_1, 1234, 1234)
    assert (f.hash_slot_count, f.index_count) == (3, 4)


def test_index_file_6b_collision_chain(index_file: IndexFile) -> None:
    """§6B: a slot collision chains entry 4 → 2; hashSlotCount stays 3, indexCount becomes 5."""
    _put_6a(index_file)
    assert index_file.put_key(KEY_COLLIDE, 1403, TS_2)
    _assert_6b(index_file)
    assert (index_file.hash_slot_count, index_file.index_count) == (3, 5)
    assert (index_file.end_timestamp, index_file.end_phy_offset) == (TS_2, 1403)


def test_index_file_6b_lookups(index_file: IndexFile) -> None:
    """§6B: lookups walk the chain 4 → 2 → 0, skip entries whose hash differs, and honour the time bounds."""
    _put_6a(index_file)
    assert index_file.put_key(KEY_COLLIDE, 1403, TS_2)
    f = index_file
    assert f.select_phy_offset(KEY_K1, 32, 0, FAR_FUTURE) == [1234]
    assert f.select_phy_offset(KEY_COLLIDE, 32, 0, FAR_FUTURE) == [1403]
    assert f.select_phy_offset(KEY_UNIQ, 32, 0, FAR_FUTURE) == [1234]
    assert f.select_phy_offset(KEY_K2, 32, 0, FAR_FUTURE) == [1234]
    # entry times read back are beginTimestamp + timeDiff*1000: TS_2 for entry 4, TS_1 for entry 2
    assert f.select_phy_offset(KEY_COLLIDE, 32, TS_2, TS_2) == [1403]
    assert f.select_phy_offset(KEY_K1, 32, TS_1, TS_1) == [1234]
    assert f.select_phy_offset(KEY_K1, 32, TS_1 + 1, FAR_FUTURE) == []
    assert f.select_phy_offset(KEY_COLLIDE, 32, 0, TS_2 - 1) == []
    assert f.select_phy_offset("TopicTest#k-3", 32, 0, FAR_FUTURE) == []


def test_index_service_one_batch(tmp_path: Path) -> None:
    """§6A/6B: both records dispatched in one batch (vectorised hashing and put) give the §6B bytes."""
    assert index_key_hashes([KEY_UNIQ, KEY_K1, KEY_K2, KEY_COLLIDE]).tolist() == [
        1471913327,
        85126669,
        85126670,
        1765126669,
    ]
    svc = IndexService(MessageStoreConfig(store_path_root_dir=str(tmp_path)))
    try:
        req, _, ok = check_message_and_return_size(REC_3A, 0, len(REC_3A))
        assert ok and req is not None
        assert svc.build_index_batch([req, _second_request()])
        (f,) = svc.index_file_list
        _assert_6b(f)
        assert (f.hash_slot_count, f.index_count) == (3, 5)
        assert f.select_phy_offset(KEY_K1, 32, 0, FAR_FUTURE) == [1234]
        assert f.select_phy_offset(KEY_COLLIDE, 32, 0, FAR_FUTURE) == [1403]
    finally:
        svc.shutdown()


def test_index_file_full_hash_collision_returns_both(index_file: IndexFile) -> None:
    """§1 notes: ``TopicTest#Aa`` and ``TopicTest#BB`` share keyHash 2744770, so the index returns both offsets."""
    assert index_file.put_key("TopicTest#Aa", 1234, TS_1)
    assert index_file.put_key("TopicTest#BB", 1403, TS_2)
    assert _raw(index_file, 40 + 2744770 * 4, 4) == bytes.fromhex("00000002")
    assert index_file.hash_slot_count == 1
    assert sorted(index_file.select_phy_offset("TopicTest#Aa", 32, 0, FAR_FUTURE)) == [1234, 1403]
    assert sorted(index_file.select_phy_offset("TopicTest#BB", 32, 0, FAR_FUTURE)) == [1234, 1403]


def test_index_file_reopen_load(index_path: str) -> None:
    """§6B: after close and reopen, ``load()`` reads the golden header back and lookups still work."""
    f = IndexFile(index_path, SLOTS, ENTRIES)
    try:
        _put_6a(f)
        assert f.put_key(KEY_COLLIDE, 1403, TS_2)
        f.flush()
    finally:
        f.close()
    g = IndexFile(index_path, SLOTS, ENTRIES)
    try:
        g.load()
        assert (g.begin_timestamp, g.end_timestamp, g.begin_phy_offset, g.end_phy_offset) == (TS_1, TS_2, 1234, 1403)
        assert (g.hash_slot_count, g.index_count) == (3, 5)
        _assert_6b(g)
        assert g.select_phy_offset(KEY_K1, 32, 0, FAR_FUTURE) == [1234]
        assert g.select_phy_offset(KEY_COLLIDE, 32, 0, FAR_FUTURE) == [1403]
    finally:
        g.close()


def test_index_file_load_golden_header(index_path: str) -> None:
    """§6B: a file whose header, slots and entries are the golden bytes loads and answers lookups."""
    with open(index_path, "wb") as fh:
        fh.truncate(FILE_SIZE)
        fh.write(HEADER_6B)
        for pos, value in [(7653348, "00000001"), (506716, "00000004"), (506720, "00000003")]:
            fh.seek(pos)
            fh.write(bytes.fromhex(value))
        for pos, entry in [*ENTRIES_6A, ENTRY_6B]:
            fh.seek(pos)
            fh.write(bytes.fromhex(entry))
    f = IndexFile(index_path, SLOTS, ENTRIES)
    try:
        f.load()
        assert (f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset) == (TS_1, TS_2, 1234, 1403)
        assert (f.hash_slot_count, f.index_count) == (3, 5)
        assert f.select_phy_offset(KEY_K1, 32, 0, FAR_FUTURE) == [1234]
        assert f.select_phy_offset(KEY_COLLIDE, 32, 0, FAR_FUTURE) == [1403]
        assert f.select_phy_offset(KEY_UNIQ, 32, 0, FAR_FUTURE) == [1234]
    finally:
        f.close()


def test_index_file_flush_syncs(index_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """§6 (not a byte vector): ``IndexFile.flush`` must sync the file, as 4.9.4's ``mappedByteBuffer.force()`` does."""
    f = IndexFile(index_path, 64, 256)
    try:
        assert f.put_key(KEY_K1, 1234, TS_1)
        synced: list[int] = []
        real = disk_io.msync

        def counting_msync(path: str, address: int, length: int) -> None:
            synced.append(length)
            real(path, address, length)

        monkeypatch.setattr(disk_io, "msync", counting_msync)
        f.flush()
        assert synced == [f.mapped_file.file_size], "IndexFile.flush did not sync the whole index file"
    finally:
        f.close()


def test_index_service_key_order(tmp_path: Path) -> None:
    """§6: ``IndexService`` indexes UNIQ_KEY first, then each KEYS token, giving the §6A then §6B bytes."""
    svc = IndexService(MessageStoreConfig(store_path_root_dir=str(tmp_path)))
    try:
        req, _, ok = check_message_and_return_size(REC_3A, 0, len(REC_3A))
        assert ok and req is not None
        assert svc.build_index_batch([req])
        (f,) = svc.index_file_list
        assert (f.hash_slot_num, f.index_num) == (SLOTS, ENTRIES)
        _assert_6a(f)
        assert svc.build_index_batch([_second_request()])
        _assert_6b(f)
    finally:
        svc.shutdown()


# -- §9 checkpoint ---------------------------------------------------------------------------

CHECKPOINT_24 = bytes.fromhex("0000018bcfe5687b0000018bcfe568640000018bcfe56832")


def test_checkpoint_flush_golden(tmp_path: Path) -> None:
    """§9: flush writes physic, logics and index timestamps as the first 24 bytes of a 4 KiB file."""
    path = tmp_path / "checkpoint"
    cp = StoreCheckpoint(str(path))
    cp.physic_msg_timestamp = 1700000000123
    cp.logics_msg_timestamp = 1700000000100
    cp.index_msg_timestamp = 1700000000050
    cp.flush()
    data = path.read_bytes()
    assert len(data) == 4096
    assert data[:24] == CHECKPOINT_24
    assert data[24:] == bytes(4096 - 24)
    cp.shutdown()
    again = StoreCheckpoint(str(path))
    try:
        assert (again.physic_msg_timestamp, again.logics_msg_timestamp, again.index_msg_timestamp) == (
            1700000000123,
            1700000000100,
            1700000000050,
        )
    finally:
        again.shutdown()
    assert path.read_bytes()[:24] == CHECKPOINT_24


def test_checkpoint_reads_golden_file(tmp_path: Path) -> None:
    """§9: a checkpoint file holding the golden 24 bytes is read back field by field."""
    path = tmp_path / "checkpoint"
    path.write_bytes(CHECKPOINT_24 + bytes(4096 - 24))
    cp = StoreCheckpoint(str(path))
    try:
        assert cp.physic_msg_timestamp == 1700000000123
        assert cp.logics_msg_timestamp == 1700000000100
        assert cp.index_msg_timestamp == 1700000000050
    finally:
        cp.shutdown()
    assert os.path.getsize(path) == 4096


def test_checkpoint_file_is_mmap_sized(tmp_path: Path) -> None:
    """§9: a fresh checkpoint file is 4096 zero bytes."""
    path = tmp_path / "checkpoint"
    cp = StoreCheckpoint(str(path))
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            assert len(m) == 4096
            assert m[:24] == bytes(24)
    finally:
        cp.shutdown()
