"""ChangeInvisibleTimeProcessor: CHANGE_MESSAGE_INVISIBLETIME (200053), a popped message invisible
for a new time from now (RocketMQ 5's nack and renewal).

As 5.3.3: a new checkpoint of that one message (start offset = its offset, popTime = now,
invisibleTime = the request's) goes to the handle's revive queue, then an ack of the message
under its old checkpoint; the answer gives the new popTime, invisibleTime and reviveQid, from
which the client builds the new handle (the old one then acks nothing).

Request header (ChangeInvisibleTimeRequestHeader): consumerGroup, topic, queueId, extraInfo,
offset, invisibleTime, all required. Response header (ChangeInvisibleTimeResponseHeader):
popTime, invisibleTime, reviveQid.

An orderly handle (reviveQid 999) writes nothing to the revive topic: the message's next
visible time in its queue's batch becomes now + invisibleTime (ConsumerOrderInfoManager), and
the answer keeps the handle's popTime, with invisibleTime = that time − popTime (the client's
new handle then still acks the batch); an offset below the group's (acked already) is answered
SUCCESS without fields, as 5.3.3.

=========================================  =================  ===================================
condition                                  code               remark
=========================================  =================  ===================================
no such topic                              TOPIC_NOT_EXIST    topic[t] not exist, apply first
                                                              please!
queueId < 0 or ≥ readQueueNums             MESSAGE_ILLEGAL    queueId[q] is illegal, …
offset < min or ≥ max of the queue         NO_MESSAGE         (none, as 5.3.3)
a handle that does not parse               SYSTEM_ERROR       what is wrong with it
the new checkpoint not stored              SYSTEM_ERROR       the store's status
=========================================  =================  ===================================
"""

from __future__ import annotations

import time
from typing import Any

from pumice.broker.ack_message_processor import check_queue, check_revive_qid
from pumice.broker.consumer_order_info_manager import ConsumerOrderInfoManager
from pumice.broker.pop_revive_log import ReviveLog, is_stored
from pumice.common import extra_info_util as eiu
from pumice.common.pop_check_point import AckMsg, PopCheckPoint
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_api import MessageStore


class ChangeInvisibleTimeProcessor:
    def __init__(self, store: MessageStore, topics: Any, revive_log: ReviveLog, offsets: Any,
                 order_infos: ConsumerOrderInfoManager) -> None:  # fmt: skip
        self.store = store
        self.topics = topics
        self.revive_log = revive_log
        self.offsets = offsets
        self.order_infos = order_infos

    async def process_request(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        group = req.ext_str("consumerGroup", required=True) or ""
        topic = req.ext_str("topic", required=True) or ""
        queue_id = req.ext_int("queueId", required=True)
        extra_info = req.ext_str("extraInfo", required=True)
        offset = req.ext_long("offset", required=True)
        invisible_time = req.ext_long("invisibleTime", required=True)
        assert queue_id is not None and offset is not None and invisible_time is not None
        refused = check_queue(self.topics, topic, queue_id, channel.remote_addr)
        if refused is not None:
            return req.make_response(*refused)
        lo = self.store.get_min_offset_in_queue(topic, queue_id)
        hi = self.store.get_max_offset_in_queue(topic, queue_id)
        if offset < lo or offset >= hi:
            return req.make_response(ResponseCode.NO_MESSAGE)
        try:
            info = eiu.split(extra_info)
        except ValueError as e:
            return req.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        bad = check_revive_qid(self.revive_log, info.revive_qid)
        if bad is not None:
            return req.make_response(ResponseCode.MESSAGE_ILLEGAL, bad)
        now = int(time.time() * 1000)
        if info.is_order:
            if offset < self.offsets.query_offset(group, topic, queue_id):
                return req.make_response(ResponseCode.SUCCESS)
            visible = now + invisible_time
            self.order_infos.update_next_visible_time(topic, group, queue_id, offset, info.pop_time, visible)
            ext = {"popTime": info.pop_time, "invisibleTime": visible - info.pop_time, "reviveQid": info.revive_qid}
            return req.make_response(ResponseCode.SUCCESS, ext_fields=ext)
        ck = PopCheckPoint(
            start_offset=offset, pop_time=now, invisible_time=invisible_time, num=1, queue_id=queue_id, topic=topic,
            cid=group, broker_name=info.broker_name, queue_offset_diff=[0],
        )  # fmt: skip
        ck_put = self.revive_log.put_ck(info.revive_qid, ck)
        if not is_stored(ck_put):  # the old checkpoint still holds: nothing is lost
            return req.make_response(
                ResponseCode.SYSTEM_ERROR, f"change invisible, put new ck error: {ck_put.status.name}"
            )
        # the ack of the old checkpoint only after the new one: a crash between them delivers twice, never never
        ack = AckMsg([offset], info.ck_queue_offset, group, topic, queue_id, info.pop_time, info.broker_name)
        ack_put = self.revive_log.put_ack(info.revive_qid, ack)
        if not await self.revive_log.stored(ck_put):
            return req.make_response(
                ResponseCode.SYSTEM_ERROR, f"change invisible, put new ck error: {ck_put.status.name}"
            )
        await self.revive_log.stored(ack_put)  # if it failed the message comes back twice: at least once
        ext = {"popTime": now, "invisibleTime": invisible_time, "reviveQid": info.revive_qid}
        return req.make_response(ResponseCode.SUCCESS, ext_fields=ext)
