"""AdminBrokerProcessor: the admin request codes (mqadmin, the dashboard, DefaultMQAdminExt).

Request fields are extFields (``*`` = required: missing, the answer is SYSTEM_ERROR naming it);
bodies are JSON unless said otherwise. Every answer not listed is SUCCESS with no body.

=========================================  ==============================  =============================================
code                                       request                         response
=========================================  ==============================  =============================================
UPDATE_AND_CREATE_TOPIC (17)               ``topic*``,                     creates or replaces the TopicConfig
                                           ``readQueueNums*``,             (topics.json, dataVersion bumped), then
                                           ``writeQueueNums*``,            registers with the name servers at once.
                                           ``perm*``,                      SYSTEM_ERROR: an invalid name
                                           ``topicFilterType*``            (TopicValidator's remark), a system topic
                                           (SINGLE_TAG or MULTI_TAG),      (``The topic[X] is conflict with system
                                           ``topicSysFlag`` (0),           topic.``), a bad filter type, a negative
                                           ``order`` (false),              queue number, a slave broker
                                           ``defaultTopic`` (unused, as
                                           upstream)
DELETE_TOPIC_IN_BROKER (215)               ``topic*``                      drops the TopicConfig and every group's
                                                                           offsets for it, registers at once; SUCCESS
                                                                           also for an unknown topic; the same
                                                                           SYSTEM_ERRORs as above (ConsumeQueue files
                                                                           stay until retention removes them)
GET_ALL_TOPIC_CONFIG (21)                  --                              ``{"topicConfigTable": {name: TopicConfig},
                                                                           "dataVersion": {...}}`` (topics.json)
GET_TOPIC_STATS_INFO (202)                 ``topic*``                      TopicStatsTable, one entry per write queue:
                                                                           ``{"offsetTable": {MQ:
                                                                           {"lastUpdateTimestamp", "maxOffset",
                                                                           "minOffset"}}}``; TOPIC_NOT_EXIST ``topic[X]
                                                                           not exist``
GET_CONSUMER_CONNECTION_LIST (203)         ``consumerGroup*``              ConsumerConnection: ``{"connectionSet":
                                                                           [{"clientAddr", "clientId", "language",
                                                                           "version"}], "consumeFromWhere",
                                                                           "consumeType", "messageModel",
                                                                           "subscriptionTable": {topic:
                                                                           SubscriptionData}}``; CONSUMER_NOT_ONLINE
                                                                           ``the consumer group[G] not online``
GET_PRODUCER_CONNECTION_LIST (204)         ``producerGroup*``              ProducerConnection: ``{"connectionSet":
                                                                           [{"clientAddr", "clientId", "language",
                                                                           "version"}]}``; SYSTEM_ERROR ``the producer
                                                                           group[G] not exist``
GET_CONSUME_STATS (208)                    ``consumerGroup*``, ``topic``   ConsumeStats: ``{"consumeTps": 0.0,
                                           (default: every topic the       "offsetTable": {MQ: {"brokerOffset",
                                           group has offsets for)          "consumerOffset", "lastTimestamp"}}}``, one
                                                                           entry per read queue
GET_BROKER_RUNTIME_INFO (28)               --                              KVTable ``{"table": {key: "value"}}``, keys
                                                                           below
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200)  body: SubscriptionGroupConfig   creates or replaces the group
                                           JSON                            (subscriptionGroup.json); SYSTEM_ERROR: a
                                                                           body that is not one, an illegal group name,
                                                                           a slave broker
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)     --                              subscriptionGroup.json's content:
                                                                           ``{"subscriptionGroupTable": {...},
                                                                           "dataVersion": {...}}``
DELETE_SUBSCRIPTIONGROUP (207)             ``groupName*``,                 drops the group, and its offsets with
                                           ``removeOffset`` (false)        ``removeOffset``; SUCCESS also for an unknown
                                                                           group; SYSTEM_ERROR on a slave
GET_ALL_CONSUMER_OFFSET (43)               --                              consumerOffset.json's content:
                                                                           ``{"offsetTable": {"topic@group": {"0":
                                                                           offset}}}``
GET_ALL_DELAY_OFFSET (45)                  --                              delayOffset.json's content:
                                                                           ``{"offsetTable": {"level": offset}}``;
                                                                           SYSTEM_ERROR ``No delay offset in this
                                                                           broker`` while there is none
TRIGGER_DELETE_FILES (27),                 --                              the next 20 clean-up runs delete expired
DELETE_EXPIRED_COMMITLOG (329)                                             CommitLog files whatever ``deleteWhen`` says.
                                                                           4.9 defines 27 but no 4.9 broker handles it;
                                                                           4.9.4's mqadmin deleteExpiredCommitLog sends
                                                                           329
GET_BROKER_CONFIG (26)                     --                              body: Java properties text, ``key=value``
                                                                           lines, the broker's then the store's config
                                                                           with RocketMQ key names (unset keys left
                                                                           out); extField ``version``: the config's
                                                                           DataVersion JSON
                                                                           ``{"counter":n,"timestamp":ms}``
UPDATE_BROKER_CONFIG (25)                  body: properties text           applied to the live configs, ``version``
                                                                           bumped; SYSTEM_ERROR naming the key for an
                                                                           unknown key or a bad value, and then nothing
                                                                           is applied
=========================================  ==============================  =============================================

MQ, the key of a TopicStatsTable or ConsumeStats entry, is a MessageQueue written as fastjson
writes a map keyed by objects: the key is the MessageQueue's own compact JSON, fields sorted,
``{"{\\"brokerName\\":\\"b\\",\\"queueId\\":0,\\"topic\\":\\"T\\"}": {...}}``. Entries come sorted by
topic and queue id. Stats: ``minOffset``/``maxOffset``/``brokerOffset`` are ConsumeQueue offsets
(never below 0); ``lastUpdateTimestamp`` is the store time of the queue's last message (0 for
an empty queue); ``consumerOffset`` is the committed offset (0 if none) and ``lastTimestamp``
the store time of the last consumed message (0 if none). ConsumeStats skips topics with no
config, and, if the group's consumers are online, topics they do not subscribe to (as
upstream). ``consumeTps`` is the group's pulled messages per second over the last minute,
summed over those topics (``broker_stats_manager``).

ConsumerConnection: enum fields sent as ordinals (the C++ client) are given as RocketMQ's
names (``CONSUME_PASSIVELY``, ``CLUSTERING``, ``CONSUME_FROM_LAST_OFFSET``, …), names are kept.
``language`` and ``version`` are those of the client's last heartbeat.

GET_BROKER_RUNTIME_INFO keys (all values strings, as upstream):

===========================  ===================================================================
key                          value
===========================  ===================================================================
brokerVersionDesc            ``V4_9_4``, the version Pumice speaks
brokerVersion                ``401``, its ordinal
msgPutTotalTodayNow          messages put since the broker started (RocketMQ's count since
                             start): ConsumeQueue entries dispatched since then, not counting
                             SCHEDULE_TOPIC_XXXX (a delayed message counts when delivered)
commitLogMinOffset           first CommitLog offset still on disk (-1 if none)
commitLogMaxOffset           CommitLog end (next write position)
dispatchBehindBytes          CommitLog bytes not yet dispatched to ConsumeQueues and index
runningFlags                 the store's state bits: ``OK`` or names such as ``DISK_FULL``
                             joined by ``|`` (a Pumice addition)
earliestMessageTimeStamp     store time of the oldest message in the CommitLog (-1 if none)
pageCacheLockTimeMills       how long the current append has held the put lock (0 if none)
commitLogDiskRatio           used / total of the partition of the CommitLog directory,
                             0.0–1.0 (-1 if unknown)
consumeQueueDiskRatio        the same for the ConsumeQueue directory
bootTimestamp                when the processor was made, i.e. the broker started (ms)
msgGetTotalTodayNow          messages returned by pulls since the broker started
putTps, getTransferedTps,    rates over 10 s, 1 min and 10 min, and the store's totals: see
putMessageTimesTotal, …      ``pumice.store.store_stats_service``
===========================  ===================================================================

UPDATE_BROKER_CONFIG persists nothing: a change lasts until the broker stops, then broker.conf
rules again (upstream writes the values back to the file the broker was started with). All
keys are applied or none: they are set on copies of the configs, validated there, then copied
to the live config objects. Refused, with SYSTEM_ERROR naming the key (upstream ignores the
first and applies the second):

* an unknown key, a value that does not parse, a value ``validate()`` rejects;
* a new value for a key read once at start (``START_ONLY_FIELDS``: its identity and address,
  store paths, file and index geometry, ``flushDiskType``, ``brokerRole``, the transient store
  pool, ``messageDelayLevel``, the system-topic switches, the polling settings, the processor
  pools, the servers' limits); the value the broker already has is accepted, so a
  GET_BROKER_CONFIG body can be sent back.

Every other key takes effect: what reads its value on each use sees the change
(``namesrvAddr`` and ``registerNameServerPeriod`` at the next registration,
``flushConsumerOffsetInterval``, the store's flush, commit and clean-up settings), and the
broker hands the rest to the parts that keep a copy (``on_config_changed``):
``brokerPermission`` (the processors, and a registration at once with a new data version, as
upstream), ``autoCreateTopicEnable``, ``autoCreateSubscriptionGroup``, ``slaveReadEnable``.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import enum
import logging
import os
import pathlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import orjson

from pumice.broker.broker2client import Broker2Client
from pumice.broker.broker_config import BrokerConfig
from pumice.broker.broker_stats_manager import BrokerStatsManager
from pumice.broker.config_file import DataVersion
from pumice.broker.consumer_manager import ClientChannelInfo, ConsumerManager
from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.producer_manager import ProducerManager
from pumice.broker.subscription_group_manager import (
    GROUP_MAX_LENGTH,
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
)
from pumice.broker.topic_config_manager import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_TRACE_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TopicConfig,
    TopicConfigManager,
    check_queue_nums,
    check_topic_name,
    is_topic_or_group_illegal,
)
from pumice.config import apply_properties, conf_key, parse_properties, to_properties
from pumice.remoting.remoting_command import DEFAULT_VERSION, LanguageCode, RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.clean_commit_log_service import disk_partition_used_ratio
from pumice.store.message_store import DefaultMessageStore
from pumice.store.message_store_config import MessageStoreConfig
from pumice.store.schedule_message_service import ScheduleMessageService, decode_offset_table

log = logging.getLogger(__name__)

BROKER_VERSION_DESC = "V4_9_4"  # MQVersion.Version name of DEFAULT_VERSION (401)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
# TopicValidator.SYSTEM_TOPIC_SET's fixed part; the broker adds its cluster, broker and reply topics
SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."

# RocketMQ's enum names by ordinal (what a C++ heartbeat sends)
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)

# fields a live change would break (see the module docstring), by config class
START_ONLY_FIELDS: dict[type, frozenset[str]] = {
    BrokerConfig: frozenset(
        "broker_cluster_name broker_name broker_id listen_port listen_host broker_ip1 broker_ip2 "
        "fast_listen_port_enable default_topic_queue_nums long_polling_enable short_polling_time_mills "
        "cluster_topic_enable broker_topic_enable trace_topic_enable msg_trace_topic_name "
        "send_thread_pool_queue_capacity pull_message_thread_pool_nums pull_thread_pool_queue_capacity "
        "query_message_thread_pool_nums query_thread_pool_queue_capacity admin_broker_thread_pool_nums "
        "client_manage_thread_pool_nums client_manager_thread_pool_queue_capacity consumer_manage_thread_pool_nums "
        "consumer_manager_thread_pool_queue_capacity server_channel_max_idle_time_seconds "
        "server_max_frame_length".split()
    ),
    MessageStoreConfig: frozenset(
        "store_path_root_dir store_path_commit_log mapped_file_size_commit_log mapped_file_size_consume_queue "
        "max_hash_slot_num max_index_num flush_disk_type broker_role transient_store_pool_enable "
        "transient_store_pool_size message_delay_level".split()
    ),
}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def message_queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    """A MessageQueue as fastjson writes it when it is a map key: its compact JSON, fields sorted."""
    return orjson.dumps({"brokerName": broker_name, "queueId": queue_id, "topic": topic}).decode()


def is_system_topic(topic: str, broker_topics: set[str] | frozenset[str] = frozenset()) -> bool:
    """TopicValidator.isSystemTopic: the fixed set, the ``rmq_sys_`` prefix, or one of the topics the
    broker made at start (its cluster, broker name and reply topics; ``broker_topics``)."""
    return topic in SYSTEM_TOPICS or topic in broker_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)


def _enum_name(value: Any, names: tuple[str, ...]) -> Any:
    """An enum ordinal (int or digit string) as its name; anything else as it is."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and 0 <= value < len(names):
        return names[value]
    return value


def _language_name(value: Any) -> str:
    if isinstance(value, LanguageCode):
        return value.name
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return LanguageCode(value).name
        except ValueError:
            return LanguageCode.OTHER.name
    return str(value) if value else LanguageCode.OTHER.name


def _connection_json(c: ClientChannelInfo) -> dict[str, Any]:
    """One Connection of a ConsumerConnection or ProducerConnection body."""
    return {
        "clientAddr": c.channel.remote_addr,
        "clientId": c.client_id,
        "language": _language_name(getattr(c, "language", None)),
        "version": int(getattr(c, "version", 0) or 0),
    }


class AdminBrokerProcessor:
    def __init__(
        self,
        store: DefaultMessageStore,
        topics: TopicConfigManager,
        subscription_groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        consumers: ConsumerManager,
        broker_config: BrokerConfig,
        store_config: MessageStoreConfig,
        trigger_register: Callable[[], None],
        on_config_changed: Callable[[set[str]], None] | None = None,
    ) -> None:
        self.store = store
        self.topics = topics
        self.subscription_groups = subscription_groups
        self.offsets = offsets
        self.consumers = consumers
        self.broker_config = broker_config
        self.store_config = store_config
        self.trigger_register = trigger_register
        self.on_config_changed = on_config_changed  # the broker applies live changes (e.g. brokerPermission)
        self.config_version = DataVersion()  # upstream's Configuration dataVersion: bumped by UPDATE_BROKER_CONFIG
        self.boot_timestamp = _now_ms()
        self.stats = BrokerStatsManager(broker_config.broker_cluster_name)  # the controller hands in the broker's own
        self._put_baseline = self._consume_queue_entries()
        self.schedule_message_service: ScheduleMessageService | None = None  # a master's, set by the broker
        self.producers = ProducerManager()  # the broker hands in its own
        self.broker2client = Broker2Client(store, topics, offsets, consumers, broker_config.broker_name)

    # request code → handler method
    HANDLERS: ClassVar[dict[int, str]] = {
        RequestCode.UPDATE_AND_CREATE_TOPIC: "update_and_create_topic",
        RequestCode.DELETE_TOPIC_IN_BROKER: "delete_topic",
        RequestCode.GET_ALL_TOPIC_CONFIG: "get_all_topic_config",
        RequestCode.GET_TOPIC_STATS_INFO: "get_topic_stats_info",
        RequestCode.GET_CONSUMER_CONNECTION_LIST: "get_consumer_connection_list",
        RequestCode.GET_PRODUCER_CONNECTION_LIST: "get_producer_connection_list",
        RequestCode.GET_CONSUME_STATS: "get_consume_stats",
        RequestCode.GET_BROKER_RUNTIME_INFO: "get_broker_runtime_info",
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: "update_and_create_subscription_group",
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: "get_all_subscription_group",
        RequestCode.DELETE_SUBSCRIPTIONGROUP: "delete_subscription_group",
        RequestCode.GET_ALL_CONSUMER_OFFSET: "get_all_consumer_offset",
        RequestCode.GET_ALL_DELAY_OFFSET: "get_all_delay_offset",
        RequestCode.TRIGGER_DELETE_FILES: "delete_expired_commit_log",
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: "reset_offset",
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: "get_consumer_status",
        RequestCode.GET_CONSUMER_RUNNING_INFO: "get_consumer_running_info",
        RequestCode.CONSUME_MESSAGE_DIRECTLY: "consume_message_directly",
        RequestCode.DELETE_EXPIRED_COMMITLOG: "delete_expired_commit_log",
        RequestCode.GET_BROKER_CONFIG: "get_broker_config",
        RequestCode.UPDATE_BROKER_CONFIG: "update_broker_config",
    }
    CODES: ClassVar[tuple[int, ...]] = tuple(HANDLERS)

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        name = self.HANDLERS.get(request.code)
        if name is None:
            return request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        handler: Callable[[Channel, RemotingCommand], Awaitable[RemotingCommand]] = getattr(self, name)
        return await handler(channel, request)

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _error(request: RemotingCommand, remark: str) -> RemotingCommand:
        return request.make_response(ResponseCode.SYSTEM_ERROR, remark)

    def _slave_refusal(self, request: RemotingCommand) -> RemotingCommand | None:
        return None if self.store.is_master() else self._error(request, SLAVE_REMARK)

    def _topic_refusal(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        """SYSTEM_ERROR for an invalid name or a system topic (TopicValidator), else None."""
        remark = check_topic_name(topic, for_send=False)
        if remark is not None:
            return self._error(request, remark)
        if is_system_topic(topic, self.topics.system_topics):
            return self._error(request, f"The topic[{topic}] is conflict with system topic.")
        return None

    def _consume_queue_entries(self) -> int:
        """ConsumeQueue entries ever dispatched (max offsets summed), SCHEDULE_TOPIC_XXXX left out."""
        total = 0
        for topic, queues in list(self.store.consume_queue_table.items()):
            if topic == RMQ_SYS_SCHEDULE_TOPIC:
                continue
            total += sum(max(cq.get_max_offset_in_queue(), 0) for cq in list(queues.values()))
        return total

    # -- topics ---------------------------------------------------------------------------------

    async def update_and_create_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        refusal = self._slave_refusal(request)
        if refusal is not None:
            return refusal
        topic = request.ext_str("topic", required=True) or ""
        refusal = self._topic_refusal(request, topic)
        if refusal is not None:
            return refusal
        read_queue_nums = request.ext_int("readQueueNums", required=True) or 0
        write_queue_nums = request.ext_int("writeQueueNums", required=True) or 0
        perm = request.ext_int("perm", required=True) or 0
        filter_type = request.ext_str("topicFilterType", required=True) or ""
        if filter_type not in TOPIC_FILTER_TYPES:
            return self._error(request, f"topicFilterType {filter_type!r} is not SINGLE_TAG or MULTI_TAG")
        bad_nums = check_queue_nums(read_queue_nums, write_queue_nums)
        if bad_nums is not None:
            return self._error(request, bad_nums)
        if not 0 <= perm <= 15:  # a perm the name server hands every client: refuse nonsense here
            return self._error(request, f"perm {perm} is not 0 to 15 (2 write, 4 read, 1 inherit)")
        topic_sys_flag = request.ext_int("topicSysFlag", 0) or 0
        if topic_sys_flag < 0:
            return self._error(request, f"topicSysFlag {topic_sys_flag} is negative")
        order = request.ext_bool("order", False)
        tc = TopicConfig(topic, read_queue_nums, write_queue_nums, perm, filter_type, topic_sys_flag, order)
        log.info("updateAndCreateTopic called by %s: %s", channel.remote_addr, tc)
        await asyncio.to_thread(self.topics.update_topic_config, tc)
        self.trigger_register()
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        refusal = self._slave_refusal(request)
        if refusal is not None:
            return refusal
        topic = request.ext_str("topic", required=True) or ""
        refusal = self._topic_refusal(request, topic)
        if refusal is not None:
            return refusal
        log.info("deleteTopic %s called by %s", topic, channel.remote_addr)
        await asyncio.to_thread(self.topics.delete_topic_config, topic)
        self.offsets.clean_offset_by_topic(topic)
        self.trigger_register()
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_topic_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.SUCCESS, body=orjson.dumps(self.topics.topic_config_serialize_wrapper())
        )

    async def get_topic_stats_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_str("topic", required=True) or ""
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        table: dict[str, dict[str, int]] = {}
        for queue_id in range(tc.write_queue_nums):
            min_offset = max(self.store.get_min_offset_in_queue(topic, queue_id), 0)
            max_offset = max(self.store.get_max_offset_in_queue(topic, queue_id), 0)
            last = self.store.get_message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            table[message_queue_key(topic, self.broker_config.broker_name, queue_id)] = {
                "lastUpdateTimestamp": last, "maxOffset": max_offset, "minOffset": min_offset,
            }  # fmt: skip
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"offsetTable": table}))

    # -- consumers ------------------------------------------------------------------------------

    async def get_consumer_connection_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_str("consumerGroup", required=True) or ""
        info = self.consumers.consumer_table.get(group)
        if info is None or not info.channels:
            return request.make_response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        connections = [_connection_json(c) for _, c in sorted(info.channels.items())]
        body = {
            "connectionSet": connections,
            "consumeFromWhere": _enum_name(info.consume_from_where, CONSUME_FROM_WHERE),
            "consumeType": _enum_name(info.consume_type, CONSUME_TYPES),
            "messageModel": _enum_name(info.message_model, MESSAGE_MODELS),
            "subscriptionTable": dict(info.subscriptions),
        }
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    async def get_producer_connection_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_str("producerGroup", required=True) or ""
        members = self.producers.connections(group)
        if members is None:
            return self._error(request, f"the producer group[{group}] not exist")
        connections = [_connection_json(c) for c in members]
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"connectionSet": connections}))

    async def get_consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_str("consumerGroup", required=True) or ""
        topic = (request.ext_str("topic") or "").strip()
        topics = [topic] if topic else sorted(self.offsets.which_topic_by_consumer(group))
        info = self.consumers.consumer_table.get(group)
        table: dict[str, dict[str, int]] = {}
        for t in topics:
            tc = self.topics.select_topic_config(t)
            if tc is None:
                log.warning("consumeStats, topic config not exist, %s", t)
                continue
            if info is not None and info.subscriptions and t not in info.subscriptions:
                log.warning("consumeStats, the consumer group[%s], topic[%s] not exist", group, t)
                continue
            for queue_id in range(tc.read_queue_nums):
                broker_offset = max(self.store.get_max_offset_in_queue(t, queue_id), 0)
                consumer_offset = max(self.offsets.query_offset(group, t, queue_id), 0)
                last = 0
                if consumer_offset > 0:
                    last = max(self.store.get_message_store_timestamp(t, queue_id, consumer_offset - 1), 0)
                table[message_queue_key(t, self.broker_config.broker_name, queue_id)] = {
                    "brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": last,
                }  # fmt: skip
        tps = sum((self.stats.tps_group_get_nums(group, t) for t in topics), 0.0)
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"consumeTps": tps, "offsetTable": table}))

    # -- the broker's calls to clients (broker2client) ----------------------------------------

    async def reset_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return self.broker2client.reset_offset(request)

    async def get_consumer_status(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return await self.broker2client.get_consume_status(request)

    async def get_consumer_running_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return await self.broker2client.get_consumer_running_info(request)

    async def consume_message_directly(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return await self.broker2client.consume_message_directly(request)

    # -- runtime --------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        store = self.store
        begin = store.commit_log.begin_time_in_lock
        puts = max(self._consume_queue_entries() - self._put_baseline, 0)
        info: dict[str, Any] = {
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerVersion": DEFAULT_VERSION,
            "msgPutTotalTodayNow": puts,
            "commitLogMinOffset": store.get_min_phy_offset(),
            "commitLogMaxOffset": store.get_max_phy_offset(),
            "dispatchBehindBytes": store.dispatch_behind_bytes(),
            "runningFlags": store.running_flags.describe(),
            "earliestMessageTimeStamp": store.get_earliest_message_time(),
            "pageCacheLockTimeMills": _now_ms() - begin if begin else 0,
            "commitLogDiskRatio": disk_partition_used_ratio(self.store_config.commit_log_dir),
            "consumeQueueDiskRatio": disk_partition_used_ratio(self.store_config.consume_queue_dir),
            "bootTimestamp": self.boot_timestamp,
            "msgGetTotalTodayNow": self.stats.broker_get_nums(),
            **store.store_stats_service.runtime_info(),
        }
        return {k: str(v) for k, v in info.items()}

    async def get_broker_runtime_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        table = await asyncio.to_thread(self.runtime_info)
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"table": table}))

    async def delete_expired_commit_log(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        log.warning("executeDeleteFilesManually called by %s", channel.remote_addr)
        self.store.execute_delete_files_manually()
        return request.make_response(ResponseCode.SUCCESS)

    # -- subscription groups and offsets --------------------------------------------------------

    async def update_and_create_subscription_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        refusal = self._slave_refusal(request)
        if refusal is not None:
            return refusal
        try:
            data = orjson.loads(request.body) if len(request.body) else None
            if not isinstance(data, dict):
                raise ValueError("the body is not a JSON object")
            config = SubscriptionGroupConfig.from_json(data)
        except (ValueError, TypeError) as e:  # orjson.JSONDecodeError is a ValueError
            return self._error(request, f"bad SubscriptionGroupConfig body: {e}")
        name = config.group_name
        if not name.strip() or len(name) > GROUP_MAX_LENGTH or is_topic_or_group_illegal(name):
            return self._error(request, f"the group name {name!r} is illegal, allowing only ^[%|a-zA-Z0-9_-]+$ "
                                        f"and at most {GROUP_MAX_LENGTH} characters")  # fmt: skip
        log.info("updateAndCreateSubscriptionGroup called by %s: %s", channel.remote_addr, config)
        await asyncio.to_thread(self.subscription_groups.update_subscription_group_config, config)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_subscription_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self.subscription_groups.snapshot())

    async def delete_subscription_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        refusal = self._slave_refusal(request)
        if refusal is not None:
            return refusal
        group = request.ext_str("groupName", required=True) or ""
        log.info("deleteSubscriptionGroup %s called by %s", group, channel.remote_addr)
        await asyncio.to_thread(self.subscription_groups.delete_subscription_group_config, group)
        if request.ext_bool("removeOffset", False):
            self.offsets.remove_offset(group)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_consumer_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self.offsets.snapshot())

    async def get_all_delay_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """A master's table in memory (its file lags up to 10 s); a slave's copy from its file."""
        if self.schedule_message_service is not None:
            return request.make_response(ResponseCode.SUCCESS, body=self.schedule_message_service.encode())
        path = os.path.join(self.store_config.config_dir, "delayOffset.json")
        try:
            body = await asyncio.to_thread(pathlib.Path(path).read_bytes)
            decode_offset_table(body)
        except FileNotFoundError:
            return self._error(request, "No delay offset in this broker")
        except ValueError as e:
            return self._error(request, f"{path} cannot be read: {e}")
        return request.make_response(ResponseCode.SUCCESS, body=body)

    # -- broker config --------------------------------------------------------------------------

    def _version_json(self) -> str:
        return orjson.dumps(
            {"counter": self.config_version.counter, "timestamp": self.config_version.timestamp}
        ).decode()

    async def get_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        body = to_properties(self.broker_config, self.store_config).encode()
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"version": self._version_json()}, body=body)

    async def update_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """All keys or none: applied to copies and validated there first."""
        source = "UPDATE_BROKER_CONFIG"
        try:
            props = parse_properties(bytes(request.body).decode("utf-8"), source)
            if not props:
                return request.make_response(ResponseCode.SUCCESS)
            broker, store = copy.copy(self.broker_config), copy.copy(self.store_config)
            apply_properties([broker, store], props, source)
            broker.validate()
            store.validate()
        except UnicodeDecodeError as e:
            return self._error(request, f"{source}: the body is not UTF-8: {e}")
        except ValueError as e:  # ConfigError names the key; validate() names it too
            return self._error(request, str(e))
        changes: list[tuple[Any, str, Any]] = []
        for live, new in ((self.broker_config, broker), (self.store_config, store)):
            for f in dataclasses.fields(live):
                value = getattr(new, f.name)
                if getattr(live, f.name) != value:
                    if f.name in START_ONLY_FIELDS.get(type(live), frozenset()):
                        return self._error(request, f"{source}: {conf_key(live, f.name)} is read at start "
                                                    "only and cannot change while the broker runs")  # fmt: skip
                    changes.append((live, f.name, value))
        for live, name, value in changes:
            setattr(live, name, value)
        if self.on_config_changed is not None:
            self.on_config_changed({name for _, name, _ in changes})
        self.config_version.next_version()
        changed = [f"{n}={v.name if isinstance(v, enum.Enum) else v}" for _, n, v in changes]
        log.info("updateBrokerConfig called by %s: %s (not persisted)", channel.remote_addr, ", ".join(changed))
        return request.make_response(ResponseCode.SUCCESS)
