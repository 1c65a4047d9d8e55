"""The SQL92 bit-map formats against RocketMQ's own classes: the driver's ``filter-golden`` runs
4.9's BloomFilter, ConsumeQueueExt and ConsumerFilterManager (rocketmq-store 4.9.8; broker and
filter 4.9.7, whose filter code 4.9.8 did not change) and prints what they compute and write;
Pumice's must be the same, byte for byte where it is bytes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from pumice.broker.bloom_filter import BloomFilter
from pumice.broker.consumer_filter_manager import ConsumerFilterManager
from pumice.store.consume_queue_ext import ConsumeQueueExt, CqExtUnit, decorate, is_ext_addr, undecorate
from tests.helpers.java_driver import JavaDriver


@pytest.fixture(scope="module")
def golden(java_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    work = tmp_path_factory.mktemp("golden")
    events = JavaDriver(java_classpath, work, "filter-golden", {"dir": work / "out"}).wait(60)
    assert events[-1]["event"] == "done"
    return events, work / "out"


def of(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    found = [e for e in events if e["event"] == name]
    assert found, name
    return found


def test_bloom_filter_sizes_positions_and_maps(golden) -> None:
    events, _ = golden
    for e in of(events, "bloom"):
        b = BloomFilter(e["f"], e["n"])
        assert (b.k, b.m) == (e["k"], e["m"]), e
    for e in of(events, "positions"):
        assert list(BloomFilter(e["f"], e["n"]).calc_bit_positions(e["str"])) == e["pos"], e
    for e in of(events, "bitmap"):
        b = BloomFilter(20, 32)
        bits = b.new_bits()
        for s in e["strs"]:
            b.hash_to(b.generate(s), bits)
        assert bits.hex() == e["hex"]
        assert (b.is_hit(b.generate("CID_A#T"), bits), b.is_hit(b.generate("CID_C#T"), bits)) == (e["hitA"], e["hitC"])


def test_consume_queue_ext_files_are_4_9_s_byte_for_byte(golden, tmp_path: Path) -> None:
    """The same units through Pumice's ConsumeQueueExt (files of 128 bytes): the same addresses,
    the same files (the roll's ``ffff`` end mark included); and Pumice reads 4.9's files."""
    events, out = golden
    ext = ConsumeQueueExt("TopicA", 0, str(tmp_path / "cqext"), 128)
    for e in of(events, "ext_put"):
        bm = bytes.fromhex(e["bitmap"]) if "bitmap" in e else None
        assert ext.put(CqExtUnit(e["tagsCode"], e["msgStoreTime"], bm)) == e["addr"], e
    (bounds,) = of(events, "ext_bounds")
    assert (ext.get_min_address(), ext.get_max_address()) == (bounds["min"], bounds["max"])
    ext.flush(0)
    for e in of(events, "ext_file"):
        assert (tmp_path / "cqext" / "TopicA" / "0" / e["name"]).read_bytes().hex() == e["hex"], e["name"]
    ext.shutdown()
    java_dir = tmp_path / "java"
    shutil.copytree(out / "cqext", java_dir)
    theirs = ConsumeQueueExt("TopicA", 0, str(java_dir), 128)
    assert theirs.load()
    theirs.recover()
    for e in of(events, "ext_get"):
        unit = theirs.get(e["addr"])
        assert unit is not None and unit.size == e["size"], e
        assert (unit.tags_code, unit.msg_store_time) == (e["tagsCode"], e["msgStoreTime"])
        assert unit.filter_bit_map == (bytes.fromhex(e["bitmap"]) if "bitmap" in e else None)
    assert theirs.get_max_address() == bounds["max"]  # recovery stops after the last unit
    theirs.shutdown()
    for e in of(events, "ext_addr"):
        v = e["v"]
        assert (is_ext_addr(v), undecorate(v), decorate(v)) == (e["isExt"], e["unDecorate"], e["decorate"])


def test_consumer_filter_json_is_4_9_s(golden, tmp_path: Path) -> None:
    """The same registrations give the same answers and the same consumerFilter.json (but for the
    times); Pumice loads 4.9's file as 4.9 reloads it (every live filter dead since load)."""
    events, _ = golden
    ours = ConsumerFilterManager(str(tmp_path / "consumerFilter.json"), BloomFilter(20, 64))
    got = [
        ours.register("TopicA", "CID_1", "a > 1", "SQL92", 1),
        ours.register("TopicA", "CID_2", "b = 'x' AND c IS NOT NULL", "SQL92", 2),
        ours.register("TopicB", "CID_1", "TAGS IN ('a','b')", "SQL92", 3),
        ours.register("TopicB", "CID_3", "*", "TAG", 4),
        ours.register("TopicA", "CID_1", "a > 1", "SQL92", 1),
    ]
    assert got == [e["ret"] for e in of(events, "register")]
    ours.unregister("CID_2")
    (compact,) = of(events, "filter_json")
    theirs = orjson.loads(compact["compact"])
    mine = orjson.loads(ours.snapshot())

    def untimed(table: dict[str, Any]) -> dict[str, Any]:
        return {
            topic: {"topic": t["topic"], "groupFilterData": {
                g: {k: v for k, v in fd.items() if k not in ("bornTime", "deadTime")} | {"dead": fd["dead"]}
                for g, fd in t["groupFilterData"].items()}}
            for topic, t in table["filterDataByTopic"].items()
        }  # fmt: skip

    assert untimed(mine) == untimed(theirs)
    for fd in (fd for t in mine["filterDataByTopic"].values() for fd in t["groupFilterData"].values()):
        assert list(fd) == sorted(fd)  # fastjson's field order
    (reloaded,) = of(events, "filter_json_reloaded")
    path = tmp_path / "theirs.json"
    path.write_text(compact["compact"])
    loaded = ConsumerFilterManager(str(path), BloomFilter(20, 64))
    assert loaded.load()
    assert orjson.loads(loaded.snapshot()) == orjson.loads(reloaded["compact"])
    # a file written with another bloom filter is ignored whole, as 4.9 does
    other = ConsumerFilterManager(str(path), BloomFilter(20, 32))
    assert other.load() and other.filter_data_by_topic == {}
