"""What the benchmarks share: free loopback ports (``free_port``, the tests' own:
tests/helpers/ports.py), starting `pumice` processes, their CPU time, and running a coroutine
on uvloop."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from tests.helpers.ports import free_port as free_port  # one picker for tests and benchmarks

T = TypeVar("T")


def run_on_uvloop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the loop the pumice processes and sync clients use (uvloop when there)."""
    from pumice.client.sync_loop import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


def start_pumice(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`python -m pumice.cli <args>`, returned once it prints "boot success" (killed if it never does)."""
    p = subprocess.Popen([sys.executable, "-m", "pumice.cli", *args], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None
    for _ in range(200):
        if "boot success" in p.stdout.readline():
            return p
    p.kill()
    raise RuntimeError(f"{args[0]} did not start")


def start_local_cluster(
    root: str,
    broker_conf: str = "",
    store: str | None = None,
    pythonpath: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> tuple[list[subprocess.Popen[str]], str, str]:
    """`pumice namesrv` and `pumice broker` on loopback, their conf files in ``root``, the store in
    ``store`` (default ``root/store``), ``broker_conf`` lines appended to the broker's; with
    ``pythonpath``, both run with it as PYTHONPATH (a compiled build, say), and with ``extra_env``
    (``PUMICE_PURE=1``, say) in their environment. Returns the processes
    (name server first, for ``stop_all``), the name server's and the broker's addresses."""
    ns_port, br_port = free_port(), free_port()
    with open(os.path.join(root, "ns.conf"), "w") as f:
        f.write(f"listenPort={ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={root}/kv.json\n")
    with open(os.path.join(root, "broker.conf"), "w") as f:
        f.write(f"listenPort={br_port}\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{ns_port}\n"
                f"storePathRootDir={store or os.path.join(root, 'store')}\nfastListenPortEnable=false\n"
                f"{broker_conf}")  # fmt: skip
    env = None
    if pythonpath is not None or extra_env:
        env = {**os.environ, **(extra_env or {})}
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(start_pumice(["namesrv", "-c", f"{root}/ns.conf"], env))
        procs.append(start_pumice(["broker", "-c", f"{root}/broker.conf"], env))
    except BaseException:
        for p in procs:
            p.kill()
            p.wait(20)
        raise
    return procs, f"127.0.0.1:{ns_port}", f"127.0.0.1:{br_port}"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc): which side of a run was busy."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_all(procs: list[subprocess.Popen[str]], root: str) -> None:
    """Stop the processes, last started first, and remove their directory."""
    for p in reversed(procs):
        p.terminate()
        p.wait(20)
    shutil.rmtree(root, ignore_errors=True)


def wait_idle(pids: list[int], limit_s: float = 60.0) -> float:
    """Wait until the processes are idle (under 0.05 CPU seconds in 0.5 s): e.g. until brokers
    are done creating and faulting in their first CommitLog files (1 GiB each, ahead of need;
    seconds of system CPU), so that start-up work is not timed. Returns the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        before = sum(cpu_seconds(p) for p in pids)
        time.sleep(0.5)
        if sum(cpu_seconds(p) for p in pids) - before < 0.05:
            break
    return time.perf_counter() - t0
