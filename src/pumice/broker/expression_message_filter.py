"""ExpressionMessageFilter: a pull's MessageFilter (``pumice.store.message_filter``), as 4.9's.

By the ConsumeQueue entry: a TAG subscription matches the entry's tagsCode (an unknown one
matches); an SQL92 one with a bloom filter skips an entry whose ConsumeQueueExt bit map lacks any
of its consumer's positions, unless the message is older than the filter (stored before its
born time: its map was computed without it) or the entry has no map. By the record: an SQL92
expression is evaluated on its properties; an error or a non-boolean result does not match.

With ``filterSupportRetry`` (ExpressionForRetryMessageFilter), a pull of a ``%RETRY%<group>``
topic evaluates, on each retried message, the group's filter for the message's original topic
(its RETRY_TOPIC property), so a consumer gets back only the retries its selector matches.
"""

from __future__ import annotations

import logging
import struct

import numpy as np

from pumice.broker.bloom_filter import BloomFilter
from pumice.broker.consumer_filter_manager import ConsumerFilterData, ConsumerFilterManager
from pumice.broker.filter_api import SubscriptionData
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import record_properties, string_to_message_properties
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.store.consume_queue_ext import CqExtUnit, CqExtUnits

log = logging.getLogger(__name__)


def _properties(record: memoryview) -> dict[str, str] | None:
    try:
        return string_to_message_properties(record_properties(record))
    except (ValueError, IndexError, struct.error):  # a damaged record matches nothing
        return None


class ExpressionMessageFilter:
    def __init__(
        self,
        subscription: SubscriptionData,
        filter_data: ConsumerFilterData | None,
        manager: ConsumerFilterManager | None,
        *,
        is_tag: bool,
    ) -> None:
        self.subscription = subscription
        self.filter_data = filter_data
        self.manager = manager
        self.is_tag = is_tag
        bloom: BloomFilter | None = manager.bloom_filter if manager is not None else None
        self.bloom_valid = (
            filter_data is not None and bloom is not None and bloom.is_valid(filter_data.bloom_filter_data)
        )

    def is_matched_by_consume_queue(self, tags_code: int | None, unit: CqExtUnit | None) -> bool:
        if self.is_tag:
            return tags_code is None or self.subscription.is_matched(tags_code)
        fd = self.filter_data
        if fd is None or fd.compiled is None or fd.bloom_filter_data is None:
            return True
        if unit is None or not fd.is_msg_in_live(unit.msg_store_time):
            return True
        bits = unit.filter_bit_map
        if bits is None or not self.bloom_valid or len(bits) * 8 != fd.bloom_filter_data.bit_num:
            return True
        return BloomFilter.is_hit(fd.bloom_filter_data, bits)

    def is_matched_by_consume_queue_batch(
        self, tags_codes: np.ndarray, known: np.ndarray, units: CqExtUnits | None
    ) -> np.ndarray:
        """``is_matched_by_consume_queue`` for many entries, with numpy."""
        n = len(tags_codes)
        if self.is_tag:
            sub = self.subscription
            if sub.matches_all:
                return np.ones(n, bool)
            codes = np.fromiter(sub.code_set, np.int64, len(sub.code_set))
            return ~known | np.isin(tags_codes.astype(np.int32), codes)  # 4.9 compares tagsCode.intValue()
        fd = self.filter_data
        if fd is None or fd.compiled is None or fd.bloom_filter_data is None or units is None:
            return np.ones(n, bool)
        bits = units.bit_maps
        if bits is None or not self.bloom_valid or bits.shape[1] * 8 != fd.bloom_filter_data.bit_num:
            return np.ones(n, bool)
        pos = np.array(fd.bloom_filter_data.bit_pos, np.int64)
        hit = ((bits[:, pos >> 3] & (1 << (pos & 7)).astype(np.uint8)) != 0).all(axis=1)
        judged = units.found & (units.msg_store_time > fd.born_time) & (units.bit_map_size > 0)
        return ~judged | hit

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        if self.is_tag:
            return True
        return self._evaluate(self.filter_data, record, None)

    @staticmethod
    def _evaluate(fd: ConsumerFilterData | None, record: memoryview, props: dict[str, str] | None) -> bool:
        if fd is None or fd.compiled is None:
            return True
        if props is None:
            props = _properties(record)
            if props is None:
                return False
        return fd.compiled.matches(props)


class ExpressionForRetryMessageFilter(ExpressionMessageFilter):
    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        topic = self.subscription.topic
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return super().is_matched_by_commit_log(record)
        props = _properties(record)
        if props is None:
            return False
        real_topic = props.get(MessageConst.PROPERTY_RETRY_TOPIC)
        fd = None
        if real_topic is not None and self.manager is not None:
            fd = self.manager.get(real_topic, topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
        return self._evaluate(fd, record, props)
