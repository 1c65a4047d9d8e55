"""References for the Spark tests: what a store's records say, read with the store's own
decoder (compared with Spark's rows column by column), and comparisons of dispatch files."""

from __future__ import annotations

import os
import shutil
import zlib
from datetime import datetime
from typing import Any

from pumice.common.message_decoder import decode_message
from pumice.spark.record_columns import host_string
from pumice.store.message_check import check_message_and_return_size


def ts(ms: int) -> datetime:
    """A store timestamp as PySpark hands a TimestampType value back (naive, local time)."""
    return datetime.fromtimestamp(ms // 1000).replace(microsecond=(ms % 1000) * 1000)


def decoded_rows(store_root: str, broker_name: str) -> dict[int, dict[str, Any]]:
    """commitLogOffset → the row the data source should give, for every valid record of every
    CommitLog segment, walked with ``check_message_and_return_size`` and decoded with
    ``decode_message``."""
    out: dict[int, dict[str, Any]] = {}
    cl = os.path.join(store_root, "commitlog")
    for name in sorted(os.listdir(cl)):
        data = open(os.path.join(cl, name), "rb").read()
        pos = 0
        while pos < len(data):
            _, size, ok = check_message_and_return_size(data, pos, len(data))
            if not ok or size <= 0:
                break
            m = decode_message(data, pos)
            out[m.commit_log_offset] = {
                "topic": m.topic,
                "brokerName": broker_name,
                "queueId": m.queue_id,
                "queueOffset": m.queue_offset,
                "commitLogOffset": m.commit_log_offset,
                "msgId": m.properties.get("UNIQ_KEY") or m.msg_id,  # MessageClientExt.getMsgId()
                "offsetMsgId": m.msg_id,
                "keys": m.properties.get("KEYS"),
                "tags": m.properties.get("TAGS"),
                "body": zlib.decompress(m.body) if m.sys_flag & 1 else m.body,
                "properties": m.properties,
                "bornTimestamp": ts(m.born_timestamp),
                "storeTimestamp": ts(m.store_timestamp),
                "bornHost": host_string(*m.born_host),
                "storeHost": host_string(*m.store_host),
                "reconsumeTimes": m.reconsume_times,
                "sysFlag": m.sys_flag,
            }
            pos += size
    return out


def rows_by_offset(df) -> dict[int, dict[str, Any]]:
    rows = [r.asDict() for r in df.collect()]
    by = {r["commitLogOffset"]: r for r in rows}
    assert len(by) == len(rows), "a record came out twice"
    for r in by.values():
        r["body"] = bytes(r["body"])
    return by


def tree(root: str) -> dict[str, bytes]:
    """Relative path → bytes of every file under ``root``."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def index_contents(root: str) -> list[bytes]:
    """The index files' bytes in name (creation) order: names are creation times, not compared."""
    d = os.path.join(root, "index")
    return [open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))]


def assert_same_dispatch(expected_root: str, got_root: str) -> None:
    want, got = tree(os.path.join(expected_root, "consumequeue")), tree(os.path.join(got_root, "consumequeue"))
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], f"consumequeue/{name} differs"
    want_index, got_index = index_contents(expected_root), index_contents(got_root)
    assert len(got_index) == len(want_index)
    for i, (w, g) in enumerate(zip(want_index, got_index, strict=True)):
        assert g == w, f"index file #{i} differs"


def torn_copy(store_root: str, dest: str, damage: str) -> tuple[str, int]:
    """A copy of a store's CommitLog whose last record is torn: ``truncated`` (the file ends in
    the middle of it) or ``zeroed`` (its header is there, the rest is not). Returns the last
    segment's path and the torn record's position in it."""
    shutil.copytree(os.path.join(store_root, "commitlog"), os.path.join(dest, "commitlog"))
    last = os.path.join(dest, "commitlog", sorted(os.listdir(os.path.join(dest, "commitlog")))[-1])
    data = open(last, "rb").read()
    pos = size = 0
    while True:
        _, n, ok = check_message_and_return_size(data, pos + size, len(data))
        if not ok or n <= 0:
            break
        pos, size = pos + size, n
    if damage == "truncated":
        os.truncate(last, pos + size // 2)
    else:
        with open(last, "r+b") as f:
            f.seek(pos + 40)
            f.write(bytes(size - 40))
    return last, pos
