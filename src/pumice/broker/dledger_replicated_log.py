"""DLedgerReplicatedLog: a DLedgerServer and its DLedgerMmapFileStore as the store's
``ReplicatedLog`` (what ``DLedgerCommitLog`` needs), built from the broker's keys as 4.9's
``DLedgerCommitLog`` constructor builds its ``DLedgerConfig``:

==========================  =========================================================
DLedgerConfig               from
==========================  =========================================================
group, selfId, peers        dLegerGroup, dLegerSelfId, dLegerPeers
storeBaseDir                storePathRootDir (files under ``dledger-<selfId>/``)
dataStorePath               storePathDLedgerCommitLog (else ``<base>/dledger-<id>/data``)
mappedFileSizeForEntryData  mappedFileSizeCommitLog
deleteWhen                  deleteWhen
fileReservedHours           fileReservedTime + 1
preferredLeaderId           preferredLeaderId
enableBatchPush             enableBatchPush
diskSpaceRatioToCheckExpired  diskMaxUsedSpaceRatio / 100
enableDiskForceClean        cleanFileForciblyEnable
the time-outs               Pumice's dLedger* keys (heartBeatTimeIntervalMs, maxHeartBeatLeak,
                            min/maxVoteIntervalMs, maxWaitAckTimeMs, maxPushTimeOutMs,
                            min/maxTakeLeadershipVoteIntervalMs), DLedger's defaults
==========================  =========================================================

The broker controller builds it; the store only sees the protocol. The peers' port listens on
``listenHost`` (DLedger: all interfaces, Pumice's default too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, cast

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_mmap_file_store import DLedgerMmapFileStore
from pumice.dledger.dledger_response_code import DLedgerError
from pumice.dledger.dledger_server import DLedgerServer
from pumice.store.mapped_file_queue import MappedFileQueue
from pumice.store.message_store_config import MessageStoreConfig

log = logging.getLogger(__name__)


def dledger_config_of(store: MessageStoreConfig) -> DLedgerConfig:
    return DLedgerConfig(
        group=store.d_leger_group or "",
        self_id=store.d_leger_self_id or "",
        peers=store.d_leger_peers or "",
        store_base_dir=store.store_path_root_dir,
        data_store_path=store.store_path_d_ledger_commit_log,
        mapped_file_size_for_entry_data=store.mapped_file_size_commit_log,
        delete_when=store.delete_when,
        file_reserved_hours=store.file_reserved_time + 1,
        preferred_leader_id=store.preferred_leader_id,
        enable_batch_push=store.enable_batch_push,
        disk_space_ratio_to_check_expired=store.disk_max_used_space_ratio / 100,
        enable_disk_force_clean=store.clean_file_forcibly_enable,
        heart_beat_time_interval_ms=store.d_ledger_heart_beat_time_interval_ms,
        max_heart_beat_leak=store.d_ledger_max_heart_beat_leak,
        min_vote_interval_ms=store.d_ledger_min_vote_interval_ms,
        max_vote_interval_ms=store.d_ledger_max_vote_interval_ms,
        max_wait_ack_time_ms=store.d_ledger_max_wait_ack_time_ms,
        max_push_time_out_ms=store.d_ledger_max_push_time_out_ms,
        min_take_leadership_vote_interval_ms=store.d_ledger_min_take_leadership_vote_interval_ms,
        max_take_leadership_vote_interval_ms=store.d_ledger_max_take_leadership_vote_interval_ms,
    )


class DLedgerReplicatedLog:
    def __init__(self, config: DLedgerConfig, host: str = "0.0.0.0") -> None:
        self.config = config
        self.file_store = DLedgerMmapFileStore(config)
        self.server = DLedgerServer(config, self.file_store, host=host, accept_client_appends=False)
        self.data_file_queue: MappedFileQueue = self.file_store.data_file_queue

    @classmethod
    def from_store_config(cls, store: MessageStoreConfig, host: str = "0.0.0.0") -> DLedgerReplicatedLog:
        return cls(dledger_config_of(store), host)

    @property
    def committed_pos(self) -> int:
        return self.file_store.committed_pos

    @property
    def committed_index(self) -> int:
        return self.file_store.committed_index

    @property
    def ledger_begin_index(self) -> int:
        return self.file_store.ledger_begin_index

    @property
    def ledger_end_index(self) -> int:
        return self.file_store.ledger_end_index

    def is_leader(self) -> bool:
        return self.server.is_leader()

    def append_as_leader(
        self, bodies: Sequence[bytearray], hook: Callable[[DLedgerEntry, bytearray], None]
    ) -> tuple[list[DLedgerEntry], Future[int]]:
        """DLedgerServer's local append; a refusal raises DLedgerError (its ``code``)."""
        entries, fut = self.server.append_as_leader(cast(list[bytes], list(bodies)), hook)  # it copies each
        return entries, fut  # type: ignore[return-value]  # DLedgerResponseCode is an int

    def load(self) -> bool:
        try:
            self.file_store.load_and_recover()
        except (DLedgerError, OSError) as e:
            log.error("cannot load the DLedger store under %s: %s", self.config.default_path, e)
            return False
        return True

    def start_data_at(self, offset: int) -> None:
        self.file_store.start_data_at(offset)

    def start(self) -> None:
        self.file_store.start()
        self.server.start()

    def shutdown(self) -> None:
        self.server.shutdown()

    def close(self) -> None:
        self.file_store.shutdown()

    def add_role_change_handler(self, handler: Callable[[int, str], None]) -> None:
        """``handler(term, role name)`` on every role change, on the DLedger thread."""
        self.server.add_role_change_listener(lambda term, role: handler(term, role.name))

    def status(self) -> dict[str, Any]:
        return self.server.status()
