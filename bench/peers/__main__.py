"""Pumice next to Apache RocketMQ 4.9.7, Kafka 3.9 (KRaft), Redis Streams, NATS JetStream and
RabbitMQ streams on this machine, with the same workloads and the same Python asyncio clients
setup (uvloop):

    bash bench/peers/install.sh                      # once: Debian packages, Python clients, jars
    python3 -m bench.peers [--reps 3] [--quick] [--brokers pumice,kafka,...] [--out FILE.md]

For each rep, each broker in turn (interleaved rep by rep) gets two sessions, each on a freshly
started broker with an empty data dir under a temp dir (bench/peers/session.py): its default mode
(produce one message a send, produce batches of 64, consume from the start, open-loop latency
with the consumer in a second process) and its fsync-before-ack mode (64 publishers each awaiting
its ack). The machine's disk figures (bench/disk_reference.py) are measured first, in the same
run. The markdown report (bench/peers/report.py) goes to stdout and to ``--out``, the raw figures
to the same name with ``.json``. A broker that cannot be installed or started here gets a row
saying so and the run goes on. ``--quick``: 20,000 messages, 3 s latency and acked phases,
1 rep (development). Every process started is stopped by pid, on Ctrl-C too.

The same brokers driven by native clients (the official Java client, Kafka's perf tools), so
that the broker and not a Python client is measured: ``python3 -m bench.peers.native_clients``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.peers import disk, report
from bench.peers.brokers import LAUNCHERS
from bench.peers.session import Config, default_session, fsync_session
from bench.peers.workloads import make_bodies


def _versions() -> dict[str, str]:
    v: dict[str, str] = {"rocketmq": "4.9.7", "kafka": "3.9.1"}

    def cmd(args: list[str]) -> str:
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=20, check=False)
            return (r.stdout or r.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"

    v["redis"] = cmd(["redis-server", "--version"]).split(" sha=")[0]
    v["nats"] = cmd(["nats-server", "--version"])
    v["rabbitmq"] = cmd(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"])
    v["java"] = cmd(["java", "-version"])
    for pkg in ("pumice", "aiokafka", "redis", "hiredis", "nats-py", "rstream", "uvloop"):
        try:
            v[f"py:{pkg}"] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            v[f"py:{pkg}"] = "missing"
    from pumice.native import data_plane_line

    v["pumice build"] = data_plane_line()
    v["python"] = platform.python_version()
    return v


def broker_names(ap: argparse.ArgumentParser, value: str, known: list[str]) -> list[str]:
    """``--brokers``' comma-separated names, each one of ``known`` (else the parser's error)."""
    names = [b.strip() for b in value.split(",") if b.strip()]
    unknown = [b for b in names if b not in known]
    if unknown:
        ap.error(f"unknown broker(s) {unknown}; known: {known}")
    return names


def _machine() -> str:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({model}), {mem:.0f} GiB, Linux {platform.release()}"


def _missing_client(name: str) -> str | None:
    mods = {"kafka": "aiokafka", "redis": "redis.asyncio", "nats": "nats", "rabbitmq": "rstream"}
    try:
        __import__("hdrh.histogram")
        if name in mods:
            __import__(mods[name])
    except ImportError as e:
        return f"Python client missing ({e}); pip install -e '.[peers]'"
    return None


_interrupted = [False]


def _on_sigint(signum: int, frame: Any) -> None:
    """Ctrl-C: remember it (the run stops after the session in progress, whose broker is stopped
    in its ``finally``, even where a library swallows the cancellation) and raise KeyboardInterrupt."""
    _interrupted[0] = True
    signal.default_int_handler(signum, frame)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=None, help="reps per broker (default 3; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="small counts and 1 rep, for development")
    ap.add_argument("--brokers", default=",".join(LAUNCHERS), help="comma-separated, of: " + ",".join(LAUNCHERS))
    ap.add_argument("--messages", type=int, default=None, help="messages per produce phase (200000; quick 20000)")
    ap.add_argument("--rate", type=float, default=5000.0, help="open-loop latency rate, msg/s")
    ap.add_argument("--latency-seconds", type=float, default=None, help="(10; quick 3)")
    ap.add_argument("--acked-seconds", type=float, default=None, help="(10; quick 3)")
    ap.add_argument("--disk-mib", type=int, default=None, help="disk reference write size (1024; quick 256)")
    ap.add_argument("--out", type=Path, default=Path("bench/peers/results/peers.md"))
    args = ap.parse_args()
    names = broker_names(ap, args.brokers, list(LAUNCHERS))
    q = args.quick
    reps = args.reps if args.reps is not None else (1 if q else 3)
    cfg = Config(
        messages=args.messages or (20_000 if q else 200_000),
        rate=args.rate,
        latency_s=args.latency_seconds or (3.0 if q else 10.0),
        acked_s=args.acked_seconds or (3.0 if q else 10.0),
    )
    started = time.perf_counter()
    results: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "config": {**cfg.__dict__, "reps": reps, "quick": q},
        "machine": _machine(),
        "versions": _versions(),
        "brokers": {},
    }
    for name in names:
        why = LAUNCHERS[name].missing() or _missing_client(name)
        results["brokers"][name] = {"available": why is None, "reason": why, "reps": []}
        if why:
            print(f"{name}: not available: {why}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="pumice-peers-"))
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        print(f"disk reference ({args.disk_mib or (256 if q else 1024)} MiB) in {root} ...", flush=True)
        results["disk_reference"] = disk.reference(root, args.disk_mib or (256 if q else 1024))
        bodies = make_bodies()
        for rep in range(1, reps + 1):
            for name in names:
                b = results["brokers"][name]
                if not b["available"]:
                    continue
                if _interrupted[0]:
                    raise KeyboardInterrupt
                la = LAUNCHERS[name]
                t0 = time.perf_counter()
                print(f"rep {rep}/{reps} {name}: default mode ...", flush=True)
                d = default_session(la, root, cfg, bodies)
                print(f"rep {rep}/{reps} {name}: {la.fsync_mode or 'default mode (no fsync mode)'} ...", flush=True)
                if _interrupted[0]:
                    raise KeyboardInterrupt
                f = fsync_session(la, root, cfg, bodies)
                b["reps"].append({"default": d, "fsync": f})
                if rep == 1 and (d.get("start_error") and f.get("start_error")):
                    b["available"], b["reason"] = False, f"did not start: {d['start_error']}"
                print(f"rep {rep}/{reps} {name}: done in {time.perf_counter() - t0:.0f} s"
                      + (f" ({d.get('start_error') or d.get('session_error')})"
                         if d.get("start_error") or d.get("session_error") else ""), flush=True)  # fmt: skip
    except KeyboardInterrupt:
        print("interrupted: the report covers the sessions that finished", flush=True)
        results["interrupted"] = True
    finally:
        shutil.rmtree(root, ignore_errors=True)
        results["duration_s"] = time.perf_counter() - started
    text = report.write(results, args.out, progress=lambda s: print(s, file=sys.stderr))
    print(text)


if __name__ == "__main__":
    main()
