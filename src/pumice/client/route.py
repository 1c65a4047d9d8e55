"""TopicRouteData (the GET_ROUTEINFO_BY_TOPIC body) and the queue lists clients derive from it.

Body JSON (``brokerAddrs`` keys are broker ids: 0 is the master; quoted or not)::

    {"brokerDatas": [{"cluster": "C", "brokerName": "b", "brokerAddrs": {"0": "ip:port"}}],
     "queueDatas": [{"brokerName": "b", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                     "topicSysFlag": 0}],
     "filterServerTable": {}, "orderTopicConf": "b:4;…" (optional)}

Publish queues (producers): write queues ``0..writeQueueNums-1`` of the writable brokers that
have a master, in queueDatas order (or the order ``orderTopicConf`` lists, for ordered
topics). Subscribe queues (consumers): read queues ``0..readQueueNums-1`` of the readable
brokers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pumice.client.message import MessageQueue
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.common.route_data import BrokerData, QueueData, loads_lenient


@dataclass
class TopicRouteData:
    broker_datas: list[BrokerData] = field(default_factory=list)
    queue_datas: list[QueueData] = field(default_factory=list)
    order_topic_conf: str | None = None
    # publish_queues per topic: a route is replaced, never changed, when it is refreshed
    _publish: dict[str, list[MessageQueue]] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicRouteData:
        return cls(
            [BrokerData.from_json(b) for b in d.get("brokerDatas") or []],
            [QueueData.from_json(q) for q in d.get("queueDatas") or []],
            d.get("orderTopicConf") or None,
        )

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview) -> TopicRouteData:
        return cls.from_json(loads_lenient(body))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "queueDatas": [q.to_json() for q in self.queue_datas],
        }
        if self.order_topic_conf:
            d["orderTopicConf"] = self.order_topic_conf
        return d

    def broker(self, broker_name: str) -> BrokerData | None:
        return next((b for b in self.broker_datas if b.broker_name == broker_name), None)

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues on brokers with a master (cached: do not modify the list)."""
        mqs = self._publish.get(topic)
        if mqs is None:
            mqs = self._publish[topic] = self._compute_publish_queues(topic)
        return mqs

    def _compute_publish_queues(self, topic: str) -> list[MessageQueue]:
        if self.order_topic_conf:
            out = []
            for item in self.order_topic_conf.split(";"):
                name, _, nums = item.partition(":")
                if name and nums.isdigit():
                    out += [MessageQueue(topic, name, i) for i in range(int(nums))]
            return out
        out = []
        for qd in self.queue_datas:
            if not qd.perm & PERM_WRITE:
                continue
            bd = self.broker(qd.broker_name)
            if bd is None or bd.master_addr is None:
                continue
            out += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
        return out

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        out = []
        for qd in self.queue_datas:
            if qd.perm & PERM_READ:
                out += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums)]
        return sorted(out)


@dataclass
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO body: ``{"brokerAddrTable": {name: BrokerData},
    "clusterAddrTable": {cluster: [brokerName]}}``."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview) -> ClusterInfo:
        d = loads_lenient(body)
        brokers = {str(n): BrokerData.from_json(b) for n, b in (d.get("brokerAddrTable") or {}).items()}
        clusters = {str(c): sorted(str(n) for n in ns) for c, ns in (d.get("clusterAddrTable") or {}).items()}
        return cls(brokers, clusters)

    def master_addrs(self, cluster: str | None = None) -> list[str]:
        """Master addresses of the cluster's brokers (every cluster when None), sorted by broker name."""
        names = self.cluster_addr_table.get(cluster, []) if cluster is not None else sorted(self.broker_addr_table)
        out = []
        for n in names:
            bd = self.broker_addr_table.get(n)
            if bd is not None and bd.master_addr is not None:
                out.append(bd.master_addr)
        return out
