"""PopConsumption: RocketMQ 5's POP consumption, its parts built and started together for the broker.

================================  =================================================================
part                              serves
================================  =================================================================
``ReviveLog``                     the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` (created here)
``PopMessageProcessor``           POP_MESSAGE 200050, its long polling (``PopLongPollingService``)
``AckMessageProcessor``           ACK_MESSAGE 200051, BATCH_ACK_MESSAGE 200151
``ConsumerOrderInfoManager``      orderly pops' batches in flight (consumerOrderInfo.json)
``ChangeInvisibleTimeProcessor``  CHANGE_MESSAGE_INVISIBLETIME 200053
``PopReviveService``              the master's revive passes (un-acked messages to their retry topic)
``QueryAssignmentProcessor``      QUERY_ASSIGNMENT 400, SET_MESSAGE_REQUEST_MODE 401 (which queues a
                                  5.x client gets, and whether it pops: messageRequestMode.json)
================================  =================================================================

Design and formats: docs/v5/pop.md.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from pumice.broker.ack_message_processor import AckMessageProcessor
from pumice.broker.broker_config import BrokerConfig
from pumice.broker.change_invisible_time_processor import ChangeInvisibleTimeProcessor
from pumice.broker.consumer_order_info_manager import ConsumerOrderInfoManager
from pumice.broker.message_request_mode_manager import MessageRequestModeManager
from pumice.broker.pop_message_processor import PopMessageProcessor
from pumice.broker.pop_revive_log import ReviveLog
from pumice.broker.pop_revive_service import PopReviveService
from pumice.broker.query_assignment_processor import QueryAssignmentProcessor
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.request_code import RequestCode
from pumice.store.message_store_api import MessageStore


class PopConsumption:
    def __init__(
        self, store: MessageStore, topics: Any, offsets: Any, subscription_groups: Any, c: BrokerConfig, *,
        consumer_filters: Any, consumers: Any, config_dir: str, namesrv_addrs: Callable[[], list[str]],
        client: RemotingClient,
    ) -> None:  # fmt: skip
        self.revive_log = ReviveLog(store, topics, c.broker_cluster_name, c.broker_addr, c.revive_queue_num)
        self.order_infos = ConsumerOrderInfoManager(
            os.path.join(config_dir, "consumerOrderInfo.json"), topics, subscription_groups
        )
        if not self.order_infos.load():
            raise RuntimeError(f"cannot read {self.order_infos.path} nor its .bak: fix or remove it")
        self.flush_interval_s = c.flush_consumer_offset_interval / 1000
        self.pop = PopMessageProcessor(
            store, topics, offsets, subscription_groups, self.revive_log, self.order_infos, broker_ip=c.broker_ip1,
            broker_name=c.broker_name, broker_perm=c.broker_permission,
            pop_from_retry_probability=c.pop_from_retry_probability, enable_retry_topic_v2=c.enable_retry_topic_v2,
            init_pop_offset_by_check_msg_in_mem=c.init_pop_offset_by_check_msg_in_mem,
            enable_property_filter=c.enable_property_filter, consumer_filters=consumer_filters,
            max_pop_polling_size=c.max_pop_polling_size, pop_polling_size=c.pop_polling_size,
        )  # fmt: skip
        self.ack = AckMessageProcessor(store, topics, self.revive_log, c.broker_name, offsets, self.order_infos,
                                       self.pop.polling.notify_message_arriving)  # fmt: skip
        self.change_invisible_time = ChangeInvisibleTimeProcessor(store, topics, self.revive_log, offsets,
                                                                  self.order_infos)  # fmt: skip
        self.modes = MessageRequestModeManager(os.path.join(config_dir, "messageRequestMode.json"))
        if not self.modes.load():
            raise RuntimeError(f"cannot read {self.modes.path} nor its .bak: fix or remove it")
        self.query_assignment = QueryAssignmentProcessor(
            topics, subscription_groups, consumers, self.modes, c.broker_name, namesrv_addrs, client
        )
        self._revive_task: asyncio.Task[None] | None = None
        self.revive = PopReviveService(
            store, topics, offsets, subscription_groups, self.revive_log, broker_name=c.broker_name,
            revive_interval_ms=c.revive_interval, enable_retry_topic_v2=c.enable_retry_topic_v2,
        )  # fmt: skip

    def processors(self) -> list[tuple[Any, list[int]]]:
        return [
            (self.pop, [RequestCode.POP_MESSAGE]),
            (self.ack, [RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE]),
            (self.change_invisible_time, [RequestCode.CHANGE_MESSAGE_INVISIBLETIME]),
            (self.query_assignment, [RequestCode.QUERY_ASSIGNMENT, RequestCode.SET_MESSAGE_REQUEST_MODE]),
        ]

    def start(self) -> list[asyncio.Task[None]]:
        """The long polling's task (the broker cancels it at shutdown)."""
        return [self.pop.polling.start(), asyncio.get_running_loop().create_task(self._persist_order_infos())]

    def start_revive(self) -> None:
        """A master service (as the schedule service): started when the broker is or becomes
        master, DLedger's leader included."""
        if self._revive_task is None:
            self._revive_task = self.revive.start()

    async def stop_revive(self) -> None:
        task, self._revive_task = self._revive_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _persist_order_infos(self) -> None:
        """consumerOrderInfo.json every flushConsumerOffsetInterval, and once more when cancelled."""
        try:
            while True:
                await asyncio.sleep(self.flush_interval_s)
                await asyncio.to_thread(self.order_infos.persist_if_any)
        finally:
            self.order_infos.persist_if_any()
