"""One broker session: start the broker fresh (empty data dir under the run's temp dir), run
workloads on uvloop, stop the broker by pid and delete its directory, whatever happened.

``default_session``: the broker in its default (page-cache) mode; an untimed warm-up (a tenth of
the messages, one a send, to ``BenchW``); produce one message a send to topic ``BenchA`` (then
the data dir's size), produce batches to ``BenchB``, consume ``BenchA`` from the start,
open-loop latency on ``BenchL``. ``fsync_session``: the broker in its
fsync-before-ack mode (``Launcher.fsync_mode``; its default mode where it has none), the acked
workload on ``BenchS``. A failed phase is recorded as ``{"error": ...}`` and the others go on.
"""

from __future__ import annotations

import shutil
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.peers import disk, workloads
from bench.peers.brokers import Launcher, Running
from bench.peers.drivers import Driver, driver_for
from bench.processes import run_on_uvloop


@dataclass
class Config:
    messages: int = 200_000
    producers: int = 4
    in_flight: int = 256
    batch: int = 64
    rate: float = 5000.0
    latency_s: float = 10.0
    acked_publishers: int = 64
    acked_s: float = 10.0
    phase_timeout_s: float = 300.0


def _error(e: BaseException) -> dict[str, Any]:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return {"error": f"{type(e).__name__}: {e}{where}"[:500]}


async def _phase(out: dict[str, Any], name: str, fn: Callable[[], Awaitable[dict[str, Any]]]) -> bool:
    try:
        out[name] = await fn()
        return "error" not in out[name]
    except Exception as e:
        out[name] = _error(e)
        return False


async def _default(run: Running, driver: Driver, cfg: Config, bodies: list[bytes]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in ("BenchW", "BenchA", "BenchB", "BenchL"):
        await driver.create_topic(t)
    n = cfg.messages
    # not reported: JIT compilation (the JVMs), first files, caches; the same for every broker
    warm = max(n // 10, 2000)
    await _phase(out, "warmup", lambda: workloads.produce(
        driver, run, "BenchW", bodies, warm, cfg.producers, cfg.in_flight, 1, cfg.phase_timeout_s))  # fmt: skip
    out["idle_wait_s"] = await workloads.wait_idle(run)
    ok = await _phase(out, "produce", lambda: workloads.produce(
        driver, run, "BenchA", bodies, n, cfg.producers, cfg.in_flight, 1, cfg.phase_timeout_s))  # fmt: skip
    out["disk_bytes"] = disk.used_bytes(run.data_dir)
    out["disk_payload_bytes"] = out.get("produce", {}).get("msgs", 0) * workloads.BODY_SIZE
    await workloads.wait_idle(run, 15)
    await _phase(out, "produce_batch", lambda: workloads.produce(
        driver, run, "BenchB", bodies, n, cfg.producers, cfg.in_flight, cfg.batch, cfg.phase_timeout_s))  # fmt: skip
    await workloads.wait_idle(run, 15)
    if ok:  # what was acknowledged, and each publisher's first (untimed) message
        stored = out["produce"]["msgs"] + cfg.producers
        await _phase(out, "consume", lambda: workloads.consume(driver, run, "BenchA", stored, cfg.phase_timeout_s))
        await workloads.wait_idle(run, 15)
    await _phase(out, "latency", lambda: workloads.latency(driver, run, "BenchL", bodies, cfg.rate, cfg.latency_s))
    return out


async def _fsync(run: Running, driver: Driver, cfg: Config, bodies: list[bytes]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    await driver.create_topic("BenchS")
    out["idle_wait_s"] = await workloads.wait_idle(run)
    await _phase(out, "acked", lambda: workloads.acked(
        driver, run, "BenchS", bodies, cfg.acked_publishers, cfg.acked_s))  # fmt: skip
    return out


def _session(
    launcher: Launcher, root: Path, fsync: bool, body: Callable[[Running, Driver], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        run = launcher.start(root, fsync)
    except Exception as e:
        return {"start_error": _error(e)["error"]}
    try:
        start_s = time.perf_counter() - t0
        try:
            out = run_on_uvloop(body(run, driver_for(launcher.name, run.endpoint)))
        except Exception as e:
            out = {"session_error": _error(e)["error"]}
        out["start_s"] = start_s
        return out
    finally:
        try:
            run.stop()
        finally:
            shutil.rmtree(run.data_dir.parent, ignore_errors=True)


def default_session(launcher: Launcher, root: Path, cfg: Config, bodies: list[bytes]) -> dict[str, Any]:
    return _session(launcher, root, False, lambda run, d: _default(run, d, cfg, bodies))


def fsync_session(launcher: Launcher, root: Path, cfg: Config, bodies: list[bytes]) -> dict[str, Any]:
    out = _session(launcher, root, bool(launcher.fsync_mode), lambda run, d: _fsync(run, d, cfg, bodies))
    out["mode"] = launcher.fsync_mode or "default (no per-message fsync mode)"
    return out
