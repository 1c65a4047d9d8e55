"""A broker read against a master and its slave: the read follows suggestWhichBrokerId to
the slave (slaveReadEnable), and turns back to the master when the slave cannot serve."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

from pumice.client import Message, MessageQueue, MQAdmin, Producer
from pumice.spark.broker_reader import BrokerPartition, read_range
from pumice.spark.options import BrokerReadOptions
from tests.helpers.clusters import HACluster

N = 200


def test_broker_read_follows_the_suggestion_to_the_slave(spark, tmp_path: Path, caplog) -> None:
    c = HACluster(tmp_path)
    try:
        with MQAdmin(c.ns) as admin:
            admin.create_topic("TopicHA", cluster="HACluster", read_queue_nums=2, write_queue_nums=2)
        sent = []
        with Producer("PG_spark_ha", c.ns) as p:
            for i in range(N):
                body = f"ha-{i}".encode()
                r = p.send(Message("TopicHA", body), MessageQueue("TopicHA", "broker-ha", i % 2))
                sent.append((i % 2, r.queue_offset, body))
        c.start_slave()
        c.wait_replicated("TopicHA")
        before = c.slave_gets()

        def read() -> list[tuple[int, int, bytes]]:
            df = spark.read.format("pumice").option("namesrv", c.ns).option("topic", "TopicHA").load()
            return sorted((r["queueId"], r["queueOffset"], bytes(r["body"])) for r in df.collect())

        assert read() == sorted(sent)
        # the first pull of each queue goes to the master (32 messages), which suggests the slave
        served = c.slave_gets() - before
        assert served >= N - 2 * 32, served
        # A task whose planned route names a slave that cannot serve turns back to the master:
        # the slave is dead (connection refused), or is not a broker of the topic (an error code).
        slave_addr = c.s
        assert c.slave is not None
        c.slave.send_signal(signal.SIGKILL)
        c.slave.wait(10)
        opts = BrokerReadOptions.parse({"namesrv": c.ns, "topic": "TopicHA"})
        want = sorted(b for q, _, b in sent if q == 0)
        for slave in (slave_addr, c.ns):
            part = BrokerPartition("TopicHA", "broker-ha", 0, 0, N // 2, {0: c.m, 1: slave})
            with caplog.at_level(logging.WARNING, logger="pumice.spark.broker_reader"):
                batches = list(read_range(part, opts))
            assert sorted(bytes(b) for batch in batches for b in batch.column("body").to_pylist()) == want
            assert f"slave {slave} answered" in caplog.text
            caplog.clear()
    finally:
        c.close()
