"""SQL92 filtering with the official Java client (rocketmq-client 4.9.8): a push consumer
subscribed with ``MessageSelector.bySql`` to `pumice broker` with ``enablePropertyFilter=true``
gets exactly the messages its expression selects; an expression that does not parse stops its
start (CHECK_CLIENT_CONFIG answers SUBSCRIPTION_PARSE_FAILED, as 4.9). The broker keeps the
bloom-filter bit maps (ConsumeQueueExt, ``enableCalcFilterBitMap``) and filters retries
(``filterSupportRetry``), and mqadmin's queryCq shows each entry's unit and the group's verdict."""

from __future__ import annotations

import re
import time

from tests.helpers.interop import create_topic
from tests.helpers.mqadmin import MQAdmin, mqadmin_classpath

BROKER_CONF = (
    "enablePropertyFilter=true\nenableConsumeQueueExt=true\nenableCalcFilterBitMap=true\nfilterSupportRetry=true\n"
)


def test_a_sql92_subscription_gets_what_it_selects(java, run_java, interop_cluster) -> None:
    create_topic(interop_cluster, "JSql")
    # message i has the property "i" and tag A, B or C by i % 3
    consumer = java("push", topic="JSql", group="CJSql", sql="i BETWEEN 5 AND 9 AND TAGS IN ('A', 'C')",
                    duration=60)  # fmt: skip
    consumer.wait_event("started", 30)
    events = run_java("produce", topic="JSql", count=20, tags="A,B,C", label="sql")
    assert not [e for e in events if e["event"] == "error"]
    consumer.wait_for(lambda d: len(d.received()) >= 4, 30, "the 4 selected messages")
    time.sleep(2)  # anything else would have come by now
    got = sorted(int(m["props"]["i"]) for m in consumer.received())
    assert got == [5, 6, 8, 9], got
    assert all(m["tags"] in ("A", "C") for m in consumer.received())


def test_an_expression_that_does_not_parse_stops_the_consumer_start(java, interop_cluster) -> None:
    create_topic(interop_cluster, "JSqlBad")
    consumer = java("push", topic="JSqlBad", group="CJSqlBad", sql="i BETWEEN AND", duration=30)
    assert consumer.proc.wait(60) == 1
    err = consumer.stderr_path.read_text()
    assert "MQClientException: CODE: 23  DESC: Invalid syntax: i BETWEEN AND" in err, err[-2000:]
    assert "checkClientInBroker" in err


def test_the_bit_map_marks_what_the_selector_matches_and_retries_still_arrive(
    java, run_java, interop_cluster, tmp_path
) -> None:
    """Each message stored after the consumer registered gets a unit whose bit map carries the
    group's bits exactly when its selector matches (queryCq's eval); the selected messages arrive
    and, failed once, come back from the retry topic filtered by the same selector."""
    create_topic(interop_cluster, "JSqlMap", queues=1)
    consumer = java("push", topic="JSqlMap", group="CJSqlMap", sql="i >= 10", fail=1, retry_level=1, duration=90)
    consumer.wait_event("started", 30)
    time.sleep(1)  # the filter's born time is its first heartbeat: messages stored after it get its bits
    sent = run_java("produce", topic="JSqlMap", count=20, label="map")
    assert sorted(e["queueOffset"] for e in sent if e["event"] == "sent") == list(range(20))
    consumer.wait_for(lambda d: len(d.received()) >= 20, 60, "10 selected messages, each twice")
    time.sleep(2)
    got = sorted((int(m["props"]["i"]), m["reconsumeTimes"]) for m in consumer.received())
    assert got == [(i, r) for i in range(10, 20) for r in (0, 1)], got
    admin = MQAdmin(mqadmin_classpath(), interop_cluster.ns, tmp_path / "mqadmin")
    query = ["-t", "JSqlMap", "-q", "0", "-i", "0", "-c", "20", "-g", "CJSqlMap", "-b", interop_cluster.br]
    out = admin("queryCq", *query)
    out.ok()
    assert '"expression":"i >= 10"' in out.stdout, out.stdout
    entries = re.findall(r"extendDataJson='([^']*)', bitMap='([01\n]*)', eval=(true|false)", out.stdout)
    assert len(entries) == 20, out.stdout
    assert [e[2] for e in entries] == ["false"] * 10 + ["true"] * 10
    assert all('"filterBitMap"' in e[0] for e in entries)
    assert {e[1].count("1") for e in entries[:10]} == {0} and min(e[1].count("1") for e in entries[10:]) >= 1
