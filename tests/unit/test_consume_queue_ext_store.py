"""The store with ``enable_consume_queue_ext``: units, tag and SQL92 filtering, recovery, retention, delays."""

from __future__ import annotations

import os
import shutil
import struct
import time
from pathlib import Path

import numpy as np

from pumice.broker.bloom_filter import BloomFilter
from pumice.broker.consumer_filter_manager import ConsumerFilterManager
from pumice.broker.expression_message_filter import ExpressionMessageFilter
from pumice.broker.filter_api import SubscriptionData
from pumice.common.java_hash import tags_code
from pumice.common.message_decoder import decode_message
from pumice.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC
from pumice.store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig
from pumice.store.consume_queue import ConsumeQueue
from pumice.store.consume_queue_ext import ConsumeQueueExt, CqExtUnit, decorate, is_ext_addr, undecorate
from pumice.store.schedule_message_service import ScheduleMessageService
from tests.helpers.store import Rec, crash, opened, read_queue, small_config, start_store, zero_tail
from tests.helpers.waiting import wait_dispatched

EXT_FILE = 1024  # 51 plain units (20 bytes) per file, then the 4-byte end
PER_FILE = (EXT_FILE - 4) // 20
TAGS = ("A", "B", None)


def ext_config(tmp_path: Path, enable: bool = True, **kw: object) -> MessageStoreConfig:
    ext = {"mapped_file_size_consume_queue_ext": EXT_FILE, "bit_map_length_consume_queue_ext": 112}
    return small_config(str(tmp_path / "s"), enable_consume_queue_ext=enable, **ext, **kw)


def put(
    s: DefaultMessageStore, i: int, tags: str | None = None, queue_id: int = 0, size: int = 200, **props: str
) -> Rec:
    p = {"KEYS": f"k{i}", **props, **({"TAGS": tags} if tags else {})}
    body = (b"m%05d:" % i * size)[:size]
    r = s.put_message(MessageExtBrokerInner(topic="T", body=body, queue_id=queue_id, properties=p))
    assert r.is_ok(), r
    amr = r.append_message_result
    assert amr is not None
    return Rec(f"k{i}", body, queue_id, amr.logics_offset, amr.wrote_offset, amr.wrote_bytes)


def cq_of(s: DefaultMessageStore, queue_id: int = 0, topic: str = "T") -> ConsumeQueue:
    cq = s.get_consume_queue(topic, queue_id)
    assert cq is not None and cq.ext is not None
    return cq


def raw_code(cq: ConsumeQueue, i: int) -> int:
    """The tagsCode field of entry ``i`` as stored (an address with the extension on)."""
    sbr = cq.get_index_buffer(i)
    assert sbr is not None, i
    try:
        return struct.unpack_from(">q", sbr.buffer, 12)[0]
    finally:
        sbr.release()


def code_of(tags: str | None) -> int:
    return tags_code(tags) if tags else 0


def ext_files(s: DefaultMessageStore, queue_id: int = 0) -> list[str]:
    return sorted(os.listdir(os.path.join(s.config.store_path_root_dir, "consumequeue_ext", "T", str(queue_id))))


def pull(s: DefaultMessageStore, queue_id: int = 0, **kw: object) -> list[int]:
    """Queue offsets a filtered pull loop returns from the queue's min to its max."""
    got: list[int] = []
    offset = s.get_min_offset_in_queue("T", queue_id)
    for _ in range(1000):
        if offset >= s.get_max_offset_in_queue("T", queue_id):
            break
        res = s.get_message("g", "T", queue_id, offset, 8, **kw)  # type: ignore[arg-type]
        assert res is not None
        with res:
            got += res.queue_offsets
            offset = res.next_begin_offset
    return got


def test_entries_hold_addresses_of_units_with_the_tags_code_and_store_time(tmp_path: Path) -> None:
    with opened(ext_config(tmp_path)) as s:
        recs = [put(s, i, TAGS[i % 3]) for i in range(150)]
        wait_dispatched(s)
        cq = cq_of(s)
        addrs = [raw_code(cq, i) for i in range(150)]
        assert all(is_ext_addr(a) for a in addrs)
        reals = [undecorate(a) for a in addrs]
        assert reals == sorted(set(reals)) and all(r % EXT_FILE + 20 <= EXT_FILE - 4 for r in reals)
        for i, r in enumerate(recs):
            stored = s.look_message_by_offset(r.phys)
            assert stored is not None
            assert cq.ext.get(addrs[i]) == CqExtUnit(code_of(TAGS[i % 3]), stored.store_timestamp, None), i
            assert cq.get_entry(i) == (r.phys, r.size, code_of(TAGS[i % 3]))
        assert ext_files(s) == [f"{k * EXT_FILE:020d}" for k in range(-(-150 // PER_FILE))]


def test_tag_filtering_through_the_extension_matches_the_plain_queue(tmp_path: Path) -> None:
    got = {}
    for enable in (True, False):
        with opened(ext_config(tmp_path / str(enable), enable)) as s:
            for i in range(130):
                put(s, i, TAGS[i % 3])
            wait_dispatched(s)
            got[enable] = pull(s, tags_codes={tags_code("A")})
    assert got[True] == got[False] == list(range(0, 130, 3))


class CountingFilter(ExpressionMessageFilter):
    def __init__(self, manager: ConsumerFilterManager, expression: str) -> None:
        super().__init__(SubscriptionData("T", expression), manager.get("T", "G"), manager, is_tag=False)
        self.commit_log_reads = 0

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        self.commit_log_reads += 1
        return super().is_matched_by_commit_log(record)


def test_sql92_bit_maps_spare_the_commit_log_for_entries_they_rule_out(tmp_path: Path) -> None:
    manager = ConsumerFilterManager(str(tmp_path / "consumerFilter.json"), BloomFilter(20, 32))
    with opened(ext_config(tmp_path)) as s:
        assert manager.register("T", "G", "a >= 7", "SQL92", 1)
        fd = manager.get("T", "G")
        assert fd is not None and fd.bloom_filter_data is not None
        s.calc_bit_map = manager.calc_bit_map
        time.sleep(0.005)  # stored after the filter's born time: "in live"
        for i in range(120):
            put(s, i, a=str(i % 10))
        wait_dispatched(s)
        cq = cq_of(s)
        assert len(ext_files(s)) == 4  # 34-byte units (a 112-bit map): 30 a file
        hit = bytearray(manager.bloom_filter.m // 8)
        BloomFilter.hash_to(fd.bloom_filter_data, hit)
        matches = [i for i in range(120) if i % 10 >= 7]
        for i in range(120):
            unit = cq.ext.get(raw_code(cq, i))
            assert unit is not None and unit.msg_store_time > fd.born_time
            assert unit.filter_bit_map == (bytes(hit) if i in matches else bytes(len(hit))), i
        f = CountingFilter(manager, "a >= 7")
        assert pull(s, message_filter=f) == matches
        assert f.commit_log_reads == len(matches)  # entries whose map misses are never read


def test_a_message_older_than_its_filter_is_matched_by_the_commit_log(tmp_path: Path) -> None:
    manager = ConsumerFilterManager(str(tmp_path / "consumerFilter.json"), BloomFilter(20, 32))
    with opened(ext_config(tmp_path)) as s:
        assert manager.register("T", "G", "a >= 1000", "SQL92", 1)
        s.calc_bit_map = manager.calc_bit_map
        put(s, 0, a="7")  # its map is computed, without the filter born next
        wait_dispatched(s)
        time.sleep(0.005)
        assert manager.register("T", "G", "a >= 7", "SQL92", 2)  # changed: a new filter, born now
        time.sleep(0.005)
        for i in range(1, 40):
            put(s, i, a=str(i % 10))
        wait_dispatched(s)
        cq = cq_of(s)
        old = cq.ext.get(raw_code(cq, 0))
        assert old is not None and old.filter_bit_map == bytes(14)  # its map alone would skip it
        f = CountingFilter(manager, "a >= 7")
        expected = [0] + [i for i in range(1, 40) if i % 10 >= 7]
        assert pull(s, message_filter=f) == expected
        assert f.commit_log_reads == len(expected)


def test_restarts_keep_units_and_a_crash_cuts_the_extension_at_the_last_kept_entry(tmp_path: Path) -> None:
    cfg = ext_config(tmp_path)
    with opened(cfg) as s:
        recs = [put(s, i, TAGS[i % 3]) for i in range(120)]
        wait_dispatched(s)
        max_address = cq_of(s).ext.get_max_address()
    with opened(cfg) as s:  # a clean stop
        cq = cq_of(s)
        assert cq.ext.get_max_address() == max_address
        for i, r in enumerate(recs):
            assert cq.get_entry(i) == (r.phys, r.size, code_of(TAGS[i % 3])), i
    s = start_store(cfg)
    crash(s)
    for q in s.all_consume_queues():  # crash() leaves the extension's maps open
        q.ext.mapped_file_queue.shutdown()  # type: ignore[union-attr]
    zero_tail(cfg, recs[100])  # a torn record: the CommitLog ends at recs[100].phys
    s = DefaultMessageStore(cfg)
    assert s.load()
    try:
        assert not s.last_exit_ok and s.get_max_phy_offset() == recs[100].phys
        cq = cq_of(s)
        assert cq.get_max_offset_in_queue() == 100
        last = raw_code(cq, 99)
        assert cq.ext.get_max_address() == decorate(undecorate(last) + 20)
        assert ext_files(s) == [f"{k * EXT_FILE:020d}" for k in range(100 // PER_FILE + 1)]
        s.start()
        new = [put(s, 1000 + i, "C") for i in range(60)]  # rolls into a new extension file
        wait_dispatched(s)
        assert [r.queue_offset for r in new] == list(range(100, 160))
        assert undecorate(raw_code(cq, 100)) == undecorate(last) + 20
        for i in range(160):
            rec = recs[i] if i < 100 else new[i - 100]
            assert cq.get_entry(i) == (rec.phys, rec.size, code_of(TAGS[i % 3]) if i < 100 else tags_code("C")), i
        assert pull(s, tags_codes={tags_code("C")}) == list(range(100, 160))
    finally:
        s.shutdown()


def test_retention_deletes_extension_files_wholly_before_the_first_kept_unit(tmp_path: Path) -> None:
    with opened(ext_config(tmp_path)) as s:
        recs = [put(s, i, TAGS[i % 3], size=1000) for i in range(200)]  # 4 CommitLog files
        wait_dispatched(s)
        before = ext_files(s)
        assert len(before) == 4
        mfq = s.commit_log.mapped_file_queue
        for _ in range(6):  # retention's call, one file at a time (a reader may hold one a moment)
            if mfq.get_min_offset() >= 2 * 65536:
                break
            mfq.delete_expired_file_by_time(0, 0, 0, True, 1)
        assert mfq.get_min_offset() == 2 * 65536
        s.clean_consume_queue_service.delete_expired_files()
        first = next(r for r in recs if r.phys >= mfq.get_min_offset())
        assert s.get_min_offset_in_queue("T", 0) == first.queue_offset
        cq = cq_of(s)
        real = undecorate(raw_code(cq, first.queue_offset))
        kept = [n for n in before if int(n) + EXT_FILE >= real]
        assert ext_files(s) == kept and len(kept) < len(before)
        for i in range(first.queue_offset, 200):
            assert cq.get_entry(i) == (recs[i].phys, recs[i].size, code_of(TAGS[i % 3])), i
        assert pull(s, tags_codes={tags_code("B")}) == [i for i in range(first.queue_offset, 200) if i % 3 == 1]


def test_delayed_messages_are_due_by_the_time_in_their_unit(tmp_path: Path) -> None:
    with opened(ext_config(tmp_path)) as s:
        r = s.put_message(MessageExtBrokerInner(topic="Real", body=b"later", properties={"DELAY": "1", "TAGS": "X"}))
        assert r.is_ok()
        wait_dispatched(s)
        cq = cq_of(s, 0, RMQ_SYS_SCHEDULE_TOPIC)
        stored = s.look_message_by_offset(r.append_message_result.wrote_offset)  # type: ignore[union-attr]
        assert stored is not None
        assert is_ext_addr(raw_code(cq, 0))
        assert cq.get_entry(0)[2] == stored.store_timestamp + 1000  # type: ignore[index]
        svc = ScheduleMessageService(s)
        assert svc.deliver_due(stored.store_timestamp + 999) == 0
        assert svc.deliver_due(stored.store_timestamp + 1000) == 1
        wait_dispatched(s)
        assert read_queue(s, "Real", 0) == [b"later"]
        assert cq_of(s, 0, "Real").get_entry(0)[2] == tags_code("X")  # type: ignore[index]


def test_a_delayed_entry_whose_unit_is_gone_is_due_by_its_store_time(tmp_path: Path) -> None:
    """4.9's executeOnTimeup recomputes the due time from the record's store time (pickupStoreTimestamp)."""
    cfg = ext_config(tmp_path)
    with opened(cfg) as s:
        r = s.put_message(MessageExtBrokerInner(topic="Real", body=b"later", properties={"DELAY": "3"}))  # 10 s
        wait_dispatched(s)
        stored = s.look_message_by_offset(r.append_message_result.wrote_offset)  # type: ignore[union-attr]
        assert stored is not None
    shutil.rmtree(os.path.join(cfg.store_path_root_dir, "consumequeue_ext", RMQ_SYS_SCHEDULE_TOPIC, "2"))
    with opened(cfg) as s:
        assert ScheduleMessageService(s).deliver_due(stored.store_timestamp + 1000) == 0


def test_entries_whose_unit_is_gone_match_any_filter(tmp_path: Path) -> None:
    cfg = ext_config(tmp_path)
    with opened(cfg) as s:
        for i in range(120):
            put(s, i, TAGS[i % 2], queue_id=0)
            put(s, i, TAGS[i % 2], queue_id=1)
        wait_dispatched(s)
        names = ext_files(s)
    ext_dir = os.path.join(cfg.store_path_root_dir, "consumequeue_ext", "T")
    os.remove(os.path.join(ext_dir, "0", names[-1]))  # queue 0: its last units are gone
    shutil.rmtree(os.path.join(ext_dir, "1"))  # queue 1: all of them
    with opened(cfg) as s:
        gone_from = (len(names) - 1) * PER_FILE  # the first entry whose unit was in that file
        assert pull(s, 0, tags_codes={tags_code("A")}) == [i for i in range(120) if i % 2 == 0 or i >= gone_from]
        assert pull(s, 1, tags_codes={tags_code("A")}) == list(range(120))
        cq = cq_of(s, 1)
        assert cq.get_entry(5)[2] == raw_code(cq, 5)  # type: ignore[index]  # left as stored
        with s.get_message("g", "T", 1, 0, 32, tags_codes={tags_code("A")}) as res:  # type: ignore[union-attr]
            assert [decode_message(b).body for b in res.buffers][1].startswith(b"m00001:")


def test_get_many_reads_what_get_reads_one_by_one(tmp_path: Path) -> None:
    """The pull's bulk read: a run of same-size units (read as one array), and mixed sizes,
    files, plain tagsCodes and addresses with no unit (gathered), all as ``get`` reads them."""
    ext = ConsumeQueueExt("T", 0, str(tmp_path / "ext"), 256)
    same = [ext.put(CqExtUnit(i, 1000 + i, bytes([i]) * 14)) for i in range(5)]
    mixed = [ext.put(CqExtUnit(-i, 2000 + i, None if i % 2 else bytes([0xA0 | i]) * 14)) for i in range(20)]
    assert len({undecorate(a) // 256 for a in mixed}) > 1  # across files
    beyond = decorate(undecorate(ext.get_max_address()) + 512)
    for codes in (same, mixed, [*same, 7, beyond, *mixed[::3]], [same[0], same[2]]):
        got = ext.get_many(np.array(codes, np.int64))
        for i, code in enumerate(codes):
            unit = ext.get(code)
            assert bool(got.found[i]) == (unit is not None), (codes, i)
            if unit is None:
                continue
            assert (int(got.tags_code[i]), int(got.msg_store_time[i])) == (unit.tags_code, unit.msg_store_time)
            assert int(got.bit_map_size[i]) == len(unit.filter_bit_map or b"")
            if got.bit_maps is not None and unit.filter_bit_map is not None:
                assert bytes(got.bit_maps[i]) == unit.filter_bit_map
        sizes = {len(ext.get(c).filter_bit_map or b"") for c in codes if ext.get(c) is not None}  # type: ignore[union-attr]
        assert (got.bit_maps is not None) == (sizes == {14})
    ext.shutdown()


def test_a_topic_cleaned_while_a_pull_reads_its_units_leaves_no_extension_file(tmp_path: Path) -> None:
    # cleanUnusedTopic (DELETE_TOPIC_IN_BROKER) while a pull's filter holds an extension file:
    # the file must not stay behind for the queue made again at offset 0
    with opened(ext_config(tmp_path)) as s:
        for i in range(60):
            put(s, i, "A")
        wait_dispatched(s)
        held = cq_of(s).ext.mapped_file_queue.mapped_files[0]
        sbr = held.select_mapped_buffer(0, 20)
        assert sbr is not None
        try:
            assert [d[:2] for d in s.clean_unused_topic(set())] == [("T", 0)]
            ext_dir = os.path.join(s.config.store_path_root_dir, "consumequeue_ext", "T", "0")
            assert not os.path.exists(ext_dir) or os.listdir(ext_dir) == []
            put(s, 100, "B")
            wait_dispatched(s)
            mf = cq_of(s).ext.mapped_file_queue.mapped_files[0]
            assert mf is not held and bytes(mf.mmap[mf.wrote_position :]) == bytes(EXT_FILE - mf.wrote_position)
        finally:
            sbr.release()
