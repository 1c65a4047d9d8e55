"""The dashboard's view logic, free of HTTP: input checks, and runtime-info tables turned into rows.

Every check raises ``BadInput`` with a message for the page (shown as it is, with status 400).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pumice.client.admin_types import BrokerInfo
from pumice.common.mix_all import human_readable_byte_count
from pumice.remoting.mq_version import version_desc

TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")  # TopicValidator's characters and length
GROUP_RE = TOPIC_RE
HEX_RE = re.compile(r"^[0-9A-Fa-f]+$")
TIME_FORMATS = ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d")
HEX_SHOWN = 4096  # body bytes shown as hex


class BadInput(ValueError):
    """Input the page refuses, with why."""


def check_name(value: str | None, what: str) -> str:
    """A topic or group name as RocketMQ accepts it."""
    v = (value or "").strip()
    if not v:
        raise BadInput(f"the {what} is missing")
    if not TOPIC_RE.match(v):
        raise BadInput(f"the {what} {v!r} is invalid: use 1 to 127 of the characters a-z A-Z 0-9 % | _ -")
    return v


def check_msg_id(value: str | None) -> str:
    """A msgId: 32 hex digits (a UNIQ_KEY or an IPv4 offset msgId) or 56 (IPv6 offset msgId)."""
    v = (value or "").strip().upper()
    if not v:
        raise BadInput("the message id is missing")
    if not HEX_RE.match(v) or len(v) not in (32, 56):
        raise BadInput(f"the message id {v!r} is malformed: a msgId is 32 (or 56) hexadecimal digits")
    return v


def check_int(value: str | None, what: str, low: int, high: int) -> int:
    try:
        n = int((value or "").strip())
    except ValueError:
        raise BadInput(f"the {what} {value!r} is not a whole number") from None
    if not low <= n <= high:
        raise BadInput(f"the {what} {n} is out of range ({low} to {high})")
    return n


def parse_time(value: str | None, what: str) -> int:
    """Epoch milliseconds from a browser's datetime-local value, ``YYYY-MM-DD HH:MM[:SS]``, or
    epoch milliseconds; local time, as the browser shows it."""
    v = (value or "").strip()
    if not v:
        raise BadInput(f"the {what} is missing")
    if v.isdigit():
        return int(v)
    for fmt in TIME_FORMATS:
        try:
            return int(datetime.strptime(v, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise BadInput(f"the {what} {v!r} is not a time: use YYYY-MM-DD HH:MM[:SS] or epoch milliseconds")


def format_ms(ms: int | str | None) -> str:
    try:
        n = int(ms or 0)
    except (TypeError, ValueError):
        return str(ms)
    if n <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(n / 1000)) + f".{n % 1000:03d}"


def body_views(body: bytes) -> dict[str, str]:
    """A body as text (UTF-8, bad bytes replaced), JSON pretty-printed (empty if it is not JSON),
    and hex (the first HEX_SHOWN bytes, 16 a line)."""
    text = body.decode("utf-8", "replace")
    try:
        pretty = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = ""
    shown = body[:HEX_SHOWN]
    lines = [f"{i:08x}  {shown[i : i + 16].hex(' ')}" for i in range(0, len(shown), 16)]
    if len(body) > HEX_SHOWN:
        lines.append(f"... {len(body) - HEX_SHOWN} more bytes")
    return {"text": text, "json": pretty, "hex": "\n".join(lines)}


def first_float(value: str | None) -> float:
    """The first number of a runtime-info value such as putTps's ``"12.5 11.0 10.9"``."""
    try:
        return float((value or "").split()[0])
    except (IndexError, ValueError):
        return 0.0


def _num(value: str | None, default: float = -1) -> float:
    try:
        return float(value) if value not in (None, "") else default
    except ValueError:
        return default


@dataclass
class BrokerRow:
    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    role: str
    version: str
    tps_in: float
    tps_out: float
    disk_ratio: float
    today_in: str
    today_out: str
    error: str | None
    runtime: dict[str, str] = field(default_factory=dict)


def broker_rows(brokers: list[BrokerInfo]) -> list[BrokerRow]:
    rows = []
    for b in brokers:
        rt = b.runtime
        put_now, put_morning = rt.get("msgPutTotalTodayNow", ""), rt.get("msgPutTotalTodayMorning", "")
        get_now, get_morning = rt.get("msgGetTotalTodayNow", ""), rt.get("msgGetTotalTodayMorning", "")
        role = "MASTER" if b.broker_id == 0 else "SLAVE"
        if rt.get("dLedgerRole"):
            role = f"{rt['dLedgerRole']} (DLedger)"
        rows.append(
            BrokerRow(
                b.cluster, b.broker_name, b.broker_id, b.addr, role,
                rt.get("brokerVersionDesc", "") if not b.error else "",
                first_float(rt.get("putTps")), first_float(rt.get("getTransferedTps")),
                _num(rt.get("commitLogDiskRatio")),
                _diff(put_now, put_morning), _diff(get_now, get_morning),
                b.error, rt,
            )
        )  # fmt: skip
    return rows


def _diff(now: str, morning: str) -> str:
    try:
        return str(max(int(now) - int(morning), 0))
    except ValueError:
        return "-"


@dataclass
class StoreHealth:
    addr: str
    files: list[tuple[str, str]]
    file_count: str
    file_size: str
    disk_ratio: float
    clean_ratio: float
    forcibly_ratio: float
    refuse_ratio: float
    state: str
    dispatch_behind: str
    flush_last_ms: str
    flush_max_ms: str
    flush_at: str
    checkpoints: dict[str, str]
    recovery: dict[str, str]
    running_flags: str


def store_health(addr: str, rt: dict[str, str]) -> StoreHealth:
    """The store-health facts of one broker's runtime info; what a broker does not tell (RocketMQ's
    own, or an older Pumice) shows as ``-``."""
    files = []
    for part in (rt.get("commitLogFiles") or "").split(";"):
        name, _, size = part.partition(":")
        if name:
            files.append((name, human_readable_byte_count(int(size)) if size.isdigit() else size))
    ratio = _num(rt.get("commitLogDiskRatio"))
    clean = _num(rt.get("diskMaxUsedSpaceRatio")) / 100 if rt.get("diskMaxUsedSpaceRatio") else -1
    forcibly = _num(rt.get("diskSpaceCleanForciblyRatio"))
    refuse = _num(rt.get("diskSpaceWarningLevelRatio"))
    if ratio < 0:
        state = "unknown"
    elif clean < 0 and forcibly < 0 and refuse < 0:
        state = "thresholds unknown"  # RocketMQ's own broker tells the ratio only
    elif refuse > 0 and ratio >= refuse:
        state = "FULL: writes refused"
    elif forcibly > 0 and ratio >= forcibly:
        state = "cleaning forcibly"
    elif clean > 0 and ratio >= clean:
        state = "cleaning expired files"
    else:
        state = "ok"
    file_size = rt.get("commitLogFileSize")
    recovery: dict[str, str] = {}
    if rt.get("lastRecoveryMode"):
        recovery = {
            "mode": rt["lastRecoveryMode"],
            "ended": format_ms(rt.get("lastRecoveryTimestamp")),
            "took": f"{rt.get('lastRecoveryMillis', '-')} ms",
            "CommitLog end found": rt.get("lastRecoveryCommitLogEnd", "-"),
            "ConsumeQueue bytes truncated": rt.get("lastRecoveryTruncatedBytes", "-"),
            "dispatch redone from": rt.get("lastRecoveryRedispatchFrom", "-"),
        }
    return StoreHealth(
        addr, files, rt.get("commitLogFileCount", "-"),
        human_readable_byte_count(int(file_size)) if file_size and file_size.isdigit() else "-",
        ratio, clean, forcibly, refuse, state,
        rt.get("dispatchBehindBytes", "-"),
        rt.get("flushLastCostMillis", "-"), rt.get("flushMaxCostMillis", "-"), format_ms(rt.get("flushLastTimestamp")),
        {
            "CommitLog": format_ms(rt.get("checkpointPhysicMsgTimestamp")),
            "ConsumeQueue": format_ms(rt.get("checkpointLogicsMsgTimestamp")),
            "index": format_ms(rt.get("checkpointIndexMsgTimestamp")),
        },
        recovery, rt.get("runningFlags", "-"),
    )  # fmt: skip


@dataclass
class SlaveBehind:
    master: str
    slave: str
    behind_bytes: int
    behind_seconds: float


def slaves_behind(master: str, rt: dict[str, str]) -> list[SlaveBehind]:
    """``haSlaves`` (``addr behindBytes=N behindSeconds=S;...``) as rows."""
    out = []
    for part in (rt.get("haSlaves") or "").split(";"):
        fields = part.split()
        if not fields:
            continue
        kv = dict(f.partition("=")[::2] for f in fields[1:])
        out.append(SlaveBehind(master, fields[0], int(_num(kv.get("behindBytes"))), _num(kv.get("behindSeconds"))))
    return out


@dataclass
class DLedgerNode:
    group: str
    self_id: str
    addr: str
    role: str
    term: str
    leader: str
    committed: str
    members: dict[str, Any]


def dledger_nodes(brokers: list[BrokerInfo]) -> list[DLedgerNode]:
    out = []
    for b in brokers:
        rt = b.runtime
        if not rt.get("dLedgerGroup"):
            continue
        try:
            members = json.loads(rt.get("dLedgerMembers") or "{}")
        except ValueError:
            members = {}
        out.append(
            DLedgerNode(
                rt["dLedgerGroup"], rt.get("dLedgerSelfId", ""), b.addr, rt.get("dLedgerRole", ""),
                rt.get("dLedgerTerm", ""), rt.get("dLedgerLeaderId", ""), rt.get("dLedgerLedgerCommittedIndex", ""),
                members if isinstance(members, dict) else {},
            )
        )  # fmt: skip
    return out


def client_version(version: int) -> str:
    return version_desc(version)


def svg_chart(series: dict[str, list[tuple[float, float]]], width: int = 720, height: int = 200) -> str:
    """An SVG line chart of ``{name: [(epoch seconds, value), ...]}``, one colour a line, a legend
    and the y axis's top value; no JavaScript library needed."""
    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")
    points = [p for s in series.values() for p in s]
    pad_l, pad_b = 50, 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="chart">']
    out.append(f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff" stroke="#ccc"/>')
    if not points:
        out.append(f'<text x="{width // 2 - 60}" y="{height // 2}">no samples yet</text></svg>')
        return "".join(out)
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    top = max(max(p[1] for p in points), 1.0)
    span = max(t1 - t0, 1.0)
    plot_w, plot_h = width - pad_l - 10, height - pad_b - 10
    out.append(
        f'<text x="4" y="16" font-size="11">{top:g}</text><text x="4" y="{height - pad_b}" font-size="11">0</text>'
    )
    for i, (name, pts) in enumerate(sorted(series.items())):
        colour = colours[i % len(colours)]
        coords = " ".join(
            f"{pad_l + (t - t0) / span * plot_w:.1f},{10 + plot_h - v / top * plot_h:.1f}" for t, v in pts
        )
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}"/>')
        label = name.replace("&", "&amp;").replace("<", "&lt;")
        out.append(f'<text x="{pad_l + 4 + 150 * i}" y="{height - 4}" font-size="11" fill="{colour}">{label}</text>')
    out.append("</svg>")
    return "".join(out)
