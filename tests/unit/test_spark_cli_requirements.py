"""`pumice spark` without the spark extra or Java: one line naming what is missing, no traceback."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from pumice.cli import main

# these take one requirement away from a machine that has them all: without the spark extra the
# answer would name pyspark (or both), not what the test took away
needs_spark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("pyspark", "pyarrow")),
    reason="needs the spark extra: pip install -e '.[spark]'",
)


@needs_spark
@pytest.mark.parametrize("gone", ["pyspark", "pyarrow"])
def test_a_missing_spark_extra_is_a_one_line_error(gone: str, tmp_path, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == gone else real(name, *a))
    (tmp_path / "commitlog").mkdir()
    r = CliRunner().invoke(main, ["spark", "stats", str(tmp_path)])
    assert r.exit_code == 1
    assert f"pumice spark needs {gone}: pip install 'pumice[spark]'" in r.output
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)


@needs_spark
def test_missing_java_is_a_one_line_error(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    (tmp_path / "commitlog").mkdir()
    r = CliRunner().invoke(main, ["spark", "stats", str(tmp_path)])
    assert r.exit_code == 1 and "pumice spark needs Java 17" in r.output


def test_help_works_without_the_extra(monkeypatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    r = CliRunner().invoke(main, ["spark", "--help"])
    assert r.exit_code == 0 and "reindex" in r.output
    r = CliRunner().invoke(main, ["spark", "stats", "--help"])
    assert r.exit_code == 0 and "STORE" in r.output


@pytest.mark.parametrize("command", ["stats", "reindex"])
def test_a_directory_that_is_not_a_store_is_a_usage_error(command: str, tmp_path) -> None:
    """It was read as an empty store: "stats: 0" and exit 0."""
    r = CliRunner().invoke(main, ["spark", command, str(tmp_path)])
    assert r.exit_code == 2 and f"{tmp_path} is not a store: it has no commitlog directory" in r.output
