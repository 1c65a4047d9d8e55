"""CommitLog behaviour: segment roll-over, batches, cross-file reads, put checks, transactions, msgId, delay."""

from __future__ import annotations

import os
import re
import struct
import time
from pathlib import Path

import pytest

from pumice.common.java_hash import tags_code
from pumice.common.message_decoder import decode_message
from pumice.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC as SCHEDULE_TOPIC
from pumice.store import (
    BrokerRole,
    DefaultMessageStore,
    GetMessageStatus,
    MessageConst,
    MessageExt,
    MessageExtBrokerInner,
    MessageSysFlag,
    PutMessageResult,
    PutMessageStatus,
)
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched

FILE_SIZE = 64 * 1024
BLANK_MAGIC = 0xCBD43194


def msg(
    topic: str = "T",
    body: bytes = b"x",
    queue_id: int = 0,
    properties: dict[str, str] | None = None,
    sys_flag: int = 0,
    store_host: tuple[bytes, int] = (b"\x7f\x00\x00\x01", 0),
) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(
        topic=topic,
        body=body,
        queue_id=queue_id,
        properties=dict(properties or {}),
        sys_flag=sys_flag,
        store_host=store_host,
    )


def put_ok(store: DefaultMessageStore, m: MessageExtBrokerInner) -> PutMessageResult:
    r = store.put_message(m)
    assert r.is_ok(), r
    return r


def record_len(body_len: int, topic: str = "T", props_len: int = 0) -> int:
    """91 fixed bytes (IPv4 hosts, TOPICLENGTH and PROPERTIESLENGTH included) + body + topic + properties."""
    return 91 + body_len + len(topic.encode()) + props_len


def commit_log_files(store: DefaultMessageStore) -> list[str]:
    """Files on disk (the allocate service may have made the next file ahead of time)."""
    d = store.config.commit_log_dir
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def mapped_names(store: DefaultMessageStore) -> list[str]:
    """Files the CommitLog has taken into use."""
    return [os.path.basename(mf.file_name) for mf in store.commit_log.mapped_file_queue.mapped_files]


def snapshot(store: DefaultMessageStore) -> tuple[int, list[str], dict[tuple[str, int], int]]:
    """What a failed put must leave untouched (files in use: the next one may be pre-created on disk)."""
    return store.commit_log.get_max_offset(), mapped_names(store), dict(store.commit_log.topic_queue_table)


def pull_all(store: DefaultMessageStore, topic: str, queue_id: int, batch: int = 32) -> list[tuple[int, MessageExt]]:
    """Page through a queue with next_begin_offset; (queue offset, decoded record) pairs."""
    out: list[tuple[int, MessageExt]] = []
    offset = store.get_min_offset_in_queue(topic, queue_id)
    for _ in range(100_000):
        res = store.get_message("g", topic, queue_id, offset, batch)
        assert res is not None
        with res:
            if res.status is not GetMessageStatus.FOUND:
                break
            out.extend((qoff, decode_message(sbr)) for qoff, sbr in zip(res.queue_offsets, res.buffers, strict=True))
        assert res.next_begin_offset > offset
        offset = res.next_begin_offset
    return out


def read_file(store: DefaultMessageStore, name: str) -> bytes:
    with open(os.path.join(store.config.commit_log_dir, name), "rb") as f:
        return f.read()


# -- roll-over ---------------------------------------------------------------------------


def test_roll_over_writes_blank_record_and_next_message_starts_next_file(store: DefaultMessageStore) -> None:
    body_len = 1000
    n = record_len(body_len)
    per_file = (FILE_SIZE - 8) // n  # a record fits while pos + len + 8 <= file size
    results = [put_ok(store, msg(body=bytes([i % 251]) * body_len)) for i in range(per_file + 2)]
    offsets = [r.append_message_result.wrote_offset for r in results]  # type: ignore[union-attr]

    assert offsets[:per_file] == [i * n for i in range(per_file)]
    assert offsets[per_file] == FILE_SIZE
    assert offsets[per_file + 1] == FILE_SIZE + n

    files = mapped_names(store)
    assert files == ["00000000000000000000", "00000000000000065536"]
    assert set(files) <= set(commit_log_files(store))
    assert all(re.fullmatch(r"\d{20}", f) and int(f) % FILE_SIZE == 0 for f in commit_log_files(store))

    raw = read_file(store, files[0])
    assert len(raw) == FILE_SIZE
    end = per_file * n
    size, magic = struct.unpack_from(">iI", raw, end)
    assert magic == BLANK_MAGIC
    assert size == FILE_SIZE - end
    assert size < n + 8  # the next record really did not fit
    assert store.look_message_by_offset(end) is None  # the blank is not a message
    assert store.commit_log.get_max_offset() == FILE_SIZE + 2 * n

    wait_dispatched(store)
    got = pull_all(store, "T", 0)
    assert [q for q, _ in got] == list(range(per_file + 2))
    assert [m.commit_log_offset for _, m in got] == offsets
    assert all(m.body == bytes([i % 251]) * body_len for i, (_, m) in enumerate(got))


def test_roll_over_with_exactly_eight_bytes_left(store: DefaultMessageStore) -> None:
    # 8 records of 8191 bytes leave exactly END_FILE_MIN_BLANK_LENGTH (8) bytes in the file
    n = 8191
    body_len = n - record_len(0)
    offsets = [put_ok(store, msg(body=b"e" * body_len)).append_message_result.wrote_offset for _ in range(9)]  # type: ignore[union-attr]
    assert offsets[:8] == [i * n for i in range(8)]
    assert offsets[8] == FILE_SIZE
    raw = read_file(store, "00000000000000000000")
    assert struct.unpack_from(">iI", raw, 8 * n) == (8, BLANK_MAGIC)
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("T", 0) == 9


def test_batch_that_does_not_fit_moves_whole_to_the_next_file(store: DefaultMessageStore) -> None:
    """As in RocketMQ, a batch is never split: the file is closed with a blank record."""
    body_len = 2000
    n = record_len(body_len)
    per_file = (FILE_SIZE - 8) // n
    for _ in range(per_file - 3):
        put_ok(store, msg(body=b"p" * body_len))
    blank_at = (per_file - 3) * n
    batch = [msg(body=f"batch-{i:03d}".encode() * (body_len // 9)) for i in range(10)]
    r = store.put_messages(batch)
    assert r.is_ok(), r
    res = r.append_message_result
    assert res is not None
    assert res.msg_num == 10
    assert res.wrote_offsets[0] == FILE_SIZE
    assert all(o >= FILE_SIZE for o in res.wrote_offsets)
    assert res.logics_offsets == list(range(per_file - 3, per_file + 7))
    raw = read_file(store, "00000000000000000000")
    assert struct.unpack_from(">iI", raw, blank_at) == (FILE_SIZE - blank_at, BLANK_MAGIC)
    assert mapped_names(store) == ["00000000000000000000", "00000000000000065536"]
    for m, off in zip(batch, res.wrote_offsets, strict=True):
        got = store.look_message_by_offset(off)
        assert got is not None
        assert got.body == m.body
        assert got.commit_log_offset == off
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("T", 0) == per_file + 7
    got_all = pull_all(store, "T", 0)
    assert [q for q, _ in got_all] == list(range(per_file + 7))
    assert [m.body for _, m in got_all[-10:]] == [m.body for m in batch]


def test_batch_larger_than_a_file_is_illegal(store: DefaultMessageStore) -> None:
    before = snapshot(store)
    r = store.put_messages([msg(body=b"z" * 4000) for _ in range(17)])  # 17 x ~4.1 KB > 64 KiB
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert "does not fit" in r.remark
    assert snapshot(store) == before


def test_get_message_reads_a_queue_spanning_three_files(store: DefaultMessageStore) -> None:
    bodies: dict[int, list[bytes]] = {0: [], 1: []}
    for i in range(300):
        q = i % 2
        body = f"q{q}-{i:05d}-".encode() + os.urandom(600)
        bodies[q].append(body)
        put_ok(store, msg(body=body, queue_id=q))
    wait_dispatched(store)
    assert len(mapped_names(store)) >= 3
    for q in (0, 1):
        got = pull_all(store, "T", q, batch=20)
        assert [qo for qo, _ in got] == list(range(150))
        assert [m.body for _, m in got] == bodies[q]
        assert len({m.commit_log_offset // FILE_SIZE for _, m in got}) >= 3


# -- put checks --------------------------------------------------------------------------


def test_put_after_shutdown_is_refused_and_writes_nothing(store: DefaultMessageStore) -> None:
    put_ok(store, msg())
    store.shutdown()
    before = snapshot(store)
    r = store.put_message(msg())
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert not r.is_ok()
    assert snapshot(store) == before


def test_put_on_a_slave_is_refused_and_creates_no_file(tmp_path: Path) -> None:
    with DefaultMessageStore(small_config(str(tmp_path / "s"), broker_role=BrokerRole.SLAVE)) as s:
        r = s.put_message(msg())
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert commit_log_files(s) == []
        assert s.commit_log.get_max_offset() == 0


@pytest.mark.parametrize("make_error", ["logics_queue", "disk_full"])
def test_put_when_not_writeable_is_refused_but_reads_work(store: DefaultMessageStore, make_error: str) -> None:
    put_ok(store, msg(body=b"before"))
    wait_dispatched(store)
    if make_error == "logics_queue":
        store.running_flags.make_logics_queue_error()
    else:
        assert store.running_flags.get_and_make_disk_full()
    before = snapshot(store)
    r = store.put_message(msg(body=b"refused"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert snapshot(store) == before
    with store.get_message("g", "T", 0, 0, 32) as res:  # type: ignore[union-attr]
        assert res.status is GetMessageStatus.FOUND
        assert [decode_message(b).body for b in res.buffers] == [b"before"]
    assert store.look_message_by_offset(0) is not None
    if make_error == "disk_full":
        store.running_flags.get_and_make_disk_ok()
        put_ok(store, msg(body=b"after"))


def test_os_page_cache_busy(store: DefaultMessageStore) -> None:
    put_ok(store, msg())
    now_ms = time.time_ns() // 1_000_000
    store.commit_log.begin_time_in_lock = now_ms - 5000
    before = snapshot(store)
    r = store.put_message(msg())
    assert r.status is PutMessageStatus.OS_PAGECACHE_BUSY
    assert snapshot(store) == before
    # held for less than os_page_cache_busy_timeout_mills (1000): not busy
    store.commit_log.begin_time_in_lock = time.time_ns() // 1_000_000 - 200
    put_ok(store, msg())
    assert store.commit_log.begin_time_in_lock == 0


def test_put_checks_run_in_order(store: DefaultMessageStore) -> None:
    """shutdown > slave > not writeable > page cache busy > message checks."""
    bad = msg(topic="t" * 128)
    store.shutdown_flag = True
    store.config.broker_role = BrokerRole.SLAVE
    store.running_flags.get_and_make_disk_full()
    store.commit_log.begin_time_in_lock = time.time_ns() // 1_000_000 - 5000
    try:
        r = store.put_message(bad)
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "shut" in r.remark
        store.shutdown_flag = False
        r = store.put_message(bad)
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "slave" in r.remark
        store.config.broker_role = BrokerRole.ASYNC_MASTER
        r = store.put_message(bad)
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "writ" in r.remark
        store.running_flags.get_and_make_disk_ok()
        r = store.put_message(bad)
        assert r.status is PutMessageStatus.OS_PAGECACHE_BUSY
        store.commit_log.begin_time_in_lock = 0
        r = store.put_message(bad)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert commit_log_files(store) == []
    finally:
        store.shutdown_flag = False
        store.config.broker_role = BrokerRole.ASYNC_MASTER
        store.running_flags.get_and_make_disk_ok()
        store.commit_log.begin_time_in_lock = 0


def test_topic_length_limit(store: DefaultMessageStore) -> None:
    before = snapshot(store)
    r = store.put_message(msg(topic="t" * 128))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert snapshot(store) == before
    assert commit_log_files(store) == []
    r = put_ok(store, msg(topic="t" * 127, body=b"ok"))
    got = store.look_message_by_offset(r.append_message_result.wrote_offset)  # type: ignore[union-attr]
    assert got is not None and got.topic == "t" * 127 and got.body == b"ok"


def test_topic_length_limit_applies_to_delayed_messages(store: DefaultMessageStore) -> None:
    r = store.put_message(msg(topic="t" * 128, properties={"DELAY": "3"}))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert commit_log_files(store) == []


def test_properties_length_limit(store: DefaultMessageStore) -> None:
    prefix = len("KEYS\x01")
    put_ok(store, msg(properties={"KEYS": "a" * (32767 - prefix)}))
    before = snapshot(store)
    r = store.put_message(msg(properties={"KEYS": "a" * (32768 - prefix)}))
    assert not r.is_ok()
    # RocketMQ 4.9 answers MESSAGE_ILLEGAL (DefaultMessageStore.checkMessage)
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert snapshot(store) == before


def test_record_larger_than_max_message_size_is_illegal(tmp_path: Path) -> None:
    """RocketMQ 4.9 compares the whole record length (msgLen) with maxMessageSize."""
    with DefaultMessageStore(small_config(str(tmp_path / "s"), max_message_size=1024)) as s:
        overhead = record_len(0)
        r = put_ok(s, msg(body=b"b" * (1024 - overhead)))
        assert r.append_message_result.wrote_bytes == 1024  # type: ignore[union-attr]
        before = snapshot(s)
        r = s.put_message(msg(body=b"b" * (1025 - overhead)))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "maxMessageSize" in r.remark
        assert snapshot(s) == before


def test_batch_with_one_bad_message_writes_nothing(store: DefaultMessageStore) -> None:
    put_ok(store, msg(body=b"first"))
    before = snapshot(store)
    batch = [msg(body=b"a"), msg(body=b"b", queue_id=1), msg(topic="t" * 128), msg(body=b"c")]
    r = store.put_messages(batch)
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert snapshot(store) == before
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("T", 0) == 1
    assert store.get_consume_queue("T", 1) is None
    r = put_ok(store, msg(body=b"next"))
    assert r.append_message_result.logics_offset == 1  # type: ignore[union-attr]


def test_empty_batch_is_refused(store: DefaultMessageStore) -> None:
    r = store.put_messages([])
    assert not r.is_ok()
    assert commit_log_files(store) == []


def _fill_to_near_file_end(store: DefaultMessageStore, body_len: int = 2000) -> int:
    n = record_len(body_len)
    for _ in range((FILE_SIZE - 8) // n - 3):  # room for 3 more such records
        put_ok(store, msg(body=b"p" * body_len))
    return n


def test_single_message_whose_file_cannot_be_created_writes_no_message(store: DefaultMessageStore) -> None:
    _fill_to_near_file_end(store)
    for _ in range(3):
        put_ok(store, msg(body=b"p" * 2000))
    records_before = len(store.commit_log.iter_requests(0, store.commit_log.get_max_offset()))
    table_before = dict(store.commit_log.topic_queue_table)
    store.allocate_mapped_file_service.shutdown()  # no new CommitLog file can be had now
    r = store.put_message(msg(body=b"q" * 2000))
    assert r.status is PutMessageStatus.CREATE_MAPEDFILE_FAILED
    assert store.commit_log.topic_queue_table == table_before
    assert len(store.commit_log.iter_requests(0, store.commit_log.get_max_offset())) == records_before
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("T", 0) == records_before


def test_batch_whose_next_file_cannot_be_created_writes_no_message(store: DefaultMessageStore) -> None:
    _fill_to_near_file_end(store)
    records_before = len(store.commit_log.iter_requests(0, store.commit_log.get_max_offset()))
    table_before = dict(store.commit_log.topic_queue_table)
    store.allocate_mapped_file_service.shutdown()  # no new CommitLog file can be had now
    r = store.put_messages([msg(body=f"b{i}".encode() * 500) for i in range(10)])
    assert r.status is PutMessageStatus.CREATE_MAPEDFILE_FAILED
    wait_dispatched(store)
    assert store.commit_log.topic_queue_table == table_before
    assert len(store.commit_log.iter_requests(0, store.commit_log.get_max_offset())) == records_before
    assert store.get_max_offset_in_queue("T", 0) == records_before


# -- transactions ------------------------------------------------------------------------


def test_prepared_and_rollback_records_take_no_queue_offset(store: DefaultMessageStore) -> None:
    kinds = [
        ("plain-0", MessageSysFlag.TRANSACTION_NOT_TYPE, 0),
        ("prepared", MessageSysFlag.TRANSACTION_PREPARED_TYPE, 0),
        ("commit-1", MessageSysFlag.TRANSACTION_COMMIT_TYPE, 1),
        ("rollback", MessageSysFlag.TRANSACTION_ROLLBACK_TYPE, 0),
        ("plain-2", MessageSysFlag.TRANSACTION_NOT_TYPE, 2),
        ("prepared-2", MessageSysFlag.TRANSACTION_PREPARED_TYPE, 0),
    ]
    offsets: dict[str, int] = {}
    for body, flag, expect_qoff in kinds:
        r = put_ok(store, msg(topic="TX", body=body.encode(), sys_flag=flag))
        assert r.append_message_result.logics_offset == expect_qoff, body  # type: ignore[union-attr]
        offsets[body] = r.append_message_result.wrote_offset  # type: ignore[union-attr]
        rec = store.look_message_by_offset(offsets[body])
        assert rec is not None and rec.queue_offset == expect_qoff
        assert rec.sys_flag & MessageSysFlag.TRANSACTION_MASK == flag
    assert store.commit_log.topic_queue_table[("TX", 0)] == 3
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("TX", 0) == 3
    got = pull_all(store, "TX", 0)
    assert [m.body for _, m in got] == [b"plain-0", b"commit-1", b"plain-2"]
    assert [store.get_commit_log_offset_in_queue("TX", 0, i) for i in range(3)] == [
        offsets["plain-0"],
        offsets["commit-1"],
        offsets["plain-2"],
    ]


def test_prepared_message_with_delay_is_not_rerouted(store: DefaultMessageStore) -> None:
    r = put_ok(store, msg(topic="TX", sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE, properties={"DELAY": "2"}))
    rec = store.look_message_by_offset(r.append_message_result.wrote_offset)  # type: ignore[union-attr]
    assert rec is not None and rec.topic == "TX"
    assert MessageConst.PROPERTY_REAL_TOPIC not in rec.properties


# -- msgId -------------------------------------------------------------------------------


def test_msg_id_encodes_store_host_and_offset(store: DefaultMessageStore) -> None:
    host = (bytes([192, 168, 1, 20]), 10911)
    put_ok(store, msg(body=b"pad" * 50, store_host=host))
    r = put_ok(store, msg(body=b"target", store_host=host))
    res = r.append_message_result
    assert res is not None
    msg_id = res.msg_id
    assert re.fullmatch(r"[0-9A-F]{32}", msg_id)
    assert msg_id == "C0A80114" + f"{10911:08X}" + f"{res.wrote_offset:016X}"
    assert res.wrote_offset > 0
    got = store.look_message_by_msg_id(msg_id)
    assert got is not None
    assert got.body == b"target"
    assert got.msg_id == msg_id
    assert got.store_host == host
    assert store.look_message_by_msg_id(msg_id.lower()) is not None


def test_msg_id_of_a_batch_lists_every_record(store: DefaultMessageStore) -> None:
    r = store.put_messages([msg(body=f"b{i}".encode()) for i in range(3)])
    assert r.is_ok()
    res = r.append_message_result
    assert res is not None
    assert len(res.msg_ids) == 3
    assert res.msg_id == ",".join(res.msg_ids)
    bodies = [store.look_message_by_msg_id(i).body for i in res.msg_ids]  # type: ignore[union-attr]
    assert bodies == [b"b0", b"b1", b"b2"]


def test_msg_id_with_ipv6_store_host(store: DefaultMessageStore) -> None:
    host = (bytes(range(16)), 8080)
    r = put_ok(store, msg(body=b"six", store_host=host))
    msg_id = r.append_message_result.msg_id  # type: ignore[union-attr]
    assert re.fullmatch(r"[0-9A-F]{56}", msg_id)
    got = store.look_message_by_msg_id(msg_id)
    assert got is not None and got.body == b"six" and got.store_host == host
    assert got.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG


@pytest.mark.parametrize("bad", ["", "ABC", "Z" * 32, "0" * 31, "0" * 33, "G0A80114" + "0" * 24])
def test_malformed_msg_id_raises_value_error(store: DefaultMessageStore, bad: str) -> None:
    put_ok(store, msg())
    with pytest.raises(ValueError):
        store.look_message_by_msg_id(bad)


# -- delay levels ------------------------------------------------------------------------


def test_delay_level_reroutes_to_schedule_topic(store: DefaultMessageStore) -> None:
    r = put_ok(store, msg(topic="Orders", queue_id=5, body=b"later", properties={"DELAY": "3", "TAGS": "A"}))
    res = r.append_message_result
    assert res is not None
    rec = store.look_message_by_offset(res.wrote_offset)
    assert rec is not None
    assert rec.topic == SCHEDULE_TOPIC
    assert rec.queue_id == 2
    assert rec.properties[MessageConst.PROPERTY_REAL_TOPIC] == "Orders"
    assert rec.properties[MessageConst.PROPERTY_REAL_QUEUE_ID] == "5"
    assert rec.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] == "3"
    assert rec.properties["TAGS"] == "A"
    wait_dispatched(store)
    assert store.get_consume_queue("Orders", 5) is None
    cq = store.get_consume_queue(SCHEDULE_TOPIC, 2)
    assert cq is not None
    entry = cq.get_entry(0)
    assert entry is not None
    assert entry[0] == res.wrote_offset
    assert entry[2] == rec.store_timestamp + 10_000
    assert entry[2] != tags_code("A")


def test_delay_level_above_max_is_clamped_to_18(store: DefaultMessageStore) -> None:
    r = put_ok(store, msg(topic="Orders", properties={"DELAY": "99"}))
    rec = store.look_message_by_offset(r.append_message_result.wrote_offset)  # type: ignore[union-attr]
    assert rec is not None
    assert rec.topic == SCHEDULE_TOPIC and rec.queue_id == 17
    assert rec.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] == "18"
    wait_dispatched(store)
    entry = store.get_consume_queue(SCHEDULE_TOPIC, 17).get_entry(0)  # type: ignore[union-attr]
    assert entry is not None and entry[2] == rec.store_timestamp + 2 * 3600 * 1000


def test_delay_level_zero_is_not_delayed(store: DefaultMessageStore) -> None:
    r = put_ok(store, msg(topic="Orders", properties={"DELAY": "0"}))
    rec = store.look_message_by_offset(r.append_message_result.wrote_offset)  # type: ignore[union-attr]
    assert rec is not None and rec.topic == "Orders"
