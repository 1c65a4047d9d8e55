"""HA authentication: who may read the CommitLog from the HA port and acknowledge SYNC_MASTER puts.

RocketMQ 4.9's HA port has no authentication. Pumice's, with the master's ``aclEnable=true``,
admits a connection only when:

- it opens with an auth frame (below) signed with an admin account of the master's ACL files
  (plain_acl.yml): a Pumice slave with ``haAccessKey`` sends one; or
- it is a plain 4.9 connection (its first 8 bytes are a report) from an address matching
  ``haWhiteRemoteAddresses`` (the ACL's address patterns), or ``haAllowUnauthenticated=true``.

Anything else is closed (and logged) before the master sends a byte or counts a report. With
``aclEnable=false`` a Pumice master reads and skips an auth frame, unchecked. A RocketMQ master
cannot read one: set ``haAccessKey`` only on a slave of a Pumice master.

Auth frame (slave → master, once, first on the connection; then 8-byte reports as in 4.9):

======  =====  ==========================================================================
offset  bytes  field
======  =====  ==========================================================================
0       8      magic ``FF FF FF FF 50 48 41 31`` (``PHA1``): negative as an int64, so never a
               4.9 report (a report is an offset >= 0)
8       2      n: accessKey length (uint16 BE, 1..255)
10      n      accessKey (UTF-8)
10+n    8      timestampMs: the slave's clock (int64 BE); the master refuses more than
               ``MAX_CLOCK_SKEW_MS`` (5 min) away from its own (a replay window)
18+n    2      m: signature length (uint16 BE, 1..255)
20+n    m      signature: Base64 HMAC-SHA1 of ``accessKey + timestampMs`` (decimal) under the
               secretKey, as the ACL signs requests (``pumice.common.acl_signer``)
20+n+m  p      zeros, so the frame is a multiple of 8 bytes long
======  =====  ==========================================================================
"""

from __future__ import annotations

import hmac
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pumice.common.acl_signer import cal_signature

MAGIC = b"\xff\xff\xff\xffPHA1"
MAX_FIELD = 255
MAX_CLOCK_SKEW_MS = 5 * 60 * 1000
_U16 = struct.Struct(">H")
_I64 = struct.Struct(">q")


class HAAuthError(Exception):
    """A connection that may not replicate; the message says why (for the master's log)."""


@dataclass(frozen=True)
class AuthFrame:
    access_key: str
    timestamp_ms: int
    signature: str


def signed_content(access_key: str, timestamp_ms: int) -> bytes:
    return f"{access_key}{timestamp_ms}".encode()


def encode_auth_frame(access_key: str, secret_key: str, now_ms: int | None = None) -> bytes:
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    ak = access_key.encode()
    sig = cal_signature(signed_content(access_key, ts), secret_key).encode()
    if not 0 < len(ak) <= MAX_FIELD:
        raise ValueError(f"haAccessKey must be 1..{MAX_FIELD} bytes")
    body = MAGIC + _U16.pack(len(ak)) + ak + _I64.pack(ts) + _U16.pack(len(sig)) + sig
    return body + b"\0" * (-len(body) % 8)


def read_auth_frame(recv_exact: Callable[[int], bytes]) -> AuthFrame:
    """The rest of an auth frame whose 8-byte magic was read; ``recv_exact(n)`` reads n bytes
    (OSError when the peer is gone). HAAuthError for a malformed frame."""
    (n,) = _U16.unpack(recv_exact(2))
    if not 0 < n <= MAX_FIELD:
        raise HAAuthError(f"auth frame: accessKey length {n}, not 1..{MAX_FIELD}")
    ak = recv_exact(n)
    (ts,) = _I64.unpack(recv_exact(8))
    (m,) = _U16.unpack(recv_exact(2))
    if not 0 < m <= MAX_FIELD:
        raise HAAuthError(f"auth frame: signature length {m}, not 1..{MAX_FIELD}")
    sig = recv_exact(m)
    recv_exact(-(8 + 2 + n + 8 + 2 + m) % 8)
    try:
        return AuthFrame(ak.decode(), ts, sig.decode("ascii"))
    except UnicodeDecodeError as e:
        raise HAAuthError(f"auth frame: {e}") from e


@dataclass(frozen=True)
class HAAccount:
    secret_key: str
    admin: bool


class HAAuthenticator:
    """The master's admission rules (aclEnable=true); the broker makes it from its ACL."""

    def __init__(
        self,
        account_of: Callable[[str], HAAccount | None],
        white: Sequence[Callable[[str], bool]],
        allow_unauthenticated: bool,
    ) -> None:
        self.account_of = account_of
        self.white = tuple(white)
        self.allow_unauthenticated = allow_unauthenticated

    def check_frame(self, frame: AuthFrame, now_ms: int | None = None) -> None:
        """HAAuthError unless the frame is signed by an admin account, within the clock skew."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        account = self.account_of(frame.access_key)
        if account is None:
            raise HAAuthError(f"no ACL account {frame.access_key!r}")
        if not account.admin:
            raise HAAuthError(f"ACL account {frame.access_key!r} is not admin (replication reads the whole CommitLog)")
        if abs(now - frame.timestamp_ms) > MAX_CLOCK_SKEW_MS:
            raise HAAuthError(f"auth frame timestamp {frame.timestamp_ms} is more than 5 min from the master's {now}")
        expected = cal_signature(signed_content(frame.access_key, frame.timestamp_ms), account.secret_key)
        if not hmac.compare_digest(expected.encode(), frame.signature.encode()):
            raise HAAuthError(f"signature check failed for accessKey {frame.access_key!r}")

    def check_unauthenticated(self, ip: str) -> None:
        """HAAuthError unless a connection without an auth frame may replicate from ``ip``."""
        if self.allow_unauthenticated or any(match(ip) for match in self.white):
            return
        raise HAAuthError(
            "not authenticated (aclEnable=true): a Pumice slave sets haAccessKey (an admin account); "
            "a RocketMQ slave needs its address in haWhiteRemoteAddresses, or haAllowUnauthenticated=true"
        )
