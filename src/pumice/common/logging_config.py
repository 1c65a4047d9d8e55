"""Logging of the servers: RocketMQ's log files, a terminal stream, or the operator's own config.

Files go to ``~/logs/rocketmqlogs`` as RocketMQ's do, unless ``--log-dir``, the ``logDir``
key, or ``$PUMICE_LOG_DIR`` (in that order) names another directory. Each file rotates at
128 MiB and keeps 10 old ones (``broker.log.1`` …), RocketMQ's logback policy. A record goes
to exactly one file, by its logger's name:

===============  ====================================================================
file             loggers
===============  ====================================================================
ha.log           ``pumice.store.ha_*``, ``pumice.store.group_transfer_service`` (replication)
store.log        the rest of ``pumice.store`` (CommitLog, dispatch, flush, clean-up, recovery)
remoting.log     ``pumice.remoting`` (connections, TLS)
namesrv.log      ``pumice.namesrv``; in `pumice namesrv` every other logger too
broker.log       everything else (``pumice.broker``, ``pumice.acl``, …): the broker's main log
===============  ====================================================================

A broker's lines name it and its process (``[broker-a_0 pid=4242]``, brokerName_brokerId as
RocketMQ names a broker's own log directory), so brokers that share a log directory can be told
apart in one file; with ``isolateLogEnable=true`` each writes its files in a directory of its own,
``<log dir>/<brokerName>_<brokerId>/``, as RocketMQ 4.9 does.

Records go through a bounded queue to one writer thread (``QueueListener``), so a terminal
that is not read (a full pipe, a paused tty) or a slow disk never blocks the event loop; past
``QUEUE_MAX`` waiting records new ones are dropped and counted, and the count is logged once
the writer catches up.

The terminal (stderr) shows INFO for `pumice dev` and WARNING for `pumice broker` and
`pumice namesrv`, whose files hold the INFO lines; ``-v`` makes both DEBUG. ``--log-config
FILE`` hands everything to the standard library instead: a ``.json``, ``.yaml`` or ``.yml``
file is a ``logging.config.dictConfig`` dictionary, any other a ``fileConfig`` INI file.
"""

from __future__ import annotations

import atexit
import json
import logging
import logging.config
import logging.handlers
import os
import queue
from pathlib import Path

QUEUE_MAX = 10_000
ROTATE_BYTES = 128 * 1024 * 1024
ROTATE_KEEP = 10
FILE_FORMAT = "%(asctime)s %(levelname)s %(threadName)s - %(name)s - %(message)s"
CONSOLE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONSOLE_FORMAT_SHORT = "%(asctime)s %(levelname)-5s %(message)s"
# first match wins; a record whose logger matches none goes to the process's main file
ROUTES: tuple[tuple[str, str], ...] = (
    ("pumice.store.ha_", "ha.log"),
    ("pumice.store.group_transfer_service", "ha.log"),
    ("pumice.store", "store.log"),
    ("pumice.remoting", "remoting.log"),
    ("pumice.namesrv", "namesrv.log"),
)


def tagged_format(tag: str) -> str:
    """FILE_FORMAT with ``[tag]`` after the level (``%`` in the tag kept as text)."""
    return FILE_FORMAT.replace("%(levelname)s ", "%(levelname)s [" + tag.replace("%", "%%") + "] ", 1)


def broker_tag(broker_name: str, broker_id: int, pid: int) -> str:
    return f"{broker_name}_{broker_id} pid={pid}"


class LogConfigError(ValueError):
    """A log directory that cannot be written, or a --log-config file that does not load."""


def default_log_dir() -> str:
    return os.environ.get("PUMICE_LOG_DIR") or os.path.join(os.path.expanduser("~"), "logs", "rocketmqlogs")


def route(logger_name: str, main_file: str) -> str:
    for prefix, file_name in ROUTES:
        if logger_name.startswith(prefix):
            return file_name
    return main_file


class _RouteFilter(logging.Filter):
    def __init__(self, file_name: str, main_file: str) -> None:
        super().__init__()
        self.file_name = file_name
        self.main_file = main_file

    def filter(self, record: logging.LogRecord) -> bool:
        return route(record.name, self.main_file) == self.file_name


class _DroppingQueueHandler(logging.handlers.QueueHandler):
    """Never blocks: a full queue drops the record and counts it."""

    def __init__(self, q: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(q)
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1
            return
        if self.dropped and self.queue.qsize() < QUEUE_MAX // 2:  # type: ignore[attr-defined]
            n, self.dropped = self.dropped, 0
            note = logging.LogRecord("pumice.logging", logging.WARNING, __file__, 0,
                                     "%d log records dropped: the log writer fell behind", (n,), None)  # fmt: skip
            try:
                self.queue.put_nowait(note)
            except queue.Full:
                self.dropped += n


_listener: logging.handlers.QueueListener | None = None


def _stop_listener() -> None:
    global _listener
    if _listener is not None:
        _listener.stop()  # writes what is queued
        _listener = None


def configure(
    main_file: str | None,
    *,
    verbose: bool = False,
    console_level: int = logging.WARNING,
    log_dir: str | None = None,
    log_config: str | None = None,
    process_tag: str | None = None,
) -> str | None:
    """Set the root logger up for a server process (``main_file``: "broker.log" or
    "namesrv.log"; None: the terminal only; ``process_tag``: what each file line names, in
    brackets). The directory written to, or None."""
    if log_config:
        _load_user_config(log_config)
        return None
    global _listener
    _stop_listener()
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    level = logging.DEBUG if verbose else logging.INFO
    console = logging.StreamHandler()
    console.setLevel(logging.DEBUG if verbose else console_level)
    short = console_level <= logging.INFO and not verbose
    console.setFormatter(logging.Formatter(CONSOLE_FORMAT_SHORT if short else CONSOLE_FORMAT))
    if main_file is None:  # a command's own short run: the terminal, directly
        root.setLevel(logging.DEBUG if verbose else console_level)
        root.addHandler(console)
        return None
    root.setLevel(level)
    handlers: list[logging.Handler] = [console]
    directory = log_dir or default_log_dir()
    try:
        os.makedirs(directory, exist_ok=True)
        if not os.access(directory, os.W_OK):
            raise PermissionError(f"{directory} is not writable")
    except OSError as e:
        raise LogConfigError(f"cannot write logs to {directory}: {e}; choose another with --log-dir") from None
    files = {main_file} | {f for _, f in ROUTES}
    if main_file == "namesrv.log":
        files = {"namesrv.log", "remoting.log"}  # a name server has no store
    formatter = logging.Formatter(FILE_FORMAT if process_tag is None else tagged_format(process_tag))
    for file_name in sorted(files):
        handler = logging.handlers.RotatingFileHandler(
            os.path.join(directory, file_name), maxBytes=ROTATE_BYTES, backupCount=ROTATE_KEEP, delay=True,
            encoding="utf-8",
        )  # fmt: skip
        handler.setLevel(level)
        handler.setFormatter(formatter)
        handler.addFilter(_RouteFilter(file_name, main_file))
        handlers.append(handler)
    q: queue.Queue[logging.LogRecord] = queue.Queue(QUEUE_MAX)
    root.addHandler(_DroppingQueueHandler(q))
    _listener = logging.handlers.QueueListener(q, *handlers, respect_handler_level=True)
    _listener.start()
    atexit.register(_stop_listener)
    return directory


def _load_user_config(path: str) -> None:
    p = Path(path)
    try:
        if p.suffix in (".json", ".yaml", ".yml"):
            text = p.read_text(encoding="utf-8")
            if p.suffix == ".json":
                config = json.loads(text)
            else:
                import yaml

                config = yaml.safe_load(text)
            if isinstance(config, dict):  # Pumice's modules are imported by now: keep their loggers
                config.setdefault("disable_existing_loggers", False)
            logging.config.dictConfig(config)
        else:
            if not p.is_file():
                raise FileNotFoundError(f"no such file: {path}")
            logging.config.fileConfig(path, disable_existing_loggers=False)
    except Exception as e:  # json, yaml, configparser and logging all raise their own
        raise LogConfigError(f"--log-config {path}: {e}") from None
