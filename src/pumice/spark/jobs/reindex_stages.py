"""The reindex job's stages as task functions, without Spark: each takes and gives Arrow
batches of dispatch rows (``DISPATCH_SCHEMA``), so ``reindex`` (the job) and
``reindex_source`` (its data source) both call them and neither imports the other's module.

=======================  ==========================================================
function                 what it does
=======================  ==========================================================
``dispatch_rows``        one CommitLog segment's dispatch requests, in order
``write_queues``         ConsumeQueue files from rows sorted by (topic, queueId, offset)
``write_index``          IndexFiles from rows in CommitLog order
``name_index_files``     index files renamed after their first entry's store time
=======================  ==========================================================
"""

from __future__ import annotations

import itertools
import os
import shutil
import struct
import threading
import time
from collections.abc import Iterator

import numpy as np
import pyarrow.compute as pc

from pumice.spark.store_files import MappedSegment
from pumice.store.consume_queue import ENTRY_DTYPE, ConsumeQueue
from pumice.store.dispatch_request import DispatchRequest
from pumice.store.index_service import IndexService, index_file_name
from pumice.store.message_check import check_message_and_return_size
from pumice.store.message_store_config import MessageStoreConfig, parse_delay_levels

DISPATCH_SCHEMA = (
    "topic string, queueId int, commitLogOffset bigint, msgSize int, tagsCode bigint, storeTimestamp bigint, "
    "queueOffset bigint, keys string, uniqKey string, sysFlag int, preparedTransactionOffset bigint"
)
_PARSE_BATCH = 65_536
_INDEX_CHUNK = 8192
_HEADER = struct.Struct(">qqqqii")  # the IndexFile header


# -- stage 1: parse ----------------------------------------------------------------------------


def _arrow_schema():
    import pyarrow as pa

    types = {"int": pa.int32(), "bigint": pa.int64(), "string": pa.string()}
    return pa.schema([pa.field(n, types[t]) for n, t in (f.split(" ") for f in DISPATCH_SCHEMA.split(", "))])


def dispatch_rows(path: str, delay_levels: str) -> Iterator:
    """Arrow batches of the dispatch requests of one CommitLog segment, in order."""
    import pyarrow as pa

    levels = parse_delay_levels(delay_levels)

    def delay_ms(level: int) -> int:  # CommitLog.delay_ms
        return levels[min(level, len(levels)) - 1]

    schema = _arrow_schema()

    def batch(reqs: list[DispatchRequest]):
        cols = [
            [r.topic for r in reqs],
            [r.queue_id for r in reqs],
            [r.commit_log_offset for r in reqs],
            [r.msg_size for r in reqs],
            [r.tags_code for r in reqs],
            [r.store_timestamp for r in reqs],
            [r.consume_queue_offset for r in reqs],
            [r.keys for r in reqs],
            [r.uniq_key for r in reqs],
            [r.sys_flag for r in reqs],
            [r.prepared_transaction_offset for r in reqs],
        ]
        return pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
        )

    with MappedSegment(path) as m:
        mm, limit, pos = m.mm, len(m.data), 0
        reqs: list[DispatchRequest] = []
        while mm is not None:
            req, size, ok = check_message_and_return_size(mm, pos, limit, False, delay_ms)
            if not ok or size <= 0 or req is None:  # the blank record, or the end of the valid records
                break
            reqs.append(req)
            pos += size
            if len(reqs) >= _PARSE_BATCH:
                yield batch(reqs)
                reqs = []
        if reqs:
            yield batch(reqs)


# -- stage 2: consume queues -------------------------------------------------------------------


def write_queues(batches: Iterator, cq_root: str, file_size: int) -> None:
    """Write the ConsumeQueues of dispatch rows sorted by (topic, queueId, commitLogOffset)."""
    current: tuple[str, int] | None = None
    cq: ConsumeQueue | None = None
    try:
        for b in batches:
            n = b.num_rows
            topics = b.column("topic")
            qids = b.column("queueId").to_numpy()
            # cut the batch where the queue changes
            change = np.ones(n, dtype=bool)
            if n > 1:
                same_topic = pc.equal(topics.slice(1), topics.slice(0, n - 1)).to_numpy(zero_copy_only=False)
                change[1:] = ~same_topic | (qids[1:] != qids[:-1])
            cuts = [*np.flatnonzero(change).tolist(), n]
            offs = b.column("commitLogOffset").to_numpy()
            sizes = b.column("msgSize").to_numpy()
            tags = b.column("tagsCode").to_numpy()
            qoffs = b.column("queueOffset").to_numpy()
            for lo, hi in itertools.pairwise(cuts):
                if lo == hi:
                    continue
                key = (topics[lo].as_py(), int(qids[lo]))
                if key != current:
                    if cq is not None:
                        cq.shutdown()
                    current = key
                    shutil.rmtree(os.path.join(cq_root, key[0], str(key[1])), ignore_errors=True)  # a retried task
                    cq = ConsumeQueue(key[0], key[1], cq_root, file_size)
                assert cq is not None
                _put(cq, offs[lo:hi], sizes[lo:hi], tags[lo:hi], qoffs[lo:hi])
    finally:
        if cq is not None:
            cq.shutdown()


def _put(cq: ConsumeQueue, offs: np.ndarray, sizes: np.ndarray, tags: np.ndarray, qoffs: np.ndarray) -> None:
    """Append entries as the broker's dispatch does (``_put_position_infos``): a contiguous run
    of queue offsets in one write, anything else entry by entry (gaps get blank fillers)."""
    keep = offs + sizes > cq.max_physic_offset
    offs, sizes, tags, qoffs = offs[keep], sizes[keep], tags[keep], qoffs[keep]
    if not len(offs):
        return
    if (np.diff(qoffs) == 1).all():
        packed = np.empty(len(offs), dtype=ENTRY_DTYPE)
        packed["offset"], packed["size"], packed["tags_code"] = offs, sizes, tags
        ok = cq.put_entries(int(qoffs[0]), packed.tobytes(), int(offs[-1]) + int(sizes[-1]))
    else:
        ok = all(
            cq.put_message_position_info(int(o), int(s), int(t), int(q))
            for o, s, t, q in zip(offs.tolist(), sizes.tolist(), tags.tolist(), qoffs.tolist(), strict=True)
        )
    if not ok:
        raise OSError(f"cannot write consume queue {cq.topic}:{cq.queue_id}")


# -- stage 3: index ----------------------------------------------------------------------------


def write_index(batches: Iterator, root: str, hash_slot_num: int, index_num: int) -> None:
    """Write ``<root>/index/`` from dispatch rows in CommitLog order, through IndexService."""
    config = MessageStoreConfig(store_path_root_dir=root, max_hash_slot_num=hash_slot_num, max_index_num=index_num)
    index_dir = config.index_dir
    shutil.rmtree(index_dir, ignore_errors=True)  # a retried task starts again
    service = IndexService(config)
    first_ts = None
    try:
        for b in batches:
            cols = [
                b.column(n).to_pylist()
                for n in ("topic", "commitLogOffset", "msgSize", "storeTimestamp", "keys", "uniqKey", "sysFlag")
            ]
            reqs = [
                DispatchRequest(topic, 0, off, size, 0, ts, 0, keys, uniq, flag, 0)
                for topic, off, size, ts, keys, uniq, flag in zip(*cols, strict=True)
            ]
            if reqs and first_ts is None:
                first_ts = reqs[0].store_timestamp
            for i in range(0, len(reqs), _INDEX_CHUNK):
                if not service.build_index_batch(reqs[i : i + _INDEX_CHUNK]):
                    raise OSError(f"cannot build the index in {index_dir}")
        _join_index_flushes()
    finally:
        service.shutdown()
    name_index_files(index_dir, first_ts)


def _join_index_flushes() -> None:
    # IndexService flushes a full file on a short-lived thread; let it finish before unmapping
    for t in threading.enumerate():
        if t.name == "FlushIndexFileThread":
            t.join(timeout=60)


def name_index_files(index_dir: str, first_store_ts: int | None) -> int:
    """Rename the index files, in creation order, after the store time of their first entry
    (``yyyyMMddHHmmssSSS``, kept increasing). Returns how many there are."""
    if not os.path.isdir(index_dir):
        return 0
    names = sorted(n for n in os.listdir(index_dir) if n.isdigit())
    staged = []
    for i, name in enumerate(names):  # two steps: a new name may be an old one
        tmp = os.path.join(index_dir, f".renaming-{i:06d}")
        os.rename(os.path.join(index_dir, name), tmp)
        staged.append(tmp)
    prev = -1
    for tmp in staged:
        with open(tmp, "rb") as f:
            begin = _HEADER.unpack(f.read(_HEADER.size))[0]
        ts = begin if begin > 0 else (first_store_ts if first_store_ts else int(time.time() * 1000))
        ts = max(ts, prev + 1)
        os.rename(tmp, os.path.join(index_dir, index_file_name(ts)))
        prev = ts
    return len(staged)
