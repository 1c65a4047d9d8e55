"""The CommitLog records Pumice writes, next to the ones Apache RocketMQ 4.9.7 writes for the same
sends (issue 17).

One small workload from the official Java client (tests/java) goes to each implementation in
turn, on a fresh store: plain sync sends (tags, keys, a user property), one compressed body, one
batch and one delayed message (level 4, 30 s: still in SCHEDULE_TOPIC_XXXX when the broker
stops). Each broker is stopped cleanly and its first CommitLog file decoded with Pumice's decoder.
Records are matched by topic and body (the bodies are the same bytes on both runs).

test_store_both_ways.py shows each side reads the other's store; this compares what each side
writes: the same pairs in the same order (4.9's HashMap order), WAIT kept where 4.9 keeps it (a
delayed message's copy; a batch's own properties after each of its messages).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pumice.common.message_decoder import decode_message, record_properties
from tests.helpers.clients import create_topic
from tests.helpers.ports import free_port
from tests.oracle.workload import CLUSTER, QUEUES, Drivers, Side, run

TOPIC = "OracleRecords"
MAGIC = 0xDAA320A7  # MESSAGE_MAGIC_CODE (4.9: v1 records)
Record = dict[str, Any]
FIVE_X_PROPERTIES = ("MSG_REGION", "TRACE_ON")  # stored by Pumice on every send, as RocketMQ 5.x


def records(store: Path) -> list[Record]:
    """The messages of the first CommitLog file, in order: topic, body, sys_flag, flag and the
    properties string as stored (pairs in their order, duplicates kept)."""
    buf = (store / "commitlog" / "00000000000000000000").read_bytes()
    out: list[Record] = []
    pos = 0
    while pos + 8 <= len(buf):
        total = int.from_bytes(buf[pos : pos + 4], "big")
        if total <= 0 or int.from_bytes(buf[pos + 4 : pos + 8], "big") != MAGIC:
            break
        m = decode_message(buf, pos)
        pairs = [p.split("\x01", 1) for p in record_properties(buf, pos).split("\x02") if p]
        out.append({"topic": m.topic, "body": bytes(m.body), "sys_flag": m.sys_flag, "flag": m.flag, "pairs": pairs})
        pos += total
    return out


def write_records(kind: str, tmp: Path, java_cp: str, peer_cp: str) -> dict[tuple[str, bytes], Record]:
    store = tmp / "store"
    drivers = Drivers(java_cp, tmp / "java")
    side = Side(kind, tmp / kind, store, free_port(), peer_cp)
    try:
        run(create_topic(SimpleNamespace(ns=side.ns), TOPIC, QUEUES, CLUSTER))
        jobs = {
            "plain": ("produce", {"topic": TOPIC, "count": 2, "mode": "sync", "tags": "TagA", "keys": "kp",
                                  "label": "plain", "prop": "color=blue"}),
            "big": ("produce", {"topic": TOPIC, "count": 1, "mode": "sync", "keys": "kbig", "label": "big",
                                "size": 5000}),
            "batch": ("produce", {"topic": TOPIC, "count": 2, "mode": "batch", "batch": 2, "tags": "TagB",
                                  "keys": "kb", "label": "batch"}),
            "delay": ("produce", {"topic": TOPIC, "count": 1, "mode": "sync", "keys": "kd", "label": "delay",
                                  "delay": 4}),
        }  # fmt: skip
        for name, (sub, args) in jobs.items():  # one after the other: the same order on both sides
            events = drivers.run(side, {name: (sub, args)})[name]
            assert not [e for e in events if e["event"] == "error"], events
        side.stop_broker()
    finally:
        drivers.close()
        side.close()
    return {(r["topic"], r["body"]): r for r in records(store)}


@pytest.fixture(scope="module")
def written(
    tmp_path_factory: pytest.TempPathFactory, java_classpath: str, peer_classpath: str
) -> Iterator[dict[str, dict[tuple[str, bytes], Record]]]:
    tmp = tmp_path_factory.mktemp("records")
    yield {kind: write_records(kind, tmp / kind, java_classpath, peer_classpath) for kind in ("rocketmq", "pumice")}


def pairs_of(written: dict[str, dict[tuple[str, bytes], Record]], kind: str, pick: str) -> dict[bytes, list]:
    """The property pairs of one kind of record (by body label); the values that differ from run
    to run blanked (UNIQ_KEY; REAL_QID: the client starts its round robin at a random queue).
    Pumice's MSG_REGION and TRACE_ON left out: it stores them on every send as RocketMQ 5.x does
    (4.9.7 only with a send hook); the rest keep their order (the HashMap's, by bucket)."""
    out = {}
    for (topic, body), r in written[kind].items():
        if body.startswith(pick.encode()) or (pick == "big" and topic == TOPIC and r["sys_flag"] & 1):
            pairs = [p for p in r["pairs"] if kind != "pumice" or p[0] not in FIVE_X_PROPERTIES]
            out[(topic, body)] = [[k, "" if k in ("UNIQ_KEY", "REAL_QID") else v] for k, v in pairs]
    return out


def test_same_records(written: dict[str, dict[tuple[str, bytes], Record]]) -> None:
    """The same records on both sides (topic, body, sysFlag, flag): 2 plain, 1 compressed, 2 from
    the batch, the delayed one in SCHEDULE_TOPIC_XXXX."""
    java, pumice = written["rocketmq"], written["pumice"]
    assert sorted(java) == sorted(pumice)
    assert len(java) == 6
    for key, r in java.items():
        assert (r["sys_flag"], r["flag"]) == (pumice[key]["sys_flag"], pumice[key]["flag"]), key
    assert sum(1 for topic, _ in java if topic == "SCHEDULE_TOPIC_XXXX") == 1


@pytest.mark.parametrize("pick", ["plain", "big"])
def test_single_message_properties(written: dict[str, dict[tuple[str, bytes], Record]], pick: str) -> None:
    """A single message: the client's properties without WAIT, plus CLUSTER (the same pairs)."""
    java, pumice = pairs_of(written, "rocketmq", pick), pairs_of(written, "pumice", pick)
    assert java.keys() == pumice.keys() and java
    for key in java:
        assert Counter(map(tuple, java[key])) == Counter(map(tuple, pumice[key])), key


def test_batch_message_properties(written: dict[str, dict[tuple[str, bytes], Record]]) -> None:
    java, pumice = pairs_of(written, "rocketmq", "batch"), pairs_of(written, "pumice", "batch")
    assert java.keys() == pumice.keys() and java
    for key in java:
        assert Counter(map(tuple, java[key])) == Counter(map(tuple, pumice[key])), (key, java[key], pumice[key])


def test_delayed_message_properties(written: dict[str, dict[tuple[str, bytes], Record]]) -> None:
    java, pumice = pairs_of(written, "rocketmq", "delay"), pairs_of(written, "pumice", "delay")
    assert java.keys() == pumice.keys() and java
    for key in java:
        assert Counter(map(tuple, java[key])) == Counter(map(tuple, pumice[key])), (key, java[key], pumice[key])


@pytest.mark.parametrize("pick", ["plain", "big", "batch", "delay"])
def test_property_order(written: dict[str, dict[tuple[str, bytes], Record]], pick: str) -> None:
    """The pairs in the same order too: the same properties bytes for the same send."""
    java, pumice = pairs_of(written, "rocketmq", pick), pairs_of(written, "pumice", pick)
    assert java.keys() == pumice.keys() and java
    for key in java:
        assert java[key] == pumice[key], (key, java[key], pumice[key])
