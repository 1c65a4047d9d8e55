"""The official Java client (rocketmq-client 4.9.8) consuming from `pumice broker`:
DefaultMQPushConsumer concurrently and orderly, clustering and broadcasting, the three
consume-from-where starts, RECONSUME_LATER through %RETRY% to %DLQ%; DefaultLitePullConsumer and
DefaultMQPullConsumer; the Java and the Pumice clients in one group; namespaces, instance names
and message trace.

The module's broker has ``accessMessageInMemoryMaxRatio=0``: a new group's QUERY_CONSUMER_OFFSET
then answers QUERY_NOT_FOUND (the queue's first message counts as on disk), so the client's
consumeFromWhere decides where it starts. With the default ratio a 4.9 broker answers offset 0
for a queue whose first message is still in memory, and every new group starts at 0 whatever
its consumeFromWhere. Delay levels 3 and up are 1 s so that retries (level 3 + reconsumeTimes)
come back quickly; levels 1 and 2 keep their 1 s and 5 s.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from typing import Any

from pumice.client import ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer
from tests.helpers.interop import create_topic, wait_members
from tests.helpers.java_driver import JavaDriver, body, sha256

BROKER_CONF = "accessMessageInMemoryMaxRatio=0\nmessageDelayLevel=1s 5s" + " 1s" * 16 + "\n"

Events = list[dict[str, Any]]


def produce(run_java, topic: str, count: int, label: str, **kwargs: Any) -> dict[int, dict[str, Any]]:
    events = run_java("produce", topic=topic, count=count, label=label, **kwargs)
    assert not [e for e in events if e["event"] == "error"], events
    sent = {e["i"]: e for e in events if e["event"] == "sent"}
    assert sorted(sent) == list(range(count)) and all(s["status"] == "SEND_OK" for s in sent.values())
    return sent


def texts(events: Events) -> list[str]:
    return sorted(e["bodyText"] for e in events if e["event"] == "received")


def labelled(label: str, n: int) -> list[str]:
    return sorted(f"{label}-{i}" for i in range(n))


def split(held: list[set[int]], queues: int = 4) -> bool:
    """Each member holds some queues, none held twice, all held."""
    return all(held) and sum(map(len, held)) == queues and set().union(*held) == set(range(queues))


def wait_assigned(drivers: list[JavaDriver], topic: str, shared: bool = False, timeout_s: float = 30) -> None:
    """Wait until the members' rebalances hold the topic's 4 queues, split between them
    (clustering; the broker's NOTIFY_CONSUMER_IDS_CHANGED makes each rebalance as members come
    and go), or all 4 each (``shared``: broadcasting, or one member). A queue counts once its
    start offset is computed, so messages sent after this reach a LAST_OFFSET consumer."""

    def done() -> bool:
        held = [d.assigned(topic) for d in drivers]
        return all(h == set(range(4)) for h in held) if shared else split(held)

    JavaDriver.wait_all(drivers, done, timeout_s, f"the queues of {topic} assigned")


def test_concurrent_clustering_members_share_the_queues(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JCluster")
    a = java("push", topic="JCluster", group="CCluster", instance="a", name="a")
    b = java("push", topic="JCluster", group="CCluster", instance="b", name="b")
    ids = wait_members(interop_cluster, "CCluster", 2)
    assert [i.rpartition("@")[2] for i in ids] == ["a", "b"]
    wait_assigned([a, b], "JCluster")
    sent = produce(run_java, "JCluster", 40, "cc")
    JavaDriver.wait_all([a, b], lambda: len({*texts(a.events), *texts(b.events)}) == 40, 30, "40 messages")
    got_a, got_b = a.received(), b.received()
    assert sorted(texts(a.events) + texts(b.events)) == labelled("cc", 40)  # each message once
    queues_a, queues_b = {m["queueId"] for m in got_a}, {m["queueId"] for m in got_b}
    assert len(queues_a) == len(queues_b) == 2 and not queues_a & queues_b
    for m in got_a + got_b:
        i = int(m["props"]["i"])
        s = sent[i]
        assert (m["msgId"], m["queueId"], m["queueOffset"]) == (s["msgId"], s["queueId"], s["queueOffset"])
        assert m["bodySha256"] == sha256(body("cc", i))
    # b leaves (its offsets go to the broker, then UNREGISTER_CLIENT): a takes every queue and
    # goes on from b's offsets
    b.stop()
    wait_members(interop_cluster, "CCluster", 1)
    wait_assigned([a], "JCluster", shared=True)
    produce(run_java, "JCluster", 20, "cc2")
    a.wait_for(lambda d: len(d.received()) >= len(got_a) + 20, 30, "20 more messages")
    time.sleep(1)
    assert sorted(texts(a.events)) == sorted([m["bodyText"] for m in got_a] + labelled("cc2", 20))


def test_broadcasting_gives_every_member_every_message(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JBroadcast")
    members = [java("push", topic="JBroadcast", group="CBroadcast", model="BROADCASTING", instance=f"m{k}",
                     count=20, name=f"m{k}") for k in range(2)]  # fmt: skip
    wait_members(interop_cluster, "CBroadcast", 2)
    wait_assigned(members, "JBroadcast", shared=True)
    produce(run_java, "JBroadcast", 20, "bc")
    for m in members:
        assert texts(m.wait(40)) == labelled("bc", 20)


def test_orderly_members_keep_each_queue_in_order(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JOrderly")
    a = java("push", topic="JOrderly", group="COrderly", orderly=True, instance="a", name="a")
    b = java("push", topic="JOrderly", group="COrderly", orderly=True, instance="b", name="b")
    wait_members(interop_cluster, "COrderly", 2)
    wait_assigned([a, b], "JOrderly")  # an orderly member adds a queue once the broker locked it
    n = 60
    sent = produce(run_java, "JOrderly", n, "ord", mode="orderly", shards=4)
    JavaDriver.wait_all([a, b], lambda: len({*texts(a.events), *texts(b.events)}) == n, 40, f"{n} messages")
    assert sorted(texts(a.events) + texts(b.events)) == labelled("ord", n)
    owners = collections.defaultdict(set)
    for d in (a, b):
        per_queue = collections.defaultdict(list)
        for m in d.received():
            per_queue[m["queueId"]].append(int(m["props"]["i"]))
            owners[m["queueId"]].add(d.name)
            assert m["queueId"] == sent[int(m["props"]["i"])]["queueId"]
        for q, seq in per_queue.items():
            assert seq == sorted(seq), (d.name, q, seq)
    assert all(len(o) == 1 for o in owners.values()), owners  # a queue is consumed by its lock holder only


def test_consume_from_first_last_and_timestamp(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JFrom")
    produce(run_java, "JFrom", 8, "early")
    # SEARCH_OFFSET_BY_TIMESTAMP answers the queue offset whose store time is nearest (4.9's
    # ConsumeQueue.getOffsetInQueueByTime): the early messages are seconds before the start time,
    # the next ones within a second after it (consumeTimestamp has whole seconds)
    time.sleep(2 + 1.05 - time.time() % 1)
    since = time.strftime("%Y%m%d%H%M%S", time.localtime())
    produce(run_java, "JFrom", 8, "mid")
    first = java("push", topic="JFrom", group="CFromFirst", **{"from": "FIRST"}, name="first")
    stamp = java("push", topic="JFrom", group="CFromStamp", **{"from": "TIMESTAMP"}, timestamp=since, name="stamp")
    last = java("push", topic="JFrom", group="CFromLast", **{"from": "LAST"}, name="last")
    wait_assigned([first, stamp, last], "JFrom", shared=True)
    produce(run_java, "JFrom", 4, "late")
    first.wait_for(lambda d: len(d.received()) >= 20, 30, "20 messages")
    stamp.wait_for(lambda d: len(d.received()) >= 12, 30, "12 messages")
    last.wait_for(lambda d: len(d.received()) >= 4, 30, "4 messages")
    time.sleep(1)  # nothing more comes
    assert texts(first.events) == sorted(labelled("early", 8) + labelled("mid", 8) + labelled("late", 4))
    assert texts(stamp.events) == sorted(labelled("mid", 8) + labelled("late", 4))
    assert texts(last.events) == labelled("late", 4)


def test_reconsume_later_goes_to_retry_then_to_the_dlq(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JRetry")
    # the group's retry topic exists before the consumer starts (else 4.9's client finds its route
    # only at its next rebalance, 20 s on)
    create_topic(interop_cluster, "%RETRY%CRetry", 1)
    consumer = java("push", topic="JRetry", group="CRetry", fail=-1, max_reconsume=2)
    sent = produce(run_java, "JRetry", 3, "rt", keys="rk")
    # deliveries with reconsumeTimes 0, 1 and 2 (each retry 1 s later: level 3 + reconsumeTimes)
    consumer.wait_for(lambda d: len(d.received()) >= 9, 40, "9 deliveries")
    time.sleep(1.5)
    consumer.stop()
    by_i = collections.defaultdict(list)
    for m in consumer.received():
        by_i[int(m["props"]["i"])].append(m)
    assert sorted(by_i) == [0, 1, 2]
    for i, deliveries in by_i.items():
        assert [m["reconsumeTimes"] for m in deliveries] == [0, 1, 2], deliveries
        # each redelivery shows the original topic and id; the body and properties are kept
        assert {(m["topic"], m["msgId"], m["keys"], m["bodySha256"]) for m in deliveries} == {
            ("JRetry", sent[i]["msgId"], f"rk-{i}", sha256(body("rt", i)))
        }
        # redeliveries carry RETRY_TOPIC and, as 4.9 stores a send-back's copy, WAIT "false"
        assert all(m["props"]["RETRY_TOPIC"] == "JRetry" and m["props"]["WAIT"] == "false" for m in deliveries[1:])
        gaps = [b["receivedAt"] - a["receivedAt"] for a, b in itertools.pairwise(deliveries)]
        assert all(g >= 900 for g in gaps), gaps  # each retry waited for its delay level
    # after maxReconsumeTimes the message is in %DLQ%CRetry, found by key
    events = run_java("query", topic="%DLQ%CRetry", key=[f"rk-{i}" for i in range(3)])
    dlq = {e["arg"]: e for e in events if e["event"] == "found"}
    assert sorted(dlq) == [f"rk-{i}" for i in range(3)], events
    for i in range(3):
        m = dlq[f"rk-{i}"]
        assert m["topic"] == "%DLQ%CRetry" and m["reconsumeTimes"] == 3 and m["msgId"] == sent[i]["msgId"]
        assert m["props"]["RETRY_TOPIC"] == "JRetry" and m["bodyText"] == f"rt-{i}"
    # the DLQ is readable (4.9.3 and later create it so): a consumer of it gets the dead letters
    events = run_java("pull", topic="%DLQ%CRetry", group="CDlqReader")
    assert texts(events) == labelled("rt", 3)


def test_orderly_consumer_sends_a_message_past_max_reconsume_times_to_the_dlq(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JOrderlyDlq")
    consumer = java("push", topic="JOrderlyDlq", group="COrderlyDlq", orderly=True, fail=-1, max_reconsume=1)
    wait_assigned([consumer], "JOrderlyDlq", shared=True)
    sent = produce(run_java, "JOrderlyDlq", 2, "od", keys="od", mode="orderly", shards=1)
    # SUSPEND_CURRENT_QUEUE_A_MOMENT: the client retries in place (reconsumeTimes 0, then 1); past
    # maxReconsumeTimes it sends the message to %RETRY%<group> with reconsumeTimes and
    # maxReconsumeTimes in the header, and the broker stores it in %DLQ%<group>
    consumer.wait_for(lambda d: len(d.received()) >= 4, 30, "4 deliveries")
    time.sleep(1)
    consumer.stop()
    deliveries = [(int(m["props"]["i"]), m["reconsumeTimes"]) for m in consumer.received()]
    assert deliveries == [(0, 0), (0, 1), (1, 0), (1, 1)]  # in order: the second waits for the first
    events = run_java("query", topic="%DLQ%COrderlyDlq", key=["od-0", "od-1"])
    dlq = {e["arg"]: e for e in events if e["event"] == "found"}
    assert sorted(dlq) == ["od-0", "od-1"], events
    for i in range(2):
        m = dlq[f"od-{i}"]
        assert (m["topic"], m["reconsumeTimes"], m["msgId"], m["bodyText"]) == (
            "%DLQ%COrderlyDlq", 1, sent[i]["msgId"], f"od-{i}"
        )  # fmt: skip


def test_push_consumer_on_the_vip_channel(java, run_java, interop_cluster) -> None:
    """vipChannelEnabled (off by default in 4.9.8): offsets, send-backs and queries go to the
    fast port listenPort - 2, pulls and heartbeats to listenPort."""
    create_topic(interop_cluster, "JVipPush")
    create_topic(interop_cluster, "%RETRY%CVipPush", 1)
    first = java("push", topic="JVipPush", group="CVipPush", sub="TagA", vip=True, fail=1, name="vip1")
    wait_assigned([first], "JVipPush", shared=True)
    produce(run_java, "JVipPush", 6, "vp", tags="TagA,TagB")
    # the broker filters by the heartbeat's subscription; each TagA message fails once and comes back
    first.wait_for(lambda d: len(d.received()) >= 6, 30, "6 deliveries")
    time.sleep(1)
    first.stop()
    assert sorted((m["bodyText"], m["reconsumeTimes"]) for m in first.received()) == sorted(
        (f"vp-{i}", t) for i in (0, 2, 4) for t in (0, 1)
    )
    assert f"createChannel: connect remote host[{interop_cluster.vip}] success" in first.client_log()
    # the offsets it committed through the fast port hold: the next member starts after them
    second = java("push", topic="JVipPush", group="CVipPush", sub="TagA", vip=True, name="vip2")
    wait_assigned([second], "JVipPush", shared=True)
    produce(run_java, "JVipPush", 2, "vp2", tags="TagA")
    second.wait_for(lambda d: len(d.received()) >= 2, 30, "2 messages")
    time.sleep(1)
    assert texts(second.events) == labelled("vp2", 2)


def test_lite_pull_assign_seek_commit_then_subscribe_resumes(run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JLite")
    sent = produce(run_java, "JLite", 20, "lp")
    q0 = sorted((s["queueOffset"], i) for i, s in sent.items() if s["queueId"] == 0)
    # everything, then queue 0 again from offset 2 (seeking once the queues are idle: 4.9.8's seek
    # races with a pull already under way, whose messages may still arrive)
    again = [f"lp-{i}" for off, i in q0 if off >= 2]
    events = run_java("litepull", topic="JLite", group="CLite", mode="assign", seek="0:2", seek_after=20,
                      count=20 + len(again), duration=30)  # fmt: skip
    seeked = next(n for n, e in enumerate(events) if e["event"] == "seeked")
    assert texts(events[:seeked]) == labelled("lp", 20)
    after = [e for e in events[seeked:] if e["event"] == "received"]
    assert [e["bodyText"] for e in after] == again and {e["queueId"] for e in after} == {0}
    ends = collections.Counter(s["queueId"] for s in sent.values())
    committed = {e["queueId"]: e["offset"] for e in events if e["event"] == "committed"}
    assert committed == {q: ends[q] for q in range(4)}
    # the group's committed offsets are on the broker: a subscribing consumer of the group goes on from them
    produce(run_java, "JLite", 6, "lp2")
    events = run_java("litepull", topic="JLite", group="CLite", mode="subscribe", count=6, duration=30)
    assert texts(events) == labelled("lp2", 6)


def test_lite_pull_seeks_by_timestamp(run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JLiteTime")
    t0 = time.monotonic()
    produce(run_java, "JLiteTime", 8, "old")
    # offsetForTimestamp gives the offset whose store time is nearest: "new" must be nearer, and its
    # producer's JVM takes about as long to send as the old one's did
    time.sleep(max(2.0, 2 * (time.monotonic() - t0)))
    since = int(time.time() * 1000)
    produce(run_java, "JLiteTime", 8, "new")
    events = run_java("litepull", topic="JLiteTime", group="CLiteTime", mode="assign", seek_time=since, count=8,
                      duration=20)  # fmt: skip
    assert texts(events) == labelled("new", 8)


def test_pull_consumer_reads_every_queue_and_stores_its_offsets(run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JPull")
    sent = produce(run_java, "JPull", 12, "pl", tags="TagA,TagB")
    events = run_java("pull", topic="JPull", group="CPull")
    assert texts(events) == labelled("pl", 12)
    # GET_EARLIEST_MSG_STORETIME: the store time of each queue's first message
    first_stored = {}
    for m in sorted((e for e in events if e["event"] == "received"), key=lambda m: -m["queueOffset"]):
        first_stored[m["queueId"]] = m["storeTimestamp"]
    assert {e["queueId"]: e["earliestMsgStoreTime"] for e in events if e["event"] == "offset"} == first_stored
    pulls = [e for e in events if e["event"] == "pull"]
    assert {p["status"] for p in pulls} == {"FOUND", "NO_NEW_MSG"}
    for m in (e for e in events if e["event"] == "received"):
        assert m["msgId"] == sent[int(m["props"]["i"])]["msgId"]
    # a tag subscription on the pull itself; then the stored offsets: a second run starts at the end
    assert texts(run_java("pull", topic="JPull", group="CPullTags", sub="TagB")) == sorted(
        f"pl-{i}" for i in range(1, 12, 2)
    )
    events = run_java("pull", topic="JPull", group="CPull")
    assert texts(events) == []
    ends = collections.Counter(s["queueId"] for s in sent.values())
    assert {e["queueId"]: e["offset"] for e in events if e["event"] == "offset"} == {q: ends[q] for q in range(4)}


def test_java_and_pumice_clients_in_one_group(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JMix")
    create_topic(interop_cluster, "%RETRY%CMix", 1)
    jc = java("push", topic="JMix", group="CMix", instance="java")
    got_py: list[tuple[int, str, bytes, dict[str, str]]] = []
    lock = threading.Lock()

    def handle(msgs, ctx) -> ConsumeStatus:
        with lock:
            got_py.extend((m.queue_id, m.msg_id, m.body, m.properties) for m in msgs)
        return ConsumeStatus.SUCCESS

    pc = PushConsumer("CMix", interop_cluster.ns, consume_from_where=ConsumeFromWhere.FIRST,
                      persist_consumer_offset_interval_s=0.5)  # fmt: skip
    pc.subscribe("JMix", "*")
    pc.register_message_listener(handle)
    pc.start()
    try:
        wait_members(interop_cluster, "CMix", 2)
        JavaDriver.wait_all([jc], lambda: split([jc.assigned("JMix"), {mq.queue_id for mq in pc.assignment()}]), 30,
                            "the queues of JMix split between the Java and the Pumice client")  # fmt: skip
        java_sent = produce(run_java, "JMix", 20, "java", prop=["from=java"])
        with Producer("PMix", interop_cluster.ns) as p:
            py_sent = [p.send(Message("JMix", b"py-%d" % i, properties={"from": "python", "i": str(i)}))
                       for i in range(20)]  # fmt: skip

        def all_in() -> bool:
            with lock:
                return len({b for _, _, b, _ in got_py} | set(texts(jc.events))) == 40

        JavaDriver.wait_all([jc], all_in, 30, "40 messages")
    finally:
        pc.shutdown()
    py_bodies = sorted(b.decode() for _, _, b, _ in got_py)
    java_bodies = texts(jc.events)
    everything = sorted(labelled("java", 20) + [f"py-{i}" for i in range(20)])
    assert sorted(py_bodies + java_bodies) == everything  # each once, between the two clients
    # the queues are split between the two clients as both allocate them (averagely, by sorted ids)
    java_queues, py_queues = {m["queueId"] for m in jc.received()}, {q for q, _, _, _ in got_py}
    assert len(java_queues) == len(py_queues) == 2 and not java_queues & py_queues
    # each consumed what the other client produced, ids and properties intact
    py_ids = {r.msg_id for r in py_sent}
    from_py = [m for m in jc.received() if m["props"].get("from") == "python"]
    assert from_py and all(m["msgId"] in py_ids for m in from_py)
    java_ids = {s["msgId"] for s in java_sent.values()}
    from_java = [(mid, b, props) for _, mid, b, props in got_py if props.get("from") == "java"]
    assert from_java and all(mid in java_ids and b.decode() == f"java-{props['i']}" for mid, b, props in from_java)


def test_namespace_and_instance_name(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "nsA%JNs")
    create_topic(interop_cluster, "JNs")
    consumers = [java("push", topic="JNs", group="CNs", namespace="nsA", instance=f"inst{k}", name=f"ns{k}")
                 for k in range(2)]  # fmt: skip
    plain = java("push", topic="JNs", group="CNs", instance="plain", name="plain")
    ids = wait_members(interop_cluster, "nsA%CNs", 2)  # the group on the broker carries the namespace
    assert [i.rpartition("@")[2] for i in ids] == ["inst0", "inst1"]
    assert [i.rpartition("@")[2] for i in wait_members(interop_cluster, "CNs", 1)] == ["plain"]
    wait_assigned(consumers, "nsA%JNs")  # the client names the topic with its namespace
    wait_assigned([plain], "JNs", shared=True)
    produce(run_java, "JNs", 10, "ns", namespace="nsA")
    produce(run_java, "JNs", 3, "bare")
    JavaDriver.wait_all(consumers, lambda: sum(len(c.received()) for c in consumers) >= 10, 30, "10 messages")
    plain.wait_for(lambda d: len(d.received()) >= 3, 30, "3 messages")
    time.sleep(0.5)
    got = [m for c in consumers for m in c.received()]
    assert sorted(m["bodyText"] for m in got) == labelled("ns", 10)
    assert {m["topic"] for m in got} == {"JNs"}  # the client strips the namespace it added
    assert texts(plain.events) == labelled("bare", 3)


def test_message_trace_records_land_in_the_trace_topic(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JTrace")
    # it stays up 3 s after its 3 messages: its trace dispatcher sends in the background and, at
    # shutdown, flushes for at most 500 ms (AsyncTraceDispatcher), which a busy machine can miss
    consumer = java("push", topic="JTrace", group="CTrace", trace=True, count=3, linger_ms=3000)
    wait_assigned([consumer], "JTrace", shared=True)
    sent = produce(run_java, "JTrace", 3, "tr", keys="tk", trace=True, linger_ms=2000)
    consumer.wait(40)
    ids = [sent[i]["msgId"] for i in range(3)]
    # the records are keyed by the traced message's id (what mqadmin queryMsgTraceById looks up)
    deadline = time.monotonic() + 20
    while True:
        events = run_java("query", topic="RMQ_SYS_TRACE_TOPIC", key=ids)
        found = collections.defaultdict(list)
        for e in events:
            if e["event"] == "found":
                found[e["arg"]] += [r.split("\x01")[0] for r in e["bodyText"].split("\x02") if r]
        if all({"Pub", "SubBefore", "SubAfter"} <= set(found[i]) for i in ids) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert all({"Pub", "SubBefore", "SubAfter"} <= set(found[i]) for i in ids), dict(found)
