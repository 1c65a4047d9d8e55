"""Run the official RocketMQ 5 Python client (tests/peers5/v5_python_driver.py, in the venv of
tests/peers5/install.sh) against a gRPC endpoint, bounded by a timeout.

``run("produce", endpoint, "--topic", "T", "--count", "5", home=tmp)`` runs the driver to its end
and returns a ``V5Run``: its events (one dict per JSON line), exit status and stderr;
``V5Run.ok()`` asserts a clean end. ``start(...)`` returns a ``V5Process`` for a driver that runs
beside the test (a push consumer while a producer sends); ``wait()`` it. Both fail (never skip)
with the install command when the venv is missing.

The venv: ``$PUMICE_V5_PYTHON_VENV``, else ``~/.cache/pumice-peers/v5-python``. The driver's HOME is
the test's directory (``home``): the client logs to ``~/logs/rocketmq_python``.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "tests" / "peers5" / "v5_python_driver.py"
INSTALL = "bash tests/peers5/install.sh"
CLIENT_VERSION = "5.1.2"
DEFAULT_TIMEOUT_S = 90.0


def venv_dir() -> Path:
    return Path(os.environ.get("PUMICE_V5_PYTHON_VENV") or Path.home() / ".cache" / "pumice-peers" / "v5-python")


def venv_python() -> Path:
    """The venv's python; an AssertionError with the install command when there is none."""
    python = venv_dir() / "bin" / "python"
    if not python.exists():
        raise AssertionError(
            f"the RocketMQ 5 Python client (rocketmq-python-client {CLIENT_VERSION}) is not installed in "
            f"{venv_dir()}: run `{INSTALL}` (.ci/run does)"
        )
    return python


@dataclass
class V5Run:
    """A finished driver: its events and how it ended."""

    argv: list[str]
    rc: int
    events: list[dict[str, Any]]
    stderr: str
    noise: list[str] = field(default_factory=list)  # stdout lines that are not JSON

    def describe(self) -> str:
        shown = "\n".join(json.dumps(e) for e in self.events[-40:])
        return (
            f"v5 python driver {' '.join(self.argv)} -> exit {self.rc}\n--- events (last 40):\n{shown}\n"
            f"--- other stdout:\n{chr(10).join(self.noise[-20:])}\n--- stderr:\n{self.stderr[-4000:]}"
        )

    def ok(self) -> V5Run:
        """Exit 0 with a ``done`` event."""
        assert self.rc == 0 and self.of("done"), self.describe()
        return self

    def of(self, event: str) -> list[dict[str, Any]]:
        """The events of one kind, in order."""
        return [e for e in self.events if e.get("event") == event]

    @property
    def error(self) -> str:
        errors = self.of("error")
        return errors[-1]["message"] if errors else ""


def _parse(argv: list[str], rc: int, stdout: str, stderr: str) -> V5Run:
    events, noise = [], []
    for line in stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "event" in obj:
            events.append(obj)
        elif line.strip():
            noise.append(line)
    return V5Run(argv, rc, events, stderr, noise)


def _command(subcommand: str, endpoint: str, args: tuple[str, ...], timeout_s: float) -> list[str]:
    # the driver's own watchdog ends it a little before ours kills it
    return [subcommand, "--endpoint", endpoint, "--timeout-s", str(max(1.0, timeout_s - 5)), *args]


def _env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return env | {"HOME": str(home), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def run(subcommand: str, endpoint: str, *args: str, home: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> V5Run:
    """Run the driver to its end (killed past ``timeout_s``: an AssertionError)."""
    argv = _command(subcommand, endpoint, args, timeout_s)
    try:
        p = subprocess.run(
            [str(venv_python()), str(DRIVER), *argv], capture_output=True, text=True, timeout=timeout_s,
            env=_env(home), cwd=home, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"killed after {timeout_s}s\n{_parse(argv, -9, out, err).describe()}") from None
    return _parse(argv, p.returncode, p.stdout, p.stderr)


class V5Process:
    """A driver running beside the test; ``wait()`` returns its ``V5Run``; stopped by pid."""

    def __init__(self, subcommand: str, endpoint: str, args: tuple[str, ...], home: Path, timeout_s: float) -> None:
        self.argv = _command(subcommand, endpoint, args, timeout_s)
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(
            [str(venv_python()), str(DRIVER), *self.argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=_env(home), cwd=home, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def wait(self, timeout_s: float | None = None) -> V5Run:
        try:
            out, err = self.proc.communicate(timeout=timeout_s if timeout_s is not None else self.timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate(timeout=10)
            raise AssertionError(f"killed after its timeout\n{_parse(self.argv, -9, out, err).describe()}") from None
        return _parse(self.argv, self.proc.returncode, out, err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def start(subcommand: str, endpoint: str, *args: str, home: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> V5Process:
    """Start the driver in the background (a push consumer, a waiting producer)."""
    return V5Process(subcommand, endpoint, args, home, timeout_s)
