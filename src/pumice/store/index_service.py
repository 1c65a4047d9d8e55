"""IndexService: the list of IndexFiles, building keys from dispatched records, and queries.

For each dispatched record it indexes ``topic#UNIQ_KEY`` first, then ``topic#key`` for every
space-separated token of KEYS (ROLLBACK records are not indexed). When the current file is
full a new one is created, and the full one is flushed in the background (with any full
file before it not flushed yet, so they reach the disk in order), moving the checkpoint's
``indexMsgTimestamp`` and ``dispatchcheckpoint``'s ``indexOffset``. After a crash, files
past either are rebuilt. Queries walk the files from newest to oldest.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pumice.common.java_hash import index_key_hash_list, index_key_hashes
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.store.disk_io import StoreIOError
from pumice.store.dispatch_checkpoint import DispatchCheckpoint
from pumice.store.dispatch_request import DispatchRequest
from pumice.store.index_file import SMALL_BATCH, IndexFile
from pumice.store.message_store_config import MessageStoreConfig
from pumice.store.store_checkpoint import StoreCheckpoint

log = logging.getLogger(__name__)


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def index_file_name(ts_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time, as RocketMQ's ``UtilAll.timeMillisToHumanString``."""
    t = time.localtime(ts_ms / 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ts_ms % 1000:03d}"


@dataclass(slots=True)
class QueryOffsetResult:
    phy_offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


class IndexService:
    def __init__(
        self,
        config: MessageStoreConfig,
        checkpoint: StoreCheckpoint | None = None,
        on_io_error: Callable[[StoreIOError], None] = lambda e: None,
    ) -> None:
        self.config = config
        self.on_io_error = on_io_error
        self.store_path = config.index_dir
        self.hash_slot_num = config.max_hash_slot_num
        self.index_num = config.max_index_num
        self.checkpoint = checkpoint
        self.dispatch_checkpoint: DispatchCheckpoint | None = None
        self.index_file_list: list[IndexFile] = []
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()  # full files reach the disk one at a time, in order
        self._flushed: set[str] = set()  # full files flushed whole
        # smallest CommitLog offset an index file dropped at load covered (-1: none dropped)
        self.pruned_from_phy_offset = -1
        # told of a failed sync (the store stops taking writes)
        self.last_create_error: OSError | None = None  # why the last index file could not be made

    def load(self, last_exit_ok: bool) -> bool:
        if not os.path.isdir(self.store_path):
            return True
        dcp = self.dispatch_checkpoint
        durable_below = dcp.index_offset if not last_exit_ok and dcp is not None and dcp.known else -1
        lost = False  # a file past what was flushed: it and every later one are rebuilt
        for name in sorted(os.listdir(self.store_path)):
            if not name.isdigit():
                continue
            path = os.path.join(self.store_path, name)
            try:
                f = IndexFile(path, self.hash_slot_num, self.index_num)
            except (OSError, ValueError):
                log.exception("load index file %s failed", path)
                return False
            f.load()
            if durable_below >= 0 and (lost or f.index_count <= 1 or f.end_phy_offset > durable_below):
                lost = True
                self._note_pruned(f)
                if self.pruned_from_phy_offset < 0 or durable_below < self.pruned_from_phy_offset:
                    self.pruned_from_phy_offset = durable_below
                f.destroy(0)
                log.info("destroy index file %s: not flushed whole before the crash (indexOffset %d)", path,
                         durable_below)  # fmt: skip
                continue
            if (
                not last_exit_ok
                and self.checkpoint is not None
                and f.end_timestamp > self.checkpoint.index_msg_timestamp
            ):
                self._note_pruned(f)
                f.destroy(0)
                log.info("destroy index file %s written after the last checkpoint", path)
                continue
            if f.index_count <= 1 and self.index_file_list:
                # created when the one before filled, killed before its first put wrote the
                # header: it starts where that one ends (else the redo indexes all of it again)
                prev = self.index_file_list[-1]
                f.begin_phy_offset = f.end_phy_offset = prev.end_phy_offset
                f.begin_timestamp = f.end_timestamp = prev.end_timestamp
            log.info("load index file OK, %s", path)
            self.index_file_list.append(f)
        return True

    def _note_pruned(self, f: IndexFile) -> None:
        begin = f.begin_phy_offset if f.index_count > 1 else f.end_phy_offset
        if self.pruned_from_phy_offset < 0 or begin < self.pruned_from_phy_offset:
            self.pruned_from_phy_offset = begin

    def prune_beyond(self, commit_log_end: int) -> int:
        """Drop index files holding entries at or past ``commit_log_end`` (the CommitLog was cut).

        Returns the smallest CommitLog offset the dropped files covered, so dispatch can
        rebuild them, or -1 when none was dropped.
        """
        with self._lock:
            keep: list[IndexFile] = []
            dropped_from = -1
            for f in self.index_file_list:
                if dropped_from < 0 and f.index_count > 1 and f.end_phy_offset >= commit_log_end:
                    dropped_from = f.begin_phy_offset
                if dropped_from >= 0:
                    log.warning("destroy index file %s: it indexes past the CommitLog end %d", f.file_name,
                                commit_log_end)  # fmt: skip
                    f.destroy(0)
                else:
                    keep.append(f)
            self.index_file_list = keep
        return dropped_from

    # -- build -------------------------------------------------------------------------

    def _last_file(self) -> IndexFile | None:
        """The file to write to, creating one when there is none or the last is full."""
        with self._lock:
            prev: IndexFile | None = None
            if self.index_file_list:
                last = self.index_file_list[-1]
                if not last.is_write_full():
                    return last
                prev = last
            end_phy = prev.end_phy_offset if prev else 0
            end_ts = prev.end_timestamp if prev else 0
            now = int(time.time() * 1000)
            path = os.path.join(self.store_path, index_file_name(now))
            while os.path.exists(path):  # two files in one millisecond
                now += 1
                path = os.path.join(self.store_path, index_file_name(now))
            try:
                f = IndexFile(path, self.hash_slot_num, self.index_num, end_phy, end_ts)
            except OSError as e:  # no space or no descriptor: dispatch retries; logged once per cause
                if self.last_create_error is None or self.last_create_error.errno != e.errno:
                    log.error("create index file %s failed: %s", path, e)
                self.last_create_error = e
                return None
            self.last_create_error = None
            self.index_file_list.append(f)
        if prev is not None:
            threading.Thread(target=self._flush_full, args=(prev,), name="FlushIndexFileThread", daemon=True).start()
        return f

    def _flush_full(self, f: IndexFile) -> None:
        try:
            with self._flush_lock:
                if f.file_name in self._flushed:
                    return
                with self._lock:
                    files = list(self.index_file_list)
                for g in files:  # a full file before this one whose own thread has not run yet
                    if g.file_name not in self._flushed:
                        g.flush()
                        self._flushed.add(g.file_name)
                    if g is f:
                        break
                if self.checkpoint is not None and f.end_timestamp > self.checkpoint.index_msg_timestamp:
                    self.checkpoint.index_msg_timestamp = f.end_timestamp
                    self.checkpoint.flush()
                dcp = self.dispatch_checkpoint
                if dcp is not None and f.end_phy_offset > dcp.index_offset:
                    dcp.update(index_offset=f.end_phy_offset)
        except StoreIOError as e:  # the checkpoints stay before this file: recovery rebuilds it
            self.on_io_error(e)

    def build_index(self, req: DispatchRequest) -> None:
        self.build_index_batch((req,))

    def build_index_batch(self, reqs: Sequence[DispatchRequest]) -> bool:
        """Index many dispatched records at once; False if no index file could be had."""
        f = self._last_file()
        if f is None:
            return False
        # A file with entries indexed its last record whole (RocketMQ skips only offsets below
        # it, so a re-dispatch after a crash indexed that record twice). A file without any
        # took end_phy from the one before, whose last record may have had keys left for a
        # file since dropped: that record is indexed again (a query drops the duplicates).
        end_phy = f.end_phy_offset
        if f.index_count > 1:
            done_through = end_phy
        else:
            done_through = end_phy - 1 if end_phy > 0 else -1
        keys: list[str] = []
        phys: list[int] = []
        times: list[int] = []
        rollback = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
        for req in reqs:
            if req.commit_log_offset <= done_through:
                continue  # already indexed
            if req.sys_flag & MessageSysFlag.TRANSACTION_MASK == rollback:
                continue
            topic = req.topic
            if req.uniq_key:
                keys.append(f"{topic}#{req.uniq_key}")
                phys.append(req.commit_log_offset)
                times.append(req.store_timestamp)
            if req.keys:
                for k in req.keys.split(" "):
                    if k:
                        keys.append(f"{topic}#{k}")
                        phys.append(req.commit_log_offset)
                        times.append(req.store_timestamp)
        if not keys:
            return True
        if len(keys) < SMALL_BATCH:
            hashes: Sequence[int] | np.ndarray = index_key_hash_list(keys)
            phy_arr: Sequence[int] | np.ndarray = phys
            ts_arr: Sequence[int] | np.ndarray = times
        else:
            hashes = index_key_hashes(keys)
            phy_arr = np.array(phys, dtype=np.int64)
            ts_arr = np.array(times, dtype=np.int64)
        with self._lock:
            while len(hashes):
                n = f.put_batch(hashes, phy_arr, ts_arr)
                hashes, phy_arr, ts_arr = hashes[n:], phy_arr[n:], ts_arr[n:]
                if len(hashes):
                    log.info("index file full, roll to a new one: %s", f.file_name)
                    nf = self._last_file()
                    if nf is None:
                        return False
                    f = nf
        return True

    # -- query -------------------------------------------------------------------------

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """CommitLog offsets for ``topic#key`` stored in [begin, end], newest first."""
        out: list[int] = []
        last_ts = 0
        last_phy = 0
        k = build_key(topic, key)
        with self._lock:
            files = list(self.index_file_list)
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if i == len(files) - 1:
                last_ts = f.end_timestamp
                last_phy = f.end_phy_offset
            if f.is_time_matched(begin, end):
                out.extend(f.select_phy_offset(k, max_num - len(out), begin, end))
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return QueryOffsetResult(out, last_ts, last_phy)

    # -- maintenance -------------------------------------------------------------------

    def delete_expired_file(self, min_commit_log_offset: int) -> int:
        """Delete files (never the last) whose entries all point below the CommitLog min."""
        with self._lock:
            files = self.index_file_list[:-1]
            doomed = [f for f in files if f.end_phy_offset < min_commit_log_offset]
            gone = 0
            for f in doomed:
                if f.destroy(3000):
                    gone += 1
                    self.index_file_list.remove(f)
                else:
                    break
        return gone

    def flush(self) -> None:
        with self._lock:
            files = list(self.index_file_list)
        for f in files:
            f.flush()

    def shutdown(self) -> None:
        with self._flush_lock, self._lock:
            flushed = True
            for f in self.index_file_list:
                try:
                    f.flush()
                except StoreIOError as e:
                    flushed = False
                    self.on_io_error(e)
                f.close()
            dcp = self.dispatch_checkpoint
            if flushed and self.index_file_list and dcp is not None:
                end = self.index_file_list[-1].end_phy_offset
                if end > dcp.index_offset:
                    try:
                        dcp.update(index_offset=end)
                    except StoreIOError as e:
                        self.on_io_error(e)
            self.index_file_list = []
            self._flushed.clear()

    def destroy(self) -> None:
        with self._lock:
            for f in self.index_file_list:
                f.destroy(3000)
            self.index_file_list = []
