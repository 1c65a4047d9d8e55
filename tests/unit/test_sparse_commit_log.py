"""CommitLog files are sparse unless warmMapedFileEnable (RocketMQ's default): the disk holds
what was written plus the chunk reserved ahead of the writer, not whole files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pumice.config import apply_properties
from pumice.store import MessageExtBrokerInner, MessageStoreConfig
from pumice.store.mapped_file import reserve_chunk
from tests.helpers.store import opened, small_config
from tests.helpers.waiting import wait_dispatched

FILE_SIZE = 64 << 20


def _allocated(path: str) -> int:
    return os.stat(path).st_blocks * 512


@pytest.mark.parametrize("warm", [None, "false", "true"])
def test_commit_log_files_are_sparse_unless_warmed(tmp_path: Path, warm: str | None) -> None:
    default = MessageStoreConfig().preallocate_commit_log  # not small_config's override
    cfg = small_config(str(tmp_path), mapped_file_size_commit_log=FILE_SIZE, preallocate_commit_log=default)
    if warm is not None:
        apply_properties([cfg], {"warmMapedFileEnable": warm})
    with opened(cfg) as store:
        for i in range(200):
            assert store.put_message(MessageExtBrokerInner(topic="T", body=bytes([i]) * 1024, queue_id=0)).is_ok()
        wait_dispatched(store)
        written = store.commit_log.get_max_offset()
    path = os.path.join(str(tmp_path), "commitlog", "00000000000000000000")
    assert os.path.getsize(path) == FILE_SIZE
    if warm == "true":
        assert _allocated(path) == FILE_SIZE
    else:
        assert written < _allocated(path) <= written + reserve_chunk(FILE_SIZE) + 4096
