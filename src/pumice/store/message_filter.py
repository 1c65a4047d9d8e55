"""MessageFilter: what ``DefaultMessageStore.get_message`` asks of a pull's filter (4.9's
``org.apache.rocketmq.store.MessageFilter``): first by the ConsumeQueue entry (its tagsCode,
and its ConsumeQueueExt unit when there is one), then, for an entry that passed, by the
stored record itself. A record either check refuses is skipped and not counted."""

from __future__ import annotations

from typing import Protocol

from pumice.store.consume_queue_ext import CqExtUnit


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int | None, unit: CqExtUnit | None) -> bool:
        """``tags_code`` None: unknown (its extension unit is gone)."""

    def is_matched_by_commit_log(self, record: memoryview) -> bool: ...
