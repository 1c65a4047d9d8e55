"""The report: markdown tables of the medians and min–max over the reps of each figure, the disk
reference figures of the same run, what an acknowledgement means on disk for each broker, and the
raw figures as JSON."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.peers.brokers import LAUNCHERS
from bench.peers.drivers import describe

# What an acknowledgement means on disk, in the modes used (strace counts: bench/peers/ACKS.md).
ACKS: dict[str, tuple[str, str]] = {
    "pumice": (
        "ASYNC_FLUSH: in the mmap'd CommitLog (page cache); a flush thread msyncs behind, every 500 ms "
        "(flushCommitLogTimed, as RocketMQ 4.9.8)",
        "SYNC_FLUSH: after the msync of the CommitLog that covers it (group commit)",
    ),
    "pumice-pure": (
        "as pumice (the same code on the pure-Python twins)",
        "as pumice (the same code on the pure-Python twins)",
    ),
    "rocketmq": (
        "ASYNC_FLUSH: in the mmap'd CommitLog (page cache); FlushRealTimeService msyncs behind (≥4 pages, 500 ms)",
        "SYNC_FLUSH: after GroupCommitService's msync of the CommitLog past it (group commit)",
    ),
    "kafka": (
        "acks=all, 1 replica: in the segment file's page cache; Kafka does not fsync by default (OS writeback)",
        "log.flush.interval.messages=1: the segment is fsync'd (indexes msync'd) after each append, before "
        "the produce response (one flush per produce request)",
    ),
    "redis": (
        "appendfsync everysec: write(2) to the AOF before the reply; fdatasync once a second in a thread",
        "appendfsync always: fdatasync of the AOF before the replies of that event-loop turn (group commit)",
    ),
    "nats": (
        "JetStream file store: written to the block file (page cache); fsync every 2 min (sync_interval)",
        "no per-message fsync mode in nats-server 2.9 (2.10+ has sync_interval: always): default mode, page cache",
    ),
    "rabbitmq": (
        "stream confirm: chunk written to the segment file (page cache); streams never fsync",
        "no fsync mode for streams: default mode, page cache",
    ),
}


def _get(d: Any, path: tuple[str, ...]) -> Any:
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _values(reps: list[dict[str, Any]], path: tuple[str, ...]) -> list[float]:
    return [v for r in reps if isinstance(v := _get(r, path), int | float) and not isinstance(v, bool)]


def _fmt(vals: list[float], scale: float = 1.0, digits: int = 0) -> str:
    if not vals:
        return "–"
    vs = [v * scale for v in vals]
    med = statistics.median(vs)
    f = f"{{:,.{digits}f}}"
    if len(vs) == 1:
        return f.format(med)
    return f"{f.format(med)} ({f.format(min(vs))}–{f.format(max(vs))})"


def _phase_problems(reps: list[dict[str, Any]], phase: str) -> str:
    notes = []
    for i, r in enumerate(reps, 1):
        p = r.get(phase)
        top = r.get("start_error") or r.get("session_error")
        if top:
            notes.append(f"rep {i}: {top}")
        elif not isinstance(p, dict):
            notes.append(f"rep {i}: not run")
        elif "error" in p:
            notes.append(f"rep {i}: {p['error']}")
        else:
            if p.get("errors"):
                notes.append(f"rep {i}: {p['errors']} failed sends, first: {p.get('first_error', '')}")
            if p.get("timed_out"):
                notes.append(f"rep {i}: stopped by the phase time limit")
            if phase == "consume" and p.get("msgs", 0) < p.get("expected", 0):
                notes.append(f"rep {i}: read {p['msgs']} of {p['expected']}")
            if phase == "latency" and (p.get("received", 0) < p.get("sent", 0) or p.get("overloaded")):
                notes.append(f"rep {i}: received {p['received']} of {p['sent']} sent"
                             + (" (sender overloaded)" if p.get("overloaded") else ""))  # fmt: skip
    return "; ".join(notes)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _section(
    names: list[str],
    header: list[str],
    missing: Callable[[str], str | None],
    reps_of: Callable[[str], list[dict[str, Any]]],
    cells: Callable[[list[dict[str, Any]]], list[str]],
    phases: tuple[str, ...],
) -> list[str]:
    """One table: a row per broker (``cells`` of its reps; a broker that could not run says why),
    then a note per phase where something went wrong."""
    rows, notes = [], []
    for name in names:
        if (why := missing(name)) is not None:
            rows.append([name, why] + [""] * (len(header) - 2))
            continue
        rs = reps_of(name)
        rows.append([name, *cells(rs)])
        notes += [f"{name} {ph}: {p}" for ph in phases if (p := _phase_problems(rs, ph))]
    return [*_table(header, rows), "", *(f"- {x}" for x in notes), *([""] if notes else [])]


def render(results: dict[str, Any]) -> str:
    cfg = results["config"]
    brokers: dict[str, Any] = results["brokers"]
    lines = [f"# Pumice and peer brokers, side by side ({results['started']})", ""]
    if results.get("interrupted"):
        lines += ["**Interrupted (Ctrl-C): only the sessions that finished are in the tables.**", ""]
    dr = results.get("disk_reference", {})
    if "error" in dr:
        lines.append(f"Disk reference: failed ({dr['error']})")
    elif dr:
        lines.append(
            f"Machine: {results['machine']}. Disk reference (bench/disk_reference.py, same run, temp dir's disk): "
            f"sequential write {dr['seq_write_mb_s']:,.0f} MB/s ({dr['mib']} MiB, incl. fdatasync); "
            f"4 KiB fdatasync median {dr['fdatasync_p50_us']:,.0f} µs, p99 {dr['fdatasync_p99_us']:,.0f} µs "
            f"(≈ {1e6 / dr['fdatasync_p50_us']:,.0f} fdatasyncs/s one at a time)."
        )
    lines += [
        "",
        f"{cfg['reps']} rep(s), brokers interleaved rep by rep, each session on a freshly started broker with an "
        "empty data dir; figures are median (min–max) over the reps. 1 KiB random bodies, the same for every "
        "broker; Python asyncio clients on uvloop. Broker CPU: utime+stime of the broker's process tree "
        "(/proc; both processes for Pumice and RocketMQ: name server + broker); client CPU: this process "
        "(time.process_time). µs/msg = CPU seconds / messages.",
        "",
    ]
    names = list(brokers)

    def missing(name: str) -> str | None:
        b = brokers[name]
        return None if b.get("available") else f"not available: {b.get('reason')}"

    def reps(name: str, session: str) -> list[dict[str, Any]]:
        return [r[session] for r in brokers[name].get("reps", []) if session in r]

    # 1. throughput
    n = cfg["messages"]
    lines += [
        f"## Produce and consume ({n:,} messages; {cfg['producers']} publishers, ≤{cfg['in_flight']} messages "
        f"in flight each)",
        "",
        f"Produce: one message a send. Batched: {cfg['batch']} messages a send "
        f"(≤{max(1, cfg['in_flight'] // cfg['batch'])} batches in flight a publisher). Consume: the produce "
        "topic from its first message, one consumer, timed from its start (connect, subscribe). "
        "Disk: `du --block-size=1` of the data dir after the "
        f"produce phase (real blocks; the payload is {n * 1024 / 1e6:,.0f} MB plus an untimed warm-up "
        f"of {max(n // 10, 2000) * 1024 / 1e6:,.0f} MB on another topic).",
        "",
    ]
    header = ["broker", "produce msg/s", "broker µs/msg", "client µs/msg", f"batch-{cfg['batch']} msg/s",
              "broker µs/msg", "client µs/msg", "consume msg/s", "broker µs/msg", "client µs/msg",
              "disk after produce, MB"]  # fmt: skip

    def complete(r: dict[str, Any], ph: str) -> bool:
        """A phase that moved all its messages: one cut short by failed sends (a broker's flow
        control) is no throughput figure, and the consume of a short produce reads a short topic."""
        p = r.get(ph)
        if not isinstance(p, dict) or p.get("timed_out"):
            return False
        if ph == "consume":
            return complete(r, "produce") and p.get("msgs", 0) >= p.get("expected", 0)
        batch = cfg["batch"] if ph == "produce_batch" else 1
        return p.get("msgs", 0) >= n // batch * batch  # a batch phase sends whole batches only

    def throughput(rs: list[dict[str, Any]]) -> list[str]:
        row = []
        for ph in ("produce", "produce_batch", "consume"):
            ok = [r for r in rs if complete(r, ph)]
            mark = "" if len(ok) == len(rs) else f" [{len(ok)} of {len(rs)} reps complete]"
            row += [_fmt(_values(ok, (ph, "msg_s"))) + mark, _fmt(_values(ok, (ph, "server_us_msg")), digits=1),
                    _fmt(_values(ok, (ph, "client_us_msg")), digits=1)]  # fmt: skip
        return [*row, _fmt(_values(rs, ("disk_bytes",)), 1e-6)]

    lines += _section(names, header, missing, lambda name: reps(name, "default"), throughput,
                      ("produce", "produce_batch", "consume"))  # fmt: skip

    # 2. latency
    lines += [
        f"## Open-loop latency ({cfg['rate']:,.0f} msg/s for {cfg['latency_s']:g} s, consumer in a second process)",
        "",
        "Send time = the message's scheduled time (time.time_ns), written into its body; latency = the "
        "consumer's time.time_ns() on receipt minus that (HdrHistogram, µs resolution). Broker CPU in % of one core.",
        "",
    ]
    header = ["broker", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "received / sent", "broker CPU %"]

    def latency(rs: list[dict[str, Any]]) -> list[str]:
        row = [_fmt(_values(rs, ("latency", k)), 1e-3, 2) for k in ("p50_us", "p99_us", "p999_us", "max_us")]
        recv, sent = _values(rs, ("latency", "received")), _values(rs, ("latency", "sent"))
        row.append(f"{int(statistics.median(recv)):,} / {int(statistics.median(sent)):,}" if recv and sent else "–")
        return [*row, _fmt(_values(rs, ("latency", "server_core")), 100)]

    lines += _section(names, header, missing, lambda name: reps(name, "default"), latency, ("latency",))

    # 3. acked with fsync
    lines += [
        f"## Acknowledged sends, fsync before ack where the broker has it ({cfg['acked_publishers']} publishers "
        f"each awaiting its ack, {cfg['acked_s']:g} s)",
        "",
        "64 publisher coroutines over 4 client connections (Redis: a connection per publisher). Latency: send "
        "to ack. A broker without a per-message fsync mode runs in its default mode (marked *).",
        "",
    ]
    header = ["broker", "mode", "msg/s", "p50 ms", "p99 ms", "broker µs/msg", "client µs/msg"]

    def acked(rs: list[dict[str, Any]]) -> list[str]:
        mode = rs[0].get("mode", "") if rs else ""
        return [
            "default mode*" if mode.startswith("default") else mode,
            _fmt(_values(rs, ("acked", "msg_s"))), _fmt(_values(rs, ("acked", "p50_us")), 1e-3, 2),
            _fmt(_values(rs, ("acked", "p99_us")), 1e-3, 2), _fmt(_values(rs, ("acked", "server_us_msg")), digits=1),
            _fmt(_values(rs, ("acked", "client_us_msg")), digits=1),
        ]  # fmt: skip

    lines += _section(names, header, missing, lambda name: reps(name, "fsync"), acked, ("acked",))

    # 4. ack semantics
    lines += ["## What an ack means on disk", "", "| broker | default mode (tables 1–2) | fsync mode (table 3) |",
              "|---|---|---|"]  # fmt: skip
    lines += [f"| {name} | {ACKS[name][0]} | {ACKS[name][1]} |" for name in names if name in ACKS]
    lines += ["", "strace counts of fsync/fdatasync/msync per acknowledged message: bench/peers/ACKS.md.", ""]
    lines += ["## Brokers", ""]
    lines += [f"- {name}: {LAUNCHERS[name].summary}" for name in names]
    lines += ["", "## Clients", ""]
    for name in names:
        try:
            lines.append(f"- {name}: {describe(name)}")
        except ImportError as e:
            lines.append(f"- {name}: client not importable ({e})")
    versions = ", ".join(f"{k} {v}" for k, v in results.get("versions", {}).items())
    lines += ["", f"Versions: {versions}.", "", f"Total run time {results.get('duration_s', 0) / 60:.1f} min."]
    return "\n".join(lines) + "\n"


def write(results: dict[str, Any], out: Path, progress: Callable[[str], None] = print) -> str:
    text = render(results)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str))
    progress(f"report: {out} (raw figures: {out.with_suffix('.json')})")
    return text
