"""The SEND_BATCH_MESSAGE body: several messages of one topic in one request.

Each message is one record, records back to back, big-endian:

======  ====  ==============  ==========================================================
offset  size  field           value
======  ====  ==============  ==========================================================
0       4     totalSize       this record's length, this field included
4       4     magic           0 (not checked by brokers)
8       4     bodyCRC         0 (the broker computes it)
12      4     flag            the message's application flag
16      4     bodyLength      n
20      n     body            the body, never compressed in a batch
20+n    2     propertiesLen   p (signed short: at most 32767)
22+n    p     properties      ``name\\x01value\\x02…`` (UTF-8), UNIQ_KEY included
======  ====  ==============  ==========================================================

``totalSize = 22 + n + p``. Rules (as the Java client): every message has the batch's topic,
none has a delay level, and the encoded body must not exceed ``max_message_size``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from pumice.client.exceptions import MQClientError
from pumice.client.message import Message
from pumice.common.message_decoder import message_properties_to_string
from pumice.native import NATIVE

_native = NATIVE  # the tests swap it to hold both paths to the same answers

_HEAD = struct.Struct(">iiiii")
_PROPS_LEN = struct.Struct(">h")
MAX_PROPERTIES_LENGTH = 32767


def encode_batch_record(body: bytes, flag: int, properties: dict[str, str]) -> bytes:
    props = message_properties_to_string(properties).encode()
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise MQClientError(f"the properties of a batch message are {len(props)} bytes, more than 32767")
    total = _HEAD.size + len(body) + _PROPS_LEN.size + len(props)
    return b"".join((_HEAD.pack(total, 0, 0, flag, len(body)), body, _PROPS_LEN.pack(len(props)), props))


def check_batch(msgs: Sequence[Message]) -> str:
    """The batch's topic; MQClientError if the batch breaks a rule."""
    if not msgs:
        raise MQClientError("a batch needs at least one message")
    topic = msgs[0].topic
    for m in msgs:
        if m.topic != topic:
            raise MQClientError(f"every message of a batch needs the same topic: {topic!r} and {m.topic!r}")
        if m.delay_time_level > 0:
            raise MQClientError("a batch message cannot have a delay level")
    return topic


def encode_batch(msgs: Sequence[Message], properties: Sequence[dict[str, str]] | None = None) -> bytes:
    """The batch body; ``properties[i]`` replaces ``msgs[i].wire_properties()`` when given
    (the producer passes the map with the UNIQ_KEY it set). The records are written natively
    (``pumice._native.encode_batch_body``, one call a batch) where built; the twin
    ``encode_batch_pure`` is the reference and runs for what the native call does not take."""
    if _native is not None:
        check_batch(msgs)
        props = list(properties) if properties is not None else [m.wire_properties() for m in msgs]
        body = _native.encode_batch_body([m.body for m in msgs], [m.flag for m in msgs], props)
        if body is not None:
            return body
    return encode_batch_pure(msgs, properties)


def encode_batch_pure(msgs: Sequence[Message], properties: Sequence[dict[str, str]] | None = None) -> bytes:
    """``encode_batch``' pure-Python twin."""
    check_batch(msgs)
    parts = []
    for i, m in enumerate(msgs):
        props = properties[i] if properties is not None else m.wire_properties()
        parts.append(encode_batch_record(m.body, m.flag, props))  # type: ignore[arg-type]
    return b"".join(parts)
