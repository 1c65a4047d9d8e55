# pumice._native, the Rust extension (native/src/python.rs); see pumice.native
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
def record_batch_columns(data: Any, starts: Any, picked: list[bytes], /) -> tuple[bytes, ...] | None: ...
