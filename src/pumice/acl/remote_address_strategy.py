"""Which client addresses a white-list pattern admits, as RocketMQ 4.9's
``RemoteAddressStrategyFactory``.

===================================  ==================================================
pattern                              admits
===================================  ==================================================
blank                                nobody
``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``  everybody
``192.168.1.1``, ``::1``             that address (IPv6 compared expanded)
``192.168.1.1,10.0.0.2``             any address of the list (each a whole address)
``192.168.1.{1,2,3}``                the prefix with each last part (IPv4 or IPv6)
``192.168.1.*``, ``192.168.*.*``     IPv4: one part ``*`` (0-255) or ``a-b`` at index 1-3,
``192.168.1.1-20``                   the parts after it ``*``; IPv6: ``*`` last, or
``1050::5:600:300c:1-ff``            ``a-b`` (hex) in the last group (or the one before a
                                     closing ``*``)
===================================  ==================================================

4.9 loads ``*.168.1.1`` and ``192.168.1.0-0`` and then fails every request they are checked
against, and ignores the parts after a range (``192.168.1-5.7`` admits 192.168.3.9): Pumice
refuses such patterns when the file is loaded (docs/COMPATIBILITY.md).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from pumice.acl.permission import AclError

Matcher = Callable[[str], bool]


def _v4(s: str) -> bool:
    try:
        ipaddress.IPv4Address(s)
    except ValueError:
        return False
    return True


def _v6(s: str) -> ipaddress.IPv6Address | None:
    try:
        return ipaddress.IPv6Address(s.strip("[]"))
    except ValueError:
        return None


def _normal(ip: str) -> str | None:
    """An address in one form per address: IPv4 as written, IPv6 exploded (None if neither)."""
    if _v4(ip):
        return ip
    v6 = _v6(ip)
    return v6.exploded if v6 is not None else None


def _bad(pattern: str) -> AclError:
    return AclError(f"Netaddress examine Exception netaddress is {pattern}")


def _bad_scope(pattern: str) -> AclError:
    return AclError(f"Netaddress examine scope Exception netaddress is {pattern}")


def _octet(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) <= 3 and int(text) <= 255 else None


def _range(text: str, top: int, base: int, pattern: str) -> tuple[int, int]:
    """``*`` or ``a-b`` as inclusive bounds."""
    if text == "*":
        return 0, top
    lo, sep, hi = text.partition("-")
    if sep and not lo:
        raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {text} ")
    try:
        a, b = int(lo, base), int(hi, base)
    except ValueError:
        raise _bad_scope(pattern) from None
    if not sep or not lo or a < 0 or b > top or a > b or b <= 0:
        raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {lo} , end is {hi}")
    return a, b


def _v4_range(pattern: str) -> Matcher:
    parts = pattern.split(".")
    if len(parts) != 4:
        raise _bad_scope(pattern)
    at = next((i for i in (1, 2, 3) if parts[i] == "*" or "-" in parts[i]), None)
    if at is None or any(_octet(p) is None for p in parts[:at]) or any(p != "*" for p in parts[at + 1 :]):
        raise _bad_scope(pattern)
    lo, hi = _range(parts[at], 255, 10, pattern)
    head = parts[:at]

    def match(ip: str) -> bool:
        if not _v4(ip):
            return False
        got = ip.split(".")
        return got[:at] == head and lo <= int(got[at]) <= hi

    return match


def _v6_range(pattern: str) -> Matcher:
    groups = pattern.split(":")
    # the open group: the last one, or the one before a closing '*' when it is a range
    tail = 2 if len(groups) > 2 and groups[-1] == "*" and "-" in groups[-2] else 1
    at = len(groups) - tail
    if any("*" in g or "-" in g for g in groups[:at]) or (tail == 2 and groups[-1] != "*"):
        raise _bad_scope(pattern)
    probe = _v6(":".join(groups[:at] + ["0"] * tail))  # the open groups as zeros: the rest expanded
    if probe is None:
        raise _bad_scope(pattern)
    fixed = probe.exploded.split(":")[: 8 - tail]
    lo, hi = _range(groups[at], 0xFFFF, 16, pattern)

    def match(ip: str) -> bool:
        v6 = _v6(ip)
        if v6 is None:
            return False
        got = v6.exploded.split(":")
        return got[: 8 - tail] == fixed and lo <= int(got[8 - tail], 16) <= hi

    return match


def remote_address_strategy(pattern: str | None) -> Matcher:
    """A match function for one pattern; AclError for a pattern that is not valid."""
    p = (pattern or "").strip()
    if not p:
        return lambda ip: False
    if p in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda ip: True
    if p.endswith("}"):
        sep = "." if "." in p else ":"
        head, _, last = p.rpartition(sep)
        if not last.startswith("{") or (sep == "." and len(p.split(".")) < 4):
            raise AclError("MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress")
        addrs = [head + sep + item.strip() for item in last[1:-1].split(",")]
    elif "," in p:
        addrs = [a.strip() for a in p.split(",")]
    elif "*" in p or "-" in p:
        return _v4_range(p) if "." in p else _v6_range(p)
    else:
        addrs = [p]
    allowed = set()
    for a in addrs:
        n = _normal(a)
        if n is None or (_v4(a) is False and "." in a):
            raise _bad(a)
        allowed.add(n)
    return lambda ip: _normal(ip) in allowed
