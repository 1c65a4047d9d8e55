"""RunningFlags: the store's state bits. Any bit set makes the store refuse writes.

========================  ==================================================================
bit                       set when; cleared when
========================  ==================================================================
NOT_READABLE              (unused by Pumice's store)
NOT_WRITEABLE             (unused by Pumice's store)
WRITE_LOGICS_QUEUE_ERROR  a ConsumeQueue write failed; cleared by the next dispatch that
                          succeeds (dispatch stops at the failed record and retries)
WRITE_INDEX_FILE_ERROR    an IndexFile write failed; cleared likewise
DISK_FULL                 a partition is past diskSpaceWarningLevelRatio, or a reservation
                          found no space; cleared when usage is back under the forced
                          clean-up ratio
FLUSH_FAILED              a sync of a store file failed (Pumice's bit); never cleared: the
                          kernel may have dropped the pages it could not write, so only a
                          restart, which re-reads the files, makes the store writeable again
WRITE_FAILED              a write of buffered CommitLog data to its file failed (Pumice's
                          bit); cleared by the next commit that succeeds (it is retried)
========================  ==================================================================
"""

from __future__ import annotations

import threading

NOT_READABLE_BIT = 1
NOT_WRITEABLE_BIT = 1 << 1
WRITE_LOGICS_QUEUE_ERROR_BIT = 1 << 2
WRITE_INDEX_FILE_ERROR_BIT = 1 << 3
DISK_FULL_BIT = 1 << 4
FLUSH_FAILED_BIT = 1 << 5
WRITE_FAILED_BIT = 1 << 6

_NOT_WRITEABLE_MASK = (
    NOT_WRITEABLE_BIT
    | WRITE_LOGICS_QUEUE_ERROR_BIT
    | DISK_FULL_BIT
    | WRITE_INDEX_FILE_ERROR_BIT
    | FLUSH_FAILED_BIT
    | WRITE_FAILED_BIT
)


class RunningFlags:
    def __init__(self) -> None:
        self.flag_bits = 0
        self._lock = threading.Lock()

    def _set(self, bit: int, on: bool) -> bool:
        """Set or clear ``bit``; returns whether it was clear before."""
        with self._lock:
            was_clear = not self.flag_bits & bit
            self.flag_bits = self.flag_bits | bit if on else self.flag_bits & ~bit
            return was_clear

    def is_readable(self) -> bool:
        return not self.flag_bits & NOT_READABLE_BIT

    def is_writeable(self) -> bool:
        return not self.flag_bits & _NOT_WRITEABLE_MASK

    def make_logics_queue_error(self) -> bool:
        """Mark a ConsumeQueue write failure; True if it was not marked before."""
        return self._set(WRITE_LOGICS_QUEUE_ERROR_BIT, True)

    def make_index_file_error(self) -> bool:
        return self._set(WRITE_INDEX_FILE_ERROR_BIT, True)

    def clear_dispatch_errors(self) -> bool:
        """A dispatch succeeded; True if a ConsumeQueue or index error was marked before."""
        bits = WRITE_LOGICS_QUEUE_ERROR_BIT | WRITE_INDEX_FILE_ERROR_BIT
        if not self.flag_bits & bits:
            return False
        with self._lock:
            was = bool(self.flag_bits & bits)
            self.flag_bits &= ~bits
            return was

    def make_flush_failed(self) -> bool:
        """Mark a failed sync, for good; True if it was not marked before."""
        return self._set(FLUSH_FAILED_BIT, True)

    def make_write_failed(self) -> bool:
        return self._set(WRITE_FAILED_BIT, True)

    def clear_write_failed(self) -> bool:
        """A commit succeeded; True if a failed write was marked before."""
        return bool(self.flag_bits & WRITE_FAILED_BIT) and not self._set(WRITE_FAILED_BIT, False)

    def is_flush_failed(self) -> bool:
        return bool(self.flag_bits & FLUSH_FAILED_BIT)

    def get_and_make_disk_full(self) -> bool:
        """Mark the disk full; True if it was not marked before."""
        return self._set(DISK_FULL_BIT, True)

    def get_and_make_disk_ok(self) -> bool:
        """Clear the disk-full mark; True if it was clear already."""
        return self._set(DISK_FULL_BIT, False)

    def describe(self) -> str:
        names = [
            (NOT_READABLE_BIT, "NOT_READABLE"), (NOT_WRITEABLE_BIT, "NOT_WRITEABLE"),
            (WRITE_LOGICS_QUEUE_ERROR_BIT, "WRITE_LOGICS_QUEUE_ERROR"),
            (WRITE_INDEX_FILE_ERROR_BIT, "WRITE_INDEX_FILE_ERROR"), (DISK_FULL_BIT, "DISK_FULL"),
            (FLUSH_FAILED_BIT, "FLUSH_FAILED"), (WRITE_FAILED_BIT, "WRITE_FAILED"),
        ]  # fmt: skip
        return "|".join(n for b, n in names if self.flag_bits & b) or "OK"
