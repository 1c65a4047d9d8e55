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
GET_ALL_DELAY_OFFSET (45)               writes the body as delayOffset.json
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)  replaces subscriptionGroup.json when the
                                        dataVersion differs
======================================  ============================================

Each step is independent: a failure is logged and the next step still runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

import orjson

from pumice.broker.config_file import DataVersion, parse_json
from pumice.remoting.remoting_client import RemotingClient, RemotingConnectError, RemotingTimeoutError
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from pumice.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

INITIAL_DELAY_S = 3.0
PERIOD_S = 10.0


class SlaveSynchronize:
    def __init__(self, controller: BrokerController, client: RemotingClient) -> None:
        self.controller = controller
        self.client = client
        self.master_addr: str | None = None
        self.rounds = 0

    async def run(self) -> None:
        await asyncio.sleep(INITIAL_DELAY_S)
        while True:
            await self.sync_all()
            await asyncio.sleep(PERIOD_S)

    async def sync_all(self) -> None:
        if not self.master_addr:
            return
        for step in (self.sync_topic_config, self.sync_consumer_offset, self.sync_delay_offset,
                     self.sync_subscription_group_config):  # fmt: skip
            try:
                await step(self.master_addr)
            except (RemotingConnectError, RemotingTimeoutError, OSError, ValueError, TypeError, KeyError) as e:
                log.warning("%s from master %s failed: %s", step.__name__, self.master_addr, e)
        self.rounds += 1

    async def _fetch(self, addr: str, code: RequestCode) -> bytes:
        r = await self.client.invoke(addr, RemotingCommand(code=code), timeout_s=3)
        if r.code != ResponseCode.SUCCESS:
            raise ValueError(f"the master answered {r.code}: {r.remark}")
        return bytes(r.body or b"")

    async def sync_topic_config(self, addr: str) -> None:
        data = parse_json(await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        topics = self.controller.topics
        if DataVersion.from_json(data.get("dataVersion")) != topics.data_version:
            await asyncio.to_thread(topics.take_master_copy, data, topics.topic_config_table)
            log.info("Update slave topic config from master, %s", addr)

    async def sync_consumer_offset(self, addr: str) -> None:
        data = parse_json(await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET))
        await asyncio.to_thread(self.controller.offsets.merge_master_offsets, data)
        log.debug("Update slave consumer offset from master, %s", addr)

    async def sync_delay_offset(self, addr: str) -> None:
        r = await self.client.invoke(addr, RemotingCommand(code=RequestCode.GET_ALL_DELAY_OFFSET), timeout_s=3)
        if r.code == ResponseCode.SYSTEM_ERROR:  # no delayed message on the master yet: nothing to copy
            log.debug("no delay offset on master %s: %s", addr, r.remark)
            return
        if r.code != ResponseCode.SUCCESS:
            raise ValueError(f"the master answered {r.code}: {r.remark}")
        body = bytes(r.body or b"")
        orjson.loads(body)  # only a valid document replaces the file
        path = os.path.join(self.controller.store_config.config_dir, "delayOffset.json")
        await asyncio.to_thread(_write_atomically, path, body)

    async def sync_subscription_group_config(self, addr: str) -> None:
        data = parse_json(await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        groups = self.controller.subscription_groups
        if DataVersion.from_json(data.get("dataVersion")) != groups.data_version:
            await asyncio.to_thread(groups.take_master_copy, data, groups.subscription_group_table)
            log.info("Update slave Subscription Group from master, %s", addr)


def _write_atomically(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
