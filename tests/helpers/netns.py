"""Processes in their own network namespaces on one bridge, so a test can cut one off.

``Bridge(n)`` makes a Linux bridge in this (the test's) namespace with address
``10.<a>.<b>.254/24`` and ``n`` namespaces, each joined to it by a veth pair and given
``10.<a>.<b>.<i + 1>``; ``prefix(i)`` is the ``ip netns exec`` that runs a command in
namespace ``i`` (it execs, so the process's pid is the command's own). ``isolate(i)`` takes
the bridge's end of namespace ``i``'s veth down: nothing reaches it or leaves it (peers, name
server, the test); ``heal(i)`` brings it back. ``close()`` deletes the namespaces (their veths
go with them) and the bridge. Needs root and ``ip``; ``why_not()`` says why not, for a skip.

======================  =============================================
name                    what
======================  =============================================
``pmbr<tag>``           the bridge (``tag``: 6 hex digits, one per Bridge)
``pm<tag>-<i>``         namespace ``i``
``pv<tag><i>``          the bridge's end of its veth (``eth0`` inside)
======================  =============================================
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys

from tests.helpers.faults import SBIN_PATH, run_tool


def why_not() -> str | None:
    """None where namespaces can be made here; else why not."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "network namespaces need Linux and root"
    if shutil.which("ip", path=SBIN_PATH) is None:
        return "no `ip` (iproute2)"
    return None


class Bridge:
    def __init__(self, n: int) -> None:
        tag = secrets.token_hex(3)
        self.bridge = f"pmbr{tag}"
        self.names = [f"pm{tag}-{i}" for i in range(n)]
        self.veths = [f"pv{tag}{i}" for i in range(n)]
        a, b = 100 + secrets.randbelow(150), secrets.randbelow(250)
        self.hosts = [f"10.{a}.{b}.{i + 1}" for i in range(n)]
        self.gateway = f"10.{a}.{b}.254"
        try:
            self._ip("link", "add", self.bridge, "type", "bridge")
            self._ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            self._ip("link", "set", self.bridge, "up")
            for name, veth, host in zip(self.names, self.veths, self.hosts, strict=True):
                self._ip("netns", "add", name)
                self._ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
                self._ip("link", "set", veth, "master", self.bridge, "up")
                self._ip("-n", name, "addr", "add", f"{host}/24", "dev", "eth0")
                self._ip("-n", name, "link", "set", "eth0", "up")
                self._ip("-n", name, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _ip(*args: str) -> None:
        r = run_tool(["ip", *args], timeout=20)
        assert r.returncode == 0, f"ip {' '.join(args)}: {r.stderr.strip()}"

    def prefix(self, i: int) -> list[str]:
        return [shutil.which("ip", path=SBIN_PATH) or "ip", "netns", "exec", self.names[i]]

    def isolate(self, i: int) -> None:
        self._ip("link", "set", self.veths[i], "down")

    def heal(self, i: int) -> None:
        self._ip("link", "set", self.veths[i], "up")

    def close(self) -> None:
        for name in self.names:
            run_tool(["ip", "netns", "del", name])
        run_tool(["ip", "link", "del", self.bridge])
