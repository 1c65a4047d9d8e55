"""DLedgerConfig: one DLedger node's settings, with dledger 0.3.1.2's defaults
(``DLedgerConfig.java``; RocketMQ 4.9 changes none of the time-outs, spec DLEDGER.md §6).

RocketMQ's broker fills ``group``, ``self_id``, ``peers``, ``store_base_dir``,
``data_store_path``, ``mapped_file_size_for_entry_data``, ``preferred_leader_id``,
``enable_batch_push``, ``file_reserved_hours`` and ``delete_when`` from broker.conf
(``DLedgerCommitLog``'s constructor); the rest stays at these defaults.

``peers`` is ``id-host:port;id-host:port``: the id is the text before the first ``-``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

INDEX_UNIT_SIZE = 32


@dataclass
class DLedgerConfig:
    group: str = "default"
    self_id: str = "n0"
    peers: str = "n0-localhost:20911"
    store_base_dir: str = os.path.join(os.sep, "tmp", "dledgerstore")
    data_store_path: str | None = None
    max_pending_requests_num: int = 10_000
    max_wait_ack_time_ms: int = 2500
    max_push_time_out_ms: int = 1000
    enable_leader_elector: bool = True
    heart_beat_time_interval_ms: int = 2000
    max_heart_beat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    file_reserved_hours: int = 72
    delete_when: str = "04"
    disk_space_ratio_to_check_expired: float = 0.70
    disk_space_ratio_to_force_clean: float = 0.85
    enable_disk_force_clean: bool = True
    flush_file_interval_ms: int = 10
    check_point_interval_ms: int = 3000
    mapped_file_size_for_entry_data: int = 1024 * 1024 * 1024
    mapped_file_size_for_entry_index: int = INDEX_UNIT_SIZE * 5 * 1024 * 1024
    enable_push_to_follower: bool = True
    preferred_leader_id: str | None = None
    max_leadership_transfer_wait_index: int = 1000
    min_take_leadership_vote_interval_ms: int = 30
    max_take_leadership_vote_interval_ms: int = 100
    enable_batch_push: bool = False
    max_batch_push_size: int = 4 * 1024
    leadership_transfer_wait_timeout_ms: int = 1000
    peer_push_throttle_point: int = 300 * 1024 * 1024
    peer_push_quota: int = 20 * 1024 * 1024

    @property
    def default_path(self) -> str:
        return os.path.join(self.store_base_dir, f"dledger-{self.self_id}")

    @property
    def data_path(self) -> str:
        return self.data_store_path or os.path.join(self.default_path, "data")

    @property
    def index_path(self) -> str:
        return os.path.join(self.default_path, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.default_path, "checkpoint")

    @property
    def term_path(self) -> str:
        return os.path.join(self.default_path, "currterm")

    def peer_map(self) -> dict[str, str]:
        """{id: host:port}, in the order given; ValueError for an entry without ``-`` or a
        self_id not among them (DLedger refuses to start then)."""
        peers: dict[str, str] = {}
        for item in self.peers.split(";"):
            item = item.strip()
            if not item:
                continue
            node_id, sep, addr = item.partition("-")
            if not sep or not node_id or not addr:
                raise ValueError(f"dLegerPeers entry {item!r} is not id-host:port")
            peers[node_id] = addr
        if self.self_id not in peers:
            raise ValueError(f"dLegerSelfId {self.self_id!r} is not among dLegerPeers {self.peers!r}")
        return peers

    @property
    def self_address(self) -> str:
        return self.peer_map()[self.self_id]
