"""`stats` with name servers: each consumer group's lag per queue, from a live `pumice broker`."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

from click.testing import CliRunner

from pumice.cli import main
from pumice.client import AsyncMQAdmin, Message, Producer
from pumice.spark.jobs import stats
from tests.helpers.clusters import Cluster


def test_stats_reports_each_groups_lag(spark, tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    try:
        with Producer("LagPG", c.ns) as p:
            for i in range(20):
                p.send(Message("LagTopic", f"m{i}".encode()), mq=None)

        async def commit() -> dict[int, int]:
            async with AsyncMQAdmin(c.ns) as admin:
                status = await admin.topic_status("LagTopic")
                ends = {q.mq.queue_id: q.max_offset for q in status}
                for qid, end in ends.items():  # G1 is 1 behind on every queue; G2 committed nothing
                    await admin.api.update_consumer_offset(c.br, "G1", "LagTopic", qid, max(end - 1, 0))
                return ends

        ends = asyncio.run(commit())
        assert sum(ends.values()) == 20
        store = str(tmp_path / "store")
        result = stats(spark, store, topics=["LagTopic"], namesrv=c.ns)
        assert sum(q.messages for q in result.queues) == 20
        lags = {(g.group, g.queue_id): g for g in result.lags}
        assert {g for g, _ in lags} == {"G1"}
        for qid, end in ends.items():
            g = lags[("G1", qid)]
            assert (g.topic, g.broker_name) == ("LagTopic", "broker-t")
            assert (g.broker_offset, g.consumer_offset, g.lag) == (end, max(end - 1, 0), min(end, 1))
        assert result.summary.line().endswith(f"({len(result.queues)} queues, 1 consumer group)")

        r = CliRunner().invoke(main, ["spark", "stats", store, "--topic", "LagTopic", "--json", "-n", c.ns])
        assert r.exit_code == 0, r.output
        rows = [json.loads(line) for line in r.stdout.splitlines()]  # stdout: JSON only (the summary: stderr)
        assert sum(row["lag"] for row in rows if "group" in row) == sum(min(e, 1) for e in ends.values())
        # CSV: the queues, an empty line, then the lag table with its own header
        r = CliRunner().invoke(main, ["spark", "stats", store, "--topic", "LagTopic", "--csv", "-n", c.ns])
        assert r.exit_code == 0, r.output
        queue_part, lag_part = r.stdout.split("\n\n")
        assert sum(int(row["messages"]) for row in csv.DictReader(io.StringIO(queue_part))) == 20
        lag_rows = list(csv.DictReader(io.StringIO(lag_part)))
        assert {(row["group"], row["brokerName"]) for row in lag_rows} == {("G1", "broker-t")}
        assert sum(int(row["lag"]) for row in lag_rows) == sum(min(e, 1) for e in ends.values())
        # the table: a second one, titled, with a row per queue of G1
        r = CliRunner().invoke(main, ["spark", "stats", store, "--topic", "LagTopic", "-n", c.ns])
        assert r.exit_code == 0, r.output
        lag_lines = r.stdout.split("consumer lag\n", 1)[1].splitlines()
        assert lag_lines[0].split()[:3] == ["group", "topic", "broker"]
        assert sorted(line.split()[3] for line in lag_lines[2:-1]) == [str(q) for q in sorted(ends)]
        assert all(line.split()[:3] == ["G1", "LagTopic", "broker-t"] for line in lag_lines[2:-1])
    finally:
        c.close()
    r = CliRunner().invoke(main, ["spark", "stats", store, "--topic", "LagTopic", "-n", c.ns])
    assert r.exit_code == 1 and "cannot read consumer offsets" in r.output and "Traceback" not in r.output
