"""A store written by a real ``pumice broker`` process, read and reindexed with Spark.

The broker gets single sends (SEND_MESSAGE_V2, 310), compressed bodies (sysFlag bit 0) and
batches (SEND_BATCH_MESSAGE, 320) over loopback, then stops cleanly; Spark then reads its
store directory and rebuilds its ConsumeQueue and index files.
"""

from __future__ import annotations

import asyncio
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.spark.jobs import reindex
from pumice.store import MessageStoreConfig
from tests.helpers.ports import free_port
from tests.spark.expected import assert_same_dispatch, decoded_rows, rows_by_offset

BROKER_CONF = (
    "brokerClusterName=SparkCluster\nbrokerName=broker-s\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\n"
    "fastListenPortEnable=false\nflushDiskType=ASYNC_FLUSH\npreallocateCommitLog=false\nprefaultCommitLog=false\n"
    "mapedFileSizeCommitLog=65536\nmapedFileSizeConsumeQueue=200\nmaxHashSlotNum=64\nmaxIndexNum=256\n"
)


def _start(args: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if "boot success" in line:
            return proc
    proc.kill()
    proc.wait(10)
    raise AssertionError(f"{args[0]} did not start: {''.join(seen)}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(20) == 0, "did not stop cleanly"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _send(topic: str, queue_id: int, body: bytes, props: str, sys_flag: int = 0) -> RemotingCommand:
    fields = {
        "a": "SparkPG",
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": queue_id,
        "f": sys_flag,
        "g": 1_700_000_000_000,
        "h": 0,
        "i": props,
    }
    return RemotingCommand(code=310, ext_fields=fields, body=body)


def _send_batch(topic: str, queue_id: int, items: list[tuple[bytes, str]]) -> RemotingCommand:
    body = b""
    for b, props in items:
        p = props.encode()
        body += struct.pack(">iiiii", 22 + len(b) + len(p), 0, 0, 0, len(b)) + b + struct.pack(">h", len(p)) + p
    fields = {
        "a": "SparkPG",
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": queue_id,
        "f": 0,
        "g": 1_700_000_000_000,
        "h": 0,
        "m": True,
    }
    return RemotingCommand(code=320, ext_fields=fields, body=body)


async def _produce(addr: str) -> dict[str, tuple[bytes, dict[str, str]]]:
    """Send everything; offset msgId (the broker's answer) → (body as meant, properties as sent)."""
    sent: dict[str, tuple[bytes, dict[str, str]]] = {}
    c = RemotingClient()
    try:
        for i in range(60):
            body = (f"broker message {i} ".encode() * 90)[: 100 + i * 29]
            props = f"TAGS\x01Tag{i % 3}\x02KEYS\x01order-{i} user-{i % 7} day-{i % 2}\x02UNIQ_KEY\x01C0A8000A{i:024X}"
            r = await c.invoke(addr, _send("BrokerTopic", i % 4, body, props))
            assert r.code == 0, r.remark
            sent[r.ext_fields["msgId"]] = (body, dict(p.split("\x01") for p in props.split("\x02")))
        for i in range(10):  # the producer compressed these (sysFlag bit 0)
            body = b"zip " * 100 + str(i).encode()
            r = await c.invoke(addr, _send("BrokerZip", i % 2, zlib.compress(body), f"TAGS\x01Z\x02KEYS\x01z-{i}", 1))
            assert r.code == 0, r.remark
            sent[r.ext_fields["msgId"]] = (body, {"TAGS": "Z", "KEYS": f"z-{i}"})
        for b in range(5):
            items = [(f"batch {b}/{j}".encode() * 9, f"KEYS\x01batch-{b}-{j}\x02TAGS\x01B") for j in range(10)]
            r = await c.invoke(addr, _send_batch("BrokerBatch", b % 2, items))
            assert r.code == 0, r.remark
            for mid, (body, props) in zip(r.ext_fields["msgId"].split(","), items, strict=True):
                sent[mid] = (body, dict(p.split("\x01") for p in props.split("\x02")))
    finally:
        await c.close()
    return sent


@pytest.fixture(scope="module")
def broker_store(tmp_path_factory) -> Iterator[tuple[Path, dict]]:
    tmp = tmp_path_factory.mktemp("broker")
    ns_port, br_port = free_port(), free_port()
    (tmp / "namesrv.conf").write_text(f"listenPort={ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp / 'kv.json'}\n")
    (tmp / "broker.conf").write_text(
        f"{BROKER_CONF}listenPort={br_port}\nnamesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={tmp / 'store'}\n"
    )
    namesrv = _start(["namesrv", "-c", str(tmp / "namesrv.conf")])
    try:
        broker = _start(["broker", "-c", str(tmp / "broker.conf")])
        try:
            sent = asyncio.run(asyncio.wait_for(_produce(f"127.0.0.1:{br_port}"), 60))
        finally:
            _stop(broker)  # a clean stop: dispatch has caught up, files are flushed
    finally:
        _stop(namesrv)
    yield tmp / "store", sent


def test_read_equals_what_the_broker_was_sent(spark, broker_store) -> None:
    store, sent = broker_store
    got = rows_by_offset(spark.read.format("pumice").option("brokerName", "broker-s").load(str(store)))
    assert len(got) == len(sent) == 120
    assert got == decoded_rows(str(store), "broker-s")
    by_id = {r["offsetMsgId"]: r for r in got.values()}
    for offset_msg_id, (body, props) in sent.items():
        row = by_id[offset_msg_id]
        assert row["body"] == body
        # BrokerTopic's carry a UNIQ_KEY; the others are found by the id their producer was given
        assert row["msgId"] == props.get("UNIQ_KEY", offset_msg_id)
        assert row["properties"] == {**row["properties"], **props}  # the broker adds some (CLUSTER…)
    assert sum(1 for r in got.values() if r["sysFlag"] & 1) == 10
    assert len({r["commitLogOffset"] // 65536 for r in got.values()}) > 1  # several segments


def test_reindex_matches_the_broker_files(spark, broker_store, tmp_path) -> None:
    store, sent = broker_store
    config = MessageStoreConfig(mapped_file_size_consume_queue=200, max_hash_slot_num=64, max_index_num=256)
    result = reindex(spark, str(store), str(tmp_path / "rebuilt"), config=config)
    assert result.records == len(sent) and result.index_files > 1 and result.consume_queue_files > result.queues
    assert_same_dispatch(str(store), str(tmp_path / "rebuilt"))
