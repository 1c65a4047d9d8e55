"""The CommitLog record format (RocketMQ 4.9, byte for byte), properties and msgId.

One record, big-endian; host fields are 8 bytes for IPv4 and 20 for IPv6, chosen by the
``BORNHOST_V6_FLAG`` (0x10) and ``STOREHOSTADDRESS_V6_FLAG`` (0x20) sysFlag bits. Offsets
below are for IPv4 hosts.

=======  ====  ==========================  ==============================================
offset   size  field                       meaning
=======  ====  ==========================  ==============================================
0        4     TOTALSIZE                   length of the whole record, this field included
4        4     MAGICCODE                   0xdaa320a7 (a blank end-of-file record: 0xcbd43194)
8        4     BODYCRC                     ``crc32(body) & 0x7fffffff``
12       4     QUEUEID                     consume queue id
16       4     FLAG                        application flag, not interpreted
20       8     QUEUEOFFSET                 logical offset in the consume queue (entry index)
28       8     PHYSICALOFFSET              offset of this record in the CommitLog
36       4     SYSFLAG                     compression, transaction type, IPv6 host bits
40       8     BORNTIMESTAMP               producer's send time (ms)
48       8|20  BORNHOST                    producer address bytes + port as a 4-byte int
56       8     STORETIMESTAMP              broker store time (ms)
64       8|20  STOREHOSTADDRESS            broker address bytes + port as a 4-byte int
72       4     RECONSUMETIMES              redelivery count
76       8     PREPARED TRANSACTION OFFSET offset of the prepared half message
84       4     BODYLENGTH                  body length
88       n     BODY                        body bytes
88+n     1     TOPICLENGTH                 topic length (≤ 127)
89+n     t     TOPIC                       UTF-8
89+n+t   2     PROPERTIESLENGTH            properties length (≤ 32767)
91+n+t   p     PROPERTIES                  ``name\\x01value\\x02…``, UTF-8
=======  ====  ==========================  ==============================================

Fixed overhead: 91 bytes with IPv4 hosts, 12 more for each IPv6 host. Since 4.9.1 the
properties string has no trailing ``\\x02``; both forms are decoded.

End-of-file blank record: ``TOTALSIZE`` = bytes left in the file, ``MAGICCODE`` =
0xcbd43194; the rest of the file is not read.

msgId (offset message id): store host address bytes, port as a 4-byte int, and the 8-byte
physical offset, printed as upper-case hex (16 bytes, 32 characters, for IPv4).
"""

from __future__ import annotations

import mmap
import struct
from functools import lru_cache
from typing import Any

from zlib_ng.zlib_ng import crc32 as _crc32  # zlib's CRC32, 2x faster per call

from pumice.common.java_hash import hash_map_order, tags_code
from pumice.common.message import HostAddress, MessageExt
from pumice.common.message_const import MessageConst
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.native import NATIVE

_native = NATIVE  # the tests swap it to hold both paths to the same answers

# Anything with the buffer protocol that the store hands around.
Buffer = bytes | bytearray | memoryview | mmap.mmap

MESSAGE_MAGIC_CODE = 0xDAA320A7
BLANK_MAGIC_CODE = 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 4 + 4

# The table above as offsets, each the previous field's offset plus its width; from BORNHOST
# on they depend on the host widths, so they are functions of SYSFLAG.
TOTALSIZE_OFFSET = 0
MESSAGE_MAGIC_CODE_POSITION = TOTALSIZE_OFFSET + 4
BODY_CRC_OFFSET = MESSAGE_MAGIC_CODE_POSITION + 4
QUEUE_ID_OFFSET = BODY_CRC_OFFSET + 4
FLAG_OFFSET = QUEUE_ID_OFFSET + 4
QUEUE_OFFSET_OFFSET = FLAG_OFFSET + 4
PHYSICAL_OFFSET_OFFSET = QUEUE_OFFSET_OFFSET + 8
SYSFLAG_POSITION = PHYSICAL_OFFSET_OFFSET + 8
BORN_TIMESTAMP_OFFSET = SYSFLAG_POSITION + 4
BORN_HOST_OFFSET = BORN_TIMESTAMP_OFFSET + 8
IPV4_HOST_LENGTH = 4 + 4  # address, port
IPV6_HOST_LENGTH = 16 + 4


def born_host_length(sys_flag: int) -> int:
    return IPV6_HOST_LENGTH if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else IPV4_HOST_LENGTH


def store_host_length(sys_flag: int) -> int:
    return IPV6_HOST_LENGTH if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else IPV4_HOST_LENGTH


def store_timestamp_offset(sys_flag: int) -> int:
    """Where STORETIMESTAMP is: after BORNHOST, whose width the sysFlag gives."""
    return BORN_HOST_OFFSET + born_host_length(sys_flag)


MESSAGE_STORE_TIMESTAMP_POSITION = store_timestamp_offset(0)  # with an IPv4 born host
# store_timestamp_offset by the sysFlag's BORNHOST_V6 bit ((sys_flag >> 4) & 1), for per-record loops
STORE_TIMESTAMP_OFFSETS = (store_timestamp_offset(0), store_timestamp_offset(MessageSysFlag.BORNHOST_V6_FLAG))
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

_SIZE_MAGIC = struct.Struct(">iI")
_BLANK = struct.Struct(">iI")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">H")
_LONG = struct.Struct(">q")


def _head(born_v6: bool, store_v6: bool) -> struct.Struct:
    b = "16si" if born_v6 else "4si"
    s = "16si" if store_v6 else "4si"
    # TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYOFFSET SYSFLAG BORNTS BORNHOST
    # STORETS STOREHOST RECONSUME PREPARED BODYLENGTH
    return struct.Struct(">iIIiiqqiq" + b + "q" + s + "iqi")


# the header struct, indexed by (sys_flag >> 4) & 3
HEAD_STRUCTS = (_head(False, False), _head(True, False), _head(False, True), _head(True, True))


def head_struct(sys_flag: int) -> struct.Struct:
    return HEAD_STRUCTS[(sys_flag >> 4) & 3]


def crc32(body: Buffer) -> int:
    """``UtilAll.crc32``: CRC32 with the top bit cleared."""
    return _crc32(body) & 0x7FFFFFFF


def cal_msg_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int) -> int:
    return head_struct(sys_flag).size + body_length + 1 + topic_length + 2 + properties_length


# TOPICLENGTH and PROPERTIESLENGTH follow the body: 1 + 2 bytes
MIN_RECORD_SIZE = cal_msg_length(0, 0, 0, 0)  # IPv4 hosts, empty body, topic and properties
assert MIN_RECORD_SIZE == 91 and HEAD_STRUCTS[0].size == 88 and HEAD_STRUCTS[3].size == 112  # the table above


# -- properties ---------------------------------------------------------------------------


def message_properties_to_string(properties: dict[str, str]) -> str:
    """4.9.1+ form: pairs joined by \\x02, no trailing separator."""
    return PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, properties.items()))


def java_properties_string(properties: dict[str, str]) -> str:
    """``message_properties_to_string`` in the order RocketMQ 4.9 writes a stored message's
    properties: its HashMap's (``properties``' order is the map's insertion order)."""
    keys = tuple(properties)
    order = HASH_MAP_ORDERS.get(keys)
    if order is None:  # producers send the same names message after message: sorted once
        order = hash_map_order(list(keys))
        if len(HASH_MAP_ORDERS) < 4096:
            HASH_MAP_ORDERS[keys] = order
    return PROPERTY_SEPARATOR.join([k + NAME_VALUE_SEPARATOR + properties[k] for k in order])


# names in insertion order → HashMap order (java_properties_string's cache; native callers read it too)
HASH_MAP_ORDERS: dict[tuple[str, ...], list[str]] = {}


def string_to_message_properties(s: str) -> dict[str, str]:
    """Decode either form. As Java's ``string2messageProperties``, a pair needs a non-empty name
    and value; empty segments (a trailing \\x02) are ignored. Native where built
    (``pumice._native``); the twin ``string_to_message_properties_pure`` is the reference."""
    if _native is not None and s:
        d = _native.string_to_message_properties(s)
        if d is not None:
            return d
    return string_to_message_properties_pure(s)


def string_to_message_properties_pure(s: str) -> dict[str, str]:
    """``string_to_message_properties``' pure-Python twin."""
    out: dict[str, str] = {}
    if not s:
        return out
    for pair in s.split(PROPERTY_SEPARATOR):
        name, _, value = pair.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            out[name] = value
    return out


# -- msgId --------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _host_prefix(addr: bytes, port: int) -> str:
    return (addr + struct.pack(">i", port)).hex().upper()


def create_message_id(store_host: HostAddress, commit_log_offset: int) -> str:
    prefix = _host_prefix(store_host[0], store_host[1])
    if commit_log_offset < 0:  # two's complement, as Java's putLong
        commit_log_offset += 1 << 64
    return f"{prefix}{commit_log_offset:016X}"


def join_message_ids(store_host: HostAddress, offsets: list[int]) -> str:
    """The offset msgIds of ``offsets`` (a batch's records), comma-joined, as RocketMQ answers a
    batch. Native where ``pumice._native`` is loaded, else ``join_message_ids_pure``."""
    prefix = _host_prefix(store_host[0], store_host[1])
    if _native is not None:
        joined: str | None = _native.join_message_ids(prefix, offsets)
        if joined is not None:
            return joined
    return join_message_ids_pure(prefix, offsets)


def join_message_ids_pure(prefix: str, offsets: list[int]) -> str:
    """``join_message_ids``' twin (the reference), ``prefix`` the store host's hex."""
    mask = (1 << 64) - 1  # two's complement, as Java's putLong
    return ",".join([f"{prefix}{o & mask:016X}" for o in offsets])


def decode_message_id(msg_id: str) -> tuple[HostAddress, int]:
    """Split an offset msgId into (store host, commit log offset). Raises ValueError."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"msgId must be 32 or 56 hex characters, got {len(msg_id)}: {msg_id!r}")
    raw = bytes.fromhex(msg_id)
    alen = len(raw) - 12
    port, offset = struct.unpack_from(">iq", raw, alen)
    return (raw[:alen], port), offset


# -- encode -------------------------------------------------------------------------------


def encode_record_into(
    buf: Buffer,
    pos: int,
    *,
    msg_len: int,
    body_crc: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_timestamp: int,
    store_host: HostAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: Buffer,
    topic: bytes,
    properties: bytes,
) -> None:
    """Write one record of ``msg_len`` bytes at ``buf[pos:]`` (``buf`` writable)."""
    if (len(born_host[0]) == 16) != bool(sys_flag & MessageSysFlag.BORNHOST_V6_FLAG) or (
        len(store_host[0]) == 16
    ) != bool(sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG):
        raise ValueError("host address length does not match the sysFlag IPv6 bits")
    head = HEAD_STRUCTS[(sys_flag >> 4) & 3]
    body_len = len(memoryview(body))
    head.pack_into(
        buf, pos, msg_len, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset,
        physical_offset, sys_flag, born_timestamp, born_host[0], born_host[1], store_timestamp,
        store_host[0], store_host[1], reconsume_times, prepared_transaction_offset, body_len,
    )  # fmt: skip
    mv = memoryview(buf)  # type: ignore[arg-type]
    p = pos + head.size
    mv[p : p + body_len] = body
    p += body_len
    tlen = len(topic)
    mv[p] = tlen
    mv[p + 1 : p + 1 + tlen] = topic
    p += 1 + tlen
    plen = len(properties)
    _SHORT.pack_into(buf, p, plen)
    mv[p + 2 : p + 2 + plen] = properties


def encode_record(
    *,
    body: bytes,
    topic: str,
    properties: dict[str, str] | str,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: HostAddress = (b"\x7f\x00\x00\x01", 0),
    store_timestamp: int = 0,
    store_host: HostAddress = (b"\x7f\x00\x00\x01", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """A whole record as bytes (for tools and tests; the CommitLog writes in place)."""
    props = properties if isinstance(properties, str) else message_properties_to_string(properties)
    tb, pb = topic.encode(), props.encode()
    n = cal_msg_length(sys_flag, len(body), len(tb), len(pb))
    out = bytearray(n)
    encode_record_into(
        out, 0, msg_len=n, body_crc=crc32(body), queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, physical_offset=physical_offset, sys_flag=sys_flag,
        born_timestamp=born_timestamp, born_host=born_host, store_timestamp=store_timestamp,
        store_host=store_host, reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset, body=body, topic=tb, properties=pb,
    )  # fmt: skip
    return bytes(out)


def encode_record_bytes(
    topic_blob: bytes,
    body: Buffer,
    properties: bytes,
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_host: HostAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> bytes:
    """One record as the CommitLog appends it: QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP
    at 0 (patched under the put lock); ``topic_blob`` is TOPICLENGTH + TOPIC. Native where
    ``pumice._native`` is loaded, else (and off its fast path) ``encode_record_bytes_pure``."""
    if _native is not None:
        rec: bytes | None = _native.encode_record_bytes(
            topic_blob, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
            reconsume_times, prepared_transaction_offset,
        )  # fmt: skip
        if rec is not None:
            return rec
    return encode_record_bytes_pure(
        topic_blob, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
        reconsume_times, prepared_transaction_offset,
    )  # fmt: skip


def encode_record_bytes_pure(
    topic_blob: bytes,
    body: Buffer,
    properties: bytes,
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_host: HostAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> bytes:
    """``encode_record_bytes``' twin (the reference): raises struct.error where a field does not fit."""
    parts = encode_record_parts(
        topic_blob, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
        reconsume_times, prepared_transaction_offset,
    )  # fmt: skip
    return b"".join(parts)


def encode_record_parts(
    topic_blob: bytes,
    body: Buffer,
    properties: bytes,
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_host: HostAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> tuple[bytes, Buffer, bytes, bytes, bytes]:
    """``encode_record_bytes_pure`` before its join (the pure path appends the parts to a batch's
    and joins once: no copy of the record)."""
    head = HEAD_STRUCTS[(sys_flag >> 4) & 3]
    bl = len(body)  # type: ignore[arg-type]
    pl = len(properties)
    return (
        head.pack(head.size + bl + len(topic_blob) + 2 + pl, MESSAGE_MAGIC_CODE, crc32(body), queue_id, flag, 0, 0,
                  sys_flag, born_timestamp, born_host[0], born_host[1], 0, store_host[0], store_host[1],
                  reconsume_times, prepared_transaction_offset, bl),
        body, topic_blob, _SHORT.pack(pl), properties,
    )  # fmt: skip


# one message of a SEND_BATCH_MESSAGE body: its records' size, tagsCode, KEYS, UNIQ_KEY, properties
BatchRecord = tuple[int, int, str | None, str | None, str]
_BATCH_HEAD = struct.Struct(">iiiii")  # a batch body message: totalSize, magic, bodyCRC, flag, bodyLength
_SHORT_SIGNED = struct.Struct(">h")
_TAGS, _KEYS, _DELAY = MessageConst.PROPERTY_TAGS, MessageConst.PROPERTY_KEYS, MessageConst.PROPERTY_DELAY_TIME_LEVEL
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def batch_properties_holding(
    raw: bytes | bytearray | memoryview, needles: tuple[bytes, ...]
) -> list[tuple[int, int, int]]:
    """Each message of a batch body (format in ``message.MessageExtBatch``) whose properties hold
    one of ``needles``: (its index, where its properties start, where they end), in order. The walk
    steps by totalSize and stops at the first malformed message (totalSize not above 0, a negative
    bodyLength, no room for propertiesLength; the CommitLog's walk refuses such a body); properties
    past the end are cut there. Only the properties are searched, not the bodies. Native where
    ``pumice._native`` is loaded, else ``batch_properties_holding_pure``."""
    if _native is not None:
        found: list[tuple[int, int, int]] | None = _native.batch_properties_holding(raw, needles)
        if found is not None:
            return found
    return batch_properties_holding_pure(raw, needles)


def batch_properties_holding_pure(
    raw: bytes | bytearray | memoryview, needles: tuple[bytes, ...]
) -> list[tuple[int, int, int]]:
    """``batch_properties_holding``' twin (the reference)."""
    data = raw if isinstance(raw, bytes | bytearray) else bytes(raw)
    out: list[tuple[int, int, int]] = []
    if not any(n in data for n in needles):  # one pass over the whole body beats a walk when none is there
        return out
    pos = index = 0
    while pos + _BATCH_HEAD.size <= len(data):
        total, _, _, _, body_len = _BATCH_HEAD.unpack_from(data, pos)
        at = pos + _BATCH_HEAD.size + body_len
        if total <= 0 or body_len < 0 or at + _SHORT_SIGNED.size > len(data):
            break
        (props_len,) = _SHORT_SIGNED.unpack_from(data, at)
        start = at + _SHORT_SIGNED.size
        end = min(start + max(props_len, 0), len(data))
        if any(n in data[start:end] for n in needles):
            out.append((index, start, end))
        pos += total
        index += 1
    return out


def encode_batch_records(
    raw: bytes,
    topic_blob: bytes,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_host: HostAddress,
    reconsume_times: int,
    suffix: str,
    max_size: int,
) -> tuple[bytearray, list[BatchRecord]]:
    """The messages of a batch body (format in ``message.MessageExtBatch``) as CommitLog records
    in one buffer, as RocketMQ's MessageExtBatchEncoder writes them, each with its own flag and
    properties followed by ``suffix`` (after a \\x02), and what dispatch needs of each. Raises
    ValueError (the remark) for a malformed body, a delay level, or a message or batch over
    ``max_size``. Native where ``pumice._native`` is loaded, else ``encode_batch_records_pure``."""
    if _native is not None:
        walked: tuple[bytearray, list[BatchRecord]] | None = _native.encode_batch_records(
            raw, topic_blob, queue_id, sys_flag, born_timestamp, born_host, store_host, reconsume_times, suffix,
            max_size,
        )  # fmt: skip
        if walked is not None:
            return walked
    return encode_batch_records_pure(
        raw, topic_blob, queue_id, sys_flag, born_timestamp, born_host, store_host, reconsume_times, suffix, max_size
    )


def encode_batch_records_pure(
    raw: bytes,
    topic_blob: bytes,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_host: HostAddress,
    reconsume_times: int,
    suffix: str,
    max_size: int,
) -> tuple[bytearray, list[BatchRecord]]:
    """``encode_batch_records``' twin (the reference)."""
    head = HEAD_STRUCTS[(sys_flag >> 4) & 3]
    view = memoryview(raw)  # the bodies, without a copy
    raw_len = len(view)
    fixed = head.size + len(topic_blob) + 2
    sep_suffix = PROPERTY_SEPARATOR + suffix
    parts: list[bytes | memoryview] = []
    out: list[BatchRecord] = []
    # locals: this loop runs once per message of every batch
    pack, short_pack, unpack_head, unpack_short = (
        head.pack,
        _SHORT.pack,
        _BATCH_HEAD.unpack_from,
        _SHORT_SIGNED.unpack_from,
    )
    bh0, bh1, sh0, sh1 = born_host[0], born_host[1], store_host[0], store_host[1]
    start = pos = 0
    while pos < raw_len:
        if raw_len - pos < 22:
            raise ValueError(f"batch body truncated at byte {pos}")
        total, _, _, flag, bl = unpack_head(view, pos)
        p = pos + 20
        if bl < 0 or p + bl + 2 > raw_len:
            raise ValueError(f"bad batch record at byte {pos}")
        body = view[p : p + bl]
        p += bl
        plen = unpack_short(view, p)[0]
        p += 2
        if plen < 0 or p + plen > raw_len or total != 22 + bl + plen:
            raise ValueError(f"bad batch record properties at byte {pos}")
        tags = keys = uniq = None
        if plen:
            try:
                ps = raw[p : p + plen].decode()  # a bytes slice decodes ~3x faster than str(memoryview)
            except UnicodeDecodeError:
                raise ValueError(f"batch record properties at byte {pos} are not UTF-8") from None
            for pair in ps.split(PROPERTY_SEPARATOR):  # one pass for what dispatch needs
                name, _, value = pair.partition(NAME_VALUE_SEPARATOR)
                if name == _TAGS:
                    tags = value
                elif name == _KEYS:
                    keys = value
                elif name == _UNIQ:
                    uniq = value
                elif name == _DELAY and value:
                    raise ValueError(f"message {len(out)} of the batch has a delay level; batches cannot be delayed")
            if suffix:
                ps = ps.rstrip(PROPERTY_SEPARATOR) + sep_suffix
        else:
            ps = suffix
        pb = ps.encode()
        pl = len(pb)
        if pl > MAX_PROPERTIES_LENGTH:
            raise ValueError(f"properties are {pl} bytes, the limit is 32767")
        n = fixed + bl + pl
        if n > max_size:
            raise ValueError(f"message is {n} bytes, maxMessageSize is {max_size}")
        parts += (
            pack(n, MESSAGE_MAGIC_CODE, crc32(body), queue_id, flag, 0, 0, sys_flag, born_timestamp, bh0, bh1, 0, sh0,
                 sh1, reconsume_times, 0, bl),
            body, topic_blob, short_pack(pl), pb,
        )  # fmt: skip
        out.append((n, tags_code(tags) if tags else 0, keys, uniq, ps))
        start += n
        if start > max_size:  # as upstream's batch encoder, whose buffer is maxMessageSize
            raise ValueError(f"the batch's records are over {max_size} bytes (maxMessageSize)")
        pos += total
    return bytearray().join(parts), out


def encode_blank_into(buf: Buffer, pos: int, remaining: int) -> None:
    """The end-of-file record: only its first 8 bytes are written, as 4.9.4 does."""
    _BLANK.pack_into(buf, pos, remaining, BLANK_MAGIC_CODE)


# -- decode -------------------------------------------------------------------------------


def decode_record_fields(buf: Buffer, pos: int = 0) -> tuple[tuple[Any, ...], bytes, str, str]:
    """The record at ``buf[pos:]`` as (header fields, body, topic, properties string); the
    header fields are TOTALSIZE … BODYLENGTH in the order of the table above (hosts as address
    bytes and port). Raises ValueError on a bad record."""
    mv = memoryview(buf)  # type: ignore[arg-type]
    f, p = _record_head(mv, pos)
    blen = f[16]
    body = bytes(mv[p : p + blen])
    p += blen
    tlen = mv[p]
    topic = str(mv[p + 1 : p + 1 + tlen], "utf-8")
    p += 1 + tlen
    plen = _SHORT.unpack_from(mv, p)[0]
    return f, body, topic, str(mv[p + 2 : p + 2 + plen], "utf-8")


def record_properties(buf: Buffer, pos: int = 0) -> str:
    """The properties string of the record at ``buf[pos:]``, its body not copied (a filter
    that reads only properties)."""
    mv = memoryview(buf)  # type: ignore[arg-type]
    f, p = _record_head(mv, pos)
    p += f[16]
    p += 1 + mv[p]
    plen = _SHORT.unpack_from(mv, p)[0]
    return str(mv[p + 2 : p + 2 + plen], "utf-8")


def record_topic(buf: Buffer, pos: int = 0) -> str:
    """The topic of the record at ``buf[pos:]``, its body not copied (an ACL check)."""
    mv = memoryview(buf)  # type: ignore[arg-type]
    f, p = _record_head(mv, pos)
    p += f[16]
    return str(mv[p + 1 : p + 1 + mv[p]], "utf-8")


def _record_head(mv: memoryview, pos: int) -> tuple[tuple[Any, ...], int]:
    """The record's header fields and where its body starts; ValueError on a bad magic code."""
    magic = _SIZE_MAGIC.unpack_from(mv, pos)[1]
    if magic != MESSAGE_MAGIC_CODE:
        raise ValueError(f"bad magic code 0x{magic:08x} at {pos}")
    sys_flag = _INT.unpack_from(mv, pos + SYSFLAG_POSITION)[0]
    head = HEAD_STRUCTS[(sys_flag >> 4) & 3]
    return head.unpack_from(mv, pos), pos + head.size


def decode_message(buf: Buffer, pos: int = 0) -> MessageExt:
    """Decode the full record at ``buf[pos:]``. Raises ValueError on a bad record."""
    f, body, topic, props = decode_record_fields(buf, pos)
    store_host = (f[12], f[13])
    return MessageExt(
        store_size=f[0], body_crc=f[2], queue_id=f[3], flag=f[4], queue_offset=f[5],
        commit_log_offset=f[6], sys_flag=f[7], born_timestamp=f[8], born_host=(f[9], f[10]),
        store_timestamp=f[11], store_host=store_host, reconsume_times=f[14],
        prepared_transaction_offset=f[15], body=body, topic=topic,
        properties=string_to_message_properties(props), msg_id=create_message_id(store_host, f[6]),
    )  # fmt: skip


def pickup_store_timestamp(buf: Buffer, pos: int = 0) -> int:
    sys_flag = _INT.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    return _LONG.unpack_from(buf, pos + store_timestamp_offset(sys_flag))[0]


def get_property(properties_string: str, name: str) -> str | None:
    """One property from a raw properties string, without decoding the whole map."""
    if properties_string.startswith(name + NAME_VALUE_SEPARATOR):
        i = len(name) + 1
    else:
        i = properties_string.find(PROPERTY_SEPARATOR + name + NAME_VALUE_SEPARATOR)
        if i < 0:
            return None
        i += len(name) + 2
    j = properties_string.find(PROPERTY_SEPARATOR, i)
    return properties_string[i:] if j < 0 else properties_string[i:j]
