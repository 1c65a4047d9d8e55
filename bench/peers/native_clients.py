"""Native clients: each broker driven by a client that is not Python, so that the broker and not a
Python client is measured. Pumice (native data plane, and again with ``PUMICE_PURE=1`` in the
broker's environment) and Apache RocketMQ 4.9.7's broker are driven by the official Java client
4.9.8 (``pumice.bench.RocketMQBench``, bench/peers/java-driver); Kafka 3.9.1 by Kafka's own perf
tools (``org.apache.kafka.tools.ProducerPerformance`` / ``ConsumerPerformance``, the classes of
kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh, from bench/peers/kafka's classpath):

    bash bench/peers/install.sh                                  # once: builds both Maven projects
    python3 -m bench.peers.native_clients [--reps 3] [--quick] [--brokers pumice,pumice-pure,rocketmq,kafka]
                                          [--messages N] [--threads 64] [--out FILE.md]

For each rep, each broker in turn (interleaved rep by rep) gets one session on a freshly started
broker (bench/peers/brokers.py launchers, default mode: ASYNC_FLUSH, Kafka without fsync) with
topics of 4 queues / partitions made by the Python drivers' ``create_topic``. The phases, each
bounded by a message count and a time limit, each a separate client process:

=============  =========================================  ==============================================
phase          RocketMQ protocol (Java client 4.9.8)      Kafka (its perf tools, one producer, acks=all)
=============  =========================================  ==============================================
warm-up        n/10 untimed sends to BenchW, in the       ProducerPerformance, n/10 records to BenchW,
               produce process, before its START          then ConsumerPerformance reads them (the
                                                          first group creates __consumer_offsets)
produce        ``threads`` threads, each a synchronous    ProducerPerformance, one record a batch
               send of one message at a time (over        (batch.size=1, linger.ms=0), buffer.memory
               ``clients`` = 4 producer instances), n to  for ``threads`` records: at most ``threads``
               BenchA                                     records queued or in flight, as the Java
                                                          threads; ceil(threads/4) requests in flight
produce_batch  the same threads, each a synchronous       batch.size for 64 records, linger.ms=5,
               send of a batch of 64, n to BenchB         buffer.memory for ``threads`` batches
consume_push   DefaultMQPushConsumer, a new group, from   ConsumerPerformance, a new group, from the
               the first offset, 32 a pull and a          earliest offset, all of BenchA, its
               listener call, all of BenchA, timed from   fetch.nMsg.sec (without the group join)
               its first message
consume_pull   DefaultMQPullConsumer, one thread a        –
               queue, 32 a pull, all of BenchA
=============  =========================================  ==============================================

Bodies are ``--size`` (1 KiB) bytes. Figures per phase: messages/s, each send's round trip
(p50/p99/max; Kafka's tool reports them in whole ms), and the broker's CPU per message: utime +
stime of the broker's process trees (with its name server, as bench.peers) from /proc
(bench/peers/cpu.py), sampled when the Java driver prints ``START`` and when it prints its result
line. Kafka's tools print no such marker, so its CPU is sampled around the whole tool process (JVM
start-up included: an idle broker's few ms, so Kafka's CPU figures are a slight overestimate).
The report gives the median (min–max) over the reps, markdown to stdout and ``--out``, the raw
figures as JSON next to it. ``--quick``: 20,000 messages, 1 rep (development; a few minutes).
Every process started is stopped by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import json
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.peers import workloads
from bench.peers.__main__ import _machine, _versions, broker_names
from bench.peers.brokers import (
    KAFKA_CLASSPATH,
    LAUNCHERS,
    REPO,
    Launcher,
    PumiceLauncher,
    Running,
    _java_missing,
)
from bench.peers.cpu import tree_cpu_seconds
from bench.peers.drivers import QUEUES, driver_for
from bench.peers.report import _fmt, _table, _values
from bench.processes import run_on_uvloop

JAVA_DRIVER_DIR = REPO / "bench" / "peers" / "java-driver"
JAVA_DRIVER_JAR = JAVA_DRIVER_DIR / "target" / "pumice-bench-driver.jar"
JAVA_DRIVER_CLASSPATH = JAVA_DRIVER_DIR / "target" / "classpath.txt"
DRIVER_MAIN = "pumice.bench.RocketMQBench"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
# the client JVMs: a fixed heap, so that no phase pays for growing it
CLIENT_JVM = ["-Xms1g", "-Xmx1g", "-XX:+UseParallelGC", "-XX:-UsePerfData", "-Dfile.encoding=UTF-8"]
PHASES = ("produce", "produce_batch", "consume_push", "consume_pull")


class PurePumiceLauncher(PumiceLauncher):
    """Pumice with ``PUMICE_PURE=1`` in its processes' environment: the pure-Python twins."""

    name = "pumice-pure"
    summary = "the same, its name server and broker started with PUMICE_PURE=1 (the pure-Python data plane)"

    def env(self) -> dict[str, str] | None:
        return {**os.environ, "PUMICE_PURE": "1"}


BROKERS: dict[str, Launcher] = {
    "pumice": LAUNCHERS["pumice"],
    "pumice-pure": PurePumiceLauncher(),
    "rocketmq": LAUNCHERS["rocketmq"],
    "kafka": LAUNCHERS["kafka"],
}
TITLES = {
    "pumice": "Pumice (native)",
    "pumice-pure": "Pumice (PUMICE_PURE=1)",
    "rocketmq": "RocketMQ 4.9.7",
    "kafka": "Kafka 3.9.1",
}


@dataclass
class Config:
    messages: int = 200_000
    threads: int = 64
    clients: int = 4
    size: int = 1024
    batch: int = 64
    pull_batch: int = 32
    phase_timeout_s: float = 300.0


def _missing(name: str) -> str | None:
    """Why ``name`` cannot run here: its broker, or its client (the driver jar, Kafka's tools)."""
    if name == "kafka":
        return _java_missing(KAFKA_CLASSPATH, "bench/peers/kafka")
    why = BROKERS[name].missing() or _java_missing(JAVA_DRIVER_CLASSPATH, "bench/peers/java-driver")
    if why is None and not JAVA_DRIVER_JAR.exists():
        why = "bench/peers/java-driver is not built (bash bench/peers/install.sh)"
    return why


class _Client:
    """A client JVM whose stdout is read line by line in a thread; the broker's CPU is sampled at
    its ``START`` line (or at its start, for tools without one) and at its end."""

    def __init__(self, cmd: list[str], run: Running, cwd: Path, log: Path, marker: bool) -> None:
        self.run = run
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.cpu0 = tree_cpu_seconds(run.root_pids)
        self.t0 = time.perf_counter()
        self._err = log.open("ab")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._err, cwd=cwd, text=True,
            start_new_session=True,
        )  # fmt: skip
        self.marker = marker
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if self.marker and line.strip() == "START":
                self.cpu0, self.t0 = tree_cpu_seconds(self.run.root_pids), time.perf_counter()
            self.lines.put(line)
        self.lines.put(None)

    def output(self, timeout_s: float, done: Callable[[str], bool]) -> tuple[list[str], float, float]:
        """Its stdout lines until ``done(line)``, its end or ``timeout_s``; the broker CPU seconds
        and wall seconds from the START (or the start) to then. Stops the process by pid."""
        out: list[str] = []
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    line = self.lines.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
                except queue.Empty:
                    continue
                if line is None:
                    break
                out.append(line.rstrip("\n"))
                if done(out[-1]):
                    break
            cpu = tree_cpu_seconds(self.run.root_pids) - self.cpu0
            return out, cpu, time.perf_counter() - self.t0
        finally:
            self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.wait(15)  # its own exit after the result line
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        self._err.close()


def _java_phase(run: Running, home: Path, cfg: Config, command: str, args: dict[str, Any]) -> dict[str, Any]:
    """One RocketMQBench process; its JSON line plus the broker's CPU per message."""
    logs = home / "client-logs"
    cp = f"{JAVA_DRIVER_JAR}:{JAVA_DRIVER_CLASSPATH.read_text().strip()}"
    argv = [x for k, v in args.items() for x in (f"--{k}", str(v))]
    cmd = ["java", *CLIENT_JVM, f"-Drocketmq.client.logRoot={logs}", f"-Duser.home={home}",
           f"-Drocketmq.client.localOffsetStoreDir={home / 'offsets'}", "-cp", cp, DRIVER_MAIN, command,
           "--namesrv", run.endpoint["namesrv"], "--seconds", str(int(cfg.phase_timeout_s)), *argv]  # fmt: skip
    client = _Client(cmd, run, home, home / f"driver-{command}.err", marker=True)
    lines, cpu, _ = client.output(cfg.phase_timeout_s + 180, lambda s: s.startswith("{"))
    result = next((json.loads(s) for s in lines if s.startswith("{")), None)
    if result is None:
        err = (home / f"driver-{command}.err").read_text(errors="replace")[-600:]
        return {"error": f"no result from {command} (exit {client.proc.returncode}): {lines[-3:]} {err}"}
    return _with_cpu(result, cpu)


def _with_cpu(result: dict[str, Any], cpu: float) -> dict[str, Any]:
    n = result.get("msgs") or 0
    result["server_cpu_s"] = cpu
    result["server_us_msg"] = cpu * 1e6 / n if n else None
    return result


def _kafka_log4j(home: Path) -> Path:
    path = home / "tools-log4j.properties"
    if not path.exists():
        path.write_text(
            "log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stderr.Target=System.err\nlog4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
    return path


def _kafka_tool(
    run: Running, home: Path, cfg: Config, main: str, args: list[str], name: str
) -> tuple[list[str], float]:
    cmd = ["java", *CLIENT_JVM, f"-Dlog4j.configuration=file:{_kafka_log4j(home)}",
           "-cp", KAFKA_CLASSPATH.read_text().strip(), main, *args]  # fmt: skip
    client = _Client(cmd, run, home, home / f"{name}.err", marker=False)
    lines, cpu, _ = client.output(cfg.phase_timeout_s + 180, lambda s: False)
    if client.proc.returncode not in (0, None):
        err = (home / f"{name}.err").read_text(errors="replace")[-600:]
        raise RuntimeError(f"{name} exited with {client.proc.returncode}: {lines[-3:]} {err}")
    return lines, cpu


# the last line of ProducerPerformance: "N records sent, R records/sec (M MB/sec), A ms avg latency,
# X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th."
_PRODUCER_PERF = re.compile(
    r"(?P<n>\d+) records sent, (?P<rate>[\d.]+) records/sec .*?, (?P<avg>[\d.]+) ms avg latency, "
    r"(?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, \d+ ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th"
)


def _kafka_produce(run: Running, home: Path, cfg: Config, topic: str, n: int, batch: int, name: str) -> dict[str, Any]:
    # ProducerPerformance sends asynchronously as fast as it can; buffer.memory bounds what is queued
    # or in flight to ``threads`` records (batches): the closed loop of the Java driver's synchronous
    # senders, so that its latencies are round trips and not waits in an unbounded queue
    unit = cfg.size + 128 if batch == 1 else batch * (cfg.size + 16) + 64  # a record (a batch) in the buffer
    props = [f"bootstrap.servers={run.endpoint['bootstrap']}", "acks=all", "enable.idempotence=false",
             f"max.in.flight.requests.per.connection={math.ceil(cfg.threads / QUEUES)}", "compression.type=none",
             f"buffer.memory={cfg.threads * unit}", f"batch.size={1 if batch == 1 else unit}",
             f"linger.ms={0 if batch == 1 else 5}"]  # fmt: skip
    args = ["--topic", topic, "--num-records", str(n), "--record-size", str(cfg.size), "--throughput", "-1",
            "--producer-props", *props]  # fmt: skip
    lines, cpu = _kafka_tool(run, home, cfg, PRODUCER_PERF, args, name)
    m = next((m for s in reversed(lines) if (m := _PRODUCER_PERF.search(s)) and "50th" in s), None)
    if m is None:
        return {"error": f"no summary from ProducerPerformance: {lines[-3:]}"}
    count, rate = int(m["n"]), float(m["rate"])
    result = {"mode": "produce", "batch": batch, "msgs": count, "failed": 0, "seconds": count / rate if rate else 0,
              "msg_s": rate, "rt_us": {"p50": float(m["p50"]) * 1e3, "p99": float(m["p99"]) * 1e3,
                                       "p999": float(m["p999"]) * 1e3, "max": float(m["max"]) * 1e3,
                                       "mean": float(m["avg"]) * 1e3}}  # fmt: skip
    return _with_cpu(result, cpu)


def _kafka_consume(run: Running, home: Path, cfg: Config, topic: str, n: int, name: str) -> dict[str, Any]:
    args = ["--bootstrap-server", run.endpoint["bootstrap"], "--topic", topic, "--messages", str(n),
            "--timeout", "30000", "--group", f"bench-perf-{time.monotonic_ns()}"]  # fmt: skip
    lines, cpu = _kafka_tool(run, home, cfg, CONSUMER_PERF, args, name)
    # a header line "start.time, end.time, ..., data.consumed.in.nMsg, nMsg.sec, ..." and a line of values
    for i, s in enumerate(lines[:-1]):
        if "nMsg.sec" in s:
            row = dict(
                zip([h.strip() for h in s.split(",")], [v.strip() for v in lines[i + 1].split(",")], strict=False)
            )
            msgs = int(row["data.consumed.in.nMsg"])
            # fetch.*: without the group join (as the push consumer's clock starts at its first message)
            rate = float(row.get("fetch.nMsg.sec") or row["nMsg.sec"])
            result = {"mode": "consume", "msgs": msgs, "failed": 0, "seconds": msgs / rate if rate else 0.0,
                      "msg_s": rate, "with_join_msg_s": float(row["nMsg.sec"])}  # fmt: skip
            return _with_cpu(result, cpu)
    return {"error": f"no figures from ConsumerPerformance: {lines[-3:]}"}


def _phase(out: dict[str, Any], name: str, fn: Callable[[], dict[str, Any]]) -> None:
    try:
        out[name] = fn()
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"[:600]}
    print(f"  {name}: " + (out[name].get("error") or f"{out[name]['msg_s']:,.0f} msg/s"), flush=True)


def _idle(run: Running) -> None:
    asyncio.run(workloads.wait_idle(run, 15))


@functools.cache
def _data_plane(name: str) -> str:
    """Which data plane a pumice broker started by ``BROKERS[name]`` runs: the line it logs at
    start-up (pumice.native), computed by the same interpreter in the same environment."""
    launcher = BROKERS[name]
    env = launcher.env() if isinstance(launcher, PumiceLauncher) else None
    code = "from pumice.native import data_plane_line; print(data_plane_line())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False)
    return (r.stdout.strip() or r.stderr.strip()[-300:]).removeprefix("data plane: ")


def session(name: str, root: Path, cfg: Config) -> dict[str, Any]:
    """One broker, started fresh: topics, the phases, stopped by pid and its directory deleted."""
    t0 = time.perf_counter()
    try:
        run = BROKERS[name].start(root, False)
    except Exception as e:
        return {"start_error": f"{type(e).__name__}: {e}"[:600]}
    home = run.data_dir.parent
    out: dict[str, Any] = {"start_s": time.perf_counter() - t0}
    try:
        if name.startswith("pumice"):
            out["data_plane"] = _data_plane(name)
        driver = driver_for("pumice" if name.startswith("pumice") else name, run.endpoint)
        for topic in ("BenchW", "BenchA", "BenchB"):
            run_on_uvloop(driver.create_topic(topic))
        n, warm = cfg.messages, max(cfg.messages // 10, 2000)
        if name == "kafka":
            _phase(out, "warmup", lambda: _kafka_produce(run, home, cfg, "BenchW", warm, 1, "warmup"))
            # untimed too: the first group's join creates __consumer_offsets (50 partitions)
            _phase(out, "warmup_consume", lambda: _kafka_consume(run, home, cfg, "BenchW", warm, "warmup-consume"))
            _idle(run)
            _phase(out, "produce", lambda: _kafka_produce(run, home, cfg, "BenchA", n, 1, "producer-perf"))
            _idle(run)
            _phase(out, "produce_batch", lambda: _kafka_produce(run, home, cfg, "BenchB", n, cfg.batch, "batch-perf"))
            _idle(run)
            stored = out["produce"].get("msgs", n)
            _phase(out, "consume_push", lambda: _kafka_consume(run, home, cfg, "BenchA", stored, "consumer-perf"))
            return out
        common = {"threads": cfg.threads, "clients": cfg.clients, "size": cfg.size, "messages": n}
        _phase(out, "produce", lambda: _java_phase(run, home, cfg, "produce", {
            **common, "topic": "BenchA", "warmup": warm, "warmup-topic": "BenchW"}))  # fmt: skip
        _idle(run)
        _phase(out, "produce_batch", lambda: _java_phase(run, home, cfg, "produce", {
            **common, "topic": "BenchB", "batch": cfg.batch}))  # fmt: skip
        _idle(run)
        stored = out["produce"].get("msgs", n)
        consume = {"topic": "BenchA", "messages": stored, "pull-batch": cfg.pull_batch}
        for mode in ("push", "pull"):
            _phase(out, f"consume_{mode}", functools.partial(_java_phase, run, home, cfg, mode, consume))
            _idle(run)
        return out
    except Exception as e:
        out["session_error"] = f"{type(e).__name__}: {e}"[:600]
        return out
    finally:
        try:
            run.stop()
        finally:
            shutil.rmtree(home, ignore_errors=True)


# the report's rows: label, phase, the figure's path in the phase's result, scale, digits
ROWS: list[tuple[str, str, tuple[str, ...], float, int]] = [
    ("produce, one message a send, msg/s", "produce", ("msg_s",), 1.0, 0),
    ("send RT p50, ms", "produce", ("rt_us", "p50"), 1e-3, 2),
    ("send RT p99, ms", "produce", ("rt_us", "p99"), 1e-3, 2),
    ("send RT max, ms", "produce", ("rt_us", "max"), 1e-3, 1),
    ("broker CPU µs per message, single sends", "produce", ("server_us_msg",), 1.0, 1),
    ("batches of 64, msg/s", "produce_batch", ("msg_s",), 1.0, 0),
    ("batch send RT p50, ms", "produce_batch", ("rt_us", "p50"), 1e-3, 2),
    ("batch send RT p99, ms", "produce_batch", ("rt_us", "p99"), 1e-3, 2),
    ("broker CPU µs per message, batches", "produce_batch", ("server_us_msg",), 1.0, 2),
    (
        "consume (push consumer; Kafka: ConsumerPerformance), msg/s from the first message",
        "consume_push",
        ("msg_s",),
        1.0,
        0,
    ),
    ("broker CPU µs per message consumed", "consume_push", ("server_us_msg",), 1.0, 2),
    ("consume (pull loop, 32 a pull), msg/s", "consume_pull", ("msg_s",), 1.0, 0),
    ("broker CPU µs per pulled message", "consume_pull", ("server_us_msg",), 1.0, 2),
]


def render(results: dict[str, Any]) -> str:
    names = list(results["brokers"])
    cfg = results["config"]
    lines = [
        f"# Native clients: {results['started']}" + (" (--quick: development figures)" if cfg["quick"] else ""),
        "",
        f"Machine: {results['machine']}. Medians (min–max) of {cfg['reps']} rep(s), brokers interleaved rep by rep; "
        f"{cfg['messages']:,} messages of {cfg['size']} B a phase, {cfg['threads']} sending threads over "
        f"{cfg['clients']} producer instances (Java), batches of {cfg['batch']}. Pumice, RocketMQ: the official "
        "Java client 4.9.8 (bench/peers/java-driver); Kafka: ProducerPerformance / ConsumerPerformance 3.9.1 "
        "(one producer, acks=all, the same records in flight; its RTs are whole ms and its CPU covers the "
        "tool's JVM start-up). Broker CPU: its process tree's utime + stime (/proc) over the phase.",
        "",
    ]
    rows = []
    for label, phase, path, scale, digits in ROWS:
        row = [label]
        for name in names:
            b = results["brokers"][name]
            if not b["available"]:
                row.append("n/a")
                continue
            vals = [v for r in b["reps"] if (v := _values([r.get(phase) or {}], path))]
            row.append(_fmt([v[0] for v in vals], scale, digits))
        rows.append(row)
    lines += _table(["", *(TITLES[n] for n in names)], rows)
    notes = []
    for name in names:
        b = results["brokers"][name]
        if not b["available"]:
            notes.append(f"- {TITLES[name]}: not available: {b['reason']}")
            continue
        planes = sorted({r.get("data_plane") for r in b["reps"] if r.get("data_plane")})
        if planes:
            notes.append(f"- {TITLES[name]}: the broker's start-up line: data plane: {'; '.join(planes)}")
        for i, r in enumerate(b["reps"], 1):
            for key in ("start_error", "session_error"):
                if r.get(key):
                    notes.append(f"- {TITLES[name]} rep {i}: {r[key]}")
            for phase in ("warmup", "warmup_consume", *PHASES):
                p = r.get(phase) or {}
                if p.get("error"):
                    notes.append(f"- {TITLES[name]} rep {i} {phase}: {p['error']}")
                elif p.get("failed"):
                    notes.append(f"- {TITLES[name]} rep {i} {phase}: {p['failed']} sends failed")
    if notes:
        lines += ["", *notes]
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()),
              f"Run time: {results['duration_s']:.0f} s."]  # fmt: skip
    return "\n".join(lines) + "\n"


_interrupted = [False]


def _on_sigint(signum: int, frame: Any) -> None:
    _interrupted[0] = True
    signal.default_int_handler(signum, frame)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=None, help="reps per broker (default 3; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="20,000 messages and 1 rep, for development")
    ap.add_argument("--brokers", default=",".join(BROKERS), help="comma-separated, of: " + ",".join(BROKERS))
    ap.add_argument("--messages", type=int, default=None, help="messages a phase (200000; quick 20000)")
    ap.add_argument("--threads", type=int, default=Config.threads, help="sending threads (Kafka: records in flight)")
    ap.add_argument("--clients", type=int, default=Config.clients, help="Java producer instances the threads share")
    ap.add_argument("--size", type=int, default=Config.size, help="message body bytes")
    ap.add_argument("--batch", type=int, default=Config.batch, help="messages a batch")
    ap.add_argument("--phase-timeout", type=float, default=None, help="seconds a phase at most (300; quick 60)")
    ap.add_argument("--out", type=Path, default=Path("bench/peers/results/native_clients.md"))
    args = ap.parse_args()
    names = broker_names(ap, args.brokers, list(BROKERS))
    if min(args.threads, args.clients, args.size, args.batch) < 1:
        ap.error("--threads, --clients, --size and --batch must be at least 1")
    q = args.quick
    reps = args.reps if args.reps is not None else (1 if q else 3)
    cfg = Config(
        messages=args.messages or (20_000 if q else 200_000), threads=args.threads, clients=args.clients,
        size=args.size, batch=args.batch, phase_timeout_s=args.phase_timeout or (60.0 if q else 300.0),
    )  # fmt: skip
    started = time.perf_counter()
    results: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "config": {**cfg.__dict__, "reps": reps, "quick": q},
        "machine": _machine(),
        "versions": {k: v for k, v in _versions().items() if k in ("rocketmq", "kafka", "java", "py:pumice", "python")}
        | {"rocketmq-client (Java driver)": "4.9.8"},
        "brokers": {},
    }
    for name in names:
        why = _missing(name)
        results["brokers"][name] = {"available": why is None, "reason": why, "reps": []}
        if why:
            print(f"{name}: not available: {why}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="pumice-native-clients-"))
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        for rep in range(1, reps + 1):
            for name in names:
                b = results["brokers"][name]
                if not b["available"]:
                    continue
                if _interrupted[0]:
                    raise KeyboardInterrupt
                t0 = time.perf_counter()
                print(f"rep {rep}/{reps} {name} ...", flush=True)
                b["reps"].append(session(name, root, cfg))
                print(f"rep {rep}/{reps} {name}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    except KeyboardInterrupt:
        print("interrupted: the report covers the sessions that finished", flush=True)
        results["interrupted"] = True
    finally:
        shutil.rmtree(root, ignore_errors=True)
        results["duration_s"] = time.perf_counter() - started
    text = render(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    print(f"report: {args.out} (raw figures: {args.out.with_suffix('.json')})", file=sys.stderr)


if __name__ == "__main__":
    main()
