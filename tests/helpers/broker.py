"""Broker parts in the test's own process, over a real loopback connection.

``run(tmp_path, scenario)`` builds an AdminBrokerProcessor over a real store (``small_config``)
and real managers, serves it (with heartbeats and offset commits) on a loopback RemotingServer
and runs ``scenario(Harness)``; ``create_topic``, ``mq`` and ``heartbeat`` are the request
fields and bodies the scenarios send. ``loopback_controller`` is a whole BrokerController on a
free loopback port, ``serving`` starts it with a client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from pumice.broker.admin_broker_processor import AdminBrokerProcessor
from pumice.broker.broker_config import BrokerConfig
from pumice.broker.broker_controller import BrokerController
from pumice.broker.client_manage_processor import ClientManageProcessor
from pumice.broker.consumer_manage_processor import ConsumerManageProcessor
from pumice.broker.consumer_manager import ConsumerManager
from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.subscription_group_manager import SubscriptionGroupManager
from pumice.broker.topic_config_manager import TopicConfigManager
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import ProcessorPool, RemotingServer
from pumice.remoting.request_code import RequestCode
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from pumice.store.message_store_config import MessageStoreConfig
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched

BROKER = "broker-t"
CLUSTER = "TestCluster"


@dataclass
class Harness:
    client: RemotingClient
    addr: str
    store: DefaultMessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    broker_config: BrokerConfig
    store_config: MessageStoreConfig
    proc: AdminBrokerProcessor
    registrations: list[float] = field(default_factory=list)

    async def call(self, code: int, body: bytes = b"", **fields: object) -> RemotingCommand:
        return await self.client.invoke(self.addr, RemotingCommand(code=code, ext_fields=dict(fields), body=body))

    def put(self, topic: str, body: bytes, queue_id: int = 0) -> int:
        """Append one message; returns its store timestamp."""
        m = MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties={"TAGS": "A"})
        assert self.store.put_message(m).is_ok()
        return m.store_timestamp


def run(
    tmp_path: Path,
    scenario: Callable[[Harness], Awaitable[None]],
    *,
    preload: Callable[[DefaultMessageStore], None] | None = None,
    **store_overrides: object,
) -> None:
    store_config = small_config(str(tmp_path / "store"), **store_overrides)
    store = DefaultMessageStore(store_config)
    assert store.load()
    store.start()
    if preload is not None:
        preload(store)
        wait_dispatched(store)
    cfg = store_config.config_dir
    topics = TopicConfigManager(f"{cfg}/topics.json", BROKER, CLUSTER)
    groups = SubscriptionGroupManager(f"{cfg}/subscriptionGroup.json")
    offsets = ConsumerOffsetManager(f"{cfg}/consumerOffset.json")
    consumers = ConsumerManager()
    broker_config = BrokerConfig(broker_cluster_name=CLUSTER, broker_name=BROKER)
    registrations: list[float] = []
    proc = AdminBrokerProcessor(store, topics, groups, offsets, consumers, broker_config, store_config,
                                lambda: registrations.append(time.monotonic()))  # fmt: skip

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)
        admin_pool = ProcessorPool("admin", 16, 1000)
        for code in AdminBrokerProcessor.CODES:
            server.register_processor(code, proc, admin_pool)
        server.register_processor(RequestCode.HEART_BEAT, ClientManageProcessor(consumers), ProcessorPool("c", 4, 100))
        consumer_manage = ConsumerManageProcessor(store, offsets)
        server.register_processor(RequestCode.UPDATE_CONSUMER_OFFSET, consumer_manage, ProcessorPool("o", 4, 100))
        server.on_channel_close.append(consumers.do_channel_close_event)
        await server.start()
        client = RemotingClient()
        h = Harness(client, f"127.0.0.1:{server.port}", store, topics, groups, offsets, consumers, broker_config,
                    store_config, proc, registrations)  # fmt: skip
        try:
            await scenario(h)
        finally:
            await client.close()
            await server.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        store.shutdown()


def create_topic(topic: str, read: int = 4, write: int = 4, perm: int = 6, **extra: object) -> dict[str, object]:
    fields: dict[str, object] = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": read,
                                 "writeQueueNums": write, "perm": perm, "topicFilterType": "SINGLE_TAG",
                                 "topicSysFlag": 0, "order": False}  # fmt: skip
    fields.update(extra)
    return fields


def mq(topic: str, queue_id: int) -> str:
    """A MessageQueue of the test broker as a map key (bare in a body, fastjson's form)."""
    return f'{{"brokerName":"{BROKER}","queueId":{queue_id},"topic":"{topic}"}}'


def mq_map(entries: dict[tuple[str, int], str]) -> str:
    """``{MQ:value,...}`` of ``(topic, queueId) -> value JSON``, in a Java HashMap's order."""
    from pumice.common.message_queue_map import message_queue_table

    table = message_queue_table((t, BROKER, q, v) for (t, q), v in entries.items())
    return "{" + ",".join(f"{k}:{v}" for k, v in table.items()) + "}"


def heartbeat(group: str, client_id: str, topic: str, **enums: object) -> bytes:
    sub = {"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 5, "classFilterMode": False,
           "expressionType": "TAG"}  # fmt: skip
    consumer = {"groupName": group, "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0, "unitMode": False,
                "subscriptionDataSet": [sub]}  # fmt: skip
    consumer.update(enums)
    return orjson.dumps({"clientID": client_id, "producerDataSet": [], "consumerDataSet": [consumer]})


def loopback_controller(tmp_path: Path, **store: object) -> BrokerController:
    cfg = BrokerConfig(listen_host="127.0.0.1", listen_port=0, fast_listen_port_enable=False)
    return BrokerController(cfg, small_config(str(tmp_path), **store))


@asynccontextmanager
async def serving(controller: BrokerController) -> AsyncIterator[tuple[RemotingClient, str]]:
    """The controller started, and a client with its address; both stopped after."""
    await controller.start()
    client = RemotingClient()
    try:
        yield client, f"127.0.0.1:{controller.server.port}"
    finally:
        await client.close()
        await controller.shutdown()
