"""Check what an ack means on disk: count the broker's fsync, fdatasync and msync calls while it
acknowledges messages (strace, attached to every process of the broker with -f for all threads).

    python3 -m bench.peers.acks [--brokers pumice,redis,kafka] [--modes fsync,default]
                                [--publishers 1,64] [--seconds 3]

For each broker, mode and publisher count: a fresh broker (bench/peers/brokers.py), the acked
workload (``--publishers`` coroutines each awaiting its ack, bench/peers/workloads.py) for
``--seconds`` with
``strace -f -c -e trace=fsync,fdatasync,msync -p <each pid>`` attached from just before to just
after it, then the counts per 1,000 acknowledged messages. With one publisher, whose next send
waits for its ack, an fsync-before-ack mode needs at least one sync per ack (1,000 per 1,000);
with 64, a group commit covers several. strace stops the traced threads on
every system call while attached, so the rates here are far below the benchmark's: only the
counts matter. Prints a markdown table (the one in bench/peers/ACKS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.peers import workloads
from bench.peers.brokers import LAUNCHERS, Running
from bench.peers.cpu import tree_pids
from bench.peers.drivers import driver_for
from bench.processes import run_on_uvloop

SYSCALLS = ("fsync", "fdatasync", "msync")


def parse_summary(text: str) -> dict[str, int]:
    """The ``calls`` column of strace -c's table, by syscall name."""
    counts = dict.fromkeys(SYSCALLS, 0)
    for line in text.splitlines():
        cols = line.split()
        if cols and cols[-1] in counts and len(cols) >= 5:
            counts[cols[-1]] = int(cols[3])
    return counts


async def _measure(run: Running, broker: str, publishers: int, seconds: float, out_file: Path) -> dict[str, Any]:
    driver = driver_for(broker, run.endpoint)
    await driver.create_topic("BenchS")
    await workloads.wait_idle(run)
    pids = tree_pids(run.root_pids)
    cmd = ["strace", "-f", "-c", "-e", "trace=" + ",".join(SYSCALLS), "-o", str(out_file)]
    for pid in pids:
        cmd += ["-p", str(pid)]
    tracer = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        await asyncio.sleep(1.5)  # attached to every thread
        if tracer.poll() is not None:
            raise RuntimeError(f"strace exited: {tracer.stderr.read().decode()[-300:] if tracer.stderr else ''}")
        r = await workloads.acked(driver, run, "BenchS", workloads.make_bodies(), publishers, seconds)
    finally:
        if tracer.poll() is None:
            tracer.send_signal(signal.SIGINT)
            try:
                tracer.wait(30)
            except subprocess.TimeoutExpired:
                tracer.kill()
                tracer.wait(10)
    counts = parse_summary(out_file.read_text() if out_file.exists() else "")
    return {"acked": r.get("msgs", 0), "errors": r.get("errors", 0), "pids": len(pids), **counts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="pumice,rocketmq,kafka,redis,nats,rabbitmq")
    ap.add_argument("--modes", default="fsync,default")
    ap.add_argument("--publishers", default="1,64")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed (bash bench/peers/install.sh)")
    root = Path(tempfile.mkdtemp(prefix="pumice-acks-"))
    rows = []
    try:
        for name in args.brokers.split(","):
            la = LAUNCHERS[name]
            for mode in args.modes.split(","):
                fsync = mode == "fsync"
                label = (la.fsync_mode or "(no fsync mode)") if fsync else "default"
                if fsync and not la.fsync_mode:
                    continue  # its default mode is the other row
                why = la.missing()
                if why:
                    rows.append(f"| {name} | {label} | | not available: {why} | | | | |")
                    continue
                for pubs in (int(x) for x in args.publishers.split(",")):
                    run = la.start(root, fsync)
                    try:
                        t0 = time.perf_counter()
                        trace = root / f"{name}-{mode}-{pubs}.strace"
                        r = run_on_uvloop(_measure(run, name, pubs, args.seconds, trace))
                        syncs = r["fsync"] + r["fdatasync"] + r["msync"]
                        per_k = 1000 * syncs / r["acked"] if r["acked"] else 0.0
                        rows.append(f"| {name} | {label} | {pubs} | {r['acked']:,} | {r['fsync']:,} | "
                                    f"{r['fdatasync']:,} | {r['msync']:,} | {per_k:,.1f} |")  # fmt: skip
                        print(f"{name} {label} {pubs} publishers: {r} ({time.perf_counter() - t0:.0f} s)", flush=True)
                    finally:
                        run.stop()
                        shutil.rmtree(run.data_dir.parent, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nPublishers each awaiting its ack, {args.seconds:g} s under strace -f -c:\n")
    print("| broker | mode | publishers | acked msgs | fsync | fdatasync | msync | syncs per 1,000 acks |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
