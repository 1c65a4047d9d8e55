"""RocketMQ 5's ``Message`` to the broker's message properties and back (5.3.3's
``SendMessageActivity.buildMessageProperty`` and ``GrpcConverter.buildMessage``).

A message sent (``SystemProperties`` → the broker's properties; checks in this order):

| gRPC field               | broker property                 | refused with                           |
|--------------------------|---------------------------------|----------------------------------------|
| body                     | the body (GZIP: sysFlag bit 0)  | MESSAGE_BODY_EMPTY, …_TOO_LARGE        |
| user_properties          | each as it is                   | MESSAGE_PROPERTIES_TOO_LARGE (count),  |
|                          |                                 | ILLEGAL_MESSAGE_PROPERTY_KEY (system   |
|                          |                                 | name, control characters)              |
| tag                      | TAGS                            | ILLEGAL_MESSAGE_TAG (blank, ``|``, …)  |
| keys                     | KEYS (space-separated)          | ILLEGAL_MESSAGE_KEY; then user props,  |
|                          |                                 | tag and keys over maxUserPropertySize: |
|                          |                                 | MESSAGE_PROPERTIES_TOO_LARGE           |
| message_id               | UNIQ_KEY                        | ILLEGAL_MESSAGE_ID (blank)             |
| message_type TRANSACTION | TRAN_MSG=true (sysFlag PREPARED)|                                        |
| orphaned_transaction_…   | CHECK_IMMUNITY_TIME_IN_SECONDS  | BAD_REQUEST (over                      |
| recovery_duration        |                                 | maxTransactionRecoverySecond)          |
| delivery_timestamp       | TIMER_DELIVER_MS (ms)           | ILLEGAL_DELIVERY_TIME (more than       |
|                          |                                 | maxDelayTimeMills ahead)               |
| delivery_attempt         | RECONSUME_TIME                  |                                        |
| (the topic: the group)   | PGROUP                          |                                        |
| message_group            | __SHARDINGKEY                   | ILLEGAL_MESSAGE_GROUP                  |
| trace_context            | TRACE_CONTEXT                   |                                        |
| born_host (else the peer)| __BORNHOST                      |                                        |
| born_timestamp           | BORN_TIMESTAMP (ms)             |                                        |

A stored message to a ``Message``: the reverse, with message_id = UNIQ_KEY (else the broker's
msgId), body digest MD5 of the body as stored (upper-case hex, as 5.3.3's proxy sends it: the Node
client 1.0.8 checks a CRC32 digest as a decimal string, so a hex CRC32 marks every message corrupted
and its PushConsumer discards them), encoding GZIP when sysFlag bit 0 is set.
"""

from __future__ import annotations

import hashlib
import socket
from typing import Any

from pumice.common.message import MessageExt
from pumice.common.message_const import MessageConst
from pumice.proxy.grpc_status import GrpcProxyError
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proxy_config import ProxyConfig

COMPRESSED_FLAG = 0x1
TRANSACTION_PREPARED_TYPE = 0x1 << 2

PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_POP_CK = "POP_CK"

# 5.3.3's MessageConst.STRING_HASH_SET: names a user property may not take
SYSTEM_PROPERTY_NAMES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK",
    "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID",
    "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST",
    "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
})  # fmt: skip


def has_control_character(s: str) -> bool:
    """GrpcValidator.containControlCharacter: any character below 0x20 but tab, LF and CR."""
    return any(ord(c) < 0x20 and c not in "\t\n\r" for c in s)


def validate_tag(tag: str) -> None:
    if tag:
        if not tag.strip():
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if has_control_character(tag):
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def sys_flag_of(message: Any) -> int:
    sp = message.system_properties
    flag = COMPRESSED_FLAG if sp.body_encoding == pb.GZIP else 0
    if sp.message_type == pb.TRANSACTION:
        flag |= TRANSACTION_PREPARED_TYPE
    return flag


def validate_body(body: bytes, config: ProxyConfig) -> None:
    if config.enable_message_body_empty_check and not body:
        raise GrpcProxyError(pb.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    limit = config.max_message_size
    if limit > 0 and len(body) > limit:
        raise GrpcProxyError(pb.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}")


def build_properties(message: Any, producer_group: str, peer: str, config: ProxyConfig, now_ms: int) -> dict[str, str]:
    """The broker's properties of a message sent over gRPC (the table above)."""
    sp = message.system_properties
    user = dict(message.user_properties)
    if len(user) > config.user_property_max_num:
        raise GrpcProxyError(pb.MESSAGE_PROPERTIES_TOO_LARGE,
                             f"too many user properties, max is {config.user_property_max_num}")  # fmt: skip
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_NAMES:
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if has_control_character(key):
            raise GrpcProxyError(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character"
            )
        if has_control_character(value):
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                 "the value of property cannot contain control character")  # fmt: skip
        size += len(key.encode()) + len(value.encode())
    props = dict(user)
    tag = sp.tag
    validate_tag(tag)
    if tag:
        props[MessageConst.PROPERTY_TAGS] = tag
    size += len(tag.encode())
    for key in sp.keys:
        if key and not key.strip():
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if has_control_character(key):
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")
        size += len(key.encode())
    if sp.keys:
        props[MessageConst.PROPERTY_KEYS] = MessageConst.KEY_SEPARATOR.join(sp.keys)
    if config.max_user_property_size > 0 and size > config.max_user_property_size:
        raise GrpcProxyError(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {config.max_user_property_size}",
        )
    if not sp.message_id.strip():
        raise GrpcProxyError(pb.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    if sp.message_type == pb.TRANSACTION:
        props[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            limit = config.max_transaction_recovery_second
            if limit > 0 and seconds > limit:
                raise GrpcProxyError(
                    pb.BAD_REQUEST, f"the max transaction recovery time of message is too large, max is {limit}"
                )
            props[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        deliver_ms = sp.delivery_timestamp.ToMilliseconds()
        limit = config.max_delay_time_mills
        if limit > 0 and deliver_ms - now_ms > limit:
            raise GrpcProxyError(pb.ILLEGAL_DELIVERY_TIME,
                                 f"the max delay time of message is too large, max is {limit}")  # fmt: skip
        props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    props[MessageConst.PROPERTY_RECONSUME_TIME] = str(sp.delivery_attempt)
    props[MessageConst.PROPERTY_PRODUCER_GROUP] = producer_group
    if sp.message_group:
        group = sp.message_group
        if not group.strip():
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        limit = config.max_message_group_size
        if limit > 0 and len(group.encode()) >= limit:
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {limit}")
        if has_control_character(group):
            raise GrpcProxyError(pb.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")
        props[PROPERTY_SHARDING_KEY] = group
    if sp.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host.strip() or peer
    if born_host:
        props[PROPERTY_BORN_HOST] = born_host
    if sp.HasField("born_timestamp"):
        props[PROPERTY_BORN_TIMESTAMP] = str(sp.born_timestamp.ToMilliseconds())
    return props


def _host(addr: tuple[bytes, int]) -> str:
    raw, port = addr
    family = socket.AF_INET6 if len(raw) == 16 else socket.AF_INET
    return f"{socket.inet_ntop(family, raw)}:{port}"


def to_proto_message(m: MessageExt, topic: str | None = None, receipt_handle: str | None = None,
                     invisible_ms: int | None = None) -> Any:  # fmt: skip
    """A stored message as the v5 clients read it (GrpcConverter.buildMessage)."""
    props = m.properties
    sp = pb.SystemProperties(
        message_id=props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or m.msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(m.body).hexdigest().upper()),
        body_encoding=pb.GZIP if m.sys_flag & COMPRESSED_FLAG else pb.IDENTITY,
        born_host=props.get(PROPERTY_BORN_HOST) or _host(m.born_host),
        store_host=_host(m.store_host), queue_id=m.queue_id, queue_offset=m.queue_offset,
        delivery_attempt=m.reconsume_times + 1,
    )  # fmt: skip
    tag = props.get(MessageConst.PROPERTY_TAGS)
    if tag:
        sp.tag = tag
    keys = props.get(MessageConst.PROPERTY_KEYS)
    if keys:
        sp.keys.extend(k for k in keys.split(MessageConst.KEY_SEPARATOR) if k)
    group = props.get(PROPERTY_SHARDING_KEY)
    if group:
        sp.message_group = group
    if props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED) == "true":
        sp.message_type = pb.TRANSACTION
    elif group:
        sp.message_type = pb.FIFO
    elif PROPERTY_TIMER_DELIVER_MS in props or MessageConst.PROPERTY_DELAY_TIME_LEVEL in props:
        sp.message_type = pb.DELAY
    else:
        sp.message_type = pb.NORMAL
    sp.born_timestamp.FromMilliseconds(int(props.get(PROPERTY_BORN_TIMESTAMP) or m.born_timestamp))
    sp.store_timestamp.FromMilliseconds(m.store_timestamp)
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS)
    if deliver and deliver.isdigit():
        sp.delivery_timestamp.FromMilliseconds(int(deliver))
    if props.get(PROPERTY_TRACE_CONTEXT):
        sp.trace_context = props[PROPERTY_TRACE_CONTEXT]
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if invisible_ms is not None:
        sp.invisible_duration.FromMilliseconds(invisible_ms)
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES and k != PROPERTY_SHARDING_KEY
            and k != PROPERTY_TRACE_CONTEXT and not k.startswith("__")}  # fmt: skip
    return pb.Message(
        topic=pb.Resource(name=topic or props.get(MessageConst.PROPERTY_REAL_TOPIC) or m.topic),
        user_properties=user,
        system_properties=sp,
        body=m.body,
    )
