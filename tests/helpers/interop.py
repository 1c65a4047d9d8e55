"""The Pumice side of the Java interop suite (tests/interop).

``InteropCluster`` is a name server and broker with the fast port (listenPort - 2) on, as a
Java client's VIP channel needs, and ``BROKER_CONF`` lines from the test module; it keeps both
processes' output in broker.log and namesrv.log beside the store. ``create_topic`` creates a
topic and waits for its route (blocking); ``wait_members`` waits for a group's consumers.
"""

from __future__ import annotations

import asyncio
import time

from pumice.client.admin import AsyncMQAdmin
from tests.helpers import clients
from tests.helpers.clusters import Cluster


class InteropCluster(Cluster):
    """A Cluster with the fast port on and the test module's extra broker.conf lines (its ``BROKER_CONF``)."""

    def start_broker(self):
        conf = self.tmp / "broker.conf"
        conf.write_text(conf.read_text().replace("fastListenPortEnable=false\n", "fastListenPortEnable=true\n"))
        return super().start_broker()

    @property
    def vip(self) -> str:
        return f"127.0.0.1:{self.broker_port - 2}"

    def close(self) -> None:
        """Stop both; their output stays in broker.log and namesrv.log beside the store."""
        try:
            super().close()
        finally:
            for name, proc in (("broker", self.broker), ("namesrv", self.namesrv)):
                (self.tmp / f"{name}.log").write_text("".join(getattr(proc, "output_lines", [])))


def create_topic(cluster: Cluster, topic: str, queues: int = 4) -> None:
    """Create the topic (Pumice's admin client) and wait for its route: a consumer started
    before a topic exists finds its queues only at its next rebalance (20 s in 4.9)."""
    asyncio.run(asyncio.wait_for(clients.create_topic(cluster, topic, queues), 30))


def consumer_ids(cluster, group: str) -> list[str]:
    """The client ids the broker lists in the group (GET_CONSUMER_CONNECTION_LIST); [] for none."""

    async def ask() -> list[str]:
        async with AsyncMQAdmin(cluster.ns) as admin:
            try:
                conn = await admin.consumer_connection(group)
            except Exception:
                return []
            return sorted(c.client_id for c in conn.connections)

    return asyncio.run(asyncio.wait_for(ask(), 20))


def wait_members(cluster, group: str, n: int, timeout_s: float = 30) -> list[str]:
    """Wait until the broker lists ``n`` clients in the group (GET_CONSUMER_CONNECTION_LIST)."""
    deadline = time.monotonic() + timeout_s
    while len(ids := consumer_ids(cluster, group)) != n:
        assert time.monotonic() < deadline, f"{group}: {ids}"
        time.sleep(0.2)
    return ids
