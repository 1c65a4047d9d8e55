"""Stores in the test's own process: small geometry, opening, reading back, crashing.

``small_config`` makes files tiny (64 KiB CommitLog files, 64-entry ConsumeQueue files, small
index files) so that roll-over, multi-file queues and full index files happen in tests;
``opened`` / ``start_store`` load and start a store; ``read_queue`` reads a queue's bodies back
through ``get_message``. ``crash`` leaves a store as a killed process would (abort file kept);
``Rec`` is where a put landed, and ``zero_tail`` / ``write_at`` damage the CommitLog behind the
store's back.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pumice.common.message_decoder import decode_message
from pumice.store import DefaultMessageStore, GetMessageStatus, MessageStoreConfig

FILE_SIZE = 64 * 1024  # small_config's CommitLog file size
HEAD = 88  # a record's bytes before BODY, IPv4 hosts


def small_config(root: str, **overrides: object) -> MessageStoreConfig:
    """Tiny files so roll-over, multi-file queues and full index files happen in tests."""
    values: dict[str, object] = {
        "store_path_root_dir": root,
        "mapped_file_size_commit_log": FILE_SIZE,
        "mapped_file_size_consume_queue": 20 * 64,
        "max_hash_slot_num": 64,
        "max_index_num": 256,
        "preallocate_commit_log": False,
        "prefault_commit_log": False,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)  # type: ignore[arg-type]


@contextmanager
def opened(cfg: MessageStoreConfig, **store_kwargs: object) -> Iterator[DefaultMessageStore]:
    """A loaded and started store, shut down on exit."""
    s = DefaultMessageStore(cfg, **store_kwargs)  # type: ignore[arg-type]
    assert s.load()
    s.start()
    try:
        yield s
    finally:
        s.shutdown()


def start_store(cfg: MessageStoreConfig) -> DefaultMessageStore:
    """A loaded and started store, left to the caller to shut down (or ``crash``)."""
    s = DefaultMessageStore(cfg)
    assert s.load()
    s.start()
    return s


def read_queue(store: DefaultMessageStore, topic: str, queue_id: int, end: int | None = None) -> list[bytes]:
    """The bodies of the queue from its min offset to ``end`` (default: its max), read
    through get_message; every pull on the way must find messages."""
    offset = store.get_min_offset_in_queue(topic, queue_id)
    if end is None:
        end = store.get_max_offset_in_queue(topic, queue_id)
    bodies: list[bytes] = []
    for _ in range(end + 1):
        if offset >= end:
            break
        res = store.get_message("g", topic, queue_id, offset, 32)
        assert res is not None
        with res:
            assert res.status is GetMessageStatus.FOUND, (offset, res.status)
            bodies += [decode_message(b).body for b in res.buffers]
            offset = res.next_begin_offset
    return bodies


@dataclass
class Rec:
    """Where a put landed: its queue offset and its CommitLog bytes (``phys`` to ``end``)."""

    key: str
    body: bytes
    queue_id: int
    queue_offset: int
    phys: int
    size: int

    @property
    def end(self) -> int:
        return self.phys + self.size


def crash(s: DefaultMessageStore, **checkpoint: int) -> None:
    """Leave ``s`` as a killed process would: threads stopped, files unmapped, nothing cleaned up.

    The abort file stays. ``checkpoint`` overrides StoreCheckpoint fields (physic_msg_timestamp,
    logics_msg_timestamp, index_msg_timestamp) and writes the file, as if its last flush said so.
    """
    s.shutdown_flag = True  # puts are refused, and a later shutdown() is a no-op
    s._stop_clean_scheduler()
    s.reput_message_service.shutdown()
    if s.commit_log.commit_service is not None:
        s.commit_log.commit_service.shutdown()
    s.commit_log.flush_service.shutdown()
    s.flush_consume_queue_service.shutdown()
    s.allocate_mapped_file_service.shutdown()
    for t in threading.enumerate():  # flushes of full index files started by dispatch
        if t.name == "FlushIndexFileThread":
            t.join(5)
    cp = s.store_checkpoint
    assert cp is not None
    for name, value in checkpoint.items():
        assert hasattr(cp, name), name
        setattr(cp, name, value)
    cp.shutdown()  # writes the fields and closes the file
    s.store_checkpoint = s.commit_log.checkpoint = s.index_service.checkpoint = None
    if s.dispatch_checkpoint is not None:
        s.dispatch_checkpoint.close()
        s.dispatch_checkpoint = s.index_service.dispatch_checkpoint = None
    s.commit_log.mapped_file_queue.shutdown()  # unmap only: no flush, no truncation
    for cq in s.all_consume_queues():
        cq.mapped_file_queue.shutdown()
    for f in s.index_service.index_file_list:
        f.close()
    s.index_service.index_file_list = []
    assert s._lock_fd is not None
    fcntl.flock(s._lock_fd, fcntl.LOCK_UN)
    os.close(s._lock_fd)
    s._lock_fd = None
    assert os.path.exists(s.config.abort_path)


def commit_log_path(cfg: MessageStoreConfig, offset: int) -> str:
    """The CommitLog file (of FILE_SIZE) holding absolute ``offset``."""
    return os.path.join(cfg.commit_log_dir, f"{offset - offset % FILE_SIZE:020d}")


def write_at(cfg: MessageStoreConfig, offset: int, data: bytes) -> None:
    """Overwrite CommitLog bytes at absolute ``offset`` (within one file), behind the store's back."""
    with open(commit_log_path(cfg, offset), "r+b") as f:
        f.seek(offset % FILE_SIZE)
        f.write(data)


def zero_tail(cfg: MessageStoreConfig, rec: Rec) -> None:
    """A torn write: the record's last bytes (all of its properties and topic, half its body) never made it."""
    n = rec.size - HEAD - len(rec.body) // 2
    write_at(cfg, rec.end - n, bytes(n))
