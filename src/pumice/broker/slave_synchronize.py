"""SlaveSynchronize: a slave copies the master's configs every 10 s (first after 3 s).

The CommitLog comes over the HA connection; everything else a slave needs to serve
consumers comes from the master's remoting port, with the admin codes below. The master's
address is the one the name server gave in answer to the slave's registration
(``masterAddr``).

======================================  ============================================
request                                 what the slave does with the answer
======================================  ============================================
GET_ALL_TOPIC_CONFIG (21)               replaces topics.json when the master's
                                        dataVersion differs from its own
GET_ALL_CONSUMER_OFFSET (43)            overwrites its offsets key by key (putAll)
GET_ALL_DELAY_OFFSET (45)               replaces delayOffset.json (through
                                        ScheduleMessageService, not started)
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)  replaces subscriptionGroup.json when the
                                        dataVersion differs
GET_TIMER_CHECK_POINT (60)              the timer's read time, queue offset (its
                                        enqueue's cap) and dataVersion into its
                                        timercheck (timerWheelEnable; 5.3.3 every 3 s)
GET_TIMER_METRICS (61)                  replaces timermetrics when the dataVersion
                                        differs (5.3.3 every 60 s)
======================================  ============================================

Each step is independent: a failure is logged and the next step still runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from pumice.broker.config_file import DataVersion, parse_json
from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.subscription_group_manager import SubscriptionGroupManager
from pumice.broker.topic_config_manager import TopicConfigManager
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.schedule_message_service import ScheduleMessageService
from pumice.store.timer.timer_message_store import TimerMessageStore

log = logging.getLogger(__name__)

INITIAL_DELAY_S = 3.0
PERIOD_S = 10.0


class MasterHasNothing(ValueError):
    """The master answered SYSTEM_ERROR (e.g. no delayOffset.json yet)."""


class SlaveSynchronize:
    def __init__(
        self,
        client: RemotingClient,
        broker_addr: str,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        subscription_groups: SubscriptionGroupManager,
        schedule_offsets: ScheduleMessageService,
        timer_store: Callable[[], TimerMessageStore | None] = lambda: None,
    ) -> None:
        """``schedule_offsets`` is not started: a slave delivers nothing, it only keeps the
        master's progress; so is ``timer_store()`` (None when the timer is off), which
        enqueues but does not deliver."""
        self.client = client
        self.broker_addr = broker_addr
        self.topics = topics
        self.offsets = offsets
        self.subscription_groups = subscription_groups
        self.schedule_offsets = schedule_offsets
        self.timer_store = timer_store
        self.master_addr: str | None = None
        self._round = asyncio.Lock()  # held while a round runs (its steps use worker threads)
        self._stopped = False

    async def run(self) -> None:
        await asyncio.sleep(INITIAL_DELAY_S)
        while not self._stopped:
            async with self._round:
                if self._stopped:
                    return
                try:
                    await self.sync_all()
                except Exception:  # never end the schedule: the next round may work
                    log.exception("slave synchronize failed")
            if not self._stopped:
                await asyncio.sleep(PERIOD_S)

    async def stop(self, timeout_s: float = 10.0) -> None:
        """No step after this; wait (bounded) for the one under way, whose worker thread
        would otherwise go on writing a config file after the store shut down."""
        self._stopped = True
        try:
            async with asyncio.timeout(timeout_s), self._round:
                pass
        except TimeoutError:
            log.warning("slave synchronize still running after %.0f s; shutting down anyway", timeout_s)

    async def sync_all(self) -> None:
        master = self.master_addr
        if not master or master == self.broker_addr:
            return  # no master, or this broker was named master (as RocketMQ, copy nothing)
        for step in (self.sync_topic_config, self.sync_consumer_offset, self.sync_delay_offset,
                     self.sync_subscription_group_config, self.sync_timer_check_point,
                     self.sync_timer_metrics):  # fmt: skip
            if self._stopped:  # shutting down: the step under way ends the round (each may take 3 s)
                return
            try:
                await step(master)
            except (RemotingConnectError, RemotingTimeoutError, OSError, ValueError) as e:
                log.warning("%s from master %s failed: %s", step.__name__, master, e)
            except Exception:  # a master's odd answer: the step fails, the others still run
                log.exception("%s from master %s failed", step.__name__, master)

    async def _fetch(self, addr: str, code: RequestCode) -> bytes:
        r = await self.client.invoke(addr, RemotingCommand(code=code), timeout_s=3)
        if r.code == ResponseCode.SYSTEM_ERROR:
            raise MasterHasNothing(f"the master answered {r.code}: {r.remark}")
        if r.code != ResponseCode.SUCCESS:
            raise ValueError(f"the master answered {r.code}: {r.remark}")
        return bytes(r.body or b"")

    async def _fetch_object(self, addr: str, code: RequestCode) -> dict[str, Any]:
        data = parse_json(await self._fetch(addr, code))
        if not isinstance(data, dict):
            raise ValueError(f"the master's answer to {code.name} is not a JSON object")
        return data

    async def _sync_versioned(self, addr: str, code: RequestCode, manager: Any, table: dict[str, Any]) -> None:
        """Topics or subscription groups: take the master's copy when its dataVersion differs."""
        data = await self._fetch_object(addr, code)
        if DataVersion.from_json(data.get("dataVersion")) != manager.data_version:
            await asyncio.to_thread(manager.take_master_copy, data, table)
            log.info("Update slave %s from master, %s", os.path.basename(manager.path), addr)

    async def sync_topic_config(self, addr: str) -> None:
        topics = self.topics
        await self._sync_versioned(addr, RequestCode.GET_ALL_TOPIC_CONFIG, topics, topics.topic_config_table)

    async def sync_consumer_offset(self, addr: str) -> None:
        data = await self._fetch_object(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        await asyncio.to_thread(self.offsets.merge_master_offsets, data)
        log.debug("Update slave consumer offset from master, %s", addr)

    async def sync_delay_offset(self, addr: str) -> None:
        try:
            body = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        except MasterHasNothing as e:  # no delayed message on the master yet
            log.debug("no delay offsets on master %s: %s", addr, e)
            return
        await asyncio.to_thread(self.schedule_offsets.take_master_copy, body)

    async def sync_subscription_group_config(self, addr: str) -> None:
        groups = self.subscription_groups
        await self._sync_versioned(
            addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, groups, groups.subscription_group_table
        )

    async def sync_timer_check_point(self, addr: str) -> None:
        timer = self.timer_store()
        if timer is None or timer.should_running_dequeue:  # no timer, or it delivers: its own progress
            return
        timer.take_master_checkpoint(await self._fetch(addr, RequestCode.GET_TIMER_CHECK_POINT))

    async def sync_timer_metrics(self, addr: str) -> None:
        timer = self.timer_store()
        if timer is None:
            return
        body = await self._fetch(addr, RequestCode.GET_TIMER_METRICS)
        if await asyncio.to_thread(timer.metrics.take_master_copy, body):
            log.info("Update slave timermetrics from master, %s", addr)
