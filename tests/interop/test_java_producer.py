"""The official Java client (rocketmq-client 4.9.8) sending to `pumice broker`: DefaultMQProducer's
sync, async, oneway, batch and ordered sends, keys, tags, properties, delay levels, compressed
bodies, the VIP channel, and the client's queries; what arrives is read back with the Java
consumers and compared byte for byte.

One cluster for the module (tests/interop/conftest.py); each test has its own topics and groups.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest

from pumice.client import LitePullConsumer
from tests.helpers.interop import create_topic
from tests.helpers.java_driver import body, sha256

Events = list[dict[str, Any]]


def sent_ok(events: Events, count: int) -> dict[int, dict[str, Any]]:
    """The "sent" lines by message index; all SEND_OK, no error."""
    assert not [e for e in events if e["event"] == "error"], events
    sent = {e["i"]: e for e in events if e["event"] == "sent"}
    assert sorted(sent) == list(range(count)), events
    assert all(e.get("status", "SEND_OK") == "SEND_OK" for e in sent.values()), sent
    return sent


def pulled(run_java, topic: str, group: str, **kwargs: Any) -> dict[int, dict[str, Any]]:
    """Every message of the topic, read with DefaultMQPullConsumer, by its "i" property (no duplicate)."""
    events = run_java("pull", topic=topic, group=group, **kwargs)
    got = [e for e in events if e["event"] == "received"]
    by_i = {int(e["props"]["i"]): e for e in got}
    assert len(by_i) == len(got), "a message was read twice"
    return by_i


def texts_of(events: Events) -> list[str]:
    return sorted(e["bodyText"] for e in events if e["event"] == "received")


def check_body(msg: dict[str, Any], label: str, size: int = 0) -> None:
    want = body(label, int(msg["props"]["i"]), size)
    assert (msg["bodyLen"], msg["bodySha256"]) == (len(want), sha256(want)), msg


def test_sync_send_with_keys_tags_and_properties_arrives_as_sent(run_java) -> None:
    n = 20
    events = run_java("produce", topic="JSync", group="PSync", mode="sync", count=n, label="sync", tags="TagA,TagB",
                      keys="sk", prop=["color=red", "spaced=a b=c:d", "名前=値 🚀"])  # fmt: skip
    sent = sent_ok(events, n)
    assert len({s["msgId"] for s in sent.values()}) == n
    # each queue's offsets run 0, 1, 2, ... in send order
    by_queue = collections.defaultdict(list)
    for i in range(n):
        by_queue[sent[i]["queueId"]].append(sent[i]["queueOffset"])
    assert all(offsets == list(range(len(offsets))) for offsets in by_queue.values()), by_queue
    got = pulled(run_java, "JSync", "CSync")
    assert sorted(got) == list(range(n))
    for i, m in got.items():
        s = sent[i]
        assert (m["msgId"], m["offsetMsgId"], m["queueId"], m["queueOffset"]) == (
            s["msgId"], s["offsetMsgId"], s["queueId"], s["queueOffset"]
        )  # fmt: skip
        assert m["tags"] == ("TagA", "TagB")[i % 2] and m["keys"] == f"sk-{i}"
        assert (m["props"]["color"], m["props"]["spaced"], m["props"]["名前"]) == ("red", "a b=c:d", "値 🚀")
        assert m["props"]["UNIQ_KEY"] == s["msgId"] and m["props"]["CLUSTER"] == "TestCluster"
        assert "WAIT" not in m["props"]  # 4.9.4 and later store a single message without it
        assert m["reconsumeTimes"] == 0 and m["sysFlag"] == 0
        assert m["bodyText"] == f"sync-{i}"
        check_body(m, "sync")


def test_a_new_group_starts_at_0_while_the_first_message_is_in_memory_whatever_its_start(java, run_java) -> None:
    """As a 4.9 broker answers QUERY_CONSUMER_OFFSET for a group without an offset: 0 while the
    queue starts at 0 and its first message is within accessMessageInMemoryMaxRatio of memory
    (so CONSUME_FROM_LAST_OFFSET reads a new topic from its start), QUERY_NOT_FOUND otherwise
    (test_java_consumer's broker, with the ratio 0, covers that side)."""
    sent_ok(run_java("produce", topic="JLast", mode="sync", count=8, label="last"), 8)
    consumer = java("push", topic="JLast", group="CLast", **{"from": "LAST"}, count=8, duration=30)
    assert texts_of(consumer.wait(45)) == sorted(f"last-{i}" for i in range(8))


def test_tag_subscription_filters_on_the_broker(run_java) -> None:
    # the broker matches tags by Java's String.hashCode (UTF-16): CJK and a character beyond the BMP
    sent_ok(run_java("produce", topic="JTags", mode="sync", count=12, label="tag", tags="TagA,标签,🚀"), 12)
    got = pulled(run_java, "JTags", "CTags", sub="TagA || 🚀")
    assert sorted(got) == [i for i in range(12) if i % 3 != 1]
    assert {m["tags"] for m in got.values()} == {"TagA", "🚀"}
    assert sorted(pulled(run_java, "JTags", "CTags2", sub="标签")) == list(range(1, 12, 3))


def test_async_and_oneway_sends_arrive(run_java) -> None:
    n = 30
    sent = sent_ok(run_java("produce", topic="JAsync", mode="async", count=n, label="async", keys="ak"), n)
    sent_ok(run_java("produce", topic="JOneway", mode="oneway", count=n, label="oneway"), n)
    got = pulled(run_java, "JAsync", "CAsync")
    assert sorted(got) == list(range(n))
    assert all(got[i]["msgId"] == sent[i]["msgId"] and got[i]["keys"] == f"ak-{i}" for i in range(n))
    for m in got.values():
        check_body(m, "async")
    got = pulled(run_java, "JOneway", "COneway")
    assert sorted(got) == list(range(n))
    for m in got.values():
        check_body(m, "oneway")


def test_batch_send_stores_each_batch_in_one_queue_in_order(run_java) -> None:
    n, size = 30, 10
    events = run_java("produce", topic="JBatch", mode="batch", count=n, batch=size, label="batch", keys="bk",
                      tags="TagB", prop=["kind=batch"])  # fmt: skip
    assert not [e for e in events if e["event"] == "error"], events
    batches = [e for e in events if e["event"] == "batch"]
    assert [b["first"] for b in batches] == [0, 10, 20] and all(b["status"] == "SEND_OK" for b in batches)
    got = pulled(run_java, "JBatch", "CBatch")
    assert sorted(got) == list(range(n))
    for b in batches:
        members = [got[b["first"] + j] for j in range(size)]
        assert [m["msgId"] for m in members] == b["msgId"].split(",")  # the batch's unique ids, in order
        assert [m["offsetMsgId"] for m in members] == b["offsetMsgId"].split(",")  # the broker's ids
        assert {m["queueId"] for m in members} == {b["queueId"]}
        assert [m["queueOffset"] for m in members] == list(range(b["queueOffset"], b["queueOffset"] + size))
        for m in members:
            assert m["tags"] == "TagB" and m["keys"] == f"bk-{m['props']['i']}" and m["props"]["kind"] == "batch"
            assert m["props"]["WAIT"] == "true"  # a batch's messages keep theirs
            check_body(m, "batch")
    # a batch's messages are indexed by their keys and unique keys
    events = run_java("query", topic="JBatch", key=["bk-5", "bk-27"], uniq_key=[got[13]["msgId"]])
    assert sorted(e["bodyText"] for e in events if e["event"] == "found") == ["batch-13", "batch-27", "batch-5"]


def test_message_queue_selector_keeps_each_sharding_key_on_one_queue_in_order(run_java, java) -> None:
    n, shards = 40, 4
    sent = sent_ok(run_java("produce", topic="JOrder", mode="orderly", count=n, shards=shards, label="ord"), n)
    for key in range(shards):
        queues = {sent[i]["queueId"] for i in range(key, n, shards)}
        assert len(queues) == 1, (key, queues)
    consumer = java("push", topic="JOrder", group="COrder", orderly=True, count=n, duration=40)
    events = consumer.wait(60)
    got = [e for e in events if e["event"] == "received"]
    assert sorted(int(m["props"]["i"]) for m in got) == list(range(n))
    per_queue = collections.defaultdict(list)
    for m in got:
        per_queue[m["queueId"]].append(int(m["props"]["i"]))
    for q, seq in per_queue.items():
        assert seq == sorted(seq), (q, seq)  # delivered in send order within the queue
    # orderly consumption holds the queue lock: one consuming thread per queue at a time
    assert {m["queueId"] for m in got} == {sent[i]["queueId"] for i in range(n)}


def test_delay_levels_arrive_after_their_delay(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JDelay")
    consumer = java("push", topic="JDelay", group="CDelay", count=4, duration=40)
    consumer.wait_event("started", 30)
    s1 = sent_ok(run_java("produce", topic="JDelay", mode="sync", count=2, delay=1, label="d1"), 2)  # 1 s
    s2 = sent_ok(run_java("produce", topic="JDelay", mode="sync", count=2, delay=2, label="d2"), 2)  # 5 s
    events = consumer.wait(60)
    got = {m["bodyText"]: m for m in events if m["event"] == "received"}
    assert sorted(got) == ["d1-0", "d1-1", "d2-0", "d2-1"]
    for label, sent, delay_ms in (("d1", s1, 1000), ("d2", s2, 5000)):
        for i in range(2):
            m = got[f"{label}-{i}"]
            waited = m["receivedAt"] - sent[i]["sentAt"]
            assert delay_ms - 50 <= waited <= delay_ms + 4000, (label, i, waited)
            assert m["topic"] == "JDelay" and m["msgId"] == sent[i]["msgId"]
    # RocketMQ 4.9's ScheduleMessageService keeps REAL_TOPIC, REAL_QID and DELAY in the message it
    # delivers (it writes the properties string before it clears DELAY), and so does Pumice
    delivered_props = got["d2-0"]["props"]
    assert {"REAL_TOPIC", "REAL_QID", "DELAY"} <= delivered_props.keys(), delivered_props
    assert (delivered_props["REAL_TOPIC"], delivered_props["DELAY"]) == ("JDelay", "2")


def test_bodies_over_4_kib_are_compressed_by_the_client_and_arrive_as_sent(run_java, java) -> None:
    sizes = [4097, 100_000, 1_000_000]
    for size in sizes:
        sent_ok(run_java("produce", topic="JBig", mode="sync", count=1, size=size, label=f"big{size}"), 1)
    got = [e for e in run_java("pull", topic="JBig", group="CBig") if e["event"] == "received"]
    assert sorted(m["bodyLen"] for m in got) == sizes
    for m in got:
        want = body(f"big{m['bodyLen']}", 0, m["bodyLen"])
        assert m["bodySha256"] == sha256(want)
        assert m["sysFlag"] & 1, m  # stored as the client compressed it
    # the push consumer decompresses them the same way
    consumer = java("push", topic="JBig", group="CBigPush", count=3, duration=30)
    got = [e for e in consumer.wait(45) if e["event"] == "received"]
    assert sorted((m["bodyLen"], m["bodySha256"]) for m in got) == sorted(
        (s, sha256(body(f"big{s}", 0, s))) for s in sizes
    )


@pytest.mark.parametrize(("kind", "flag"), [("LZ4", 0x100), ("ZSTD", 0x200), ("ZLIB", 0x300)])
def test_lz4_zstd_and_zlib_bodies_are_read_back_by_both_clients(run_java, java, interop_cluster, kind, flag) -> None:
    """4.9.8's rocketmq.message.compressType: the broker stores the body as the Java client
    compressed it (sysFlag bit 0 and the type in bits 8-10); the Java consumer and the Pumice
    client both inflate it (the Pumice client could only inflate zlib)."""
    topic, sizes = f"JCompress{kind}", [5000, 300_000]
    create_topic(interop_cluster, topic, 1)
    for size in sizes:
        sent_ok(run_java("produce", topic=topic, count=1, size=size, label=f"{kind}{size}", compress_type=kind), 1)
    got = [e for e in run_java("pull", topic=topic, group=f"C{topic}") if e["event"] == "received"]
    assert sorted((m["bodyLen"], m["bodySha256"]) for m in got) == sorted(
        (s, sha256(body(f"{kind}{s}", 0, s))) for s in sizes
    )
    assert all(m["sysFlag"] & 0x701 == flag | 1 for m in got), [m["sysFlag"] for m in got]

    consumer = LitePullConsumer(f"P{topic}", interop_cluster.ns, auto_commit=False)
    consumer.subscribe(topic, "*")
    consumer.start()
    try:
        bodies: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(bodies) < len(sizes) and time.monotonic() < deadline:
            bodies += [m.body for m in consumer.poll(1.0)]
    finally:
        consumer.shutdown()
    assert sorted(bodies, key=len) == [body(f"{kind}{s}", 0, s) for s in sizes]


def test_vip_channel_on_sends_to_the_fast_port_and_off_to_the_listen_port(java, run_java, interop_cluster) -> None:
    on = java("produce", topic="JVip", mode="sync", count=5, label="vip", vip=True, name="vip-on")
    sent_ok(on.wait(60), 5)
    off = java("produce", topic="JVip", mode="sync", count=5, label="novip", vip=False, name="vip-off")
    sent_ok(off.wait(60), 5)
    connected = "createChannel: connect remote host[{}] success"
    assert connected.format(interop_cluster.vip) in on.client_log()
    assert connected.format(interop_cluster.vip) not in off.client_log()
    assert connected.format(interop_cluster.br) in off.client_log()
    got = [e for e in run_java("pull", topic="JVip", group="CVip") if e["event"] == "received"]
    assert sorted(m["bodyText"] for m in got) == sorted(
        [f"{label}-{i}" for label in ("vip", "novip") for i in range(5)]
    )


def test_the_clients_queries_find_messages_by_id_key_and_unique_key(run_java) -> None:
    sent = sent_ok(run_java("produce", topic="JQuery", mode="sync", count=3, label="q", keys="qk-{i} shared"), 3)
    events = run_java(
        "query", topic="JQuery", offset_msg_id=[s["offsetMsgId"] for s in sent.values()],
        key=["qk-1", "shared", "no-such-key"], uniq_key=[sent[2]["msgId"]],
    )  # fmt: skip
    found = [e for e in events if e["event"] == "found"]
    by_id = {e["arg"]: e for e in found if e["by"] == "offsetMsgId"}
    assert {k: v["bodyText"] for k, v in by_id.items()} == {sent[i]["offsetMsgId"]: f"q-{i}" for i in range(3)}
    assert sorted(e["bodyText"] for e in found if e["by"] == "key" and e["arg"] == "qk-1") == ["q-1"]
    assert sorted(e["bodyText"] for e in found if e["by"] == "key" and e["arg"] == "shared") == ["q-0", "q-1", "q-2"]
    assert [e["bodyText"] for e in found if e["by"] == "uniqKey"] == ["q-2"]
    errors = [e for e in events if e["event"] == "error"]
    assert [e["arg"] for e in errors] == ["no-such-key"], errors  # not found: the client's MQClientException
