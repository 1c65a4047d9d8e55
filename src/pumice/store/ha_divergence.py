"""A slave whose CommitLog is ahead of its master's: the record of it, and setting its tail aside.

A master that lost its CommitLog's tail (ASYNC_FLUSH and a power cut, a restored disk) is
behind its slave. A Pumice master then counts none of that slave's reports and sends it only
heartbeats at its own end P (``ha_connection``); the slave (``ha_client``) learns P < its end S,
appends nothing, and writes ``haDiverged.json`` beside the store's CommitLog directory (in
``storePathRootDir``). Its bytes [P, S) are the messages the master lost; they stay in its
CommitLog until the operator decides.

The slave may also find P itself: each connection compares the bytes the master sends
again from the slave's last record (``ha_client``); P is then the first byte that differs,
or that record's start when the byte is in it.

The operator's action: ``haSlaveSetAsideDivergedTail=true`` in the slave's broker.conf and a
restart. At load, before recovery, the slave walks the records of P's file to the last record
boundary at or below P (the cut), moves the CommitLog bytes [cut, S) into
``diverged-<yyyyMMddHHmmss>/`` in ``storePathRootDir`` (whole files past the cut are moved; the
part of the cut's file is copied into a file named by its offset, the cut, and zeroed in
place), and recovery cuts ConsumeQueues and index there. Its first report to the master is
then R, the start of its last record before the cut, so the master sends [R, cut) again: the
slave compares those bytes with its own, and appends only once they match (then removes the
file). A mismatch means the logs differ below the cut (the master took other writes there):
the slave stops replicating, says so, and its store must be rebuilt (moved away: a new slave
copies the master's last file).

``haDiverged.json`` (UTF-8 JSON, one object):

==============  ==================================================================
key             value
==============  ==================================================================
master          the master's HA address when found
masterOffset    P: the logs agree below it at most (the master's end, as its heartbeats
                said, or the first byte that differed)
slaveOffset     S, this slave's CommitLog end then
foundBy         ``master`` (its heartbeats said its end) or ``check`` (a byte differed)
foundAt         when (ms since the epoch)
setAsideTo      once set aside: the directory holding the bytes [cut, S)
cut             once set aside: where this CommitLog now ends
verifyFrom      once set aside: R, where the check against the master's bytes starts
failedAt        the offset where this CommitLog differs from the master's (the check
                failed: no replication until the store is rebuilt)
==============  ==================================================================
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
from typing import Any

from pumice.common.message_decoder import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE

log = logging.getLogger(__name__)

MARKER_FILE = "haDiverged.json"
_RECORD_HEAD = struct.Struct(">iI")  # totalSize, magicCode
_COPY_CHUNK = 1 << 20


class DivergenceError(Exception):
    """The tail cannot be set aside safely; the message says why."""


def marker_path(store_root: str) -> str:
    return os.path.join(store_root, MARKER_FILE)


def read_marker(store_root: str) -> dict[str, Any] | None:
    try:
        with open(marker_path(store_root), "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.error("cannot read %s: %s", marker_path(store_root), e)
        return None
    return data if isinstance(data, dict) else None


def write_marker(store_root: str, data: dict[str, Any]) -> None:
    path = marker_path(store_root)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def remove_marker(store_root: str) -> None:
    try:
        os.remove(marker_path(store_root))
    except FileNotFoundError:
        pass


def describe(data: dict[str, Any]) -> str:
    """One line for runtimeInfo and the log."""
    p, s = data.get("masterOffset"), data.get("slaveOffset")
    if "failedAt" in data:
        return (f"CommitLog differs from master {data.get('master')} at offset {data['failedAt']}: "
                "not replicating, rebuild this slave's store")  # fmt: skip
    if "verifyFrom" in data:
        where = data.get("setAsideTo")
        cut = data.get("cut")
        return f"tail [{cut}, {s}) set aside in {where}; checking [{data['verifyFrom']}, {cut}) against the master's"
    return (f"ahead of master {data.get('master')}: slaveOffset={s} masterOffset={p}; bytes [{p}, {s}) kept, "
            "not replicating (haSlaveSetAsideDivergedTail=true and a restart set them aside)")  # fmt: skip


def hold_report(data: dict[str, Any]) -> int:
    """What a holding slave reports: its end to a master that found it ahead (the master keeps
    such a slave diverged), else where the logs agreed."""
    key = "slaveOffset" if data.get("foundBy") == "master" else "masterOffset"
    return int(data.get(key, 0))


def _walk(path: str, limit: int) -> tuple[int, int]:
    """Walk the records of one CommitLog file from its start: (the start of the last record
    before the stop, the stop: the last record boundary at or below ``limit``, a blank or an
    empty record)."""
    last = -1
    pos = 0
    with open(path, "rb") as f:
        while pos < limit:
            f.seek(pos)
            head = f.read(_RECORD_HEAD.size)
            if len(head) < _RECORD_HEAD.size:
                break
            size, magic = _RECORD_HEAD.unpack(head)
            if size <= 0 or magic == BLANK_MAGIC_CODE or pos + size > limit:
                break
            if magic != MESSAGE_MAGIC_CODE:
                raise DivergenceError(f"no record at offset {pos} of {path} (magic {magic:#x})")
            last, pos = pos, pos + size
    return last, pos


def set_aside_tail(commit_log_dir: str, file_size: int, store_root: str, agreed_below: int, slave_offset: int) -> \
        tuple[str, int, int]:  # fmt: skip
    """Move the CommitLog bytes from the last record boundary at or below ``agreed_below``
    up to ``slave_offset`` into a new ``diverged-<time>`` directory: (that directory, the
    cut, R: where the check against the master starts, -1 when no record is before the
    cut). DivergenceError, with nothing changed, when the records cannot be walked."""
    names = sorted(n for n in os.listdir(commit_log_dir) if n.isdigit() and len(n) == 20)
    starts = [int(n) for n in names]
    p_file = agreed_below - agreed_below % file_size
    cut, verify_from = p_file, -1
    if agreed_below % file_size:
        if p_file not in starts:
            raise DivergenceError(f"no CommitLog file holds offset {agreed_below}")
        last, end = _walk(os.path.join(commit_log_dir, f"{p_file:020d}"), agreed_below - p_file)
        cut = p_file + end
        if last >= 0:
            verify_from = p_file + last
    if verify_from < 0 and cut == p_file and p_file - file_size in starts:
        last, _ = _walk(os.path.join(commit_log_dir, f"{p_file - file_size:020d}"), file_size)
        verify_from = p_file - file_size + last if last >= 0 else -1
    dest = os.path.join(store_root, time.strftime("diverged-%Y%m%d%H%M%S"))
    os.makedirs(dest, exist_ok=False)
    for start in starts:
        src = os.path.join(commit_log_dir, f"{start:020d}")
        if start >= cut:
            os.rename(src, os.path.join(dest, f"{start:020d}"))
        elif start + file_size > cut:
            end = min(slave_offset, start + file_size) - start
            _move_part(src, cut - start, end, os.path.join(dest, f"{cut:020d}"))
    log.warning("set aside the CommitLog bytes [%d, %d) in %s; replication goes on from %d", cut, slave_offset, dest,
                cut)  # fmt: skip
    return dest, cut, verify_from


def _move_part(src: str, begin: int, end: int, dest: str) -> None:
    """Copy ``src``'s bytes [begin, end) to ``dest`` and zero them in ``src``."""
    with open(src, "r+b") as f, open(dest, "wb") as out:
        pos = begin
        while pos < end:
            f.seek(pos)
            chunk = f.read(min(_COPY_CHUNK, end - pos))
            if not chunk:
                break
            out.write(chunk)
            pos += len(chunk)
        out.flush()
        os.fsync(out.fileno())
        pos = begin
        while pos < end:  # zeros: recovery must find the end at begin
            n = min(_COPY_CHUNK, end - pos)
            f.seek(pos)
            f.write(b"\0" * n)
            pos += n
        f.flush()
        os.fsync(f.fileno())
