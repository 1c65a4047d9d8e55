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

``MessageExt`` is a message as stored, decoded from a pull, query or view body in the
record format (``pumice.common.message_decoder``); a compressed body (sysFlag bit 0)
is inflated, ``sys_flag`` keeps the bit. Its header fields come from the record's header in
one unpack; properties, host strings and msgIds are decoded on first use. Its ``msg_id`` is
the UNIQ_KEY when present (as the Java client shows it), else the offset msgId;
``offset_msg_id`` is always the offset msgId.
"""

from __future__ import annotations

import functools
import socket
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import (
    MESSAGE_MAGIC_CODE,
    create_message_id,
    head_struct,
    string_to_message_properties,
)
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.compression import decompress as inflate
from pumice.native import NATIVE

_native = NATIVE  # the tests swap it to hold both paths to the same answers

PROPERTY_TAGS = MessageConst.PROPERTY_TAGS
PROPERTY_KEYS = MessageConst.PROPERTY_KEYS
PROPERTY_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
PROPERTY_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
PROPERTY_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
PROPERTY_MIN_OFFSET = MessageConst.PROPERTY_MIN_OFFSET
PROPERTY_MAX_OFFSET = MessageConst.PROPERTY_MAX_OFFSET
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
COMPRESSED_FLAG = MessageSysFlag.COMPRESSED_FLAG
_V6_FLAGS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
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
        # the common case (no keys, a bytes body) in two checks: this runs once a message
        self.keys = [] if self.keys is None else _keys_list(self.keys)
        if type(self.body) is not bytes:
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


# Indexes into a record's unpacked header (``message_decoder.head_struct``), which a decoded
# MessageExt keeps whole: one tuple per message instead of a dozen attribute writes.
_STORE_SIZE, _BODY_CRC, _QUEUE_ID, _FLAG, _QUEUE_OFFSET, _CL_OFFSET, _SYS_FLAG, _BORN_TS = 0, 2, 3, 4, 5, 6, 7, 8
_BORN_ADDR, _BORN_PORT, _STORE_TS, _STORE_ADDR, _STORE_PORT, _RECONSUME, _PREPARED = 9, 10, 11, 12, 13, 14, 15


class MessageExt:
    """A stored message, decoded. ``properties`` holds every property as stored.

    A pulled message keeps its record's unpacked header; the properties, the host strings and
    the msgIds are decoded on first use, so a consumer that reads only the body does not pay
    for them. ``topic``, ``body``, ``reconsume_times`` and ``broker_name`` may be set; the
    other header fields are read-only.
    """

    __slots__ = ("_extra", "_h", "_props", "_props_str", "_strs", "body", "broker_name", "reconsume_times", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes,
        properties: dict[str, str],
        queue_id: int = 0,
        queue_offset: int = 0,
        commit_log_offset: int = 0,
        sys_flag: int = 0,
        flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "",
        store_timestamp: int = 0,
        store_host: str = "",
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        body_crc: int = 0,
        store_size: int = 0,
        msg_id: str = "",
        offset_msg_id: str = "",
        broker_name: str | None = None,
    ) -> None:
        self._h: tuple[Any, ...] = (
            store_size, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
            born_timestamp, None, None, store_timestamp, None, None, reconsume_times, prepared_transaction_offset,
        )  # fmt: skip
        self.topic = topic
        self.body = body
        self.reconsume_times = reconsume_times
        self.broker_name = broker_name
        self._props_str = ""
        self._props: dict[str, str] | None = properties
        self._extra: dict[str, str] | None = None
        # MessageClientExt.getMsgId: the UNIQ_KEY, else the offset msgId
        msg_id = msg_id or (properties or {}).get(PROPERTY_UNIQ_KEY) or offset_msg_id
        self._strs: tuple[str, str, str, str] | None = (born_host, store_host, msg_id, offset_msg_id)

    @classmethod
    def _decoded(
        cls, h: tuple[Any, ...], topic: str, body: bytes, props_str: str, broker_name: str | None,
        extra: dict[str, str] | None,
    ) -> MessageExt:  # fmt: skip
        m = cls.__new__(cls)
        m._h = h
        m.topic = topic
        m.body = body
        m.reconsume_times = h[_RECONSUME]
        m.broker_name = broker_name
        m._props_str = props_str
        m._props = None
        m._extra = extra  # merged into the properties when they are decoded
        m._strs = None
        return m

    # header fields
    queue_id = property(lambda self: self._h[_QUEUE_ID])
    queue_offset = property(lambda self: self._h[_QUEUE_OFFSET])
    commit_log_offset = property(lambda self: self._h[_CL_OFFSET])
    sys_flag = property(lambda self: self._h[_SYS_FLAG])
    flag = property(lambda self: self._h[_FLAG])
    born_timestamp = property(lambda self: self._h[_BORN_TS])
    store_timestamp = property(lambda self: self._h[_STORE_TS])
    prepared_transaction_offset = property(lambda self: self._h[_PREPARED])
    body_crc = property(lambda self: self._h[_BODY_CRC])
    store_size = property(lambda self: self._h[_STORE_SIZE])

    # decoded on first use
    @property
    def properties(self) -> dict[str, str]:
        p = self._props
        if p is None:
            p = self._props = string_to_message_properties(self._props_str)
            if self._extra is not None:
                p.update(self._extra)
        return p

    def _strings(self) -> tuple[str, str, str, str]:
        s = self._strs
        if s is None:
            h = self._h
            offset_id = create_message_id((h[_STORE_ADDR], h[_STORE_PORT]), h[_CL_OFFSET])
            s = self._strs = (
                _host_str((h[_BORN_ADDR], h[_BORN_PORT])),
                _host_str((h[_STORE_ADDR], h[_STORE_PORT])),
                self.properties.get(PROPERTY_UNIQ_KEY) or offset_id,
                offset_id,
            )
        return s

    born_host = property(lambda self: self._strings()[0])
    store_host = property(lambda self: self._strings()[1])
    msg_id = property(lambda self: self._strings()[2])
    offset_msg_id = property(lambda self: self._strings()[3])

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
        system = RESERVED_PROPERTIES | {
            MessageConst.PROPERTY_CLUSTER,
            PROPERTY_MIN_OFFSET,
            PROPERTY_MAX_OFFSET,
            MessageConst.PROPERTY_MSG_REGION,
            MessageConst.PROPERTY_TRACE_SWITCH,
        }
        return {k: v for k, v in self.properties.items() if k not in system}

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, body={len(self.body)} bytes)"
        )


_HEAD_V4 = head_struct(0)


def decode_messages(
    body: bytes | bytearray | memoryview,
    decompress: bool = True,
    *,
    broker_name: str | None = None,
    extra_properties: dict[str, str] | None = None,
) -> list[MessageExt]:
    """Every record of a pull, query or view body, in order (ValueError on a bad record or
    body). ``broker_name`` and ``extra_properties`` are given to every message.

    The walk is native (``pumice._native.decode_messages``, one call a body) where it takes the
    body; otherwise, or with ``PUMICE_PURE=1``, the twin ``decode_messages_pure`` runs."""
    if _native is not None:
        done = _native.decode_messages(body, MessageExt, broker_name, extra_properties)
        if done is not None:
            msgs, compressed = done
            if compressed and decompress:
                for m in msgs:
                    _inflate(m)
            return msgs
    return decode_messages_pure(body, decompress, broker_name=broker_name, extra_properties=extra_properties)


def _inflate(m: MessageExt) -> None:
    """A compressed body (sysFlag bit 0) inflated in place."""
    sys_flag = m._h[_SYS_FLAG]
    if sys_flag & COMPRESSED_FLAG:
        try:
            m.body = inflate(m.body, sys_flag)
        except ValueError as e:
            raise ValueError(f"cannot inflate the body of {m.offset_msg_id}: {e}") from None


def decode_messages_pure(
    body: bytes | bytearray | memoryview,
    decompress: bool = True,
    *,
    broker_name: str | None = None,
    extra_properties: dict[str, str] | None = None,
) -> list[MessageExt]:
    """``decode_messages``' pure-Python twin, the reference."""
    mv = memoryview(body)
    end = len(mv)
    out: list[MessageExt] = []
    append, decoded, unpack_v4 = out.append, MessageExt._decoded, _HEAD_V4.unpack_from
    pos = 0
    while end - pos >= 4:
        if end - pos < _HEAD_V4.size:
            raise ValueError(f"truncated record at byte {pos} of {end}")
        h = unpack_v4(mv, pos)
        size, magic, sys_flag = h[0], h[1], h[_SYS_FLAG]
        if magic != MESSAGE_MAGIC_CODE:
            raise ValueError(f"bad magic code 0x{magic & 0xFFFFFFFF:08x} at byte {pos}")
        head = _HEAD_V4
        if sys_flag & _V6_FLAGS:
            head = head_struct(sys_flag)
            if end - pos < head.size:
                raise ValueError(f"truncated record at byte {pos} of {end}")
            h = head.unpack_from(mv, pos)
        record_end = pos + size
        if size <= 0 or record_end > end:
            raise ValueError(f"truncated record at byte {pos} of {end}")
        if h[16] < 0:  # else the slices below would count from the end and decode garbage
            raise ValueError(f"record at byte {pos} has a negative body length {h[16]}")
        p = pos + head.size
        b = bytes(mv[p : p + h[16]])
        p += h[16]
        if p + 1 > record_end:
            raise ValueError(f"record at byte {pos} is shorter than its body")
        tlen = mv[p]
        topic = str(mv[p + 1 : p + 1 + tlen], "utf-8")
        p += 1 + tlen
        plen = (mv[p] << 8) | mv[p + 1] if p + 2 <= record_end else -1
        if plen < 0 or p + 2 + plen > record_end:
            raise ValueError(f"record at byte {pos} is shorter than its fields")
        m = decoded(h, topic, b, str(mv[p + 2 : p + 2 + plen], "utf-8"), broker_name, extra_properties)
        if sys_flag & COMPRESSED_FLAG and decompress:
            _inflate(m)
        append(m)
        pos = record_end
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
