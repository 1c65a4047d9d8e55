"""The official Python v5 client's wrapper and driver fail clearly, without a server: a missing
venv names the install command (a failure, never a skip), an endpoint nobody serves ends the
driver with exit 2 and an ``error`` event naming what failed, and the watchdog (exit 3) bounds a
run the client itself would not end."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import v5_python
from tests.helpers.ports import free_port


def test_missing_venv_fails_with_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PUMICE_V5_PYTHON_VENV", str(tmp_path / "no-venv"))
    with pytest.raises(AssertionError, match=r"rocketmq-python-client 5\.1\.2.*bash tests/peers5/install\.sh"):
        v5_python.run("produce", "127.0.0.1:1", "--topic", "T", home=tmp_path / "h")


def test_unserved_endpoint_ends_the_driver_with_an_error_event(tmp_path: Path, v5_client: Path) -> None:
    endpoint = f"127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    r = v5_python.run("produce", endpoint, "--topic", "NoSuchServer", "--body", "x", home=tmp_path / "p",
                      timeout_s=40)  # fmt: skip
    assert r.rc == 2 and not r.of("sent") and r.of("error")[-1] is r.events[-1], r.describe()
    assert "NoSuchServer" in r.error and "route" in r.error, r.describe()
    assert time.monotonic() - t0 < 30


def test_receive_errors_in_a_row_end_a_simple_consumer(tmp_path: Path, v5_client: Path) -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    r = v5_python.run("simple-consume", endpoint, "--topic", "T", "--group", "G", "--count", "1", "--max-s", "60",
                      home=tmp_path / "c", timeout_s=30)  # fmt: skip
    assert r.rc == 2 and len(r.of("receive_error")) == 5, r.describe()
    assert r.error.startswith("5 receive errors in a row") and "route" in r.error, r.describe()


def test_watchdog_ends_a_push_consumer_that_never_starts(tmp_path: Path, v5_client: Path) -> None:
    """The client's PushConsumer.startup() waits for the server's settings without a bound."""
    endpoint = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    r = v5_python.run("push-consume", endpoint, "--topic", "T", "--group", "G", "--count", "1", "--max-s", "60",
                      home=tmp_path / "c", timeout_s=10)  # fmt: skip
    assert r.rc == 3 and r.error == "timed out after 5.0s (push-consume)", r.describe()
    assert time.monotonic() - t0 < 10
