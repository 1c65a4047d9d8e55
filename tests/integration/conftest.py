"""Shared helpers for tests that start `pumice` processes on 127.0.0.1."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from bench.processes import free_port

if TYPE_CHECKING:
    from tests.integration.test_broker_process import Cluster


def eventually(check: Callable[[], Any], seconds: float = 15.0, what: str = "condition") -> Any:
    """``check()`` every 0.1 s until it returns a truthy value, which is returned (an
    AssertionError counts as not yet)."""
    deadline = time.monotonic() + seconds
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except AssertionError as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {seconds}s (last: {last!r})")


@contextlib.contextmanager
def running_namesrv(tmp_path: Path, extra_conf: str = "") -> Iterator[str]:
    """`pumice namesrv` on a free loopback port; yields "127.0.0.1:port", stops it with SIGTERM."""
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp_path / 'kvConfig.json'}\n{extra_conf}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", "namesrv", "-c", str(conf)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "boot success" in line, line
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(10) == 0, "the name server did not stop cleanly"
        finally:
            if proc.poll() is None:
                proc.kill()


def running_cluster(name: str, extra_conf: str = "", scope: str = "module") -> Any:
    """A ``cluster`` fixture of that scope: a running test_broker_process.Cluster whose
    broker.conf ends with ``extra_conf``, stopped after."""

    @pytest.fixture(scope=scope, name="cluster")  # type: ignore[call-overload]
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
        from tests.integration.test_broker_process import Cluster

        c = Cluster(tmp_path_factory.mktemp(name), extra_conf)
        try:
            yield c
        finally:
            c.close()

    return fixture


# a running pair for each test that asks for ``cluster``
cluster = running_cluster("cluster", scope="function")
