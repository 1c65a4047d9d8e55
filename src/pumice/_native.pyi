# pumice._native, the Rust extension (native/src/python.rs); see pumice.native
from typing import Any

LANGUAGES: tuple[str, ...]

def decode_frame(
    frame: bytes | bytearray | memoryview, /
) -> tuple[int, int, int, int, str, int, str | None, dict[str, Any], bytes] | None: ...
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
