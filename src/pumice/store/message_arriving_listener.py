"""MessageArrivingListener: told by dispatch when a record reaches its ConsumeQueue.

The broker's long-polling hold service implements it (NotifyMessageArrivingListener) to
wake pull requests waiting on that queue.
"""

from __future__ import annotations

from typing import Protocol


class MessageArrivingListener(Protocol):
    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        msg_store_time: int,
        filter_bit_map: bytes | None,
        properties: dict[str, str],
    ) -> None:
        """``logic_offset`` is the queue's new max offset (the record's offset + 1)."""
