"""The latency workload's consumer, in a process of its own:

    python3 -m bench.peers.latency_consumer BROKER ENDPOINT_JSON TOPIC COUNT TIMEOUT_S

Subscribes to TOPIC from its end with the broker's driver (on uvloop), prints ``ready`` once the
subscription stands, then records for each message ``time.time_ns()`` minus the send time the
producer wrote into the body's first 8 bytes (big-endian ns since the epoch) into an
HdrHistogram (µs), until COUNT messages or TIMEOUT_S; prints one JSON line: the count received
and the histogram, encoded."""

from __future__ import annotations

import asyncio
import json
import sys
import time

from bench.peers.drivers import driver_for
from bench.processes import run_on_uvloop

HIGHEST_US = 120_000_000


async def main(broker: str, endpoint: dict[str, object], topic: str, count: int, timeout_s: float) -> None:
    from hdrh.histogram import HdrHistogram

    hist = HdrHistogram(1, HIGHEST_US, 3)
    ready = asyncio.Event()

    def on_bodies(bodies: list[bytes]) -> None:
        now = time.time_ns()
        for b in bodies:
            us = (now - int.from_bytes(b[:8], "big")) // 1000
            hist.record_value(min(max(us, 1), HIGHEST_US))

    async def announce() -> None:
        await ready.wait()
        print("ready", flush=True)

    announcer = asyncio.ensure_future(announce())
    driver = driver_for(broker, endpoint)
    got = await driver.consume(topic, count, timeout_s, on_bodies, latest=True, ready=ready)
    announcer.cancel()
    print(json.dumps({"n": got, "hist": hist.encode().decode()}), flush=True)


if __name__ == "__main__":
    b, ep, t, n, s = sys.argv[1:6]
    run_on_uvloop(main(b, json.loads(ep), t, int(n), float(s)))
