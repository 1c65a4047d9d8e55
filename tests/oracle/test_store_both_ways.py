"""The store is interchangeable with Apache RocketMQ 4.9.7's, both ways (issue 17).

A *writer* (RocketMQ's own NamesrvStartup + BrokerStartup, or `pumice namesrv` + `pumice
broker`) takes a mixed workload from the official Java client (tests/java, rocketmq-client
4.9.8): three topics of 4 queues (created with Pumice's admin client through the writer's name
server), sync sends with tags, keys and a user property, bodies of 5000 bytes (over 4 KiB: the
client compresses them), a batch, async sends, and a push consumer group that consumes part of
one topic and commits its offsets. A pull consumer reads everything back from the writer (every
field the driver prints), and by-key, by-unique-key and by-offset-msgId queries run. Last, a
push group fails each message of the third topic once (RECONSUME_LATER: the retries wait in
SCHEDULE_TOPIC_XXXX at level 3, 10 s), two messages with delay level 4 (30 s) are sent, and the
writer is stopped: SIGTERM (a clean shutdown: no abort file) or SIGKILL (the abort file stays;
the kill comes once consumerOffset.json holds the commits, which both persist every second or so).

Then the *reader* (the other implementation) starts on the same store directory, with the same
cluster, broker name, broker port and store geometry (1 MiB CommitLog files, 300-entry
ConsumeQueue files), and a new name server. Checks:

* every acknowledged message is served at the queue id and queue offset its send returned,
  with the same msgId (UNIQ_KEY), offsetMsgId (store host and CommitLog offset), keys, tags,
  properties, timestamps, sysFlag and body hash as the writer served it; min and max offsets
  per queue are the same;
* the committed offsets (consumerOffset.json) carried over: QUERY_CONSUMER_OFFSET answers the
  writer's values (after SIGKILL too: the kill came once the file held them), and a push
  consumer of the group resumes there: it receives exactly the rest;
* the delayed messages (in SCHEDULE_TOPIC_XXXX and delayOffset.json when the writer stopped)
  are delivered by the reader to their real topic, once; the retries reach the failing group
  once each, with reconsumeTimes 1 and the original topic, keys and body;
* the queries find the same messages (the index files).

Every process (Java or Python) is stopped by its pid in ``finally`` blocks; every wait is bounded.
The sides and the writer's workload are in workload.py (test_stored_records.py and
test_spark_reads_rocketmq_store.py use them too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.java_driver import JavaDriver, body, sha256
from tests.helpers.ports import free_port
from tests.oracle.budget import ALL_ONLY
from tests.oracle.workload import (
    GROUP,
    OFFSET_PAIRS,
    QUEUES,
    READER_AFTER,
    RETRY_GROUP,
    TOPIC_A,
    TOPIC_C,
    TOPICS,
    Drivers,
    Side,
    Written,
    committed,
    diff,
    found_of,
    read_all,
    run,
    stored,
    write,
)


def check_read(drivers: Drivers, side: Side, w: Written, end: str) -> None:
    """The reader serves what the writer acknowledged and served, and resumes the group."""
    # 1. committed offsets, before any consumer of this side can move them
    # (killed: the writer was killed once consumerOffset.json held them)
    now = run(committed(side.br, OFFSET_PAIRS))
    assert now == w.offsets, f"committed offsets: writer {w.offsets} reader {now}"
    start = {q: now.get((GROUP, TOPIC_A, q), 0) for q in range(QUEUES)}

    # 2. the group resumes where it stopped: the rest of TOPIC_A, then the delayed messages
    rest = {(q, o) for q in range(QUEUES) for o in range(start[q], w.bounds[(TOPIC_A, q)][1])}
    delayed_ids = {s.msg_id for s in w.delayed}
    push = drivers.start(side, "push", "push-resume", topic=TOPIC_A, group=GROUP, threads=1, duration=120)
    retry = drivers.start(side, "push", "retry-resume", topic=TOPIC_C, group=RETRY_GROUP, threads=1, duration=120)

    def done(d: JavaDriver) -> bool:
        got = d.received()
        return rest <= {(e["queueId"], e["queueOffset"]) for e in got} and delayed_ids <= {e["msgId"] for e in got}

    push.wait_for(done, 90, f"the rest of {TOPIC_A} ({len(rest)}) and the delayed messages")
    retry_ids = {e["msgId"] for e in w.retried}
    retry.wait_for(lambda d: retry_ids <= {e["msgId"] for e in d.received()}, 60, f"the retries of {TOPIC_C}")
    got = push.stop(30)
    received = [e for e in got if e["event"] == "received"]
    plain = [e for e in received if e["msgId"] not in delayed_ids]
    assert sorted((e["queueId"], e["queueOffset"]) for e in plain) == sorted(rest), "not exactly the rest"
    retries = [e for e in retry.stop(30) if e["event"] == "received"]
    # once each, as retries (from %RETRY%OracleRetry, the original topic restored by the client)
    assert sorted(e["msgId"] for e in retries) == sorted(retry_ids), retries
    first = {e["msgId"]: e for e in w.retried}
    for e in retries:
        assert e["reconsumeTimes"] == 1 and e["topic"] == TOPIC_C, e
        assert (e["bodySha256"], e["keys"], e["bornTimestamp"]) == (
            first[e["msgId"]]["bodySha256"],
            first[e["msgId"]]["keys"],
            first[e["msgId"]]["bornTimestamp"],
        ), (e, first[e["msgId"]])
    for e in plain:
        assert stored(e) | {"props": None} == w.read[(TOPIC_A, e["queueId"], e["queueOffset"])] | {"props": None}

    # 3. the delayed messages: delivered once, by the reader (after the writer stopped), bodies intact
    late = [e for e in received if e["msgId"] in delayed_ids]
    assert sorted(e["msgId"] for e in late) == sorted(delayed_ids), late
    for e in late:
        assert e["topic"] == TOPIC_A and e["bodySha256"] == sha256(body("d", int(e["props"]["i"]))), e
        assert e["storeTimestamp"] >= w.stopped_at_ms - 1000, (
            f"delivered before the writer stopped ({e['storeTimestamp']} < {w.stopped_at_ms}): raise DELAY_LEVEL"
        )
        assert (TOPIC_A, e["queueId"], e["queueOffset"]) not in w.read, e

    # 4. everything, through a new group, as the writer served it
    reads = drivers.run(side, {f"read-{t}": ("pull", {"topic": t, "group": READER_AFTER}) for t in TOPICS})
    msgs: dict[tuple[str, int, int], dict[str, Any]] = {}
    bounds: dict[tuple[str, int], tuple[int, int, int]] = {}
    for events in reads.values():
        m, b = read_all(events)
        msgs |= m
        bounds |= b
    problems = diff(w.read, msgs)
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:30])
    extra = {k: v for k, v in msgs.items() if k not in w.read}
    assert sorted(v["msgId"] for v in extra.values()) == sorted(delayed_ids), extra
    for (topic, q), (lo, hi, earliest) in w.bounds.items():
        late_here = sum(1 for (t, qq, _) in extra if (t, qq) == (topic, q))
        assert bounds[(topic, q)] == (lo, hi + late_here, earliest), (topic, q, bounds[(topic, q)], (lo, hi))
    # every acknowledged message at the place its send returned, with its ids and body
    for s in w.sent:
        m = msgs[(s.topic, s.queue_id, s.queue_offset)]
        assert (m["msgId"], m["offsetMsgId"]) == (s.msg_id, s.offset_msg_id), (s, m)
        assert m["bodySha256"] == sha256(body(s.label, s.i, s.size)), s

    # 5. the same queries find the same messages (index files; offset msgIds: same host:port)
    found: dict[tuple[str, str], set[tuple[Any, ...]]] = {}
    for events in drivers.run(side, {n: ("query", q) for n, q in w.queries.items()}).values():
        found |= found_of(events)
    assert found == w.found, f"queries: writer {w.found} reader {found}"
    total_a = sum(hi for (t, _), (_, hi, _) in w.bounds.items() if t == TOPIC_A)
    print(  # shown with -s: what was compared
        f"{side.kind} read {len(msgs)} messages ({len(w.read)} as the writer served them, {len(extra)} delayed,"
        f" delivered {[e['storeTimestamp'] - w.stopped_at_ms for e in late]} ms after the writer stopped);"
        f" committed {now}; resumed with {len(plain)} of {total_a}"
        f" in {TOPIC_A}; {len(retries)} retries; {sum(map(len, found.values()))} found by {len(found)} queries"
    )


# the clean stops run with PUMICE_ORACLE_ALL=1 (.ci/run's time budget): the killed writers'
# stores, read by the other side, cover both directions by default
WAYS = [
    pytest.param("rocketmq", "pumice", "stop", id="rocketmq-writes-pumice-reads", marks=ALL_ONLY),
    pytest.param("pumice", "rocketmq", "stop", id="pumice-writes-rocketmq-reads", marks=ALL_ONLY),
    pytest.param("rocketmq", "pumice", "kill", id="rocketmq-killed-pumice-recovers"),
    pytest.param("pumice", "rocketmq", "kill", id="pumice-killed-rocketmq-recovers"),
]


@pytest.mark.parametrize(("writer", "reader", "end"), WAYS)
def test_store_both_ways(
    writer: str, reader: str, end: str, tmp_path: Path, peer_classpath: str, java_classpath: str
) -> None:
    store = tmp_path / "store"
    broker_port = free_port()
    drivers = Drivers(java_classpath, tmp_path / "java")
    sides: list[Side] = []
    try:
        sides.append(Side(writer, tmp_path / f"writer-{writer}", store, broker_port, peer_classpath))
        try:
            w = write(drivers, sides[0], end)
        finally:
            sides[0].close()
        sides.append(Side(reader, tmp_path / f"reader-{reader}", store, broker_port, peer_classpath))
        check_read(drivers, sides[1], w, end)
    except Exception as e:
        details = "\n".join(f"=== {s.kind} ===\n{s.describe()}" for s in sides)
        raise AssertionError(f"{e}\n{details}"[:20000]) from e
    finally:
        drivers.close()
        for s in sides:
            s.close()
