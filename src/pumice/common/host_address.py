"""The host's address, as RocketMQ 4.9's ``RemotingUtil.getLocalAddress`` picks it.

It is the default of the broker's ``brokerIP1`` and ``brokerIP2``: the address the broker
publishes to the name servers, so a client on another machine must be able to reach it.

The rule (4.9's):

====  =====================================================================================
step  choice
====  =====================================================================================
1     every interface's addresses, skipping bridges (``/sys/class/net/<name>/bridge``) and
      loopback addresses
2     the first IPv4 address that starts neither with ``127.0`` nor ``192.168``
3     else the last IPv4 address (a ``192.168`` one)
4     else the first IPv6 address, in brackets (``[fd00::2]``), as 4.9 writes it
5     else the address the host name resolves to, else ``127.0.0.1``
====  =====================================================================================
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import socket
import struct
from collections.abc import Iterable

SIOCGIFADDR = 0x8915  # Linux ioctl: an interface's (primary) IPv4 address
LOOPBACK = "127.0.0.1"


def pick_local_address(addresses: Iterable[str]) -> str | None:
    """Steps 2 to 4 over non-bridge interfaces' addresses, in interface order; None if none."""
    ipv4: list[str] = []
    ipv6: list[str] = []
    for a in addresses:
        try:
            ip = ipaddress.ip_address(a.split("%")[0])
        except ValueError:
            continue
        if ip.is_loopback:
            continue
        (ipv4 if ip.version == 4 else ipv6).append(str(ip))
    for ip4 in ipv4:
        if not ip4.startswith(("127.0", "192.168")):
            return ip4
    if ipv4:
        return ipv4[-1]
    return f"[{ipv6[0]}]" if ipv6 else None


def _ipv4_of(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:  # the interface has no IPv4 address
            return None
    return socket.inet_ntoa(packed[20:24])


def _ipv6_by_interface() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6:
                    out.setdefault(parts[5], []).append(str(ipaddress.IPv6Address(bytes.fromhex(parts[0]))))
    except OSError:
        pass
    return out


def interface_addresses() -> list[str]:
    """Step 1: the addresses of the host's interfaces that are not bridges, in index order."""
    v6 = _ipv6_by_interface()
    out: list[str] = []
    for _, name in socket.if_nameindex():
        if os.path.exists(f"/sys/class/net/{name}/bridge"):
            continue
        v4 = _ipv4_of(name)
        out.extend(([v4] if v4 else []) + v6.get(name, []))
    return out


def local_address() -> str:
    """The host's address (the table above); ``127.0.0.1`` when nothing else is found."""
    try:
        picked = pick_local_address(interface_addresses())
    except OSError:
        picked = None
    if picked:
        return picked
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return LOOPBACK
