"""Fixtures of the Java interop suite: the driver jar (built once per session with Maven), a
`pumice namesrv` + `pumice broker` pair per test module (real processes on 127.0.0.1, the
fast port listenPort - 2 on, as a Java client's VIP channel needs), and the Java processes a
test starts (stopped by pid at its end, killed when they hang)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.clusters import Cluster
from tests.helpers.interop import InteropCluster
from tests.helpers.java_driver import JavaDriver, build_jar


@pytest.fixture(scope="session")
def java_classpath() -> str:
    if shutil.which("java") is None:
        pytest.fail("java is not installed: .ci/run installs a JDK and Maven for tests/interop")
    return build_jar()


@pytest.fixture(scope="module")
def interop_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = InteropCluster(tmp_path_factory.mktemp("cluster"), getattr(request.module, "BROKER_CONF", ""))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def java(java_classpath: str, interop_cluster: InteropCluster, tmp_path: Path) -> Iterator[Callable[..., JavaDriver]]:
    """``java(subcommand, name=..., **args)`` starts a driver against the module's cluster
    (``namesrv`` filled in; underscores in names become dashes); all are stopped at the end."""
    started: list[JavaDriver] = []

    def start(subcommand: str, name: str = "", **args: Any) -> JavaDriver:
        opts = {"namesrv": interop_cluster.ns} | {k.replace("_", "-"): v for k, v in args.items()}
        d = JavaDriver(java_classpath, tmp_path / "java", subcommand, opts, name=name or f"{subcommand}{len(started)}")
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            try:
                d.stop(15)
            except AssertionError:
                pass  # killed by stop(); the test has already passed or failed on its own
        d.kill()


@pytest.fixture
def run_java(java: Callable[..., JavaDriver]) -> Callable[..., list[dict[str, Any]]]:
    """``run_java(subcommand, timeout_s=60, **args)``: run a driver to its end; its events."""

    def run(subcommand: str, timeout_s: float = 60, **args: Any) -> list[dict[str, Any]]:
        return java(subcommand, **args).wait(timeout_s)

    return run
