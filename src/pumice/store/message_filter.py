"""MessageFilter: what ``DefaultMessageStore.get_message`` asks of a pull's filter (4.9's
``org.apache.rocketmq.store.MessageFilter``): first by the ConsumeQueue entry (its tagsCode,
and its ConsumeQueueExt unit when there is one), then, for an entry that passed, by the
stored record itself. A record either check refuses is skipped and not counted. The store
asks about a pull's entries all at once (numpy arrays), not one call each."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from pumice.store.consume_queue_ext import CqExtUnit, CqExtUnits


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int | None, unit: CqExtUnit | None) -> bool:
        """``tags_code`` None: unknown (its extension unit is gone)."""

    def is_matched_by_consume_queue_batch(
        self, tags_codes: np.ndarray, known: np.ndarray, units: CqExtUnits | None
    ) -> np.ndarray:
        """The same for many entries: ``known[i]`` False where the tagsCode is unknown; ``units``
        their extension units (None: the queue has none)."""

    def is_matched_by_commit_log(self, record: memoryview) -> bool: ...
