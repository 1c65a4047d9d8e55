"""The client's message types: Message, MessageExt, MessageQueue, SendResult, PullResult.

``Message`` is what a producer sends. Its tags, keys, delay level and WAIT flag travel as
properties (RocketMQ's ``MessageConst``); ``Message.wire_properties()`` builds that map:

=========  =====================================================  ======================
property   source                                                 example
=========  =====================================================  ======================
TAGS       ``tags``                                               ``TagA``
KEYS       ``keys`` joined by one space (the broker indexes each)  ``order-1 user-7``
DELAY      ``delay_time_level`` when > 0 (1 = 1s … 18 = 2h)        ``3``
WAIT       ``wait_store_msg_ok``: the broker answers after flush   ``true``
UNIQ_KEY   set by the producer (``message_id.UniqKeyGenerator``)   32 hex characters
(user)     ``properties``                                         ``{"a": "1"}``
=========  =====================================================  ======================

``MessageExt`` is a message as stored, decoded from a pull, query or view body with the
store's record decoder (``pumice.store.message_decoder``); a compressed body (sysFlag bit 0)
is inflated, ``sys_flag`` keeps the bit. Its ``msg_id`` is the UNIQ_KEY when present (as the
Java client shows it), else the offset msgId; ``offset_msg_id`` is always the offset msgId.
"""

from __future__ import annotations

import functools
import socket
import struct
import zlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pumice.store.message import MessageConst, MessageSysFlag
from pumice.store.message_decoder import create_message_id, decode_record_fields, string_to_message_properties

PROPERTY_TAGS = MessageConst.PROPERTY_TAGS
PROPERTY_KEYS = MessageConst.PROPERTY_KEYS
PROPERTY_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
PROPERTY_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
PROPERTY_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
PROPERTY_MIN_OFFSET = MessageConst.PROPERTY_MIN_OFFSET
PROPERTY_MAX_OFFSET = MessageConst.PROPERTY_MAX_OFFSET
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
COMPRESSED_FLAG = MessageSysFlag.COMPRESSED_FLAG
# the properties the client itself sets; ``properties`` given by the user must not use them
RESERVED_PROPERTIES = frozenset({PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_DELAY, PROPERTY_WAIT, PROPERTY_UNIQ_KEY})


def _keys_list(keys: str | list[str] | tuple[str, ...] | None) -> list[str]:
    if keys is None:
        return []
    if isinstance(keys, str):
        return [k for k in keys.split(MessageConst.KEY_SEPARATOR) if k]
    return [str(k) for k in keys if k]


@dataclass
class Message:
    """A message to send. ``keys`` may be a string (split on spaces) or a list."""

    topic: str
    body: bytes = b""
    tags: str | None = None
    keys: list[str] | str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_time_level: int = 0
    flag: int = 0
    wait_store_msg_ok: bool = True

    def __post_init__(self) -> None:
        self.keys = _keys_list(self.keys)
        if isinstance(self.body, (bytearray, memoryview)):
            self.body = bytes(self.body)
        elif isinstance(self.body, str):
            self.body = self.body.encode()

    def put_user_property(self, name: str, value: str) -> None:
        if name in RESERVED_PROPERTIES:
            raise ValueError(f"the property {name!r} is reserved for the client")
        self.properties[name] = str(value)

    def get_property(self, name: str) -> str | None:
        return self.wire_properties().get(name)

    def wire_properties(self) -> dict[str, str]:
        """Every property as it goes on the wire (user ones first, as the map is built)."""
        props = {k: str(v) for k, v in self.properties.items()}
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = MessageConst.KEY_SEPARATOR.join(self.keys)  # type: ignore[arg-type]
        if self.delay_time_level > 0:
            props[PROPERTY_DELAY] = str(self.delay_time_level)
        props[PROPERTY_WAIT] = "true" if self.wait_store_msg_ok else "false"
        return props


@functools.lru_cache(maxsize=4096)  # a consumer sees few distinct producers and brokers
def _host_str(host: tuple[bytes, int]) -> str:
    addr, port = host
    family = socket.AF_INET6 if len(addr) == 16 else socket.AF_INET
    try:
        ip = socket.inet_ntop(family, addr)
    except (OSError, ValueError):
        ip = addr.hex()
    return f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}"


@dataclass(slots=True)
class MessageExt:
    """A stored message, decoded. ``properties`` holds every property as stored."""

    topic: str
    body: bytes
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int
    store_size: int
    msg_id: str
    offset_msg_id: str
    broker_name: str | None = None

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return _keys_list(self.properties.get(PROPERTY_KEYS))

    @property
    def delay_time_level(self) -> int:
        v = self.properties.get(PROPERTY_DELAY, "")
        return int(v) if v.isdigit() else 0

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def user_properties(self) -> dict[str, str]:
        """The properties minus the ones the client and broker set."""
        system = RESERVED_PROPERTIES | {MessageConst.PROPERTY_CLUSTER, PROPERTY_MIN_OFFSET, PROPERTY_MAX_OFFSET}
        return {k: v for k, v in self.properties.items() if k not in system}


_SIZE = struct.Struct(">i")


def decode_message_ext(buf: bytes | memoryview, pos: int = 0, decompress: bool = True) -> MessageExt:
    """One stored record at ``buf[pos:]`` (ValueError on a bad record or body)."""
    f, body, topic, props_str = decode_record_fields(buf, pos)
    sys_flag = f[7]
    store_host = (f[12], f[13])
    offset_msg_id = create_message_id(store_host, f[6])
    if decompress and sys_flag & COMPRESSED_FLAG:
        try:
            body = zlib.decompress(body)
        except zlib.error as e:
            raise ValueError(f"cannot inflate the body of {offset_msg_id}: {e}") from None
    props = string_to_message_properties(props_str)
    return MessageExt(
        topic, body, props, f[3], f[5], f[6], sys_flag, f[4], f[8], _host_str((f[9], f[10])), f[11],
        _host_str(store_host), f[14], f[15], f[2], f[0], props.get(PROPERTY_UNIQ_KEY) or offset_msg_id, offset_msg_id,
    )  # fmt: skip


def decode_messages(body: bytes | memoryview, decompress: bool = True) -> list[MessageExt]:
    """Every record of a pull, query or view body, in order."""
    mv = memoryview(body)
    out: list[MessageExt] = []
    pos = 0
    while len(mv) - pos >= 4:
        (size,) = _SIZE.unpack_from(mv, pos)
        if size <= 0 or pos + size > len(mv):
            raise ValueError(f"truncated record at byte {pos} of {len(mv)}")
        out.append(decode_message_ext(mv, pos, decompress))
        pos += size
    return out


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; hashable and ordered (topic, broker, queue id)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MessageQueue:
        return cls(str(d["topic"]), str(d["brokerName"]), int(d["queueId"]))

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}#{self.queue_id}"


class SendStatus(Enum):
    """How a send ended; every one of them means the broker stored the message."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendResult:
    """``msg_id`` is the UNIQ_KEY the producer set (comma-joined for a batch);
    ``offset_msg_id`` the broker's offset msgId (comma-joined for a batch)."""

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None


class PullStatus(Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class PullResult:
    """A pull's answer. ``msgs`` are decoded and tag-filtered (FOUND may come with none left
    after the client-side tag filter); ``raw_body`` is the broker's body as received."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msgs: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0
    raw_body: bytes = b""
