"""QueryMessageProcessor: QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).

QUERY_MESSAGE (topic, key, maxNum, beginTimestamp, endTimestamp) answers the records whose
KEYS or UNIQ_KEY equal the key, stored in the time range, newest first, as the body, with
``indexLastUpdateTimestamp`` and ``indexLastUpdatePhyoffset``; QUERY_NOT_FOUND when none.
VIEW_MESSAGE_BY_ID (offset: the CommitLog offset inside an offset msgId) answers that record;
with ACL on, only to an account that may SUB its topic (NO_PERMISSION, no body, otherwise: the
topic is known only once the record is read; 4.9 answers any signed account).
"""

from __future__ import annotations

from pumice.acl.plain_access_validator import read_refusal
from pumice.acl.plain_permission_manager import PlainPermissionManager
from pumice.common.message_decoder import record_topic
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_api import MessageStore

MAX_QUERY_NUM = 64


class QueryMessageProcessor:
    def __init__(self, store: MessageStore, acl: PlainPermissionManager | None = None) -> None:
        self.store = store
        self.acl = acl

    async def process_request(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        if req.code == RequestCode.VIEW_MESSAGE_BY_ID:
            offset = req.ext_long("offset", required=True) or 0
            sbr = self.store.select_one_message_by_offset(offset)
            if sbr is None:
                return req.make_response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
            try:
                refused = read_refusal(self.acl, channel.remote_addr, req, record_topic(sbr.buffer))
            except Exception:
                sbr.release()
                raise
            if refused is not None:
                sbr.release()
                return req.make_response(ResponseCode.NO_PERMISSION, refused)
            resp = req.make_response(ResponseCode.SUCCESS, body_parts=[sbr.buffer])
            resp.after_send = sbr.release
            return resp
        topic = req.ext_str("topic", required=True) or ""
        key = req.ext_str("key", required=True) or ""
        max_num = min(req.ext_int("maxNum", required=True) or 0, MAX_QUERY_NUM)  # 0 or less: nothing
        begin = req.ext_long("beginTimestamp", 0) or 0
        end = req.ext_long("endTimestamp", 2**63 - 1) or 2**63 - 1
        found, res = self.store.query_message_with_index(topic, key, max_num, begin, end)
        ext = {
            "indexLastUpdateTimestamp": res.index_last_update_timestamp,
            "indexLastUpdatePhyoffset": res.index_last_update_phyoffset,
        }
        parts = []
        holds = []
        for m in found:
            sbr = self.store.select_one_message_by_offset(m.commit_log_offset)
            if sbr is not None:
                parts.append(sbr.buffer)
                holds.append(sbr)
        if not parts:
            return req.make_response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                     ext_fields=ext)  # fmt: skip
        resp = req.make_response(ResponseCode.SUCCESS, ext_fields=ext, body_parts=parts)

        def release() -> None:
            for h in holds:
                h.release()

        resp.after_send = release
        return resp
