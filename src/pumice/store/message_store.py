"""DefaultMessageStore: the store facade that owns every store service.

Directory layout under ``store_path_root_dir`` (RocketMQ 4.9):

==================================================  ========================================
path                                                content
==================================================  ========================================
``commitlog/<20-digit start offset>``               CommitLog segments (1 GiB by default)
``consumequeue/<topic>/<queueId>/<20-digit off>``   ConsumeQueue segments (300,000 entries)
``index/<yyyyMMddHHmmssSSS>``                       IndexFiles
``checkpoint``                                      flush time points (StoreCheckpoint)
``abort``                                           present while running; left by a crash
``lock``                                            held with ``flock`` by the running store
``config/``                                         the broker's JSON managers
==================================================  ========================================

Life cycle: ``load()`` maps the files and recovers, ``start()`` takes the lock, starts
dispatch and waits for it to catch up, ``shutdown()`` stops it all and removes ``abort``.

Retention runs on one scheduler thread at a fixed rate, as RocketMQ's ``cleanFilesPeriodically``:

===============================  ==========  ================================================
key                              default     meaning
===============================  ==========  ================================================
``cleanResourceInitialDelay``    60000 ms    the first pass, after start; Pumice's own key
                                             (RocketMQ fixes 60 s), so a test or a small
                                             deployment need not wait a minute
``cleanResourceInterval``        10000 ms    the period of the passes after it
===============================  ==========  ================================================

A pass is CleanCommitLogService (``fileReservedTime`` in whole hours, as RocketMQ's int;
``deleteWhen``; disk ratios; the manual trigger of DELETE_EXPIRED_COMMITLOG), then
CleanConsumeQueueService.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import logging
import os
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future

import numpy as np

import pumice.store.ha_divergence as ha_divergence
from pumice.common.message import MessageExt, MessageExtBatch, MessageExtBrokerInner
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import decode_message, decode_message_id
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, human_readable_byte_count
from pumice.config import INT_MAX
from pumice.native import NATIVE
from pumice.store.allocate_mapped_file_service import AllocateMappedFileService
from pumice.store.clean_commit_log_service import CleanCommitLogService, disk_partition_used_ratio
from pumice.store.clean_consume_queue_service import CleanConsumeQueueService
from pumice.store.commit_log import CommitLog
from pumice.store.consume_queue import (
    CQ_STORE_UNIT_SIZE,
    ENTRY_DTYPE,
    SCAN_WINDOW,
    ConsumeQueue,
    ScanCursor,
    scan_units,
)
from pumice.store.consume_queue_ext import MAX_ADDR, CqExtUnit, is_ext_addr
from pumice.store.disk_io import StoreIOError
from pumice.store.dispatch_checkpoint import DispatchCheckpoint
from pumice.store.dispatch_request import DispatchRequest
from pumice.store.dledger_commit_log import DLedgerCommitLog, ReplicatedLog, dledger_runtime_info
from pumice.store.flush_consume_queue_service import FlushConsumeQueueService
from pumice.store.get_message_result import GetMessageResult, GetMessageStatus
from pumice.store.ha_service import HAService
from pumice.store.index_service import IndexService, QueryOffsetResult
from pumice.store.mapped_file import SelectMappedBufferResult
from pumice.store.message_arriving_listener import MessageArrivingListener
from pumice.store.message_filter import MessageFilter
from pumice.store.message_store_config import BrokerRole, FlushDiskType, MessageStoreConfig
from pumice.store.put_message_result import PutMessageHook, PutMessageResult, PutMessageStatus
from pumice.store.reput_message_service import ReputMessageService
from pumice.store.running_flags import (
    DISK_FULL_BIT,
    FLUSH_FAILED_BIT,
    WRITE_FAILED_BIT,
    WRITE_INDEX_FILE_ERROR_BIT,
    WRITE_LOGICS_QUEUE_ERROR_BIT,
    RunningFlags,
)
from pumice.store.store_checkpoint import StoreCheckpoint
from pumice.store.store_health import RecoveryRecord, store_health_info
from pumice.store.store_stats_service import StoreStatsService
from pumice.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)
# start-up gives up (and does not start) when dispatch stops moving for this long
DISPATCH_STALL_LIMIT_S = 120.0
# start-up stops waiting for a dispatch that keeps failing (no space) after this long
DISPATCH_FAILING_GRACE_S = 1.0
# the disk marks are checked this often, from start (a disk can fill in seconds)
DISK_CHECK_INTERVAL_S = 0.5

_ENTRY = struct.Struct(">qiq")
_DISPATCH_ERROR_BITS = WRITE_LOGICS_QUEUE_ERROR_BIT | WRITE_INDEX_FILE_ERROR_BIT
# appended, whatever the flush or replication said
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
           PutMessageStatus.SLAVE_NOT_AVAILABLE)  # fmt: skip
_TOTAL_PHYSICAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
_CQ_HEAD = struct.Struct(">qi")  # a ConsumeQueue entry's commitLogOffset and size


class StoreLockedError(RuntimeError):
    """Another process holds the store directory."""


class DefaultMessageStore:
    def __init__(
        self,
        config: MessageStoreConfig | None = None,
        message_arriving_listener: MessageArrivingListener | None = None,
        *,
        ha_listen_host: str | None = None,
        replicated_log: ReplicatedLog | None = None,
    ) -> None:
        """``ha_listen_host``: run the HAService (master/slave replication), listening there
        on ``haListenPort``; None (stand-alone stores, tests) runs none. ``replicated_log``:
        DLedger mode (``DLedgerCommitLog`` over that log, no HAService)."""
        self.config = config or MessageStoreConfig()
        self.config.validate()
        self.message_arriving_listener = message_arriving_listener
        self.running_flags = RunningFlags()
        # run on every put before its append, in order (the broker's timer routing)
        self.put_message_hooks: list[PutMessageHook] = []
        self.transient_store_pool: TransientStorePool | None = None
        if self.is_transient_store_pool_enable():
            self.transient_store_pool = TransientStorePool(
                self.config.transient_store_pool_size, self.config.mapped_file_size_commit_log
            )
            self.transient_store_pool.init()
        self.allocate_mapped_file_service = AllocateMappedFileService(
            preallocate=self.config.preallocate_commit_log,
            prefault=self.config.prefault_commit_log or self.config.preallocate_commit_log,
            transient_store_pool=self.transient_store_pool,
            space_ok=self._space_ok,
        )
        self.dledger = self.config.enable_d_leger_commit_log
        if self.dledger != (replicated_log is not None):
            raise ValueError(
                "enableDLegerCommitLog=true needs the DLedger log (the broker controller builds it), and only it"
            )
        self.commit_log: CommitLog = (
            DLedgerCommitLog(self.config, replicated_log)
            if replicated_log is not None
            else CommitLog(
                self.config, self.allocate_mapped_file_service, transient_pool=self.transient_store_pool is not None,
                on_io_error=self.on_io_error, on_commit_ok=self.on_commit_ok, space_ok=self._space_ok,
                on_committed=self._on_committed,
            )
        )  # fmt: skip
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self._cq_lock = threading.Lock()
        self.store_checkpoint: StoreCheckpoint | None = None
        self.dispatch_checkpoint: DispatchCheckpoint | None = None
        self.index_service = IndexService(self.config, on_io_error=self.on_io_error)
        self.reput_message_service = ReputMessageService(
            self.commit_log, self.do_dispatch, self.is_master, self.dispatch_caught_up
        )
        self.ha_service: HAService | None = None
        if ha_listen_host is not None and not self.dledger:  # DLedger replicates itself: no HA port
            self.ha_service = HAService(
                self.config, self.commit_log, self.get_commit_log_data, self.append_to_commit_log, ha_listen_host,
                self.last_record_start,
            )  # fmt: skip
        self.flush_consume_queue_service = FlushConsumeQueueService(
            self.config, self.all_consume_queues, lambda: self.store_checkpoint, self.on_io_error,
            dispatch_checkpoint=lambda: self.dispatch_checkpoint,
            dispatched_offset=lambda: self.reput_message_service.reput_from_offset,
        )  # fmt: skip
        self.store_stats_service = StoreStatsService()
        self.redispatch_from_offset = -1  # set by recovery when dispatch must be redone from there
        self.shutdown_flag = True
        self.last_exit_ok = True
        self.last_recovery: RecoveryRecord | None = None  # what the last recovery did (store health)
        self._lock_fd: int | None = None
        self._print_times = 0
        self._slave_warned_at = -60.0
        self.long_polling_enable = True
        self._io_error_logged_at = -1e9
        self.last_dispatch_error = ""  # why dispatch last failed, for the refusal's remark
        # CommitLogDispatcherCalcBitMap (the broker's, with a ConsumeQueueExt): (topic, requests)
        # sets each request's bit_map before its ConsumeQueue entries are written
        self.calc_bit_map: Callable[[str, list[DispatchRequest]], None] | None = None
        self.last_disk_full_error = ""  # a reservation that found no space (else the usage check marked it)
        # started before dispatch could catch up (no space): writes wait for dispatch_caught_up
        self.queue_table_stale = False
        self._dispatch_flags_lock = threading.Lock()  # stale and the dispatch-error mark change together
        self._init_clean_services()

    def is_master(self) -> bool:
        return self.config.broker_role is not BrokerRole.SLAVE

    def _on_committed(self) -> None:
        """Buffered appends became readable: dispatch and the slaves' writers may go on."""
        self.reput_message_service.wakeup()
        if self.ha_service is not None:
            self.ha_service.wakeup_all()

    def is_transient_store_pool_enable(self) -> bool:
        """Whether appends are staged in pool buffers (RocketMQ 4.9's rule: the key, ASYNC_FLUSH, a master)."""
        return self.config.transient_store_pool_in_effect

    # -- life cycle --------------------------------------------------------------------

    def load(self) -> bool:
        os.makedirs(self.config.config_dir, exist_ok=True)  # the broker's JSON managers live here
        self._take_lock()
        if self.ha_service is not None:
            try:
                self.ha_service.bind()  # a taken HA port stops here, before the abort file
            except OSError:
                self._release_lock()
                raise
        self.last_exit_ok = not os.path.exists(self.config.abort_path)
        log.info("last shutdown %s", "normally" if self.last_exit_ok else "abnormally")
        # Made before recovery (RocketMQ makes it in start): a crash while loading or
        # recovering must lead to an abnormal recovery next time too.
        with open(self.config.abort_path, "wb"):
            pass
        self._handle_ha_divergence()
        ok = self.commit_log.load() and self._load_consume_queue()
        if ok:
            self.store_checkpoint = StoreCheckpoint(self.config.checkpoint_path)
            self.dispatch_checkpoint = DispatchCheckpoint(self.config.dispatch_checkpoint_path)
            if not self.dispatch_checkpoint.known and not self.commit_log.mapped_file_queue.mapped_files:
                self.dispatch_checkpoint.update(consume_queue_offset=0, index_offset=0)  # a new store
            self.index_service.checkpoint = self.store_checkpoint
            self.index_service.dispatch_checkpoint = self.dispatch_checkpoint
            self.commit_log.checkpoint = self.store_checkpoint
            ok = self.index_service.load(self.last_exit_ok)
            self.recover(self.last_exit_ok)
            log.info("load over, and the max phy offset = %d", self.commit_log.get_max_offset())
        if not ok:
            self.allocate_mapped_file_service.shutdown()
        return ok

    def _handle_ha_divergence(self) -> None:
        """A slave found ahead of its master (``ha_divergence``): set the tail aside if the
        operator allows it, before the CommitLog is loaded and recovered."""
        cfg = self.config
        marker = ha_divergence.read_marker(cfg.store_path_root_dir)
        if marker is None or self.ha_service is None or self.is_master():
            return
        client = self.ha_service.ha_client
        if "failedAt" not in marker and "verifyFrom" not in marker and cfg.ha_slave_set_aside_diverged_tail:
            try:
                dest, cut, verify_from = ha_divergence.set_aside_tail(
                    cfg.commit_log_dir, cfg.mapped_file_size_commit_log, cfg.store_path_root_dir,
                    int(marker["masterOffset"]), int(marker["slaveOffset"]),
                )  # fmt: skip
            except (ha_divergence.DivergenceError, KeyError, ValueError, OSError) as e:
                marker["failedAt"] = marker.get("masterOffset")
                ha_divergence.write_marker(cfg.store_path_root_dir, marker)
                log.error("cannot set the diverged CommitLog tail aside: %s", e)
            else:
                marker.update(setAsideTo=dest, cut=cut, verifyFrom=verify_from)
                ha_divergence.write_marker(cfg.store_path_root_dir, marker)
        if "failedAt" in marker:
            client.refused = True
        elif "verifyFrom" not in marker:
            client.hold_report = ha_divergence.hold_report(marker)
        else:
            client.verify_from = int(marker["verifyFrom"])
            if client.verify_from <= 0:  # no record to check but at 0 (a report of 0 asks for the last file)
                client.verify_from = -1
                ha_divergence.remove_marker(cfg.store_path_root_dir)
                return
        client.diverged = ha_divergence.describe(marker)
        log.error("this slave's %s", client.diverged)

    def take_lock(self) -> None:
        """Lock the store directory (``<root>/lock``) for this process, or StoreLockedError.
        ``load`` takes it too; the broker takes it before it reads anything in the store."""
        self._take_lock()

    def _take_lock(self) -> None:
        if self._lock_fd is not None:
            return
        fd = os.open(self.config.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            raise StoreLockedError(
                f"Lock failed, MQ already started: {self.config.store_path_root_dir} is locked by another process "
                "(one broker per store directory): stop the other broker, or give this one another storePathRootDir"
            ) from e
        os.pwrite(fd, b"lock", 0)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _load_consume_queue(self) -> bool:
        root = self.config.consume_queue_dir
        if not os.path.isdir(root):
            return True
        for topic in sorted(os.listdir(root)):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for qname in sorted(os.listdir(tdir)):
                try:
                    qid = int(qname)
                except ValueError:
                    continue
                cq = self._new_consume_queue(topic, qid)
                self.consume_queue_table.setdefault(topic, {})[qid] = cq
                if not cq.load():
                    return False
        log.info("load logics queue all over, OK")
        return True

    def recover(self, last_exit_ok: bool) -> None:
        """Bring the ConsumeQueues, the CommitLog and the index back to one consistent end.

        Normal: scan the CommitLog's last 3 files. Abnormal: scan from the last file whose
        first record is older than the checkpoint, with CRC checks, and have dispatch redo
        everything from there (idempotently), plus whatever the pruned index files covered,
        and from wherever ``dispatchcheckpoint`` says the ConsumeQueues or the index stop
        being durable, when that is earlier (a clock that went back makes store times lie).
        """
        began = time.monotonic()
        dcp = self.dispatch_checkpoint
        # the index's own durable offset prunes its files in IndexService.load
        durable_from = dcp.consume_queue_offset if not last_exit_ok and dcp is not None and dcp.known else -1
        max_phy_offset_of_cq = -1
        for cq in self.all_consume_queues():
            # a power cut may leave any page unwritten: check every file that may hold
            # entries of records past what the last thorough flush covered
            cq.recover(check_from_phy_offset=durable_from if durable_from >= 0 else None)
            max_phy_offset_of_cq = max(max_phy_offset_of_cq, cq.max_physic_offset)
        if last_exit_ok:
            process_offset, redispatch_from = self.commit_log.recover_normally(), -1
        else:
            assert self.store_checkpoint is not None
            process_offset, redispatch_from = self.commit_log.recover_abnormally(self.store_checkpoint)
            if not self.commit_log.mapped_file_queue.mapped_files:
                for cq in self.all_consume_queues():
                    log.warning("no CommitLog file: destroy consume queue %s", cq)
                    cq.destroy()
                self.consume_queue_table.clear()
                max_phy_offset_of_cq = -1
            if 0 <= durable_from < redispatch_from:
                log.warning(
                    "dispatchcheckpoint: the ConsumeQueues are durable below CommitLog offset %d, before the "
                    "checkpoint's time point (offset %d): dispatch is redone from %d",
                    durable_from, redispatch_from, durable_from,
                )  # fmt: skip
                redispatch_from = durable_from
        if dcp is not None:
            try:
                dcp.reset(process_offset)
            except StoreIOError as e:  # the next thorough flush writes it again
                log.error("dispatchcheckpoint not written: %s", e)
        # whatever cut the log (a crash, or a CRC failure even after a clean stop), no index entry
        # may point past its end, or the index would skip the records written there next
        stale_index_from = self.index_service.prune_beyond(process_offset)
        candidates = (redispatch_from, stale_index_from, self.index_service.pruned_from_phy_offset)
        valid = [o for o in candidates if o >= 0]
        self.redispatch_from_offset = min(valid) if valid else -1
        if max_phy_offset_of_cq > process_offset:
            log.warning(
                "maxPhyOffsetOfConsumeQueue(%d) > processOffset(%d), truncate dirty logic files",
                max_phy_offset_of_cq, process_offset,
            )  # fmt: skip
            for cq in self.all_consume_queues():
                if cq.max_physic_offset > process_offset:
                    cq.truncate_dirty_logic_files(process_offset)
        self.recover_topic_queue_table()
        self.last_recovery = RecoveryRecord(
            "normal" if last_exit_ok else "abnormal", int(time.time() * 1000), int((time.monotonic() - began) * 1000),
            process_offset, max(max_phy_offset_of_cq - process_offset, 0), self.redispatch_from_offset,
        )  # fmt: skip

    def _wait_for_dispatch(self) -> None:
        """Let dispatch catch up before puts start: the queues' next offsets come from the
        rebuilt ConsumeQueues, so a half-built queue would hand out taken offsets. No time
        limit (RocketMQ waits too); RuntimeError, and no start, if dispatch stops moving.

        A dispatch that fails for lack of space or descriptors (it retries) does not hold the
        start: the store starts and serves reads, refusing writes (its dispatch-error mark
        stays) until dispatch has caught up and the queues' next offsets are read again
        (``dispatch_caught_up``)."""
        rs = self.reput_message_service
        last_log = moved_at = time.monotonic()
        last_where = rs.reput_from_offset
        failing_since: float | None = None
        while (behind := self.dispatch_behind_bytes()) > 0:
            time.sleep(0.01)
            now = time.monotonic()
            if rs.reput_from_offset != last_where:
                last_where, moved_at = rs.reput_from_offset, now
            elif now - moved_at > DISPATCH_STALL_LIMIT_S:
                raise RuntimeError(
                    f"dispatch made no progress for {DISPATCH_STALL_LIMIT_S:.0f} s at CommitLog offset {last_where} "
                    f"({behind} bytes behind) during start-up; see the log for the dispatch error"
                )
            if not rs.failing:
                failing_since = None
            elif failing_since is None:
                failing_since = now
            elif now - failing_since > DISPATCH_FAILING_GRACE_S:
                with self.commit_log.put_message_lock, self._dispatch_flags_lock:
                    # the dispatch-error mark holds until dispatch_caught_up, whatever a retry
                    # that succeeds meanwhile does (do_dispatch clears it only when not stale)
                    self.queue_table_stale = True
                    self.running_flags.make_logics_queue_error()
                log.error(
                    "dispatch cannot write at CommitLog offset %d (%d bytes behind; see the error above): starting "
                    "with reads only; writes are taken once dispatch has caught up", last_where, behind,
                )  # fmt: skip
                return
            if now - last_log >= 10:
                last_log = now
                log.info("Try to finish doing reput the messages fall behind during the starting, "
                         "reputOffset=%d behind=%d", last_where, behind)  # fmt: skip

    def dispatch_caught_up(self) -> None:
        """Dispatch reached the CommitLog's end (the dispatch thread, after a retry): a start
        that could not wait for it reads the queues' next offsets now, then takes writes."""
        if not self.queue_table_stale:
            return
        with self.commit_log.put_message_lock:
            self.recover_topic_queue_table()
            with self._dispatch_flags_lock:
                self.queue_table_stale = False
                cleared = self.running_flags.clear_dispatch_errors()
        if cleared:
            log.warning("dispatch caught up: the store takes writes again (%s)", self.running_flags.describe())

    def recover_topic_queue_table_locked(self) -> None:
        """``recover_topic_queue_table`` under the put lock: a new DLedger leader takes the
        queues' next offsets from its ConsumeQueues and from the entries not dispatched yet
        (``DLedgerCommitLog.tail_queue_offsets``) before it takes sends."""
        with self.commit_log.put_message_lock:
            self.recover_topic_queue_table()
            if isinstance(self.commit_log, DLedgerCommitLog):
                table = self.commit_log.topic_queue_table
                tail = self.commit_log.tail_queue_offsets(self.reput_message_service.reput_from_offset)
                for key, next_offset in tail.items():
                    table[key] = max(table.get(key, 0), next_offset)

    def recover_topic_queue_table(self) -> None:
        table: dict[tuple[str, int], int] = {}
        min_phy = self.commit_log.get_min_offset()
        for cq in self.all_consume_queues():
            table[(cq.topic, cq.queue_id)] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy)
        self.commit_log.topic_queue_table = table

    def start(self) -> None:
        self._take_lock()
        reput_from = self.commit_log.get_min_offset()
        for cq in self.all_consume_queues():
            reput_from = max(reput_from, cq.max_physic_offset)
        reput_from = max(reput_from, 0)
        if 0 <= self.redispatch_from_offset < reput_from:
            log.info("redo dispatch from %d (recovery cut the log or dropped index files)", self.redispatch_from_offset)
            reput_from = self.redispatch_from_offset
        cl_min = self.commit_log.get_min_offset()
        if reput_from < cl_min:
            log.warning("[TooSmallCqOffset] maxPhysicalPosInLogicQueue=%d clMinOffset=%d", reput_from, cl_min)
            reput_from = cl_min
        log.info(
            "[SetReputOffset] maxPhysicalPosInLogicQueue=%d clMaxOffset=%d",
            reput_from,
            self.commit_log.get_max_offset(),
        )
        self.reput_message_service.reput_from_offset = reput_from
        self.reput_message_service.start()
        self._wait_for_dispatch()
        with self.commit_log.put_message_lock:
            if not self.queue_table_stale:  # else dispatch_caught_up reads it, once it can
                self.recover_topic_queue_table()
        self.redispatch_from_offset = -1
        self.flush_consume_queue_service.start()
        self.store_stats_service.start()
        self.commit_log.start()
        with open(self.config.abort_path, "wb"):
            pass
        self.shutdown_flag = False
        if self.ha_service is not None:
            if self.config.broker_role is BrokerRole.SLAVE and self.config.has_fixed_ha_master_address:
                self.ha_service.update_master_address(self.config.ha_master_address)
            self.ha_service.start()
        self._start_clean_scheduler()

    def shutdown(self) -> None:
        if self.shutdown_flag and self._lock_fd is None:
            return
        self.shutdown_flag = True
        if self.ha_service is not None:
            self.ha_service.shutdown()
        self._stop_clean_scheduler()
        self.store_stats_service.shutdown()
        # RocketMQ's order: CommitLog (commit, flush), dispatch (let it catch up), ConsumeQueue
        # flush with the checkpoint, then unmap everything.
        self.commit_log.shutdown()
        self.reput_message_service.shutdown()
        self.flush_consume_queue_service.shutdown()
        self.index_service.shutdown()
        self.commit_log.close()
        for cq in self.all_consume_queues():
            try:
                cq.shutdown()
            except StoreIOError as e:
                self.on_io_error(e)
        self.allocate_mapped_file_service.shutdown()
        if self.transient_store_pool is not None:
            self.transient_store_pool.destroy()
        caught_up = self.dispatch_behind_bytes() <= 0
        if self.store_checkpoint is not None:
            try:
                self.store_checkpoint.shutdown()
            except StoreIOError as e:
                self.on_io_error(e)  # not writeable: the abort file stays, the next start recovers
            self.store_checkpoint = None
            self.commit_log.checkpoint = None
        if self.dispatch_checkpoint is not None:
            self.dispatch_checkpoint.close()
            self.dispatch_checkpoint = self.index_service.dispatch_checkpoint = None
        if self.running_flags.is_writeable() and caught_up and os.path.exists(self.config.abort_path):
            os.unlink(self.config.abort_path)
        self._release_lock()

    def __enter__(self) -> DefaultMessageStore:
        if not self.load():
            raise RuntimeError(f"failed to load store at {self.config.store_path_root_dir}")
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- put ---------------------------------------------------------------------------

    def _check_store_status(self) -> PutMessageResult | None:
        if self.shutdown_flag:
            log.warning("message store has shutdown, so putMessage is forbidden")
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store has shut down")
        if self.config.broker_role is BrokerRole.SLAVE:
            self._print_times += 1
            if self._print_times % 50000 == 1:
                log.warning("broke role is slave, so putMessage is forbidden")
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="the broker is a slave")
        if not self.running_flags.is_writeable():
            self._print_times += 1
            if self._print_times % 50000 == 1:
                log.warning("the message store is not writable: %s", self.running_flags.describe())
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                remark=self._not_writeable_remark(),
            )
        self._print_times = 0
        if self.commit_log.is_os_page_cache_busy():
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY, remark="OS page cache is busy")
        return None

    def _not_writeable_remark(self) -> str:
        flags = self.running_flags
        if flags.flag_bits & FLUSH_FAILED_BIT:  # first: only a restart clears it
            return (
                f"the message store is not writeable ({flags.describe()}): a sync of its files to disk failed "
                f"(see the broker's log); stored messages stay readable; restart the broker once the disk is healthy"
            )
        if flags.flag_bits & WRITE_FAILED_BIT:
            return (
                f"the message store is not writeable ({flags.describe()}): a write of the CommitLog to disk failed "
                "(see the broker's log); it is retried, and writes resume once it succeeds"
            )
        if flags.flag_bits & DISK_FULL_BIT:
            why = self.last_disk_full_error or (
                f"the disk holding {self.config.store_path_root_dir} is over "
                f"{self.config.disk_space_warning_level_ratio:.0%} used"
            )
            return f"the message store is not writeable (DISK_FULL): {why}; writes resume when space is freed"
        why = self.last_dispatch_error
        if "Too many open files" in why:
            why += " (the broker is out of file descriptors: raise its limit, ulimit -n)"
        return (
            f"the message store is not writeable ({flags.describe()}): a consume queue or index write failed "
            f"({why or 'see the broker log'}); it is retried, and writes resume once it succeeds; stored messages "
            "stay readable"
        )

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return self.put_messages((msg,))

    def put_messages(
        self, msgs: Sequence[MessageExtBrokerInner], wait_flush: bool = True, caller_dispatches: bool = False
    ) -> PutMessageResult:
        """Append ``msgs`` (checked in RocketMQ's order first).

        With SYNC_FLUSH and ``wait_flush`` the call returns once the data is on disk
        (FLUSH_DISK_TIMEOUT after ``syncFlushTimeout``). With ``wait_flush=False`` it
        returns at once and ``flush_future(result)`` tells when the data is on disk, for
        callers that must not block (the broker's event loop). ``caller_dispatches``: the
        caller calls ``dispatch_now()`` after a PUT_OK, so the dispatch thread is not woken.
        """
        bad = self._check_store_status()
        if bad is not None:
            return bad
        for hook in self.put_message_hooks:
            for msg in msgs:
                refused = hook(msg)
                if refused is not None:
                    return self._count_put(refused)
        result = self._count_put(self.commit_log.put_messages(msgs, wait_flush))
        self._wake_dispatch(result, caller_dispatches)
        return self._handle_ha_blocking(result) if wait_flush else result

    def put_message_batch(
        self, batch: MessageExtBatch, wait_flush: bool = True, caller_dispatches: bool = False
    ) -> PutMessageResult:
        """Append the messages of one SEND_BATCH_MESSAGE (see ``CommitLog.put_message_batch``);
        the checks and the flush wait are those of ``put_messages``."""
        bad = self._check_store_status()
        if bad is not None:
            return bad
        for hook in self.put_message_hooks:
            refused = hook(batch)
            if refused is not None:
                return self._count_put(refused)
        result = self._count_put(self.commit_log.put_message_batch(batch, wait_flush))
        self._wake_dispatch(result, caller_dispatches)
        return self._handle_ha_blocking(result) if wait_flush else result

    def _count_put(self, result: PutMessageResult) -> PutMessageResult:
        stats = self.store_stats_service
        amr = result.append_message_result
        if amr is not None and result.status in _STORED:
            stats.put_message_times_total += amr.msg_num
            stats.put_message_size_total += amr.wrote_bytes
        else:
            stats.put_message_failed_times += 1
        return result

    def _wake_dispatch(self, result: PutMessageResult, caller_dispatches: bool) -> None:
        if self.commit_log.buffered:
            return  # with a pool, the commit wakes replication and dispatch (_on_committed)
        if self.ha_service is not None:
            self.ha_service.wakeup_all()
        if result.quorum is not None:  # DLedger: dispatch sees the entries once they are committed
            reput = self.reput_message_service
            result.quorum.add_done_callback(lambda _: reput.wakeup())
            return
        status = result.status
        stored = status is PutMessageStatus.PUT_OK or status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        if stored and not (caller_dispatches and status is PutMessageStatus.PUT_OK):
            self.reput_message_service.wakeup()

    def dispatch_now(self) -> bool:
        """Dispatch what this process appended and has not been dispatched yet, on the
        caller's thread, when the dispatch hints cover it (see
        ``ReputMessageService.dispatch_hinted_now``); True if anything was dispatched."""
        return self.reput_message_service.dispatch_hinted_now()

    def flush_future(self, result: PutMessageResult) -> Future[bool] | None:
        """For a put made with ``wait_flush=False``: a future that turns True when its data is
        on disk (SYNC_FLUSH), or None when nothing is to be waited for (ASYNC_FLUSH)."""
        if self.config.flush_disk_type is not FlushDiskType.SYNC_FLUSH or not result.is_ok():
            self.commit_log.wakeup_flush()
            return None
        return self.commit_log.submit_flush_request(result)

    def on_flushed(self, result: PutMessageResult, callback: Callable[[bool], None]) -> bool:
        """Like ``flush_future`` but calls ``callback(ok)`` on the flush thread (see
        ``pumice.broker.put_message_waiter`` for event loops). Returns False when there is nothing to wait for."""
        if self.config.flush_disk_type is not FlushDiskType.SYNC_FLUSH or not result.is_ok():
            self.commit_log.wakeup_flush()
            return False
        self.commit_log.submit_flush_request(result, callback)
        return True

    # -- replication (HA) ----------------------------------------------------------------

    def _waits_for_slave(self, result: PutMessageResult) -> bool:
        return (
            not self.dledger
            and self.config.broker_role is BrokerRole.SYNC_MASTER
            and result.append_message_result is not None
            and result.status in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT)
        )

    @staticmethod
    def _next_offset(result: PutMessageResult) -> int:
        amr = result.append_message_result
        assert amr is not None
        return amr.wrote_offset + amr.wrote_bytes

    def on_replicated(self, result: PutMessageResult, callback: Callable[[bool], None]) -> bool:
        """SYNC_MASTER (CommitLog.handleHA), for a put made with ``wait_flush=False``: True
        when ``callback(acknowledged)`` will follow, on an HA thread (then the caller answers
        FLUSH_SLAVE_TIMEOUT unless acknowledged). False when there is nothing to wait for;
        the status is then SLAVE_NOT_AVAILABLE if no slave is connected, or it is more
        than ``haSlaveFallbehindMax`` behind."""
        if not self._waits_for_slave(result):
            return False
        if self.ha_service is None or not self.ha_service.wait_for_slave(self._next_offset(result), callback):
            result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            self._warn_slave_not_available()
            return False
        return True

    def _warn_slave_not_available(self) -> None:
        """Once a minute at most: why SYNC_MASTER sends answer SLAVE_NOT_AVAILABLE."""
        now = time.monotonic()
        if now - self._slave_warned_at < 60:
            return
        self._slave_warned_at = now
        ha = self.ha_service
        diverged = ha.runtime_info()["haDivergedSlaves"] if ha is not None else ""
        why = (
            f"no slave is in sync: {diverged} (ahead of this master, see the log)"
            if diverged and ha is not None and ha.in_sync_count() == 0
            else "no slave is connected to the HA port (is one started, with this brokerName and brokerId > 0, "
            "registered with the same name server? with aclEnable=true, is it admitted?)"
            if ha is None or ha.in_sync_count() == 0
            else f"the slaves are {ha.slave_fall_behind_bytes()} bytes behind (haSlaveFallbehindMax "
            f"{self.config.ha_slave_fallbehind_max})"
        )
        log.warning("SYNC_MASTER sends answer SLAVE_NOT_AVAILABLE (stored, not replicated yet): %s", why)

    def _handle_ha_blocking(self, result: PutMessageResult) -> PutMessageResult:
        if not self._waits_for_slave(result):
            return result
        fut: Future[bool] = Future()

        def done(ok: bool) -> None:
            if not fut.done():
                fut.set_result(ok)

        if not self.on_replicated(result, done):
            return result
        try:
            ok = fut.result(timeout=self.config.sync_flush_timeout / 1000 + 1)
        except TimeoutError:
            ok = False
        if not ok:
            log.error("do sync transfer other node, wait return, but failed, offset %d", self._next_offset(result))
            result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return result

    def get_commit_log_data(self, offset: int) -> SelectMappedBufferResult | None:
        """Readable CommitLog bytes from ``offset`` to the end of its file (what the HA
        connections send); None when the store is shut down or nothing is there."""
        if self.shutdown_flag:
            return None
        return self.commit_log.get_data(offset)

    def append_to_commit_log(self, start_offset: int, data: bytes | memoryview) -> bool:
        """A slave: append bytes replicated from the master at ``start_offset``."""
        if self.shutdown_flag:
            log.warning("message store has shutdown, so appendToPhyQueue is forbidden")
            return False
        ok = self.commit_log.append_data(start_offset, data)
        if ok:
            self.reput_message_service.wakeup()
        else:
            log.error("appendToPhyQueue failed %d %d", start_offset, len(data))
        return ok

    def last_record_start(self) -> int:
        """Where a record near the CommitLog's end starts (a slave's HA check starts there): the
        last one dispatched, or, before any since the start, the latest ConsumeQueue entry's;
        -1 when there is none."""
        start = self.reput_message_service.last_record_start
        if start >= 0:
            return start
        for cq in self.all_consume_queues():
            n = cq.get_max_offset_in_queue()
            entry = cq.get_entry(n - 1) if n > cq.get_min_offset_in_queue() else None
            if entry is not None:
                start = max(start, entry[0])
        return start

    def update_ha_master_address(self, addr: str | None) -> None:
        if self.ha_service is not None:
            self.ha_service.update_master_address(addr)

    # -- dispatch ----------------------------------------------------------------------

    def do_dispatch(self, reqs: list[DispatchRequest]) -> bool:
        """CommitLogDispatcherBuildConsumeQueue, then CommitLogDispatcherBuildIndex.

        True when every write succeeded. False when a ConsumeQueue or index write failed (no
        space, no descriptor, a broken file): the store then takes no writes, and the caller
        must not move past these records but dispatch them again later (both writes skip
        what is already there); the first success after that makes the store writeable again.
        """
        groups: dict[tuple[str, int], list[DispatchRequest]] = defaultdict(list)
        for r in reqs:
            tran = r.sys_flag & MessageSysFlag.TRANSACTION_MASK
            if tran in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
                groups[(r.topic, r.queue_id)].append(r)
        for (topic, qid), rs in groups.items():
            cq = self.find_consume_queue(topic, qid)
            error: Exception | None = None
            if cq.ext is not None and self.calc_bit_map is not None:
                try:
                    self.calc_bit_map(topic, rs)
                except Exception:  # a unit without its map is matched by the CommitLog instead
                    log.exception("Calc bit map error! topic=%s, offset=%d", topic, rs[0].commit_log_offset)
            try:
                ok = self._put_position_infos(cq, rs)
            except Exception as e:
                ok, error = False, e
            if not ok:
                if error is None:
                    error = cq.mapped_file_queue.last_create_error
                self.last_dispatch_error = f"consume queue {topic}:{qid}: {error}"
                # both called: the first line starts the 10 s quiet period
                if self.running_flags.make_logics_queue_error() | self._should_log_io_error():
                    log.error(
                        "consume queue %s can not be written at CommitLog offset %d (%s): dispatch stops there "
                        "and retries; the store takes no writes meanwhile",
                        cq,
                        rs[0].commit_log_offset,
                        error,
                    )
                return False
        if self.store_checkpoint is not None and reqs:
            self.store_checkpoint.dispatched_logics_timestamp = reqs[-1].store_timestamp
            if not self.is_master():  # a slave's appends carry no store time: take it here
                self.store_checkpoint.physic_msg_timestamp = reqs[-1].store_timestamp
        indexed = True
        if self.config.message_index_enable:
            error = None
            try:
                indexed = self.index_service.build_index_batch(reqs)
            except Exception as e:
                indexed, error = False, e
            if not indexed:
                self.last_dispatch_error = f"index: {error or self.index_service.last_create_error}"
            if not indexed and (self.running_flags.make_index_file_error() | self._should_log_io_error()):
                log.error(
                    "index can not be written at CommitLog offset %d (%s): dispatch stops there and retries; "
                    "the store takes no writes meanwhile",
                    reqs[0].commit_log_offset,
                    error,
                )
        listener = self.message_arriving_listener
        if listener is not None and self.is_master() and self.long_polling_enable:
            try:
                listener.arriving_batch(reqs)  # the ConsumeQueues have these records: wake their pulls
            except Exception:  # a listener bug must not stall dispatch; held pulls time out instead
                log.exception("message arriving listener failed")
        if indexed and self.running_flags.flag_bits & _DISPATCH_ERROR_BITS:
            with self._dispatch_flags_lock:
                cleared = not self.queue_table_stale and self.running_flags.clear_dispatch_errors()
            if cleared:
                log.warning("dispatch writes again: the store takes writes again (%s)", self.running_flags.describe())
        return indexed

    def _should_log_io_error(self) -> bool:
        """At most one repeated store I/O error log line every 10 s."""
        now = time.monotonic()
        if now - self._io_error_logged_at < 10:
            return False
        self._io_error_logged_at = now
        return True

    def on_io_error(self, e: StoreIOError) -> None:
        """A reservation or sync of a store file failed (any thread). A failed sync stops
        writes for good (FLUSH_FAILED); no space marks the disk full until it has room again."""
        flags = self.running_flags
        if e.op == "msync":
            first, due = flags.make_flush_failed(), self._should_log_io_error()
            if first:
                log.error(
                    "%s: the store takes no more writes until it is restarted (the kernel may have dropped "
                    "the pages it could not write; a restart reads back what is really on disk)",
                    e,
                )
            elif due:
                log.error("%s (the store is not writeable since an earlier failed sync)", e)
        elif e.op == "write":  # before disk_full: only a retried write that succeeds clears it
            if flags.make_write_failed() | self._should_log_io_error():
                log.error("%s: the store takes no writes until the write is retried and succeeds", e)
        elif e.disk_full:
            self.last_disk_full_error = str(e)
            if flags.get_and_make_disk_full():
                log.error("%s: mark disk full; writes resume when space is freed", e)
        elif self._should_log_io_error():
            log.error("%s", e)

    def on_commit_ok(self) -> None:
        """A commit of buffered CommitLog data succeeded: a failed write is behind us."""
        if self.running_flags.clear_write_failed():
            log.warning("the CommitLog write succeeded on retry: the store takes writes again (%s)",
                        self.running_flags.describe())  # fmt: skip

    @staticmethod
    def _put_position_infos(cq: ConsumeQueue, rs: list[DispatchRequest]) -> bool:
        rs = [r for r in rs if r.commit_log_offset + r.msg_size > cq.max_physic_offset]
        if not rs:
            return True
        codes = [r.tags_code for r in rs]
        if cq.ext is not None:  # the entry holds the unit's address (the tagsCode if the unit fails)
            puts = cq.ext.put_many([CqExtUnit(r.tags_code, r.store_timestamp, r.bit_map) for r in rs])
            codes = [a if is_ext_addr(a) else c for a, c in zip(puts, codes, strict=True)]
        first = rs[0].consume_queue_offset
        contiguous = rs[-1].consume_queue_offset - first == len(rs) - 1
        if not contiguous:
            return all(
                cq.put_message_position_info(r.commit_log_offset, r.msg_size, c, r.consume_queue_offset)
                for r, c in zip(rs, codes, strict=True)
            )
        data = b"".join([_ENTRY.pack(r.commit_log_offset, r.msg_size, c) for r, c in zip(rs, codes, strict=True)])
        last = rs[-1]
        return cq.put_entries(first, data, last.commit_log_offset + last.msg_size)

    def dispatch_behind_bytes(self) -> int:
        return self.reput_message_service.behind()

    # -- consume queues ----------------------------------------------------------------

    @property
    def dispatch_on_caller(self) -> bool:
        """True when the broker's event loop dispatches its own puts (put_messages(...,
        caller_dispatches=True), then dispatch_now()): the dispatch thread, woken by every
        other put, then polls every 100 ms instead of 1 ms, so it rarely takes the GIL."""
        return self.reput_message_service.dispatch_on_caller

    @dispatch_on_caller.setter
    def dispatch_on_caller(self, on: bool) -> None:
        self.reput_message_service.dispatch_on_caller = on

    def all_consume_queues(self) -> list[ConsumeQueue]:
        return [cq for m in list(self.consume_queue_table.values()) for cq in list(m.values())]

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        m = self.consume_queue_table.get(topic)
        cq = m.get(queue_id) if m is not None else None
        if cq is not None:
            return cq
        with self._cq_lock:
            m = self.consume_queue_table.setdefault(topic, {})
            cq = m.get(queue_id)
            if cq is None:
                cq = m[queue_id] = self._new_consume_queue(topic, queue_id)
            return cq

    def _new_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        c = self.config
        return ConsumeQueue(topic, queue_id, c.consume_queue_dir, c.mapped_file_size_consume_queue,
                            c.consume_queue_ext_dir, c.mapped_file_size_consume_queue_ext)  # fmt: skip

    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        m = self.consume_queue_table.get(topic)
        return m.get(queue_id) if m is not None else None

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        return cq.get_min_offset_in_queue() if cq is not None else -1

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """checkInDiskByConsumeOffset: the message at ``consume_offset`` lies further behind the
        CommitLog's end than ``accessMessageInMemoryMaxRatio``% of RAM (likely out of the page
        cache). False when the queue has no such entry."""
        cq = self.get_consume_queue(topic, queue_id)
        entry = cq.get_entry(consume_offset) if cq is not None else None
        if entry is None:
            return False
        memory = _TOTAL_PHYSICAL_MEMORY * self.config.access_message_in_memory_max_ratio // 100
        return self.commit_log.get_max_offset() - entry[0] > memory

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        entry = cq.get_entry(consume_queue_offset) if cq is not None else None
        return entry[0] if entry is not None else 0

    # -- admin clean-ups (CLEAN_UNUSED_TOPIC, CLEAN_EXPIRED_CONSUMEQUEUE) -----------------

    def clean_unused_topic(self, topics: Collection[str]) -> list[tuple[str, int, int]]:
        """cleanUnusedTopic: destroy the ConsumeQueues of every topic not in ``topics`` (the
        broker's topic configs) but SCHEDULE_TOPIC_XXXX and RMQ_SYS_TRANS_OP_HALF_TOPIC; the
        next message to such a queue starts it again at offset 0. ``topics`` is asked about each
        queue under the locks: pass a live view (``topic_config_table.keys()``), so a topic created
        meanwhile, and written to, keeps its queues. See ``_destroy_consume_queues``."""
        return self._destroy_consume_queues(
            lambda topic, cq: (
                topic not in topics and topic != RMQ_SYS_SCHEDULE_TOPIC and topic != RMQ_SYS_TRANS_OP_HALF_TOPIC
            )
        )

    def clean_expired_consume_queue(self) -> list[tuple[str, int, int]]:
        """cleanExpiredConsumerQueue: destroy every ConsumeQueue (SCHEDULE_TOPIC_XXXX's
        excepted) whose last entry ends below the CommitLog's first offset (every message it
        indexes is gone); a queue with no entry is kept. See ``_destroy_consume_queues``."""
        min_offset = self.commit_log.get_min_offset()
        return self._destroy_consume_queues(
            lambda topic, cq: topic != RMQ_SYS_SCHEDULE_TOPIC and 0 <= cq.max_physic_offset < min_offset
        )

    def _destroy_consume_queues(self, pick: Callable[[str, ConsumeQueue], bool]) -> list[tuple[str, int, int]]:
        """Destroy the queues ``pick`` chooses: files, directory, and the queue's next offset
        (topicQueueTable). Returns (topic, queueId, max offset) of each queue destroyed.

        RocketMQ does this with no lock. Here each queue goes under the retention lock, the put
        lock and the dispatch lock, so no put takes an offset in it and no dispatch writes to it
        meanwhile, and ``pick`` is asked again there; a queue with puts still waiting for
        dispatch is in use and is kept. A file a reader still holds is unlinked all the same
        (its map lives until released). Nothing is done while the store is not running."""
        destroyed: list[tuple[str, int, int]] = []
        with self._clean_lock:
            if self.shutdown_flag:  # not started, or stopped: the maps may be gone
                return destroyed
            for topic, queues in list(self.consume_queue_table.items()):
                for queue_id, cq in list(queues.items()):
                    if not pick(topic, cq):
                        continue
                    # the dispatcher's own lock (ReputMessageService's): no dispatch runs meanwhile
                    with self.commit_log.put_message_lock, self.reput_message_service._lock:
                        if queues.get(queue_id) is not cq or not pick(topic, cq):
                            continue
                        max_offset = cq.get_max_offset_in_queue()
                        if self.commit_log.topic_queue_table.get((topic, queue_id), 0) > max_offset:
                            log.info("%s: puts wait for dispatch, the queue is in use: kept", cq)
                            continue
                        files = [mf.file_name for mf in cq.mapped_file_queue.mapped_files]
                        with self._cq_lock:
                            del queues[queue_id]
                            if not queues and self.consume_queue_table.get(topic) is queues:
                                del self.consume_queue_table[topic]
                        self.commit_log.topic_queue_table.pop((topic, queue_id), None)
                        cq.destroy()
                        for name in files:  # still held by a reader: destroy left it
                            with contextlib.suppress(FileNotFoundError):
                                os.unlink(name)
                        with contextlib.suppress(OSError):
                            os.rmdir(cq.store_path)
                        destroyed.append((topic, queue_id, max_offset))
                        log.info("%s destroyed (max offset %d, %d files)", cq, max_offset, len(files))
                if destroyed and destroyed[-1][0] == topic:
                    with contextlib.suppress(OSError):  # only if empty
                        os.rmdir(os.path.join(self.config.consume_queue_dir, topic))
        return destroyed

    # -- get ---------------------------------------------------------------------------

    def _next_offset_correction(self, old: int, new: int) -> int:
        if self.config.broker_role is not BrokerRole.SLAVE or self.config.offset_check_in_slave:
            return new
        return old

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int | None = None,
        tags_codes: Collection[int] | None = None,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult | None:
        """Records of one queue from ``offset``, as zero-copy views (release the result).

        ``tags_codes``: keep only records whose ConsumeQueue tagsCode is in the set
        (None keeps all). ``message_filter``: keep only records it matches, first by their
        ConsumeQueue entry, then by the record (4.9's MessageFilter). A tagsCode whose
        extension unit is gone matches (4.9: the client filters by tag too). ``max_total_bytes``
        caps the bytes returned (at least one record is returned). Returns None when the
        store is shut down or unreadable.
        """
        if self.shutdown_flag:
            log.warning("message store has shutdown, so getMessage is forbidden")
            return None
        if not self.running_flags.is_readable():
            log.warning("message store is not readable, so getMessage is forbidden %s", self.running_flags.describe())
            return None
        result = GetMessageResult(next_begin_offset=offset)
        max_offset_py = self.commit_log.get_max_offset()
        cq = self.find_consume_queue(topic, queue_id)
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        result.min_offset, result.max_offset = min_offset, max_offset
        if max_offset == 0:
            result.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
            result.next_begin_offset = self._next_offset_correction(offset, 0)
        elif offset < min_offset:
            result.status = GetMessageStatus.OFFSET_TOO_SMALL
            result.next_begin_offset = self._next_offset_correction(offset, min_offset)
        elif offset == max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
            result.next_begin_offset = self._next_offset_correction(offset, offset)
        elif offset > max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = self._next_offset_correction(
                offset, min_offset if min_offset == 0 else max_offset
            )
        else:
            sbr = cq.get_index_buffer(offset)
            if sbr is None:
                result.status = GetMessageStatus.OFFSET_FOUND_NULL
                result.next_begin_offset = self._next_offset_correction(offset, cq.roll_next_file(offset))
                log.warning(
                    "consumer request topic: %s offset: %d minOffset: %d maxOffset: %d, but access logic queue failed.",
                    topic,
                    offset,
                    min_offset,
                    max_offset,
                )
            else:
                try:
                    if message_filter is None and (tags_codes is None or cq.ext is None):
                        self._collect_plain(result, sbr.buffer, offset, max_msg_nums, max_total_bytes, tags_codes,
                                            max_offset_py)  # fmt: skip
                    else:
                        self._collect(result, cq, sbr.buffer, offset, max_msg_nums, max_total_bytes, tags_codes,
                                      message_filter, max_offset_py)  # fmt: skip
                finally:
                    sbr.release()
        stats = self.store_stats_service
        if result.status is GetMessageStatus.FOUND:
            stats.get_message_times_total_found += 1
            stats.get_message_transfered_msg_count += result.message_count
        else:
            stats.get_message_times_total_miss += 1
        return result

    def _hold_file_at(
        self, result: GetMessageResult, offset: int, file_size: int
    ) -> tuple[int, int, int, memoryview | None]:
        """The CommitLog file holding ``offset``, held for ``result``: (its first offset, the
        next file's, its readable end, a view of it); (0, 0, 0, None) when it is gone."""
        mf = self.commit_log.find_mapped_file(offset)
        if mf is not None and mf.hold():
            result.held_files.append(mf)
            lo = mf.file_from_offset
            return lo, lo + file_size, mf.read_position, memoryview(mf.mmap)
        return 0, 0, 0, None

    def _collect_plain(
        self,
        result: GetMessageResult,
        cq_buf: memoryview,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int | None,
        tags_codes: Collection[int] | None,
        max_offset_py: int,
    ) -> None:
        """``_collect`` without a record filter or extension lookups: the entries are walked by
        ``scan_units`` (native when built), which stops only where a record is not in the
        CommitLog file held; that entry is handled here, and the walk goes on after it."""
        c = self.config
        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        max_filter_count = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
        n = min(len(cq_buf) // CQ_STORE_UNIT_SIZE, max_filter_count)
        memory = _TOTAL_PHYSICAL_MEMORY * c.access_message_in_memory_max_ratio // 100
        limits = (
            max_msg_nums, memory, max_offset_py,
            c.max_transfer_bytes_on_message_in_memory, c.max_transfer_count_on_message_in_memory,
            c.max_transfer_bytes_on_message_in_disk, c.max_transfer_count_on_message_in_disk,
            max_total_bytes if max_total_bytes is not None else 1 << 62,
        )  # fmt: skip
        commit_log = self.commit_log
        file_size = commit_log.mapped_file_queue.mapped_file_size
        buffers, queue_offsets = result.buffers, result.queue_offsets
        cur: ScanCursor = (0, 0, 0, 0, -1, 0, 0, 0)
        view: memoryview | None = None
        while True:
            out = None
            if NATIVE is not None:
                out = NATIVE.scan_units(cq_buf, n, tags_codes, limits, cur, view)
            if out is None:
                out = scan_units(cq_buf, n, tags_codes, limits, cur, view)
            stop, cur, records, taken = out
            if records:
                buffers += records
                queue_offsets += [offset + i for i in taken]
            if stop != SCAN_WINDOW:
                break
            # entry i passed the caps and the filter; its record is in another file, or gone
            i, count, total, max_phy_pulling, next_phy_file_start, lo, hi, readable = cur
            offset_py, size_py = _CQ_HEAD.unpack_from(cq_buf, i * CQ_STORE_UNIT_SIZE)
            if not lo <= offset_py < hi:
                lo, hi, readable, view = self._hold_file_at(result, offset_py, file_size)
            pos = offset_py - lo
            if view is None or not lo <= offset_py < hi or pos + size_py > readable:
                if not count:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = commit_log.roll_next_file(offset_py)
            else:
                buffers.append(view[pos : pos + size_py])
                queue_offsets.append(offset + i)
                total += size_py
                count += 1
                next_phy_file_start = -1
            cur = (i + 1, count, total, max_phy_pulling, next_phy_file_start, lo, hi, readable)
        i, count, total, max_phy_pulling = cur[:4]
        if count:
            result.status = GetMessageStatus.FOUND
        result.buffer_total_size = total
        result.next_begin_offset = offset + i  # RocketMQ corrects only the error branches, not this
        result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory

    def _collect(
        self,
        result: GetMessageResult,
        cq: ConsumeQueue,
        cq_buf: memoryview,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int | None,
        tags_codes: Collection[int] | None,
        message_filter: MessageFilter | None,
        max_offset_py: int,
    ) -> None:
        """The ConsumeQueue walk of ``getMessage``, taking one reference per CommitLog file."""
        c = self.config
        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        max_filter_count = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
        n = min(len(cq_buf) // CQ_STORE_UNIT_SIZE, max_filter_count)
        entries = np.frombuffer(cq_buf, dtype=ENTRY_DTYPE, count=n)
        offs = entries["offset"].tolist()
        sizes = entries["size"].tolist()
        codes = None  # filtered pulls judge entries by window, the window doubling each time
        if tags_codes is not None or message_filter is not None:
            codes = entries["tags_code"].astype(np.int64)
        matched: list[bool] = []
        window = max(2 * max_msg_nums, 64)
        del entries
        memory = _TOTAL_PHYSICAL_MEMORY * c.access_message_in_memory_max_ratio // 100
        bytes_mem, count_mem = c.max_transfer_bytes_on_message_in_memory, c.max_transfer_count_on_message_in_memory
        bytes_disk, count_disk = c.max_transfer_bytes_on_message_in_disk, c.max_transfer_count_on_message_in_disk
        byte_cap = max_total_bytes if max_total_bytes is not None else 1 << 62
        mfq = self.commit_log.mapped_file_queue
        file_size = mfq.mapped_file_size
        buffers = result.buffers
        queue_offsets = result.queue_offsets
        total = 0
        count = 0
        next_phy_file_start = -1
        max_phy_pulling = 0
        lo = hi = readable = 0  # the CommitLog file held at the moment: [lo, hi), readable bytes
        view: memoryview | None = None
        i = 0
        while i < n:
            offset_py = offs[i]
            size_py = sizes[i]
            max_phy_pulling = offset_py
            if next_phy_file_start != -1 and offset_py < next_phy_file_start:
                i += 1
                continue
            if count:
                if max_msg_nums <= count:
                    break
                if max_offset_py - offset_py > memory:  # in disk
                    if total + size_py > bytes_disk or count > count_disk - 1:
                        break
                elif total + size_py > bytes_mem or count > count_mem - 1:
                    break
                if total + size_py > byte_cap:
                    break
            if codes is not None:
                if i >= len(matched):
                    matched += self._matched_by_entries(cq, codes[i : i + window], tags_codes, message_filter)
                    window *= 2
                if not matched[i]:
                    i += 1
                    continue
            if not lo <= offset_py < hi:
                lo, hi, readable, view = self._hold_file_at(result, offset_py, file_size)
            pos = offset_py - lo
            if view is None or not lo <= offset_py < hi or pos + size_py > readable:
                if not count:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = self.commit_log.roll_next_file(offset_py)
                i += 1
                continue
            record = view[pos : pos + size_py]
            if message_filter is not None and not message_filter.is_matched_by_commit_log(record):
                i += 1
                continue
            buffers.append(record)
            queue_offsets.append(offset + i)
            total += size_py
            count += 1
            next_phy_file_start = -1
            i += 1
        if count:
            result.status = GetMessageStatus.FOUND
        result.buffer_total_size = total
        result.next_begin_offset = offset + i  # RocketMQ corrects only the error branches, not this
        result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory

    @staticmethod
    def _matched_by_entries(
        cq: ConsumeQueue, codes: np.ndarray, tags_codes: Collection[int] | None, message_filter: MessageFilter | None
    ) -> list[bool]:
        """Which entries pass by their ConsumeQueue entry (and extension unit), all at once."""
        units = None
        known = np.ones(len(codes), bool)
        is_addr = codes <= MAX_ADDR
        if is_addr.any():
            if cq.ext is not None:
                units = cq.ext.get_many(codes)
                codes = np.where(units.found, units.tags_code, codes)
                known = ~is_addr | units.found
            else:
                known = ~is_addr
        ok = np.ones(len(codes), bool)
        if tags_codes is not None:  # 4.9: a tagsCode whose unit is gone is unknown, so it matches
            ok &= ~known | np.isin(codes, np.fromiter(tags_codes, np.int64, len(tags_codes)))
        if message_filter is not None:
            ok &= message_filter.is_matched_by_consume_queue_batch(codes, known, units)
        return ok.tolist()

    # -- lookups -----------------------------------------------------------------------

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        sbr = self.commit_log.get_message_at(commit_log_offset)
        if sbr is None:
            return None
        try:
            return decode_message(sbr.buffer)
        finally:
            sbr.release()

    def look_message_by_msg_id(self, msg_id: str) -> MessageExt | None:
        """Decode the offset from an offset msgId and read that record. Raises ValueError."""
        _, offset = decode_message_id(msg_id)
        msg = self.look_message_by_offset(offset)
        if msg is not None and msg.commit_log_offset != offset:
            return None
        return msg

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = 2**63 - 1
    ) -> list[MessageExt]:
        """Messages of ``topic`` with ``key`` in KEYS or as UNIQ_KEY, stored in [begin, end]."""
        return self.query_message_with_index(topic, key, max_num, begin, end)[0]

    def query_message_with_index(
        self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = 2**63 - 1
    ) -> tuple[list[MessageExt], QueryOffsetResult]:
        """``query_message`` plus the index's last update time and offset (QUERY_MESSAGE replies)."""
        res = self.index_service.query_offset(topic, key, max_num, begin, end)
        out: list[MessageExt] = []
        for phy in dict.fromkeys(res.phy_offsets):  # one record once, however often indexed
            m = self.look_message_by_offset(phy)
            if m is None or m.topic != topic:
                continue
            keys = (m.properties.get(MessageConst.PROPERTY_KEYS) or "").split(" ")
            if key in keys or m.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
                out.append(m)
        return out, res

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The queue offset whose store time is ``timestamp`` or nearest to it.

        Binary search over store times (which grow with the queue offset). With no exact
        match the closer neighbour wins, ties to the earlier one; only a later (earlier)
        neighbour is returned when the time is before (after) every message.
        """
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        if lo >= hi:
            return lo
        min_phy = self.commit_log.get_min_offset()

        def store_time(i: int) -> int:
            e = cq.get_entry(i)
            if e is None or e[0] < min_phy:
                return -1
            return self.commit_log.pickup_store_timestamp(e[0], e[1])

        class _Times:
            def __getitem__(self, i: int) -> int:
                return store_time(i)

            def __len__(self) -> int:
                return hi

        first_ge = bisect.bisect_left(_Times(), timestamp, lo, hi)  # type: ignore[arg-type]
        if first_ge < hi and store_time(first_ge) == timestamp:
            return first_ge
        left = first_ge - 1 if first_ge - 1 >= lo else None
        right = first_ge if first_ge < hi else None
        if left is None:
            return right if right is not None else lo
        if right is None:
            return left
        return right if abs(timestamp - store_time(left)) > abs(timestamp - store_time(right)) else left

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message (of one queue, or of the whole CommitLog); -1 if none."""
        if topic is None:
            min_off = self.commit_log.get_min_offset()
            if min_off < 0:
                return -1
            m = self.look_message_by_offset(min_off)
            return m.store_timestamp if m is not None else -1
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return -1
        e = cq.get_entry(cq.get_min_offset_in_queue())
        return self.commit_log.pickup_store_timestamp(e[0], e[1]) if e is not None else -1

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        e = cq.get_entry(consume_queue_offset) if cq is not None else None
        return self.commit_log.pickup_store_timestamp(e[0], e[1]) if e is not None else -1

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def select_one_message_by_offset(self, commit_log_offset: int) -> SelectMappedBufferResult | None:
        """The stored record at ``commit_log_offset`` as a held view (release it), or None."""
        return self.commit_log.get_message_at(commit_log_offset)

    def dispatched_entries(self, excluded_topics: Collection[str] = ()) -> int:
        """ConsumeQueue entries ever dispatched (each queue's max offset, summed)."""
        return sum(
            max(cq.get_max_offset_in_queue(), 0)
            for topic, queues in list(self.consume_queue_table.items())
            if topic not in excluded_topics
            for cq in list(queues.values())
        )

    def is_os_page_cache_busy(self) -> bool:
        return self.commit_log.is_os_page_cache_busy()

    def running_flags_description(self) -> str:
        return self.running_flags.describe()

    def runtime_info(self) -> dict[str, object]:
        """The store's part of GET_BROKER_RUNTIME_INFO (``DefaultMessageStore.getRuntimeInfo``)."""
        config = self.config
        begin = self.commit_log.begin_time_in_lock
        ratio = disk_partition_used_ratio(config.commit_log_dir)
        info: dict[str, object] = {
            "commitLogMinOffset": self.get_min_phy_offset(),
            "commitLogMaxOffset": self.get_max_phy_offset(),
            "dispatchBehindBytes": self.dispatch_behind_bytes(),
            "runningFlags": self.running_flags.describe(),
            "earliestMessageTimeStamp": self.get_earliest_message_time(),
            "pageCacheLockTimeMills": int(time.time() * 1000) - begin if begin else 0,
            "commitLogDiskRatio": ratio,
            f"commitLogDiskRatio_{config.commit_log_dir}": ratio,
            "consumeQueueDiskRatio": disk_partition_used_ratio(config.consume_queue_dir),
            **self.store_stats_service.runtime_info(),
            **store_health_info(self),
        }
        if self.ha_service is not None:
            info.update(self.ha_service.runtime_info())
        if isinstance(self.commit_log, DLedgerCommitLog):
            info.update(dledger_runtime_info(self.commit_log.replicated_log.status()))
        tsp = self.transient_store_pool
        info["remainTransientStoreBufferNumbs"] = tsp.available_buffer_nums() if tsp is not None else INT_MAX
        mfq = self.commit_log.mapped_file_queue
        if tsp is not None:
            info["remainHowManyDataToCommit"] = human_readable_byte_count(
                mfq.get_max_wrote_position() - mfq.committed_where
            )
        info["remainHowManyDataToFlush"] = human_readable_byte_count(mfq.get_max_offset() - mfq.flushed_where)
        try:
            st = os.statvfs(config.store_path_root_dir)
        except OSError:
            pass
        else:
            total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            info["commitLogDirCapacity"] = (
                f"Total : {human_readable_byte_count(total)}, Free : {human_readable_byte_count(free)}."
            )
        return info

    # -- replication facts ------------------------------------------------------------------

    def ha_port(self) -> int | None:
        """The HA port listened on (None: no HA service)."""
        return self.ha_service.port if self.ha_service is not None else None

    def slave_fall_behind_bytes(self) -> int:
        return self.ha_service.slave_fall_behind_bytes() if self.ha_service is not None else 0

    def ha_connection_count(self) -> int:
        return self.ha_service.connection_count if self.ha_service is not None else 0

    # -- retention ---------------------------------------------------------------------

    def _init_clean_services(self) -> None:
        self._clean_stop = threading.Event()
        self._clean_lock = threading.Lock()
        self._clean_thread: threading.Thread | None = None
        # first clean-up run after this long (cleanResourceInitialDelay; RocketMQ: 60 s); set it before start()
        self.clean_files_initial_delay_ms = self.config.clean_resource_initial_delay
        # DLedger mode: DLedger expires its own data files; this takes a plain CommitLog's only (4.9)
        cleaned = (
            self.commit_log.old_file_queue
            if isinstance(self.commit_log, DLedgerCommitLog)
            else self.commit_log.mapped_file_queue
        )
        self.clean_commit_log_service = CleanCommitLogService(
            self.config, cleaned, self.running_flags,
            reput_offset=lambda: self.reput_message_service.reput_from_offset,
            on_disk_full=self._note_disk_full,
        )  # fmt: skip
        self.clean_consume_queue_service = CleanConsumeQueueService(
            self.commit_log.get_min_offset, self.all_consume_queues, self.index_service,
            lambda: self.config.delete_consume_queue_files_interval, self._clean_stop,
        )  # fmt: skip

    def _note_disk_full(self, why: str) -> None:
        self.last_disk_full_error = why

    def clean_files_periodically(self) -> None:
        """One retention pass: CommitLog files, then the ConsumeQueue and index files they leave behind.

        Does nothing unless the store is started (its files may be unmapped otherwise).
        """
        with self._clean_lock:
            if self.shutdown_flag:
                return
            self.clean_commit_log_service.run()
            self.clean_consume_queue_service.run()

    def execute_delete_files_manually(self) -> None:
        """Have the next 20 clean-up runs delete expired CommitLog files whatever ``deleteWhen`` says."""
        self.clean_commit_log_service.execute_delete_files_manually()

    def _start_clean_scheduler(self) -> None:
        if self._clean_thread is not None:
            return
        self._clean_stop.clear()
        self._clean_thread = threading.Thread(target=self._clean_loop, name="StoreScheduledThread", daemon=True)
        self._clean_thread.start()

    def _stop_clean_scheduler(self) -> None:
        self._clean_stop.set()
        t, self._clean_thread = self._clean_thread, None
        if t is not None:
            t.join(timeout=30)

    def _space_ok(self) -> bool:
        try:
            return self.clean_commit_log_service.check_disk_space()
        except Exception:
            log.exception("disk space check failed")
            return True

    def _clean_loop(self) -> None:
        """``cleanFilesPeriodically`` at a fixed rate: after the initial delay, then every
        cleanResourceInterval; the disk marks alone every DISK_CHECK_INTERVAL_S from the start."""
        stop = self._clean_stop
        next_run = time.monotonic() + self.clean_files_initial_delay_ms / 1000
        while not stop.wait(max(0.0, min(next_run - time.monotonic(), DISK_CHECK_INTERVAL_S))):
            if time.monotonic() < next_run:
                self._space_ok()
                continue
            try:
                self.clean_files_periodically()
            except Exception:
                log.exception("clean files periodically failed")
            period_s = max(self.config.clean_resource_interval, 10) / 1000
            next_run = max(next_run + period_s, time.monotonic())
