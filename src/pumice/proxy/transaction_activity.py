"""EndTransaction and orphaned-transaction recovery (5.3.3's ``EndTransactionActivity``,
``TransactionDataManager`` and the check-back through ``GrpcClientChannel``).

A half message sent over gRPC is remembered under (producer group, transaction id) with what
END_TRANSACTION needs; the transaction id the client gets is the half's broker msgId.

| kept per transaction     | from                                     |
|--------------------------|------------------------------------------|
| tranStateTableOffset     | the half's queue offset (send answer)    |
| commitLogOffset          | decoded from the half's broker msgId     |
| msgId                    | the client's message id (UNIQ_KEY)       |

The broker's check-back (CHECK_TRANSACTION_STATE, sent to a channel of the producer group)
reaches a gRPC producer as RecoverOrphanedTransactionCommand on its Telemetry stream; the
client answers with EndTransaction (source SOURCE_SERVER_CHECK). EndTransaction sends
END_TRANSACTION (COMMIT 8, ROLLBACK 12) to the broker's processor in this process; an
unknown transaction id: INVALID_TRANSACTION_ID.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pumice.acl.permission import PUB
from pumice.common.message_decoder import decode_message, decode_message_id
from pumice.proxy.activity import Activity
from pumice.proxy.client_manager import GrpcClient
from pumice.proxy.grpc_status import GrpcProxyError, from_remoting, ok
from pumice.proxy.message_converter import to_proto_message
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proxy_context import ProxyContext
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)

COMMIT_TYPE = 8
ROLLBACK_TYPE = 12
MAX_KEPT = 100_000  # transactions remembered at most (the oldest forgotten first)


@dataclass(frozen=True)
class TransactionData:
    group: str
    msg_id: str
    tran_state_table_offset: int
    commit_log_offset: int


class TransactionActivity:
    def __init__(self, base: Activity) -> None:
        self.base = base
        self.data: OrderedDict[tuple[str, str], TransactionData] = OrderedDict()

    def record(self, group: str, msg_id: str, offset_msg_id: str, queue_offset: int) -> str:
        try:
            _, commit_log_offset = decode_message_id(offset_msg_id)
        except (ValueError, IndexError):
            return ""
        self.data[(group, offset_msg_id)] = TransactionData(group, msg_id, queue_offset, commit_log_offset)
        while len(self.data) > MAX_KEPT:
            self.data.popitem(last=False)
        return offset_msg_id

    async def end_transaction(self, ctx: ProxyContext, request: Any) -> Any:
        b = self.base
        topic = request.topic.name
        b.authorize(ctx, RequestCode.END_TRANSACTION, {topic: PUB})
        b.validate_topic(request.topic)
        if not request.transaction_id.strip():
            raise GrpcProxyError(pb.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        if request.resolution not in (pb.COMMIT, pb.ROLLBACK):
            raise GrpcProxyError(pb.BAD_REQUEST, f"resolution {request.resolution} is not COMMIT or ROLLBACK")
        data = self.data.pop((topic, request.transaction_id), None)
        if data is None:
            raise GrpcProxyError(pb.INVALID_TRANSACTION_ID, "cannot found transaction data")
        fields = {"producerGroup": data.group, "tranStateTableOffset": data.tran_state_table_offset,
                  "commitLogOffset": data.commit_log_offset,
                  "commitOrRollback": COMMIT_TYPE if request.resolution == pb.COMMIT else ROLLBACK_TYPE,
                  "fromTransactionCheck": "true" if request.source == pb.SOURCE_SERVER_CHECK else "false",
                  "msgId": request.message_id or data.msg_id, "transactionId": data.msg_id}  # fmt: skip
        response = await b.call(b.channel_of(ctx), RequestCode.END_TRANSACTION, fields)
        if response.code != ResponseCode.SUCCESS:
            return mpb.EndTransactionResponse(status=from_remoting(response.code, response.remark))
        return mpb.EndTransactionResponse(status=ok())

    def on_check(self, client: GrpcClient, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE from the broker: RecoverOrphanedTransactionCommand to the client."""
        try:
            m = decode_message(request.body)
        except Exception as e:
            log.warning("a transaction check for %s has a body that does not decode: %s", client.client_id, e)
            return
        offset_msg_id = str(request.ext_fields.get("offsetMsgId", ""))
        group = m.properties.get("PGROUP", m.topic)
        queue_offset = int(request.ext_fields.get("tranStateTableOffset", m.queue_offset))
        transaction_id = self.record(group, str(request.ext_fields.get("msgId", "")), offset_msg_id, queue_offset)
        command = mpb.TelemetryCommand(recover_orphaned_transaction_command=mpb.RecoverOrphanedTransactionCommand(
            message=to_proto_message(m), transaction_id=transaction_id))  # fmt: skip
        if not self.base.clients.write_telemetry(client, command):
            log.info("transaction check for %s dropped: it has no Telemetry stream open", client.client_id)
