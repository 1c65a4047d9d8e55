"""``pumice spark``: the Spark jobs from the command line (``pumice.spark.jobs``).

    pumice spark export /data/store --output /data/export [--topic T]… [--since …] [--until …]
    pumice spark stats /data/store [--topic T]… [--json]
    pumice spark reindex /data/store (--output DIR | --in-place) [-c broker.conf]

Each starts a SparkSession (``--master``, default ``local[*]``; ``--conf key=value`` for more),
shows Spark's console progress bar and ends with a one-line summary. pyspark is imported
only when a job runs, so ``pumice`` works without the ``spark`` extra.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import click

_MASTER = click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
_CONF = click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
_TOPIC = click.option(
    "--topic",
    "topics",
    multiple=True,
    help="Only this topic, read through its ConsumeQueues (repeatable). Default: every record of the CommitLog.",
)
_BROKER = click.option(
    "--broker-name",
    help="The brokerName column (default: the store directory's name, or broker-a when that is 'store').",
)


def _check_store(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A store's root directory: it holds commitlog/ (a mistyped directory read as an empty store)."""
    if not os.path.isdir(os.path.join(value, "commitlog")):
        raise click.BadParameter(f"{value} is not a store: it has no commitlog directory", ctx, param)
    return value


_STORE = click.argument("store", type=click.Path(exists=True, file_okay=False), callback=_check_store)


@contextmanager
def _session(job: str, master: str, confs: tuple[str, ...]) -> Iterator:
    """A SparkSession for one job: a new one, stopped afterwards, or the active one (when called
    from a program that has one; ``--master`` and ``--conf`` are then not applied)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise click.ClickException("pumice spark needs PySpark: pip install 'pumice[spark]'") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    builder = (
        SparkSession.builder.master(master)
        .appName(f"pumice spark {job}")
        .config("spark.ui.showConsoleProgress", "true")
        .config("spark.ui.enabled", "false")
    )
    if master.startswith("local"):  # everything on this machine: stay on loopback
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    for kv in confs:
        key, sep, value = kv.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {kv!r}", param_hint="--conf")
        builder = builder.config(key.strip(), value.strip())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # the progress bar shows at WARN and above
    try:
        yield spark
    finally:
        spark.stop()


def _time(value: str | None, name: str) -> datetime | int | None:
    """ISO 8601 (no zone: UTC) or epoch milliseconds."""
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"expected ISO 8601 or epoch ms, got {value!r}", param_hint=name) from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


@click.group()
def spark() -> None:
    """Spark jobs over a store directory (a copy, a backup or a stopped broker's)."""


def _require_spark() -> None:
    """A one-line error, not a traceback, when the spark extra or Java is missing."""
    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(
            f"pumice spark needs {' and '.join(missing)}: pip install 'pumice[spark]' (and Java 17)"
        )
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise click.ClickException("pumice spark needs Java 17: install a JRE or set JAVA_HOME")


@spark.command()
@_STORE
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False), help="Parquet output directory.")
@_TOPIC
@click.option("--since", help="Store time from (inclusive): ISO 8601 (UTC unless a zone is given) or epoch ms.")
@click.option("--until", help="Store time until (exclusive): ISO 8601 or epoch ms.")
@_BROKER
@click.option(
    "--mode",
    type=click.Choice(["error", "append", "overwrite"]),
    default="error",
    show_default=True,
    help="When the output exists: fail, add files, or replace it.",
)
@_MASTER
@_CONF
def export(
    store: str,
    output: str,
    topics: tuple[str, ...],
    since: str | None,
    until: str | None,
    broker_name: str | None,
    mode: str,
    master: str,
    confs: tuple[str, ...],
) -> None:
    """Export messages to Parquet, partitioned by topic and date (UTC date of the store time)."""
    _require_spark()
    from pumice.spark.jobs import export as run

    since_t, until_t = _time(since, "--since"), _time(until, "--until")
    with _session("export", master, confs) as session:
        summary = run(
            session, store, output, topics=topics, since=since_t, until=until_t, broker_name=broker_name, mode=mode
        )
    click.echo(summary.line())


@spark.command()
@_STORE
@_TOPIC
@_BROKER
@click.option("--json", "as_json", is_flag=True, help="One JSON object per queue instead of a table.")
@click.option(
    "--namesrv", "-n", help="Name servers (host:port;host:port): add each consumer group's lag, from the brokers."
)
@_MASTER
@_CONF
def stats(
    store: str,
    topics: tuple[str, ...],
    broker_name: str | None,
    as_json: bool,
    namesrv: str | None,
    master: str,
    confs: tuple[str, ...],
) -> None:
    """Per topic and queue: messages, body bytes, first and last store time, queue offsets;
    with --namesrv, each consumer group's lag per queue (as mqadmin consumerProgress)."""
    _require_spark()
    from pumice.client import MQClientError
    from pumice.spark.jobs import stats as run

    with _session("stats", master, confs) as session:
        try:
            result = run(session, store, topics=topics, broker_name=broker_name, namesrv=namesrv)
        except (MQClientError, OSError) as e:
            raise click.ClickException(f"cannot read consumer offsets from {namesrv}: {e}") from None
    if as_json:
        for q in result.queues:
            row = {
                "topic": q.topic,
                "queueId": q.queue_id,
                "messages": q.messages,
                "bodyBytes": q.body_bytes,
                "firstStoreTime": q.first_store_time.isoformat(timespec="milliseconds"),
                "lastStoreTime": q.last_store_time.isoformat(timespec="milliseconds"),
                "minQueueOffset": q.min_queue_offset,
                "maxQueueOffset": q.max_queue_offset,
            }
            click.echo(json.dumps(row))
        for g in result.lags:
            click.echo(json.dumps({"group": g.group, "topic": g.topic, "brokerName": g.broker_name,
                                   "queueId": g.queue_id, "brokerOffset": g.broker_offset,
                                   "consumerOffset": g.consumer_offset, "lag": g.lag}))  # fmt: skip
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{store}")
        for col in ("topic", "queue", "messages", "body bytes", "first store time", "last store time", "offsets"):
            table.add_column(col, justify="left" if col == "topic" else "right")
        for q in result.queues:
            table.add_row(
                q.topic,
                str(q.queue_id),
                f"{q.messages:,}",
                f"{q.body_bytes:,}",
                q.first_store_time.isoformat(sep=" ", timespec="milliseconds"),
                q.last_store_time.isoformat(sep=" ", timespec="milliseconds"),
                f"{q.min_queue_offset}–{q.max_queue_offset}",
            )
        Console().print(table)
        if namesrv:
            lag_table = Table(title="consumer lag")
            for col in ("group", "topic", "broker", "queue", "broker offset", "consumer offset", "lag"):
                lag_table.add_column(col, justify="left" if col in ("group", "topic", "broker") else "right")
            for g in result.lags:
                lag_table.add_row(g.group, g.topic, g.broker_name, str(g.queue_id), f"{g.broker_offset:,}",
                                  f"{g.consumer_offset:,}", f"{g.lag:,}")  # fmt: skip
            Console().print(lag_table)
    click.echo(result.summary.line())


@spark.command()
@_STORE
@click.option(
    "--output", "-o", type=click.Path(file_okay=False), help="New or empty directory for consumequeue/ and index/."
)
@click.option(
    "--in-place",
    is_flag=True,
    help="Rebuild inside the store (broker stopped; its lock is taken). The "
    "old files are kept in <store>/reindex-<time>/old.",
)
@click.option(
    "-c",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="broker.conf: file sizes, index geometry and delay levels as the broker used them.",
)
@click.option("--cq-file-size", type=int, help="mapedFileSizeConsumeQueue in bytes (default 6000000).")
@click.option("--index-slots", type=int, help="maxHashSlotNum (default 5000000).")
@click.option("--index-num", type=int, help="maxIndexNum (default 20000000).")
@_MASTER
@_CONF
def reindex(
    store: str,
    output: str | None,
    in_place: bool,
    config_file: str | None,
    cq_file_size: int | None,
    index_slots: int | None,
    index_num: int | None,
    master: str,
    confs: tuple[str, ...],
) -> None:
    """Rebuild ConsumeQueue and IndexFile from the CommitLog, byte-identical to the broker's dispatch."""
    _require_spark()
    from pumice.spark.jobs import reindex as run
    from pumice.spark.jobs.reindex import ReindexError

    if (output is None) == (not in_place):
        raise click.UsageError("give --output DIR or --in-place")
    config = _store_config(config_file)
    if cq_file_size is not None:
        config.mapped_file_size_consume_queue = cq_file_size
    if index_slots is not None:
        config.max_hash_slot_num = index_slots
    if index_num is not None:
        config.max_index_num = index_num
    try:
        config.validate()
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    with _session("reindex", master, confs) as session:
        try:
            result = run(session, store, output, in_place=in_place, config=config)
        except ReindexError as e:
            raise click.ClickException(str(e)) from None
    if result.backup:
        click.echo(f"the old consumequeue/ and index/ are in {result.backup}")
    click.echo(result.summary.line())


def _store_config(config_file: str | None):
    from pumice.store.message_store_config import MessageStoreConfig

    if not config_file:
        return MessageStoreConfig()
    from pumice.broker.broker_config import load_broker_config
    from pumice.config import ConfigError

    try:
        return load_broker_config(config_file)[1]
    except (ConfigError, ValueError) as e:
        raise click.ClickException(str(e)) from None
