"""MessageStoreConfig: the store's settings, with RocketMQ's names (snake_case) and defaults."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

from pumice.config import ignored, is_host_port

_DERIVED_PATH = "RocketMQ 4.x and Pumice derive it from storePathRootDir"
_SCHEDULE_SYNC = "due delayed messages are put one after another, as RocketMQ does with enableScheduleAsyncDeliver off"
_TIMER_ONE_THREAD = "one thread enqueues and one delivers timer messages (docs/v5/timer.md)"
_TIMER_METRICS = "timermetrics is kept by each enqueue and delivery, not revised hourly (5.3.3's check off)"
_NO_WARMING = "a warmed file is preallocated whole and pre-faulted ahead of the writer, not flushed as it is warmed"


class BrokerRole(Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class FlushDiskType(Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str) -> list[int]:
    """``"1s 5s 1m"`` → delays in ms, level 1 first."""
    out = []
    for tok in spec.split():
        unit = tok[-1]
        if unit not in _UNIT_MS or not tok[:-1].isdigit():
            raise ValueError(f"bad messageDelayLevel entry {tok!r}")
        out.append(int(tok[:-1]) * _UNIT_MS[unit])
    return out


# a stored message must fit one pull response: clients decode frames of up to 16 MiB
MAX_MESSAGE_SIZE_LIMIT = 16 * 1024 * 1024 - 64 * 1024


@dataclass
class MessageStoreConfig:
    # broker.conf keys whose RocketMQ spelling differs from the field name
    CONF_ALIASES: ClassVar[dict[str, str]] = {
        "mapedFileSizeCommitLog": "mapped_file_size_commit_log",
        "mappedFileSizeCommitLog": "mapped_file_size_commit_log",
        "mapedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
        "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
        "destroyMapedFileIntervalForcibly": "destroy_mapped_file_interval_forcibly",
        "flushCommitLogTimedWaitEnable": "flush_commit_log_timed",
        "flushCommitTimedWaitEnable": "flush_commit_log_timed",
        "flushPhysicQueueLeastPages": "flush_commit_log_least_pages",
        "flushPhysicQueueThoroughInterval": "flush_commit_log_thorough_interval",
        "checkCRCOnRecover": "check_crc_on_recover",
        "osPageCacheBusyTimeOutMills": "os_page_cache_busy_timeout_mills",
        "warmMapedFileEnable": "preallocate_commit_log",
        "preallocateCommitLog": "preallocate_commit_log",  # Pumice's own earlier name
    }
    # spellings Pumice reads but RocketMQ 4.9 ignores (its setters are setMapped...): a warning
    LEGACY_KEYS: ClassVar[dict[str, str]] = {
        "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
        "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue",
    }
    # the field's key as RocketMQ 4.9.8 spells it (-p, GET_BROKER_CONFIG), where snake_to_camel differs
    CONF_NAMES: ClassVar[dict[str, str]] = {
        "destroy_mapped_file_interval_forcibly": "destroyMapedFileIntervalForcibly",
        "check_crc_on_recover": "checkCRCOnRecover",
        "os_page_cache_busy_timeout_mills": "osPageCacheBusyTimeOutMills",
        "preallocate_commit_log": "warmMapedFileEnable",
    }
    # Java long fields; every other int is a Java int
    LONG_FIELDS: ClassVar[frozenset[str]] = frozenset({"os_page_cache_busy_timeout_mills", "sync_flush_timeout"})
    IGNORED_KEYS: ClassVar[dict[str, tuple[frozenset[str] | None, str]]] = {
        "storePathConsumeQueue": ignored(_DERIVED_PATH),
        "storePathIndex": ignored(_DERIVED_PATH),
        "storeCheckpoint": ignored(_DERIVED_PATH),
        "abortFile": ignored(_DERIVED_PATH),
        # the field's name, as `mqbroker -p` prints it; RocketMQ's setter reads enableBatchPush only
        "isEnableBatchPush": ignored("RocketMQ 4.9 sets nothing from this spelling either: write enableBatchPush"),
        "useReentrantLockWhenPutMessage": ignored("appends take a lock of their own"),
        "duplicationEnable": ignored("a slave is never switched to master here"),
        "diskFallRecorded": ignored("pull statistics are not split by disk and memory"),
        "readOnlyCommitLogStorePaths": ignored("read-only CommitLog directories are not supported", ""),
        "enableLmq": ignored("light message queues (LMQ) are not supported", "false"),
        "enableMultiDispatch": ignored("multi-dispatch (INNER_MULTI_DISPATCH, for LMQ) is not supported", "false"),
        "maxLmqConsumeQueueNum": ignored("light message queues (LMQ) are not supported"),
        "enableScheduleAsyncDeliver": ignored(_SCHEDULE_SYNC),
        "scheduleAsyncDeliverMaxPendingLimit": ignored(_SCHEDULE_SYNC),
        "scheduleAsyncDeliverMaxResendNum2Blocked": ignored(_SCHEDULE_SYNC),
        "enableScheduleMessageStats": ignored("delayed-message statistics are not kept"),
        "flushDelayOffsetInterval": ignored("delayOffset.json is written every 10 s, RocketMQ's default, and at stop"),
        "flushLeastPagesWhenWarmMapedFile": ignored(_NO_WARMING),
        "fastFailIfNoBufferInStorePool": ignored(
            "with no free pool buffer a new CommitLog file is written directly, as RocketMQ does with it off"
        ),
        "slaveTimeout": ignored("a SYNC_MASTER send waits for its slave up to syncFlushTimeout"),
        "defaultQueryMaxNum": ignored("a query returns up to the maxNum it asks for, at most 64"),
        "maxMsgsNumBatch": ignored("a query returns up to the maxNum it asks for, at most 64 (RocketMQ's default)"),
        "debugLockEnable": ignored("a RocketMQ lock-debugging switch"),
        "putMsgIndexHightWater": ignored("RocketMQ 4.9 does not use it either"),
        # RocketMQ 5.3.3's timer keys with no use here (store/timer/)
        "timerEnableDisruptor": ignored("the timer's hand-offs are in-process lists, not Disruptor queues", "false"),
        # only at 5.3.3's default (or the value that says what Pumice does): another value asks
        # for what is not built, and is refused at start naming the key
        "timerGetMessageThreadNum": ignored(_TIMER_ONE_THREAD, "3"),
        "timerPutMessageThreadNum": ignored(_TIMER_ONE_THREAD, "3"),
        "timerWarmEnable": ignored(
            "5.3.3's warm-up of due messages is not built (5.3.3 does not run it either)", "false"
        ),
        "timerInterceptDelayLevel": ignored("the DELAY levels stay with ScheduleMessageService, as in 5.3.3", "false"),
        "timerSkipUnknownError": ignored(
            "a timer message that cannot be read or stored is logged and skipped (5.3.3's true)", "false", "true"
        ),
        "timerEnableRetryUntilSuccess": ignored(
            "a due message the store refuses for a while is retried until stored (5.3.3's true)", "false", "true"
        ),
        "timerEnableCheckMetrics": ignored(_TIMER_METRICS, "true", "false"),
        "timerCheckMetricsWhen": ignored(_TIMER_METRICS, "05"),
        "timerMetricSmallThreshold": ignored(_TIMER_METRICS, "1000000"),
        "timerProgressLogIntervalMs": ignored("the timer logs no periodic progress line", "10000"),
    }

    store_path_root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    store_path_commit_log: str | None = None  # default: <root>/commitlog
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    # ConsumeQueueExt (consume_queue_ext.py): units with the SQL92 filter bit maps
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 48 * 1024 * 1024
    bit_map_length_consume_queue_ext: int = 64  # bits; the broker sets its bloom filter's m
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    max_message_size: int = 1024 * 1024 * 4
    message_index_enable: bool = True
    message_index_safe: bool = False
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    os_page_cache_busy_timeout_mills: int = 1000
    check_crc_on_recover: bool = True
    max_transfer_bytes_on_message_in_memory: int = 1024 * 256
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 1024 * 64
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    offset_check_in_slave: bool = False
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    destroy_mapped_file_interval_forcibly: int = 120_000
    # timer messages (RocketMQ 5's RIP-43, store/timer/): RocketMQ 5.3.3's keys and defaults
    timer_wheel_enable: bool = True  # off: a send with a delivery time is refused SYSTEM_ERROR
    timer_precision_ms: int = 1000  # the wheel's slot: taken down to 100, 200, 500 or 1000, as 5.3.3's setter
    timer_max_delay_sec: int = 3600 * 24 * 3  # a later delivery time is refused MESSAGE_ILLEGAL
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    timer_roll_window_slot: int = 3600 * 24 * 2  # slots: a later message is held at the window's end, then again
    timer_flush_interval_ms: int = 1000  # timerlog, timerwheel, timercheck and timermetrics written this often
    timer_congest_num_each_slot: int = 2**31 - 1  # a slot holding more refuses sends SYSTEM_ERROR (flow control)
    timer_stop_enqueue: bool = False  # operators' switch: timer messages stay in rmq_sys_wheel_timer
    timer_stop_dequeue: bool = False  # operators' switch: nothing due is delivered
    # flush (issue 3): CommitLog
    sync_flush_timeout: int = 5000
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_commit_log_timed: bool = True  # since 4.9.1 (false before): the flush thread sleeps, puts do not wake it
    # transient store pool: appends go to off-map buffers, committed to the file by a thread
    transient_store_pool_enable: bool = False  # used only with ASYNC_FLUSH on a master, as in RocketMQ
    transient_store_pool_size: int = 5
    commit_interval_commit_log: int = 200
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    # flush: ConsumeQueue (and the checkpoint)
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    # retention and disk protection
    file_reserved_time: int = 72  # hours
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    redelete_hanged_file_interval: int = 120_000
    clean_resource_interval: int = 10_000
    # Pumice's own: the first clean-up pass runs this many ms after start (RocketMQ fixes it at
    # 60 s); tests and small deployments lower it, the default keeps RocketMQ's behaviour
    clean_resource_initial_delay: int = 60_000
    clean_file_forcibly_enable: bool = True
    disk_space_warning_level_ratio: float = 0.90
    disk_space_clean_forcibly_ratio: float = 0.85
    # warmMapedFileEnable (RocketMQ's name) or preallocateCommitLog: each new CommitLog file
    # gets all its blocks when made; off (RocketMQ's default), files are sparse and get blocks a
    # chunk ahead of the writer (MappedFile.reserve), so the disk holds what was written
    preallocate_commit_log: bool = False
    # Pumice's own: fault CommitLog files in ahead of the writer (see AllocateMappedFileService);
    # on with warmMapedFileEnable too. Off by default: it bought no append throughput in
    # bench.store_bench (BENCHMARKS.md) and held each 1 GiB file's pages as the broker's RSS
    prefault_commit_log: bool = False
    # master/slave replication (HAService); the broker sets haListenPort to listenPort + 1
    ha_listen_port: int = 10912
    ha_master_address: str | None = None  # a slave's master HA address; else learned from the name server
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    # Pumice's own: a slave whose CommitLog is ahead of its master's (haDiverged.json, written
    # when found) moves the extra bytes to storePathRootDir/diverged-<time>/ at its next start
    # and replicates from the master's end; off, it keeps them and does not replicate
    ha_slave_set_aside_diverged_tail: bool = False
    # Pumice's own: a slave of a Pumice master with aclEnable=true signs its HA connection with
    # this admin account of the master's ACL files (set it only for a Pumice master); its secret
    # key is read at start from the slave's own $ROCKETMQ_HOME/conf/plain_acl.yml or
    # conf/acl/*.yml, never from broker.conf, which GET_BROKER_CONFIG hands out
    ha_access_key: str = ""
    # Pumice's own, a master with aclEnable=true: addresses (the ACL's patterns, ';' between
    # them) whose HA connections need no auth frame (a RocketMQ slave cannot sign)
    ha_white_remote_addresses: str = ""
    # Pumice's own, a master with aclEnable=true: admit HA connections without an auth frame
    # from anywhere (then anyone reaching the HA port reads the CommitLog, as in RocketMQ)
    ha_allow_unauthenticated: bool = False
    # DLedger mode (docs/DLEDGER.md): the CommitLog is a DLedgerCommitLog in a Raft group
    enable_d_leger_commit_log: bool = False  # DLedger mode: a Raft group of brokers (docs/DLEDGER.md)
    d_leger_group: str | None = None  # the group's name (the distribution uses the brokerName)
    d_leger_peers: str | None = None  # the group: n0-host:port;n1-host:port;...
    d_leger_self_id: str | None = None  # this node's id among the peers (a letter and digits)
    store_path_d_ledger_commit_log: str | None = None  # default: <root>/dledger-<selfId>/data
    preferred_leader_id: str | None = None  # leadership goes to this node when it can take it
    enable_batch_push: bool = False  # DLedger's batched PUSH
    # Pumice's own: DLedger's time-outs (4.9 cannot set them; these are dledger 0.3.1.2's defaults)
    d_ledger_heart_beat_time_interval_ms: int = 2000  # the leader's heartbeat interval
    d_ledger_max_heart_beat_leak: int = 3  # heartbeats a follower may miss before it stands
    d_ledger_min_vote_interval_ms: int = 300  # a candidate's next vote, at random between these two
    d_ledger_max_vote_interval_ms: int = 1000
    d_ledger_max_wait_ack_time_ms: int = 2500  # a send waits this long for a quorum (then SYSTEM_ERROR)
    d_ledger_max_push_time_out_ms: int = 1000  # an entry a follower has not acknowledged is pushed again
    d_ledger_min_take_leadership_vote_interval_ms: int = 30  # votes of a preferred leader taking over
    d_ledger_max_take_leadership_vote_interval_ms: int = 100

    @property
    def dledger_peer_map(self) -> dict[str, str]:
        """``dLegerPeers`` as DLedger splits it: on ``;``, id before the first ``-``, address after."""
        peers: dict[str, str] = {}
        for item in (self.d_leger_peers or "").split(";"):
            if item:
                node_id, _, addr = item.partition("-")
                peers[node_id] = addr
        return peers

    @property
    def dledger_node_number(self) -> int:
        """The number in ``dLegerSelfId`` (n2 → 2); a follower registers as slave number + 1."""
        return int((self.d_leger_self_id or "")[1:])

    @property
    def dledger_data_dir(self) -> str:
        return self.store_path_d_ledger_commit_log or os.path.join(
            self.store_path_root_dir, f"dledger-{self.d_leger_self_id}", "data"
        )

    @property
    def has_fixed_ha_master_address(self) -> bool:
        """``haMasterAddress`` is set (RocketMQ takes it from 6 characters on): a slave then
        keeps it rather than the one the name server gives."""
        return len(self.ha_master_address or "") >= 6

    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def consume_queue_ext_dir(self) -> str | None:
        """Where ConsumeQueueExt files live, when the extension is on."""
        return os.path.join(self.store_path_root_dir, "consumequeue_ext") if self.enable_consume_queue_ext else None

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def dispatch_checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "dispatchcheckpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "lock")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "config")

    @property
    def transient_store_pool_in_effect(self) -> bool:
        """Whether appends are staged in pool buffers: ``transientStorePoolEnable``, ASYNC_FLUSH
        and not a slave, as RocketMQ 4.9's ``isTransientStorePoolEnable``. Under SYNC_FLUSH the
        group commit writes the files itself; a slave writes what its master sent."""
        return (
            self.transient_store_pool_enable
            and self.flush_disk_type is FlushDiskType.ASYNC_FLUSH
            and self.broker_role is not BrokerRole.SLAVE
        )

    @property
    def disk_max_used_space_ratio_clamped(self) -> int:
        """``diskMaxUsedSpaceRatio`` clamped to 10–95, as RocketMQ's getter does."""
        return min(max(self.disk_max_used_space_ratio, 10), 95)

    def validate(self) -> None:
        if self.has_fixed_ha_master_address and not is_host_port(self.ha_master_address or ""):
            raise ValueError(f"haMasterAddress {self.ha_master_address!r} is not host:port")
        if not 1 <= self.max_message_size <= MAX_MESSAGE_SIZE_LIMIT:
            raise ValueError(
                f"maxMessageSize {self.max_message_size} is not 1 to {MAX_MESSAGE_SIZE_LIMIT}: a larger message "
                "would not fit one pull response a client can decode (16 MiB frames, less room for the header)"
            )
        if self.mapped_file_size_consume_queue % 20:
            raise ValueError(
                f"mappedFileSizeConsumeQueue {self.mapped_file_size_consume_queue} must be a multiple of 20"
            )
        ext_unit = 20 + -(-self.bit_map_length_consume_queue_ext // 8) + 4  # a unit and the end mark
        if self.enable_consume_queue_ext and self.mapped_file_size_consume_queue_ext < ext_unit:
            raise ValueError(
                f"mappedFileSizeConsumeQueueExt {self.mapped_file_size_consume_queue_ext} cannot hold one unit with "
                f"a {self.bit_map_length_consume_queue_ext}-bit map ({ext_unit} bytes)"
            )
        if self.mapped_file_size_commit_log < 4096:
            raise ValueError(f"mappedFileSizeCommitLog {self.mapped_file_size_commit_log} must be at least 4096")
        if self.max_hash_slot_num <= 0 or self.max_index_num <= 1:
            raise ValueError("maxHashSlotNum and maxIndexNum must be positive")
        if self.ha_transfer_batch_size <= 0 or self.ha_send_heartbeat_interval <= 0:
            raise ValueError("haTransferBatchSize and haSendHeartbeatInterval must be positive")
        if self.ha_housekeeping_interval <= self.ha_send_heartbeat_interval:
            raise ValueError("haHousekeepingInterval must be longer than haSendHeartbeatInterval")
        if len(self.ha_access_key.encode()) > 255:
            raise ValueError("haAccessKey is longer than 255 bytes")
        if self.clean_resource_initial_delay < 0:
            raise ValueError("cleanResourceInitialDelay must not be negative")
        parse_delay_levels(self.message_delay_level)
        # 5.3.3's setTimerPrecisionMs: the largest of 100, 200, 500, 1000 at or below it (100 below)
        self.timer_precision_ms = max([c for c in (100, 200, 500, 1000) if c <= self.timer_precision_ms] or [100])
        if self.mapped_file_size_timer_log < 4096:
            raise ValueError(f"mappedFileSizeTimerLog {self.mapped_file_size_timer_log} must be at least 4096")
        if self.timer_flush_interval_ms <= 0:
            raise ValueError("timerFlushIntervalMs must be positive")
        if self.enable_d_leger_commit_log:
            self._validate_dledger()

    def _validate_dledger(self) -> None:
        """What DLedger itself refuses at start (a group, peers, this node among them), and
        RocketMQ's slave id from the node id (``parseInt(selfId.substring(1))``)."""
        if not self.d_leger_group:
            raise ValueError("enableDLegerCommitLog=true needs dLegerGroup (the distribution uses the brokerName)")
        peers = self.dledger_peer_map
        if not peers:
            raise ValueError("enableDLegerCommitLog=true needs dLegerPeers (n0-host:port;n1-host:port;...)")
        for node_id, addr in peers.items():
            if not node_id or not is_host_port(addr):
                raise ValueError(f"dLegerPeers: {node_id}-{addr} is not id-host:port")
        if self.d_leger_self_id not in peers:
            raise ValueError(f"dLegerSelfId {self.d_leger_self_id!r} is not one of dLegerPeers ({', '.join(peers)})")
        if not re.fullmatch(r".[0-9]{1,9}", self.d_leger_self_id or ""):
            raise ValueError(
                f"dLegerSelfId {self.d_leger_self_id!r} must be one character and a number (n0, n1, ...): "
                "RocketMQ 4.9 makes the slave id from the number"
            )
        if self.preferred_leader_id and self.preferred_leader_id not in peers:
            raise ValueError(f"preferredLeaderId {self.preferred_leader_id!r} is not one of dLegerPeers")
        for key, value in (
            ("dLedgerHeartBeatTimeIntervalMs", self.d_ledger_heart_beat_time_interval_ms),
            ("dLedgerMaxHeartBeatLeak", self.d_ledger_max_heart_beat_leak),
            ("dLedgerMinVoteIntervalMs", self.d_ledger_min_vote_interval_ms),
            ("dLedgerMaxWaitAckTimeMs", self.d_ledger_max_wait_ack_time_ms),
            ("dLedgerMaxPushTimeOutMs", self.d_ledger_max_push_time_out_ms),
            ("dLedgerMinTakeLeadershipVoteIntervalMs", self.d_ledger_min_take_leadership_vote_interval_ms),
        ):
            if value < 1:
                raise ValueError(f"{key} {value} must be 1 or more")
        for low, high, name in (
            (self.d_ledger_min_vote_interval_ms, self.d_ledger_max_vote_interval_ms, "VoteIntervalMs"),
            (self.d_ledger_min_take_leadership_vote_interval_ms, self.d_ledger_max_take_leadership_vote_interval_ms,
             "TakeLeadershipVoteIntervalMs"),
        ):  # fmt: skip
            if high < low:
                raise ValueError(f"dLedgerMax{name} {high} is below dLedgerMin{name} {low}")
