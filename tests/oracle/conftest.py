"""Fixtures of the oracle suite: Apache RocketMQ's own broker and name server (4.9.7, resolved
with Maven from tests/java-rocketmq) as peers of Pumice, and the Java client driver of
tests/java (built once per session, as tests/interop does)."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers.java_driver import build_jar
from tests.oracle.rocketmq_peer import peer_classpath as _peer_classpath


def _need_java() -> None:
    if shutil.which("java") is None:
        pytest.fail("java is not installed: .ci/run installs a JDK and Maven for the Java suites")


@pytest.fixture(scope="session")
def peer_classpath() -> str:
    """The jars of rocketmq-broker and rocketmq-namesrv 4.9.7."""
    _need_java()
    return _peer_classpath()


@pytest.fixture(scope="session")
def java_classpath() -> str:
    """The Java client driver (tests/java: rocketmq-client 4.9.8)."""
    _need_java()
    return build_jar()
