"""Results of a put: PutMessageStatus, AppendMessageStatus and their result objects."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum

from pumice.common.message import HostAddress, MessageExtBatch, MessageExtBrokerInner
from pumice.common.message_decoder import create_message_id, join_message_ids


class PutMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    # RocketMQ 5's timer refusals (the put hook of pumice.broker.timer_message_hook)
    WHEEL_TIMER_FLOW_CONTROL = "WHEEL_TIMER_FLOW_CONTROL"
    WHEEL_TIMER_MSG_ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"
    WHEEL_TIMER_NOT_ENABLE = "WHEEL_TIMER_NOT_ENABLE"


class AppendMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)
class AppendMessageResult:
    """Where an append landed. For a batch, the per-message lists hold every message."""

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    store_host: HostAddress = (b"\x7f\x00\x00\x01", 0)
    wrote_offsets: list[int] = field(default_factory=list)
    logics_offsets: list[int] = field(default_factory=list)

    @property
    def msg_id(self) -> str:
        """The offset msgId; comma-joined for a batch, as RocketMQ reports it."""
        if len(self.wrote_offsets) > 1:
            return join_message_ids(self.store_host, self.wrote_offsets)
        return create_message_id(self.store_host, self.wrote_offset)

    @property
    def msg_ids(self) -> list[str]:
        offsets = self.wrote_offsets or [self.wrote_offset]
        return [create_message_id(self.store_host, o) for o in offsets]


@dataclass(slots=True)
class PutMessageResult:
    """A put's outcome; ``remark`` says why when it was refused (the answer's remark)."""

    status: PutMessageStatus
    append_message_result: AppendMessageResult | None = None
    remark: str = ""
    # DLedger mode, a put made without waiting: done once ``status`` holds the quorum's outcome
    quorum: Future[None] | None = None

    def is_ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK and self.append_message_result is not None


# A put hook (RocketMQ 5's PutMessageHook): run on each message (or batch) before it is
# appended; it may change it in place, or refuse the put with a result.
PutMessageHook = Callable[[MessageExtBrokerInner | MessageExtBatch], PutMessageResult | None]
