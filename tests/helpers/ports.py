"""Free loopback ports for the processes tests start: ``free_port()``.

A broker on port P also listens on P - 2 (the fast/VIP port) and P + 1 (the HA port), so a
port is handed out only when P - 2 .. P + 2 can all be bound. Ports come from below the
kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default): a port in
that range can be taken by any outgoing connection between the pick and the process's bind,
which once failed CI. No port (nor a neighbour) is handed out twice by one process, and in a
parallel run each worker draws from its own slice of the range (``parallel.worker_slice()``),
so two workers never hand out the same port.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time

from tests.helpers.parallel import worker_slice

_LOWEST = 20000  # above the fixed ports of common services (and RocketMQ's 9876, 10909-10912)
_SPAN = 12000  # how far below the ephemeral range ports are drawn from
_NEIGHBOURS = range(-2, 3)  # P - 2 .. P + 2
_handed_out: set[int] = set()  # every port of every family handed out so far
_lock = threading.Lock()
_rng = random.Random(os.getpid() ^ time.monotonic_ns())


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _candidates() -> tuple[int, int]:
    """The [low, high) range ports are drawn from: below the ephemeral range, else above it;
    in a parallel run, this worker's slice of it."""
    low, high = _ephemeral_range()
    if low - 2 - _LOWEST >= 1000:
        low, high = max(_LOWEST, low - 2 - _SPAN), low - 2
    elif 65533 - (high + 3) >= 1000:
        low, high = high + 3, 65533
    else:
        low, high = _LOWEST, 65533  # an ephemeral range over (nearly) everything: no better choice
    index, count = worker_slice()
    width = (high - low) // count
    # 2 ports of margin at each inner edge: a port's neighbours (P - 2 .. P + 2) stay in its slice
    return low + index * width + (2 if index else 0), low + (index + 1) * width - (2 if index < count - 1 else 0)


def _bindable(port: int) -> bool:
    # on every address: a process may listen on 0.0.0.0 (RocketMQ's own broker does)
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A free port P for a process on 127.0.0.1, with P - 2 .. P + 2 free too."""
    low, high = _candidates()
    with _lock:
        for _ in range(500):
            port = _rng.randrange(low, high)
            family = {port + d for d in _NEIGHBOURS}
            if family & _handed_out or not all(_bindable(p) for p in sorted(family)):
                continue
            _handed_out.update(family)
            return port
    raise RuntimeError(f"no free port with free neighbours in {low}-{high}")
