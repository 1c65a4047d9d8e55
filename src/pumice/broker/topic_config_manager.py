"""TopicConfigManager: the topics this broker serves, their queue numbers and permissions.

File ``<storeRoot>/config/topics.json`` (RocketMQ's TopicConfigSerializeWrapper; the same dict
is the ``topicConfigSerializeWrapper`` of a REGISTER_BROKER body)::

    {
      "topicConfigTable": {
        "TopicTest": {"topicName": "TopicTest", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                      "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false},
        "FifoTopic": {..., "attributes": {"message.type": "FIFO"}},
        ...
      },
      "dataVersion": {"timestamp": 1700000000000, "counter": 3}
    }

``attributes`` (RocketMQ 5.x, ``pumice.common.topic_attributes``) is written for a topic that
has some, as 5.3.3 writes it; a 4.9 file without it loads (no attributes).

``perm`` bits (PermName): PRIORITY 8, READ 4, WRITE 2, INHERIT 1. A topic with INHERIT is a
template: a producer sending to an unknown topic names it as ``defaultTopic`` and the new
topic copies its perm (minus INHERIT) with min(client's queue number, template's write
queues) queues. ``dataVersion`` moves on every change; the name server re-reads the topic
table of a broker whose version changed.

System topics made at construction (RocketMQ 4.9's TopicConfigManager; the file's entries
are loaded over them):

============================  =========  ====  ===============================================
topic                         queues     perm  note
============================  =========  ====  ===============================================
SELF_TEST_TOPIC               1/1        6
TBW102                        8/8        7     only with auto_create_topic_enable; 8 =
                                               default_topic_queue_nums
BenchmarkTest                 1024/1024  6
<cluster name>                16/16      7     as upstream: default queue numbers; perm 1 only
                                               when cluster_topic_enable is off
<broker name>                 1/1        7     perm 1 only when broker_topic_enable is off
OFFSET_MOVED_EVENT            1/1        6
SCHEDULE_TOPIC_XXXX           18/18      6     one queue per delay level
RMQ_SYS_TRACE_TOPIC           1/1        6     only with trace_topic_enable (off by default)
<cluster name>_REPLY_TOPIC    1/1        6     request/reply messages
RMQ_SYS_TRANS_HALF_TOPIC      1/1        6     made lazily in 4.9, at construction in 5.x
rmq_sys_wheel_timer           1/1        6     timer messages (5.x), with timer_wheel_enable
============================  =========  ====  ===============================================

The cluster and broker topics follow upstream (perm 7, INHERIT included, so a client may use
them as ``defaultTopic``), not 1/1 perm 6.

Durability: every change (a creation by a send, an admin update or deletion, a retry or DLQ
topic) is saved before it is answered. A topic whose last change is not on disk yet (the save
failed: a full disk) is ``unsaved_topic_cause(topic)``: the send paths refuse to store into it
and the admin answers SYSTEM_ERROR, so nothing acknowledged lives in a topic a crash would
forget; the file is saved again by ``retry_persist`` (ConfigFile) and the topic is served
normally once it lands. RocketMQ 4.9 answers SEND_OK and loses the topic in a crash.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pumice.broker.config_file import ConfigFile, DataVersion
from pumice.common.mix_all import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    MAX_QUEUE_NUMS,
    REPLY_TOPIC_POSTFIX,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_TRACE_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from pumice.common.perm_name import PERM_INHERIT, PERM_READ, PERM_WRITE, perm_to_string
from pumice.common.topic_attributes import alter_current_attributes

log = logging.getLogger(__name__)

# TopicSysFlag
TOPIC_SYS_FLAG_UNIT = 1
TOPIC_SYS_FLAG_UNIT_SUB = 2

SCHEDULE_TOPIC_QUEUE_NUM = 18
DEFAULT_QUEUE_NUMS = 16  # TopicConfig.defaultReadQueueNums / defaultWriteQueueNums
TOPIC_MAX_LENGTH = 127


def check_queue_nums(read_queue_nums: int, write_queue_nums: int) -> str | None:
    """Why these queue numbers are refused, or None."""
    for name, n in (("readQueueNums", read_queue_nums), ("writeQueueNums", write_queue_nums)):
        if not 0 <= n <= MAX_QUEUE_NUMS:
            return f"{name} {n} is out of range: a topic has 0 to {MAX_QUEUE_NUMS} queues"
    return None


_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET: topics a client may not send to
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC (RocketMQ 5)


def is_topic_or_group_illegal(name: str) -> bool:
    """True if ``name`` has a character outside ``[%|a-zA-Z0-9_-]`` (TopicValidator)."""
    return _VALID_NAME.fullmatch(name) is None


def check_topic_name(topic: str) -> str | None:
    """None if ``topic`` is a valid name, else the error remark (RocketMQ's TopicValidator wording;
    the Java broker answers these with SYSTEM_ERROR). ``TBW102`` is a valid name here, as on 4.9's
    broker (the Java and Pumice clients refuse to send to it; a broker stores what it is sent)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def is_not_allowed_send_topic(topic: str) -> bool:
    """TopicValidator.isNotAllowedSendTopic: the Java broker answers NO_PERMISSION
    ``Sending message to topic[X] is forbidden.``"""
    return topic in NOT_ALLOWED_SEND_TOPICS


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"  # or MULTI_TAG
    topic_sys_flag: int = 0
    order: bool = False
    # 5.x topic attributes, names without their sign ({"message.type": "FIFO"}; topic_attributes.py)
    attributes: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:  # RocketMQ's TopicConfig.toString, as its logs show it
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={perm_to_string(self.perm)}, "
            f"topicFilterType={self.topic_filter_type}, topicSysFlag={self.topic_sys_flag}, "
            f"order={str(self.order).lower()}]"
        )

    def to_json(self, with_attributes: bool = False) -> dict[str, Any]:
        """RocketMQ's JSON; ``attributes`` only when the topic has some (a 4.9 peer's files and
        REGISTER_BROKER bodies stay as 4.9 writes them) or ``with_attributes`` (5.x's GET_TOPIC_CONFIG)."""
        out: dict[str, Any] = {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }
        if self.attributes or with_attributes:
            out["attributes"] = dict(self.attributes)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], name: str | None = None) -> TopicConfig:
        """From RocketMQ's JSON; ``name`` (the table key) is used when ``topicName`` is missing.
        5.x's ``attributes`` (a 4.9 file has none); other unknown keys are ignored."""
        topic_name = data.get("topicName", name)
        if not isinstance(topic_name, str) or not topic_name:
            raise ValueError(f"topic config without a name: {data!r}")
        order = data.get("order", False)
        tc = cls(
            topic_name,
            int(data.get("readQueueNums", DEFAULT_QUEUE_NUMS)),
            int(data.get("writeQueueNums", DEFAULT_QUEUE_NUMS)),
            int(data.get("perm", PERM_READ | PERM_WRITE)),
            str(data.get("topicFilterType", "SINGLE_TAG")),
            int(data.get("topicSysFlag", 0)),
            order if isinstance(order, bool) else str(order).lower() == "true",
        )
        attributes = data.get("attributes")
        if attributes:
            if not isinstance(attributes, dict):
                raise ValueError(f"topic {topic_name}: attributes is not an object: {attributes!r}")
            tc.attributes = {str(k): str(v) for k, v in attributes.items()}
        refusal = check_queue_nums(tc.read_queue_nums, tc.write_queue_nums)
        if refusal is not None:
            raise ValueError(f"topic {topic_name}: {refusal}")
        return tc


class TopicConfigManager(ConfigFile):
    def __init__(
        self,
        path: str,
        broker_name: str,
        cluster_name: str,
        default_topic_queue_nums: int = 8,
        auto_create_topic_enable: bool = True,
        *,
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
        trace_topic_enable: bool = False,
        msg_trace_topic_name: str = RMQ_SYS_TRACE_TOPIC,
        on_topic_created: Callable[[TopicConfig], None] | None = None,
        timer_wheel_enable: bool = False,
    ) -> None:
        super().__init__(path)
        self.broker_name = broker_name
        self.cluster_name = cluster_name
        self.default_topic_queue_nums = default_topic_queue_nums
        self.auto_create_topic_enable = auto_create_topic_enable
        # called (outside the lock) with each topic the send paths create: re-register with the name servers
        self.on_topic_created = on_topic_created
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.system_topics: set[str] = set()
        self._create_lock = threading.Lock()  # RocketMQ's topicConfigTableLock: one creation at a time
        # topic -> number of its last change, while that change is not on disk (under _lock)
        self._unsaved_topics: dict[str, int] = {}
        self._change_no = 0

        def add(name: str, queues: int, perm: int = PERM_READ | PERM_WRITE) -> None:
            self.system_topics.add(name)
            self.topic_config_table[name] = TopicConfig(name, queues, queues, perm)

        rw = PERM_READ | PERM_WRITE
        add(RMQ_SYS_SELF_TEST_TOPIC, 1)
        if auto_create_topic_enable:
            add(AUTO_CREATE_TOPIC_KEY_TOPIC, default_topic_queue_nums, PERM_INHERIT | rw)
        add(RMQ_SYS_BENCHMARK_TOPIC, 1024)
        add(cluster_name, DEFAULT_QUEUE_NUMS, PERM_INHERIT | (rw if cluster_topic_enable else 0))
        add(broker_name, 1, PERM_INHERIT | (rw if broker_topic_enable else 0))
        add(RMQ_SYS_OFFSET_MOVED_EVENT, 1)
        add(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        if trace_topic_enable:
            add(msg_trace_topic_name, 1)
        add(f"{cluster_name}_{REPLY_TOPIC_POSTFIX}", 1)
        add(RMQ_SYS_TRANS_HALF_TOPIC, 1)
        if timer_wheel_enable:
            add(TIMER_TOPIC, 1)

    # -- ConfigFile -----------------------------------------------------------------------------

    def encode(self) -> dict[str, Any]:
        return {
            "topicConfigTable": {name: tc.to_json() for name, tc in self.topic_config_table.items()},
            "dataVersion": self.data_version.to_json(),
        }

    def decode(self, data: Any) -> None:
        table = data.get("topicConfigTable") or {}
        if not isinstance(table, dict):
            raise TypeError("topicConfigTable is not an object")
        loaded = {name: TopicConfig.from_json(tc, name) for name, tc in table.items()}
        version = DataVersion.from_json(data.get("dataVersion"))
        self.topic_config_table.update(loaded)
        self.data_version.assign(version)

    def persist(self) -> bool:
        """Save; a landed save makes the changes it holds durable (``unsaved_topic_cause``)."""
        with self._io_lock:
            with self._lock:
                data = self.snapshot()
                upto = self._change_no
            if not self._write(data):
                return False
            if self._unsaved_topics:
                with self._lock:
                    for topic in [t for t, n in self._unsaved_topics.items() if n <= upto]:
                        del self._unsaved_topics[topic]
            return True

    def _changed(self, topic: str) -> None:
        """Record a change of ``topic``'s config (under ``_lock``), unsaved until a save holds it."""
        self.data_version.next_version()
        self._change_no += 1
        self._unsaved_topics[topic] = self._change_no

    def unsaved_topic_cause(self, topic: str) -> str | None:
        """Why ``topic``'s last config change is not on disk yet (the save's error), or None
        when it is durable. Cheap when every change is saved (the send path asks each time)."""
        if not self._unsaved_topics or topic not in self._unsaved_topics:
            return None
        return self.unsaved_cause or "not saved yet"

    # -- queries --------------------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        """The live config (do not change it in place: use ``update_topic_config``)."""
        return self.topic_config_table.get(topic)

    def contains_topic(self, topic: str) -> bool:
        return topic in self.topic_config_table

    def is_order_topic(self, topic: str) -> bool:
        tc = self.topic_config_table.get(topic)
        return tc is not None and tc.order

    def topic_config_serialize_wrapper(self) -> dict[str, Any]:
        """``{"topicConfigTable": {...}, "dataVersion": {...}}``: a snapshot for REGISTER_BROKER."""
        with self._lock:
            return self.encode()

    # -- changes --------------------------------------------------------------------------------

    def update_topic_config(self, tc: TopicConfig, attributes_modification: dict[str, str] | None = None) -> bool:
        """Create or replace (admin UPDATE_AND_CREATE_TOPIC); bumps dataVersion and persists.
        False if the save failed (the change stays, and is saved again: ``retry_persist``).
        With ``attributes_modification`` (signed names, ``topic_attributes.parse_to_map``) the
        topic's attributes become the current ones so modified (an update without any keeps
        them, as 5.3.3); AttributeRefused, and nothing changes, when 5.3.3 would refuse it."""
        with self._lock:
            old = self.topic_config_table.get(tc.topic_name)
            if attributes_modification is not None:
                current = old.attributes if old is not None else {}
                tc.attributes = alter_current_attributes(old is None, current, attributes_modification)
            self.topic_config_table[tc.topic_name] = tc
            self._changed(tc.topic_name)
        log.info("%s topic config %s", "update" if old else "create", tc)
        return self.persist()

    def delete_topic_config(self, topic: str) -> bool:
        """False if ``topic`` does not exist; a failed save leaves the deletion unsaved
        (``unsaved_topic_cause``), saved again by ``retry_persist``."""
        with self._lock:
            old = self.topic_config_table.pop(topic, None)
            if old is not None:
                self._changed(topic)
        if old is None:
            log.warning("delete topic config failed, topic %s does not exist", topic)
            return False
        log.info("delete topic config %s", old)
        self.persist()
        return True

    def create_topic_in_send_message_method(
        self,
        topic: str,
        default_topic: str,
        remote_addr: str,
        client_default_topic_queue_nums: int,
        topic_sys_flag: int = 0,
    ) -> TopicConfig | None:
        """The topic's config, created from ``default_topic`` if the topic is new (RocketMQ rules).

        Created only if ``topic`` is a valid name, ``default_topic`` exists, has INHERIT, and is not
        TBW102 while auto-create is off. The new topic gets min(client's queue number, template's
        write queues) read and write queues (at least 0), the template's perm without INHERIT and
        filter type, and ``topic_sys_flag``. A creation bumps dataVersion, persists and calls
        ``on_topic_created``. None when nothing may be created (answer TOPIC_NOT_EXIST)."""
        created = None
        with self._create_lock:
            tc = self.topic_config_table.get(topic)
            if tc is not None:
                return tc
            if check_topic_name(topic) is not None:
                log.warning("create topic %s refused: invalid name; producer %s", topic, remote_addr)
                return None
            template = self.topic_config_table.get(default_topic)
            if template is None:
                log.warning("create topic %s failed: default topic %s does not exist; producer %s", topic,
                            default_topic, remote_addr)  # fmt: skip
                return None
            perm = template.perm
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
                perm &= ~PERM_INHERIT  # RocketMQ sets TBW102's perm to READ|WRITE here
            if not perm & PERM_INHERIT:
                log.warning("create topic %s failed: default topic %s has perm %d; producer %s", topic,
                            default_topic, template.perm, remote_addr)  # fmt: skip
                return None
            queues = max(0, min(client_default_topic_queue_nums, template.write_queue_nums))
            created = TopicConfig(
                topic, queues, queues, perm & ~PERM_INHERIT, template.topic_filter_type, topic_sys_flag, False
            )
            with self._lock:
                self.topic_config_table[topic] = created
                self._changed(topic)
            log.info("create topic %s from default topic %s; producer %s", created, default_topic, remote_addr)
            self.persist()
        self._created(created)
        return created

    def create_topic_in_send_message_back_method(
        self, topic: str, client_default_topic_queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """The config of a ``%RETRY%<group>``/``%DLQ%<group>`` topic, created with the given queue
        number and perm if missing (bumps dataVersion, persists, calls ``on_topic_created``)."""
        tc = self.topic_config_table.get(topic)
        if tc is None:
            self.create_topics_in_send_message_back_method([topic], client_default_topic_queue_nums, perm,
                                                           topic_sys_flag)  # fmt: skip
            tc = self.topic_config_table[topic]
        return tc

    def create_topics_in_send_message_back_method(
        self, topics: list[str], queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> None:
        """Create the missing ones of ``topics`` with one save of topics.json (a heartbeat's
        groups: 4,000 groups took 14 s, one save each)."""
        with self._create_lock:
            created = [
                TopicConfig(t, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
                for t in dict.fromkeys(topics)
                if t not in self.topic_config_table
            ]
            if created:
                with self._lock:
                    self.topic_config_table.update((tc.topic_name, tc) for tc in created)
                    self.data_version.next_version()
                    self._change_no += 1
                    self._unsaved_topics.update((tc.topic_name, self._change_no) for tc in created)
                log.info("create topic %s", ", ".join(str(tc) for tc in created))
                self.persist()
        for tc in created:
            self._created(tc)

    def _created(self, tc: TopicConfig) -> None:
        if self.on_topic_created is not None:
            try:
                self.on_topic_created(tc)
            except Exception:
                log.exception("on_topic_created failed for %s", tc.topic_name)
