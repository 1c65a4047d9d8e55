"""Broker benchmark: produce and consume over loopback through real `pumice` processes.

    python3 -m bench.broker_bench [--seconds 5] [--batch 64] [--producers 8]

Starts `pumice namesrv` and `pumice broker` (ASYNC_FLUSH) in a temporary directory, sends one
warm-up batch and waits for the broker's first-file work to end, then in this process:
producers send 1 KiB messages with SEND_BATCH_MESSAGE (``--batch`` a request), consumers
pull every queue with long polling. Prints produced and consumed msg/s, then a
paced run at ``--rate`` msg/s (single sends) with the p50/p99 send→receive latency, from the
send time written into each body. This process runs on uvloop, as the pumice processes do.
During the paced run `bench.hiccup` samples the machine's scheduling delays, so a bad tail can
be told apart from a host that took the CPUs away.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import struct
import tempfile
import time
from multiprocessing.connection import Connection

from bench.hiccup import HiccupMeter
from bench.processes import cpu_seconds, run_on_uvloop, start_local_cluster, stop_all, wait_idle
from pumice.common.message_decoder import head_struct
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.store.message_check import scan_records

_SIZE_AND_SYS_FLAG = struct.Struct(">i32xi")  # TOTALSIZE ... SYSFLAG (at 36)
_SEND_TIME = struct.Struct(">q")

TOPIC = "BenchTopic"
LATENCY_TOPIC = "LatencyTopic"
QUEUES = 4


_UNIQ_PREFIX = os.urandom(12).hex().upper()  # each message gets a UNIQ_KEY, as RocketMQ producers set one
_uniq_counter = itertools.count()


def _uniq_props() -> str:
    return f"UNIQ_KEY\x01{_UNIQ_PREFIX}{next(_uniq_counter) & 0xFFFFFFFF:08X}"


def _batch_body(n: int, size: int) -> tuple[bytes, int]:
    """n records of a SEND_BATCH_MESSAGE body: the send time in the first 8 body bytes, and a UNIQ_KEY each
    (so the broker indexes every message, as it does for real producers)."""
    now = time.time_ns()
    body = struct.pack(">q", now) + os.urandom(size - 8)
    plen = len(_uniq_props())
    head = struct.pack(">iiiii", 20 + len(body) + 2 + plen, 0, 0, 0, len(body)) + body + struct.pack(">h", plen)
    return b"".join([head + _uniq_props().encode() for _ in range(n)]), now


async def _produce(c: RemotingClient, addr: str, stop: float, batch: int, qid: int, counter: list[int]) -> None:
    while time.perf_counter() < stop:
        body, _ = _batch_body(batch, 1024)
        req = RemotingCommand(code=320, ext_fields={"a": "BenchPG", "b": TOPIC, "c": "TBW102", "d": QUEUES, "e": qid,
                                                    "f": 0, "g": 0, "h": 0, "m": True}, body=body)  # fmt: skip
        r = await c.invoke(addr, req, timeout_s=10)
        assert r.code == 0, (r.code, r.remark)
        counter[0] += batch


def pull_request(topic: str, qid: int, offset: int, suspend_ms: int = 1000) -> RemotingCommand:
    """A long-polling PULL_MESSAGE of up to 32 records, as the bench's consumers send it."""
    return RemotingCommand(code=11, ext_fields={"consumerGroup": "BenchCG", "topic": topic, "queueId": qid,
                                                "queueOffset": offset, "maxMsgNums": 32, "sysFlag": 2 | 4,
                                                "subscription": "*", "commitOffset": 0,
                                                "suspendTimeoutMillis": suspend_ms, "subVersion": 0})  # fmt: skip


def paced_send_request(topic: str, qid: int, payload: bytes) -> RemotingCommand:
    """The paced run's SEND_MESSAGE_V2: the send time in the first 8 body bytes, then ``payload``."""
    fields = {"a": "BenchPG", "b": topic, "c": "TBW102", "d": QUEUES, "e": qid, "f": 0, "g": 0, "h": 0,
              "i": _uniq_props()}  # fmt: skip
    return RemotingCommand(code=310, ext_fields=fields, body=struct.pack(">q", time.time_ns()) + payload)


async def _consume(c: RemotingClient, addr: str, stop: float, qid: int, counter: list[int],
                   latencies: list[float] | None, topic: str = TOPIC) -> None:  # fmt: skip
    offset = 0
    while time.perf_counter() < stop:
        r = await c.invoke(addr, pull_request(topic, qid, offset), timeout_s=10)
        if r.code == 0:
            body = bytes(r.body)
            _, n, _ = scan_records(body, 0, len(body), False)
            counter[0] += n
            if latencies is not None:
                now = time.time_ns()
                latencies.extend([(now - sent) / 1e6 for sent in _send_times(body)])
        offset = int(r.ext_fields.get("nextBeginOffset", offset))


def _send_times(body: bytes) -> list[int]:
    """The send time in the first 8 body bytes of each record of a pull body. Read in place
    (the body starts after the fixed head, whose size the sysFlag gives), not by decoding
    whole messages: this process shares the machine with the broker it measures."""
    out = []
    pos = 0
    while pos < len(body):
        total, sys_flag = _SIZE_AND_SYS_FLAG.unpack_from(body, pos)
        out.append(_SEND_TIME.unpack_from(body, pos + head_struct(sys_flag).size)[0])
        pos += total
    return out


async def _throughput(addr: str, seconds: float, batch: int, producers: int) -> int:
    produced, consumed = [0], [0]
    stop = time.perf_counter() + seconds
    pc, cc = RemotingClient(), RemotingClient()
    t0 = time.perf_counter()
    await asyncio.gather(
        *(_produce(pc, addr, stop, batch, i % QUEUES, produced) for i in range(producers)),
        *(_consume(cc, addr, stop + 1, q, consumed, None) for q in range(QUEUES)),
    )
    t = time.perf_counter() - t0
    await pc.close()
    await cc.close()
    print(f"batches of {batch}, {producers} producers: produced {produced[0] / seconds:,.0f} msg/s, "
          f"consumed {consumed[0] / t:,.0f} msg/s ({consumed[0]:,} of {produced[0]:,})")  # fmt: skip
    return produced[0]


async def _timed_send(c: RemotingClient, addr: str, req: RemotingCommand, acks: list[float]) -> None:
    t0 = time.perf_counter()
    try:
        await c.invoke(addr, req, timeout_s=10)
    except (RemotingConnectError, RemotingTimeoutError):
        return  # counted as not acknowledged
    acks.append((time.perf_counter() - t0) * 1e3)


def _consumer_process(addr: str, seconds: float, conn: Connection) -> None:
    """The paced run's consumers in a process of their own (``--consumer-process``): parks
    the long-polling pulls, sends the monotonic time it was ready (the clock is the machine's,
    shared by processes), and returns its latencies and CPU seconds when the run is over."""

    async def consume() -> list[float]:
        latencies: list[float] = []
        ready = time.perf_counter()
        stop = ready + 0.5 + seconds + 1
        cc = RemotingClient()
        tasks = [asyncio.create_task(_consume(cc, addr, stop, q, [0], latencies, LATENCY_TOPIC)) for q in range(QUEUES)]
        await asyncio.sleep(0)
        conn.send(ready)
        await asyncio.gather(*tasks)
        await cc.close()
        return latencies

    own0 = time.process_time()
    latencies = run_on_uvloop(consume())
    conn.send((latencies, time.process_time() - own0))
    conn.close()


async def _latency(addr: str, seconds: float, rate: float, consumer_process: bool = False) -> tuple[int, float]:
    """The paced run; returns the number sent and the CPU seconds of a consumer process."""
    latencies: list[float] = []
    acks: list[float] = []
    done = [0]
    pc = RemotingClient()
    consumers: list[asyncio.Task[None]] = []
    proc = None
    if consumer_process:
        ctx = multiprocessing.get_context("spawn")
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_consumer_process, args=(addr, seconds, there), daemon=True)
        proc.start()
        loop = asyncio.get_running_loop()
        start = await loop.run_in_executor(None, here.recv) + 0.5
    else:
        cc = RemotingClient()
        consumers = [asyncio.create_task(_consume(cc, addr, time.perf_counter() + 1.5 + seconds, q, done, latencies,
                                                  LATENCY_TOPIC)) for q in range(QUEUES)]  # fmt: skip
        start = time.perf_counter() + 0.5
    await asyncio.sleep(max(0.0, start - time.perf_counter()))  # consumers parked first
    stop = start + seconds
    interval = 1 / rate
    payload = os.urandom(1024 - 8)
    nxt = time.perf_counter()
    sent = 0
    in_flight: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    while time.perf_counter() < stop:
        req = paced_send_request(LATENCY_TOPIC, sent % QUEUES, payload)
        task = loop.create_task(_timed_send(pc, addr, req, acks))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        sent += 1
        nxt += interval
        # evenly spaced sends: a sleep under uvloop's 1 ms timer resolution returns at the next
        # loop turn, so this loop turns (and reads answers) until the next send is due
        await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
    consumer_cpu = 0.0
    if proc is not None:
        latencies, consumer_cpu = await asyncio.get_running_loop().run_in_executor(None, here.recv)
        proc.join(10)
    else:
        await asyncio.gather(*consumers)
        await cc.close()
    if in_flight:  # an overloaded broker: let the last sends finish or time out before closing
        await asyncio.wait(in_flight, timeout=15)
    failed = sent - len(acks)
    if failed:
        print(f"  {failed:,} sends were not acknowledged (timed out or failed)")
    await pc.close()
    latencies.sort()
    if latencies:
        p50 = latencies[len(latencies) // 2]
        p99 = latencies[int(len(latencies) * 0.99)]
        where = "consumers in their own process" if consumer_process else "consumers in this process"
        print(f"paced {rate:,.0f} msg/s ({where}): {len(latencies):,} received of {sent:,}; "
              f"send→receive p50 {p50:.2f} ms, p99 {p99:.2f} ms")  # fmt: skip
        acks.sort()
        if acks:
            print(f"  send→ack p50 {acks[len(acks) // 2]:.2f} ms, p99 {acks[int(len(acks) * 0.99)]:.2f} ms")
    return sent, consumer_cpu


async def _warm_up(addr: str) -> None:
    await _create_topic(addr, TOPIC)
    c = RemotingClient()
    await _produce(c, addr, time.perf_counter() + 0.001, 64, 0, [0])
    await c.close()


async def _create_topic(addr: str, topic: str, client: RemotingClient | None = None) -> None:
    c = client or RemotingClient()
    req = RemotingCommand(code=17, ext_fields={"topic": topic, "defaultTopic": "TBW102", "readQueueNums": QUEUES,
                                               "writeQueueNums": QUEUES, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                               "topicSysFlag": 0, "order": False})  # fmt: skip
    r = await c.invoke(addr, req)
    if r.code != 0:  # no admin codes: a first send creates it
        fields = {"a": "BenchPG", "b": topic, "c": "TBW102", "d": QUEUES, "e": 0, "f": 0, "g": 0, "h": 0}
        await c.invoke(addr, RemotingCommand(code=310, ext_fields=fields, body=b"first"))
    await c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--batch", type=int, default=64)
    # 8 batches in flight: with 4 the broker idled between round trips (92-94% of a core),
    # so the figure measured the client's pipeline depth rather than the broker
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--rate", type=float, default=10_000.0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an extra broker.conf line")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--no-hiccups", action="store_true", help="no scheduling-delay sampler during the paced run")
    ap.add_argument("--consumer-process", action="store_true",
                    help="the paced run's consumers in a process of their own (as separate applications)")  # fmt: skip
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="pumice-broker-bench-", dir=os.path.dirname(os.path.abspath(__file__)))
    procs, _, addr = start_local_cluster(root, "".join(f"{kv}\n" for kv in args.set))
    try:
        broker_pid = procs[1].pid
        # One batch first: the broker creates and faults in its first CommitLog file (and the
        # next, ahead of need), seconds of start-up work that is not the steady state measured.
        run_on_uvloop(_warm_up(addr))
        print(f"(waited {wait_idle([broker_pid]):.1f} s for the broker's first-file work)")
        if not args.skip_throughput:
            cpu0, own0, t0 = cpu_seconds(broker_pid), time.process_time(), time.perf_counter()
            n = run_on_uvloop(_throughput(addr, args.seconds, args.batch, args.producers))
            cpu, own, wall = cpu_seconds(broker_pid) - cpu0, time.process_time() - own0, time.perf_counter() - t0
            print(f"  broker CPU {cpu:.2f} s ({cpu / wall:.0%} of a core): {cpu / max(n, 1) * 1e6:.1f} µs per "
                  f"message produced; this client {own:.2f} s ({own / wall:.0%})")  # fmt: skip
        run_on_uvloop(_create_topic(addr, LATENCY_TOPIC))
        # the latency run starts on an idle broker, not on the throughput run's leftovers
        # (its flush of hundreds of MB, dispatch and page-cache write-back)
        print(f"(waited {wait_idle([broker_pid]):.1f} s for the broker to go idle)")
        cpu0, own0, t0 = cpu_seconds(broker_pid), time.process_time(), time.perf_counter()
        with HiccupMeter(enabled=not args.no_hiccups) as hiccups:
            n, consumer_cpu = run_on_uvloop(_latency(addr, args.seconds, args.rate, args.consumer_process))
        cpu, own, wall = cpu_seconds(broker_pid) - cpu0, time.process_time() - own0, time.perf_counter() - t0
        client = f"this client {own:.2f} s ({own / wall:.0%})"
        if args.consumer_process:
            client += f", its consumer process {consumer_cpu:.2f} s ({consumer_cpu / wall:.0%})"
        print(f"  broker CPU {cpu:.2f} s ({cpu / wall:.0%} of a core): {cpu / max(n, 1) * 1e6:.1f} µs per message "
              f"sent and received; {client}")  # fmt: skip
        if hiccups.report:
            print(f"  machine {hiccups.report} (sleeps of 1 ms in another process; ~0.1 ms when quiet)")
    finally:
        stop_all(procs, root)


if __name__ == "__main__":
    main()
