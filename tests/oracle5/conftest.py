"""Fixtures of the RocketMQ 5 reference suite: Apache RocketMQ 5.3.3 (name server, and broker with
its proxy in LOCAL mode; tests/helpers/rocketmq5.py) started once per module, and the official
Python v5 client (tests/helpers/v5_python.py).

``v5_server`` runs a module's tests once per server in ``V5_SERVERS``: the same scenario, the same
expectations, against RocketMQ 5.3.3 and (once the gRPC part of issue 34 adds it) Pumice."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import v5_python
from tests.helpers.rocketmq5 import RocketMQ5, V5Server, cached_classpath


def _need_java() -> None:
    if shutil.which("java") is None:
        pytest.fail("java is not installed: .ci/run installs a JDK and Maven for the Java suites")


def start_rocketmq5(root: Path) -> RocketMQ5:
    _need_java()
    return RocketMQ5(root, classpath=cached_classpath())


# name -> how a module starts that server in a directory of its own (stopped by its stop()).
# The gRPC part of issue 34 adds Pumice here: "pumice": a `pumice broker --enable-proxy` process
# (with its name server) exposing the same V5Server attributes and methods.
V5_SERVERS: dict[str, Callable[[Path], V5Server]] = {
    "rocketmq5": start_rocketmq5,
}


@pytest.fixture(scope="module")
def rocketmq5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQ5]:
    """RocketMQ 5.3.3, started once per module; ``boot_s`` says how long it took (name server
    and broker with proxy, the Maven build excluded)."""
    _need_java()
    cached_classpath()  # the build (cached in ~/.m2 by .ci/run) is not start-up time
    server = start_rocketmq5(tmp_path_factory.mktemp("rocketmq5"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", params=sorted(V5_SERVERS))
def v5_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[V5Server]:
    """Each server of ``V5_SERVERS`` in turn, once per module; RocketMQ 5.3.3 is the module's
    ``rocketmq5`` (one JVM pair for both fixtures)."""
    if request.param == "rocketmq5":
        yield request.getfixturevalue("rocketmq5")
        return
    server = V5_SERVERS[request.param](tmp_path_factory.mktemp(request.param))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def v5_client() -> Path:
    """The official Python v5 client's venv python (fails with the install command if missing)."""
    return v5_python.venv_python()
