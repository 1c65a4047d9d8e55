"""The Apache C++ client (PyPI rocketmq==0.4.4) against real `pumice namesrv` and `pumice broker`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cpp_client import consume, missing_reason, platform_supported, produce
from tests.integration.test_broker_process import Cluster

BODY_PREFIX = "body-"  # cpp_client.py's default --body-prefix

pytestmark = pytest.mark.skipif(not platform_supported(), reason="the rocketmq wheel is x86_64 Linux only")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    reason = missing_reason()
    if reason:
        pytest.fail(f"the C++ client cannot run: {reason}")
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def test_cpp_producer_then_cpp_push_consumer(cluster: Cluster, tmp_path: Path) -> None:
    sent = produce(cluster.ns, "CppTopic", "CppPG", 20, tmp_path / "p", tag="TagA", keys_prefix="ck", deadline_s=60)
    oks = sent.of("sent")
    assert len(oks) == 20 and all(e["ok"] and e["status"] == "OK" for e in oks), sent.describe()
    got = consume("push", cluster.ns, "CppTopic", "CppCG", 20, tmp_path / "c", deadline_s=60, wait_s=40)
    msgs = got.of("message")
    assert {m["body"] for m in msgs} == {f"{BODY_PREFIX}{i}" for i in range(20)}, got.describe()
    assert {m["keys"] for m in msgs} == {f"ck{i}" for i in range(20)}
    assert all(m["tags"] == "TagA" and m["topic"] == "CppTopic" for m in msgs)


def test_cpp_batch_and_pull_consumer(cluster: Cluster, tmp_path: Path) -> None:
    sent = produce(cluster.ns, "CppBatch", "CppPG", 6, tmp_path / "p", batch=True, deadline_s=60)
    assert sent.of("sent") and all(e["ok"] for e in sent.of("sent")), sent.describe()
    got = consume("pull", cluster.ns, "CppBatch", "CppPullCG", 6, tmp_path / "c", deadline_s=60, wait_s=30)
    assert {m["body"] for m in got.of("message")} == {f"{BODY_PREFIX}{i}" for i in range(6)}, got.describe()
