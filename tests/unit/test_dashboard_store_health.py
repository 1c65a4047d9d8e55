"""The store-health keys Pumice adds to GET_BROKER_RUNTIME_INFO (pumice.store.store_health),
read from real stores: files, thresholds, flush cost, checkpoint, recovery, slaves behind."""

from __future__ import annotations

import functools
import time
from pathlib import Path

from pumice.store.put_message_result import PutMessageStatus
from tests.helpers import waiting
from tests.helpers.store import FILE_SIZE, commit_log_path, crash, opened, small_config, start_store
from tests.helpers.waiting import wait_dispatched
from tests.unit.test_ha import master, msg, slave, transferring

wait_until = functools.partial(waiting.wait_until, timeout_s=10.0)


def test_store_health_keys_show_files_thresholds_flush_checkpoint_and_recovery(tmp_path: Path) -> None:
    cfg = small_config(str(tmp_path), disk_max_used_space_ratio=80)
    s = start_store(cfg)
    for i in range(120):  # more than one 64 KiB file
        assert s.put_message(msg(i)).status is PutMessageStatus.PUT_OK
    wait_until(lambda: s.commit_log.mapped_file_queue.flushed_where == s.get_max_phy_offset(), what="flushed")
    info = {k: str(v) for k, v in s.runtime_info().items()}
    assert int(info["commitLogFileCount"]) >= 2
    assert info["commitLogFileSize"] == str(cfg.mapped_file_size_commit_log)
    first = info["commitLogFiles"].split(";")[0]
    assert first == f"{0:020d}:{cfg.mapped_file_size_commit_log}"  # a full first file
    assert info["diskMaxUsedSpaceRatio"] == "80"
    assert info["diskSpaceWarningLevelRatio"] == "0.9"
    assert info["diskSpaceCleanForciblyRatio"] == "0.85"
    assert int(info["flushLastTimestamp"]) > time.time() * 1000 - 60_000
    assert int(info["flushMaxCostMillis"]) >= int(info["flushLastCostMillis"]) >= 0
    assert int(info["checkpointPhysicMsgTimestamp"]) > 0
    assert info["lastRecoveryMode"] == "normal"
    assert info["lastRecoveryCommitLogEnd"] == "0"
    assert info["haSlaves"] == ""
    end = s.get_max_phy_offset()
    crash(s)
    with opened(cfg) as again:
        after = again.runtime_info()
        assert after["lastRecoveryMode"] == "abnormal"
        assert after["lastRecoveryCommitLogEnd"] == end
        assert after["lastRecoveryTruncatedBytes"] == 0
        assert int(str(after["lastRecoveryTimestamp"])) > 0


def test_last_recovery_says_how_many_bytes_the_consume_queues_lost(tmp_path: Path) -> None:
    cfg = small_config(str(tmp_path))
    s = start_store(cfg)
    results = [s.put_message(msg(i)) for i in range(10)]
    wait_dispatched(s)
    last = results[-1].append_message_result
    assert last is not None
    crash(s)
    # the last record's bytes never reached the disk: recovery ends the CommitLog before it, and
    # the ConsumeQueue entry that pointed at it is truncated
    with open(commit_log_path(cfg, last.wrote_offset), "r+b") as f:
        f.seek(last.wrote_offset % FILE_SIZE)
        f.write(bytes(last.wrote_bytes))
    with opened(cfg) as again:
        info = again.runtime_info()
        assert info["lastRecoveryMode"] == "abnormal"
        assert info["lastRecoveryCommitLogEnd"] == last.wrote_offset
        assert info["lastRecoveryTruncatedBytes"] == last.wrote_bytes


def test_ha_slaves_shows_each_slave_behind_in_bytes_and_seconds(tmp_path: Path) -> None:
    with master(tmp_path / "m") as m, slave(tmp_path / "s", m) as s:
        transferring(m)
        for i in range(20):
            m.put_message(msg(i))
        wait_until(lambda: s.get_max_phy_offset() == m.get_max_phy_offset(), what="slave caught up")
        wait_until(lambda: "behindBytes=0 " in str(m.runtime_info()["haSlaves"]), what="ack reported")
        line = str(m.runtime_info()["haSlaves"])
        assert line.count("behindBytes=") == 1 and line.endswith("behindSeconds=0")
        assert line.startswith("127.0.0.1:")
