"""`pumice dev` starts the dashboard beside its name server and broker (--dashboard-port), and not
with --no-dashboard (8080, its default, is left to the README test: tests/unit/test_dashboard_server.py
covers a taken default port)."""

from __future__ import annotations

import signal
import time
import urllib.request
from pathlib import Path

from tests.helpers.clusters import start
from tests.helpers.ports import free_port


def dev(tmp_path: Path, *extra: str) -> tuple[object, list[str]]:
    ns, br = free_port(), free_port()
    proc = start(["dev", "--store-dir", str(tmp_path / "store"), "--namesrv-port", str(ns), "--broker-port", str(br),
                  "--no-proxy", *extra], "Ctrl-C stops")  # fmt: skip
    # the dashboard's banner line follows the broker's
    lines: list[str] = proc.output_lines  # type: ignore[attr-defined]
    deadline = time.monotonic() + 20
    while (
        time.monotonic() < deadline and not any("dashboard" in line for line in lines) and "--no-dashboard" not in extra
    ):
        time.sleep(0.05)
    return proc, lines


def stopped_cleanly(proc: object) -> None:
    proc.send_signal(signal.SIGINT)  # type: ignore[attr-defined]
    try:
        assert proc.wait(20) == 0  # type: ignore[attr-defined]
    finally:
        if proc.poll() is None:  # type: ignore[attr-defined]
            proc.kill()  # type: ignore[attr-defined]


def test_pumice_dev_serves_the_dashboard_on_dashboard_port(tmp_path: Path) -> None:
    port = free_port()
    proc, lines = dev(tmp_path, "--dashboard-port", str(port))
    try:
        assert any(line.startswith(f"dashboard on http://127.0.0.1:{port}/") for line in lines), lines
        deadline = time.monotonic() + 20
        while True:  # the broker registers within a second or two
            html = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
            if "broker-a" in html or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "DefaultCluster" in html and "broker-a" in html and "MASTER" in html
    finally:
        stopped_cleanly(proc)


def test_pumice_dev_with_no_dashboard(tmp_path: Path) -> None:
    proc, lines = dev(tmp_path, "--no-dashboard")
    try:
        time.sleep(0.5)
        assert not any("dashboard" in line for line in lines), lines
    finally:
        stopped_cleanly(proc)
