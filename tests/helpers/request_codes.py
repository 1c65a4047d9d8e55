"""docs/COMPATIBILITY.md's request-code table (``table()``: code -> name, process, status) and
RocketMQ 4.9.8's request codes (``rocketmq_codes()``, from tests/data)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| (\d+) \| `([A-Z0-9_]+)` \| ([^|]+) \| ([^|]+) \|$")


def table() -> dict[int, tuple[str, str, str]]:
    """Each row of the table: code -> (name, the process that serves it, its status)."""
    rows = {}
    for line in (ROOT / "docs" / "COMPATIBILITY.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            rows[int(m.group(1))] = (m.group(2), m.group(3).strip(), m.group(4).strip())
    return rows


def rocketmq_codes() -> dict[int, str]:
    """Every request code of RocketMQ 4.9.8: code -> name."""
    out = {}
    for line in (ROOT / "tests" / "data" / "rocketmq-4.9.8-request-codes.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            num, name = line.split()
            out[int(num)] = name
    return out
