"""``pumice spark``: the Spark jobs from the command line (``pumice.spark.jobs``).

    pumice spark export /data/store --output /data/export [--topic T]… [--since …] [--until …]
    pumice spark stats /data/store [--topic T]… [--json | --csv] [-n NAMESRV]
    pumice spark reindex /data/store (--output DIR | --in-place) [-c broker.conf]

Each starts a SparkSession (``--master``, default ``local[*]``; ``--conf key=value`` for more)
and ends with a one-line summary: ``stats: 308 messages, 4 files, 7.1 s (11 queues)``. pyspark
is imported only when a job runs, so ``pumice`` works without the ``spark`` extra.

==================  =========================================================================
output              where and how
==================  =========================================================================
stats' tables       stdout, in ``pumice admin``'s style. On a terminal: as wide as the
                    terminal, cells wrap (nothing is cut to an ellipsis). Piped or redirected:
                    as wide as the table needs, one row per line, no trailing blanks
``--json``          stdout: one JSON object per line (queues, then consumer groups' lag)
``--csv``           stdout: CSV with a header line; with ``--namesrv`` the lag table follows
                    after an empty line, with its own header
the summary line    stdout after a table; stderr with ``--json``/``--csv``, so that stdout
                    holds the data only
Spark's own output  its log lines, the JVM's notices and the stage progress bars go to a
                    temporary file, deleted when the job succeeds; when the job fails its path
                    is printed (stderr), and when Spark does not start its last lines are.
                    ``-v``/``--verbose`` (after the subcommand, or ``pumice -v spark …``)
                    shows them as they come, with the progress bar, and logs Pumice at DEBUG
errors              one line on stderr (``Error: …``) and exit 1: a ``--topic`` the store
                    does not have, the spark extra or Java missing, unreadable consumer
                    offsets; exit 2 for a usage error (not a store directory, …)
==================  =========================================================================
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

_MASTER = click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
_CONF = click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
_TOPIC = click.option(
    "--topic",
    "topics",
    multiple=True,
    help="Only this topic, read through its ConsumeQueues (repeatable); one the store does not have is an "
    "error. Default: every record of the CommitLog.",
)
_VERBOSE = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show Spark's log lines and progress bars as they come (hidden by default), and log at DEBUG level.",
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


def _source_tree() -> Path | None:
    """The clone Pumice runs from (an editable install or ``src`` on the path), or None."""
    here = Path(__file__).resolve()  # <clone>/src/pumice/spark/cli.py
    root = here.parents[3]
    if here.parents[2].name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def install_hint() -> str:
    """How to get the spark extra: from a package index, and from a clone (where the first
    cannot work: pip would look for a package named pumice instead of the clone)."""
    root = _source_tree()
    clone = f"pip install -e {shlex.quote(f'{root}[spark]')}" if root else "pip install -e '.[spark]' in the clone"
    return f"pip install 'pumice[spark]', or from a clone: {clone}"


def _verbose(verbose_here: bool) -> bool:
    """-v after the subcommand, or before it (``pumice -v spark …``, kept in the root context)."""
    obj = click.get_current_context().find_root().obj
    return verbose_here or (isinstance(obj, dict) and bool(obj.get("verbose")))


def _debug_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root.setLevel(logging.DEBUG)
    for handler in root.handlers:
        handler.setLevel(logging.DEBUG)


@contextmanager
def _stderr_to(path: str) -> Iterator[None]:
    """File descriptor 2 points at ``path`` inside the block, so that a process started there
    (the JVM, and through it Spark's Python workers) keeps writing there afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError:
        return ""


def _first_line(e: Exception) -> str:
    """What Spark's analysis refused (an output that exists, …), without its JVM stack."""
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


@contextmanager
def _session(job: str, master: str, confs: tuple[str, ...], verbose: bool) -> Iterator:
    """A SparkSession for one job: a new one, stopped afterwards, or the active one (when called
    from a program that has one; ``--master`` and ``--conf`` are then not applied).

    Unless ``verbose``, a new JVM's stderr (Spark's log, the progress bars, the JVM's notices)
    goes to a temporary file instead of the terminal: deleted after a run that succeeds, named
    on stderr after one that fails."""
    try:
        from pyspark import SparkContext
        from pyspark.errors import AnalysisException
        from pyspark.sql import SparkSession
    except ImportError:
        raise click.ClickException(f"pumice spark needs PySpark: {install_hint()}") from None
    logging.getLogger("py4j").setLevel(logging.WARNING)  # at DEBUG it logs every call into the JVM
    active = SparkSession.getActiveSession()
    if active is not None:
        try:
            yield active
        except AnalysisException as e:
            raise click.ClickException(_first_line(e)) from None
        return
    builder = (
        SparkSession.builder.master(master)
        .appName(f"pumice spark {job}")
        .config("spark.ui.showConsoleProgress", "true" if verbose else "false")
        .config("spark.ui.enabled", "false")
    )
    if master.startswith("local"):  # everything on this machine: stay on loopback
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    for kv in confs:
        key, sep, value = kv.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {kv!r}", param_hint="--conf")
        builder = builder.config(key.strip(), value.strip())
    spark_log: str | None = None
    if not verbose and SparkContext._gateway is None:  # a JVM already running keeps its stderr
        fd, spark_log = tempfile.mkstemp(prefix=f"pumice-spark-{job}-", suffix=".log")
        os.close(fd)
    try:
        if spark_log is None:
            spark = builder.getOrCreate()
        else:
            with _stderr_to(spark_log):
                spark = builder.getOrCreate()
    except Exception as e:
        if spark_log is not None:
            click.echo(_tail(spark_log), err=True)
            os.unlink(spark_log)
        raise click.ClickException(f"Spark did not start: {e}") from None
    # with -v the progress bar shows at WARN and above; quiet, the log file keeps WARN lines too,
    # but a JVM that was already running writes where it always did
    spark.sparkContext.setLogLevel("WARN" if verbose or spark_log is not None else "ERROR")
    failed = False
    try:
        yield spark
    except AnalysisException as e:
        raise click.ClickException(_first_line(e)) from None
    except (click.ClickException, click.exceptions.Exit, click.Abort, KeyboardInterrupt):
        raise
    except BaseException:
        failed = True
        raise
    finally:
        spark.stop()
        if spark_log is not None:
            if failed:
                click.echo(f"Spark's own log of this run (-v shows it as it comes): {spark_log}", err=True)
            else:
                os.unlink(spark_log)


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


def _require_spark(verbose_here: bool) -> bool:
    """A one-line error, not a traceback, when the spark extra or Java is missing; whether the
    run is verbose (then Pumice logs at DEBUG)."""
    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(f"pumice spark needs {' and '.join(missing)}: {install_hint()} (and Java 17)")
    java_home = os.environ.get("JAVA_HOME")
    if java_home and not os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        raise click.ClickException(
            f"JAVA_HOME={java_home} has no bin/java: point it at a Java 17 installation, or unset it to use the "
            "java on PATH"
        )
    if not java_home and shutil.which("java") is None:
        raise click.ClickException("pumice spark needs Java 17: install a JRE (openjdk-17-jre-headless) or set "
                                   "JAVA_HOME")  # fmt: skip
    verbose = _verbose(verbose_here)
    if verbose:
        _debug_logging()
    return verbose


def _check_topics(store: str, topics: tuple[str, ...]) -> None:
    """Before Spark starts: a topic the store does not have is a one-line error."""
    from pumice.spark.jobs.topics import UnknownTopicError, check_topics

    try:
        check_topics(store, topics)
    except UnknownTopicError as e:
        raise click.ClickException(str(e)) from None


def _print_table(table: Any) -> None:
    """On a terminal, as wide as it is; otherwise as wide as the table needs (never squeezed to
    80 columns), without trailing blanks."""
    from rich.console import Console

    plain = {"markup": False, "emoji": False, "highlight": False}  # a topic "[x]" prints as it is
    console = Console(**plain)  # type: ignore[arg-type]
    if console.is_terminal:
        console.print(table)
        return
    buf = io.StringIO()
    Console(file=buf, width=1 << 20, color_system=None, **plain).print(table)  # type: ignore[arg-type]
    for line in buf.getvalue().splitlines():
        click.echo(line.rstrip())


def _table(title: str | None, columns: Sequence[str], left: Sequence[str], rows: list[list[str]]) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  header_style="bold")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col in left else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _csv(header: Sequence[str], rows: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(header), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    click.echo(buf.getvalue(), nl=False)


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
@_VERBOSE
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
    verbose: bool,
) -> None:
    """Export messages to Parquet, partitioned by topic and date (UTC date of the store time)."""
    verbose = _require_spark(verbose)
    from pumice.spark.jobs import export as run

    since_t, until_t = _time(since, "--since"), _time(until, "--until")
    _check_topics(store, topics)
    with _session("export", master, confs, verbose) as session:
        summary = run(
            session, store, output, topics=topics, since=since_t, until=until_t, broker_name=broker_name, mode=mode
        )
    click.echo(summary.line())


_QUEUE_FIELDS = ("topic", "queueId", "messages", "bodyBytes", "firstStoreTime", "lastStoreTime", "minQueueOffset",
                 "maxQueueOffset")  # fmt: skip
_LAG_FIELDS = ("group", "topic", "brokerName", "queueId", "brokerOffset", "consumerOffset", "lag")
_QUEUE_COLUMNS = ("topic", "queue", "messages", "body bytes", "first store time", "last store time", "offsets")
_LAG_COLUMNS = ("group", "topic", "broker", "queue", "broker offset", "consumer offset", "lag")


def _queue_cells(q: Any) -> list[str]:
    first, last = (t.isoformat(sep=" ", timespec="milliseconds") for t in (q.first_store_time, q.last_store_time))
    offsets = f"{q.min_queue_offset}–{q.max_queue_offset}"
    return [q.topic, str(q.queue_id), f"{q.messages:,}", f"{q.body_bytes:,}", first, last, offsets]


def _lag_cells(g: Any) -> list[str]:
    return [g.group, g.topic, g.broker_name, str(g.queue_id), f"{g.broker_offset:,}", f"{g.consumer_offset:,}",
            f"{g.lag:,}"]  # fmt: skip


@spark.command()
@_STORE
@_TOPIC
@_BROKER
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (per queue, then per group and queue).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header line instead of a table.")
@click.option(
    "--namesrv", "-n", help="Name servers (host:port;host:port): add each consumer group's lag, from the brokers."
)
@_MASTER
@_CONF
@_VERBOSE
def stats(
    store: str,
    topics: tuple[str, ...],
    broker_name: str | None,
    as_json: bool,
    as_csv: bool,
    namesrv: str | None,
    master: str,
    confs: tuple[str, ...],
    verbose: bool,
) -> None:
    """Per topic and queue: messages, body bytes, first and last store time, queue offsets;
    with --namesrv, each consumer group's lag per queue (as mqadmin consumerProgress).

    A table on stdout (full width when piped), or --json / --csv; the summary line then goes to
    stderr."""
    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    verbose = _require_spark(verbose)
    from pumice.client import MQClientError
    from pumice.spark.jobs import stats as run

    _check_topics(store, topics)
    with _session("stats", master, confs, verbose) as session:
        try:
            result = run(session, store, topics=topics, broker_name=broker_name, namesrv=namesrv)
        except (MQClientError, OSError) as e:
            raise click.ClickException(f"cannot read consumer offsets from {namesrv}: {e}") from None
    queues = [
        dict(zip(_QUEUE_FIELDS, (q.topic, q.queue_id, q.messages, q.body_bytes,
                                 q.first_store_time.isoformat(timespec="milliseconds"),
                                 q.last_store_time.isoformat(timespec="milliseconds"),
                                 q.min_queue_offset, q.max_queue_offset), strict=True))
        for q in result.queues
    ]  # fmt: skip
    lags = [
        dict(zip(_LAG_FIELDS, (g.group, g.topic, g.broker_name, g.queue_id, g.broker_offset, g.consumer_offset, g.lag),
                 strict=True))
        for g in result.lags
    ]  # fmt: skip
    if as_json:
        for row in queues + lags:
            click.echo(json.dumps(row))
    elif as_csv:
        _csv(_QUEUE_FIELDS, queues)
        if namesrv:
            click.echo()
            _csv(_LAG_FIELDS, lags)
    else:
        _print_table(_table(None, _QUEUE_COLUMNS, ("topic",), [_queue_cells(q) for q in result.queues]))
        if namesrv:
            click.echo()
            _print_table(
                _table("consumer lag", _LAG_COLUMNS, ("group", "topic", "broker"), [_lag_cells(g) for g in result.lags])
            )
    click.echo(result.summary.line(), err=as_json or as_csv)


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
@_VERBOSE
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
    verbose: bool,
) -> None:
    """Rebuild ConsumeQueue and IndexFile from the CommitLog, byte-identical to the broker's dispatch."""
    verbose = _require_spark(verbose)
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
    with _session("reindex", master, confs, verbose) as session:
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
