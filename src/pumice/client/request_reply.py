"""Request-reply (RocketMQ 4.7+): a requester's ``producer.request(msg, timeout)`` sends ``msg``
with these properties, and a consumer answers with ``create_reply_message(request, body)``,
sent by any producer (code SEND_REPLY_MESSAGE_V2, chosen by MSG_TYPE); the broker pushes the
reply to the requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT, 326):

=================  ===========================================================================
property           value
=================  ===========================================================================
CORRELATION_ID     a UUID per request; the reply carries it back
REPLY_TO_CLIENT    the requester's client id (the broker finds its connection by it)
TTL                the request's timeout, ms
MSG_TYPE           ``reply`` on a reply
ARRIVE_TIME        added by the requester when the reply arrives (ms)
=================  ===========================================================================

A reply goes to the topic ``<cluster>_REPLY_TOPIC`` of the request's CLUSTER property.
PUSH_REPLY_MESSAGE_TO_CLIENT's extFields are the reply's SendMessageRequestHeader plus
``bornHost``, ``storeHost`` and ``storeTimestamp``; its body is the reply's body.
"""

from __future__ import annotations

import time

from pumice.client.exceptions import MQClientError
from pumice.client.message import Message, MessageExt
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import string_to_message_properties
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.common.mix_all import REPLY_TOPIC_POSTFIX
from pumice.compression import decompress
from pumice.remoting.remoting_command import RemotingCommand

REPLY_MESSAGE_FLAG = "reply"


def reply_topic(cluster: str) -> str:
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def create_reply_message(request: MessageExt, body: bytes) -> Message:
    """The reply to ``request`` (MessageUtil.createReplyMessage); MQClientError when the request
    has no CLUSTER property (it did not come through a broker)."""
    props = request.properties
    cluster = props.get(MessageConst.PROPERTY_CLUSTER)
    if cluster is None:
        raise MQClientError(
            f"create reply message fail, requestMessage error, property[{MessageConst.PROPERTY_CLUSTER}] is null."
        )
    reply = Message(reply_topic(cluster), body)
    reply.properties[MessageConst.PROPERTY_MESSAGE_TYPE] = REPLY_MESSAGE_FLAG
    for name in (MessageConst.PROPERTY_CORRELATION_ID, MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT,
                 MessageConst.PROPERTY_MESSAGE_TTL):  # fmt: skip
        value = props.get(name)
        if value is not None:
            reply.properties[name] = value
    return reply


def reply_from_push(cmd: RemotingCommand) -> MessageExt:
    """The reply a PUSH_REPLY_MESSAGE_TO_CLIENT carries (ClientRemotingProcessor.receiveReplyMessage)."""
    f = cmd.ext_fields.get
    sys_flag = cmd.ext_int("sysFlag", 0) or 0
    body = bytes(cmd.body or b"")
    if sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        body = decompress(body, sys_flag)
    props = string_to_message_properties(str(f("properties") or ""))
    props[MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(int(time.time() * 1000))
    uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
    return MessageExt(
        topic=str(f("topic") or ""), body=body, properties=props, msg_id=uniq, queue_id=cmd.ext_int("queueId", 0) or 0,
        sys_flag=sys_flag, flag=cmd.ext_int("flag", 0) or 0, born_timestamp=cmd.ext_long("bornTimestamp", 0) or 0,
        store_timestamp=cmd.ext_long("storeTimestamp", 0) or 0, reconsume_times=cmd.ext_int("reconsumeTimes", 0) or 0,
        born_host=str(f("bornHost") or ""), store_host=str(f("storeHost") or ""),
    )  # fmt: skip
