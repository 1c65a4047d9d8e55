"""``reindex``: rebuild ConsumeQueue and IndexFile from the CommitLog with Spark.

This is the broker's dispatch (``DefaultMessageStore.do_dispatch``) run as a Spark job, for
repair or migration. Its files are byte-identical to what the broker's own dispatch writes
with the same ``mapedFileSizeConsumeQueue``, ``maxHashSlotNum``, ``maxIndexNum`` and
``messageDelayLevel``:

=======  ==================================  ==============================================
stage    Spark                               what it writes
=======  ==================================  ==============================================
parse    one task per CommitLog segment      nothing: each record's dispatch request, parsed
                                             by the store's own
                                             ``check_message_and_return_size`` (tagsCode,
                                             SCHEDULE_TOPIC_XXXX delivery times, keys); a
                                             segment ends at its blank record or at its first
                                             record that is not valid
queues   shuffled by (topic, queueId),       ``consumequeue/<topic>/<queueId>/…`` through the
         sorted by CommitLog offset          store's ``ConsumeQueue`` (entries, blank fillers,
                                             file roll-over); only non-transactional and
                                             COMMIT records, as the broker's dispatch
index    one task, in CommitLog order (hash  ``index/…`` through the store's ``IndexService``
         chains depend on insertion order)   (``topic#UNIQ_KEY`` then ``topic#key`` per KEYS
                                             token; ROLLBACK records skipped; file roll-over)
=======  ==================================  ==============================================

Index files are named, as the broker names them, by a creation time; a rebuilt file takes the
store time of its first entry (the broker's is the moment dispatch reached that record, a few
ms later), kept increasing. Their contents, headers included, are the broker's. One case is
the broker's own timing: when the last keys fill an index file exactly and only keyless
records follow, the broker starts an empty next file if its dispatch handled those records in
a later batch than the keys, and not if in the same batch; reindex does not start one.

Where it writes:

* ``output``: a new or empty directory; it gets ``consumequeue/`` and ``index/`` (never the
  source store itself).
* ``in_place``: into the store, for a stopped broker. The store's ``lock`` is taken (refused
  while a broker holds it) for the whole run; the new files are built in
  ``<store>/reindex-<time>/new`` and swapped in with renames; the old ``consumequeue/`` and
  ``index/`` are kept in ``<store>/reindex-<time>/old`` until you delete them. After an unclean
  stop (``abort`` present) the broker still runs its crash recovery at the next start.

Like every Spark job here, the tasks write to local paths: on a cluster, the store and the
output must be on a file system every executor sees.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
from dataclasses import dataclass

from pumice.common.message_sys_flag import MessageSysFlag
from pumice.spark.jobs.summary import JobSummary, Stopwatch, plural
from pumice.spark.store_files import list_segments
from pumice.store.index_service import IndexService, index_file_name
from pumice.store.message_store_config import MessageStoreConfig

log = logging.getLogger(__name__)


class ReindexError(RuntimeError):
    """The output or the store is not fit for a rebuild (not empty, in use, …)."""


@dataclass(frozen=True)
class ReindexResult:
    records: int
    queues: int
    consume_queue_files: int
    index_files: int
    root: str  # where consumequeue/ and index/ now are
    backup: str | None  # in place: the old files
    summary: JobSummary


# -- the job -----------------------------------------------------------------------------------


def _check_output(store: str, output: str) -> None:
    out = os.path.realpath(output)
    src = os.path.realpath(store)
    if out == src or any(
        out == os.path.join(src, d) or out.startswith(os.path.join(src, d) + os.sep)
        for d in ("commitlog", "consumequeue", "index")
    ):
        raise ReindexError(f"output {output} is the store or inside its data; use in_place to rebuild the store")
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise ReindexError(f"output {output} exists and is not an empty directory; reindex never overwrites")


def _take_lock(store: str) -> int:
    fd = os.open(os.path.join(store, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise ReindexError(
            f"{store} is in use (its lock is held): stop the broker before an in-place reindex"
        ) from None
    return fd


def reindex(
    spark,
    store_path: str,
    output: str | None = None,
    *,
    in_place: bool = False,
    config: MessageStoreConfig | None = None,
    commit_log_path: str | None = None,
) -> ReindexResult:
    """Rebuild ``consumequeue/`` and ``index/`` of the store at ``store_path`` from its CommitLog.

    ``config`` gives the file geometry and the delay levels (default: RocketMQ's defaults);
    exactly one of ``output`` and ``in_place`` says where the files go.
    """
    if (output is None) == (not in_place):
        raise ReindexError("give either an output directory or in_place=True")
    if not os.path.isdir(store_path):
        raise ReindexError(f"{store_path} is not a directory")
    config = config or MessageStoreConfig()
    clock = Stopwatch()
    lock_fd = None
    if in_place:
        lock_fd = _take_lock(store_path)
        if os.path.exists(os.path.join(store_path, "abort")):
            log.warning(
                "%s was not shut down cleanly (abort file): the broker will still recover at its next start", store_path
            )
        work = os.path.join(store_path, f"reindex-{time.strftime('%Y%m%d%H%M%S')}")
        root = os.path.join(work, "new")
        if os.path.exists(work):
            raise ReindexError(f"{work} exists already")
    else:
        assert output is not None
        _check_output(store_path, output)
        root = output
    try:
        records, queues, cq_files, index_files = _run(spark, store_path, commit_log_path, root, config)
        backup = None
        if in_place:
            backup = os.path.join(work, "old")
            os.makedirs(backup)
            for d in ("consumequeue", "index"):
                live = os.path.join(store_path, d)
                if os.path.exists(live):
                    os.rename(live, os.path.join(backup, d))
                if os.path.exists(os.path.join(root, d)):
                    os.rename(os.path.join(root, d), live)
            os.rmdir(root)
            root = store_path
    finally:
        if lock_fd is not None:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
            os.close(lock_fd)
    files = f"{plural(cq_files, 'ConsumeQueue file')}, {plural(index_files, 'index file')}"
    detail = f"{plural(queues, 'queue')}, {files} → {root}"
    summary = JobSummary("reindex", records, cq_files + index_files, clock.seconds, detail)
    return ReindexResult(records, queues, cq_files, index_files, root, backup, summary)


def _run(spark, store: str, commit_log_path: str | None, root: str, config: MessageStoreConfig) -> tuple:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from pumice.spark.jobs.reindex_source import ReindexSource

    os.makedirs(root, exist_ok=True)
    segments = list_segments(commit_log_path or os.path.join(store, "commitlog"))
    if not segments:
        return 0, 0, 0, 0
    spark.dataSource.register(ReindexSource)
    dispatched = (
        spark.read.format(ReindexSource.name())
        .option("commitLogPath", commit_log_path or os.path.join(store, "commitlog"))
        .option("messageDelayLevel", config.message_delay_level)
        .load()
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        records = dispatched.count()
        tran = F.col("sysFlag").bitwiseAND(MessageSysFlag.TRANSACTION_MASK)
        to_queues = dispatched.where(
            tran.isin(MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
        )
        n_queues = to_queues.select("topic", "queueId").distinct().count()
        cq_root = os.path.join(root, "consumequeue")
        (
            to_queues.repartition(max(1, min(n_queues, 4 * spark.sparkContext.defaultParallelism)), "topic", "queueId")
            .sortWithinPartitions("topic", "queueId", "commitLogOffset")
            .write.format(ReindexSource.name())
            .mode("append")
            .option("target", "consumequeue")
            .option("root", cq_root)
            .option("fileSize", str(config.mapped_file_size_consume_queue))
            .save()
        )
        if config.message_index_enable and records:
            (
                dispatched.where(F.col("keys").isNotNull() | F.col("uniqKey").isNotNull())
                .repartition(1)
                .sortWithinPartitions("commitLogOffset")
                .write.format(ReindexSource.name())
                .mode("append")
                .option("target", "index")
                .option("root", root)
                .option("hashSlotNum", str(config.max_hash_slot_num))
                .option("indexNum", str(config.max_index_num))
                .save()
            )
            if _count_index_files(root) == 0:
                # no record has a key: the broker's dispatch still makes one, empty, index file
                first_ts = dispatched.agg(F.min("storeTimestamp")).first()[0]
                _empty_index(root, config, first_ts)
        cq_files = sum(len(files) for d, _, files in os.walk(cq_root) if d != cq_root) if os.path.isdir(cq_root) else 0
        return records, n_queues, cq_files, _count_index_files(root)
    finally:
        dispatched.unpersist()


def _count_index_files(root: str) -> int:
    index_dir = os.path.join(root, "index")
    return sum(1 for n in os.listdir(index_dir) if n.isdigit()) if os.path.isdir(index_dir) else 0


def _empty_index(root: str, config: MessageStoreConfig, store_ts: int) -> None:
    """An index file, empty as the broker's dispatch leaves it, named after ``store_ts``."""
    index_dir = os.path.join(root, "index")
    os.makedirs(index_dir, exist_ok=True)
    cfg = MessageStoreConfig(
        store_path_root_dir=os.path.join(root, ".empty-index"),
        max_hash_slot_num=config.max_hash_slot_num,
        max_index_num=config.max_index_num,
    )
    service = IndexService(cfg)
    try:
        service.build_index_batch([])
    finally:
        service.shutdown()
    made = os.listdir(cfg.index_dir)
    os.rename(os.path.join(cfg.index_dir, made[0]), os.path.join(index_dir, index_file_name(store_ts)))
    shutil.rmtree(cfg.store_path_root_dir)
