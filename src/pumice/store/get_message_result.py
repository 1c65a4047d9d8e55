"""Results of a read: GetMessageStatus and GetMessageResult (zero-copy record views)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from pumice.store.mapped_file import SelectMappedBufferResult


class GetMessageStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    """Records found by ``get_message``.

    ``buffers`` are views over the mapped CommitLog (no copy); each holds a reference on
    its file, so callers must ``release()`` the result when they have sent or copied them.
    """

    status: GetMessageStatus = GetMessageStatus.NO_MESSAGE_IN_QUEUE
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    suggest_pulling_from_slave: bool = False
    buffers: list[SelectMappedBufferResult] = field(default_factory=list)
    buffer_total_size: int = 0
    queue_offsets: list[int] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    def add_message(self, sbr: SelectMappedBufferResult, queue_offset: int) -> None:
        self.buffers.append(sbr)
        self.buffer_total_size += sbr.size
        self.queue_offsets.append(queue_offset)

    def release(self) -> None:
        for b in self.buffers:
            b.release()

    def __enter__(self) -> GetMessageResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
