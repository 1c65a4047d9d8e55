"""`pumice dashboard` against Apache RocketMQ 4.9.7's own name server and broker (JVMs of
tests/oracle/rocketmq_peer.py): the cluster and topic pages work on any RocketMQ 4.x cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.clusters import start, stop
from tests.helpers.ports import free_port
from tests.integration.test_dashboard import CHROMIUM, TIMEOUT_MS, no_trace, playwright_api, shoot, text
from tests.oracle.rocketmq_peer import JavaBroker, JavaNamesrv, peer_classpath, stop_all

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")


@pytest.fixture(scope="module")
def rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """RocketMQ 4.9.7's name server and broker, and a dashboard on them: the dashboard's URL."""
    tmp = tmp_path_factory.mktemp("dash-rocketmq")
    classpath = peer_classpath()
    started: list = []
    try:
        ns = JavaNamesrv(tmp / "ns", free_port(), classpath=classpath)
        started.append(ns)
        started.append(JavaBroker(
            tmp / "broker",
            f"brokerClusterName=JavaCluster\nbrokerName=broker-java\nbrokerId=0\nlistenPort={free_port()}\n"
            f"namesrvAddr={ns.addr}\nbrokerIP1=127.0.0.1\nstorePathRootDir={tmp}/store\n"
            f"storePathCommitLog={tmp}/store/commitlog\nflushDiskType=ASYNC_FLUSH\n"
            "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n",
            classpath=classpath,
        ))  # fmt: skip
        port = free_port()
        started.append(start(["dashboard", "-n", ns.addr, "--port", str(port)], "dashboard on"))
        yield f"http://127.0.0.1:{port}"
    finally:
        dashboard = started.pop() if len(started) == 3 else None
        if dashboard is not None:
            stop(dashboard)
        stop_all(started)


def test_cluster_and_topic_pages_on_rocketmq_4_9_7(rocketmq: str) -> None:
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(rocketmq + "/")
            row = text(page, "#brokers")
            assert "JavaCluster" in row and "broker-java" in row and "MASTER" in row and "V4_9_7" in row, row
            # RocketMQ's broker does not tell Pumice's store-health keys: shown as unknown, not as zeros
            assert "thresholds unknown" in text(page, ".health h3")
            no_trace(page)
            shoot(page, "cluster-rocketmq")
            page.goto(rocketmq + "/topics")
            page.fill("#new-topic", "DashJavaTopic")
            page.click("#create-topic-submit")
            assert text(page, "h1") == "Topic DashJavaTopic"
            assert "broker-java" in text(page, "#route")
            assert page.locator("#queues tr").count() == 9  # a header and 8 queues
            page.fill("#send-key", "jk")
            page.fill("#send-body", "hello 4.9.7")
            page.click("#send-submit")
            assert "SEND_OK" in text(page, "#sent")
            page.goto(rocketmq + "/messages?mode=key&topic=DashJavaTopic&key=jk")
            assert page.locator("#messages tr").count() == 2  # a header and the message
            page.click("#messages a")
            assert text(page, "#body-text") == "hello 4.9.7"
            no_trace(page)
        finally:
            browser.close()
