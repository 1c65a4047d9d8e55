"""Footprint: the disk and memory `pumice dev` holds when idle, new and with 1,000 topics.

Starts `pumice dev` on free ports with an empty store in a temporary directory, and reports
after each step, once the process is idle (5 s after the step): the store's blocks on disk
(sparse files count what they hold) and its length, and the process's RSS split as
``/proc/<pid>/status`` does (RssAnon: Python's heap; RssFile: mapped file pages).

    python3 -m bench.footprint [--topics 1000] [--conf broker.conf]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.helpers.ports import free_port

from pumice.client import Message, MQAdmin, Producer


def _disk(root: Path) -> tuple[float, float]:
    used = length = 0
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            used += st.st_blocks * 512
            length += st.st_size
    return used / 1e6, length / 1e6


def _rss(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
    return out


def _report(step: str, pid: int, store: Path) -> None:
    time.sleep(5)
    used, length = _disk(store)
    rss = _rss(pid)
    print(f"{step:<36} disk {used:8.1f} MB (files' length {length:8.1f} MB)   RssAnon {rss['RssAnon']:7.1f} MB   "
          f"RssFile {rss['RssFile']:7.1f} MB", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--conf", help="a broker.conf for pumice dev -c")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pumice-footprint-"))
    ns_port, br_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "pumice.cli", "dev", "--store-dir", str(tmp / "store"), "--namesrv-port",
           str(ns_port), "--broker-port", str(br_port), "--log-dir", str(tmp / "logs")]  # fmt: skip
    if args.conf:
        cmd += ["-c", args.conf]
    out = tmp / "dev.out"
    with out.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while "Ctrl-C stops" not in out.read_text():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"pumice dev did not start: {out.read_text()}")
            time.sleep(0.2)
        ns = f"127.0.0.1:{ns_port}"
        _report("started", proc.pid, tmp / "store")
        with Producer("FootprintProducer", ns) as p:
            p.send(Message("FootprintTopic", b"x" * 1024))
        _report("one message", proc.pid, tmp / "store")
        with MQAdmin(ns) as admin, Producer("FootprintProducer2", ns) as p:
            for i in range(args.topics):
                admin.create_topic(f"Footprint{i}", cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
            for i in range(args.topics):
                for _ in range(4):  # round robin: a ConsumeQueue file in each queue
                    p.send(Message(f"Footprint{i}", b"x" * 1024))
        _report(f"{args.topics} topics x 4 queues, 1 msg each", proc.pid, tmp / "store")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"machine: {os.cpu_count()} cores; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
