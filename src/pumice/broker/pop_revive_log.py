"""ReviveLog: this broker's revive topic, where POP keeps its checkpoints and acks.

``rmq_sys_REVIVE_LOG_<cluster>`` has ``reviveQueueNum`` queues (8), created at start as
RocketMQ 5's TopicConfigManager creates it. The records' bodies are in
``pumice.common.pop_check_point``; each record is a message of the revive topic with:

=============  ==========================================================================
field          value
=============  ==========================================================================
queueId        the revive queue (the handle's reviveQid)
TAGS           ``ck``, ``ack`` or ``bAck``
UNIQ_KEY       the record's id, as 5.3.3's genCkUniqueId / genAckUniqueId build it
body           the record's JSON
bornHost,      the broker's address
storeHost
=============  ==========================================================================

RocketMQ 5 also sets a delivery time (the timer moves a record into the revive queue when it
is due); Pumice stores it at once and its revive service checks the times itself.

A put is made on the loop and checked at once (a pop whose checkpoint is not stored gives no
messages: nothing handed out can then be forgotten); ``stored`` then waits for the disk and
the slave as the store's flush and role say, as a send does.
"""

from __future__ import annotations

import time

from pumice.broker.put_message_waiter import PutMessageWaiter
from pumice.broker.topic_config_manager import TopicConfig, TopicConfigManager
from pumice.common.message import MessageExtBrokerInner, host_address
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import message_properties_to_string
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.common.pop_check_point import CK_TAG, AckMsg, PopCheckPoint, build_cluster_revive_topic
from pumice.store.message_store_api import MessageStore
from pumice.store.put_message_result import PutMessageResult, PutMessageStatus

_STORED = (
    PutMessageStatus.PUT_OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE,
)


def ck_unique_id(ck: PopCheckPoint) -> str:
    """PopMessageProcessor.genCkUniqueId."""
    return f"{ck.topic}@{ck.queue_id}@{ck.start_offset}@{ck.cid}@{ck.pop_time}@{ck.broker_name}@{CK_TAG}"


def ack_unique_id(ack: AckMsg) -> str:
    """PopMessageProcessor.genAckUniqueId / genBatchAckUniqueId."""
    offsets = ",".join(map(str, ack.ack_offsets)) if ack.batch else str(ack.ack_offsets[0])
    return f"{ack.topic}@{ack.queue_id}@{offsets}@{ack.consumer_group}@{ack.pop_time}@{ack.broker_name}@{ack.tag}"


class ReviveLog:
    def __init__(self, store: MessageStore, topics: TopicConfigManager, cluster_name: str, broker_addr: str,
                 revive_queue_num: int) -> None:  # fmt: skip
        self.store = store
        self.topic = build_cluster_revive_topic(cluster_name)
        self.revive_queue_num = revive_queue_num
        self.host = host_address(broker_addr)
        self._waiter = PutMessageWaiter(store)
        topics.system_topics.add(self.topic)
        tc = topics.select_topic_config(self.topic)
        if tc is None or tc.read_queue_nums < revive_queue_num:
            topics.update_topic_config(
                TopicConfig(self.topic, revive_queue_num, revive_queue_num, PERM_READ | PERM_WRITE)
            )

    def put(self, revive_qid: int, tag: str, key: str, body: bytes) -> PutMessageResult:
        """Append one record now (on the loop); ``stored`` waits for its flush."""
        props = {MessageConst.PROPERTY_TAGS: tag, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: key}
        msg = MessageExtBrokerInner(
            topic=self.topic, body=body, queue_id=revive_qid, properties=props,
            born_timestamp=int(time.time() * 1000), born_host=self.host, store_host=self.host,
            properties_string=message_properties_to_string(props),
        )  # fmt: skip
        return self.store.put_messages((msg,), wait_flush=False)

    def put_ck(self, revive_qid: int, ck: PopCheckPoint) -> PutMessageResult:
        return self.put(revive_qid, CK_TAG, ck_unique_id(ck), ck.to_json())

    def put_ack(self, revive_qid: int, ack: AckMsg) -> PutMessageResult:
        return self.put(revive_qid, ack.tag, ack_unique_id(ack), ack.to_json())

    async def stored(self, result: PutMessageResult) -> bool:
        """Wait as a send waits; True when the record is in the log (a flush or slave timeout
        still leaves it there, as 5.3.3 counts it)."""
        if result.status is not PutMessageStatus.PUT_OK:
            return False
        result = await self._waiter.wait_stored(result)
        return result.status in _STORED


def is_stored(result: PutMessageResult) -> bool:
    return result.status in _STORED
