"""DispatchRequest: what ReputMessageService learns from one CommitLog record.

It carries just what the dispatchers (ConsumeQueue, IndexFile) and the message-arrival
listener need, so the record is parsed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    properties: dict[str, str] = field(default_factory=dict)
    success: bool = True
