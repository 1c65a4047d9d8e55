"""What Prometheus metrics cost the broker: produce throughput with metrics off, and on while scraped.

    python3 -m bench.metrics_overhead [--seconds 10] [--in-flight 64] [--rounds 1] [--scrape-every 1]
                                      [--no-dashboard]

Each round starts `pumice namesrv` and `pumice broker` (ASYNC_FLUSH) three times in a temporary
directory: without metrics keys (off); with ``metricsExporterType=PROM`` while a thread here
scrapes ``/metrics`` every ``--scrape-every`` seconds; and the same with a `pumice dashboard`
process against the run's name server (its sampler asks the cluster every 10 s, as it does when
left running) while the thread also fetches its cluster and charts pages every ``--scrape-every``
seconds, as an open browser tab that refreshes would. In each, after a warm-up and once the
broker is idle, ``AsyncProducer.send_async`` (1 KiB bodies, ``--in-flight`` sends outstanding;
bench.client_bench's loop) sends for ``--seconds`` to a 4-queue topic. Printed per run: msg/s,
the broker's CPU seconds per 10,000 messages, and the fetches taken with their mean time.

The machine is shared and has 2 cores: the figures are noisy; compare runs of one invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench.client_bench import pumice_async_send
from bench.processes import cpu_seconds, free_port, run_on_uvloop, start_local_cluster, stop_all, wait_idle

TOPIC = "MetricsBenchTopic"
QUEUES = 4


class Poller(threading.Thread):
    """GETs ``urls`` every ``every_s`` seconds until stopped; counts the fetches and their time."""

    def __init__(self, urls: list[str], every_s: float) -> None:
        super().__init__(daemon=True)
        self.urls, self.every_s = urls, every_s
        self.stop = threading.Event()
        self.fetches, self.seconds, self.failures = 0, 0.0, 0

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            for url in self.urls:
                t0 = time.perf_counter()
                try:
                    with urllib.request.urlopen(url, timeout=10) as r:
                        r.read()
                except OSError:
                    self.failures += 1
                    continue
                self.seconds += time.perf_counter() - t0
                self.fetches += 1


async def _create_topic(ns: str) -> None:
    from pumice.client import AsyncMQAdmin

    async with AsyncMQAdmin(ns) as admin:
        await admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        for _ in range(100):
            try:
                await admin.topic_route(TOPIC)
                return
            except Exception:
                await asyncio.sleep(0.1)


def start_dashboard(ns: str, port: int) -> subprocess.Popen[str]:
    """`pumice dashboard -n ns --port port`, returned once it prints its banner."""
    p = subprocess.Popen([sys.executable, "-m", "pumice.cli", "dashboard", "-n", ns, "--port", str(port)],
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stdout is not None
    for _ in range(50):
        if "dashboard on http" in p.stdout.readline():
            return p
    p.kill()
    raise RuntimeError("pumice dashboard did not start")


def one_run(metrics: bool, dashboard: bool, args: argparse.Namespace) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="pumice-metrics-bench-")
    port = free_port()
    conf = f"metricsExporterType=PROM\nmetricsPromExporterPort={port}\n" if metrics else ""
    procs, ns, _ = start_local_cluster(root, "flushDiskType=ASYNC_FLUSH\n" + conf)
    poller, dash = None, None
    try:
        run_on_uvloop(_create_topic(ns))
        run_on_uvloop(pumice_async_send(ns, TOPIC, 1.0, args.in_flight))  # warm-up
        urls = [f"http://127.0.0.1:{port}/metrics"] if metrics else []
        if dashboard:
            dash_port = free_port()
            dash = start_dashboard(ns, dash_port)
            urls += [f"http://127.0.0.1:{dash_port}/", f"http://127.0.0.1:{dash_port}/charts"]
        wait_idle([p.pid for p in procs])
        if urls:
            poller = Poller(urls, args.scrape_every)
            poller.start()
        cpu0 = cpu_seconds(procs[1].pid)
        n, seconds = run_on_uvloop(pumice_async_send(ns, TOPIC, args.seconds, args.in_flight))
        cpu = cpu_seconds(procs[1].pid) - cpu0
    finally:
        if poller is not None:
            poller.stop.set()
            poller.join(15)
        if dash is not None:
            dash.terminate()
            try:
                dash.wait(15)
            except subprocess.TimeoutExpired:
                dash.kill()
        stop_all(procs, root)
    return {"rate": n / seconds, "cpu_per_10k": cpu / n * 10_000 if n else 0.0,
            "fetches": poller.fetches if poller else 0,
            "fetch_ms": poller.seconds / poller.fetches * 1000 if poller and poller.fetches else 0.0,
            "failures": poller.failures if poller else 0}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--in-flight", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--scrape-every", type=float, default=1.0)
    ap.add_argument("--no-dashboard", action="store_true", help="leave out the run with a dashboard open")
    args = ap.parse_args()
    print(f"AsyncProducer.send_async, 1 KiB bodies, {args.in_flight} in flight, {args.seconds:.0f} s a run")
    print(f"  {'run':<44} {'msg/s':>10} {'broker CPU s / 10k msgs':>24} {'fetches':>8} {'mean fetch ms':>14}")
    runs = [("metrics off", False, False), ("metrics on, /metrics scraped", True, False)]
    if not args.no_dashboard:
        runs.append(("metrics on, scraped, dashboard open", True, True))
    for _ in range(args.rounds):
        for name, metrics, dashboard in runs:
            r = one_run(metrics, dashboard, args)
            print(f"  {name:<44} {r['rate']:>10,.0f} {r['cpu_per_10k']:>24.3f} {r['fetches']:>8.0f} "
                  f"{r['fetch_ms']:>14.1f}" + (f"  ({r['failures']:.0f} fetches failed)" if r["failures"] else ""),
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
