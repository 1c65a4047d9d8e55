"""`pumice dashboard` end to end: real `pumice namesrv`, `pumice broker` and `pumice dashboard`
processes on 127.0.0.1, driven in headless Chromium (Debian's /usr/bin/chromium) by Playwright.

One cluster, one dashboard and one browser for the module. With PUMICE_DASHBOARD_SCREENSHOTS=DIR
the tests save the main pages there as PNGs (docs/img/ holds the committed ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client import ConsumeStatus, Message, MQAdmin, Producer, PushConsumer
from pumice.client.pull_consumer import ConsumeFromWhere
from pumice.remoting.remoting_client import RemotingClient
from tests.helpers.clusters import Cluster, register, start, stop
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed")
SHOTS = os.environ.get("PUMICE_DASHBOARD_SCREENSHOTS")
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("dash"))
    try:
        yield c
    finally:
        c.close()


def start_dashboard(namesrv: str) -> tuple[object, str]:
    port = free_port()
    proc = start(["dashboard", "-n", namesrv, "--port", str(port), "--sample-interval", "1"], "dashboard on")
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def url(cluster: Cluster) -> Iterator[str]:
    proc, base = start_dashboard(cluster.ns)
    try:
        yield base
    finally:
        stop(proc)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    pg = browser.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    pg.set_default_timeout(TIMEOUT_MS)
    try:
        yield pg
    finally:
        pg.close()


def shoot(page: object, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=False)  # type: ignore[attr-defined]


def text(page: object, selector: str) -> str:
    """The element's text; when it is not there, the failure shows the page instead."""
    if not page.locator(selector).count():  # type: ignore[attr-defined]
        page.wait_for_load_state()  # type: ignore[attr-defined]
    if not page.locator(selector).count():  # type: ignore[attr-defined]
        raise AssertionError(f"no {selector} on {page.url}: {page.inner_text('body')}")  # type: ignore[attr-defined]
    return page.inner_text(selector)  # type: ignore[attr-defined, no-any-return]


def no_trace(page: object) -> str:
    text: str = page.inner_text("body")  # type: ignore[attr-defined]
    assert "Traceback" not in text and 'File "' not in text, text
    return text


def test_every_page_opens(page: object, url: str, cluster: Cluster) -> None:
    pages = {"/": "Cluster", "/topics": "Topics", "/groups": "Consumer groups", "/producers": "Producer connections",
             "/messages": "Messages", "/trace": "Message trace", "/acl": "ACL", "/dledger": "DLedger groups",
             "/charts": "The last hour"}  # fmt: skip
    for path, title in pages.items():
        resp = page.goto(url + path)  # type: ignore[attr-defined]
        assert resp.status == 200, path
        assert text(page, "h1") == title  # type: ignore[attr-defined]
        no_trace(page)
    page.goto(url + "/")  # type: ignore[attr-defined]
    row = text(page, "#brokers")  # type: ignore[attr-defined]
    assert "TestCluster" in row and "broker-t" in row and "MASTER" in row and "V4_9_8" in row
    health = text(page, ".health")  # type: ignore[attr-defined]
    assert "refuse writes at 90 %" in health and "mode: normal" in health
    shoot(page, "cluster")
    page.click(f"#brokers a:text('{cluster.br}')")  # type: ignore[attr-defined]
    assert text(page, "h1") == f"Broker {cluster.br}"
    runtime = text(page, "#runtime")
    assert "commitLogFileCount" in runtime and "lastRecoveryMode" in runtime and "brokerVersionDesc" in runtime
    assert "brokerClusterName\tTestCluster" in text(page, "#config")


def test_create_topic_send_and_find_the_message_by_key_and_by_id(page: object, url: str, cluster: Cluster) -> None:
    page.goto(url + "/topics")  # type: ignore[attr-defined]
    page.fill("#new-topic", "DashTopic")  # type: ignore[attr-defined]
    page.click("#create-topic-submit")  # type: ignore[attr-defined]
    assert text(page, "h1") == "Topic DashTopic"  # type: ignore[attr-defined]
    assert "broker-t" in text(page, "#route")  # type: ignore[attr-defined]
    assert page.locator("#queues tr").count() == 9  # type: ignore[attr-defined]  # a header and 8 queues
    page.fill("#send-tag", "TagA")  # type: ignore[attr-defined]
    page.fill("#send-key", "order-42")  # type: ignore[attr-defined]
    page.fill("#send-body", '{"order": 42, "items": ["a", "b"]}')  # type: ignore[attr-defined]
    shoot(page, "topic")
    page.click("#send-submit")  # type: ignore[attr-defined]
    assert "SEND_OK" in text(page, "#sent")  # type: ignore[attr-defined]
    msg_id = text(page, "#sent-msgid")  # type: ignore[attr-defined]
    offset_id = text(page, "#sent-offset-msgid")  # type: ignore[attr-defined]
    page.goto(url + "/topics?filter=dash")  # type: ignore[attr-defined]
    assert text(page, "#topics").split() == ["topic", "DashTopic"]  # type: ignore[attr-defined]
    # by key
    page.goto(url + "/messages")  # type: ignore[attr-defined]
    page.fill("#key-topic", "DashTopic")  # type: ignore[attr-defined]
    page.fill("#key", "order-42")  # type: ignore[attr-defined]
    page.click("#key-submit")  # type: ignore[attr-defined]
    found = text(page, "#messages")  # type: ignore[attr-defined]
    assert msg_id in found and "TagA" in found
    shoot(page, "messages")
    # by id (the UNIQ_KEY with its topic), and by offset msgId alone
    page.goto(url + "/messages")  # type: ignore[attr-defined]
    page.fill("#id-topic", "DashTopic")  # type: ignore[attr-defined]
    page.fill("#msgid", msg_id)  # type: ignore[attr-defined]
    page.click("#id-submit")  # type: ignore[attr-defined]
    assert text(page, "#message-keys") == "order-42"  # type: ignore[attr-defined]
    assert '"order": 42' in text(page, "#body-json")  # type: ignore[attr-defined]  # pretty-printed
    assert text(page, "#body-hex").startswith("00000000  7b 22 6f 72")  # type: ignore[attr-defined]
    assert "TagA" in text(page, "#properties")  # type: ignore[attr-defined]
    shoot(page, "message")
    page.goto(url + f"/message?msgId={offset_id}")  # type: ignore[attr-defined]
    assert text(page, "h1") == f"Message {msg_id}"  # type: ignore[attr-defined]
    # by time range: the message is in the last hour
    page.goto(url + "/messages?mode=time&topic=DashTopic&begin=" + str(int(time.time() * 1000) - 3_600_000)  # type: ignore[attr-defined]
              + "&end=" + str(int(time.time() * 1000) + 60_000))  # fmt: skip
    assert msg_id in text(page, "#messages")  # type: ignore[attr-defined]
    # resend: a copy with a new id and the same key
    page.goto(url + f"/message?msgId={offset_id}")  # type: ignore[attr-defined]
    page.click("#resend")  # type: ignore[attr-defined]
    assert "SEND_OK" in text(page, "#sent")  # type: ignore[attr-defined]
    admin = MQAdmin(cluster.ns)
    try:
        assert len(admin.query_msg_by_key("DashTopic", "order-42")) == 2
        # a trace: a Pub record (TraceDataEncoder's fields) under the msgId's key in a trace topic
        admin.create_topic("DashTraceTopic", cluster="TestCluster", read_queue_nums=1, write_queue_nums=1)
    finally:
        admin.shutdown()
    pub = ["Pub", str(int(time.time() * 1000)), "DefaultRegion", "DashProducers", "DashTopic", msg_id, "TagA",
           "order-42", cluster.br, "35", "3", "0", offset_id, "true"]  # fmt: skip
    producer = Producer("DashTracer", cluster.ns, instance_name="dash-trace")
    producer.start()
    try:
        producer.send(Message("DashTraceTopic", ("\x01".join(pub) + "\x02").encode(), keys=msg_id))
    finally:
        producer.shutdown()
    page.goto(url + f"/trace?msgId={msg_id}&traceTopic=DashTraceTopic")  # type: ignore[attr-defined]
    row = text(page, "#traces")
    assert "Pub" in row and "DashProducers" in row and "success" in row, row


def total_lag(page: object, url: str) -> int:
    page.goto(url + "/group/LagGroup")  # type: ignore[attr-defined]
    return int(text(page, "#total-lag"))  # type: ignore[attr-defined]


def test_group_lag_falls_as_it_consumes_and_offsets_reset_with_confirm(
    page: object, url: str, cluster: Cluster
) -> None:
    admin = MQAdmin(cluster.ns)
    try:
        admin.create_topic("LagTopic", cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
    finally:
        admin.shutdown()
    producer = Producer("LagProducers", cluster.ns, instance_name="dash-lag")
    producer.start()
    try:
        before = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 120))
        for i in range(20):
            producer.send(Message("LagTopic", f"m{i}".encode(), keys=f"lag{i}"))
        # the producer's connection, while it is online
        page.goto(url + "/producers?topic=LagTopic&group=LagProducers")  # type: ignore[attr-defined]
        assert "PYTHON" in text(page, "#producers") or "JAVA" in text(page, "#producers")  # type: ignore[attr-defined]
    finally:
        producer.shutdown()
    page.goto(url + "/groups")  # type: ignore[attr-defined]
    page.fill("#new-group", "LagGroup")  # type: ignore[attr-defined]
    page.click("#create-group")  # type: ignore[attr-defined]
    assert text(page, "h1") == "Consumer group LagGroup"  # type: ignore[attr-defined]
    # reset (no member online) to before the messages: the confirm step first
    for confirm in (False, True):
        page.fill("#reset-topic", "LagTopic")  # type: ignore[attr-defined]
        page.fill("#reset-time", before)  # type: ignore[attr-defined]
        page.click("#reset-submit")  # type: ignore[attr-defined]
        assert "reset the offsets of LagGroup on LagTopic" in text(page, "#confirm-what")  # type: ignore[attr-defined]
        if confirm:
            page.click("#confirm-yes")  # type: ignore[attr-defined]
        else:
            assert total_lag(page, url) == 0  # nothing reset before the confirm (and no offsets yet)
    assert "reset" in text(page, "#done")  # type: ignore[attr-defined]
    assert total_lag(page, url) == 20
    shoot(page, "group")
    # skip the accumulated messages (each queue's end), confirmed; then back to before them
    page.click("#skip-submit")  # type: ignore[attr-defined]
    assert "each queue's end" in text(page, "#confirm-what")
    page.click("#confirm-yes")  # type: ignore[attr-defined]
    assert total_lag(page, url) == 0
    page.fill("#reset-time", before)  # type: ignore[attr-defined]
    page.click("#reset-submit")  # type: ignore[attr-defined]
    page.click("#confirm-yes")  # type: ignore[attr-defined]
    assert total_lag(page, url) == 20
    first = ConsumeFromWhere.FIRST
    consumer = PushConsumer("LagGroup", cluster.ns, instance_name="dash-lag-c", consume_from_where=first,
                            persist_consumer_offset_interval_s=0.5)  # fmt: skip
    consumer.subscribe("LagTopic", "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeStatus.SUCCESS)
    consumer.start()
    try:
        seen = [20]
        eventually(lambda: seen.append(total_lag(page, url)) or seen[-1] == 0, 30, "the lag fell to 0", every=0.3)
        assert seen == sorted(seen, reverse=True), seen  # it only falls
        page.goto(url + "/topic/LagTopic")  # type: ignore[attr-defined]
        assert "LagGroup" in text(page, "#topic-groups")
        page.goto(url + "/group/LagGroup")  # type: ignore[attr-defined]
        conns = text(page, "#connections")  # type: ignore[attr-defined]
        assert "dash-lag-c" in conns and re.search(r"V\d+_\d+_\d+", conns), conns
        page.click("text=running info")  # type: ignore[attr-defined]
        assert "LagGroup" in text(page, "h1")  # type: ignore[attr-defined]
        # the charts' sampler (every 1 s) has seen the group
        eventually(lambda: "LagGroup" in page.goto(url + "/charts/lag.svg").text(), 15, "LagGroup charted")  # type: ignore[attr-defined]
        page.goto(url + "/charts")  # type: ignore[attr-defined]
        shoot(page, "charts")
    finally:
        consumer.shutdown()
    page.goto(url + "/group/LagGroup")  # type: ignore[attr-defined]
    page.click("#delete-group")  # type: ignore[attr-defined]
    assert "delete the consumer group LagGroup" in text(page, "#confirm-what")  # type: ignore[attr-defined]
    page.click("#confirm-yes")  # type: ignore[attr-defined]
    assert "deleted" in text(page, "#done")  # type: ignore[attr-defined]
    page.goto(url + "/group/LagGroup")  # type: ignore[attr-defined]
    assert "no consumer group LagGroup" in text(page, "#error")  # type: ignore[attr-defined]


def test_delete_a_topic_after_confirming(page: object, url: str, cluster: Cluster) -> None:
    admin = MQAdmin(cluster.ns)
    try:
        admin.create_topic("DoomedTopic", cluster="TestCluster")
    finally:
        admin.shutdown()
    page.goto(url + "/topic/DoomedTopic")  # type: ignore[attr-defined]
    page.click("#delete-topic")  # type: ignore[attr-defined]
    assert "delete the topic DoomedTopic" in text(page, "#confirm-what")  # type: ignore[attr-defined]
    page.goto(url + "/topic/DoomedTopic")  # type: ignore[attr-defined]
    assert text(page, "h1") == "Topic DoomedTopic"  # type: ignore[attr-defined]  # not deleted unconfirmed
    page.click("#delete-topic")  # type: ignore[attr-defined]
    page.click("#confirm-yes")  # type: ignore[attr-defined]
    assert "topic DoomedTopic deleted" in text(page, "#done")  # type: ignore[attr-defined]
    resp = page.goto(url + "/topic/DoomedTopic")  # type: ignore[attr-defined]
    assert resp.status == 404 and "no such topic" in text(page, "#error")  # type: ignore[attr-defined]


def test_bad_input_shows_a_message_never_a_trace(page: object, url: str, cluster: Cluster) -> None:
    cases = {
        "/topic/NoSuchTopic": (404, "no such topic"),
        "/topic/bad%20name": (400, "is invalid"),
        "/messages?mode=id&msgId=not-a-msg-id": (400, "is malformed"),
        "/message?msgId=" + "AB" * 16: (400, "give its topic"),
        "/messages?mode=time&topic=DashTopic&begin=yesterday&end=now": (400, "is not a time"),
        "/messages?mode=key&topic=NoSuchTopic&key=k": (404, "no such topic"),
        "/nowhere": (404, "no page at /nowhere"),
    }
    for path, (status, said) in cases.items():
        resp = page.goto(url + path)  # type: ignore[attr-defined]
        assert resp.status == status, (path, resp.status)
        assert said in text(page, "#error"), path  # type: ignore[attr-defined]
        no_trace(page)
    shoot(page, "bad-input")
    # a broker down: registered with the name server, nothing listening at its address
    dead = f"127.0.0.1:{free_port()}"
    with registered(cluster.ns, "broker-dead", dead):
        page.goto(url + "/")  # type: ignore[attr-defined]
        row = page.locator("#brokers tr", has_text="broker-dead").inner_text()  # type: ignore[attr-defined]
        assert "not answering" in row and dead in row, row
        no_trace(page)


@contextlib.contextmanager
def registered(namesrv: str, name: str, addr: str) -> Iterator[None]:
    """``name`` at ``addr`` registered with the name server while the block runs (the name server
    forgets a broker whose connection closes), on a thread of its own: Playwright's loop is this one's."""
    ready, done = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    async def hold() -> None:
        client = RemotingClient()
        try:
            resp = await client.invoke(namesrv, register(name, addr, {}), timeout_s=10)
            assert resp.code == 0, resp
            ready.set()
            await asyncio.to_thread(done.wait, 60)
        finally:
            await client.close()

    def main() -> None:
        try:
            asyncio.run(hold())
        except BaseException as e:
            failed.append(e)
            ready.set()

    t = threading.Thread(target=main, daemon=True)
    t.start()
    assert ready.wait(30) and not failed, failed
    try:
        yield
    finally:
        done.set()
        t.join(30)


def test_name_server_down_shows_a_message(page: object) -> None:
    proc, base = start_dashboard(f"127.0.0.1:{free_port()}")
    try:
        for path in ("/", "/topics", "/groups"):
            resp = page.goto(base + path)  # type: ignore[attr-defined]
            assert resp.status == 502, path
            assert text(page, "h1") == "The cluster did not answer"  # type: ignore[attr-defined]
            assert text(page, "#error")  # type: ignore[attr-defined]
            no_trace(page)
    finally:
        stop(proc)  # type: ignore[arg-type]
