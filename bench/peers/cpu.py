"""CPU seconds from /proc: a server's process tree (utime + stime of each live process under the
given pids, plus what their reaped children left in cutime + cstime) and this client process."""

from __future__ import annotations

import os
import time

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return None


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                kids.setdefault(int(st[1]), []).append(int(name))
    return kids


def tree_pids(roots: list[int]) -> list[int]:
    """The roots and every live descendant of theirs."""
    kids = _children()
    out: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def tree_cpu_seconds(roots: list[int]) -> float:
    """utime + stime of the process trees under ``roots`` (live processes), plus the cutime +
    cstime the live ones hold for their children that already exited."""
    total = 0
    for pid in tree_pids(roots):
        st = _stat(pid)
        if st is not None:  # fields after the comm: [11] utime, [12] stime, [13] cutime, [14] cstime
            total += int(st[11]) + int(st[12]) + int(st[13]) + int(st[14])
    return total / _TICK


def client_cpu_seconds() -> float:
    """This process's user + system CPU seconds (all its threads)."""
    return time.process_time()
