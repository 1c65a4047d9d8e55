"""Store health: the keys Pumice adds to GET_BROKER_RUNTIME_INFO for the dashboard.

RocketMQ 4.9's table has no such keys (its dashboard shows none of this); the values are
strings, as every value of that table. Times are epoch milliseconds, ``-1`` when unknown.

=================================  ===========================================================
key                                value
=================================  ===========================================================
commitLogFileCount                 CommitLog files (``mappedFileSizeCommitLog`` each)
commitLogFileSize                  bytes of one CommitLog file
commitLogFiles                     ``name:bytes-written;...`` of the newest 20 files
diskMaxUsedSpaceRatio              the clean threshold, percent (``diskMaxUsedSpaceRatio``)
diskSpaceCleanForciblyRatio        the forced-clean threshold, a fraction
diskSpaceWarningLevelRatio         the refuse-writes threshold, a fraction
flushLastCostMillis                the last CommitLog flush that wrote data: its duration
flushMaxCostMillis                 the longest such flush since the broker started
flushLastTimestamp                 when it ended
checkpointPhysicMsgTimestamp       the store checkpoint's three times
checkpointLogicsMsgTimestamp
checkpointIndexMsgTimestamp
lastRecoveryMode                   ``normal`` or ``abnormal`` (the abort file was there)
lastRecoveryTimestamp              when the last recovery ended
lastRecoveryMillis                 how long it took
lastRecoveryCommitLogEnd           the CommitLog end offset it found
lastRecoveryTruncatedBytes         CommitLog bytes the ConsumeQueues indexed past that end
                                   (their entries there were truncated)
lastRecoveryRedispatchFrom         where dispatch was redone from (``-1``: nowhere)
haSlaves                           ``addr behindBytes=N behindSeconds=S;...`` per connected
                                   slave (``S`` -1: the first missing message is unreadable)
=================================  ===========================================================
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pumice.common.message import MessageExt
    from pumice.store.commit_log import CommitLog
    from pumice.store.ha_service import HAService
    from pumice.store.message_store_config import MessageStoreConfig
    from pumice.store.store_checkpoint import StoreCheckpoint

SHOWN_FILES = 20


@dataclass
class RecoveryRecord:
    """What the last recovery did (set by ``DefaultMessageStore.recover``)."""

    mode: str
    ended_ms: int
    millis: int
    commit_log_end: int
    truncated_bytes: int
    redispatch_from: int


class HealthSource(Protocol):
    """What these keys read of DefaultMessageStore (a protocol: the store imports this module)."""

    config: MessageStoreConfig
    commit_log: CommitLog
    store_checkpoint: StoreCheckpoint | None
    ha_service: HAService | None
    last_recovery: RecoveryRecord | None

    def get_max_phy_offset(self) -> int: ...

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None: ...


def store_health_info(store: HealthSource) -> dict[str, object]:
    config = store.config
    mfq = store.commit_log.mapped_file_queue
    files = list(mfq.mapped_files)
    info: dict[str, object] = {
        "commitLogFileCount": len(files),
        "commitLogFileSize": mfq.mapped_file_size,
        "commitLogFiles": ";".join(
            f"{os.path.basename(mf.file_name)}:{mf.wrote_position}" for mf in files[-SHOWN_FILES:]
        ),
        "diskMaxUsedSpaceRatio": config.disk_max_used_space_ratio_clamped,
        "diskSpaceCleanForciblyRatio": config.disk_space_clean_forcibly_ratio,
        "diskSpaceWarningLevelRatio": config.disk_space_warning_level_ratio,
        "flushLastCostMillis": mfq.flush_last_cost_ms,
        "flushMaxCostMillis": mfq.flush_max_cost_ms,
        "flushLastTimestamp": mfq.flush_last_ms,
    }
    cp = store.store_checkpoint
    info["checkpointPhysicMsgTimestamp"] = cp.physic_msg_timestamp if cp is not None else -1
    info["checkpointLogicsMsgTimestamp"] = cp.logics_msg_timestamp if cp is not None else -1
    info["checkpointIndexMsgTimestamp"] = cp.index_msg_timestamp if cp is not None else -1
    rec = store.last_recovery
    if rec is not None:
        info.update({
            "lastRecoveryMode": rec.mode,
            "lastRecoveryTimestamp": rec.ended_ms,
            "lastRecoveryMillis": rec.millis,
            "lastRecoveryCommitLogEnd": rec.commit_log_end,
            "lastRecoveryTruncatedBytes": rec.truncated_bytes,
            "lastRecoveryRedispatchFrom": rec.redispatch_from,
        })  # fmt: skip
    info["haSlaves"] = ";".join(_slave_lines(store))
    return info


def _slave_lines(store: HealthSource) -> list[str]:
    ha = store.ha_service
    if ha is None:
        return []
    master_end = store.get_max_phy_offset()
    now = int(time.time() * 1000)
    out = []
    for c in ha.connections():
        acked = c.slave_ack_offset
        if acked < 0:
            out.append(f"{c.client_addr} behindBytes=-1 behindSeconds=-1")
            continue
        behind = max(master_end - acked, 0)
        seconds = 0.0
        if behind:
            msg = store.look_message_by_offset(acked)
            seconds = max(now - msg.store_timestamp, 0) / 1000 if msg is not None else -1
        out.append(f"{c.client_addr} behindBytes={behind} behindSeconds={seconds:g}")
    return out
