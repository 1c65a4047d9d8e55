"""UNIQ_KEY: the client-side message id, laid out as the Java ``MessageClientIDSetter`` does.

16 bytes printed as 32 upper-case hex characters:

======  ====  ===========================  ================================================
offset  size  field                        value
======  ====  ===========================  ================================================
0       4     ip                           the client's IPv4 address (random bytes if none)
4       2     pid                          ``os.getpid() & 0xFFFF``
6       4     instance hash                random per generator (Java: the class loader's
                                           identity hash), so two generators in one process
                                           never collide
10      4     time                         ms since the start of the current month (local
                                           time), as a signed 32-bit int
14      2     counter                      increments per id, wraps at 65536
======  ====  ===========================  ================================================

Bytes 0–9 are fixed for a generator; ``parse_uniq_key`` reads every field back, and with the
time field the approximate creation time (for bounding an index query).
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass

_FIX = struct.Struct(">4sHI")
_VAR = struct.Struct(">iH")


def local_ipv4() -> bytes:
    """The address this host uses to reach the network (no packet is sent), else loopback."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        try:
            return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            return b"\x7f\x00\x00\x01"


def month_start_ms(now_ms: int) -> int:
    """Local midnight of the first day of ``now_ms``'s month, in ms since the epoch."""
    t = dt.datetime.fromtimestamp(now_ms / 1000).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(t.timestamp() * 1000)


class UniqKeyGenerator:
    """Thread-safe generator of UNIQ_KEY ids (see the module docstring for the layout).

    ``next_id`` takes no lock: the counter is an ``itertools.count`` (one C call, atomic under
    the GIL, as Java's AtomicInteger) and the month's bounds one tuple, replaced whole; the
    variable half is f-strings (``struct.pack`` then ``hex().upper()`` cost 3x as much), the
    time's hex reused while the clock stays on the same millisecond."""

    def __init__(self, ip: bytes | None = None, pid: int | None = None, instance_hash: int | None = None) -> None:
        ip = ip if ip is not None else local_ipv4()
        if len(ip) != 4:
            ip = random.randbytes(4)  # IPv6 hosts: Java also falls back to random bytes
        pid = (os.getpid() if pid is None else pid) & 0xFFFF
        h = random.getrandbits(32) if instance_hash is None else instance_hash & 0xFFFFFFFF
        self.prefix = _FIX.pack(ip, pid, h).hex().upper()
        self._lock = threading.Lock()  # only for a new month
        self._counter = itertools.count()
        self._month = (0, 0)  # (start, next start) in ms, read without the lock
        self._head = (-1, "")  # (ms, the id's first 28 hex characters at that ms)

    def _month_start(self, now_ms: int) -> int:
        with self._lock:
            start, nxt = self._month
            if now_ms >= nxt:
                start = month_start_ms(now_ms)
                following = dt.datetime.fromtimestamp(start / 1000) + dt.timedelta(days=32)
                self._month = (start, int(following.replace(day=1).timestamp() * 1000))
            return start

    def next_id(self, now_ms: int | None = None) -> str:
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        ms, head = self._head
        if ms != now:  # sends in the same ms share the head: one int format per id, not two
            start, nxt = self._month
            if now >= nxt:
                start = self._month_start(now)
            head = f"{self.prefix}{(now - start) & 0xFFFFFFFF:08X}"  # Java's (int) cast's bytes
            self._head = (now, head)
        return f"{head}{next(self._counter) & 0xFFFF:04X}"  # and its (short) cast's


@dataclass(frozen=True)
class UniqKeyInfo:
    ip: str
    pid: int
    instance_hash: int
    time_in_month_ms: int
    counter: int

    def nearly_time_ms(self, now_ms: int | None = None) -> int:
        """The creation time, assuming the id was made this month or the month before."""
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        start = month_start_ms(now)
        t = start + self.time_in_month_ms
        if t > now:  # made last month
            t = month_start_ms(start - 1) + self.time_in_month_ms
        return t


def parse_uniq_key(uniq_key: str) -> UniqKeyInfo:
    """Fields of a 32-hex UNIQ_KEY; ValueError if it is not one."""
    if len(uniq_key) != 32:
        raise ValueError(f"a UNIQ_KEY has 32 hex characters, got {len(uniq_key)}: {uniq_key!r}")
    raw = bytes.fromhex(uniq_key)
    ip, pid, h = _FIX.unpack_from(raw, 0)
    diff, counter = _VAR.unpack_from(raw, 10)
    return UniqKeyInfo(socket.inet_ntoa(ip), pid, h, diff, counter)
