"""The suite run in parallel (pytest-xdist): what keeps two workers from stepping on each other.

``python3 -m pytest`` runs on every core (``-n auto --dist loadgroup``, set by tests/conftest.py
unless the command line says ``-n``/``--dist``/``-p no:xdist``); ``-n 0`` or ``-p no:xdist``
runs serially. What two workers would share, and how it is kept apart:

=======================  ====================================================================
shared thing             kept apart by
=======================  ====================================================================
loopback ports           ``worker_slice()``: each worker draws ``free_port()`` from its own
                         slice of the range (tests/helpers/ports.py)
Maven's target dirs and  ``maven_lock()``: one Maven build at a time on this machine (every
``~/.m2``                worktree's suite included), around tests/java and tests/java-rocketmq
the servers' log dir     a ``PUMICE_LOG_DIR`` of each worker's own (tests/conftest.py)
loop devices, mounts,    ``GROUPS``: one worker runs all of a group (``xdist_group``), so
one SparkSession, a      tests/faults' images and disk-full runs never overlap, one JVM runs
module's servers,        Spark, a module whose servers are module-scoped starts them once,
RocketMQ 5.3.3           and one RocketMQ 5.3.3 serves the modules that share it
=======================  ====================================================================

The README test's fixed ports (9876, 10909, 10911, 10912, 8081, 8080) need nothing: no other test
uses them (``free_port()`` draws from 20000 up; the other tests of ``pumice dev`` pass ``--no-proxy``
or ``--grpc-port``, and ``--no-dashboard`` or ``--dashboard-port``).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# nodeid prefix -> the xdist_group whose tests one worker runs, one after the other
GROUPS = {
    "tests/faults/": "faults",  # loop devices and mounts; full-disk runs that time ENOSPC handling
    "tests/spark/": "spark",  # one local SparkSession (a JVM) for the whole suite, not one per worker
    "tests/oracle/test_spark_reads_rocketmq_store.py": "spark",
    # one RocketMQ 5.3.3 for them all (tests/conftest.py's rocketmq5_shared)
    "tests/oracle5/": "rocketmq5",
    "tests/interop/test_java5_remoting5.py": "rocketmq5",
}
MAVEN_LOCK = Path(tempfile.gettempdir()) / "pumice-tests-maven.lock"


def worker_slice() -> tuple[int, int]:
    """(this worker's index, the number of workers); (0, 1) outside a parallel run."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count < 2:
        return 0, 1
    return int(worker[2:]) % count, count


def group_of(nodeid: str, module_scoped: bool) -> str | None:
    """The xdist_group of a test: its suite's (GROUPS), else its module's when the test uses a
    module-scoped fixture of the suite (its servers then start once, on one worker)."""
    for prefix, group in GROUPS.items():
        if nodeid.startswith(prefix):
            return group
    return nodeid.split("::", 1)[0] if module_scoped else None


@contextmanager
def maven_lock(path: Path = MAVEN_LOCK) -> Iterator[None]:
    """Hold the machine's Maven lock: two ``mvn package`` of one pom at once break each other's
    target/ (and race on ~/.m2)."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
