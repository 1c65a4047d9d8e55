"""The message classes the store writes and reads back.

``MessageExtBrokerInner`` is what the broker hands to ``CommitLog.put_message``;
``MessageExtBatch`` is a SEND_BATCH_MESSAGE for ``CommitLog.put_message_batch``;
``MessageExt`` is a record decoded back from the CommitLog. Names follow RocketMQ's
``MessageConst``, ``MessageSysFlag``, ``MessageExtBrokerInner`` and ``MessageExt``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from pumice.common.message_const import MessageConst

# (address bytes, port): 4 address bytes for IPv4, 16 for IPv6.
HostAddress = tuple[bytes, int]
LOOPBACK: HostAddress = (b"\x7f\x00\x00\x01", 0)


def host_address(addr: str) -> HostAddress:
    """``"ip:port"`` → (address bytes, port); IPv6 when the host has a colon."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        raw = socket.inet_pton(family, host)
    except OSError:
        raw = LOOPBACK[0]
    return raw, int(port) if port.isdigit() else 0


@dataclass(slots=True)
class MessageExtBrokerInner:
    """A message on its way into the CommitLog.

    ``properties`` is the name→value map; ``properties_string`` caches its wire form
    (``name\\x01value\\x02…``) when the broker already has it from the request.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = LOOPBACK
    store_host: HostAddress = LOOPBACK
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties_string: str | None = None
    store_timestamp: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_KEYS)

    @property
    def delay_time_level(self) -> int:
        v = self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        try:
            return int(v) if v else 0
        except ValueError:
            return 0


@dataclass(slots=True)
class MessageExtBatch:
    """One SEND_BATCH_MESSAGE: messages of one topic and queue whose header fields are
    shared, with ``body`` the producer's batch body, a run of these records:

    ==============  =====  ==========================================
    field           bytes  meaning
    ==============  =====  ==========================================
    totalSize       4      22 + bodyLength + propertiesLength
    magicCode       4      ignored
    bodyCRC         4      ignored (the broker computes it)
    flag            4      the message's application flag
    bodyLength      4
    body            n
    propertiesLen   2      signed, ≥ 0
    properties      n      ``name\\x01value\\x02…`` (UTF-8)
    ==============  =====  ==========================================

    ``CommitLog.put_message_batch`` walks it straight into CommitLog records, as RocketMQ's
    MessageExtBatchEncoder does, appending ``properties_suffix`` (the broker's CLUSTER) to
    each message's properties.
    """

    topic: str
    queue_id: int
    body: bytes | bytearray | memoryview
    properties_suffix: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = LOOPBACK
    store_host: HostAddress = LOOPBACK
    reconsume_times: int = 0
    store_timestamp: int = 0


@dataclass(slots=True)
class MessageExt:
    """A record decoded from the CommitLog."""

    store_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: HostAddress
    store_timestamp: int
    store_host: HostAddress
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]
    msg_id: str = ""

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_KEYS)
