"""What the benchmarks share: free loopback ports, starting `pumice` processes, their CPU time."""

from __future__ import annotations

import os
import socket
import subprocess
import sys


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_pumice(args: list[str]) -> subprocess.Popen[str]:
    """`python -m pumice.cli <args>`, returned once it prints "boot success" (killed if it never does)."""
    p = subprocess.Popen([sys.executable, "-m", "pumice.cli", *args], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    for _ in range(200):
        if "boot success" in p.stdout.readline():
            return p
    p.kill()
    raise RuntimeError(f"{args[0]} did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc): which side of a run was busy."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
