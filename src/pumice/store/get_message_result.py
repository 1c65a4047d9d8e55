"""Results of a read: GetMessageStatus and GetMessageResult (zero-copy record views)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pumice.store.mapped_file import MappedFile


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

    ``buffers`` holds one memoryview per record, straight over the mapped CommitLog (no
    copy; the record bytes are what a pull response carries). The result holds a
    reference on each CommitLog file it points into, so callers ``release()`` it once the
    bytes are sent or copied.
    """

    status: GetMessageStatus = GetMessageStatus.NO_MESSAGE_IN_QUEUE
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    suggest_pulling_from_slave: bool = False
    buffers: list[memoryview] = field(default_factory=list)
    buffer_total_size: int = 0
    queue_offsets: list[int] = field(default_factory=list)
    held_files: list[MappedFile] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    def release(self) -> None:
        for b in self.buffers:
            try:
                b.release()
            except BufferError:
                pass  # a caller still exports it; the GC frees it later
        self.buffers = []
        held, self.held_files = self.held_files, []
        for mf in held:
            mf.release()

    def __enter__(self) -> GetMessageResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
