"""Fixtures for the Spark tests: one SparkSession for the whole run, and the stores they read.

* ``api_store``: written through ``DefaultMessageStore`` with tiny files (several CommitLog
  segments, multi-file ConsumeQueues, several index files): plain, compressed, batch, IPv6,
  delayed and transactional messages. ``expected`` records what was put, and where.
* ``golden_store``: a CommitLog segment assembled by hand from GOLDEN.md's record bytes.
* ``broker_store`` (in ``test_broker_store``): written by a real ``pumice broker`` process.

The tests skip, saying why, only when no Java runtime is found (Spark needs one).
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pumice.common.message import MessageExtBatch
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from tests.conftest import small_config

STORE_HOST = (b"\x7f\x00\x00\x01", 10911)
V6_HOST = (bytes(15) + b"\x01", 54321)  # ::1


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def spark() -> Iterator:
    if not java_available():
        pytest.skip("no Java runtime (java on PATH or JAVA_HOME): Spark cannot start; .ci/run installs one")
    from pyspark.sql import SparkSession

    import pumice.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pumice tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    pumice.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@dataclass
class Put:
    """One message as it was put, and where it landed."""

    topic: str
    queue_id: int
    body: bytes  # as the producer meant it (before compression)
    properties: dict[str, str]
    sys_flag: int
    born_host: tuple[bytes, int]
    store_host: tuple[bytes, int]
    commit_log_offset: int = -1
    queue_offset: int = -1
    msg_id: str = ""


@dataclass
class BuiltStore:
    root: str
    puts: list[Put] = field(default_factory=list)


def body_of(i: int) -> bytes:
    """Distinct, deterministic bodies of 150 to ~1,000 bytes."""
    return (f"message {i} ".encode() * 90)[: 150 + (i * 37) % 850]


def batch_body(messages: list[tuple[bytes, str]]) -> bytes:
    """A SEND_BATCH_MESSAGE body (``MessageExtBatch``'s table)."""
    out = b""
    for body, props in messages:
        p = props.encode()
        out += struct.pack(">iiiii", 22 + len(body) + len(p), 0, 0, 0, len(body)) + body + struct.pack(">h", len(p))
        out += p
    return out


def _record(store: BuiltStore, msgs: list[MessageExtBrokerInner], bodies: list[bytes], result) -> None:
    amr = result.append_message_result
    offsets = amr.wrote_offsets or [amr.wrote_offset]
    logics = amr.logics_offsets or [amr.logics_offset]
    for m, body, off, lo, mid in zip(msgs, bodies, offsets, logics, amr.msg_ids, strict=True):
        store.puts.append(
            Put(m.topic, m.queue_id, body, dict(m.properties), m.sys_flag, m.born_host, m.store_host, off, lo, mid)
        )


def api_store_config(root: str):
    """Tiny files: 64 KiB CommitLog segments, 32-entry ConsumeQueue files, 255-entry index files."""
    return small_config(root, mapped_file_size_consume_queue=20 * 32)


def build_api_store(root: str) -> BuiltStore:
    """The api_store contents. TopicA's 240 messages carry 3 index keys each: 720 entries fill
    two 255-entry index files and part of a third."""
    built = BuiltStore(root)
    config = api_store_config(root)
    with DefaultMessageStore(config) as store:
        for first in range(0, 240, 15):
            msgs = [
                MessageExtBrokerInner(
                    topic="TopicA",
                    body=body_of(i),
                    queue_id=i % 4,
                    properties={
                        "TAGS": "TagNeg" if i % 5 == 0 else f"Tag{i % 3}",
                        "KEYS": f"k{i} kk{i}",
                        "UNIQ_KEY": f"0A0000010000{i:020X}",
                        "ключ": f"значение {i}",
                    },
                    born_timestamp=1_700_000_000_000 + i,
                    born_host=(bytes([10, 0, 0, i % 5]), 5000 + i % 3),
                    store_host=STORE_HOST,
                )
                for i in range(first, first + 15)
            ]
            r = store.put_messages(msgs)
            assert r.is_ok(), r
            _record(built, msgs, [m.body for m in msgs], r)
        # compressed bodies (sysFlag bit 0): the reader must inflate them
        plain = [b"compress me " * 40 + str(i).encode() for i in range(30)]
        msgs = [
            MessageExtBrokerInner(
                topic="TopicB",
                body=zlib.compress(p),
                queue_id=i % 2,
                sys_flag=1,
                properties={"TAGS": "Zipped"},
                born_timestamp=1_700_000_001_000 + i,
                store_host=STORE_HOST,
            )
            for i, p in enumerate(plain)
        ]
        for k in range(0, 30, 10):
            r = store.put_messages(msgs[k : k + 10])
            assert r.is_ok(), r
            _record(built, msgs[k : k + 10], plain[k : k + 10], r)
        # batches (SEND_BATCH_MESSAGE bodies), one record per message
        for b in range(3):
            items = [(f"batch {b} item {j}".encode() * 5, f"TAGS\x01Batch\x02seq\x01{b}-{j}") for j in range(10)]
            batch = MessageExtBatch(
                topic="TopicC",
                queue_id=1,
                body=batch_body(items),
                born_timestamp=1_700_000_002_000,
                born_host=(b"\xc0\xa8\x00\x0a", 40000),
                store_host=STORE_HOST,
            )
            r = store.put_message_batch(batch)
            assert r.is_ok(), r
            amr = r.append_message_result
            for (body, props), off, lo, mid in zip(
                items, amr.wrote_offsets, amr.logics_offsets, amr.msg_ids, strict=True
            ):
                pairs = dict(p.split("\x01") for p in props.split("\x02"))
                built.puts.append(Put("TopicC", 1, body, pairs, 0, batch.born_host, STORE_HOST, off, lo, mid))
        # IPv6 hosts move every later header field
        for sys_flag, born, stored in (
            (0x10, V6_HOST, STORE_HOST),
            (0x30, V6_HOST, V6_HOST),
            (0x20, STORE_HOST, V6_HOST),
        ):
            msg = MessageExtBrokerInner(
                topic="TopicV6",
                body=b"six" * sys_flag,
                queue_id=0,
                sys_flag=sys_flag,
                properties={"TAGS": "v6"},
                born_timestamp=1_700_000_003_000,
                born_host=born,
                store_host=stored,
            )
            r = store.put_messages([msg])
            assert r.is_ok(), r
            _record(built, [msg], [msg.body], r)
        # a delayed message lands in SCHEDULE_TOPIC_XXXX (tagsCode = delivery time)
        delayed = MessageExtBrokerInner(
            topic="TopicA", body=b"later", queue_id=2, properties={"DELAY": "2"}, store_host=STORE_HOST
        )
        r = store.put_messages([delayed])
        assert r.is_ok(), r
        _record(built, [delayed], [b"later"], r)
        # no properties at all
        bare = MessageExtBrokerInner(topic="TopicE", body=b"bare", queue_id=0, store_host=STORE_HOST)
        r = store.put_messages([bare])
        assert r.is_ok(), r
        _record(built, [bare], [b"bare"], r)
        # transactional records: PREPARED and ROLLBACK stay out of the ConsumeQueue
        for sys_flag in (0x4, 0x8, 0xC):
            msg = MessageExtBrokerInner(
                topic="TopicT",
                body=b"tx %d" % sys_flag,
                queue_id=0,
                sys_flag=sys_flag,
                properties={"TAGS": "tx"},
                store_host=STORE_HOST,
            )
            r = store.put_messages([msg])
            assert r.is_ok(), r
            _record(built, [msg], [msg.body], r)
    return built


@pytest.fixture(scope="session")
def api_store(tmp_path_factory) -> BuiltStore:
    return build_api_store(str(tmp_path_factory.mktemp("api") / "store"))


# GOLDEN.md §3A (IPv4, 169 bytes) and §3C (IPv6 born host, 181 bytes), copied by hand
GOLDEN_3A = bytes.fromhex(
    "000000a9daa320a73610a6860000000300000000000000000000000700000000000004d2000000000000018bcfe56800c0a8"
    "000a0000d4310000018bcfe5687b7f00000100002a9f0000000000000000000000000000000568656c6c6f09546f70696354"
    "65737400404b455953016b2d31206b2d320254414753015461674102554e49515f4b45590137463030303030313030303032"
    "41394630303030303030303030303030303031"
)
GOLDEN_3C = bytes.fromhex(
    "000000b5daa320a73610a6860000000300000000000000000000000700000000000004d2000000100000018bcfe568000000"
    "00000000000000000000000000010000d4310000018bcfe5687b7f00000100002a9f00000000000000000000000000000005"
    "68656c6c6f09546f7069635465737400404b455953016b2d31206b2d320254414753015461674102554e49515f4b45590137"
    "46303030303031303030303241394630303030303030303030303030303031"
)
assert len(GOLDEN_3A) == 169 and len(GOLDEN_3C) == 181


@pytest.fixture(scope="session")
def golden_store(tmp_path_factory) -> Path:
    """One 4 KiB segment named 1234 (the records' PHYSICALOFFSET): 3A, 3C, then GOLDEN §4's
    blank end-of-file record."""
    root = tmp_path_factory.mktemp("golden") / "broker-g"
    (root / "commitlog").mkdir(parents=True)
    data = bytearray(4096)
    data[: len(GOLDEN_3A)] = GOLDEN_3A
    data[len(GOLDEN_3A) : len(GOLDEN_3A) + len(GOLDEN_3C)] = GOLDEN_3C
    rest = len(data) - len(GOLDEN_3A) - len(GOLDEN_3C)
    end = len(GOLDEN_3A) + len(GOLDEN_3C)
    data[end : end + 8] = struct.pack(">i", rest) + bytes.fromhex("cbd43194")
    (root / "commitlog" / "00000000000000001234").write_bytes(bytes(data))
    return root
