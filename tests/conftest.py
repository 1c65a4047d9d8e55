"""Shared fixtures: a small-geometry store in a temporary directory."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from pumice.store import DefaultMessageStore, MessageStoreConfig


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


@pytest.fixture
def store_config(tmp_path) -> MessageStoreConfig:
    return small_config(str(tmp_path / "store"))


@pytest.fixture
def store(store_config: MessageStoreConfig) -> Iterator[DefaultMessageStore]:
    s = DefaultMessageStore(store_config)
    assert s.load()
    s.start()
    try:
        yield s
    finally:
        s.shutdown()
