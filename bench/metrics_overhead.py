"""What Prometheus metrics cost the broker: produce throughput with metrics off, and on while scraped.

    python3 -m bench.metrics_overhead [--seconds 10] [--in-flight 64] [--rounds 1] [--scrape-every 1]
                                      [--dashboard-url URL]

Each round starts `pumice namesrv` and `pumice broker` (ASYNC_FLUSH) twice in a temporary
directory: once without metrics keys (off), once with ``metricsExporterType=PROM`` while a thread
here scrapes ``/metrics`` every ``--scrape-every`` seconds. In each, after a warm-up and once the
broker is idle, ``AsyncProducer.send_async`` (1 KiB bodies, ``--in-flight`` sends outstanding;
bench.client_bench's loop) sends for ``--seconds`` to a 4-queue topic. Printed per run: msg/s,
the broker's CPU seconds per 10,000 messages, and the scrapes taken with their mean time.

``--dashboard-url`` is the hook for the dashboard (pumice dashboard): with it, the "on" run also
fetches that page every ``--scrape-every`` seconds, as an open dashboard would (give the page of
the dashboard started against this run's name server, ``{ns}`` in the URL being replaced by its
address, e.g. ``http://127.0.0.1:8080/cluster?namesrv={ns}``).

The machine is shared and has 2 cores: the figures are noisy; compare runs of one invocation.
"""

from __future__ import annotations

import argparse
import asyncio
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


def one_run(metrics: bool, args: argparse.Namespace) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="pumice-metrics-bench-")
    port = free_port()
    conf = f"metricsExporterType=PROM\nmetricsPromExporterPort={port}\n" if metrics else ""
    procs, ns, _ = start_local_cluster(root, "flushDiskType=ASYNC_FLUSH\n" + conf)
    poller = None
    try:
        run_on_uvloop(_create_topic(ns))
        run_on_uvloop(pumice_async_send(ns, TOPIC, 1.0, args.in_flight))  # warm-up
        wait_idle([p.pid for p in procs])
        if metrics:
            urls = [f"http://127.0.0.1:{port}/metrics"]
            if args.dashboard_url:
                urls.append(args.dashboard_url.replace("{ns}", ns))
            poller = Poller(urls, args.scrape_every)
            poller.start()
        cpu0 = cpu_seconds(procs[1].pid)
        n, seconds = run_on_uvloop(pumice_async_send(ns, TOPIC, args.seconds, args.in_flight))
        cpu = cpu_seconds(procs[1].pid) - cpu0
    finally:
        if poller is not None:
            poller.stop.set()
            poller.join(15)
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
    ap.add_argument("--dashboard-url", default=None, help="also fetch this page during the 'on' runs")
    args = ap.parse_args()
    print(f"AsyncProducer.send_async, 1 KiB bodies, {args.in_flight} in flight, {args.seconds:.0f} s a run")
    print(f"  {'run':<34} {'msg/s':>10} {'broker CPU s / 10k msgs':>24} {'fetches':>8} {'mean fetch ms':>14}")
    for _ in range(args.rounds):
        for metrics in (False, True):
            r = one_run(metrics, args)
            name = "metrics off" if not metrics else "metrics on, /metrics scraped"
            if metrics and args.dashboard_url:
                name += " + dashboard"
            print(f"  {name:<34} {r['rate']:>10,.0f} {r['cpu_per_10k']:>24.3f} {r['fetches']:>8.0f} "
                  f"{r['fetch_ms']:>14.1f}" + (f"  ({r['failures']:.0f} fetches failed)" if r["failures"] else ""),
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
