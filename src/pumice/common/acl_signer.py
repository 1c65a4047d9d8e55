"""RocketMQ 4.9's request signature (``AclClientRPCHook``, ``AclUtils``, ``AclSigner``).

The client adds ``AccessKey`` (and ``SecurityToken``, if it has one) to the request's extFields
and signs; the broker rebuilds the same bytes and compares. Both sides use this module.

=================  ==========================================================================
step               how
=================  ==========================================================================
content            the extFields sorted by name (Java ``String.compareTo``: UTF-16 code
                   units), their *values* concatenated with no names and no separators,
                   ``Signature`` left out (the broker also leaves out ``_UNIQUE_KEY_QUERY``),
                   as UTF-8, then the body's bytes
signature          HMAC-SHA1 of the content, keyed by the secret key's UTF-8 bytes, in
                   standard Base64 with padding
ext fields         ``AccessKey``, ``SecurityToken`` (optional, never checked by 4.9's
                   broker), ``Signature``
=================  ==========================================================================

Values are signed as Java sends them: integers in decimal, booleans ``true``/``false``; a field
whose value is None is not sent. With no names and no separators, characters moved across a
field boundary keep the signature valid (and nothing stops a replay): kept as 4.9 has it, or no
Java client could sign; docs/COMPATIBILITY.md says so.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def java_string(value: Any) -> str:
    """A header field's value as Java's ``toString`` writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _java_order(name: str) -> bytes:
    return name.encode("utf-16-be")  # Java compares strings by UTF-16 code units


def _sorted_names(ext_fields: Mapping[str, Any]) -> list[str]:
    # code point order is UTF-16 order but for characters past U+FFFF: only then the slow key
    names = list(ext_fields)
    return sorted(names) if all(k.isascii() for k in names) else sorted(names, key=_java_order)


def request_content_parts(
    ext_fields: Mapping[str, Any], body: bytes | bytearray | memoryview | None, leave_out: Iterable[str] = (SIGNATURE,)
) -> tuple[bytes, bytes | bytearray | memoryview]:
    """The bytes a signature covers, as the values' part and the body (not joined: no copy)."""
    skip = set(leave_out)
    values = []
    for k in _sorted_names(ext_fields):
        v = ext_fields[k]
        if k not in skip and v is not None:
            values.append(v if v.__class__ is str else java_string(v))
    return "".join(values).encode("utf-8"), body if body else b""


def request_content(ext_fields: Mapping[str, Any], body: bytes | bytearray | memoryview | None,
                    leave_out: Iterable[str] = (SIGNATURE,)) -> bytes:  # fmt: skip
    """The bytes a signature covers."""
    head, rest = request_content_parts(ext_fields, body, leave_out)
    return head + bytes(rest) if rest else head


def cal_signature(content: bytes | tuple[bytes, bytes | bytearray | memoryview], secret_key: str) -> str:
    """HMAC-SHA1 of ``content`` (bytes, or the parts of request_content_parts), Base64."""
    mac = hmac.new(secret_key.encode("utf-8"), digestmod=hashlib.sha1)
    for part in (content,) if isinstance(content, bytes) else content:
        mac.update(part)
    return base64.b64encode(mac.digest()).decode("ascii")


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An account's keys, as the Java client's ``SessionCredentials``."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("ACL credentials need both an access key and a secret key")

    def __repr__(self) -> str:  # never print the secret
        return f"SessionCredentials(access_key={self.access_key!r})"

    def sign_request(self, request: Any) -> None:
        """A RemotingClient's ``rpc_hook``: signs a RemotingCommand's ext fields and body."""
        self.sign(request.ext_fields, request.body)

    def sign(self, ext_fields: dict[str, Any], body: bytes | bytearray | memoryview | None) -> None:
        """Adds AccessKey (SecurityToken) and Signature to ``ext_fields``; every value becomes
        the string that was signed, and None values are dropped."""
        for k in [k for k, v in ext_fields.items() if v is None]:
            del ext_fields[k]
        for k, v in ext_fields.items():
            if not isinstance(v, str):
                ext_fields[k] = java_string(v)
        ext_fields.pop(SIGNATURE, None)
        ext_fields[ACCESS_KEY] = self.access_key
        if self.security_token:
            ext_fields[SECURITY_TOKEN] = self.security_token
        ext_fields[SIGNATURE] = cal_signature(request_content_parts(ext_fields, body), self.secret_key)


def credentials(access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    """Credentials from optional keys: both or neither."""
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ValueError("give both access_key and secret_key (ACL), or neither")
    return SessionCredentials(access_key, secret_key)
