"""ConsumeQueue behaviour: entry format and files, GetMessageStatus cases, limits, idempotence, recovery, truncation."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from pumice.common.java_hash import tags_code
from pumice.common.message_decoder import decode_message
from pumice.store import (
    DefaultMessageStore,
    GetMessageResult,
    GetMessageStatus,
    MessageExt,
    MessageExtBrokerInner,
    MessageStoreConfig,
)
from pumice.store.consume_queue import ConsumeQueue
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched

CQ_UNIT = 20
CQ_FILE_ENTRIES = 64  # small_config: mapped_file_size_consume_queue = 20 * 64
ENTRY = struct.Struct(">qiq")


def put_many(
    store: DefaultMessageStore,
    n: int,
    topic: str = "T",
    queue_id: int = 0,
    body_size: int = 50,
    tags: str | None = None,
) -> list[tuple[int, int]]:
    """Put ``n`` messages with bodies ``b"<i>:"`` padded; returns (commit log offset, record size) pairs."""
    out = []
    for i in range(n):
        props = {"TAGS": tags} if tags else {}
        body = f"{i}:".encode().ljust(body_size, b".")
        r = store.put_message(MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties=props))
        assert r.is_ok(), r
        res = r.append_message_result
        assert res is not None
        out.append((res.wrote_offset, res.wrote_bytes))
    return out


def bodies(res: GetMessageResult) -> list[bytes]:
    return [decode_message(b).body for b in res.buffers]


def get(
    store: DefaultMessageStore, topic: str, queue_id: int, offset: int, n: int = 32, **kw: object
) -> GetMessageResult:
    res = store.get_message("g", topic, queue_id, offset, n, **kw)  # type: ignore[arg-type]
    assert res is not None
    return res


def pull_all(store: DefaultMessageStore, topic: str, queue_id: int, start: int = 0) -> list[tuple[int, MessageExt]]:
    out: list[tuple[int, MessageExt]] = []
    offset = start
    for _ in range(10_000):
        with get(store, topic, queue_id, offset) as res:
            if res.status is not GetMessageStatus.FOUND:
                break
            out.extend((q, decode_message(b)) for q, b in zip(res.queue_offsets, res.buffers, strict=True))
        offset = res.next_begin_offset
    return out


def cq_files(store: DefaultMessageStore, topic: str, queue_id: int) -> list[str]:
    return sorted(os.listdir(os.path.join(store.config.consume_queue_dir, topic, str(queue_id))))


def read_entries(store: DefaultMessageStore, topic: str, queue_id: int) -> list[tuple[int, int, int]]:
    """Every written entry, read from the files on disk."""
    cq = store.get_consume_queue(topic, queue_id)
    assert cq is not None
    n = cq.get_max_offset_in_queue()
    raw = b""
    for name in cq_files(store, topic, queue_id):
        with open(os.path.join(store.config.consume_queue_dir, topic, str(queue_id), name), "rb") as f:
            raw += f.read()
    return [ENTRY.unpack_from(raw, i * CQ_UNIT) for i in range(n)]


# -- format and files --------------------------------------------------------------------


def test_entries_are_20_bytes_and_files_roll_by_logical_offset(store: DefaultMessageStore) -> None:
    put_many(store, 10, topic="Other")  # so the CommitLog offsets of T are not just i * size
    placed = put_many(store, 150, tags="TagA")
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("T", 0) == 150
    assert cq_files(store, "T", 0) == ["00000000000000000000", "00000000000000001280", "00000000000000002560"]
    for name in cq_files(store, "T", 0):
        assert os.path.getsize(os.path.join(store.config.consume_queue_dir, "T", "0", name)) == 20 * 64
    entries = read_entries(store, "T", 0)
    assert entries == [(off, size, tags_code("TagA")) for off, size in placed]
    cq = store.get_consume_queue("T", 0)
    assert cq is not None
    assert cq.get_entry(149) == entries[149]
    assert cq.get_entry(150) is None


def test_get_message_stops_at_the_end_of_a_cq_file_and_continues_in_the_next(store: DefaultMessageStore) -> None:
    put_many(store, 150)
    wait_dispatched(store)
    with get(store, "T", 0, 60, 32) as res:
        assert res.status is GetMessageStatus.FOUND
        assert res.queue_offsets == [60, 61, 62, 63]
        assert res.next_begin_offset == 64
    with get(store, "T", 0, 64, 32) as res:
        assert res.queue_offsets == list(range(64, 96))
        assert bodies(res)[0].startswith(b"64:")
    got = pull_all(store, "T", 0)
    assert [q for q, _ in got] == list(range(150))
    assert [m.body.split(b":")[0] for _, m in got] == [str(i).encode() for i in range(150)]
    assert all(m.queue_offset == q for q, m in got)


# -- GetMessageStatus --------------------------------------------------------------------


def test_unknown_queue_is_no_message_in_queue(store: DefaultMessageStore) -> None:
    """As RocketMQ's findConsumeQueue, a pull on an unknown queue makes it (in memory, no file)."""
    put_many(store, 3)
    wait_dispatched(store)
    with get(store, "T", 7, 5) as res:
        assert res.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
        assert res.next_begin_offset == 0
        assert res.message_count == 0
    with get(store, "Nope", 0, 0) as res:
        assert res.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    assert not os.path.exists(os.path.join(store.config.consume_queue_dir, "Nope"))


def test_empty_queue_is_no_message_in_queue(store: DefaultMessageStore) -> None:
    store.find_consume_queue("T", 3)
    with get(store, "T", 3, 4) as res:
        assert res.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
        assert res.next_begin_offset == 0
        assert res.max_offset == 0


def test_offset_equal_to_max_is_overflow_one(store: DefaultMessageStore) -> None:
    put_many(store, 5)
    wait_dispatched(store)
    with get(store, "T", 0, 5) as res:
        assert res.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        assert res.next_begin_offset == 5
        assert (res.min_offset, res.max_offset) == (0, 5)
        assert res.message_count == 0


def test_offset_past_max_is_overflow_badly(store: DefaultMessageStore) -> None:
    placed = put_many(store, 10)
    wait_dispatched(store)
    with get(store, "T", 0, 11) as res:
        assert res.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
        assert res.next_begin_offset == 0  # min offset is 0: start again from it
    cq = store.get_consume_queue("T", 0)
    assert cq is not None
    cq.correct_min_offset(placed[3][0])
    with get(store, "T", 0, 50) as res:
        assert res.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
        assert res.next_begin_offset == 10  # min offset > 0: go to the max


def test_offset_below_min_is_too_small(store: DefaultMessageStore) -> None:
    placed = put_many(store, 10)
    wait_dispatched(store)
    cq = store.get_consume_queue("T", 0)
    assert cq is not None
    cq.correct_min_offset(placed[4][0])  # records before #4 count as gone from the CommitLog
    assert store.get_min_offset_in_queue("T", 0) == 4
    with get(store, "T", 0, 2) as res:
        assert res.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert res.next_begin_offset == 4
        assert res.min_offset == 4
    with get(store, "T", 0, 4) as res:
        assert res.status is GetMessageStatus.FOUND
        assert res.queue_offsets == list(range(4, 10))


def test_offset_too_small_via_min_logic_offset(store: DefaultMessageStore) -> None:
    put_many(store, 10)
    wait_dispatched(store)
    cq = store.get_consume_queue("T", 0)
    assert cq is not None
    cq.min_logic_offset = 7 * CQ_UNIT
    with get(store, "T", 0, 6) as res:
        assert res.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert res.next_begin_offset == 7


def test_found(store: DefaultMessageStore) -> None:
    put_many(store, 10)
    wait_dispatched(store)
    with get(store, "T", 0, 3, 4) as res:
        assert res.status is GetMessageStatus.FOUND
        assert res.queue_offsets == [3, 4, 5, 6]
        assert [b.split(b":")[0] for b in bodies(res)] == [b"3", b"4", b"5", b"6"]
        assert res.next_begin_offset == 7
        assert (res.min_offset, res.max_offset) == (0, 10)
        assert res.buffer_total_size == sum(len(b) for b in res.buffers)


def test_tag_filter_with_no_match_still_advances(store: DefaultMessageStore) -> None:
    put_many(store, 10, tags="A")
    wait_dispatched(store)
    with get(store, "T", 0, 2, tags_codes={tags_code("X")}) as res:
        assert res.status is GetMessageStatus.NO_MATCHED_MESSAGE
        assert res.message_count == 0
        assert res.next_begin_offset == 10


def test_tag_filter_keeps_only_matching_records(store: DefaultMessageStore) -> None:
    for i in range(20):
        tag = "A" if i % 2 == 0 else "B"
        r = store.put_message(MessageExtBrokerInner(topic="T", body=f"{i}".encode(), properties={"TAGS": tag}))
        assert r.is_ok()
    wait_dispatched(store)
    with get(store, "T", 0, 0, 5, tags_codes={tags_code("B")}) as res:
        assert res.status is GetMessageStatus.FOUND
        assert res.queue_offsets == [1, 3, 5, 7, 9]
        assert bodies(res) == [b"1", b"3", b"5", b"7", b"9"]
        assert res.next_begin_offset == 10  # the filtered entry 9 was the last scanned


def test_tag_filter_scans_at_most_800_entries_per_call(tmp_path: Path) -> None:
    cfg = small_config(str(tmp_path / "s"), mapped_file_size_consume_queue=20 * 2000)
    with DefaultMessageStore(cfg) as s:
        put_many(s, 1000, body_size=10, tags="A")
        wait_dispatched(s)
        with get(s, "T", 0, 0, 32, tags_codes={tags_code("X")}) as res:
            assert res.status is GetMessageStatus.NO_MATCHED_MESSAGE
            assert res.next_begin_offset == 800  # max(16000, 32 * 20) bytes of ConsumeQueue


def test_max_msg_nums_limit(store: DefaultMessageStore) -> None:
    put_many(store, 20)
    wait_dispatched(store)
    with get(store, "T", 0, 0, 5) as res:
        assert res.message_count == 5
        assert res.next_begin_offset == 5
    with get(store, "T", 0, 18, 5) as res:
        assert res.message_count == 2
        assert res.next_begin_offset == 20


def test_max_total_bytes_limit(store: DefaultMessageStore) -> None:
    placed = put_many(store, 20)
    wait_dispatched(store)
    size = placed[0][1]
    with get(store, "T", 0, 0, 32, max_total_bytes=3 * size + size // 2) as res:
        assert res.message_count == 3
        assert res.buffer_total_size == 3 * size
        assert res.next_begin_offset == 3
    with get(store, "T", 0, 0, 32, max_total_bytes=1) as res:  # at least one record
        assert res.message_count == 1
        assert res.next_begin_offset == 1


def test_in_memory_transfer_caps_at_32_messages(store: DefaultMessageStore) -> None:
    put_many(store, 64)
    wait_dispatched(store)
    with get(store, "T", 0, 0, 1000) as res:
        assert res.message_count == 32
        assert res.next_begin_offset == 32


def test_in_memory_transfer_byte_cap(tmp_path: Path) -> None:
    cfg = small_config(str(tmp_path / "s"), max_transfer_bytes_on_message_in_memory=1000)
    with DefaultMessageStore(cfg) as s:
        placed = put_many(s, 20, body_size=200)
        wait_dispatched(s)
        per_call = 1000 // placed[0][1]
        with get(s, "T", 0, 0, 32) as res:
            assert res.message_count == per_call
            assert res.buffer_total_size <= 1000


def test_get_message_refused_when_shut_down_or_unreadable(store: DefaultMessageStore) -> None:
    put_many(store, 2)
    wait_dispatched(store)
    store.running_flags.flag_bits |= 1  # NOT_READABLE
    try:
        assert store.get_message("g", "T", 0, 0, 32) is None
    finally:
        store.running_flags.flag_bits &= ~1
    store.shutdown()
    assert store.get_message("g", "T", 0, 0, 32) is None


# -- idempotent re-dispatch --------------------------------------------------------------


def test_put_message_position_info_again_adds_nothing(store: DefaultMessageStore) -> None:
    placed = put_many(store, 5)
    wait_dispatched(store)
    cq = store.get_consume_queue("T", 0)
    assert cq is not None
    before = read_entries(store, "T", 0)
    max_phy = cq.max_physic_offset
    for i, (off, size) in enumerate(placed):
        assert cq.put_message_position_info(off, size, 12345, i)
    assert cq.get_max_offset_in_queue() == 5
    assert read_entries(store, "T", 0) == before
    assert cq.max_physic_offset == max_phy


def test_redispatching_the_whole_commit_log_changes_nothing(store: DefaultMessageStore) -> None:
    put_many(store, 70, queue_id=0)
    put_many(store, 30, queue_id=1)
    wait_dispatched(store)
    before = {q: read_entries(store, "T", q) for q in (0, 1)}
    reqs = store.commit_log.iter_requests(0, store.commit_log.get_max_offset())
    assert len(reqs) == 100
    store.do_dispatch(reqs)
    assert {q: read_entries(store, "T", q) for q in (0, 1)} == before
    assert store.get_max_offset_in_queue("T", 0) == 70


# -- recovery ----------------------------------------------------------------------------


def test_clean_reopen_keeps_queues_and_continues_offsets(store_config: MessageStoreConfig) -> None:
    with DefaultMessageStore(store_config) as s:
        for q in range(3):
            put_many(s, 70 + q * 10, queue_id=q, tags=f"t{q}")
        put_many(s, 5, topic="Other")
        wait_dispatched(s)
        entries = {q: read_entries(s, "T", q) for q in range(3)}
        max_phy = s.get_max_phy_offset()
    with DefaultMessageStore(store_config) as s:
        assert s.get_max_phy_offset() == max_phy
        for q in range(3):
            assert s.get_max_offset_in_queue("T", q) == 70 + q * 10
            assert s.get_min_offset_in_queue("T", q) == 0
            assert read_entries(s, "T", q) == entries[q]
            got = pull_all(s, "T", q)
            assert [m.body.split(b":")[0] for _, m in got] == [str(i).encode() for i in range(70 + q * 10)]
        assert s.get_max_offset_in_queue("Other", 0) == 5
        r = s.put_message(MessageExtBrokerInner(topic="T", body=b"after", queue_id=1))
        assert r.is_ok()
        assert r.append_message_result.logics_offset == 80  # type: ignore[union-attr]
        wait_dispatched(s)
        assert s.get_max_offset_in_queue("T", 1) == 81
        with get(s, "T", 1, 80) as res:
            assert bodies(res) == [b"after"]


# -- truncation --------------------------------------------------------------------------


def test_truncate_dirty_logic_files_drops_entries_past_the_offset(store: DefaultMessageStore) -> None:
    placed = put_many(store, 150)
    wait_dispatched(store)
    cq = store.get_consume_queue("T", 0)
    assert cq is not None
    keep = read_entries(store, "T", 0)[:71]
    off70, size70 = placed[70]
    cq.truncate_dirty_logic_files(off70 + size70)
    assert cq.get_max_offset_in_queue() == 71
    assert cq.max_physic_offset == off70 + size70
    assert read_entries(store, "T", 0) == keep
    assert cq.get_entry(70) == keep[70]
    assert cq.get_entry(71) is None
    assert cq_files(store, "T", 0) == ["00000000000000000000", "00000000000000001280"]
    with open(os.path.join(store.config.consume_queue_dir, "T", "0", "00000000000000001280"), "rb") as f:
        tail = f.read()[(71 - 64) * CQ_UNIT :]
    assert tail == bytes(len(tail))  # nothing stale left to be recovered later
    # dispatching the dropped records again rebuilds the same entries
    assert cq.put_message_position_info(placed[71][0], placed[71][1], 0, 71)
    assert cq.get_max_offset_in_queue() == 72


def test_truncate_inside_a_record_drops_it(store: DefaultMessageStore) -> None:
    placed = put_many(store, 10)
    wait_dispatched(store)
    cq = store.get_consume_queue("T", 0)
    assert cq is not None
    off5, size5 = placed[5]
    cq.truncate_dirty_logic_files(off5 + size5 - 1)  # record 5 ends one byte past the cut
    assert cq.get_max_offset_in_queue() == 5
    assert cq.max_physic_offset == off5  # end of record 4 (records are contiguous here)


def test_truncate_at_a_file_boundary_deletes_the_later_file(store: DefaultMessageStore) -> None:
    placed = put_many(store, 100)
    wait_dispatched(store)
    cq = store.get_consume_queue("T", 0)
    assert cq is not None
    off63, size63 = placed[63]
    cq.truncate_dirty_logic_files(off63 + size63)
    assert cq.get_max_offset_in_queue() == 64
    assert cq_files(store, "T", 0) == ["00000000000000000000"]
    assert cq.put_message_position_info(placed[64][0], placed[64][1], 0, 64)
    assert cq.get_max_offset_in_queue() == 65
    assert cq_files(store, "T", 0) == ["00000000000000000000", "00000000000000001280"]


def test_truncate_before_everything_empties_the_queue(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, str(tmp_path / "cq"), 20 * 4)
    assert cq.put_entries(0, b"".join(ENTRY.pack(1000 + 100 * i, 100, 0) for i in range(6)), 1600)
    assert cq.get_max_offset_in_queue() == 6
    cq.truncate_dirty_logic_files(500)
    assert cq.get_max_offset_in_queue() == 0
    assert [(mf.file_from_offset, mf.wrote_position) for mf in cq.mapped_file_queue.mapped_files] == [(0, 0)]
    assert cq.max_physic_offset == -1
    cq.shutdown()


def test_truncating_a_sole_later_file_keeps_the_queues_logical_offset(tmp_path: Path) -> None:
    # retention removed the queue's earlier files; all of the one left is past the cut: it is
    # emptied, not deleted, so the next entry still lands at offset 16 (consumers are there)
    cq = ConsumeQueue("T", 0, str(tmp_path / "cq"), 20 * 4)
    assert cq.put_entries(16, b"".join(ENTRY.pack(1000 + 100 * i, 100, 0) for i in range(3)), 1300)
    assert [mf.file_from_offset for mf in cq.mapped_file_queue.mapped_files] == [16 * 20]
    assert cq.get_max_offset_in_queue() == 19
    cq.truncate_dirty_logic_files(500)
    assert cq.get_max_offset_in_queue() == 16
    assert cq.max_physic_offset == -1
    assert cq.put_entries(16, ENTRY.pack(500, 80, 0), 580)
    assert (cq.get_max_offset_in_queue(), cq.get_entry(16)) == (17, (500, 80, 0))
    cq.shutdown()


@pytest.mark.parametrize("cut_after", [0, 3, 64, 99])
def test_reopen_after_truncation_redispatches_the_dropped_records(
    store_config: MessageStoreConfig, cut_after: int
) -> None:
    with DefaultMessageStore(store_config) as s:
        placed = put_many(s, 100)
        wait_dispatched(s)
        full = read_entries(s, "T", 0)
        cq = s.get_consume_queue("T", 0)
        assert cq is not None
        off, size = placed[cut_after]
        cq.truncate_dirty_logic_files(off + size)
        assert cq.get_max_offset_in_queue() == cut_after + 1
    with DefaultMessageStore(store_config) as s:
        assert s.get_max_offset_in_queue("T", 0) == 100
        assert read_entries(s, "T", 0) == full


def test_a_gap_in_the_queue_is_padded_so_offsets_stay_true(tmp_path) -> None:
    """Records lost before dispatch (retention after a crash) must not shift later entries."""
    import struct

    from pumice.store.consume_queue import ConsumeQueue

    cq = ConsumeQueue("T", 0, str(tmp_path), 20 * 8)
    try:
        assert cq.put_entries(0, struct.pack(">qiq", 100, 10, 0), 110)
        # offsets 1..10 never come; offset 11 does (it lands in the second file)
        assert cq.put_entries(11, struct.pack(">qiq", 5000, 10, 7), 5010)
        assert cq.get_max_offset_in_queue() == 12
        assert cq.get_entry(11) == (5000, 10, 7)
        assert cq.get_entry(0) == (100, 10, 0)
        assert all(cq.get_entry(i) == (0, 0x7FFFFFFF, 0) for i in range(1, 11))
    finally:
        cq.mapped_file_queue.shutdown()


def test_reloading_a_queue_whose_sole_file_is_empty_keeps_its_min_and_max(tmp_path: Path) -> None:
    path = str(tmp_path / "cq")
    cq = ConsumeQueue("T", 0, path, 20 * 4)
    assert cq.put_entries(8, b"".join(ENTRY.pack(1000 + 100 * i, 100, 0) for i in range(2)), 1200)
    cq.truncate_dirty_logic_files(500)  # all of the sole file is past the cut: emptied, kept
    cq.shutdown()
    again = ConsumeQueue("T", 0, path, 20 * 4)
    assert again.load()
    again.recover()
    again.correct_min_offset(0)
    assert (again.get_min_offset_in_queue(), again.get_max_offset_in_queue()) == (8, 8)
    again.shutdown()


def test_recover_takes_the_max_physic_offset_from_real_entries_not_blank_fillers(tmp_path: Path) -> None:
    path = str(tmp_path / "cq")
    cq = ConsumeQueue("T", 0, path, 20 * 64)
    assert cq.put_entries(10, b"".join(ENTRY.pack(1000 + 100 * i, 100, 0) for i in range(5)), 1500)
    cq.truncate_dirty_logic_files(900)  # every real entry goes; the 10 blank fillers stay
    assert cq.get_max_offset_in_queue() == 10
    cq.shutdown()
    again = ConsumeQueue("T", 0, path, 20 * 64)
    assert again.load()
    again.recover()
    assert again.max_physic_offset == -1  # not 0 + 0x7fffffff from a filler
    assert again.get_max_offset_in_queue() == 10
    again.shutdown()


def test_entries_cut_while_a_pull_reads_them_do_not_come_back_after_a_restart(tmp_path: Path) -> None:
    # a truncation (DLedger's, or a recovery's) drops entries 4..9 while a pull still holds a
    # view of entries 4..7; two new entries follow. Were the old file reopened behind them,
    # a restart would recover entries 6 and 7 as valid: records that are no longer there.
    path = str(tmp_path / "cq")
    cq = ConsumeQueue("T", 0, path, 20 * 4)
    assert cq.put_entries(0, b"".join(ENTRY.pack(1000 + 100 * i, 100, 0) for i in range(10)), 2000)
    sbr = cq.get_index_buffer(4)
    assert sbr is not None
    try:
        cq.truncate_dirty_logic_files(1400)
        assert cq.get_max_offset_in_queue() == 4
        assert cq.put_entries(4, b"".join(ENTRY.pack(1400 + 50 * i, 50, 0) for i in range(2)), 1500)
        assert ENTRY.unpack_from(sbr.buffer, 40) == (1600, 100, 0)  # the pull's view is intact
    finally:
        sbr.release()
    cq.shutdown()
    again = ConsumeQueue("T", 0, path, 20 * 4)
    assert again.load()
    again.recover()
    assert again.get_max_offset_in_queue() == 6
    assert again.max_physic_offset == 1500
    assert [again.get_entry(i) for i in (4, 5, 6)] == [(1400, 50, 0), (1450, 50, 0), None]
    again.shutdown()
