"""RecallMessage (5.3.3's gRPC ``RecallMessageActivity`` and ``ProducerProcessor.recallMessage``
in LOCAL mode): a producer takes back a delay message before it is due, with the
``recall_handle`` its SendMessage answer carried (the broker's ``recallHandle``).

The call goes to the broker's RECALL_MESSAGE (370) processor in this process
(broker/recall_message_processor.py), which decides; the proxy checks first, in 5.3.3's order:

=================================================  ====================================  =========================
case                                               Code                                  message
=================================================  ====================================  =========================
an illegal topic name                              ILLEGAL_TOPIC                         as SendMessage's
``enableTopicMessageTypeCheck`` and the topic's    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE   TopicMessageType validate
type neither DELAY nor MIXED (none: UNSPECIFIED)                                         failed, the expected type
                                                                                         is <the topic's>, but
                                                                                         actual type is DELAY
a handle that does not decode                      INTERNAL_SERVER_ERROR                 recall handle is invalid
the broker refuses (``recallMessageEnable`` off,   INTERNAL_SERVER_ERROR (5.3.3's        the broker's remark
a time past, another topic's handle, ...)          LocalMessageService: any code)
the marker stored                                  OK                                    (``message_id``: the
                                                                                         recalled message's)
=================================================  ====================================  =========================

Each message but ILLEGAL_TOPIC's starts with ``org.apache.rocketmq.proxy.common.ProxyException: ``,
as 5.3.3 answers it (its status carries the exception's text, class name first). With
``aclEnable=true`` the call needs PUB on the topic, as the remoting request.
"""

from __future__ import annotations

from typing import Any

from pumice.acl.permission import PUB
from pumice.broker.recall_message_processor import decode_handle
from pumice.proxy.activity import Activity
from pumice.proxy.grpc_status import GrpcProxyError, ok
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proxy_context import ProxyContext
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

RECALLABLE_TYPES = ("DELAY", "MIXED")
REFUSAL_PREFIX = "org.apache.rocketmq.proxy.common.ProxyException: "  # 5.3.3's status message, verbatim


def _refused(code: int, message: str) -> GrpcProxyError:
    return GrpcProxyError(code, REFUSAL_PREFIX + message)


class RecallActivity:
    def __init__(self, base: Activity) -> None:
        self.base = base

    async def recall_message(self, ctx: ProxyContext, request: Any) -> Any:
        b = self.base
        topic = request.topic.name
        b.authorize(ctx, RequestCode.RECALL_MESSAGE, {topic: PUB})
        b.validate_topic(request.topic)
        if b.config.enable_topic_message_type_check:
            kind = b.message_type(topic) if b.topic_config(topic) is not None else "UNSPECIFIED"
            if kind not in RECALLABLE_TYPES:
                raise _refused(
                    pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                    f"TopicMessageType validate failed, the expected type is {kind}, but actual type is DELAY",
                )
        handle = request.recall_handle
        try:
            decode_handle(handle)
        except ValueError as e:
            raise _refused(pb.INTERNAL_SERVER_ERROR, str(e)) from None
        fields = {"topic": topic, "recallHandle": handle}
        response = await b.call(b.channel_of(ctx), RequestCode.RECALL_MESSAGE, fields)
        if response.code != ResponseCode.SUCCESS:
            raise _refused(pb.INTERNAL_SERVER_ERROR, response.remark or str(response.code))
        return mpb.RecallMessageResponse(status=ok(), message_id=str(response.ext_fields.get("msgId", "")))
