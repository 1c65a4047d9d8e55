"""The suite's parallel run (tests/helpers/parallel.py, tests/conftest.py): ``python3 -m pytest``
uses pytest-xdist workers, ``-p no:xdist`` runs serially, workers draw ports from
disjoint slices, Maven builds take turns, and the tests that must not overlap share a group."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ports
from tests.helpers.parallel import maven_lock

ROOT = Path(__file__).resolve().parents[2]
SMALL = "tests/unit/test_docs_self_contained.py"  # two quick tests


def pytest_run(*args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTEST_XDIST_AUTO_NUM_WORKERS": "2"}  # as on CI's 2 cores, whatever this machine has
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_XDIST_WORKER_COUNT", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def test_the_plain_command_runs_on_workers_and_no_xdist_serially() -> None:
    plain = pytest_run("-v", SMALL)
    assert plain.returncode == 0 and "[gw0]" in plain.stdout and "[gw1]" in plain.stdout, plain.stdout[-3000:]
    # without the plugin (-n 0 is xdist's own: the conftest leaves a given -n alone)
    r = pytest_run("-v", "-p", "no:xdist", SMALL)
    assert r.returncode == 0 and "2 passed" in r.stdout and "[gw" not in r.stdout, r.stdout[-3000:]


def test_the_tests_that_must_not_overlap_share_a_group() -> None:
    r = pytest_run("--co", "-q", "-m", "xdist_group", "tests/faults", "tests/spark/test_options.py",
                   "tests/interop/test_mqadmin.py", SMALL)  # fmt: skip
    listed = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert any(ln.startswith("tests/faults/") for ln in listed), r.stdout[-3000:]
    assert any(ln.startswith("tests/spark/test_options.py") for ln in listed), r.stdout[-3000:]
    assert any(ln.startswith("tests/interop/test_mqadmin.py") for ln in listed)  # its cluster is module-scoped
    assert not any(ln.startswith(SMALL) for ln in listed), r.stdout[-3000:]


GROUPED = "tests/unit/test_tls_stream.py"  # a module-scoped fixture: its tests form one group


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_one_worker_runs_a_group(workers: list[str]) -> None:
    """A module whose fixture is module-scoped runs on one worker (xdist's ``loadgroup``; a
    worker parses the command line again, so the conftest hands it the controller's ``--dist``)."""
    r = pytest_run("-v", *workers, GROUPED, SMALL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ran = [ln.split()[0] for ln in r.stdout.splitlines() if GROUPED + "::" in ln and "PASSED" in ln]
    assert len(ran) >= 4 and len(set(ran)) == 1, r.stdout[-3000:]


@pytest.mark.parametrize("count", [2, 3])
def test_workers_draw_ports_from_disjoint_slices(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    slices = []
    for index in range(count):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(count))
        low, high = ports._candidates()
        slices.append(range(low - 2, high + 2))  # a port P also takes P - 2 .. P + 2
        port = ports.free_port()
        assert low <= port < high
    for a, b in itertools.pairwise(slices):
        assert a.stop <= b.start, slices
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    whole = range(*ports._candidates())
    assert whole.start <= slices[0].start + 2 and slices[-1].stop - 2 <= whole.stop


def test_maven_builds_take_turns(tmp_path: Path) -> None:
    lock, held = tmp_path / "maven.lock", tmp_path / "held"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, pathlib\nfrom tests.helpers.parallel import maven_lock\n"
         f"with maven_lock(pathlib.Path({str(lock)!r})):\n"
         f"    pathlib.Path({str(held)!r}).touch()\n    time.sleep(1.5)\n"],
        cwd=ROOT, env=os.environ | {"PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not held.exists():
            assert holder.poll() is None and time.monotonic() < deadline, "the holder did not take the lock"
            time.sleep(0.05)
        t0 = time.monotonic()
        with maven_lock(lock):
            waited = time.monotonic() - t0
        assert waited > 0.5, f"took the lock after {waited:.2f} s while another process held it"
    finally:
        holder.kill()
        holder.wait(10)
