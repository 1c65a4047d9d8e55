"""``pumice spark`` as a user runs it: a real process with its own JVM, output piped (issue 21).

Before issue 21 a piped ``pumice spark stats`` printed Spark's WARN lines, the JVM's notices
and the stage progress bars on stderr, and its table squeezed to 80 columns. Three processes
run side by side (each starts Spark, which takes most of the time): quiet, ``-v``, and one that
fails after Spark started.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from pumice.cli import main
from tests.helpers.spark import BuiltStore, short_jvm_env

TIMEOUT_S = 180


def _pumice(args: list[str], tmpdir: Path) -> subprocess.Popen[str]:
    env = short_jvm_env({k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")})
    env["TMPDIR"] = str(tmpdir)  # where the quiet runs' Spark log goes
    return subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", "spark", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def test_spark_output_is_quiet_unless_verbose(api_store: BuiltStore, tmp_path: Path) -> None:
    dirs = {name: tmp_path / name for name in ("quiet", "verbose", "failing", "unknown")}
    for d in dirs.values():
        d.mkdir()
    stats = ["stats", api_store.root, "--topic", "TopicB"]
    procs = {
        "quiet": _pumice(stats, dirs["quiet"]),
        "verbose": _pumice([*stats, "--verbose"], dirs["verbose"]),
        # fails once Spark runs (not in Spark's analysis): a traceback, and the log is kept
        "failing": _pumice([*stats, "--conf", "spark.sql.shuffle.partitions=0"], dirs["failing"]),
        # no Spark at all: checked before it starts
        "unknown": _pumice(["export", api_store.root, "-o", str(tmp_path / "out"), "--topic", "TopicZ"],
                           dirs["unknown"]),
    }  # fmt: skip
    done = {}
    try:
        for name, p in procs.items():
            out, err = p.communicate(timeout=TIMEOUT_S)
            done[name] = (p.returncode, out, err)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    rc, out, err = done["quiet"]
    assert rc == 0 and err == "", err  # not a line of Spark's, nor of the JVM's
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["topic", "queue", "messages"]
    assert [line.split()[:3] for line in lines[2:4]] == [["TopicB", "0", "15"], ["TopicB", "1", "15"]]
    assert lines[4].startswith("stats: 30 messages, 2 files, ") and len(lines) == 5
    assert all(len(line) > 80 for line in lines[:4]) and "…" not in out  # not squeezed to 80 columns
    assert os.listdir(dirs["quiet"]) == []  # the Spark log of a run that succeeded is gone

    rc, out, err = done["verbose"]
    assert rc == 0 and out.splitlines()[2].split()[:3] == ["TopicB", "0", "15"]
    assert "log4j" in err and "WARN" in err  # Spark's own lines, as they come

    rc, out, err = done["failing"]
    assert rc == 1 and out == ""
    logs = os.listdir(dirs["failing"])
    assert len(logs) == 1 and logs[0].startswith("pumice-spark-stats-"), logs
    log = dirs["failing"] / logs[0]
    assert err.splitlines()[0] == f"Spark's own log of this run (-v shows it as it comes): {log}"
    assert "log4j" in log.read_text() and "log4j" not in err  # Spark's lines went to the file

    rc, out, err = done["unknown"]
    assert (rc, out) == (1, "") and err.startswith("Error: topic TopicZ does not exist in ") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_the_install_hint_works_from_a_clone(tmp_path: Path, monkeypatch) -> None:
    """``pip install 'pumice[spark]'`` asks an index for a package named pumice; from a clone the
    extra comes with ``pip install -e '<clone>[spark]'``: the hint names both."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a))
    (tmp_path / "commitlog").mkdir()
    r = CliRunner().invoke(main, ["spark", "stats", str(tmp_path)])
    clone = Path(__file__).resolve().parents[2]  # these tests run from a clone
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr == (
        f"Error: pumice spark needs pyspark: pip install 'pumice[spark]', or from a clone: "
        f"pip install -e '{clone}[spark]' (and Java 17)\n"
    )


def test_a_wrong_java_home_is_one_line(tmp_path: Path, monkeypatch) -> None:
    """A JAVA_HOME without bin/java gave Spark's launcher errors and a 45-line traceback."""
    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    r = CliRunner().invoke(main, ["spark", "stats", str(tmp_path / "store")])
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr == (
        f"Error: JAVA_HOME={tmp_path / 'no-jdk'} has no bin/java: point it at a Java 17 installation, or unset "
        "it to use the java on PATH\n"
    )
