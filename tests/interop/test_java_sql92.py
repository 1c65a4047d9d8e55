"""SQL92 filtering with the official Java client (rocketmq-client 4.9.8): a push consumer
subscribed with ``MessageSelector.bySql`` to `pumice broker` with ``enablePropertyFilter=true``
gets exactly the messages its expression selects; an expression that does not parse stops its
start (CHECK_CLIENT_CONFIG answers SUBSCRIPTION_PARSE_FAILED, as 4.9)."""

from __future__ import annotations

import time

from tests.interop.conftest import create_topic

BROKER_CONF = "enablePropertyFilter=true\n"


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
