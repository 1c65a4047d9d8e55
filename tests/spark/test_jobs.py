"""The Spark jobs: export, stats, reindex (Python API and ``pumice spark`` command line)."""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import re
import shutil
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from pumice.cli import main
from pumice.spark.jobs import UnknownTopicError, export, reindex, stats
from pumice.spark.jobs.reindex import ReindexError
from pumice.spark.schema import spark_schema
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from tests.helpers.spark import BuiltStore, api_store_config
from tests.helpers.store import small_config
from tests.spark.expected import assert_same_dispatch, decoded_rows, rows_by_offset


def test_export_to_parquet_and_back(spark, api_store: BuiltStore, tmp_path) -> None:
    out = str(tmp_path / "parquet")
    summary = export(spark, api_store.root, out)
    assert summary.messages == len(api_store.puts) and summary.files >= 1
    assert summary.line().startswith(f"export: {len(api_store.puts):,} messages, ")
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
    assert part.messages == want
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
    assert result.summary.messages == len(api_store.puts)
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
    assert result.summary.line().startswith(f"reindex: {len(api_store.puts):,} messages, ")
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
    # stdout holds the data only; the summary line goes to stderr
    lines = r.stdout.strip().splitlines()
    assert [json.loads(line)["messages"] for line in lines] == [30]
    assert r.stderr.startswith("stats: 30 messages, 1 file, ") and r.stderr.endswith("(1 queue)\n")
    r = runner.invoke(main, ["spark", "stats", api_store.root, "--topic", "TopicB", "--csv"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [(row["topic"], row["queueId"], row["messages"], row["maxQueueOffset"]) for row in rows] == [
        ("TopicB", "0", "15", "14"),
        ("TopicB", "1", "15", "14"),
    ]
    assert r.stderr.startswith("stats: 30 messages, 2 files, ")
    r = runner.invoke(main, ["spark", "stats", api_store.root, "--json", "--csv"])
    assert r.exit_code == 2 and "give --json or --csv, not both" in r.stderr
    out = str(tmp_path / "cli-export")
    args = ["spark", "export", api_store.root, "-o", out, "--topic", "TopicB", "--since", "2000-01-01T00:00:00"]
    r = runner.invoke(main, args)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip().splitlines()[-1].startswith("export: 30 messages, ")
    # the output exists now: Spark's analysis refuses, in one line instead of a traceback
    r = runner.invoke(main, args)
    assert r.exit_code == 1 and r.stdout == "" and "Traceback" not in r.output
    assert r.stderr.startswith("Error: [PATH_ALREADY_EXISTS]") and len(r.stderr.strip().splitlines()) == 1
    r = runner.invoke(main, ["spark", "reindex", api_store.root])
    assert r.exit_code != 0 and "--output DIR or --in-place" in r.output


def test_piped_table_is_full_width(spark, api_store: BuiltStore) -> None:
    """Off a terminal (CliRunner's stdout is not one) the table is as wide as it needs: before
    issue 21 it was squeezed to 80 columns, cells cut to "…" and wrapped over several lines."""
    r = CliRunner().invoke(main, ["spark", "stats", api_store.root, "-v"])  # -v is accepted after the command
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    reference = decoded_rows(api_store.root, "broker-a").values()
    queues = sorted({(row["topic"], row["queueId"]) for row in reference})
    header, rule, body, summary = lines[0], lines[1], lines[2:-1], lines[-1]
    assert header.split() == ["topic", "queue", "messages", "body", "bytes", "first", "store", "time", "last",
                              "store", "time", "offsets"]  # fmt: skip
    assert set(rule) == {"─"} and len(rule) > 80
    assert len(body) == len(queues)  # one line per queue
    assert "…" not in r.stdout and all(line == line.rstrip() for line in lines)
    for line, (topic, qid) in zip(body, queues, strict=True):
        cells = line.split()
        assert (cells[0], int(cells[1])) == (topic, qid)
        assert len(cells) == 9  # the times whole, as date and time
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", " ".join(cells[4:6])), line
        assert re.fullmatch(r"\d+–\d+", cells[8]), line
    assert summary.startswith(f"stats: {len(reference)} messages, ")


def test_a_topic_the_store_does_not_have(spark, api_store: BuiltStore, tmp_path) -> None:
    """Before issue 21: an empty table and exit 0."""
    runner = CliRunner()
    for command in (["stats"], ["export", "-o", str(tmp_path / "never")]):
        r = runner.invoke(main, ["spark", *command, api_store.root, "--topic", "TopicA", "--topic", "TopicZ"])
        assert r.exit_code == 1 and r.stdout == ""
        known = "SCHEDULE_TOPIC_XXXX, TopicA, TopicB, TopicC, TopicE, TopicT, TopicV6"
        assert r.stderr == f"Error: topic TopicZ does not exist in {api_store.root} (its topics: {known})\n"
    assert not os.path.exists(tmp_path / "never")
    with pytest.raises(UnknownTopicError, match="topics Nope, Nada do not exist"):
        stats(spark, api_store.root, topics=["TopicB", "Nope", "Nada"])
    # a topic the broker created (config/topics.json) but never stored a message in exists: no messages
    root = tmp_path / "fresh"
    (root / "commitlog").mkdir(parents=True)
    (root / "config").mkdir()
    (root / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": {"Fresh": {"topicName": "Fresh"}}}))
    r = runner.invoke(main, ["spark", "stats", str(root), "--topic", "Fresh", "--csv"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [",".join(("topic", "queueId", "messages", "bodyBytes", "firstStoreTime",
                                              "lastStoreTime", "minQueueOffset", "maxQueueOffset"))]  # fmt: skip
    assert r.stderr.startswith("stats: 0 messages, 0 files, ")
    with pytest.raises(UnknownTopicError, match=r"topic Nope does not exist in .* \(its topics: Fresh\)"):
        stats(spark, str(root), topics=["Nope"])
    (root / "config" / "topics.json").unlink()
    with pytest.raises(UnknownTopicError, match=r"\(it has no topics\)"):
        stats(spark, str(root), topics=["Fresh"])
