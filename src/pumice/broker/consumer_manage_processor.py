"""ConsumerManageProcessor: consumer offsets and queue offsets.

========================================  =================================================
QUERY_CONSUMER_OFFSET (14)                ``offset``, or QUERY_NOT_FOUND; a group with no
                                          offset gets 0 when the queue still starts at 0 and
                                          its first message is in memory (within
                                          accessMessageInMemoryMaxRatio% of RAM of the
                                          CommitLog's end), as the Java broker does
UPDATE_CONSUMER_OFFSET (15)               stores ``commitOffset`` (negative values ignored)
GET_MAX_OFFSET (30), GET_MIN_OFFSET (31)  ``offset``
SEARCH_OFFSET_BY_TIMESTAMP (29)           ``offset`` nearest the time
GET_EARLIEST_MSG_STORETIME (32)           ``timestamp``
========================================  =================================================
"""

from __future__ import annotations

from typing import Any, Protocol

from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_api import MessageStore


class OffsetsLike(Protocol):
    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> Any: ...

    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...


class ConsumerManageProcessor:
    def __init__(self, store: MessageStore, offsets: OffsetsLike) -> None:
        self.store = store
        self.offsets = offsets

    async def process_request(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        code = req.code
        topic = req.ext_str("topic", required=True) or ""
        queue_id = req.ext_int("queueId", required=True) or 0  # @CFNotNull in every header here
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            group = req.ext_str("consumerGroup", required=True) or ""
            offset = self.offsets.query_offset(group, topic, queue_id)
            if offset >= 0:
                return req.make_response(ResponseCode.SUCCESS, ext_fields={"offset": offset})
            # a new group reads from 0 only while the queue starts at 0 and its first message is
            # still in memory; else QUERY_NOT_FOUND, and the client applies consumeFromWhere
            # (CONSUME_FROM_LAST_OFFSET then starts at the end, not at a huge backlog)
            min_offset = self.store.get_min_offset_in_queue(topic, queue_id)
            if min_offset <= 0 and not self.store.check_in_disk_by_consume_offset(topic, queue_id, 0):
                return req.make_response(ResponseCode.SUCCESS, ext_fields={"offset": 0})
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
            )
        if code == RequestCode.UPDATE_CONSUMER_OFFSET:
            group = req.ext_str("consumerGroup", required=True) or ""
            commit = req.ext_long("commitOffset", required=True)
            if commit is not None and commit >= 0:
                self.offsets.commit_offset(channel.remote_addr, group, topic, queue_id, commit)
            return req.make_response(ResponseCode.SUCCESS)
        if code == RequestCode.GET_MAX_OFFSET:
            return req.make_response(
                ResponseCode.SUCCESS, ext_fields={"offset": self.store.get_max_offset_in_queue(topic, queue_id)}
            )
        if code == RequestCode.GET_MIN_OFFSET:
            return req.make_response(
                ResponseCode.SUCCESS, ext_fields={"offset": max(self.store.get_min_offset_in_queue(topic, queue_id), 0)}
            )
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            ts = req.ext_long("timestamp", required=True) or 0
            return req.make_response(
                ResponseCode.SUCCESS, ext_fields={"offset": self.store.get_offset_in_queue_by_time(topic, queue_id, ts)}
            )
        # GET_EARLIEST_MSG_STORETIME
        return req.make_response(
            ResponseCode.SUCCESS, ext_fields={"timestamp": self.store.get_earliest_message_time(topic, queue_id)}
        )
