"""RouteInfoManager: which brokers serve which topics, and whether they are alive.

Tables (RocketMQ's names):

=====================  ==================================================================
topic_queue_table      topic → brokerName → QueueData (read/write queue numbers, perm)
broker_addr_table      brokerName → BrokerData (cluster, brokerId → "ip:port"; 0 = master)
cluster_addr_table     cluster → brokerNames
broker_live_table      brokerAddr → BrokerLiveInfo (last register time, data version, channel)
=====================  ==================================================================

A registration of a brokerName/brokerId held by another live address takes it over, as in 4.9,
with a warning logged and put in the answer's remark (the registering broker logs it).
A master's REGISTER_BROKER replaces its queue data when its topic config's data version
changed (or on first registration). A broker silent for ``brokerChannelExpiredTime``
(120 s), or whose connection closed, is removed with its routes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pumice.common.mix_all import MASTER_ID
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.common.route_data import BrokerData, QueueData
from pumice.config import json_int

log = logging.getLogger(__name__)

# TopicSysFlag: a unit topic, and a topic with unit subscriptions
FLAG_UNIT = 1
FLAG_UNIT_SUB = 2


@dataclass
class BrokerLiveInfo:
    last_update_timestamp: int
    data_version: dict[str, Any]
    channel: Any
    ha_server_addr: str


@dataclass
class RegisterBrokerResult:
    ha_server_addr: str = ""
    master_addr: str = ""
    warning: str = ""  # told to the registering broker (the answer's remark)


def _now_ms() -> int:
    return int(time.time() * 1000)


def parse_topic_config_wrapper(broker_name: str, wrapper: Any) -> tuple[dict[str, Any], dict[str, QueueData] | None]:
    """A REGISTER_BROKER body's ``topicConfigSerializeWrapper``: its dataVersion and each topic's
    QueueData. ValueError, naming what is wrong, for a wrapper RocketMQ could not deserialize."""
    if wrapper is None:
        return {}, None
    if not isinstance(wrapper, dict):
        raise ValueError("topicConfigSerializeWrapper is not a JSON object")
    version = wrapper.get("dataVersion") or {}
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(version, dict) or not isinstance(table, dict):
        raise ValueError("dataVersion and topicConfigTable must be JSON objects")
    out: dict[str, QueueData] = {}
    for name, tc in table.items():
        if not isinstance(tc, dict):
            raise ValueError(f"the topic config of {name!r} is not a JSON object")
        nums = []
        for key, default in (("readQueueNums", 0), ("writeQueueNums", 0), ("perm", PERM_READ | PERM_WRITE),
                             ("topicSysFlag", 0)):  # fmt: skip
            v = tc.get(key, default)
            n = json_int(v)  # any Java int, as RocketMQ reads it
            if n is None:
                raise ValueError(f"topic {name!r}: {key} {v!r} is not an int")
            nums.append(n)
        out[str(tc.get("topicName", name))] = QueueData(broker_name, *nums)
    return version, out


class RouteInfoManager:
    def __init__(self, broker_channel_expired_time_ms: int = 120_000) -> None:
        self.expired_ms = broker_channel_expired_time_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self._lock = threading.RLock()

    # -- registration ------------------------------------------------------------------

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: dict[str, Any] | None,
        channel: Any = None,
    ) -> RegisterBrokerResult:
        result = RegisterBrokerResult()
        version, queue_datas = parse_topic_config_wrapper(broker_name, topic_config_wrapper)  # before any change
        with self._lock:
            self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
            bd = self.broker_addr_table.get(broker_name)
            register_first = bd is None
            if bd is None:
                bd = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name)
            # one address has one id: a slave promoted to master (or the reverse) moves
            for bid in [i for i, a in bd.broker_addrs.items() if a == broker_addr and i != broker_id]:
                del bd.broker_addrs[bid]
            old = bd.broker_addrs.get(broker_id)
            if old is not None and old != broker_addr and old in self.broker_live_table:
                # 4.9 replaces the address (logging it at INFO): kept, but said, since a second
                # broker with a copied conf takes the route from the first one
                result.warning = (
                    f"{broker_name}[{broker_id}] of cluster {cluster} was registered by {old}, which is still "
                    f"alive: its route now goes to {broker_addr}; two live brokers with one brokerName and "
                    "brokerId take the route from each other: give each its own"
                )
            bd.broker_addrs[broker_id] = broker_addr
            register_first = register_first or old is None
            if queue_datas is not None and broker_id == MASTER_ID:
                prev = self.broker_live_table.get(broker_addr)
                if register_first or prev is None or prev.data_version != version:
                    for topic, qd in queue_datas.items():
                        self.topic_queue_table.setdefault(topic, {})[broker_name] = qd
            self.broker_live_table[broker_addr] = BrokerLiveInfo(_now_ms(), version, channel, ha_server_addr)
            if broker_id != MASTER_ID:
                master = bd.broker_addrs.get(MASTER_ID)
                if master is not None:
                    live = self.broker_live_table.get(master)
                    if live is not None:
                        result.ha_server_addr = live.ha_server_addr
                        result.master_addr = master
        if result.warning:
            log.warning("register broker %s: %s", broker_addr, result.warning)
        log.info("register broker %s %s[%d] %s in cluster %s", "first" if register_first else "again", broker_name,
                 broker_id, broker_addr, cluster)  # fmt: skip
        return result

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        with self._lock:
            self.broker_live_table.pop(broker_addr, None)
            bd = self.broker_addr_table.get(broker_name)
            if bd is not None:
                if bd.broker_addrs.get(broker_id) == broker_addr:
                    del bd.broker_addrs[broker_id]
                if not bd.broker_addrs:
                    del self.broker_addr_table[broker_name]
                    names = self.cluster_addr_table.get(cluster)
                    if names is not None:
                        names.discard(broker_name)
                        if not names:
                            del self.cluster_addr_table[cluster]
                    self._remove_topics_of(broker_name)
        log.info("unregister broker %s[%d] %s", broker_name, broker_id, broker_addr)

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            qds = self.topic_queue_table[topic]
            qds.pop(broker_name, None)
            if not qds:
                del self.topic_queue_table[topic]

    # -- liveness ----------------------------------------------------------------------

    def scan_not_active_broker(self) -> int:
        """Drop brokers that have not registered within the expiry time; returns how many."""
        now = _now_ms()
        with self._lock:
            dead = [
                a for a, live in self.broker_live_table.items() if now - live.last_update_timestamp > self.expired_ms
            ]
        for addr in dead:
            log.warning("the broker %s has not registered for %d ms: remove it", addr, self.expired_ms)
            self.on_broker_gone(addr)
        return len(dead)

    def on_channel_destroy(self, channel: Any) -> None:
        with self._lock:
            addrs = [a for a, live in self.broker_live_table.items() if live.channel is channel]
        for addr in addrs:
            log.info("the connection of broker %s closed: remove it", addr)
            self.on_broker_gone(addr)

    def on_broker_gone(self, broker_addr: str) -> None:
        with self._lock:
            self.broker_live_table.pop(broker_addr, None)
            for bd in list(self.broker_addr_table.values()):
                for bid, addr in list(bd.broker_addrs.items()):
                    if addr == broker_addr:
                        self.unregister_broker(bd.cluster, addr, bd.broker_name, bid)

    # -- queries -----------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData JSON for ``topic``, or None when no broker serves it."""
        with self._lock:
            qds = self.topic_queue_table.get(topic)
            if not qds:
                return None
            brokers = [self.broker_addr_table[n] for n in sorted(qds) if n in self.broker_addr_table]
            if not brokers:
                return None
            return {
                "queueDatas": [qds[n].to_json() for n in sorted(qds)],
                "brokerDatas": [b.to_json() for b in brokers],
                "filterServerTable": {},
            }

    def get_all_cluster_info(self) -> dict[str, Any]:
        with self._lock:
            return {
                "brokerAddrTable": {n: b.to_json() for n, b in self.broker_addr_table.items()},
                "clusterAddrTable": {c: sorted(ns) for c, ns in self.cluster_addr_table.items()},
            }

    def get_all_topic_list(self) -> list[str]:
        with self._lock:
            return sorted(self.topic_queue_table)

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Drop ``topic``'s route; with ``cluster``, only its queue data on that cluster's
        brokers (the topic goes when none is left; an unknown cluster changes nothing)."""
        with self._lock:
            if not cluster:
                return self.topic_queue_table.pop(topic, None) is not None
            by_broker = self.topic_queue_table.get(topic)
            if by_broker is None:
                return False
            removed = [n for n in self.cluster_addr_table.get(cluster, set()) if by_broker.pop(n, None) is not None]
            if not by_broker:
                del self.topic_queue_table[topic]
            return bool(removed)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        """The topics any broker of ``cluster`` serves (an unknown cluster has none)."""
        with self._lock:
            names = self.cluster_addr_table.get(cluster, set())
            return sorted(t for t, by_broker in self.topic_queue_table.items() if not names.isdisjoint(by_broker))

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Take the write bit off every queue data of ``broker_name`` (until it registers
        again): producers stop routing to it. Returns how many topics changed."""
        with self._lock:
            count = 0
            for by_broker in self.topic_queue_table.values():
                qd = by_broker.get(broker_name)
                if qd is not None:
                    qd.perm &= ~PERM_WRITE
                    count += 1
            return count

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER (mqadmin addWritePerm), the undoing of a wipe: every queue
        data of ``broker_name`` gets read and write permission (RocketMQ sets the perm to 6,
        whatever it was). Returns how many topics that touched."""
        with self._lock:
            count = 0
            for by_broker in self.topic_queue_table.values():
                qd = by_broker.get(broker_name)
                if qd is not None:
                    qd.perm = PERM_READ | PERM_WRITE
                    count += 1
            return count

    def get_system_topic_list(self) -> tuple[list[str], str | None]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: the cluster names and the broker names (each one a
        system topic on its brokers), and the address of one broker (the first broker's lowest
        id) that the client then asks for the broker-side system topics; None with no broker."""
        with self._lock:
            names: dict[str, None] = {}
            for cluster in sorted(self.cluster_addr_table):
                names[cluster] = None
                names.update(dict.fromkeys(sorted(self.cluster_addr_table[cluster])))
            addr = next(
                (
                    bd.broker_addrs[min(bd.broker_addrs)]
                    for _, bd in sorted(self.broker_addr_table.items())
                    if bd.broker_addrs
                ),
                None,
            )
            return list(names), addr

    def get_topics_by_sys_flag(self, pick: Callable[[int], bool]) -> list[str]:
        """The topics whose topicSysFlag passes ``pick``, judged as RocketMQ does by one of
        their queue data (here the first broker's by name)."""
        with self._lock:
            return sorted(
                t
                for t, by_broker in self.topic_queue_table.items()
                if by_broker and pick(by_broker[min(by_broker)].topic_sys_flag)
            )

    def get_unit_topics(self) -> list[str]:
        """GET_UNIT_TOPIC_LIST: topics with the unit flag."""
        return self.get_topics_by_sys_flag(lambda f: bool(f & FLAG_UNIT))

    def get_has_unit_sub_topics(self) -> list[str]:
        """GET_HAS_UNIT_SUB_TOPIC_LIST: topics with the unit-subscription flag."""
        return self.get_topics_by_sys_flag(lambda f: bool(f & FLAG_UNIT_SUB))

    def get_has_unit_sub_ununit_topics(self) -> list[str]:
        """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: topics with the unit-subscription flag and
        without the unit flag."""
        return self.get_topics_by_sys_flag(lambda f: bool(f & FLAG_UNIT_SUB) and not f & FLAG_UNIT)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: dict[str, Any]) -> tuple[bool, Any]:
        """QUERY_DATA_VERSION: whether ``data_version`` differs from the one the broker last
        registered (an unregistered broker: changed), and that one; an unchanged broker counts
        as alive now (a Java broker asks this before re-registering, and skips it if nothing changed)."""
        with self._lock:
            live = self.broker_live_table.get(broker_addr)
            prev = live.data_version if live is not None else None
            changed = prev is None or [prev.get("timestamp"), prev.get("counter")] != [
                data_version.get("timestamp"),
                data_version.get("counter"),
            ]
            if not changed and live is not None:
                live.last_update_timestamp = _now_ms()
            return changed, prev
