"""gRPC benchmark (issue 34): RocketMQ 5's gRPC protocol on Pumice beside its remoting path, and
beside RocketMQ 5.3.3's proxy (LOCAL mode) with the same client, in one run.

    python3 -m bench.grpc_bench [--count 2000] [--clients 4] [--servers pumice,rocketmq5] [--json F]

Each server starts in a temporary directory (Pumice: `pumice namesrv` + `pumice broker
--enable-proxy`, tests/helpers/pumice5.py; RocketMQ 5.3.3: its name server and its broker with
the proxy in LOCAL mode, tests/helpers/rocketmq5.py, ASYNC_FLUSH both) and gets, with 1 KiB bodies:

==================  ==========================================================================
phase               what is timed
==================  ==========================================================================
grpc send x1        the official Python v5 client 5.1.2 (tests/peers5), ``Producer.send`` one at
                    a time, ``--count`` messages: msg/s from the first to the last answer; p50 and
                    p99 of each send's own time
grpc send xK        ``--clients`` such producers at once (separate processes), each
                    ``--count`` / K messages: msg/s over the union of their spans
grpc receive        one ``SimpleConsumer`` receiving what the two send phases stored (batches of
                    32, each message acked on its own, as the client's API does): msg/s from the
                    first to the last message received
remoting send x1    Pumice's own client (``pumice.client.Producer.send``, one at a time) to the same
                    broker's remoting port: msg/s, p50 and p99
remoting pull       Pumice's ``PullConsumer`` reading what that phase stored, 32 a pull
==================  ==========================================================================

The clients run on the same two cores as the server (as in every benchmark here): the figures
compare servers under one client, not the client's own ceiling.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.helpers import v5_python

BODY_SIZE = 1024
QUEUES = 4


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _rate(n: int, t0: float, t1: float) -> float:
    return n / (t1 - t0) if t1 > t0 else float("nan")


def grpc_send(endpoint: str, topic: str, count: int, clients: int, home: Path) -> dict[str, Any]:
    """``clients`` driver processes at once, ``count`` messages between them."""
    per = max(1, count // clients)
    procs = [
        v5_python.V5Process("produce", endpoint, ("--topic", topic, "--count", str(per), "--body-prefix", f"c{i}-",
                                                  "--body-size", str(BODY_SIZE)), home / f"p{i}", 600)
        for i in range(clients)
    ]  # fmt: skip
    runs = [p.wait() for p in procs]
    for r in runs:
        r.ok()
    sent = [e for r in runs for e in r.of("sent")]
    lat = [e["send_ms"] for e in sent]
    # each event's t is when its answer came (ms resolution); a client's span starts at its first
    # answer minus that send's own time
    t0 = min(e["t"] - e["send_ms"] / 1000 for e in sent)
    t1 = max(e["t"] for e in sent)
    return {"n": len(sent), "msg_s": _rate(len(sent), t0, t1), "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99)}


def grpc_receive(endpoint: str, topic: str, group: str, count: int, home: Path) -> dict[str, Any]:
    r = v5_python.run("simple-consume", endpoint, "--topic", topic, "--group", group, "--count", str(count),
                      "--batch", "32", "--invisible-s", "60", "--await-s", "2", "--max-s", "500",
                      # 5.3.3's proxy refuses a receive whose deadline leaves less than its polling
                      # time (40018 "not enough for polling"): seen on a busy machine at 3 s
                      "--request-timeout-s", "10",
                      home=home, timeout_s=600).ok()  # fmt: skip
    got = r.of("received")
    t = [e["t"] for e in got]
    return {"n": len(got), "msg_s": _rate(len(got), min(t), max(t)), "acked": len(r.of("acked"))}


def remoting_send(namesrv: str, topic: str, count: int) -> dict[str, Any]:
    from pumice.client import Message, Producer

    body = b"x" * BODY_SIZE
    p = Producer("BenchRemotingPG", namesrv)
    p.start()
    try:
        p.send(Message(topic, body))  # warm-up: the route and the connection
        lat: list[float] = []
        t0 = time.perf_counter()
        for _ in range(count):
            s = time.perf_counter()
            p.send(Message(topic, body))
            lat.append((time.perf_counter() - s) * 1000)
        elapsed = time.perf_counter() - t0
    finally:
        p.shutdown()
    return {"n": count, "msg_s": count / elapsed, "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99)}


def remoting_pull(namesrv: str, topic: str, want: int) -> dict[str, Any]:
    from pumice.client import PullConsumer

    c = PullConsumer("BenchRemotingCG", namesrv)
    c.start()
    try:
        mqs = c.fetch_subscribe_message_queues(topic)
        got, t0 = 0, time.perf_counter()
        for mq in mqs:
            offset, end = c.min_offset(mq), c.max_offset(mq)
            while offset < end:
                res = c.pull(mq, "*", offset, 32)
                found = res.msgs
                if not found:
                    break
                got += len(found)
                offset = res.next_begin_offset
        elapsed = time.perf_counter() - t0
    finally:
        c.shutdown()
    return {"n": got, "msg_s": got / elapsed if elapsed > 0 else float("nan"), "want": want}


def start_server(name: str, root: Path) -> Any:
    if name == "pumice":
        from tests.helpers.pumice5 import PumiceV5

        return PumiceV5(root)
    from tests.helpers.rocketmq5 import RocketMQ5, cached_classpath

    return RocketMQ5(root, classpath=cached_classpath())


def bench_server(name: str, count: int, clients: int, root: Path) -> dict[str, Any]:
    print(f"== {name}", flush=True)
    server = start_server(name, root)
    try:
        out: dict[str, Any] = {}
        server.create_topic("BenchGrpc", queues=QUEUES)
        server.create_topic("BenchRemoting", queues=QUEUES)
        server.create_group("BenchGrpcCG")
        v5_python.run("produce", server.grpc_endpoint, "--topic", "BenchGrpc", "--count", "20",
                      "--body-prefix", "warm-", home=root / "warm").ok()  # fmt: skip
        out["grpc send x1"] = grpc_send(server.grpc_endpoint, "BenchGrpc", count, 1, root / "s1")
        out[f"grpc send x{clients}"] = grpc_send(server.grpc_endpoint, "BenchGrpc", count, clients, root / "sk")
        stored = 20 + out["grpc send x1"]["n"] + out[f"grpc send x{clients}"]["n"]
        out["grpc receive"] = grpc_receive(server.grpc_endpoint, "BenchGrpc", "BenchGrpcCG", stored, root / "r")
        out["remoting send x1"] = remoting_send(server.namesrv, "BenchRemoting", count)
        out["remoting pull"] = remoting_pull(server.namesrv, "BenchRemoting", count + 1)
        for phase, fig in out.items():
            extra = f"  p50 {fig['p50_ms']:.2f} ms  p99 {fig['p99_ms']:.2f} ms" if "p50_ms" in fig else ""
            print(f"  {phase:<18} {fig['n']:>6} msgs  {fig['msg_s']:>9,.0f} msg/s{extra}", flush=True)
        return out
    finally:
        server.stop()


def table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    phases = list(next(iter(results.values())))
    head = "| phase | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names) + "\n"
    rows = []
    for ph in phases:
        cells = []
        for n in names:
            f = results[n].get(ph)
            if f is None:
                cells.append("—")
                continue
            cell = f"{f['msg_s']:,.0f} msg/s"
            if "p50_ms" in f:
                cell += f", p50 {f['p50_ms']:.2f} ms, p99 {f['p99_ms']:.2f} ms"
            cells.append(cell)
        rows.append(f"| {ph} | " + " | ".join(cells) + " |")
    return head + "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=2000, help="messages of each send phase")
    ap.add_argument("--clients", type=int, default=4, help="producers of the parallel gRPC send phase")
    ap.add_argument("--servers", default="pumice,rocketmq5")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="pumice-grpc-bench-") as tmp:
        for name in args.servers.split(","):
            results[name] = bench_server(name, args.count, args.clients, Path(tmp) / name)
    print(time.strftime("%Y-%m-%d %H:%M"), f"count={args.count} clients={args.clients} body={BODY_SIZE} B")
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
