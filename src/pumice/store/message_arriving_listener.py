"""MessageArrivingListener: told by dispatch when a record reaches its ConsumeQueue.

The broker's long-polling hold service implements it (NotifyMessageArrivingListener) to
wake pull requests waiting on that queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pumice.store.dispatch_request import DispatchRequest


class MessageArrivingListener(Protocol):
    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        msg_store_time: int,
        filter_bit_map: bytes | None,
        properties: dict[str, str] | None,
    ) -> None:
        """``logic_offset`` is the queue's new max offset (the record's offset + 1).
        ``properties`` is None: no SQL92 filter needs them, so they are not decoded per message."""

    def arriving_batch(self, requests: Sequence[DispatchRequest]) -> None:
        """Dispatch's call: every record of one dispatch run, in order. A listener may skip the
        queues nobody waits on without a call per record."""
