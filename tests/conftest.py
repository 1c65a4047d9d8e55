"""Shared fixtures: a small-geometry store in a temporary directory."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from pumice.common.message_decoder import decode_message
from pumice.store import DefaultMessageStore, GetMessageStatus, MessageStoreConfig


def wait_until(cond: Callable[[], bool], timeout_s: float = 3.0, what: str = "condition") -> None:
    """Poll ``cond`` every 5 ms; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s}s")
        time.sleep(0.005)


def small_config(root: str, **overrides: object) -> MessageStoreConfig:
    """Tiny files so roll-over, multi-file queues and full index files happen in tests."""
    values: dict[str, object] = {
        "store_path_root_dir": root,
        "mapped_file_size_commit_log": 64 * 1024,
        "mapped_file_size_consume_queue": 20 * 64,
        "max_hash_slot_num": 64,
        "max_index_num": 256,
        "preallocate_commit_log": False,
        "prefault_commit_log": False,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)  # type: ignore[arg-type]


def wait_dispatched(store: DefaultMessageStore, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while store.dispatch_behind_bytes() > 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"dispatch still {store.dispatch_behind_bytes()} bytes behind after {timeout_s}s")
        time.sleep(0.002)


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


@pytest.fixture
def store_config(tmp_path) -> MessageStoreConfig:
    return small_config(str(tmp_path / "store"))


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


@pytest.fixture
def store(store_config: MessageStoreConfig) -> Iterator[DefaultMessageStore]:
    with opened(store_config) as s:
        yield s
