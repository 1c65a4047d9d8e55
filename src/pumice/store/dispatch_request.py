"""DispatchRequest: what ReputMessageService learns from one CommitLog record.

It carries just what the dispatchers (ConsumeQueue, IndexFile) and the message-arrival
listener need, so the record is parsed once. The properties map is decoded only when
asked for: dispatch itself needs only TAGS, KEYS and UNIQ_KEY, which are picked out of
the raw string.
"""

from __future__ import annotations


class DispatchRequest:
    __slots__ = (
        "bit_map",
        "commit_log_offset",
        "consume_queue_offset",
        "keys",
        "msg_size",
        "prepared_transaction_offset",
        "properties_string",
        "queue_id",
        "store_timestamp",
        "sys_flag",
        "tags_code",
        "topic",
        "uniq_key",
    )

    def __init__(
        self,
        topic: str,
        queue_id: int,
        commit_log_offset: int,
        msg_size: int,
        tags_code: int,
        store_timestamp: int,
        consume_queue_offset: int,
        keys: str | None,
        uniq_key: str | None,
        sys_flag: int,
        prepared_transaction_offset: int,
        properties_string: str = "",
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.commit_log_offset = commit_log_offset
        self.msg_size = msg_size
        self.tags_code = tags_code
        self.store_timestamp = store_timestamp
        self.consume_queue_offset = consume_queue_offset
        self.keys = keys
        self.uniq_key = uniq_key
        self.sys_flag = sys_flag
        self.prepared_transaction_offset = prepared_transaction_offset
        self.properties_string = properties_string
        self.bit_map: bytes | None = None  # the SQL92 filter bit map (CommitLogDispatcherCalcBitMap)

    @property
    def properties(self) -> dict[str, str]:
        from pumice.common.message_decoder import string_to_message_properties

        return string_to_message_properties(self.properties_string)

    def __repr__(self) -> str:
        return (
            f"DispatchRequest(topic={self.topic!r}, queue_id={self.queue_id}, "
            f"commit_log_offset={self.commit_log_offset}, msg_size={self.msg_size}, tags_code={self.tags_code}, "
            f"consume_queue_offset={self.consume_queue_offset}, keys={self.keys!r}, uniq_key={self.uniq_key!r})"
        )
