"""The Apache C++ client (PyPI rocketmq==0.4.4) against real `pumice namesrv` and `pumice broker`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from tests.helpers.clusters import Cluster
from tests.integration.cpp_client import consume, missing_reason, platform_supported, produce

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


def test_cpp_batch_over_4_kib_arrives_compressed_and_is_stored_plain(cluster: Cluster, tmp_path: Path) -> None:
    # librocketmq zlib-compresses a whole batch body over 4 KiB and sets sysFlag bit 0 on the request
    n = 300
    sent = produce(cluster.ns, "CppBigBatch", "CppPG", n, tmp_path / "p", batch=True, deadline_s=60)
    assert sent.of("sent") and all(e["ok"] for e in sent.of("sent")), sent.describe()
    got = consume("pull", cluster.ns, "CppBigBatch", "CppBigCG", n, tmp_path / "c", deadline_s=60, wait_s=30)
    assert sorted(m["body"] for m in got.of("message")) == sorted(f"{BODY_PREFIX}{i}" for i in range(n))


def test_cpp_reconsume_later_is_sent_back_and_redelivered(cluster: Cluster, tmp_path: Path) -> None:
    # The C++ consumer answers RECONSUME_LATER with CONSUMER_SEND_MSG_BACK (code 36) carrying delayLevel=0
    # (seen on the wire with strace), so the broker stores the copy in %RETRY%<group> at level 3 + reconsumeTimes
    # = 3 (10 s with the default messageDelayLevel); the consumer pulls %RETRY%<group> on its own.
    sent = produce(cluster.ns, "CppRetry", "CppPG", 3, tmp_path / "p", keys_prefix="rk", deadline_s=30)
    assert len(sent.of("sent")) == 3 and all(e["ok"] for e in sent.of("sent")), sent.describe()
    got = consume("push", cluster.ns, "CppRetry", "CppRetryCG", 6, tmp_path / "c", deadline_s=40, wait_s=25,
                  extra=["--reconsume-later-first", "3"])  # fmt: skip
    msgs = got.of("message")
    bodies = {f"{BODY_PREFIX}{i}" for i in range(3)}
    assert got.returncode == 0, got.describe()
    for body in bodies:
        copies = [m for m in msgs if m["body"] == body]
        assert len(copies) >= 2, f"{body} not redelivered\n{got.describe()}"
        first, again = copies[0], copies[1]
        assert first["status"] == "RECONSUME_LATER" and first["reconsume_times"] == 0, got.describe()
        assert again["status"] == "CONSUME_SUCCESS" and again["reconsume_times"] >= 1, got.describe()
        # the client restores the original topic from RETRY_TOPIC; the key and the unique id survive
        assert again["topic"] == "CppRetry" and again["properties"].get("RETRY_TOPIC") == "CppRetry", got.describe()
        assert again["keys"] == first["keys"] and again["msg_id"] == first["msg_id"], got.describe()
        # delay level 3 = 10 s: not redelivered right away, and not much later either
        assert 9.0 <= again["recv_time"] - first["recv_time"] <= 20.0, got.describe()
    assert {m["body"] for m in msgs} == bodies


def test_cpp_delayed_message_arrives_after_its_delay(cluster: Cluster, tmp_path: Path) -> None:
    # delay level 2 = 5 s (default messageDelayLevel); the send creates the topic, so the consumer started
    # right after it finds the route at once and is pulling well before the 5 s are up
    sent = produce(cluster.ns, "CppDelay", "CppPG", 1, tmp_path / "p", deadline_s=30, extra=["--delay-level", "2"])
    assert len(sent.of("sent")) == 1, sent.describe()
    ev = sent.of("sent")[0]
    assert ev["ok"] and ev["status"] == "OK", sent.describe()
    got = consume("push", cluster.ns, "CppDelay", "CppDelayCG", 1, tmp_path / "c", deadline_s=30, wait_s=20,
                  extra=["--show-property", "REAL_TOPIC", "--show-property", "REAL_QID"])  # fmt: skip
    msgs = got.of("message")
    assert len(msgs) == 1, got.describe()
    m = msgs[0]
    assert m["body"] == f"{BODY_PREFIX}0" and m["topic"] == "CppDelay" and m["reconsume_times"] == 0, got.describe()
    # not before the 5 s (the consumer was pulling well before that), and not long after
    waited = m["recv_time"] - ev["time"]
    assert 4.5 <= waited <= 12.0, f"delivered {waited:.2f}s after the send\n{got.describe()}"


def _check_sharded(msgs: list[dict], n: int, keys: int) -> None:
    """Key k = i % keys went to queue k (the binding's selector: key % queue count), in send order."""
    assert sorted(m["body"] for m in msgs) == sorted(f"{BODY_PREFIX}{i}" for i in range(n))
    for key in range(keys):
        seq = sorted((m for m in msgs if int(m["body"].removeprefix(BODY_PREFIX)) % keys == key),
                     key=lambda m: m["queue_offset"])  # fmt: skip
        assert {m["queue_id"] for m in seq} == {key}
        assert [m["body"] for m in seq] == [f"{BODY_PREFIX}{i}" for i in range(key, n, keys)]
        assert [m["queue_offset"] for m in seq] == list(range(len(seq)))


def test_cpp_send_orderly_places_each_key_on_one_queue(cluster: Cluster, tmp_path: Path) -> None:
    # SendMessageOrderly with sharding key i % 2; read back with an ordinary (concurrent) push consumer
    n = 12
    sent = produce(cluster.ns, "CppOrderQ", "CppPG", n, tmp_path / "p", deadline_s=30, extra=["--orderly-keys", "2"])
    assert len(sent.of("sent")) == n and all(e["ok"] for e in sent.of("sent")), sent.describe()
    assert [e["offset"] for e in sent.of("sent")] == [i // 2 for i in range(n)], sent.describe()
    got = consume("push", cluster.ns, "CppOrderQ", "CppOrderQCG", n, tmp_path / "c", deadline_s=30, wait_s=20)
    _check_sharded(got.of("message"), n, 2)


def test_cpp_orderly_push_consumer(cluster: Cluster, tmp_path: Path) -> None:
    # a push consumer registered with RegisterMessageCallbackOrderly locks its queues on the broker
    # (LOCK_BATCH_MQ) before it consumes them; 4 consume threads, so order comes from the per-queue lock
    n = 12
    sent = produce(cluster.ns, "CppOrder", "CppPG", n, tmp_path / "p", deadline_s=30, extra=["--orderly-keys", "2"])
    assert len(sent.of("sent")) == n and all(e["ok"] for e in sent.of("sent")), sent.describe()
    got = consume("push", cluster.ns, "CppOrder", "CppOrderCG", n, tmp_path / "c", deadline_s=25, wait_s=15,
                  extra=["--orderly", "--thread-count", "4"])  # fmt: skip
    msgs = got.of("message")
    assert len(msgs) == n, got.describe()
    _check_sharded(msgs, n, 2)
    # orderly: within a queue, arrival order is the queue order (no sorting)
    for key in (0, 1):
        assert [m["queue_offset"] for m in msgs if m["queue_id"] == key] == list(range(n // 2)), got.describe()


def test_cpp_produced_messages_are_found_by_key_and_by_id(cluster: Cluster, tmp_path: Path) -> None:
    # librocketmq's queryMessage only throws ("queryMessage", not implemented in the C++ client), so the
    # lookups go through the Pumice admin client: QUERY_MESSAGE by key and by UNIQ_KEY, VIEW_MESSAGE_BY_ID
    from pumice.client import MQAdmin

    sent = produce(cluster.ns, "CppQuery", "CppPG", 5, tmp_path / "p", tag="TagQ", keys_prefix="qk", deadline_s=60)
    oks = sent.of("sent")
    assert len(oks) == 5 and all(e["ok"] for e in oks), sent.describe()
    with MQAdmin(cluster.ns) as admin:
        for i in (0, 4):
            found = admin.query_msg_by_key("CppQuery", f"qk{i}")
            assert [m.body for m in found] == [f"{BODY_PREFIX}{i}".encode()]
            assert found[0].keys == [f"qk{i}"] and found[0].tags == "TagQ"
            by_offset_id = admin.query_msg_by_id(found[0].offset_msg_id)
            assert by_offset_id.body == found[0].body and by_offset_id.commit_log_offset == found[0].commit_log_offset
        # the id the C++ SendResult reports (its UNIQ_KEY) finds the same message; it also decodes as an
        # offset msgId, but no broker is asked at the made-up address it names
        asked: list[str] = []
        view = admin.impl.api.view_message

        async def spy(addr: str, *args: object, **kwargs: object) -> object:
            asked.append(addr)
            return await view(addr, *args, **kwargs)

        admin.impl.api.view_message = spy  # type: ignore[method-assign]
        for e in oks:
            m = admin.query_msg_by_id(e["msg_id"], topic="CppQuery")
            assert m.body == f"{BODY_PREFIX}{e['i']}".encode() and m.queue_offset == e["offset"]
        assert set(asked) <= {cluster.br}
        assert admin.query_msg_by_key("CppQuery", "no-such-key") == []


def test_a_running_cpp_producer_is_listed_by_producer_connection(cluster: Cluster, tmp_path: Path) -> None:
    """Its heartbeats' producerDataSet reach the ProducerManager (mqadmin producerConnection)."""
    runs: list[object] = []
    producer = threading.Thread(
        target=lambda: runs.append(produce(cluster.ns, "CppLive", "CppLivePG", 40, tmp_path / "p", deadline_s=60,
                                           extra=["--interval-ms", "200"])),
    )  # fmt: skip
    producer.start()

    async def listed() -> list[dict[str, object]]:
        c = RemotingClient()
        try:
            for _ in range(100):  # the producer runs ~8 s; poll up to 10 s
                r = await c.invoke(cluster.br, RemotingCommand(code=204, ext_fields={"producerGroup": "CppLivePG"}))
                if r.code == 0:
                    return orjson.loads(r.body)["connectionSet"]
                await asyncio.sleep(0.1)
            return []
        finally:
            await c.close()

    try:
        got = asyncio.run(listed())
    finally:
        producer.join(90)
    assert got and got[0]["language"] == "CPP" and str(got[0]["clientAddr"]).startswith("127.0.0.1:"), got
