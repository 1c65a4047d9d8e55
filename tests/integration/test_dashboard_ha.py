"""The dashboard's replication table against a real master and slave (`pumice broker` processes):
the slave's offset behind in bytes and seconds, 0 when caught up and growing while it is paused."""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.client import Message, MQAdmin, Producer
from tests.helpers.clusters import HACluster, start, stop
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually


@pytest.fixture
def ha(tmp_path: Path) -> Iterator[HACluster]:
    c = HACluster(tmp_path)
    try:
        c.start_slave()
        yield c
    finally:
        if c.slave is not None and c.slave.poll() is None:
            os.kill(c.slave.pid, signal.SIGCONT)
        c.close()


def replication(base: str) -> list[tuple[str, str, int, float]]:
    html = urllib.request.urlopen(base + "/", timeout=30).read().decode()
    table = html.split('id="replication"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>(-?\d+)</td><td>(-?[\d.]+)</td></tr>", table)
    return [(m, s, int(b), float(sec)) for m, s, b, sec in rows]


def test_replication_shows_the_slave_behind_in_bytes_and_seconds(ha: HACluster) -> None:
    with MQAdmin(ha.ns) as admin:
        admin.create_topic("HaDashTopic", broker_addr=ha.m, read_queue_nums=1, write_queue_nums=1)
    producer = Producer("HaDash", ha.ns, instance_name="ha-dash")
    producer.start()
    port = free_port()
    dashboard = start(["dashboard", "-n", ha.ns, "--port", str(port)], "dashboard on")
    base = f"http://127.0.0.1:{port}"
    try:
        producer.send(Message("HaDashTopic", b"x" * 100))
        ha.wait_replicated()
        rows = eventually(lambda: replication(base) or None, 20, "the slave listed", every=0.3)
        ((master, slave, behind, seconds),) = rows
        assert master == ha.m and slave.startswith("127.0.0.1:") and (behind, seconds) == (0, 0.0)
        os.kill(ha.slave.pid, signal.SIGSTOP)  # type: ignore[union-attr]  # its connection stays, its acks stop
        for _ in range(10):
            producer.send(Message("HaDashTopic", b"y" * 1000))
        time.sleep(1.2)
        ((_, _, behind, seconds),) = replication(base)
        assert behind >= 10 * 1000 and seconds >= 1.0, (behind, seconds)
    finally:
        os.kill(ha.slave.pid, signal.SIGCONT)  # type: ignore[union-attr]
        producer.shutdown()
        stop(dashboard)
