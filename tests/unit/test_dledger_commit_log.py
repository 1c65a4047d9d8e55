"""DLedgerCommitLog at store level (DLEDGER.md §4): records inside DLedger entries at pos + 48,
only committed entries visible and dispatched, DLedger outcomes mapped as 4.9 maps them, file
roll-over on DLedger's blank, batches as one entry per message, restart. The replicated log is
``tests.helpers.one_node_log.OneNodeLog`` (a group of one)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from pumice.client.message_batch import encode_batch_record
from pumice.common.java_hash import tags_code
from pumice.common.message import MessageExtBatch
from pumice.common.message_decoder import decode_message
from pumice.dledger.dledger_entry import BODY_OFFSET, decode_header
from pumice.dledger.dledger_response_code import DLedgerResponseCode as Code
from pumice.store import (
    DefaultMessageStore,
    GetMessageStatus,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
)
from pumice.store import dledger_commit_log as dcl
from tests.helpers.one_node_log import OneNodeLog
from tests.helpers.store import FILE_SIZE, small_config
from tests.helpers.waiting import eventually, wait_dispatched

HOST = (b"\x7f\x00\x00\x01", 10911)


def msg(body: bytes = b"hello", topic: str = "T", queue_id: int = 0, tags: str = "A") -> MessageExtBrokerInner:
    return MessageExtBrokerInner(
        topic=topic, body=body, queue_id=queue_id, properties={"TAGS": tags}, store_host=HOST, born_host=HOST
    )


def dledger_config(root: Path) -> MessageStoreConfig:
    return small_config(
        str(root),
        enable_d_leger_commit_log=True,
        d_leger_group="G",
        d_leger_peers="n0-127.0.0.1:40911",
        d_leger_self_id="n0",
    )


def open_store(root: Path, log: OneNodeLog) -> DefaultMessageStore:
    store = DefaultMessageStore(dledger_config(root), replicated_log=log)
    assert store.load()
    store.start()
    return store


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


def test_the_codes_it_maps_are_dledgers() -> None:
    for name in ("SUCCESS", "NOT_LEADER", "INCONSISTENT_LEADER", "DISK_FULL", "WAIT_QUORUM_ACK_TIMEOUT",
                 "LEADER_PENDING_FULL", "LEADER_NOT_READY"):  # fmt: skip
        assert getattr(dcl, name) == Code[name].value


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (Code.SUCCESS, PutMessageStatus.PUT_OK),
        (Code.NOT_LEADER, PutMessageStatus.SERVICE_NOT_AVAILABLE),
        (Code.INCONSISTENT_LEADER, PutMessageStatus.SERVICE_NOT_AVAILABLE),
        (Code.LEADER_NOT_READY, PutMessageStatus.SERVICE_NOT_AVAILABLE),
        (Code.DISK_FULL, PutMessageStatus.SERVICE_NOT_AVAILABLE),
        (Code.WAIT_QUORUM_ACK_TIMEOUT, PutMessageStatus.OS_PAGECACHE_BUSY),
        (Code.LEADER_PENDING_FULL, PutMessageStatus.OS_PAGECACHE_BUSY),
        (Code.TERM_CHANGED, PutMessageStatus.UNKNOWN_ERROR),
    ],
)
def test_outcome_maps_to_put_status(root: Path, code: Code, status: PutMessageStatus) -> None:
    log = OneNodeLog(str(root), FILE_SIZE)
    log.outcome = code
    store = open_store(root, log)
    try:
        assert store.put_message(msg()).status is status
    finally:
        store.shutdown()


def test_record_sits_at_entry_pos_plus_48_and_is_dispatched(root: Path) -> None:
    log = OneNodeLog(str(root), FILE_SIZE)
    store = open_store(root, log)
    try:
        r = store.put_message(msg(b"first"))
        assert r.status is PutMessageStatus.PUT_OK
        amr = r.append_message_result
        assert amr is not None and amr.wrote_offset == 48 and amr.msg_id.endswith("0000000000000030")
        r2 = store.put_message(msg(b"second"))
        assert r2.append_message_result is not None
        wait_dispatched(store)
        mf = log.data_file_queue.mapped_files[0]
        magic, size, index, _term, pos, *_, body_len = decode_header(mf.mmap, 0)
        assert (magic, index, pos, size) == (1, 0, 0, BODY_OFFSET + body_len)
        record_size = struct.unpack_from(">i", mf.mmap, BODY_OFFSET)[0]
        assert record_size == body_len == amr.wrote_bytes
        # the second entry follows the first; its record's PHYSICALOFFSET is its pos + 48
        assert r2.append_message_result.wrote_offset == size + BODY_OFFSET
        rec = decode_message(bytes(mf.mmap[size + BODY_OFFSET : size + BODY_OFFSET + record_size + 10]))
        assert rec.commit_log_offset == size + BODY_OFFSET and rec.queue_offset == 1 and rec.body == b"second"
        cq = store.get_consume_queue("T", 0)
        assert cq is not None
        assert cq.get_entry(0) == (48, record_size, tags_code("A"))
        assert store.look_message_by_offset(48).body == b"first"  # type: ignore[union-attr]
        assert store.look_message_by_msg_id(r2.append_message_result.msg_id).body == b"second"  # type: ignore[union-attr]
        got = store.get_message("G", "T", 0, 0, 32)
        try:
            assert got.status is GetMessageStatus.FOUND and got.message_count == 2
        finally:
            got.release()
        assert store.get_min_phy_offset() == 0
        assert (
            store.get_max_phy_offset() == log.committed_pos == r2.append_message_result.wrote_offset + record_size + 1
        )
    finally:
        store.shutdown()


def test_only_committed_entries_are_visible(root: Path) -> None:
    log = OneNodeLog(str(root), FILE_SIZE, auto_commit=False)
    store = open_store(root, log)
    try:
        r = store.put_messages([msg(b"held")], wait_flush=False)
        assert r.status is PutMessageStatus.PUT_OK and r.quorum is not None and not r.quorum.done()
        assert store.get_max_phy_offset() == 0
        assert store.look_message_by_offset(48) is None
        assert store.get_max_offset_in_queue("T", 0) == 0
        log.commit()
        assert r.quorum.done() and r.status is PutMessageStatus.PUT_OK
        eventually(lambda: store.get_max_offset_in_queue("T", 0) == 1, 5, "dispatch of the committed entry")
        assert store.look_message_by_offset(48).body == b"held"  # type: ignore[union-attr]
        # a lost quorum: the status says so, and the entry is never dispatched
        r = store.put_messages([msg(b"lost")], wait_flush=False)
        log.fail_pending(Code.WAIT_QUORUM_ACK_TIMEOUT)
        assert r.status is PutMessageStatus.OS_PAGECACHE_BUSY and "502" in r.remark
        assert store.get_max_offset_in_queue("T", 0) == 1
    finally:
        store.shutdown()


def test_refused_append_is_busy_and_takes_no_queue_offset(root: Path) -> None:
    log = OneNodeLog(str(root), FILE_SIZE)
    store = open_store(root, log)
    try:
        log.refuse = Code.NOT_LEADER
        r = store.put_message(msg())
        assert r.status is PutMessageStatus.OS_PAGECACHE_BUSY and "404" in r.remark
        log.refuse = None
        r = store.put_message(msg())
        assert r.status is PutMessageStatus.PUT_OK and r.append_message_result is not None
        assert r.append_message_result.logics_offset == 0
    finally:
        store.shutdown()


def test_entries_roll_to_the_next_file_on_dledgers_blank_and_survive_a_restart(root: Path) -> None:
    log = OneNodeLog(str(root), FILE_SIZE)
    store = open_store(root, log)
    bodies = [bytes([65 + i % 26]) * (700 + i) for i in range(250)]  # ~200 KiB: four data files
    try:
        offsets = []
        for b in bodies:
            r = store.put_message(msg(b, queue_id=1))
            assert r.status is PutMessageStatus.PUT_OK and r.append_message_result is not None
            offsets.append(r.append_message_result.wrote_offset)
        assert len(log.data_file_queue.mapped_files) >= 3
        first_file = log.data_file_queue.mapped_files[0]
        last_pos = max(o for o in offsets if o < FILE_SIZE) - BODY_OFFSET
        blank_at = last_pos + decode_header(first_file.mmap, last_pos)[1]
        assert struct.unpack_from(">ii", first_file.mmap, blank_at) == (-1, FILE_SIZE - blank_at)
        assert FILE_SIZE + BODY_OFFSET in offsets  # the next entry opens the second file
        wait_dispatched(store)
        assert store.get_max_offset_in_queue("T", 1) == len(bodies)
    finally:
        store.shutdown()
    log = OneNodeLog(str(root), FILE_SIZE)
    store = open_store(root, log)
    try:
        assert store.get_max_offset_in_queue("T", 1) == len(bodies)
        for i in (0, 100, 249):
            assert store.look_message_by_offset(offsets[i]).body == bodies[i]  # type: ignore[union-attr]
        r = store.put_message(msg(b"after", queue_id=1))
        assert r.append_message_result is not None and r.append_message_result.logics_offset == len(bodies)
    finally:
        store.shutdown()


def test_a_rebuilt_consume_queue_matches_dispatch(root: Path) -> None:
    """ConsumeQueues removed while stopped are rebuilt by parsing the DLedger entries."""
    log = OneNodeLog(str(root), FILE_SIZE)
    store = open_store(root, log)
    try:
        for i in range(40):
            assert store.put_message(msg(b"m%d" % i, queue_id=i % 2)).status is PutMessageStatus.PUT_OK
        wait_dispatched(store)
        before = bytes((root / "consumequeue" / "T" / "0" / "00000000000000000000").read_bytes()[: 20 * 20])
    finally:
        store.shutdown()
    import shutil

    shutil.rmtree(root / "consumequeue")
    (root / "checkpoint").unlink()
    store = open_store(root, OneNodeLog(str(root), FILE_SIZE))
    try:
        wait_dispatched(store)
        after = (root / "consumequeue" / "T" / "0" / "00000000000000000000").read_bytes()[: 20 * 20]
        assert after == before and store.get_max_offset_in_queue("T", 1) == 20
    finally:
        store.shutdown()


def test_a_batch_is_one_entry_per_message(root: Path) -> None:
    log = OneNodeLog(str(root), FILE_SIZE)
    store = open_store(root, log)
    try:
        body = b"".join(encode_batch_record(b, 0, {}) for b in (b"b1", b"b2", b"b3"))
        batch = MessageExtBatch(topic="T", queue_id=0, body=body, store_host=HOST, born_host=HOST)
        r = store.put_message_batch(batch)
        assert r.status is PutMessageStatus.PUT_OK and r.append_message_result is not None
        assert r.append_message_result.msg_num == 3 and log.ledger_end_index == 2
        wait_dispatched(store)
        assert [store.look_message_by_offset(o).queue_offset for o in r.append_message_result.wrote_offsets] == [  # type: ignore[union-attr]
            0, 1, 2,
        ]  # fmt: skip
    finally:
        store.shutdown()


def test_an_existing_plain_commit_log_is_served_first_then_dledger_goes_on_after_it(root: Path) -> None:
    """4.9's migration: the old CommitLog is recovered and closed with a blank, DLedger's data
    begin at the end of its last file; old messages stay readable, queue offsets go on."""
    plain = DefaultMessageStore(small_config(str(root)))
    assert plain.load()
    plain.start()
    old = []
    for i in range(30):
        r = plain.put_message(msg(b"old%d" % i, queue_id=i % 2))
        assert r.append_message_result is not None
        old.append(r.append_message_result.wrote_offset)
    wait_dispatched(plain)
    plain.shutdown()
    for restart in range(2):
        log = OneNodeLog(str(root), FILE_SIZE)
        store = open_store(root, log)
        try:
            assert log.data_file_queue.mapped_files[0].file_from_offset == FILE_SIZE  # the old log's end
            for i, off in enumerate(old):
                assert store.look_message_by_offset(off).body == b"old%d" % i  # type: ignore[union-attr]
            got = store.get_message("G", "T", 0, 0, 64)
            try:
                assert got.message_count == 15 + restart
            finally:
                got.release()
            if restart == 0:
                r = store.put_message(msg(b"new", queue_id=0))
                assert r.status is PutMessageStatus.PUT_OK and r.append_message_result is not None
                assert (r.append_message_result.wrote_offset, r.append_message_result.logics_offset) == (
                    FILE_SIZE + BODY_OFFSET, 15,
                )  # fmt: skip
                wait_dispatched(store)
            assert store.look_message_by_offset(FILE_SIZE + BODY_OFFSET).body == b"new"  # type: ignore[union-attr]
            assert store.get_min_phy_offset() == 0
        finally:
            store.shutdown()


def test_the_broker_awaits_the_quorum_on_its_loop(root: Path) -> None:
    """PutMessageWaiter answers a DLedger put once the quorum's outcome is known, and with it."""
    import asyncio
    import threading

    from pumice.broker.put_message_waiter import PutMessageWaiter

    log = OneNodeLog(str(root), FILE_SIZE, auto_commit=False)
    store = open_store(root, log)

    async def send(then: Callable[[], None]) -> PutMessageStatus:
        r = store.put_messages([msg()], wait_flush=False)
        threading.Timer(0.2, then).start()
        return (await asyncio.wait_for(PutMessageWaiter(store).wait_stored(r), 5)).status

    try:
        assert asyncio.run(send(log.commit)) is PutMessageStatus.PUT_OK
        assert asyncio.run(send(lambda: log.fail_pending(Code.NOT_LEADER))) is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        store.shutdown()


def test_the_mode_and_the_log_go_together(root: Path) -> None:
    with pytest.raises(ValueError, match="needs the DLedger log"):
        DefaultMessageStore(dledger_config(root))
    with pytest.raises(ValueError, match="needs the DLedger log"):
        DefaultMessageStore(small_config(str(root)), replicated_log=OneNodeLog(str(root), FILE_SIZE))
    assert dledger_config(root).dledger_data_dir == str(root / "dledger-n0" / "data")


def test_the_stores_clean_up_leaves_dledgers_files_alone(root: Path) -> None:
    """DLedger expires its own data files (fileReservedTime + 1 hours, its checkpoint's begin);
    the store's CleanCommitLogService takes only a plain CommitLog's (4.9's deleteExpiredFile)."""
    log = OneNodeLog(str(root), FILE_SIZE)
    cfg = dledger_config(root)
    cfg.file_reserved_time = 0
    store = DefaultMessageStore(cfg, replicated_log=log)
    assert store.load()
    store.start()
    try:
        for i in range(200):
            assert store.put_message(msg(b"x" * 900, queue_id=i % 2)).status is PutMessageStatus.PUT_OK
        files = [mf.file_name for mf in log.data_file_queue.mapped_files]
        assert len(files) >= 3
        wait_dispatched(store)
        store.execute_delete_files_manually()
        store.clean_files_periodically()
        assert [mf.file_name for mf in log.data_file_queue.mapped_files] == files
        assert all(Path(f).exists() for f in files)
        assert store.look_message_by_offset(48) is not None
    finally:
        store.shutdown()
