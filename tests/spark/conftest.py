"""Fixtures for the Spark tests: one SparkSession for the whole run, and the stores they read.

* ``api_store``: written through ``DefaultMessageStore`` with tiny files (several CommitLog
  segments, multi-file ConsumeQueues, several index files): plain, compressed, batch, IPv6,
  delayed and transactional messages (``build_api_store`` of tests/helpers/spark.py);
  ``BuiltStore.puts`` records what was put, and where.
* ``golden_store``: a CommitLog segment assembled by hand from GOLDEN.md's record bytes.
* ``broker_store`` (in ``test_broker_store``): written by a real ``pumice broker`` process.

The tests skip, saying why, only when the spark extra (pyspark, pyarrow) is not installed or
no Java runtime is found (Spark needs one).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.golden import REC_3A, REC_3C
from tests.helpers.spark import BuiltStore, build_api_store, spark_session

# the Spark tests need the spark extra: without it the whole directory is skipped, saying so
pytest.importorskip("pyspark", reason="tests/spark needs the spark extra: pip install -e '.[spark]'")
pytest.importorskip("pyarrow", reason="tests/spark needs the spark extra: pip install -e '.[spark]'")


@pytest.fixture(scope="session")
def spark() -> Iterator:
    with spark_session() as session:
        yield session


@pytest.fixture(scope="session")
def api_store(tmp_path_factory) -> BuiltStore:
    return build_api_store(str(tmp_path_factory.mktemp("api") / "store"))


@pytest.fixture(scope="session")
def golden_store(tmp_path_factory) -> Path:
    """One 4 KiB segment named 1234 (the records' PHYSICALOFFSET): 3A, 3C, then GOLDEN §4's
    blank end-of-file record."""
    root = tmp_path_factory.mktemp("golden") / "broker-g"
    (root / "commitlog").mkdir(parents=True)
    data = bytearray(4096)
    data[: len(REC_3A)] = REC_3A
    data[len(REC_3A) : len(REC_3A) + len(REC_3C)] = REC_3C
    rest = len(data) - len(REC_3A) - len(REC_3C)
    end = len(REC_3A) + len(REC_3C)
    data[end : end + 8] = struct.pack(">i", rest) + bytes.fromhex("cbd43194")
    (root / "commitlog" / "00000000000000001234").write_bytes(bytes(data))
    return root
