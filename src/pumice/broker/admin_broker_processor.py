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
                                           ``order`` (false),              queue number, a slave broker, or
                                           ``defaultTopic`` (unused, as    topics.json not saved (the change holds,
                                           upstream), ``attributes`` (5.x, saved again until it lands; the same for
                                           ``+message.type=FIFO,-x``)      DELETE_TOPIC_IN_BROKER), or attributes
                                                                           5.3.3 refuses (its remark,
                                                                           topic_attributes.py; the topic unchanged).
                                                                           INVALID_PARAMETER ``MIXED message type is
                                                                           not supported.`` without
                                                                           ``enableMixedMessageType``
DELETE_TOPIC_IN_BROKER (215)               ``topic*``                      drops the TopicConfig and every group's
                                                                           offsets for it, registers at once, then
                                                                           destroys the ConsumeQueues of every topic
                                                                           with no TopicConfig (CLEAN_UNUSED_TOPIC,
                                                                           as 4.9.8: a topic created again starts at
                                                                           offset 0); SUCCESS also for an unknown
                                                                           topic; the same SYSTEM_ERRORs as above
GET_TOPIC_CONFIG (351, 5.x)                ``topic*``                      TopicConfigAndQueueMapping: the TopicConfig
                                                                           JSON with ``attributes`` (``{}`` when none);
                                                                           TOPIC_NOT_EXIST ``No topic in this broker.
                                                                           topic: X``
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
GET_ALL_PRODUCER_INFO (328)                --                              ProducerTableInfo ``{"data": {group:
                                                                           [{"clientId", "remoteIP" (``/ip:port``),
                                                                           "language", "version",
                                                                           "lastUpdateTimestamp"}]}}``
GET_CONSUME_STATS (208)                    ``consumerGroup*``, ``topic``   ConsumeStats: ``{"consumeTps": 0.0,
                                           (default: every topic the       "offsetTable": {MQ: {"brokerOffset",
                                           group has offsets for)          "consumerOffset", "lastTimestamp"}}}``, one
                                                                           entry per read queue
GET_BROKER_RUNTIME_INFO (28)               --                              KVTable ``{"table": {key: "value"}}``, keys
                                                                           below
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200)  body: SubscriptionGroupConfig   creates or replaces the group
                                           JSON                            (subscriptionGroup.json); SYSTEM_ERROR: a
                                                                           body that is not one, an illegal group name,
                                                                           a slave broker, the file not saved (the
                                                                           change holds, saved again until it lands;
                                                                           the same for DELETE_SUBSCRIPTIONGROUP)
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
GET_TIMER_CHECK_POINT (60, RocketMQ 5)     --                              timercheck's 56 bytes (TimerCheckpoint);
                                                                           SYSTEM_ERROR ``The checkpoint is null``
                                                                           with ``timerWheelEnable=false``
GET_TIMER_METRICS (61, RocketMQ 5)         --                              timermetrics' JSON; SYSTEM_ERROR ``The
                                                                           timer message store is null`` without it
TRIGGER_DELETE_FILES (27),                 --                              the next 20 clean-up runs delete expired
DELETE_EXPIRED_COMMITLOG (329)                                             CommitLog files whatever ``deleteWhen`` says.
                                                                           4.9 defines 27 but no 4.9 broker handles it;
                                                                           4.9.4's mqadmin deleteExpiredCommitLog sends
                                                                           329
GET_BROKER_CONFIG (26)                     --                              body: Java properties text, ``key=value``
                                                                           lines, the broker's then the store's config
                                                                           with RocketMQ key names (unset keys left
                                                                           out), then the Java keys Pumice takes with
                                                                           one value only (``filterServerNums=0``,
                                                                           ``useTLS=false``, …);
                                                                           extField ``version``: the config's
                                                                           DataVersion JSON
                                                                           ``{"counter":n,"timestamp":ms}``
UPDATE_BROKER_CONFIG (25)                  body: properties text           applied to the live configs, ``version``
                                                                           bumped; NO_PERMISSION naming a black-listed
                                                                           key (any spelling, config_black_list.py),
                                                                           SYSTEM_ERROR naming the key for an unknown
                                                                           key or a bad value, and then nothing is
                                                                           applied
QUERY_TOPIC_CONSUME_BY_WHO (300)           ``topic*``                      GroupList ``{"groupList": [group]}``: the
                                                                           online groups subscribing to it and the
                                                                           groups with offsets for it (sorted); the
                                                                           topic need not exist
QUERY_CONSUME_TIME_SPAN (303)              ``topic*``, ``group*``          ``{"consumeTimeSpanSet": [QueueTimeSpan]}``,
                                                                           one per write queue, see below;
                                                                           TOPIC_NOT_EXIST ``topic[X] not exist``
GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305)    --                              TopicList ``{"topicList": [topic]}``:
                                                                           TopicValidator's system topics and those the
                                                                           broker made at start (sorted)
CLEAN_EXPIRED_CONSUMEQUEUE (306)           --                              destroys every ConsumeQueue (but
                                                                           SCHEDULE_TOPIC_XXXX's) whose last entry ends
                                                                           below the CommitLog's first offset (the
                                                                           store's ``clean_expired_consume_queue``)
CLEAN_UNUSED_TOPIC (316)                   --                              destroys the ConsumeQueues of topics with no
                                                                           TopicConfig (SCHEDULE_TOPIC_XXXX and
                                                                           RMQ_SYS_TRANS_OP_HALF_TOPIC kept;
                                                                           ``clean_unused_topic``)
QUERY_CORRECTION_OFFSET (308)              ``topic*``, ``compareGroup*``,  ``{"correctionOffsets": {"queueId":
                                           ``filterGroups`` (comma-        offset}}``: per queue, the smallest offset
                                           separated)                      any group but ``filterGroups`` has committed
                                                                           for the topic, counting offsets at or above
                                                                           the queue's min only; see below
CLONE_GROUP_OFFSET (314)                   ``srcGroup*``, ``destGroup*``,  ``destGroup``'s offsets for each topic become
                                           ``topic`` (default: every       a copy of ``srcGroup``'s; topics with no
                                           topic ``srcGroup`` has offsets  TopicConfig are skipped, and, unless
                                           for), ``offline`` (false)       ``offline``, topics an online ``srcGroup``
                                                                           does not subscribe to; SUCCESS whatever was
                                                                           copied
VIEW_BROKER_STATS_DATA (315)               ``statsName*``, ``statsKey*``   BrokerStatsData ``{"statsDay", "statsHour",
                                                                           "statsMinute"}``, each ``{"avgpt", "sum",
                                                                           "tps"}`` (``broker_stats_manager``);
                                                                           SYSTEM_ERROR ``The stats <N> <K> not exist``
GET_BROKER_CONSUME_STATS (317)             ``isOrder*``                    ConsumeStatsList ``{"brokerAddr",
                                                                           "consumeStatsList": [{group:
                                                                           [ConsumeStats]}], "totalDiff"}``: every
                                                                           subscription group (sorted), one
                                                                           ConsumeStats per topic it has offsets for
                                                                           (write queues; ``isOrder=true``: order
                                                                           topics only); ``totalDiff`` sums brokerOffset
                                                                           - consumerOffset over all of them
QUERY_CONSUME_QUEUE (321)                  ``topic*``, ``queueId`` (0),    QueryConsumeQueueResponseBody
                                           ``index`` (0), ``count`` (0),   ``{"filterData", "maxQueueIndex",
                                           ``consumerGroup``               "minQueueIndex", "queueData":
                                                                           [{"eval": false, "physicOffset",
                                                                           "physicSize", "tagsCode"}],
                                                                           "subscriptionData"}``: up to ``count``
                                                                           entries from ``index`` to the end of its
                                                                           file; SYSTEM_ERROR ``Q@T is not exist!`` for
                                                                           a queue the store has not opened; SUCCESS
                                                                           without a body, remark ``Index I of Q@T is
                                                                           not exist!``, for an index outside it
=========================================  ==============================  =============================================

The ACL codes edit the ACL files (``pumice.acl.plain_permission_manager``; any signed account may
send them, as in 4.9): UPDATE_AND_CREATE_ACL_CONFIG (50: accessKey, secretKey,
whiteRemoteAddress, admin, defaultTopicPerm, defaultGroupPerm, topicPerms and groupPerms as
comma lists; 209 with the reason), DELETE_ACL_CONFIG (51: accessKey; 210), GET_BROKER_CLUSTER_ACL_INFO
(52: extFields version, allAclFileVersion, brokerName, brokerAddr, clusterName) and
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53: globalWhiteAddrs, aclFileFullPath; 211). With ACL off they
answer their failure code (52: SYSTEM_ERROR) saying so.

CHECK_CLIENT_CONFIG (46) is ClientManageProcessor's, as upstream. Codes 4.9.8's RequestCode
defines and no 4.9 broker handles answer REQUEST_CODE_NOT_SUPPORTED `` request type N not
supported`` there as here (the broker's default processor is this one, whose switch has no case
for them): SUSPEND_CONSUMER (209), RESUME_CONSUMER (210), RESET_CONSUMER_OFFSET_IN_CONSUMER (211),
RESET_CONSUMER_OFFSET_IN_BROKER (212), ADJUST_CONSUMER_THREAD_POOL (213) and
WHO_CONSUME_THE_MESSAGE (214).

QueueTimeSpan (QUERY_CONSUME_TIME_SPAN), fields sorted as fastjson writes them:
``consumeTimeStamp``, ``consumeTimeStampStr``, ``delayTime``, ``maxTimeStamp``,
``maxTimeStampStr``, ``messageQueue`` ``{"brokerName", "queueId", "topic"}``, ``minTimeStamp``,
``minTimeStampStr``. ``minTimeStamp`` is the store time of the queue's first message,
``maxTimeStamp`` of its last (-1 for none); ``consumeTimeStamp`` of the last message the group
consumed (its offset - 1), or ``minTimeStamp`` when it has no offset above 0; ``delayTime`` is
now minus the store time of the next message to consume when the group is behind, else 0; with
no committed offset, or with the next message gone, that store time is -1 and ``delayTime`` is
now + 1, as upstream. The ``*Str`` fields are the times in local time,
``yyyy-MM-dd#HH:mm:ss:SSS`` (``1970-01-01#…`` for -1, as upstream).

QUERY_CORRECTION_OFFSET: ``filterGroups`` are left out of the minimum. RocketMQ 4.9 also removes
those groups' committed offsets, for every topic, from its table while it computes it (they are
lost unless the consumers commit again); Pumice changes nothing. Upstream then meant to give
Long.MAX_VALUE to queues where the minimum passes ``compareGroup``'s own offset, but it reads the
compare offsets under ``compareGroup@topic`` (arguments swapped), which names no group; Pumice
reads the same, so the answer is upstream's: the minimum. Offsets are written with quoted keys
(``{"0": 5}``); fastjson writes ``{0:5}``, and reads both.

CLONE_GROUP_OFFSET with no ``topic``: upstream loops over ``srcGroup``'s topics but clones with
the request's (absent) topic each time, so nothing is copied; here each of those topics is
copied (mqadmin cloneGroupOffset always sends ``-t``).

CLEAN_EXPIRED_CONSUMEQUEUE and CLEAN_UNUSED_TOPIC answer SUCCESS once done. A destroyed queue's
files and directory go, and its next offset (the next message to it starts at 0, as upstream;
its consumers' offsets then lie past the end and the broker moves them back to 0). Unlike
upstream, each queue goes under the put and dispatch locks, and a queue with puts still waiting
for dispatch is kept.

QUERY_CONSUME_QUEUE: ``filterData`` and ``subscriptionData`` are there only with
``consumerGroup``: the group's subscription to the topic from its heartbeats, and its SQL92
filter in the ConsumerFilterManager as fastjson's pretty JSON (``"null"`` for a TAG
subscription, which has none), or, when the group is not online with one,
``"G@T is not online!"`` and no ``subscriptionData``. An entry whose tagsCode is a
ConsumeQueueExt address carries the unit as ``extendDataJson`` (fastjson's JSON of a CqExtUnit,
the map in base64) and its map as ``bitMap`` (BitsArray.toString), or ``msg`` when the unit is
gone; ``eval`` is whether the group's filter passes the entry by its unit (false otherwise).

RESUME_CHECK_HALF_MESSAGE (323, ``msgId*`` an offset msgId): the half message there (in the
half queue, or discarded into TRANS_CHECK_MAX_TIME_TOPIC) is stored again in the half queue
with TRANSACTION_CHECK_TIMES 0, so the check asks its producer again; another message, a bad
msgId or a slave is SYSTEM_ERROR saying so.

MQ, the key of a TopicStatsTable or ConsumeStats entry, is a MessageQueue written as fastjson
writes a map keyed by objects: the MessageQueue's own compact JSON, fields sorted, bare
(``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``), the entries in a Java HashMap's
order (``common.message_queue_map``), so the body is 4.9's byte for byte. Stats:
``minOffset``/``maxOffset``/``brokerOffset`` are ConsumeQueue offsets (never below 0);
``lastUpdateTimestamp`` is the store time of the queue's last message (0 for an empty queue);
``consumerOffset`` is the committed offset (0 if none) and ``lastTimestamp``
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
brokerVersionDesc            ``V4_9_8``, the version Pumice speaks
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
msgPutTotalTodayMorning,     msgPutTotalTodayNow as it stood at the last local midnight, and at
msgPutTotalYesterdayMorning  the one before (0 until the broker has passed one; BrokerStats in
msgGetTotal…Morning          ``broker_stats_manager``); the same for msgGetTotalTodayNow
putTps, getTransferedTps,    rates over 10 s, 1 min and 10 min, and the store's totals: see
putMessageTimesTotal, …      ``pumice.store.store_stats_service``
runtime                      time since bootTimestamp, ``[ 0 days, 1 hours, 2 minutes, 3
                             seconds ]``
commitLogDiskRatio_<dir>     commitLogDiskRatio, under the CommitLog directory's name
scheduleMessageOffset_<n>    ``delivered,max``: delay level n's next offset to deliver and its
                             queue's max offset (a master: every level with an offset)
sendThreadPoolQueueSize,     requests of the send, pull and query pools waiting for a worker
pull…, query…                (the broker's; the send pool runs every request it holds, so 0)
sendThreadPoolQueueCapacity  their queue capacities (``*ThreadPoolQueueCapacity``)
pull…, query…
sendThreadPoolQueueHead…     ``0`` while nothing waits in the pool (upstream's figure for an
pull…, query…                empty queue); left out while requests wait (how long the first
                             has waited is not recorded)
startAcceptSendRequest…      ``0``, the only value Pumice accepts
remainTransientStoreBuffer…  free transient store pool buffers (2147483647 without the pool, as
                             upstream)
remainHowManyDataToCommit    with the pool: bytes written and not committed, as
                             ``1.5 MiB`` (MixAll.humanReadableByteCount)
remainHowManyDataToFlush     CommitLog bytes not yet flushed, the same way
commitLogDirCapacity         ``Total : 40.0 GiB, Free : 12.3 GiB.`` of the store root's partition
haConnectionCount            connections to the HA port (Pumice's keys, ``pumice.store.ha_service``)
haInSyncSlaveCount           of them, slaves whose reports count (SYNC_MASTER waits for them)
haDivergedSlaves             slaves found ahead of this master, ``;`` between them:
                             ``<addr> slaveOffset=<its report> masterOffset=<the master's end>``
                             (empty when none)
haDivergedFromMaster         a slave: why it does not replicate (ahead of its master, tail set
                             aside and being checked, or differing: ``pumice.store.ha_divergence``);
                             empty when it replicates
===========================  ===================================================================

Upstream keys left out, as Pumice does not know their figures: putMessageEntireTimeMax,
putMessageDistributeTime, putLatency99, putLatency999, getMessageEntireTimeMax (no put or get
latency is measured), dispatchMaxBuffer (always 0 upstream: nothing sets it),
EndTransactionQueueSize and EndTransactionThreadPoolQueueCapacity (no end-transaction pool).
A slave has no scheduleMessageOffset_* keys (it runs no delivery).

UPDATE_BROKER_CONFIG persists nothing: a change lasts until the broker stops, then broker.conf
rules again (upstream writes the values back to the file the broker was started with). All
keys are applied or none: they are set on copies of the configs, validated there, then copied
to the live config objects. A black-listed key (4.9.8's list: configBlackList, brokerConfigPath,
rocketmqHome and the configured ``configBlackList``; and every path-like key, under any spelling
the loader accepts: ``pumice.config_black_list``) is refused with NO_PERMISSION and RocketMQ's
remark ``Can not update config in black list.``, followed by the keys. Refused, with
SYSTEM_ERROR naming the key (upstream ignores the first and applies the second):

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
import base64
import copy
import dataclasses
import datetime
import enum
import logging
import os
import pathlib
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import orjson

from pumice.acl.permission import AclError
from pumice.acl.plain_permission_manager import PlainPermissionManager
from pumice.broker.broker2client import Broker2Client
from pumice.broker.broker_config import BrokerConfig
from pumice.broker.broker_stats_manager import BrokerStats, BrokerStatsManager
from pumice.broker.config_file import DataVersion
from pumice.broker.consumer_filter_manager import ConsumerFilterManager, is_tag_type
from pumice.broker.consumer_manager import ClientChannelInfo, ConsumerManager
from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.expression_message_filter import ExpressionMessageFilter
from pumice.broker.filter_api import build_subscription_data
from pumice.broker.producer_manager import ProducerManager
from pumice.broker.subscription_group_manager import GROUP_MAX_LENGTH, SubscriptionGroupManager
from pumice.broker.topic_config_manager import (
    TopicConfig,
    TopicConfigManager,
    check_queue_nums,
    check_topic_name,
    is_topic_or_group_illegal,
)
from pumice.broker.transactional_message_service import TransactionalMessageService
from pumice.common import fastjson
from pumice.common.message_decoder import decode_message_id
from pumice.common.message_queue_map import message_queue_table
from pumice.common.mix_all import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_TRACE_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SYSTEM_TOPIC_PREFIX,
)
from pumice.common.subscription_group import SubscriptionGroupConfig
from pumice.common.topic_attributes import MESSAGE_TYPE, MIXED, AttributeRefused, parse_to_map
from pumice.config import apply_properties, conf_key, parse_properties, to_properties
from pumice.remoting.mq_version import version_desc
from pumice.remoting.remoting_command import DEFAULT_VERSION, LanguageCode, RemotingCommand
from pumice.remoting.remoting_server import Channel, ProcessorPool
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from pumice.store.consume_queue_ext import CqExtUnit, is_ext_addr
from pumice.store.message_store_api import MessageStore
from pumice.store.message_store_config import MessageStoreConfig
from pumice.store.schedule_message_service import ScheduleMessageService, decode_offset_table
from pumice.store.timer.timer_message_store import TimerMessageStore

log = logging.getLogger(__name__)

BROKER_VERSION_DESC = version_desc(DEFAULT_VERSION)
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
LONG_MAX = 0x7FFF_FFFF_FFFF_FFFF
INT_MAX = 0x7FFF_FFFF
# the ACL codes (mqadmin updateAclConfig, deleteAclConfig, clusterAclConfigVersion, updateGlobalWhiteAddr)
UPDATE_AND_CREATE_ACL_CONFIG = RequestCode.UPDATE_AND_CREATE_ACL_CONFIG
DELETE_ACL_CONFIG = RequestCode.DELETE_ACL_CONFIG
GET_BROKER_CLUSTER_ACL_INFO = RequestCode.GET_BROKER_CLUSTER_ACL_INFO
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
ACL_CODES = (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO,
             UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)  # fmt: skip
# what the ACL codes answer when ACL is off (4.9: the same codes, with a NullPointerException's
# message; 52 is not answered at all), before their fields are read
ACL_OFF_CODES: dict[int, int] = {
    UPDATE_AND_CREATE_ACL_CONFIG: ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    DELETE_ACL_CONFIG: ResponseCode.DELETE_ACL_CONFIG_FAILED,
    GET_BROKER_CLUSTER_ACL_INFO: ResponseCode.SYSTEM_ERROR,
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
}
ACL_OFF_REMARK = "ACL is off on this broker: set aclEnable=true (and ROCKETMQ_HOME or rocketmqHome) first"
_CQ_ENTRY = struct.Struct(">qiq")  # a ConsumeQueue entry: CommitLog offset, size, tags code
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
        "server_max_frame_length server_max_partial_frame_bytes acl_enable rocketmq_home namesrv_access_key "
        "use_tls tls_mode tls_server_cert_path "
        "tls_server_key_path tls_server_trust_cert_path tls_server_need_client_auth".split()
    ),
    MessageStoreConfig: frozenset(
        "store_path_root_dir store_path_commit_log mapped_file_size_commit_log mapped_file_size_consume_queue "
        "max_hash_slot_num max_index_num flush_disk_type broker_role transient_store_pool_enable "
        "transient_store_pool_size message_delay_level ha_access_key ha_white_remote_addresses "
        "ha_allow_unauthenticated ha_slave_set_aside_diverged_tail "
        # DLedger's node is built at start from these (DLedgerReplicatedLog)
        "enable_d_leger_commit_log d_leger_group d_leger_peers d_leger_self_id store_path_d_ledger_commit_log "
        "preferred_leader_id enable_batch_push d_ledger_heart_beat_time_interval_ms d_ledger_max_heart_beat_leak "
        "d_ledger_min_vote_interval_ms d_ledger_max_vote_interval_ms d_ledger_max_wait_ack_time_ms "
        "d_ledger_max_push_time_out_ms d_ledger_min_take_leadership_vote_interval_ms "
        "d_ledger_max_take_leadership_vote_interval_ms".split()
    ),
}


def _fixed_properties() -> str:
    """GET_BROKER_CONFIG's lines for the Java config fields Pumice accepts with one value only
    (``IGNORED_KEYS`` entries such as ``filterServerNums=0``, ``useTLS=false``): a Java broker
    always lists them, and tools read them (mqadmin exportConfigs copies filterServerNums and useTLS
    and fails on a missing one)."""
    lines: dict[str, str] = {}
    for cls in (BrokerConfig, MessageStoreConfig):
        for key, (accepted, _) in cls.IGNORED_KEYS.items():
            if accepted is not None and len(accepted) == 1:
                lines.setdefault(key, next(iter(accepted)))
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def format_date(ms: int) -> str:
    """UtilAll.formatDate(new Date(ms), "yyyy-MM-dd#HH:mm:ss:SSS"), local time (QueueTimeSpan's *Str)."""
    seconds, millis = divmod(ms, 1000)
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d#%H:%M:%S:") + f"{millis:03d}"


def format_runtime(ms: int) -> str:
    """StoreStatsService.getFormatRuntime: ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"[ {days:,} days, {hours} hours, {minutes} minutes, {rest // 1000} seconds ]"


def is_system_topic(topic: str, broker_topics: set[str] | frozenset[str] = frozenset()) -> bool:
    """TopicValidator.isSystemTopic: the fixed set, the ``rmq_sys_`` prefix, or one of the topics the
    broker made at start (its cluster, broker name and reply topics; ``broker_topics``)."""
    return topic in SYSTEM_TOPICS or topic in broker_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)


def _consume_queue_data(
    cq: ConsumeQueue, index: int, count: int, message_filter: ExpressionMessageFilter | None = None
) -> list[dict[str, Any]] | None:
    """QUERY_CONSUME_QUEUE's ConsumeQueueData: up to ``count`` entries from ``index`` to the end
    of its file; None when the queue has no entry there. An entry with a ConsumeQueueExt unit
    carries it (``extendDataJson``, ``bitMap``) and, with a group, whether the group's filter
    passes it by the unit (``eval``)."""
    sbr = cq.get_index_buffer(index)
    if sbr is None:
        return None
    try:
        n = max(0, min(sbr.size // CQ_STORE_UNIT_SIZE, count))
        entries = [_CQ_ENTRY.unpack_from(sbr.buffer, i * CQ_STORE_UNIT_SIZE) for i in range(n)]
    finally:
        sbr.release()
    out = []
    for offset, size, tags_code in entries:
        one: dict[str, Any] = {"eval": False, "physicOffset": offset, "physicSize": size, "tagsCode": tags_code}
        if is_ext_addr(tags_code):
            unit = cq.ext.get(tags_code) if cq.ext is not None else None
            if unit is None:
                one["msg"] = f"Cq extend not exist!addr: {tags_code}"
            else:
                one["extendDataJson"] = orjson.dumps(unit_json(unit)).decode()
                if unit.filter_bit_map is not None:
                    one["bitMap"] = bits_array_string(unit.filter_bit_map)
                if message_filter is not None:
                    one["eval"] = message_filter.is_matched_by_consume_queue(unit.tags_code, unit)
        out.append(dict(sorted(one.items())))
    return out


def unit_json(unit: CqExtUnit) -> dict[str, Any]:
    """A CqExtUnit as fastjson writes it: its getters, sorted; the bit map in base64, if any."""
    out: dict[str, Any] = {"msgStoreTime": unit.msg_store_time, "size": unit.size, "tagsCode": unit.tags_code}
    if unit.filter_bit_map is not None:
        out["filterBitMap"] = base64.b64encode(unit.filter_bit_map).decode()
    return dict(sorted(out.items()))


def bits_array_string(bits: bytes) -> str:
    """BitsArray.toString: each byte from the last, its bits from the highest, a line break
    after every eighth byte counted from the first."""
    return "".join(f"{b:08b}" + ("\n" if i % 8 == 0 else "") for i, b in reversed(list(enumerate(bits))))


def fastjson_pretty(value: Any, depth: int = 0) -> str:
    """fastjson's pretty JSON (``JSON.toJSONString(o, true)``): objects one field a line, indented
    by tabs; arrays and scalars compact."""
    if not isinstance(value, dict):
        return orjson.dumps(value).decode()
    if not value:
        return "{}"
    pad = "\t" * (depth + 1)
    fields = [f"{pad}{orjson.dumps(k).decode()}:{fastjson_pretty(v, depth + 1)}" for k, v in value.items()]
    return "{\n" + ",\n".join(fields) + "\n" + "\t" * depth + "}"


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
        store: MessageStore,
        topics: TopicConfigManager,
        subscription_groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        consumers: ConsumerManager,
        broker_config: BrokerConfig,
        store_config: MessageStoreConfig,
        trigger_register: Callable[[], None],
        on_config_changed: Callable[[set[str]], None] | None = None,
        *,
        stats: BrokerStatsManager | None = None,
        producers: ProducerManager | None = None,
        transactions: TransactionalMessageService | None = None,
        consumer_filters: ConsumerFilterManager | None = None,
        schedule_message_service: ScheduleMessageService | None = None,
        thread_pools: dict[str, tuple[ProcessorPool, int]] | None = None,
        acl: PlainPermissionManager | None = None,
        timer_message_store: TimerMessageStore | None = None,
    ) -> None:
        self.timer_message_store = timer_message_store  # timerWheelEnable: GET_TIMER_CHECK_POINT / _METRICS
        self.acl = acl  # the ACL files (aclEnable=true), which codes 50-53 edit
        self.store = store
        self.topics = topics
        self.subscription_groups = subscription_groups
        self.offsets = offsets
        self.consumers = consumers
        self.broker_config = broker_config
        self.store_config = store_config
        self.black_list = broker_config.black_list()  # fixed at start, as RocketMQ's
        self.trigger_register = trigger_register
        self.on_config_changed = on_config_changed  # the broker applies live changes (e.g. brokerPermission)
        self.config_version = DataVersion()  # upstream's Configuration dataVersion: bumped by UPDATE_BROKER_CONFIG
        self.boot_timestamp = _now_ms()
        self.stats = stats if stats is not None else BrokerStatsManager(broker_config.broker_cluster_name)
        self._put_baseline = self._consume_queue_entries()
        self.schedule_message_service = schedule_message_service  # a master's
        self.producers = producers if producers is not None else ProducerManager()
        self.transactions = transactions  # RESUME_CHECK_HALF_MESSAGE
        self.consumer_filters = consumer_filters  # QUERY_CONSUME_QUEUE's bit maps
        self.broker2client = Broker2Client(store, topics, offsets, consumers, broker_config.broker_name)
        # the totals at the last two midnights; the broker runs its record_at_midnights task
        self.broker_stats = BrokerStats(self._msg_put_total, lambda: self.stats.broker_get_nums())
        # the send, pull and query pools with their worker counts (the runtime info's queue sizes)
        self.thread_pools = thread_pools if thread_pools is not None else {}

    # request code → handler method
    HANDLERS: ClassVar[dict[int, str]] = {
        RequestCode.UPDATE_AND_CREATE_TOPIC: "update_and_create_topic",
        RequestCode.DELETE_TOPIC_IN_BROKER: "delete_topic",
        RequestCode.GET_ALL_TOPIC_CONFIG: "get_all_topic_config",
        RequestCode.GET_TOPIC_CONFIG: "get_topic_config",
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
        RequestCode.GET_TIMER_CHECK_POINT: "get_timer_check_point",
        RequestCode.GET_TIMER_METRICS: "get_timer_metrics",
        RequestCode.TRIGGER_DELETE_FILES: "delete_expired_commit_log",
        RequestCode.GET_ALL_PRODUCER_INFO: "get_all_producer_info",
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: "reset_offset",
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: "get_consumer_status",
        RequestCode.GET_CONSUMER_RUNNING_INFO: "get_consumer_running_info",
        RequestCode.CONSUME_MESSAGE_DIRECTLY: "consume_message_directly",
        RequestCode.DELETE_EXPIRED_COMMITLOG: "delete_expired_commit_log",
        RequestCode.GET_BROKER_CONFIG: "get_broker_config",
        RequestCode.UPDATE_BROKER_CONFIG: "update_broker_config",
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: "query_topic_consume_by_who",
        RequestCode.QUERY_CONSUME_TIME_SPAN: "query_consume_time_span",
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: "get_system_topic_list_from_broker",
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: "clean_expired_consume_queue",
        RequestCode.CLEAN_UNUSED_TOPIC: "clean_unused_topic",
        RequestCode.QUERY_CORRECTION_OFFSET: "query_correction_offset",
        RequestCode.CLONE_GROUP_OFFSET: "clone_group_offset",
        RequestCode.VIEW_BROKER_STATS_DATA: "view_broker_stats_data",
        RequestCode.GET_BROKER_CONSUME_STATS: "get_broker_consume_stats",
        RequestCode.QUERY_CONSUME_QUEUE: "query_consume_queue",
        RequestCode.RESUME_CHECK_HALF_MESSAGE: "resume_check_half_message",
        UPDATE_AND_CREATE_ACL_CONFIG: "update_and_create_acl_config",
        DELETE_ACL_CONFIG: "delete_acl_config",
        GET_BROKER_CLUSTER_ACL_INFO: "get_broker_cluster_acl_info",
        UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: "update_global_white_addrs_config",
    }
    CODES: ClassVar[tuple[int, ...]] = tuple(HANDLERS)

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        name = self.HANDLERS.get(request.code)
        if name is None:
            return request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        if self.acl is None and request.code in ACL_OFF_CODES:  # before the fields, as 4.9's handlers fail
            return request.make_response(ACL_OFF_CODES[request.code], ACL_OFF_REMARK)
        handler: Callable[[Channel, RemotingCommand], Awaitable[RemotingCommand]] = getattr(self, name)
        return await handler(channel, request)

    # -- ACL (pumice.acl): the files' accounts and white lists ----------------------------------

    async def _acl_edit(
        self, channel: Channel, request: RemotingCommand, failed: int, what: str,
        edit: Callable[[PlainPermissionManager], str | None], prefix: str = "",
    ) -> RemotingCommand:  # fmt: skip
        """An ACL file edit, off the loop: ``failed`` with ``edit``'s remark (or the AclError's),
        else SUCCESS (the broker has re-read the files)."""
        assert self.acl is not None  # process_request answers the ACL codes when ACL is off
        try:
            remark = await asyncio.to_thread(edit, self.acl)
        except AclError as e:
            remark = prefix + str(e)
        if remark is not None:
            return request.make_response(failed, remark)
        log.info("ACL %s by %s", what, channel.remote_addr)
        return request.make_response(ResponseCode.SUCCESS)

    async def update_and_create_acl_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        access_key = request.ext_str("accessKey", required=True)

        def perms(name: str) -> list[str] | None:
            text = request.ext_str(name)
            return None if text is None else [p for p in text.split(",") if p]

        account = {
            "accessKey": access_key,
            "secretKey": request.ext_str("secretKey"),
            "whiteRemoteAddress": request.ext_str("whiteRemoteAddress"),
            "admin": (request.ext_str("admin") or "false").lower() == "true",  # always written, as 4.9
            "defaultTopicPerm": request.ext_str("defaultTopicPerm"),
            "defaultGroupPerm": request.ext_str("defaultGroupPerm"),
            "topicPerms": perms("topicPerms"),
            "groupPerms": perms("groupPerms"),
        }

        def edit(acl: PlainPermissionManager) -> None:
            acl.update_account(account)

        return await self._acl_edit(channel, request, failed, f"account {access_key} written", edit)

    async def delete_acl_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
        access_key = request.ext_str("accessKey", required=True) or ""

        def edit(acl: PlainPermissionManager) -> str | None:
            if acl.delete_account(access_key):
                return None
            return f"The accesskey[{access_key}] corresponding to accessConfig has been deleted failed."

        return await self._acl_edit(channel, request, failed, f"account {access_key} deleted", edit)

    async def update_global_white_addrs_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        text = request.ext_str("globalWhiteAddrs", required=True) or ""
        patterns = [p.strip() for p in text.split(",") if p.strip()]
        file = request.ext_str("aclFileFullPath")

        def edit(acl: PlainPermissionManager) -> None:
            acl.update_global_white(patterns, file)

        prefix = f"The globalWhiteAddresses[{text}] has been updated failed. "
        return await self._acl_edit(channel, request, failed, f"global white list {patterns} written", edit, prefix)

    async def get_broker_cluster_acl_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_INFO: the files' data versions."""
        assert self.acl is not None  # process_request answers it when ACL is off
        default, every = self.acl.data_versions()
        c = self.broker_config
        ext = {
            "version": orjson.dumps(default, option=orjson.OPT_SORT_KEYS).decode(),
            "allAclFileVersion": orjson.dumps(every, option=orjson.OPT_SORT_KEYS).decode(),
            "brokerName": c.broker_name,
            "brokerAddr": c.broker_addr,
            "clusterName": c.broker_cluster_name,
        }
        return request.make_response(ResponseCode.SUCCESS, ext_fields=ext)

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _error(request: RemotingCommand, remark: str) -> RemotingCommand:
        return request.make_response(ResponseCode.SYSTEM_ERROR, remark)

    def _slave_refusal(self, request: RemotingCommand) -> RemotingCommand | None:
        return None if self.store.is_master() else self._error(request, SLAVE_REMARK)

    def _topic_refusal(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        """SYSTEM_ERROR for an invalid name or a system topic (TopicValidator), else None."""
        remark = check_topic_name(topic)
        if remark is not None:
            return self._error(request, remark)
        if is_system_topic(topic, self.topics.system_topics):
            return self._error(request, f"The topic[{topic}] is conflict with system topic.")
        return None

    def _consume_queue_entries(self) -> int:
        """ConsumeQueue entries ever dispatched (max offsets summed), SCHEDULE_TOPIC_XXXX left out."""
        return self.store.dispatched_entries((RMQ_SYS_SCHEDULE_TOPIC,))

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
        try:
            modification = parse_to_map(request.ext_str("attributes"))  # 5.x: +message.type=FIFO,...
            if modification.get("+" + MESSAGE_TYPE) == MIXED and not self.broker_config.enable_mixed_message_type:
                return request.make_response(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
            await asyncio.to_thread(self.topics.update_topic_config, tc, modification)
        except AttributeRefused as e:  # 5.3.3: its RuntimeException's message, as SYSTEM_ERROR
            return self._error(request, str(e))
        self.trigger_register()
        return self._unsaved_topic_answer(request, topic, "updated")

    def _unsaved_topic_answer(self, request: RemotingCommand, topic: str, what: str) -> RemotingCommand:
        """SUCCESS once the topic's change is on disk; else SYSTEM_ERROR naming why (the change
        is applied, and saved again until it lands: a crash meanwhile would undo it)."""
        cause = self.topics.unsaved_topic_cause(topic)
        if cause is None:
            return request.make_response(ResponseCode.SUCCESS)
        return self._error(request, f"topic[{topic}] is {what} but its config could not be saved ({cause}): it is "
                                    f"saved again every few seconds, and a crash before then undoes it")  # fmt: skip

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
        # as 4.9.8's deleteTopic: cleanUnusedTopic over the remaining topics, so the deleted
        # topic's ConsumeQueues go now (a topic created again under its name starts at offset 0)
        await self._clean_unused_topics()
        return self._unsaved_topic_answer(request, topic, "deleted")

    async def get_topic_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG (351, 5.x): the topic's TopicConfigAndQueueMapping (no static-topic
        mapping here: ``mappingDetail`` absent, as fastjson leaves a null out)."""
        topic = request.ext_str("topic", required=True) or ""
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            log.error("No topic in this broker, client: %s topic: %s", channel.remote_addr, topic)
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(tc.to_json(with_attributes=True)))

    async def get_all_topic_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.SUCCESS, body=orjson.dumps(self.topics.topic_config_serialize_wrapper())
        )

    async def get_topic_stats_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_str("topic", required=True) or ""
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        entries = []
        for queue_id in range(tc.write_queue_nums):
            min_offset = max(self.store.get_min_offset_in_queue(topic, queue_id), 0)
            max_offset = max(self.store.get_max_offset_in_queue(topic, queue_id), 0)
            last = self.store.get_message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            entries.append((topic, self.broker_config.broker_name, queue_id, {
                "lastUpdateTimestamp": last, "maxOffset": max_offset, "minOffset": min_offset,
            }))  # fmt: skip
        table = message_queue_table(entries)
        return request.make_response(ResponseCode.SUCCESS, body=fastjson.dumps({"offsetTable": table}))

    async def get_system_topic_list_from_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topics = sorted(SYSTEM_TOPICS | self.topics.system_topics)
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": topics}))

    async def clean_unused_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        log.warning("invoke cleanUnusedTopic start, called by %s", channel.remote_addr)
        await self._clean_unused_topics()
        log.warning("invoke cleanUnusedTopic end.")
        return request.make_response(ResponseCode.SUCCESS)

    async def _clean_unused_topics(self) -> None:
        topics = self.topics.topic_config_table.keys()  # live: a topic created meanwhile keeps its queues
        self._forget_queues(await asyncio.to_thread(self.store.clean_unused_topic, topics))

    async def clean_expired_consume_queue(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        log.warning("invoke cleanExpiredConsumeQueue start, called by %s", channel.remote_addr)
        self._forget_queues(await asyncio.to_thread(self.store.clean_expired_consume_queue))
        log.warning("invoke cleanExpiredConsumeQueue end.")
        return request.make_response(ResponseCode.SUCCESS)

    def _forget_queues(self, destroyed: list[tuple[str, int, int]]) -> None:
        """Destroyed ConsumeQueues leave the entry count msgPutTotalTodayNow is taken from:
        their entries leave the baseline too, so the count of puts stays."""
        self._put_baseline -= sum(n for topic, _, n in destroyed if topic != RMQ_SYS_SCHEDULE_TOPIC)

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

    async def get_all_producer_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"data": self.producers.producer_table()}))

    async def get_consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_str("consumerGroup", required=True) or ""
        topic = (request.ext_str("topic") or "").strip()
        topics = [topic] if topic else sorted(self.offsets.which_topic_by_consumer(group))
        info = self.consumers.consumer_table.get(group)
        entries: list[tuple[str, str, int, dict[str, int]]] = []
        for t in topics:
            tc = self.topics.select_topic_config(t)
            if tc is None:
                log.warning("consumeStats, topic config not exist, %s", t)
                continue
            if info is not None and info.subscriptions and t not in info.subscriptions:
                log.warning("consumeStats, the consumer group[%s], topic[%s] not exist", group, t)
                continue
            entries += self._offset_wrappers(group, t, tc.read_queue_nums)
        tps = sum((self.stats.tps_group_get_nums(group, t) for t in topics), 0.0)
        body = {"consumeTps": tps, "offsetTable": message_queue_table(entries)}
        return request.make_response(ResponseCode.SUCCESS, body=fastjson.dumps(body))

    def _offset_wrappers(self, group: str, topic: str, queue_nums: int) -> list[tuple[str, str, int, dict[str, int]]]:
        """ConsumeStats' offsetTable entries (OffsetWrapper) of ``topic``'s first ``queue_nums`` queues,
        for ``message_queue_table``."""
        entries = []
        for queue_id in range(queue_nums):
            broker_offset = max(self.store.get_max_offset_in_queue(topic, queue_id), 0)
            consumer_offset = max(self.offsets.query_offset(group, topic, queue_id), 0)
            last = 0
            if consumer_offset > 0:
                last = max(self.store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1), 0)
            entries.append((topic, self.broker_config.broker_name, queue_id, {
                "brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": last,
            }))  # fmt: skip
        return entries

    def _subscribed_or_offline(self, group: str, topic: str) -> bool:
        """False when the group is online with subscriptions and ``topic`` is not one of them
        (upstream's findSubscriptionData null while findSubscriptionDataCount > 0)."""
        info = self.consumers.consumer_table.get(group)
        return info is None or not info.subscriptions or topic in info.subscriptions

    async def get_broker_consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        request.ext_str("isOrder", required=True)
        is_order = request.ext_bool("isOrder", False)
        body = await asyncio.to_thread(lambda: fastjson.dumps(self._broker_consume_stats(is_order)))
        return request.make_response(ResponseCode.SUCCESS, body=body)

    def _broker_consume_stats(self, is_order: bool) -> dict[str, Any]:
        """ConsumeStatsList: every subscription group, each with one ConsumeStats per topic it
        has offsets for (write queues; with ``is_order``, order topics only)."""
        stats_list: list[dict[str, list[dict[str, Any]]]] = []
        total_diff = 0
        for group in sorted(self.subscription_groups.subscription_group_table):
            per_topic: list[dict[str, Any]] = []
            for topic in sorted(self.offsets.which_topic_by_consumer(group)):
                tc = self.topics.select_topic_config(topic)
                if tc is None:
                    log.warning("consumeStats, topic config not exist, %s", topic)
                    continue
                if is_order and not tc.order:
                    continue
                if not self._subscribed_or_offline(group, topic):
                    log.warning("consumeStats, the consumer group[%s], topic[%s] not exist", group, topic)
                    continue
                table = message_queue_table(self._offset_wrappers(group, topic, tc.write_queue_nums))
                total_diff += sum(w["brokerOffset"] - w["consumerOffset"] for w in table.values())
                per_topic.append({"consumeTps": self.stats.tps_group_get_nums(group, topic), "offsetTable": table})
            stats_list.append({group: per_topic})
        return {"brokerAddr": self.broker_config.broker_addr, "consumeStatsList": stats_list, "totalDiff": total_diff}

    async def query_topic_consume_by_who(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_str("topic", required=True) or ""
        groups = {g for g, info in list(self.consumers.consumer_table.items()) if topic in info.subscriptions}
        groups |= self.offsets.which_group_by_topic(topic)
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"groupList": sorted(groups)}))

    async def query_consume_time_span(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_str("topic", required=True) or ""
        group = request.ext_str("group", required=True) or ""
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        spans = await asyncio.to_thread(self._queue_time_spans, topic, group, tc.write_queue_nums)
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"consumeTimeSpanSet": spans}))

    def _queue_time_spans(self, topic: str, group: str, queue_nums: int) -> list[dict[str, Any]]:
        store = self.store
        spans: list[dict[str, Any]] = []
        for queue_id in range(queue_nums):
            min_time = store.get_earliest_message_time(topic, queue_id)
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            max_time = store.get_message_store_timestamp(topic, queue_id, max_offset - 1)
            consumer_offset = self.offsets.query_offset(group, topic, queue_id)
            consume_time = min_time
            if consumer_offset > 0:
                consume_time = store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
            delay = 0
            if consumer_offset < max_offset:  # as upstream: -1 (no entry there) makes it now + 1
                delay = _now_ms() - store.get_message_store_timestamp(topic, queue_id, consumer_offset)
            spans.append({
                "consumeTimeStamp": consume_time, "consumeTimeStampStr": format_date(consume_time),
                "delayTime": delay,
                "maxTimeStamp": max_time, "maxTimeStampStr": format_date(max_time),
                "messageQueue": {"brokerName": self.broker_config.broker_name, "queueId": queue_id, "topic": topic},
                "minTimeStamp": min_time, "minTimeStampStr": format_date(min_time),
            })  # fmt: skip
        return spans

    async def query_correction_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        compare_group = request.ext_str("compareGroup", required=True) or ""
        topic = request.ext_str("topic", required=True) or ""
        filter_groups = (request.ext_str("filterGroups") or "").strip()
        excluded = set(filter_groups.split(",")) if filter_groups else set()
        correction = self.offsets.query_min_offset_in_all_group(
            topic, excluded, lambda queue_id: self.store.get_min_offset_in_queue(topic, queue_id)
        )
        # as upstream, which passes (topic, compareGroup) to queryOffset(group, topic): the compare
        # offsets are those stored under "compareGroup@topic", which is no group's in practice
        for queue_id, offset in self.offsets.query_offsets(topic, compare_group).items():
            if queue_id not in correction:
                # upstream fails here on a null (a NullPointerException, SYSTEM_ERROR)
                return self._error(request, f"queue {queue_id} of {compare_group}@{topic} has no minimum to compare")
            correction[queue_id] = LONG_MAX if correction[queue_id] > offset else correction[queue_id]
        offsets = {str(queue_id): offset for queue_id, offset in sorted(correction.items())}
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps({"correctionOffsets": offsets}))

    async def clone_group_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        src = request.ext_str("srcGroup", required=True) or ""
        dest = request.ext_str("destGroup", required=True) or ""
        topic = request.ext_str("topic") or ""
        offline = request.ext_bool("offline", False)
        topics = [topic] if topic.strip() else sorted(self.offsets.which_topic_by_consumer(src))
        for t in topics:
            if self.topics.select_topic_config(t) is None:
                log.warning("[cloneGroupOffset], topic config not exist, %s", t)
                continue
            if not offline and not self._subscribed_or_offline(src, t):
                log.warning("[cloneGroupOffset], the consumer group[%s], topic[%s] not exist", src, t)
                continue
            if self.offsets.clone_offset(src, dest, t):
                log.info("cloneGroupOffset %s -> %s, topic %s, called by %s", src, dest, t, channel.remote_addr)
        return request.make_response(ResponseCode.SUCCESS)

    async def view_broker_stats_data(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        name = request.ext_str("statsName", required=True) or ""
        key = request.ext_str("statsKey", required=True) or ""
        item = self.stats.get_stats_item(name, key)
        if item is None:
            return self._error(request, f"The stats <{name}> <{key}> not exist")
        now = time.monotonic()
        body = {
            f"stats{span.capitalize()}": {"avgpt": snap.avgpt, "sum": snap.sum, "tps": snap.tps}
            for span, snap in (("day", item.day(now)), ("hour", item.hour(now)), ("minute", item.minute(now)))
        }
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    async def query_consume_queue(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_str("topic", required=True) or ""
        queue_id = request.ext_int("queueId", 0) or 0
        index = request.ext_long("index", 0) or 0
        count = request.ext_int("count", 0) or 0
        group = request.ext_str("consumerGroup")
        cq = self.store.get_consume_queue(topic, queue_id)
        if cq is None:
            return self._error(request, f"{queue_id}@{topic} is not exist!")
        body: dict[str, Any] = {}
        message_filter = None
        if group is not None:
            info = self.consumers.consumer_table.get(group)
            sub = info.subscriptions.get(topic) if info is not None else None
            body["filterData"] = f"{group}@{topic} is not online!"
            if sub is not None:
                body["subscriptionData"] = sub
                fd = self.consumer_filters.get(topic, group) if self.consumer_filters is not None else None
                body["filterData"] = fastjson_pretty(fd.to_json()) if fd is not None else "null"
                is_tag = is_tag_type(str(sub.get("expressionType") or "TAG").upper())
                subscription = build_subscription_data(topic, str(sub.get("subString", "*")) if is_tag else "*")
                message_filter = ExpressionMessageFilter(subscription, fd, self.consumer_filters, is_tag=is_tag)
        body["maxQueueIndex"] = cq.get_max_offset_in_queue()
        body["minQueueIndex"] = cq.get_min_offset_in_queue()
        queue_data = await asyncio.to_thread(_consume_queue_data, cq, index, count, message_filter)
        if queue_data is None:
            return request.make_response(ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!")
        body["queueData"] = queue_data
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(dict(sorted(body.items()))))

    async def resume_check_half_message(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """RESUME_CHECK_HALF_MESSAGE (mqadmin's and the dashboard's resumeCheckHalfMessage): the
        half message of an offset msgId is checked again from its first check."""
        msg_id = request.ext_str("msgId", required=True) or ""
        if self.transactions is None or not self.store.is_master():
            return self._error(request, "a slave checks no transactions: resume the check on the master")
        try:
            _, offset = decode_message_id(msg_id)
        except ValueError as e:
            return self._error(request, f"msgId {msg_id!r} is not an offset message id: {e}")
        why = await asyncio.to_thread(self.transactions.resume_check, offset)
        if why is not None:
            return self._error(request, why)
        return request.make_response(ResponseCode.SUCCESS)

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

    def _msg_put_total(self) -> int:
        """msgPutTotalTodayNow: ConsumeQueue entries dispatched since the broker started."""
        return max(self._consume_queue_entries() - self._put_baseline, 0)

    def runtime_info(self) -> dict[str, str]:
        daily = self.broker_stats
        info: dict[str, Any] = {
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerVersion": DEFAULT_VERSION,
            "msgPutTotalYesterdayMorning": daily.msg_put_total_yesterday_morning,
            "msgPutTotalTodayMorning": daily.msg_put_total_today_morning,
            "msgPutTotalTodayNow": self._msg_put_total(),
            "msgGetTotalYesterdayMorning": daily.msg_get_total_yesterday_morning,
            "msgGetTotalTodayMorning": daily.msg_get_total_today_morning,
            "bootTimestamp": self.boot_timestamp,
            "msgGetTotalTodayNow": self.stats.broker_get_nums(),
            **self.store.runtime_info(),
            **self._more_runtime_info(),
        }
        return {k: str(v) for k, v in info.items()}

    def _more_runtime_info(self) -> dict[str, Any]:
        """The rest of upstream's keys whose figures Pumice has (see the module docstring)."""
        info: dict[str, Any] = {
            "runtime": format_runtime(_now_ms() - self.boot_timestamp),
            "startAcceptSendRequestTimeStamp": 0,  # the only value Pumice accepts: sends are never held back
        }
        schedule = self.schedule_message_service
        if schedule is not None:
            for level, offset in sorted(dict(schedule.offset_table).items()):
                max_offset = self.store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1)
                info[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
        for name, (pool, workers) in self.thread_pools.items():
            waiting = max(pool.pending - workers, 0)  # waiting, not running
            info[f"{name}ThreadPoolQueueSize"] = waiting
            info[f"{name}ThreadPoolQueueCapacity"] = pool.capacity
            if not waiting:  # upstream's headSlowTimeMills of an empty queue; unknown otherwise
                info[f"{name}ThreadPoolQueueHeadWaitTimeMills"] = 0
        return info

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
        return self._unsaved_groups_answer(request, name, "updated")

    def _unsaved_groups_answer(self, request: RemotingCommand, group: str, what: str) -> RemotingCommand:
        """SUCCESS once subscriptionGroup.json holds the change; else SYSTEM_ERROR naming why (the
        change is applied, and saved again until it lands)."""
        cause = self.subscription_groups.unsaved_cause
        if cause is None:
            return request.make_response(ResponseCode.SUCCESS)
        return self._error(
            request,
            f"group[{group}] is {what} but subscriptionGroup.json could not be saved ({cause}): it is saved again "
            f"every few seconds, and a crash before then undoes it",
        )

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
        return self._unsaved_groups_answer(request, group, "deleted")

    async def get_all_consumer_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self.offsets.snapshot())

    async def get_timer_check_point(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        timer = self.timer_message_store
        if timer is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        return request.make_response(ResponseCode.SUCCESS, body=timer.checkpoint.encode())

    async def get_timer_metrics(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        timer = self.timer_message_store
        if timer is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
        return request.make_response(ResponseCode.SUCCESS, body=timer.metrics.encode())

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
        body = (to_properties(self.broker_config, self.store_config) + _fixed_properties()).encode()
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"version": self._version_json()}, body=body)

    async def update_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """All keys or none: applied to copies and validated there first."""
        source = "UPDATE_BROKER_CONFIG"
        try:
            props = parse_properties(bytes(request.body).decode("utf-8"), source)
            if not props:
                return request.make_response(ResponseCode.SUCCESS)
            black = self.black_list.refused(props)
            if black:  # RocketMQ's code and remark, and the keys
                return request.make_response(ResponseCode.NO_PERMISSION, self.black_list.remark(black))
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
