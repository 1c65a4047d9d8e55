"""Broker CPU per message on the paced path, in one process, without sockets.

    python3 -m bench.request_path_bench [--messages 20000] [--profile] [--set KEY=VALUE]

A started BrokerController (its store in a temporary directory, ASYNC_FLUSH, no name
server) gets requests through a connection whose transport only counts bytes: per message,
a SEND_MESSAGE_V2 of 1 KiB (as broker_bench's paced run sends) and, for the long-polling
consumer of its queue, the next PULL_MESSAGE (held until the message arrives and wakes it).
The loop runs until nothing is left to do after each message. Prints µs of this process's CPU
per message, and the event loop's wall time in each phase; ``--profile`` adds the cProfile
table of the timed part. ``--set`` takes broker.conf lines (e.g. flushCommitLogLeastPages).

Everything a message costs the broker's event loop is here (frame decoding, processors,
put, dispatch, the woken pull, response encoding) except the socket system calls; the
broker's other threads (flush) run as they do in the broker.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import shutil
import tempfile
import time

from bench.broker_bench import QUEUES, paced_send_request, pull_request
from bench.processes import run_on_uvloop, wait_idle
from pumice.broker.broker_config import BrokerConfig
from pumice.broker.broker_controller import BrokerController
from pumice.config import apply_properties
from pumice.remoting.remoting_codec import encode_bytes
from pumice.remoting.remoting_server import _Connection
from pumice.store.message_store_config import MessageStoreConfig

TOPIC = "LatencyTopic"


class CountingTransport:
    def __init__(self) -> None:
        self.written = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def writelines(self, parts: list[bytes]) -> None:
        self.written += sum(len(p) for p in parts)

    def get_write_buffer_size(self) -> int:
        return 0  # everything is taken at once

    def close(self) -> None:
        pass


def send_frame(i: int, payload: bytes) -> bytes:
    cmd = paced_send_request(TOPIC, i % QUEUES, payload)
    cmd.opaque = 2 * i + 1
    return encode_bytes(cmd)


def pull_frame(i: int, queue_id: int, offset: int) -> bytes:
    cmd = pull_request(TOPIC, queue_id, offset, suspend_ms=15000)
    cmd.opaque = 2 * i + 2
    return encode_bytes(cmd)


async def _settle() -> None:
    for _ in range(4):  # call_soon chains: dispatch, flush, woken pull
        await asyncio.sleep(0)


async def run(n: int, profile: bool, settings: dict[str, str]) -> None:
    root = tempfile.mkdtemp(prefix="pumice-request-path-")
    try:
        store_cfg = MessageStoreConfig(store_path_root_dir=os.path.join(root, "store"))
        broker_cfg = BrokerConfig(listen_host="127.0.0.1", listen_port=0, fast_listen_port_enable=False)
        apply_properties([broker_cfg, store_cfg], settings, "--set")
        controller = BrokerController(broker_cfg, store_cfg)
        await controller.start()
        producer, consumer = _Connection(controller.server), _Connection(controller.server)
        ptx, ctx = CountingTransport(), CountingTransport()
        producer.connection_made(ptx)  # type: ignore[arg-type]
        consumer.connection_made(ctx)  # type: ignore[arg-type]
        payload = os.urandom(1024 - 8)
        producer.data_received(send_frame(0, payload))  # creates the topic
        await _settle()
        offsets = [controller.store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES)]
        sends = [send_frame(i, payload) for i in range(1, n + 1)]
        for q in range(QUEUES):  # each queue's consumer is parked first
            consumer.data_received(pull_frame(0, q, offsets[q]))
        await _settle()
        wait_idle([os.getpid()])  # the first CommitLog file's allocation and prefault are start-up work
        prof = cProfile.Profile() if profile else None
        cpu0, t0 = time.process_time(), time.perf_counter()
        if prof is not None:
            prof.enable()
        phases = [0.0, 0.0, 0.0]
        clock = time.perf_counter
        for i, frame in enumerate(sends, 1):
            q = i % QUEUES
            offsets[q] += 1
            pull = pull_frame(i, q, offsets[q])
            a = clock()
            producer.data_received(frame)
            b = clock()
            await _settle()  # the send is answered, dispatched, and wakes the queue's held pull
            c = clock()
            consumer.data_received(pull)  # the consumer's next pull, held
            d = clock()
            phases[0] += b - a
            phases[1] += c - b
            phases[2] += d - c
        if prof is not None:
            prof.disable()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        got = [controller.store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES)]
        assert got == offsets, (got, offsets)
        print(f"{n:,} messages: {cpu / n * 1e6:.1f} µs CPU a message ({wall / n * 1e6:.1f} µs wall); "
              f"{ptx.written / n:.0f} B answered to the producer, {ctx.written / n:.0f} B to the consumer")  # fmt: skip
        send, settle, held = (t / n * 1e6 for t in phases)
        print(f"  loop wall time a message: send {send:.1f} µs, then dispatch + woken pull + writes {settle:.1f} µs, "
              f"next pull (held) {held:.1f} µs")  # fmt: skip
        if prof is not None:
            pstats.Stats(prof).sort_stats("tottime").print_stats(35)
        await controller.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf line")
    args = ap.parse_args()
    settings = dict(kv.split("=", 1) for kv in args.set)
    run_on_uvloop(run(args.messages, args.profile, settings))


if __name__ == "__main__":
    main()
