"""The name server's route JSON: a topic's queues on each broker and each broker's addresses.

``QueueData`` (one broker's share of a topic)::

    {"brokerName": "b0", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}

``BrokerData`` (brokerId 0 is the master)::

    {"cluster": "c", "brokerName": "b0", "brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}}

RocketMQ writes ``brokerAddrs`` with unquoted numeric keys (fastjson); Pumice writes quoted
ones, which every observed client accepts, and reads both (``loads_lenient``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pumice.common import fastjson
from pumice.common.mix_all import MASTER_ID
from pumice.common.perm_name import PERM_READ, PERM_WRITE


def loads_lenient(body: bytes | bytearray | memoryview) -> Any:
    """Standard JSON or fastjson's (unquoted numeric keys from older name servers, bare object keys)."""
    return fastjson.loads(body)


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_broker_addr(self) -> str | None:
        """The master, else the lowest id."""
        if MASTER_ID in self.broker_addrs:
            return self.broker_addrs[MASTER_ID]
        return self.broker_addrs[min(self.broker_addrs)] if self.broker_addrs else None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BrokerData:
        addrs = {int(k): str(v) for k, v in (d.get("brokerAddrs") or {}).items()}
        return cls(str(d.get("cluster", "")), str(d["brokerName"]), addrs)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
        }


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> QueueData:
        return cls(
            str(d["brokerName"]),
            int(d.get("readQueueNums", 0)),
            int(d.get("writeQueueNums", 0)),
            int(d.get("perm", PERM_READ | PERM_WRITE)),
            int(d.get("topicSysFlag", 0)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }
