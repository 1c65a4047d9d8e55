"""SYNC_FLUSH benchmark: acknowledged puts per second and put latency under group commit.

    python3 -m bench.sync_flush_bench [--seconds 3] [--dir PATH]

For 1, 16 and 64 concurrent writers (coroutines on one event loop, the way the broker
serves producers), each putting 1 KiB messages one at a time and awaiting the flush, it
prints acknowledged msg/s and p50/p99 latency; then a paced run at 1,000 msg/s. The
machine's fdatasync latency is measured first for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time

from pumice.broker.put_message_waiter import AsyncFlushWaiter
from pumice.store import (
    DefaultMessageStore,
    FlushDiskType,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
)


def _fdatasync_latency_us(directory: str, n: int = 300) -> list[float]:
    fd, path = tempfile.mkstemp(dir=directory)
    try:
        page = os.urandom(4096)
        out = []
        for _ in range(n):
            os.write(fd, page)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            out.append((time.perf_counter() - t0) * 1e6)
        return sorted(out)
    finally:
        os.close(fd)
        os.unlink(path)


def _pct(sorted_us: list[float], p: float) -> float:
    return sorted_us[min(len(sorted_us) - 1, int(len(sorted_us) * p))]


async def _run(store: DefaultMessageStore, writers: int, seconds: float, rate: float | None) -> list[float]:
    """``writers`` producers in flight on one event loop, as a broker serves connections:
    each puts one message, awaits its flush, then puts the next (paced when ``rate``)."""
    body = os.urandom(1024)
    lat: list[float] = []
    stop = time.perf_counter() + seconds
    failures: list[PutMessageStatus] = []
    loop = asyncio.get_running_loop()
    waiter = AsyncFlushWaiter(loop)

    async def writer(w: int) -> None:
        i = 0
        interval = writers / rate if rate else 0.0
        next_at = time.perf_counter() + (interval * w / writers if interval else 0.0)
        while True:
            now = time.perf_counter()
            if now >= stop:
                return
            if interval:
                if now < next_at:
                    await asyncio.sleep(next_at - now)
                next_at += interval
            t0 = time.perf_counter()
            msg = MessageExtBrokerInner(topic="SyncTopic", body=body, queue_id=w % 8, properties={"KEYS": f"{w}-{i}"})
            r = store.put_messages((msg,), wait_flush=False)
            fut = loop.create_future()
            ok = r.is_ok() and (not store.on_flushed(r, waiter.callback_for(fut)) or await fut)
            lat.append((time.perf_counter() - t0) * 1e6)
            if not ok:
                failures.append(r.status)
            i += 1

    await asyncio.gather(*(writer(w) for w in range(writers)))
    assert not failures, failures[:3]
    return sorted(lat)


async def _run_combined(store: DefaultMessageStore, writers: int, seconds: float) -> list[float]:
    """As ``_run``, but the puts that arrive in one event-loop turn are appended with one
    ``put_messages`` call and covered by one flush request: how a broker can batch the send
    requests of many connections."""
    body = os.urandom(1024)
    lat: list[float] = []
    stop = time.perf_counter() + seconds
    loop = asyncio.get_running_loop()
    waiter = AsyncFlushWaiter(loop)
    pending: list[tuple[MessageExtBrokerInner, asyncio.Future[bool]]] = []
    failures: list[PutMessageStatus] = []

    def put_pending() -> None:
        batch = pending[:]
        pending.clear()
        r = store.put_messages([m for m, _ in batch], wait_flush=False)
        if not r.is_ok():
            failures.append(r.status)
            for _, f in batch:
                f.set_result(False)
            return
        group = loop.create_future()
        group.add_done_callback(lambda g: [f.set_result(g.result()) for _, f in batch])
        if not store.on_flushed(r, waiter.callback_for(group)):
            group.set_result(True)

    async def writer(w: int) -> None:
        i = 0
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            msg = MessageExtBrokerInner(topic="SyncTopic", body=body, queue_id=w % 8, properties={"KEYS": f"{w}-{i}"})
            fut = loop.create_future()
            if not pending:
                loop.call_soon(put_pending)
            pending.append((msg, fut))
            ok = await fut
            lat.append((time.perf_counter() - t0) * 1e6)
            if not ok:
                failures.append(PutMessageStatus.FLUSH_DISK_TIMEOUT)
            i += 1

    await asyncio.gather(*(writer(w) for w in range(writers)))
    assert not failures, failures[:3]
    return sorted(lat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--switch-interval-us", type=float, default=None, help="sys.setswitchinterval")
    args = ap.parse_args()
    if args.switch_interval_us:
        sys.setswitchinterval(args.switch_interval_us / 1e6)
    root = args.dir or tempfile.mkdtemp(prefix="pumice-sync-", dir=os.path.dirname(os.path.abspath(__file__)))
    try:
        fs = _fdatasync_latency_us(root)
        fs_med = statistics.median(fs)
        print(f"fdatasync 4 KiB: median {fs_med:,.0f} us, p99 {_pct(fs, 0.99):,.0f} us "
              f"=> {1e6 / fs_med:,.0f} single fdatasyncs/s")  # fmt: skip
        config = MessageStoreConfig(
            store_path_root_dir=os.path.join(root, "store"),
            flush_disk_type=FlushDiskType.SYNC_FLUSH,
            transient_store_pool_size=2,
        )
        with DefaultMessageStore(config) as store:
            for writers in (1, 16, 64):
                lat = asyncio.run(_run(store, writers, args.seconds, None))
                rate = len(lat) / args.seconds
                print(f"{writers:>3} writers: {rate:>9,.0f} acked msg/s ({rate / (1e6 / fs_med):5.1f}x fdatasync/s)  "
                      f"p50 {_pct(lat, 0.5):>7,.0f} us  p99 {_pct(lat, 0.99):>7,.0f} us")  # fmt: skip
            for writers in (16, 64):
                lat = asyncio.run(_run_combined(store, writers, args.seconds))
                rate = len(lat) / args.seconds
                print(f"{writers:>3} writers, puts of one loop turn combined: {rate:>9,.0f} acked msg/s "
                      f"({rate / (1e6 / fs_med):5.1f}x fdatasync/s)  p50 {_pct(lat, 0.5):>7,.0f} us  "
                      f"p99 {_pct(lat, 0.99):>7,.0f} us")  # fmt: skip
            lat = asyncio.run(_run(store, 4, args.seconds, 1000.0))
            p99 = _pct(lat, 0.99)
            print(f"paced 1,000 msg/s: {len(lat) / args.seconds:,.0f} acked msg/s  p50 {_pct(lat, 0.5):,.0f} us  "
                  f"p99 {p99:,.0f} us = {p99 / fs_med:.1f} fdatasync latencies")  # fmt: skip
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
