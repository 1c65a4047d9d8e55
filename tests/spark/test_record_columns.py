"""The vectorised record decoder against the store's own, without Spark."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from pumice.common.message_decoder import string_to_message_properties
from pumice.spark.options import ReadOptions
from pumice.spark.record_columns import _properties
from pumice.spark.store_reader import plan, read_segment
from tests.helpers.spark import BuiltStore
from tests.spark.expected import decoded_rows

AWKWARD = [
    "",
    "TAGS\x01a",
    "KEYS\x01k1 k2\x02TAGS\x01t\x02",  # the 4.9.0 form: a trailing \x02
    "\x02\x02TAGS\x01t\x02\x02",
    "a\x01b\x01c\x02\x01novalue\x02noname\x01\x02x\x01y",  # a value holding \x01; empty names and values
    "TAGS\x01first\x02TAGS\x01second",  # a repeated name: the last value wins
    "UNIQ_KEY\x010A0000010000000000000001\x02TAGS\x01u\x02UNIQ_KEY\x01",  # an empty value is dropped
    "ключ\x01значение\x02KEYS\x01ü",
    "\x02",
    "justtext",
]


def test_properties_split_as_the_store_decoder_does() -> None:
    for n in range(1, len(AWKWARD) + 1):  # every prefix: strings meet at their ends differently
        strings = AWKWARD[:n]
        mapping, keys, tags, uniq = _properties(pa.array(strings, pa.string()))
        columns = (mapping.to_pylist(), keys.to_pylist(), tags.to_pylist(), uniq.to_pylist())
        for s, m, k, t, u in zip(strings, *columns, strict=True):
            want = string_to_message_properties(s)
            assert dict(m) == want, repr(s)
            assert (k, t, u) == (want.get("KEYS"), want.get("TAGS"), want.get("UNIQ_KEY")), repr(s)


@pytest.mark.parametrize("batch_size", [1, 7, 8192])
def test_segment_batches_equal_the_store_decoder(api_store: BuiltStore, batch_size: int) -> None:
    opts = ReadOptions.parse({"path": api_store.root, "batchSize": str(batch_size), "checkCRC": "true"})
    rows = {}
    for part in plan(opts):
        for batch in read_segment(part, opts):
            assert batch.num_rows <= batch_size
            for r in batch.to_pylist():
                rows[r["commitLogOffset"]] = r
    reference = decoded_rows(api_store.root, "broker-a")
    assert rows.keys() == reference.keys()
    for off, r in rows.items():
        want = reference[off]
        assert dict(r["properties"]) == want["properties"]
        assert r["body"] == want["body"] and r["bornHost"] == want["bornHost"]
        assert (r["msgId"], r["offsetMsgId"]) == (want["msgId"], want["offsetMsgId"])
        assert r["storeHost"] == want["storeHost"] and r["queueOffset"] == want["queueOffset"]


def test_crc_check_stops_at_a_damaged_body(api_store: BuiltStore, tmp_path) -> None:
    first = sorted(os.listdir(os.path.join(api_store.root, "commitlog")))[0]
    data = bytearray(open(os.path.join(api_store.root, "commitlog", first), "rb").read())
    data[88 + 3] ^= 0xFF  # a body byte of the first record: the lengths still add up
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / first).write_bytes(bytes(data))
    for crc, want in (("false", True), ("true", False)):
        opts = ReadOptions.parse({"path": str(tmp_path), "checkCRC": crc})
        batches = list(read_segment(plan(opts)[0], opts))
        assert bool(batches) == want
    assert np.frombuffer(bytes(data[:4]), ">i4")[0] > 0


def test_batches_are_bounded_in_bytes(api_store: BuiltStore, monkeypatch) -> None:
    from pumice.spark import store_reader

    monkeypatch.setattr(store_reader, "MAX_BATCH_BYTES", 8192)
    seen = 0
    for topic in ("", "TopicA"):
        opts = ReadOptions.parse({"path": api_store.root, "topic": topic})
        for part in plan(opts):
            read = (
                store_reader.read_segment(part, opts)
                if isinstance(part, store_reader.CommitLogPartition)
                else store_reader.read_consume_queue(part, opts)
            )
            for batch in read:
                rows = batch.select(["body", "sysFlag"]).to_pylist()
                stored = sum(len(r["body"]) for r in rows if not r["sysFlag"] & 1)  # inflated ones grew
                assert stored < 8192 + 1100  # the record that crosses the limit still goes in
                seen += batch.num_rows
    assert seen == len(api_store.puts) + sum(1 for p in api_store.puts if p.topic == "TopicA")


def test_bodies_inflate_by_their_compression_type() -> None:
    """sysFlag bits 8-10 (4.9.8): ZLIB (also with no type, older clients), LZ4 and ZSTD bodies
    are inflated; one that does not inflate is left as stored."""
    import zlib

    import lz4.frame
    import zstandard

    from pumice.spark.record_columns import _inflate

    plain = [b"plain %d " % i * 300 for i in range(5)]
    stored = [plain[0], zlib.compress(plain[1]), lz4.frame.compress(plain[2]),
              zstandard.ZstdCompressor().compress(plain[3]), b"not lz4"]  # fmt: skip
    flags = np.array([0, 0x1, 0x101, 0x201, 0x101], dtype=np.int32)
    out = _inflate(pa.array(stored, pa.binary()), flags, np.arange(5, dtype=np.int64)).to_pylist()
    assert out == [*plain[:4], b"not lz4"]
