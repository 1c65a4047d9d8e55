"""The checkpoints claim only what is on disk, and recovery rebuilds what a power cut took
from the ConsumeQueues even where ``checkpoint``'s time points say otherwise (issue 30.1).

A power cut is played in process: the store is left as a killed process leaves it, then
every ConsumeQueue entry of a record past the last thorough flush is zeroed (the pages that
never reached the disk) and ``dispatchcheckpoint`` is put back to that flush. The process
test with a real power cut below the file system is tests/faults/test_power_cut.py.
"""

from __future__ import annotations

import os
import struct
import time

import pumice.store.commit_log as commit_log_module
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from pumice.store.dispatch_checkpoint import DispatchCheckpoint
from tests.helpers.store import FILE_SIZE, crash, opened, read_queue, small_config, start_store
from tests.helpers.waiting import wait_dispatched, wait_until

CQ_UNIT = 20
_CHECKPOINT = struct.Struct(">qqq")


def read_checkpoint_file(path: str) -> tuple[int, int, int]:
    with open(path, "rb") as f:
        return _CHECKPOINT.unpack(f.read(24))


def no_thorough_flush(s: DefaultMessageStore) -> None:
    s.flush_consume_queue_service.last_flush_timestamp = int(time.time() * 1000)


def thorough_flush(s: DefaultMessageStore) -> int:
    """One thorough ConsumeQueue flush now; the CommitLog offset it covered."""
    wait_dispatched(s)
    s.flush_consume_queue_service.last_flush_timestamp = 0
    s.flush_consume_queue_service.do_flush(1)
    no_thorough_flush(s)
    assert s.dispatch_checkpoint is not None
    return s.dispatch_checkpoint.consume_queue_offset


def put_bodies(s: DefaultMessageStore, n: int, queues: int, prefix: str, size: int = 900) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {q: [] for q in range(queues)}
    for i in range(n):
        body = (b"%s%05d:" % (prefix.encode(), i) * size)[:size]
        q = i % queues
        r = s.put_message(MessageExtBrokerInner(topic="T", body=body, queue_id=q, properties={"KEYS": f"{prefix}{i}"}))
        assert r.is_ok(), r
        out[q].append(body)
    return out


def lose_unflushed_entries(s: DefaultMessageStore, durable_below: int) -> int:
    """Zero every ConsumeQueue entry of a record at or past ``durable_below`` but queue 0's:
    the pages a power cut kept from the disk (queue 0 had enough new pages to be flushed on
    its own). Call after ``crash``; returns how many were zeroed."""
    zeroed = 0
    root = s.config.consume_queue_dir
    for topic in os.listdir(root):
        for qid in os.listdir(os.path.join(root, topic)):
            if qid == "0":
                continue
            qdir = os.path.join(root, topic, qid)
            for name in os.listdir(qdir):
                path = os.path.join(qdir, name)
                with open(path, "r+b") as f:
                    data = bytearray(f.read())
                    for pos in range(0, len(data), CQ_UNIT):
                        phy, size, _ = struct.unpack_from(">qiq", data, pos)
                        if size > 0 and phy >= durable_below:
                            data[pos : pos + CQ_UNIT] = bytes(CQ_UNIT)
                            zeroed += 1
                    f.seek(0)
                    f.write(data)
    return zeroed


def power_cut(s: DefaultMessageStore, durable_below: int, **checkpoint: int) -> None:
    crash(s, **checkpoint)  # its last ConsumeQueue flush moved dispatchcheckpoint: put it back
    dcp = DispatchCheckpoint(s.config.dispatch_checkpoint_path)
    dcp.update(consume_queue_offset=durable_below, index_offset=dcp.index_offset)
    dcp.close()
    assert lose_unflushed_entries(s, durable_below) > 0


def test_an_index_roll_does_not_write_a_logics_time_the_consume_queues_do_not_have(tmp_path) -> None:
    """The cause: an index file's roll-over flushes the checkpoint file; the logics time it
    writes must be one a ConsumeQueue flush covered (none here), not dispatch's."""
    cfg = small_config(str(tmp_path / "s"), max_index_num=16, flush_consume_queue_thorough_interval=3_600_000)
    with opened(cfg) as s:
        no_thorough_flush(s)
        put_bodies(s, 40, 2, "a", size=100)  # 40 keys + 40 unique keys: 16-entry files roll
        wait_dispatched(s)
        assert s.store_checkpoint is not None
        wait_until(lambda: read_checkpoint_file(cfg.checkpoint_path)[2] > 0, what="an index roll's flush")
        assert s.store_checkpoint.dispatched_logics_timestamp > 0
        logics = read_checkpoint_file(cfg.checkpoint_path)[1]
        assert logics == 0, "logicsMsgTimestamp claims ConsumeQueue entries that were never flushed"
        thorough_flush(s)
        assert read_checkpoint_file(cfg.checkpoint_path)[1] == s.store_checkpoint.dispatched_logics_timestamp


def test_a_thorough_flush_reaches_every_file_of_a_rolled_queue(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"), flush_consume_queue_thorough_interval=3_600_000)
    with opened(cfg) as s:
        no_thorough_flush(s)
        put_bodies(s, 150, 1, "r", size=60)  # 64-entry ConsumeQueue files: three of them
        covered = thorough_flush(s)
        cq = s.get_consume_queue("T", 0)
        assert cq is not None and len(cq.mapped_file_queue.mapped_files) == 3
        assert cq.mapped_file_queue.flushed_where == 150 * CQ_UNIT
        assert covered == s.get_max_phy_offset()


def test_a_power_cut_after_the_checkpoint_ran_ahead_loses_no_entry(tmp_path) -> None:
    """The checkpoint says everything was durable (as 4.9's could); the ConsumeQueues lost
    every entry past the last thorough flush, across CommitLog files: all are rebuilt. (No
    index here: its own pruning would redo dispatch early enough by itself.)"""
    cfg = small_config(str(tmp_path / "s"), flush_consume_queue_thorough_interval=3_600_000, message_index_enable=False)
    s = start_store(cfg)
    no_thorough_flush(s)
    bodies = put_bodies(s, 60, 3, "a")
    durable = thorough_flush(s)
    later = put_bodies(s, 150, 3, "b")  # about 2 CommitLog files more
    assert s.get_max_phy_offset() - durable > FILE_SIZE
    wait_dispatched(s)
    power_cut(s, durable, physic_msg_timestamp=2**62, logics_msg_timestamp=2**62, index_msg_timestamp=2**62)
    with opened(small_config(cfg.store_path_root_dir, message_index_enable=False)) as again:
        for q in range(3):
            assert read_queue(again, "T", q) == bodies[q] + later[q]
            assert again.get_max_offset_in_queue("T", q) == len(bodies[q]) + len(later[q])


def test_a_clock_stepped_back_does_not_hide_lost_entries_from_recovery(tmp_path, monkeypatch) -> None:
    """The checkpoint is right, but store times went back an hour after it: the newest
    CommitLog file whose first record is older than the checkpoint starts after records
    whose entries were lost. Recovery redoes dispatch from dispatchcheckpoint's offset."""
    cfg = small_config(str(tmp_path / "s"), flush_consume_queue_thorough_interval=3_600_000, message_index_enable=False)
    s = start_store(cfg)
    no_thorough_flush(s)
    bodies = put_bodies(s, 30, 2, "a")
    durable = thorough_flush(s)
    assert s.store_checkpoint is not None
    checkpoint = {
        "physic_msg_timestamp": s.store_checkpoint.dispatched_logics_timestamp,
        "logics_msg_timestamp": s.store_checkpoint.dispatched_logics_timestamp,
        "index_msg_timestamp": s.store_checkpoint.dispatched_logics_timestamp,
    }
    time.sleep(0.01)
    middle = put_bodies(s, 60, 2, "b")  # after the flush, before the step
    real_now = commit_log_module._now_ms
    monkeypatch.setattr(commit_log_module, "_now_ms", lambda: real_now() - 3_600_000)
    after = put_bodies(s, 150, 2, "c")  # an hour back: new files start "before" the checkpoint
    wait_dispatched(s)
    power_cut(s, durable, **checkpoint)
    monkeypatch.setattr(commit_log_module, "_now_ms", real_now)
    with opened(small_config(cfg.store_path_root_dir, message_index_enable=False)) as again:
        for q in range(2):
            assert read_queue(again, "T", q) == bodies[q] + middle[q] + after[q]


def test_a_torn_or_missing_dispatch_checkpoint_falls_back_to_the_checkpoint(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        put_bodies(s, 10, 1, "a", size=100)
    with open(cfg.dispatch_checkpoint_path, "r+b") as f:
        f.seek(12)
        f.write(b"\xff")  # the CRC no longer matches
    dcp = DispatchCheckpoint(cfg.dispatch_checkpoint_path)
    assert not dcp.known
    dcp.close()
    os.unlink(cfg.dispatch_checkpoint_path)  # a store RocketMQ wrote has none
    with opened(small_config(cfg.store_path_root_dir)) as again:
        assert read_queue(again, "T", 0)[-1].startswith(b"a00009:")
        assert again.dispatch_checkpoint is not None and not again.dispatch_checkpoint.known
        assert thorough_flush(again) == again.get_max_phy_offset()


def test_a_new_store_starts_with_a_known_dispatch_checkpoint(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        assert s.dispatch_checkpoint is not None and s.dispatch_checkpoint.known
        assert (s.dispatch_checkpoint.consume_queue_offset, s.dispatch_checkpoint.index_offset) == (0, 0)
        put_bodies(s, 5, 1, "a", size=100)
        end = s.get_max_phy_offset()
    again = DispatchCheckpoint(cfg.dispatch_checkpoint_path)
    try:  # a clean stop flushed everything
        assert again.consume_queue_offset == end
        assert 0 < again.index_offset < end
    finally:
        again.close()
