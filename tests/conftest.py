"""Shared fixtures: a small-geometry store in a temporary directory (the helpers themselves,
shared by every suite, are in tests/helpers); and the parallel run (tests/helpers/parallel.py):
``python3 -m pytest`` runs on every core with pytest-xdist, ``-n 0`` or ``-p no:xdist`` serially."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

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
    ``xdist_group`` (below), which ``--dist loadgroup`` gives to one worker: an ``-n N`` without
    ``--dist`` gets it too (xdist's own default, ``load``, ignores the groups)."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.option.dist != "no" or config.option.distload:
        return
    if config.option.numprocesses is None:
        config.option.numprocesses = "auto"
    if config.option.numprocesses != 0:
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """The controller's ``--dist``, for the workers: a worker parses the command line again and
    sees neither the ``-n`` nor the ``--dist`` that ``pytest_cmdline_main`` set."""
    node.workerinput["pumice_dist"] = node.config.option.dist


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's ``xdist_group`` (tests/helpers/parallel.py says which and why); before xdist's
    worker reads the marks, and turns them into the suffix of the ids ``loadgroup`` schedules by."""
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None and worker_input.get("pumice_dist") == "loadgroup":
        config.option.loadgroup = True
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else []
        module_scoped = any(d[-1].scope in ("module", "package") and d[-1].baseid for d in defs if d)
        group = group_of(item.nodeid, module_scoped)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def rocketmq5_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Apache RocketMQ 5.3.3 (name server, broker with its proxy in LOCAL mode), started once per
    worker for the modules that compare Pumice with it and can share one (its JVMs take about a
    minute to boot on 2 cores): ``SHARED_BROKER_CONF`` and ``SHARED_PROXY_CONF`` are what they all
    need, each module uses topics and groups of its own. Those modules are one xdist group
    (``rocketmq5``, tests/helpers/parallel.py), so one worker starts it once."""
    import shutil

    from tests.helpers.rocketmq5 import SHARED_BROKER_CONF, SHARED_PROXY_CONF, RocketMQ5, cached_classpath

    if shutil.which("java") is None:
        pytest.fail("java is not installed: .ci/run installs a JDK and Maven for the Java suites")
    server = RocketMQ5(tmp_path_factory.mktemp("rocketmq5-shared"), broker_conf=SHARED_BROKER_CONF,
                       proxy_conf=SHARED_PROXY_CONF, classpath=cached_classpath())  # fmt: skip
    try:
        yield server
    finally:
        server.discard()  # its store is thrown away: no graceful stop to wait for


@pytest.fixture
def store_config(tmp_path) -> MessageStoreConfig:
    return small_config(str(tmp_path / "store"))


@pytest.fixture
def store(store_config: MessageStoreConfig) -> Iterator[DefaultMessageStore]:
    with opened(store_config) as s:
        yield s
