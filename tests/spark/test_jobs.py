"""The Spark jobs: export, stats, reindex (Python API and ``pumice spark`` command line)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from pumice.cli import main
from pumice.spark.jobs import export, reindex, stats
from pumice.spark.jobs.reindex import ReindexError
from pumice.spark.schema import spark_schema
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from tests.helpers.spark import BuiltStore, api_store_config
from tests.helpers.store import small_config
from tests.spark.expected import assert_same_dispatch, decoded_rows, rows_by_offset


def test_export_to_parquet_and_back(spark, api_store: BuiltStore, tmp_path) -> None:
    out = str(tmp_path / "parquet")
    summary = export(spark, api_store.root, out)
    assert summary.rows == len(api_store.puts) and summary.files >= 1
    assert summary.line().startswith(f"export: {len(api_store.puts):,} rows, ")
    assert os.path.isdir(os.path.join(out, "topic=TopicA"))
    schema = spark_schema().add("date", "date")
    back = spark.read.schema(schema).parquet(out)
    got = rows_by_offset(back)
    reference = decoded_rows(api_store.root, "broker-a")
    assert set(got) == set(reference)
    for off, row in got.items():
        stored = reference[off]["storeTimestamp"]
        assert row.pop("date") == datetime.fromtimestamp(stored.timestamp(), UTC).date()
        assert row == reference[off]
    # a topic and a store-time range: since inclusive, until exclusive
    # epoch ms (collected timestamps are naive local times, which .timestamp() reads as such)
    times = sorted(round(r["storeTimestamp"].timestamp() * 1000) for r in reference.values() if r["topic"] == "TopicA")
    since, until = times[10], times[-10]
    part = export(spark, api_store.root, str(tmp_path / "part"), topics=["TopicA"], since=since, until=until)
    want = sum(1 for t in times if since <= t < until)
    assert part.rows == want
    assert spark.read.parquet(str(tmp_path / "part")).count() == want


def test_stats_per_queue(spark, api_store: BuiltStore) -> None:
    result = stats(spark, api_store.root)
    reference = decoded_rows(api_store.root, "broker-a").values()
    want: dict[tuple[str, int], list] = {}
    for r in reference:
        w = want.setdefault((r["topic"], r["queueId"]), [0, 0, r["storeTimestamp"], r["storeTimestamp"]])
        w[0] += 1
        w[1] += len(r["body"])
        w[2], w[3] = min(w[2], r["storeTimestamp"]), max(w[3], r["storeTimestamp"])
    got = {
        (q.topic, q.queue_id): [q.messages, q.body_bytes, q.first_store_time, q.last_store_time] for q in result.queues
    }
    assert got == want
    assert result.summary.rows == len(api_store.puts)
    assert result.summary.files == len(os.listdir(os.path.join(api_store.root, "commitlog")))
    only = stats(spark, api_store.root, topics=["TopicB"])
    assert [(q.queue_id, q.messages, q.min_queue_offset, q.max_queue_offset) for q in only.queues] == [
        (0, 15, 0, 14),
        (1, 15, 0, 14),
    ]


def test_reindex_is_byte_identical_to_dispatch(spark, api_store: BuiltStore, tmp_path) -> None:
    out = tmp_path / "rebuilt"
    result = reindex(spark, api_store.root, str(out), config=api_store_config(str(out)))
    assert result.records == len(api_store.puts)
    assert result.index_files == 3 and result.consume_queue_files > result.queues
    assert_same_dispatch(api_store.root, str(out))
    assert result.summary.line().startswith(f"reindex: {len(api_store.puts):,} rows, ")
    with pytest.raises(ReindexError, match="not an empty directory"):
        reindex(spark, api_store.root, str(out), config=api_store_config(str(out)))
    with pytest.raises(ReindexError, match="inside its data"):
        reindex(spark, api_store.root, os.path.join(api_store.root, "index"))


def test_reindex_of_a_store_without_keys(spark, tmp_path) -> None:
    # no record has an index key: dispatch still made one (empty) index file, and so must reindex
    root = str(tmp_path / "store")
    with DefaultMessageStore(small_config(root)) as store:
        msgs = [MessageExtBrokerInner(topic="NoKeys", body=b"x" * i, queue_id=i % 2) for i in range(1, 9)]
        assert store.put_messages(msgs).is_ok()
    result = reindex(spark, root, str(tmp_path / "out"), config=small_config(root))
    assert (result.records, result.index_files) == (8, 1)
    assert_same_dispatch(root, str(tmp_path / "out"))


def test_reindex_in_place(spark, api_store: BuiltStore, tmp_path) -> None:
    copy = str(tmp_path / "store")
    shutil.copytree(api_store.root, copy)
    shutil.rmtree(os.path.join(copy, "index"))  # lost, and a ConsumeQueue file damaged
    victim = os.path.join(copy, "consumequeue", "TopicA", "0", "00000000000000000000")
    with open(victim, "r+b") as f:
        f.write(bytes(200))
    fd = os.open(os.path.join(copy, "lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a broker still running
    try:
        with pytest.raises(ReindexError, match="stop the broker"):
            reindex(spark, copy, in_place=True, config=api_store_config(copy))
    finally:
        os.close(fd)
    result = reindex(spark, copy, in_place=True, config=api_store_config(copy))
    assert result.root == copy and result.backup is not None
    assert_same_dispatch(api_store.root, copy)
    assert os.listdir(result.backup) == ["consumequeue"]  # the damaged files are kept


def test_command_line(spark, api_store: BuiltStore, tmp_path) -> None:
    # the command line reuses the active session (these tests' own) instead of starting one
    runner = CliRunner()
    r = runner.invoke(main, ["spark", "stats", api_store.root, "--topic", "TopicC", "--json"])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert json.loads(lines[0])["messages"] == 30 and lines[-1].startswith("stats: 30 rows, 1 files, ")
    out = str(tmp_path / "cli-export")
    r = runner.invoke(
        main, ["spark", "export", api_store.root, "-o", out, "--topic", "TopicB", "--since", "2000-01-01T00:00:00"]
    )
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1].startswith("export: 30 rows, ")
    r = runner.invoke(main, ["spark", "reindex", api_store.root])
    assert r.exit_code != 0 and "--output DIR or --in-place" in r.output
