"""Shared fixtures: a small-geometry store in a temporary directory (the helpers themselves,
shared by every suite, are in tests/helpers)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from pumice.store import DefaultMessageStore, MessageStoreConfig
from tests.helpers.store import opened, small_config

# the servers the tests start log here, not to ~/logs/rocketmqlogs (pumice.common.logging_config)
os.environ.setdefault("PUMICE_LOG_DIR", tempfile.mkdtemp(prefix="pumice-test-logs-"))


@pytest.fixture
def store_config(tmp_path) -> MessageStoreConfig:
    return small_config(str(tmp_path / "store"))


@pytest.fixture
def store(store_config: MessageStoreConfig) -> Iterator[DefaultMessageStore]:
    with opened(store_config) as s:
        yield s
