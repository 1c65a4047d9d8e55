"""Shared fixtures: a small-geometry store in a temporary directory (the helpers themselves,
shared by every suite, are in tests/helpers); and the parallel run (tests/helpers/parallel.py):
``python3 -m pytest`` runs on every core with pytest-xdist, ``-n 0`` or ``-p no:xdist`` serially."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from pumice.store import DefaultMessageStore, MessageStoreConfig
from tests.helpers.parallel import group_of
from tests.helpers.store import opened, small_config

# the servers the tests start log here, not to ~/logs/rocketmqlogs (pumice.common.logging_config);
# a directory of each worker's own (a worker inherits the one the controller chose, so it marks it)
if "PUMICE_LOG_DIR" not in os.environ or os.environ.get("PUMICE_TEST_LOG_DIR") == os.environ["PUMICE_LOG_DIR"]:
    os.environ["PUMICE_LOG_DIR"] = os.environ["PUMICE_TEST_LOG_DIR"] = tempfile.mkdtemp(prefix="pumice-test-logs-")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Every core, unless the command line chose (``-n``, ``--dist``, ``-p no:xdist``): before
    xdist's own hook turns ``-n auto`` into workers. Tests that must not overlap share an
    ``xdist_group`` (below), which ``--dist loadgroup`` gives to one worker."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.option.numprocesses is None and config.option.dist == "no" and not config.option.distload:
        config.option.numprocesses = "auto"
        config.option.dist = "loadgroup"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's ``xdist_group`` (tests/helpers/parallel.py says which and why); before xdist's
    worker reads the marks."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else []
        module_scoped = any(d[-1].scope in ("module", "package") and d[-1].baseid for d in defs if d)
        group = group_of(item.nodeid, module_scoped)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def store_config(tmp_path) -> MessageStoreConfig:
    return small_config(str(tmp_path / "store"))


@pytest.fixture
def store(store_config: MessageStoreConfig) -> Iterator[DefaultMessageStore]:
    with opened(store_config) as s:
        yield s
