"""POP's receipt handle (RocketMQ 5's ``ExtraInfoUtil``) and the POP retry topic names (``KeyBuilder``).

A popped message's handle, the ``extraInfo`` of ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME
(the 5.x remoting client keeps it in the message's ``POP_CK`` property), is eight fields
joined by one space:

=====  ===============  ==========================================================
index  field            meaning
=====  ===============  ==========================================================
0      ckQueueOffset    the checkpoint's start offset (the pop's first queue offset)
1      popTime          ms, when the broker popped it
2      invisibleTime    ms the message stays invisible after popTime
3      reviveQid        the revive queue holding its checkpoint (999: an orderly pop)
4      retry            ``0`` the topic, ``1`` its retry topic ``%RETRY%<group>_<topic>``,
                        ``2`` the V2 retry topic ``%RETRY%<group>+<topic>``
5      brokerName
6      queueId          of the topic (or of the retry topic)
7      queueOffset      the message's own queue offset
=====  ===============  ==========================================================

The POP_MESSAGE response header describes the popped queues, entries joined by ``;``:

===================  =====================================  ============================
field                one entry                               e.g.
===================  =====================================  ============================
startOffsetInfo      ``<retry> <queueId> <startOffset>``     ``0 3 10;1 0 4``
msgOffsetInfo        ``<retry> <queueId> <o1>,<o2>,…``       ``0 3 10,11,12``
orderCountInfo       ``<retry> <queueId> <count>``           ``0 3 1``
===================  =====================================  ============================

Clients key those maps ``<retry>@<queueId>``. A bad handle raises ``ValueError`` naming the
field, as ExtraInfoUtil's ``IllegalArgumentException`` (the broker answers SYSTEM_ERROR).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX

POP_ORDER_REVIVE_QUEUE = 999  # the reviveQid of an orderly pop's handle (KeyBuilder)
NORMAL_TOPIC = "0"
RETRY_TOPIC = "1"
RETRY_TOPIC_V2 = "2"
_FIELDS = ("ckQueueOffset", "popTime", "invisibleTime", "reviveQid", "retry", "brokerName", "queueId", "queueOffset")


def build_pop_retry_topic_v1(topic: str, group: str) -> str:
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def build_pop_retry_topic_v2(topic: str, group: str) -> str:
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"


def build_pop_retry_topic(topic: str, group: str, enable_retry_topic_v2: bool = False) -> str:
    """The POP retry topic of ``group`` on ``topic`` (V1 unless ``enableRetryTopicV2``)."""
    return build_pop_retry_topic_v2(topic, group) if enable_retry_topic_v2 else build_pop_retry_topic_v1(topic, group)


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def parse_normal_topic(topic: str, group: str) -> str:
    """The topic a POP retry topic of ``group`` retries (``topic`` itself if it is none)."""
    for sep in ("+", "_"):
        prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return topic


def retry_flag(topic: str) -> str:
    """``0``, ``1`` or ``2``: the topic, a V1 or a V2 retry topic."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, retry: str) -> str:
    """The topic a handle's retry flag names."""
    if retry == NORMAL_TOPIC:
        return topic
    if retry == RETRY_TOPIC:
        return build_pop_retry_topic_v1(topic, group)
    if retry == RETRY_TOPIC_V2:
        return build_pop_retry_topic_v2(topic, group)
    raise ValueError(f"getRetry fail, format is wrong: {retry!r}")


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """One parsed handle (``queue_offset`` is -1 in a seven-field one)."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int = -1

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE


def split(extra_info: str | None) -> ExtraInfo:
    """Parse a handle; ValueError names the first field that is missing or not a number."""
    if extra_info is None:
        raise ValueError("split extraInfo is null")
    parts = extra_info.split(" ")
    if len(parts) < 7:
        raise ValueError(f"extraInfo {extra_info!r} has {len(parts)} fields, 7 or 8 expected ({' '.join(_FIELDS)})")
    numbers: list[int] = []
    for i in (0, 1, 2, 3, 6, 7):
        if i >= len(parts):
            numbers.append(-1)
            continue
        try:
            numbers.append(int(parts[i]))
        except ValueError:
            raise ValueError(f"extraInfo {extra_info!r}: {_FIELDS[i]} {parts[i]!r} is not a number") from None
    if parts[4] not in (NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2):
        raise ValueError(f"extraInfo {extra_info!r}: retry {parts[4]!r} is not 0, 1 or 2")
    ck, pop_time, invisible, revive, qid, qo = numbers
    return ExtraInfo(ck, pop_time, invisible, revive, parts[4], parts[5], qid, qo)


def build_extra_info(
    ck_queue_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str, broker_name: str,
    queue_id: int, msg_queue_offset: int,
) -> str:  # fmt: skip
    return (
        f"{ck_queue_offset} {pop_time} {invisible_time} {revive_qid} {retry_flag(topic)} {broker_name} "
        f"{queue_id} {msg_queue_offset}"
    )


def start_offset_entry(topic: str, queue_id: int, start_offset: int) -> str:
    return f"{retry_flag(topic)} {queue_id} {start_offset}"


def msg_offset_entry(topic: str, queue_id: int, offsets: Iterable[int]) -> str:
    return f"{retry_flag(topic)} {queue_id} {','.join(map(str, offsets))}"


def order_count_entry(topic: str, queue_id: int, count: int) -> str:
    return f"{retry_flag(topic)} {queue_id} {count}"


def _parse_map(info: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for one in (info or "").split(";"):
        if not one:
            continue
        parts = one.split(" ")
        if len(parts) != 3:
            raise ValueError(f"parse offset info error, {info!r}")
        key = f"{parts[0]}@{parts[1]}"
        if key in out:
            raise ValueError(f"parse offset info error, duplicate, {info!r}")
        out[key] = parts[2]
    return out


def parse_start_offset_info(info: str | None) -> dict[str, int]:
    """``<retry>@<queueId>`` → start offset."""
    return {k: int(v) for k, v in _parse_map(info).items()}


def parse_msg_offset_info(info: str | None) -> dict[str, list[int]]:
    """``<retry>@<queueId>`` → the popped messages' queue offsets."""
    return {k: [int(o) for o in v.split(",")] for k, v in _parse_map(info).items()}


def start_offset_info_map_key(topic: str, queue_id: int) -> str:
    return f"{retry_flag(topic)}@{queue_id}"
