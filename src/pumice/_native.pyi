# pumice._native, the Rust extension (native/src/python.rs); see pumice.native
from collections.abc import Collection
from typing import Any, TypeVar

_C = TypeVar("_C")

LANGUAGES: tuple[str, ...]

def decode_frame(
    frame: bytes | bytearray | memoryview, command_class: type[_C], serialize_types: tuple[Any, ...], /
) -> _C | None: ...
def decode_frames(
    buf: bytes | bytearray | memoryview,
    max_frame_length: int,
    command_class: type[_C],
    serialize_types: tuple[Any, ...],
    /,
) -> tuple[list[_C], int] | None: ...
def encode_head(
    serialize_type: int,
    code: object,
    language: object,
    version: object,
    opaque: object,
    flag: object,
    remark: object,
    ext_fields: object,
    body_len: int,
    /,
) -> bytes | None: ...

# record_decode (native/src/python_record_decode.rs)
def decode_messages(
    body: bytes | bytearray | memoryview, message_class: type[_C], broker_name: object, extra_properties: object, /
) -> tuple[list[_C], bool] | None: ...
def scan_records(buf: object, pos: int, limit: int, crc: Any, /) -> tuple[int, int, bool] | None: ...
def string_to_message_properties(s: str, /) -> dict[str, str] | None: ...

# message_batch (native/src/python_message_batch.rs)
def encode_batch_body(bodies: list[Any], flags: list[Any], properties: list[Any], /) -> bytes | None: ...

# record_columns (native/src/python_record_columns.rs)
def property_columns(data: Any, bounds: Any, picked: list[bytes], /) -> tuple[bytes, ...] | None: ...
def scan_units(
    buf: bytes | bytearray | memoryview,
    n: int,
    codes: Collection[int] | None,
    limits: tuple[int, int, int, int, int, int, int, int],
    cursor: tuple[int, int, int, int, int, int, int, int],
    view: memoryview | None,
    /,
) -> tuple[int, tuple[int, int, int, int, int, int, int, int], list[memoryview], list[int]] | None: ...
def index_key_hashes(keys: list[str], /) -> list[int] | None: ...

# message_encode (native/src/python_message_encode.rs)
def encode_record_bytes(
    topic_blob: Any,
    body: Any,
    properties: Any,
    queue_id: Any,
    flag: Any,
    sys_flag: Any,
    born_timestamp: Any,
    born_host: Any,
    store_host: Any,
    reconsume_times: Any,
    prepared_transaction_offset: Any,
    /,
) -> bytes | None: ...
def encode_batch_records(
    raw: Any,
    topic_blob: Any,
    queue_id: Any,
    sys_flag: Any,
    born_timestamp: Any,
    born_host: Any,
    store_host: Any,
    reconsume_times: Any,
    suffix: Any,
    max_size: Any,
    /,
) -> tuple[bytearray, list[Any]] | None: ...
def join_message_ids(prefix: Any, offsets: Any, /) -> str | None: ...
def batch_properties_holding(raw: Any, needles: tuple[Any, ...], /) -> list[tuple[int, int, int]] | None: ...

# send_request (native/src/python_send_request.rs)
def send_header_fields(ext_fields: Any, v2: Any, /) -> tuple[dict[str, Any], tuple[Any, ...]] | None: ...
def send_properties(header_props: Any, cluster: Any, orders: Any, /) -> tuple[dict[str, str], str, Any] | None: ...
def record_batch_columns(data: Any, starts: Any, picked: list[bytes], /) -> tuple[bytes, ...] | None: ...
