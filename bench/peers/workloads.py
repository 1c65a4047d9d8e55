"""The four workloads, the same for every broker, each timed with the CPU of the broker's process
tree (/proc) and of this client process over the same interval:

1. ``produce``: ``n`` messages from ``producers`` publishers, up to ``in_flight`` unacknowledged
   each, one message a send; and the batched variant (``batch`` messages a send, up to
   ``in_flight`` messages, i.e. ``in_flight // batch`` batches, in flight per publisher).
2. ``consume``: all ``n`` messages of the produce topic, from the start, with one consumer.
3. ``latency``: an open loop at ``rate`` msg/s for ``seconds``; each body starts with its
   scheduled send time (``time.time_ns()``, 8 bytes big-endian), which a consumer in a second
   process (bench/peers/latency_consumer.py) subtracts from its clock on receipt.
4. ``acked``: ``publishers`` coroutines (over 4 client connections) each sending one message and
   awaiting its acknowledgement, for ``seconds``, on a broker started in its fsync-before-ack mode
   where it has one; per-message ack latency.

Bodies are 1 KiB of seeded random bytes (``make_bodies``), the same for every broker. Every loop
is bounded by a count and a deadline.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from bench.peers.brokers import Running
from bench.peers.cpu import client_cpu_seconds, tree_cpu_seconds
from bench.peers.drivers import Driver, Publisher

BODY_SIZE = 1024
DISTINCT_BODIES = 4096
CLIENT_CONNECTIONS = 4  # of the acked workload's publishers


def make_bodies(seed: int = 20261126) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(BODY_SIZE) for _ in range(DISTINCT_BODIES)]


@dataclass
class Meter:
    """Wall time, broker CPU and client CPU between ``start()`` and ``stop()``."""

    run: Running
    wall: float = 0.0
    server: float = 0.0
    client: float = 0.0

    def start(self) -> Meter:
        self.wall, self.server, self.client = time.perf_counter(), self._server(), client_cpu_seconds()
        return self

    def stop(self) -> Meter:
        self.wall = time.perf_counter() - self.wall
        self.server = self._server() - self.server
        self.client = client_cpu_seconds() - self.client
        return self

    def _server(self) -> float:
        return tree_cpu_seconds(self.run.root_pids)

    def figures(self, n: int) -> dict[str, float]:
        per = 1e6 / n if n else 0.0
        return {
            "seconds": self.wall,
            "msg_s": n / self.wall if self.wall > 0 else 0.0,
            "server_cpu_s": self.server,
            "client_cpu_s": self.client,
            "server_us_msg": self.server * per,
            "client_us_msg": self.client * per,
            "server_core": self.server / self.wall if self.wall > 0 else 0.0,
        }


async def wait_idle(run: Running, limit_s: float = 30.0) -> float:
    """Until the broker's processes use under 5% of a core over 0.5 s (start-up work, background
    flushes of the previous phase), at most ``limit_s``; the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        before = tree_cpu_seconds(run.root_pids)
        await asyncio.sleep(0.5)
        if tree_cpu_seconds(run.root_pids) - before < 0.025:
            break
    return time.perf_counter() - t0


async def _publishers(driver: Driver, topic: str, k: int, batch: int, bodies: list[bytes]) -> list[Publisher]:
    pubs: list[Publisher] = []
    try:
        for _ in range(k):
            pubs.append(await driver.publisher(topic, batch))
        for p in pubs:  # connections, routes, the publisher's first request: not timed
            await asyncio.wait_for(p.send(bodies[0]), 60)
    except BaseException:
        await _close(pubs)
        raise
    return pubs


async def _close(pubs: list[Publisher]) -> None:
    for p in pubs:
        try:
            await asyncio.wait_for(p.close(), 30)
        except Exception:
            pass


class _Errors:
    def __init__(self) -> None:
        self.count = 0
        self.first = ""

    def add(self, e: BaseException) -> None:
        self.count += 1
        if not self.first:
            self.first = f"{type(e).__name__}: {e}"[:300]


async def produce(
    driver: Driver, run: Running, topic: str, bodies: list[bytes], n: int, producers: int, in_flight: int,
    batch: int, timeout_s: float,
) -> dict[str, Any]:  # fmt: skip
    """``n`` messages (a whole number of batches) to ``topic``; msg/s and CPU per message."""
    pubs = await _publishers(driver, topic, producers, batch, bodies)
    try:
        sends = n // batch
        nxt = [0]
        done = [0]
        errors = _Errors()
        deadline = time.monotonic() + timeout_s

        async def worker(p: Publisher) -> None:
            while time.monotonic() < deadline and errors.count < 100:
                i = nxt[0]
                if i >= sends:
                    return
                nxt[0] = i + 1
                try:
                    if batch == 1:
                        await p.send(bodies[i % DISTINCT_BODIES])
                    else:
                        j = (i * batch) % DISTINCT_BODIES
                        chunk = bodies[j : j + batch]
                        await p.send_batch(chunk + bodies[: batch - len(chunk)])
                    done[0] += batch
                except Exception as e:
                    errors.add(e)

        per_pub = max(1, in_flight // batch)
        m = Meter(run).start()
        await asyncio.gather(*(worker(p) for p in pubs for _ in range(per_pub)))
        m.stop()
        out: dict[str, Any] = {"msgs": done[0], **m.figures(done[0]), "errors": errors.count}
        if errors.first:
            out["first_error"] = errors.first
        if time.monotonic() >= deadline:
            out["timed_out"] = True
        return out
    finally:
        await _close(pubs)


async def consume(driver: Driver, run: Running, topic: str, n: int, timeout_s: float) -> dict[str, Any]:
    got = [0]

    def on_bodies(bodies: list[bytes]) -> None:
        got[0] += len(bodies)

    m = Meter(run).start()
    n_read = await driver.consume(topic, n, timeout_s, on_bodies)
    m.stop()
    return {"msgs": n_read, **m.figures(n_read), "expected": n}


async def latency(
    driver: Driver, run: Running, topic: str, bodies: list[bytes], rate: float, seconds: float
) -> dict[str, Any]:
    """Open loop: message i is due at t0 + i / rate whether or not earlier sends were
    acknowledged (up to 50,000 outstanding); its body carries that due time."""
    from hdrh.histogram import HdrHistogram

    total = int(rate * seconds)
    pubs = await _publishers(driver, topic, 1, 1, bodies)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.peers.latency_consumer", driver.name, json.dumps(run.endpoint), topic,
        str(total), str(seconds + 60), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise RuntimeError(f"latency consumer did not start: {line[:300]!r}")
        await asyncio.sleep(0.5)  # a push consumer's first pull / credit is on its way
        p = pubs[0]
        pending: set[asyncio.Future[None]] = set()
        errors = _Errors()

        def finished(f: asyncio.Future[None]) -> None:
            pending.discard(f)
            if not f.cancelled() and f.exception() is not None:
                errors.add(f.exception())  # type: ignore[arg-type]

        m = Meter(run).start()
        t0, wall0 = time.monotonic(), time.time_ns()
        i = 0
        overloaded = False
        while i < total:
            now = time.monotonic()
            due = min(total, int((now - t0) * rate) + 1)
            while i < due:
                sent_ns = wall0 + int(i * 1e9 / rate)
                body = sent_ns.to_bytes(8, "big") + bodies[i % DISTINCT_BODIES][8:]
                f = asyncio.ensure_future(p.send(body))
                f.add_done_callback(finished)
                pending.add(f)
                i += 1
            if len(pending) > 50_000 or now - t0 > seconds * 3:
                overloaded = True
                break
            await asyncio.sleep(0.001)
        send_s = time.monotonic() - t0
        if pending:
            await asyncio.wait(pending, timeout=60)
        out_line = await asyncio.wait_for(child.stdout.readline(), seconds + 90)
        m.stop()
        r = json.loads(out_line)
        hist = HdrHistogram.decode(r["hist"].encode())
        out: dict[str, Any] = {
            "rate": rate, "sent": i, "received": r["n"], "send_seconds": send_s,
            "p50_us": hist.get_value_at_percentile(50), "p99_us": hist.get_value_at_percentile(99),
            "p999_us": hist.get_value_at_percentile(99.9), "max_us": hist.get_max_value(),
            "server_core": m.server / m.wall, "server_us_msg": m.server * 1e6 / max(i, 1),
            "client_core": m.client / m.wall, "errors": errors.count, "overloaded": overloaded,
        }  # fmt: skip
        if errors.first:
            out["first_error"] = errors.first
        return out
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        await _close(pubs)


async def acked(
    driver: Driver, run: Running, topic: str, bodies: list[bytes], publishers: int, seconds: float
) -> dict[str, Any]:
    from hdrh.histogram import HdrHistogram

    pubs = await _publishers(driver, topic, CLIENT_CONNECTIONS, 1, bodies)
    try:
        hist = HdrHistogram(1, 120_000_000, 3)
        errors = _Errors()
        done = [0]
        stop_at = time.monotonic() + seconds

        async def one(k: int) -> None:
            p = pubs[k % len(pubs)]
            i = k
            while time.monotonic() < stop_at and errors.count < 100:
                t = time.perf_counter_ns()
                try:
                    await asyncio.wait_for(p.send(bodies[i % DISTINCT_BODIES]), 30)
                    hist.record_value(max(1, (time.perf_counter_ns() - t) // 1000))
                    done[0] += 1
                except Exception as e:
                    errors.add(e)
                i += publishers

        m = Meter(run).start()
        await asyncio.gather(*(one(k) for k in range(publishers)))
        m.stop()
        out: dict[str, Any] = {
            "msgs": done[0], **m.figures(done[0]), "publishers": publishers,
            "p50_us": hist.get_value_at_percentile(50), "p99_us": hist.get_value_at_percentile(99),
            "max_us": hist.get_max_value(), "errors": errors.count,
        }  # fmt: skip
        if errors.first:
            out["first_error"] = errors.first
        return out
    finally:
        await _close(pubs)
