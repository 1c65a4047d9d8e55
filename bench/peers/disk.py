"""Disk figures: the machine's reference (bench/disk_reference.py, run in a child process on the
run's temp dir: sequential-write MB/s and 4 KiB fdatasync latency) and a data dir's real size
(``du -s --block-size=1``: allocated blocks, so preallocated or sparse files count as stored)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any


def reference(directory: Path, mib: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.disk_reference", "--dir", str(directory), "--mib", str(mib)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    out = r.stdout
    seq = re.search(r"= ([\d,.]+) MB/s", out)
    lat = re.search(r"median ([\d,.]+) us, p99 ([\d,.]+) us, max ([\d,.]+) us", out)
    if r.returncode != 0 or seq is None or lat is None:
        return {"error": (r.stdout + r.stderr)[-500:]}

    def num(s: str) -> float:
        return float(s.replace(",", ""))

    return {
        "seq_write_mb_s": num(seq.group(1)),
        "fdatasync_p50_us": num(lat.group(1)),
        "fdatasync_p99_us": num(lat.group(2)),
        "fdatasync_max_us": num(lat.group(3)),
        "mib": mib,
        "text": out.strip(),
    }


def used_bytes(path: Path) -> int:
    r = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, timeout=60,
                       check=True)  # fmt: skip
    return int(r.stdout.split()[0])
