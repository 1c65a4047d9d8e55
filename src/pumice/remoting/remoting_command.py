"""RemotingCommand: one request or response of the RocketMQ remoting protocol.

Header fields (JSON names): ``code`` (request or response code), ``language`` ("JAVA",
"CPP", "PYTHON", …), ``version`` (the sender's MQVersion ordinal, see mq_version), ``opaque`` (matches a
response to its request), ``flag`` (bit 0 response, bit 1 oneway), ``remark`` (text, mostly
errors), ``extFields`` (string map; clients also send ints and bools), and the body bytes.

``ext_int`` / ``ext_bool`` / ``ext_str`` read extFields whatever type the client sent;
responses always write their extFields as strings, as the Java broker does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from pumice.remoting.mq_version import CURRENT_VERSION

RPC_TYPE_RESPONSE = 1 << 0
RPC_ONEWAY = 1 << 1
DEFAULT_VERSION = CURRENT_VERSION  # V4_9_8, on requests and responses alike, as 4.9.8


class SerializeType(IntEnum):
    JSON = 0
    ROCKETMQ = 1


class LanguageCode(IntEnum):
    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class MissingFieldError(ValueError):
    """A required extField is absent or has the wrong type; answerable with a remark."""


_TRUE = {"true", "1"}
_FALSE = {"false", "0", ""}


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    language: str = "PYTHON"
    version: int = DEFAULT_VERSION
    remark: str | None = None
    ext_fields: dict[str, Any] = field(default_factory=dict)
    body: bytes | bytearray | memoryview = b""
    # record views of a pull or a query, sent one after the other in place of ``body``
    body_parts: list[memoryview] | None = None
    serialize_type: SerializeType = SerializeType.JSON
    # called once the frame is handed to the transport (a pull releases its record views)
    after_send: Callable[[], None] | None = None

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: bytes | bytearray | memoryview = b"",
        body_parts: list[memoryview] | None = None,
    ) -> RemotingCommand:
        """The reply to this request: same opaque, response bit set, same serialization; our
        version, as a Java broker's createResponseCommand."""
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=RPC_TYPE_RESPONSE,
            language="JAVA",
            version=DEFAULT_VERSION,
            remark=remark,
            ext_fields=ext_fields or {},
            body=body,
            body_parts=body_parts,
            serialize_type=self.serialize_type,
        )

    # -- extFields, whatever type the client sent ----------------------------------------

    def ext_str(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        v = self.ext_fields.get(name)
        if v is None:
            if required:
                raise MissingFieldError(f"the request has no {name!r} field")
            return default
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)

    def ext_int(self, name: str, default: int | None = None, *, required: bool = False) -> int | None:
        """A Java ``Integer`` header field: a 32-bit value, or MissingFieldError (never a value
        that would overflow the record's int fields or a loop bound)."""
        v = self.ext_fields.get(name)
        if type(v) is str and v and "_" not in v:  # JSON headers carry strings: the hot path
            try:
                n = int(v)
            except ValueError:
                n = None
            if n is not None and -0x80000000 <= n <= 0x7FFFFFFF:
                return n
        return _ext_number(name, v, default, required, 32)

    def ext_long(self, name: str, default: int | None = None, *, required: bool = False) -> int | None:
        """A Java ``Long`` header field (offsets, timestamps, brokerId): a 64-bit value."""
        return _ext_number(name, self.ext_fields.get(name), default, required, 64)

    def ext_bool(self, name: str, default: bool = False) -> bool:
        """Booleans arrive as true/false, "true"/"false" or "0"/"1" (the C++ client)."""
        v = self.ext_fields.get(name)
        if v is None:
            return default
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return v != 0
        s = str(v).strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        return default


def _ext_number(name: str, v: Any, default: int | None, required: bool, bits: int) -> int | None:
    """ext_int off its hot path, and ext_long: absent, bool, int, or a string; a value Java's
    Integer.parseInt / Long.parseLong would refuse is refused with a remark."""
    if v is None or v == "":
        if required:
            raise MissingFieldError(f"the request has no {name!r} field")
        return default
    if isinstance(v, bool):
        return int(v)
    kind = "int" if bits == 32 else "long"
    n: int | None
    if isinstance(v, int):
        n = v
    else:
        text = str(v).strip()
        try:
            n = int(text) if "_" not in text else None
        except ValueError:
            n = None
        if n is None:
            raise MissingFieldError(f"field {name!r} must be an integer ({kind}), got {v!r}")
    if not -(1 << (bits - 1)) <= n < 1 << (bits - 1):
        raise MissingFieldError(f"field {name!r} is out of the {kind} range: {v!r}")
    return n
