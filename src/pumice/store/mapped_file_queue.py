"""MappedFileQueue: one directory of equal-sized segment files, as one logical byte range.

Files are named by the offset of their first byte (20 digits), so name order is offset
order. The first file need not start at 0: old files are deleted by retention. Offsets in
the API are absolute (file_from_offset + position).

=================  ====================================================================
flushed_where      everything before it is on disk
committed_where    everything before it is committed (≥ flushed_where)
store_timestamp    store time of the last flushed data (for the checkpoint)
=================  ====================================================================

A file cut from the queue's end (``truncate_dirty_files``, ``delete_last_mapped_file``,
``destroy``) that a reader still holds cannot be deleted by ``MappedFile.destroy``; its name
goes at once all the same (``_destroy_cut``): the next file made at its offset must start
empty, not open the old bytes behind the new ones, which a later recovery would take for
records. Files cut from the start (retention) stay listed until they can be deleted.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections.abc import Callable

from pumice.store.allocate_mapped_file_service import AllocateMappedFileService
from pumice.store.mapped_file import MappedFile, offset_to_file_name

log = logging.getLogger(__name__)

_INT64 = struct.Struct(">q")


def _all_zero(path: str) -> bool:
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            if chunk.count(0) != len(chunk):
                return False
    return True


class MappedFileQueue:
    def __init__(
        self,
        store_path: str,
        mapped_file_size: int,
        allocate_service: AllocateMappedFileService | None = None,
    ) -> None:
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.allocate_service = allocate_service
        self.mapped_files: list[MappedFile] = []  # replaced, never mutated in place (copy on write)
        self._lock = threading.Lock()
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0
        # flushes that wrote data: the last one's cost and end, the longest (store health)
        self.flush_last_cost_ms = self.flush_max_cost_ms = self.flush_last_ms = 0
        # called with each flush's seconds when it wrote something (pumice.metrics), on the flushing thread
        self.on_flush: Callable[[float], None] | None = None
        self.last_create_error: OSError | None = None  # why the last file could not be made

    # -- load --------------------------------------------------------------------------

    def load(self) -> bool:
        """Map every file in the directory as full; recovery sets the real positions.

        A file whose length is not the configured size fails the load (RocketMQ: "please
        check it manually"): data after it would be lost, and its bytes could come back as
        records once the queue rewrites that file. Only a last file that holds nothing (a
        kill between creating it and sizing it) is removed instead.
        """
        if not os.path.isdir(self.store_path):
            return True
        names = sorted(n for n in os.listdir(self.store_path) if n.isdigit() and len(n) == 20)
        files: list[MappedFile] = []
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            length = os.path.getsize(path)
            if length != self.mapped_file_size:
                if i == len(names) - 1 and _all_zero(path):
                    log.warning("%s length %d holds nothing: removed", path, length)
                    os.remove(path)
                    break
                log.error(
                    "%s length %d not matched message store config value %d, please check it manually",
                    path, length, self.mapped_file_size,
                )  # fmt: skip
                for mf in files:
                    mf.close()
                return False
            try:
                mf = MappedFile(path, self.mapped_file_size)
            except OSError:
                log.exception("load file %s error", path)
                return False
            mf.set_positions(self.mapped_file_size)
            files.append(mf)
            log.info("load %s OK", path)
        self.mapped_files = files
        return True

    # -- lookups -----------------------------------------------------------------------

    def get_first_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[0] if files else None

    def get_last_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[-1] if files else None

    def get_last_mapped_file_create(self, start_offset: int, need_create: bool = True) -> MappedFile | None:
        """The last file, creating the first or the next one when there is none or it is full."""
        last = self.get_last_mapped_file()
        create_offset = -1
        if last is None:
            create_offset = start_offset - start_offset % self.mapped_file_size
        elif last.is_full():
            create_offset = last.file_from_offset + self.mapped_file_size
        if create_offset != -1 and need_create:
            return self._try_create_mapped_file(create_offset)
        return last

    def _try_create_mapped_file(self, create_offset: int) -> MappedFile | None:
        next_path = os.path.join(self.store_path, offset_to_file_name(create_offset))
        next_next = os.path.join(self.store_path, offset_to_file_name(create_offset + self.mapped_file_size))
        mf: MappedFile | None = None
        try:
            if self.allocate_service is not None:
                mf = self.allocate_service.put_request_and_return_mapped_file(
                    next_path, next_next, self.mapped_file_size
                )
            else:
                mf = MappedFile(next_path, self.mapped_file_size)
        except OSError as e:  # a full disk or no descriptor left: the caller refuses, and retries later
            if self.last_create_error is None or self.last_create_error.errno != e.errno:
                log.error("create mapped file %s failed: %s", next_path, e)
            self.last_create_error = e
            return None
        self.last_create_error = None
        if mf is not None:
            with self._lock:
                if not self.mapped_files:
                    mf.first_create_in_queue = True
                self.mapped_files = [*self.mapped_files, mf]
        return mf

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        files = self.mapped_files
        if not files:
            return None
        first, last = files[0], files[-1]
        size = self.mapped_file_size
        if offset < first.file_from_offset or offset >= last.file_from_offset + size:
            log.debug(
                "Offset not matched. Request offset: %d, firstOffset: %d, lastOffset: %d, mappedFileSize: %d, "
                "mappedFiles count: %d", offset, first.file_from_offset, last.file_from_offset + size, size,
                len(files),
            )  # fmt: skip
        else:
            index = offset // size - first.file_from_offset // size
            if 0 <= index < len(files):
                mf = files[index]
                if mf.file_from_offset <= offset < mf.file_from_offset + size:
                    return mf
            for mf in files:  # the computed index can be wrong if a file is missing
                if mf.file_from_offset <= offset < mf.file_from_offset + size:
                    return mf
        return first if return_first_on_not_found else None

    def get_mapped_file_by_time(self, timestamp: int) -> MappedFile | None:
        files = self.mapped_files
        for mf in files:
            if mf.get_last_modified_timestamp() >= timestamp:
                return mf
        return files[-1] if files else None

    def get_min_offset(self) -> int:
        files = self.mapped_files
        return files[0].file_from_offset if files else -1

    def get_max_offset(self) -> int:
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.read_position if last else 0

    def get_max_wrote_position(self) -> int:
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.wrote_position if last else 0

    # -- commit / flush ----------------------------------------------------------------

    def flush(self, flush_least_pages: int) -> bool:
        """Flush the file holding ``flushed_where``; True when nothing new was flushed."""
        result = True
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is not None:
            tmp_ts = mf.store_timestamp
            began = time.monotonic()
            offset = mf.flush(flush_least_pages)
            where = mf.file_from_offset + offset
            result = where == self.flushed_where
            if not result:
                took = time.monotonic() - began
                if self.on_flush is not None:
                    self.on_flush(took)
                self.flush_last_cost_ms = cost = int(took * 1000)
                self.flush_max_cost_ms = max(self.flush_max_cost_ms, cost)
                self.flush_last_ms = int(time.time() * 1000)
            self.flushed_where = where
            if flush_least_pages == 0:
                self.store_timestamp = tmp_ts
        return result

    def commit(self, commit_least_pages: int) -> bool:
        result = True
        mf = self.find_mapped_file_by_offset(self.committed_where, self.committed_where == 0)
        if mf is not None:
            offset = mf.commit(commit_least_pages)
            where = mf.file_from_offset + offset
            result = where == self.committed_where
            self.committed_where = where
        return result

    # -- truncate / delete -------------------------------------------------------------

    def truncate_dirty_files(self, offset: int) -> None:
        """Cut the queue at ``offset``: the file holding it is trimmed, later ones removed."""
        will_remove: list[MappedFile] = []
        for mf in self.mapped_files:
            tail = mf.file_from_offset + self.mapped_file_size
            if tail > offset:
                if offset >= mf.file_from_offset:
                    pos = offset % self.mapped_file_size
                    if pos < mf.wrote_position:
                        # a later recovery must never read stale records past the cut
                        mf.zero_range(pos, mf.wrote_position)
                    mf.set_positions(pos)
                else:
                    will_remove.append(mf)
        self._destroy_cut(will_remove)
        self.delete_expired_file(will_remove)

    @staticmethod
    def _destroy_cut(files: list[MappedFile], interval_forcibly_ms: int = 1000) -> None:
        """Destroy files cut from the queue's end; one still held (a pull's view, a transport
        still sending it, HA) is unlinked now and unmapped when its reader lets go."""
        for mf in files:
            if not mf.destroy(interval_forcibly_ms):
                mf.unlink()
                log.warning("%s was cut while still read: unlinked, unmapped when the reader lets go", mf.file_name)

    def delete_expired_file(self, files: list[MappedFile]) -> None:
        if not files:
            return
        gone = {id(f) for f in files}
        with self._lock:
            self.mapped_files = [f for f in self.mapped_files if id(f) not in gone]

    def delete_last_mapped_file(self) -> None:
        last = self.get_last_mapped_file()
        if last is not None:
            self._destroy_cut([last])
            self.delete_expired_file([last])

    def delete_expired_file_by_time(
        self,
        expired_time_ms: int,
        delete_files_interval_ms: int,
        interval_forcibly_ms: int,
        clean_immediately: bool,
        delete_file_batch_max: int = 10,
        keep_from_offset: int | None = None,
    ) -> int:
        """Delete files (never the last) whose mtime is older than ``expired_time_ms``.

        Files holding anything at or past ``keep_from_offset`` stay, whatever their age.
        """
        files = self.mapped_files[:-1]
        if keep_from_offset is not None:
            files = [f for f in files if f.file_from_offset + self.mapped_file_size <= keep_from_offset]
        deleted: list[MappedFile] = []
        now = int(time.time() * 1000)
        for i, mf in enumerate(files):
            if now >= mf.get_last_modified_timestamp() + expired_time_ms or clean_immediately:
                if not mf.destroy(interval_forcibly_ms):
                    break
                deleted.append(mf)
                if len(deleted) >= delete_file_batch_max:
                    break
                if delete_files_interval_ms > 0 and i + 1 < len(files):
                    time.sleep(delete_files_interval_ms / 1000)  # only between deletions
            else:
                break
        self.delete_expired_file(deleted)
        return len(deleted)

    def delete_expired_file_by_offset(self, offset: int, unit_size: int, interval_forcibly_ms: int = 60_000) -> int:
        """Delete files (never the last, oldest first) whose last unit's leading int64 is below ``offset``.

        For a ConsumeQueue the leading int64 of an entry is its commitLogOffset, so a file
        goes once every record it points to is before the CommitLog's min offset. A file
        destroyed before but still held by a reader (no longer available) is destroyed again.
        Stops at the first file that must stay, so only a prefix of the queue is removed.
        """
        deleted: list[MappedFile] = []
        for mf in self.mapped_files[:-1]:
            sbr = mf.select_mapped_buffer(self.mapped_file_size - unit_size, unit_size)
            if sbr is not None:
                try:
                    (max_offset_in_file,) = _INT64.unpack_from(sbr.buffer, 0)
                finally:
                    sbr.release()
                destroy = max_offset_in_file < offset
                if destroy:
                    log.info(
                        "physic min offset %d, logics in current mappedFile max offset %d, delete it",
                        offset, max_offset_in_file,
                    )  # fmt: skip
            elif not mf.available:
                log.warning("found a hanged consume queue file %s, attempting to delete it", mf.file_name)
                destroy = True
            else:
                log.warning("%s is not full (read position %d), stop deleting", mf.file_name, mf.read_position)
                break
            if not destroy or not mf.destroy(interval_forcibly_ms):
                break
            deleted.append(mf)
        self.delete_expired_file(deleted)
        return len(deleted)

    def retry_delete_first_file(self, interval_forcibly_ms: int) -> bool:
        """Destroy the first file again if an earlier destroy left it hanging (still referenced).

        True when such a file was found and is now gone.
        """
        mf = self.get_first_mapped_file()
        if mf is None or mf.available:
            return False
        log.warning("the mapped file was destroyed once, but still alive, %s", mf.file_name)
        if not mf.destroy(interval_forcibly_ms):
            log.warning("the mapped file re-delete failed, %s", mf.file_name)
            return False
        log.info("the mapped file re-delete OK, %s", mf.file_name)
        self.delete_expired_file([mf])
        return True

    def shutdown(self, interval_forcibly_ms: int = 0) -> None:
        for mf in self.mapped_files:
            mf.close()

    def destroy(self) -> None:
        self._destroy_cut(self.mapped_files, 1000 * 3)
        self.mapped_files = []
        self.flushed_where = 0
        self.committed_where = 0
        if os.path.isdir(self.store_path):
            try:
                os.rmdir(self.store_path)
            except OSError:
                pass
