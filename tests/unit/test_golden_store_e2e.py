"""Golden formats through a real ``DefaultMessageStore``: GOLDEN.md §3A/3C record, §5 CQ entry, §6A index, §4 blank."""

from __future__ import annotations

import struct
import time

import pytest

from pumice.common.message import HostAddress
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from tests.helpers.golden import BLANK_8, CQ_3A, ENTRIES_6A, REC_3A, REC_3C
from tests.helpers.waiting import wait_dispatched

_LONG = struct.Struct(">q")
UNIQ = "7F00000100002A9F0000000000000001"
BORN_V4: HostAddress = (bytes([192, 168, 0, 10]), 54321)
BORN_V6: HostAddress = (bytes(15) + b"\x01", 54321)
STORE_HOST: HostAddress = (bytes([127, 0, 0, 1]), 10911)
FILE_SIZE = 64 * 1024  # small_config's CommitLog file size


def _golden_message(born_host: HostAddress = BORN_V4) -> MessageExtBrokerInner:
    """The §3 inputs; the store assigns QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP."""
    return MessageExtBrokerInner(
        topic="TopicTest",
        body=b"hello",
        queue_id=3,
        properties={"KEYS": "k-1 k-2", "TAGS": "TagA", "UNIQ_KEY": UNIQ},
        born_timestamp=1700000000000,
        born_host=born_host,
        store_host=STORE_HOST,
    )


def _with_store_fields(golden: bytes, queue_offset: int, phys: int, store_ts: int, ts_pos: int) -> bytes:
    """The golden record with the three store-assigned fields overwritten."""
    out = bytearray(golden)
    struct.pack_into(">qq", out, 20, queue_offset, phys)
    _LONG.pack_into(out, ts_pos, store_ts)
    return bytes(out)


def _commit_log_bytes(store: DefaultMessageStore, phys: int, n: int) -> bytes:
    mf = store.commit_log.mapped_file_queue.mapped_files[phys // FILE_SIZE]
    pos = phys % FILE_SIZE
    return bytes(mf.mmap[pos : pos + n])


def test_store_record_3a_cq_and_index(store: DefaultMessageStore) -> None:
    """§3A/§5/§6A: a stored §3A message equals the golden bytes but for the 3 store-assigned fields."""
    before = int(time.time() * 1000)
    filler = store.put_message(MessageExtBrokerInner(topic="Filler", body=b"x" * 10))
    assert filler.is_ok()
    results = [store.put_message(_golden_message()) for _ in range(2)]
    after = int(time.time() * 1000)
    wait_dispatched(store)
    cq = store.get_consume_queue("TopicTest", 3)
    assert cq is not None
    cq_mm = cq.mapped_file_queue.mapped_files[0].mmap
    expected_phys = [107, 107 + 169]  # the filler record is 91 + 10 (body) + 6 (topic) = 107 bytes
    for qoff, (res, phys) in enumerate(zip(results, expected_phys, strict=True)):
        assert res.is_ok(), res
        amr = res.append_message_result
        assert amr is not None
        assert (amr.wrote_offset, amr.logics_offset, amr.wrote_bytes) == (phys, qoff, 169)
        assert before <= amr.store_timestamp <= after
        rec = _commit_log_bytes(store, phys, 169)
        assert _LONG.unpack_from(rec, 56)[0] == amr.store_timestamp
        assert rec == _with_store_fields(REC_3A, qoff, phys, amr.store_timestamp, 56)
        # §5: the ConsumeQueue entry is the golden entry with the real offset
        assert bytes(cq_mm[qoff * 20 : qoff * 20 + 20]) == _LONG.pack(phys) + CQ_3A[8:]
    # §6A: the first record's index entries (UNIQ_KEY, k-1, k-2) with the real phyOffset.
    # small_config has 64 slots, so entries start at 40 + 64*4; these three keys use distinct slots.
    (index_file,) = store.index_service.index_file_list
    base = 40 + 64 * 4
    for n, (_, entry_hex) in enumerate(ENTRIES_6A, start=1):
        expected = bytearray.fromhex(entry_hex)
        _LONG.pack_into(expected, 4, expected_phys[0])
        assert bytes(index_file.mapped_file.mmap[base + n * 20 : base + n * 20 + 20]) == bytes(expected), n
    (m1, m2) = sorted(store.query_message("TopicTest", "k-1"), key=lambda m: m.commit_log_offset)
    assert (m1.commit_log_offset, m2.commit_log_offset) == tuple(expected_phys)
    assert m1.msg_id == "7F00000100002A9F" + f"{expected_phys[0]:016X}"


def test_store_query_filters_full_hash_collision(store: DefaultMessageStore) -> None:
    """§1 notes: keys ``Aa`` and ``BB`` collide in full, so a key query must compare the real key of each hit."""
    for key in ("Aa", "BB"):
        res = store.put_message(MessageExtBrokerInner(topic="TopicTest", body=key.encode(), properties={"KEYS": key}))
        assert res.is_ok(), res
    wait_dispatched(store)
    assert [m.body for m in store.query_message("TopicTest", "Aa")] == [b"Aa"]
    assert [m.body for m in store.query_message("TopicTest", "BB")] == [b"BB"]


def test_store_record_3c_ipv6_born_host(store: DefaultMessageStore) -> None:
    """§3C: an IPv6 born host gets sysFlag 0x10 and STORETIMESTAMP at offset 68."""
    res = store.put_message(_golden_message(BORN_V6))
    assert res.is_ok(), res
    amr = res.append_message_result
    assert amr is not None
    assert (amr.wrote_offset, amr.logics_offset, amr.wrote_bytes) == (0, 0, 181)
    rec = _commit_log_bytes(store, 0, 181)
    assert rec == _with_store_fields(REC_3C, 0, 0, amr.store_timestamp, 68)
    wait_dispatched(store)
    cq = store.get_consume_queue("TopicTest", 3)
    assert cq is not None
    assert cq.get_entry(0) == (0, 181, 2598919)


# Three records of 21833 bytes fill 65499 bytes of the 65536-byte file, leaving the §4 case: 37 bytes.
# Record size with topic "T" and no properties: 91 + body + 1, so the body is 21833 - 92 bytes.
_BODY = 21833 - 92


def _t(i: int) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic="T", body=bytes([i]) * _BODY)


@pytest.mark.parametrize("batch", [False, True], ids=["one-by-one", "one-batch"])
def test_store_end_of_file_blank(store: DefaultMessageStore, batch: bool) -> None:
    """§4: with 37 bytes left, the store writes ``00000025cbd43194`` there and rolls to the next file."""
    msgs = [_t(i) for i in range(4)]
    if batch:
        # a batch is never split across files: three fill the file, the fourth is a second batch
        offsets = []
        for part in (msgs[:3], msgs[3:]):
            res = store.put_messages(part)
            assert res.is_ok(), res
            assert res.append_message_result is not None
            offsets += res.append_message_result.wrote_offsets
    else:
        offsets = []
        for m in msgs:
            r = store.put_message(m)
            assert r.is_ok(), r
            assert r.append_message_result is not None
            offsets.append(r.append_message_result.wrote_offset)
    assert offsets == [0, 21833, 43666, FILE_SIZE]
    files = store.commit_log.mapped_file_queue.mapped_files
    assert len(files) == 2
    assert bytes(files[0].mmap[65499 : 65499 + 8]) == BLANK_8
    assert files[0].wrote_position == FILE_SIZE
    # readers treat the blank as end of file and roll on
    assert store.commit_log.check_message_and_return_size(files[0].mmap, 65499, FILE_SIZE) == (None, 0, True)
    reqs = store.commit_log.iter_requests(0, store.get_max_phy_offset())
    assert [r.commit_log_offset for r in reqs] == offsets
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("T", 0) == 4
    assert store.get_commit_log_offset_in_queue("T", 0, 3) == FILE_SIZE
