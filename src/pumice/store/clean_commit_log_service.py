"""CleanCommitLogService: deletes expired CommitLog files, and watches the disks.

Each ``run()`` (every ``cleanResourceInterval``, 10 s, the first ``cleanResourceInitialDelay``,
60 s, after start: ``pumice.store.message_store``) checks three triggers; any one of them
starts a deletion pass:

==============  ===========================================================================
trigger         fires when
==============  ===========================================================================
time            the local hour is one of ``deleteWhen`` (``"04"``; ``"04;16"`` lists several
                hours), so it stays true for the whole hour
space           the CommitLog or the ConsumeQueue partition is more than
                ``diskMaxUsedSpaceRatio`` % used (75, clamped to 10–95), or its usage cannot
                be read
manual          ``execute_delete_files_manually()`` was called: the next 20 runs fire
==============  ===========================================================================

A pass deletes CommitLog files whose mtime is more than ``fileReservedTime`` hours old,
oldest first, stopping at the first file that must stay, ``deleteCommitLogFilesInterval``
ms apart, at most 10 per pass, never the last file. No consumer progress is looked at.

Disk usage (used / total of a partition) is measured on every run, for both partitions, and
between runs by ``check_disk_space`` (every 0.5 s from start, and before the CommitLog takes
a new chunk or file):

=================================  =======================================================
usage                              effect
=================================  =======================================================
> ``diskSpaceWarningLevelRatio``   the disk is marked full (``RunningFlags``): puts are
(0.90)                             refused with SERVICE_NOT_AVAILABLE, reads go on; and
                                   files are cleaned immediately, as below
> ``diskSpaceCleanForciblyRatio``  clean immediately: with ``cleanFileForciblyEnable`` the
(0.85)                             pass ignores ``fileReservedTime`` (order and the batch
                                   limit still hold)
≤ 0.85 on both partitions          the disk-full mark is cleared: puts resume (between
                                   0.85 and 0.90 the mark stays as it was)
=================================  =======================================================

A file still referenced by a reader is only marked unavailable when destroyed; it goes once
the references are dropped, or ``destroyMapedFileIntervalForcibly`` ms after the first
attempt. Every ``redeleteHangedFileInterval`` ms, ``redelete_hanged_file`` destroys such a
first file again.

Both the usage function (path → used/total, negative when unknown) and the clock (epoch
seconds) can be injected, so tests can simulate a full disk or another hour.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pumice.store.running_flags import DISK_FULL_BIT

if TYPE_CHECKING:
    from pumice.store.mapped_file_queue import MappedFileQueue
    from pumice.store.message_store_config import MessageStoreConfig
    from pumice.store.running_flags import RunningFlags

log = logging.getLogger(__name__)

MAX_MANUAL_DELETE_FILE_TIMES = 20
DELETE_FILES_BATCH_MAX = 10


def disk_partition_used_ratio(path: str) -> float:
    """Used / total of the partition holding ``path`` (its nearest existing ancestor); -1 if unknown."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            return -1.0
        p = parent
    try:
        usage = shutil.disk_usage(p)
    except OSError:
        log.exception("cannot read the disk usage of %s", p)
        return -1.0
    if usage.total <= 0:
        return -1.0
    return usage.used / usage.total


def is_it_time_to_do(when: str, hour: int) -> bool:
    """True if ``hour`` is one of the ``;``-separated hours in ``when`` (``"04;16"``); bad entries never match."""
    for w in when.split(";"):
        w = w.strip()
        if not w:
            continue
        try:
            if int(w) == hour:
                return True
        except ValueError:
            log.warning("bad deleteWhen entry %r in %r", w, when)
    return False


class CleanCommitLogService:
    def __init__(
        self,
        config: MessageStoreConfig,
        mapped_file_queue: MappedFileQueue,
        running_flags: RunningFlags,
        reput_offset: Callable[[], int],
        on_disk_full: Callable[[str], None] = lambda why: None,
        disk_usage: Callable[[str], float] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``reput_offset``: where dispatch has read to (a file past it stays);
        ``on_disk_full``: told why the disk was marked full, for the refusals' remark."""
        self.config = config
        self.mapped_file_queue = mapped_file_queue
        self.running_flags = running_flags
        self.reput_offset = reput_offset
        self.on_disk_full = on_disk_full
        self.disk_usage: Callable[[str], float] = disk_usage or disk_partition_used_ratio
        self.clock: Callable[[], float] = clock or time.time
        self.manual_delete_file_several_times = 0
        self.clean_immediately = False
        self.last_redelete_timestamp = 0.0

    # -- run ---------------------------------------------------------------------------

    def run(self) -> None:
        """One pass: delete expired files, then retry a hanged first file. Errors are logged."""
        try:
            self.delete_expired_files()
            self.redelete_hanged_file()
        except Exception:
            log.warning("CleanCommitLogService service has exception", exc_info=True)

    def execute_delete_files_manually(self) -> None:
        """Make the next 20 runs delete expired files whatever the hour."""
        self.manual_delete_file_several_times = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("executeDeleteFilesManually was invoked")

    def delete_expired_files(self) -> int:
        """Delete expired files if a trigger fires; returns how many were deleted."""
        config = self.config
        timeup = self.is_time_to_delete()
        spacefull = self.is_space_to_delete()  # always evaluated: it keeps the disk-full mark current
        manual_delete = self.manual_delete_file_several_times > 0
        if not (timeup or spacefull or manual_delete):
            return 0
        if manual_delete:
            self.manual_delete_file_several_times -= 1
        clean_at_once = config.clean_file_forcibly_enable and self.clean_immediately
        log.info(
            "begin to delete before %d hours file. timeup: %s spacefull: %s manualDeleteFileSeveralTimes: %d "
            "cleanAtOnce: %s", config.file_reserved_time, timeup, spacefull, self.manual_delete_file_several_times,
            clean_at_once,
        )  # fmt: skip
        count = self.mapped_file_queue.delete_expired_file_by_time(
            config.file_reserved_time * 60 * 60 * 1000,
            config.delete_commit_log_files_interval,
            config.destroy_mapped_file_interval_forcibly,
            clean_at_once,
            DELETE_FILES_BATCH_MAX,
            # a file dispatch has not finished reading stays: its messages would be lost
            keep_from_offset=self.reput_offset(),
        )
        if count == 0 and spacefull:
            log.warning("disk space will be full soon, but delete file failed.")
        return count

    def redelete_hanged_file(self) -> bool:
        """Every ``redeleteHangedFileInterval`` ms, destroy a first file left hanging by an earlier pass."""
        config = self.config
        now = self.clock()
        if (now - self.last_redelete_timestamp) * 1000 <= config.redelete_hanged_file_interval:
            return False
        self.last_redelete_timestamp = now
        mfq = self.mapped_file_queue
        return mfq.retry_delete_first_file(config.destroy_mapped_file_interval_forcibly)

    # -- triggers ----------------------------------------------------------------------

    def is_time_to_delete(self) -> bool:
        when = self.config.delete_when
        if is_it_time_to_do(when, time.localtime(self.clock()).tm_hour):
            log.info("it's time to reclaim disk space, %s", when)
            return True
        return False

    def _usages(self) -> list[tuple[str, str, float]]:
        config = self.config
        return [
            (name, path, self.disk_usage(path))
            for name, path in (("physic", config.commit_log_dir), ("logics", config.consume_queue_dir))
        ]

    def _mark(self, usages: list[tuple[str, str, float]]) -> bool:
        """Mark the disk full if a partition is past the warning level, OK if none is past the
        forced clean-up ratio (between the two the mark stays); True while it is not full."""
        config = self.config
        warning = config.disk_space_warning_level_ratio
        forcibly = config.disk_space_clean_forcibly_ratio
        flags = self.running_flags
        full = [
            f"{name} disk {path} is {used:.0%} used (warning level {warning:.0%})"
            for name, path, used in usages
            if used > warning
        ]
        if full:
            self.on_disk_full("; ".join(full))
            if flags.get_and_make_disk_full():
                log.error("%s, so mark disk full", "; ".join(full))
            return False
        if not any(used > forcibly for _, _, used in usages) and not flags.get_and_make_disk_ok():
            log.info("disk space OK, so mark disk ok")
        return not flags.flag_bits & DISK_FULL_BIT

    def check_disk_space(self) -> bool:
        """The disk marks alone, without a deletion pass: run every 0.5 s from start, when a
        file is made, and before each new chunk of the CommitLog is reserved, so a disk that
        fills in seconds is caught at the warning level. True while the disk is not full."""
        return self._mark(self._usages())

    def is_space_to_delete(self) -> bool:
        """True if a partition is over ``diskMaxUsedSpaceRatio``; sets the disk-full mark and ``clean_immediately``.

        RocketMQ checks the CommitLog partition, then the ConsumeQueue one, each marking the
        disk full or OK on its own, so a healthy second partition would clear the mark set for
        a full first one. Here the disk is marked OK only when neither is above the forced
        clean-up ratio (the same thing when both paths share one partition).
        """
        config = self.config
        ratio = config.disk_max_used_space_ratio_clamped / 100.0
        forcibly = config.disk_space_clean_forcibly_ratio
        usages = self._usages()
        self._mark(usages)
        self.clean_immediately = any(used > forcibly for _, _, used in usages)
        over_ratio = False
        for name, _path, used in usages:
            if used < 0 or used > ratio:
                log.info("%s disk maybe full soon, so reclaim space, %s", name, used)
                over_ratio = True
        return over_ratio
