"""The ``pumice`` console script."""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from pumice.spark.cli import spark as spark_jobs
from pumice.tools.admin_cli import admin

DEFAULT_STORE_DIR = os.path.join(os.path.expanduser("~"), ".pumice", "store")
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

F = TypeVar("F", bound=Callable[..., Any])


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pumice")
    except Exception:  # not installed as a distribution (a bare source tree)
        return "unknown"


@click.group(context_settings=CONTEXT)
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level (also accepted after the command).")
@click.version_option(_version(), "-V", "--version", prog_name="pumice",
                      message="%(prog)s %(version)s (RocketMQ 4.9 wire and store format)")  # fmt: skip
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """Pumice: a RocketMQ-compatible message broker in Python.

    Start with `pumice dev` (a name server and a broker on 127.0.0.1:9876), then point any
    RocketMQ 4.x client at it. Every command takes -h.
    """
    from pumice.common.logging_config import configure

    ctx.obj = {"verbose": verbose}
    configure(None, verbose=verbose)


def _logging_options(f: F) -> F:
    """-v, --log-dir and --log-config, for the commands that run servers."""
    f = click.option("--log-config", type=click.Path(dir_okay=False),
                     help="A logging config (.json/.yaml dictConfig, else an INI fileConfig) instead of "
                          "Pumice's.")(f)  # fmt: skip
    f = click.option("--log-dir", help="Where the log files go (default: logDir, $PUMICE_LOG_DIR, else "
                                       "~/logs/rocketmqlogs).")(f)  # fmt: skip
    return click.option("-v", "--verbose", "verbose_here", is_flag=True, help="Log at DEBUG level.")(f)


def _setup_logging(main_file: str, verbose_here: bool, log_dir: str | None, log_config: str | None,
                   console_level: int, conf_log_dir: str | None = None,
                   broker_cfg: Any = None) -> None:  # fmt: skip
    """``broker_cfg``: a broker's lines name it, in a directory of its own with isolateLogEnable."""
    from pumice.common.logging_config import LogConfigError, broker_tag, configure, default_log_dir

    ctx = click.get_current_context()
    verbose = verbose_here or bool((ctx.obj or {}).get("verbose"))
    if log_config:  # the file decides levels and places: a setting of ours would be ignored
        given = [n for n, v in (("-v", verbose), ("--log-dir", log_dir), ("logDir", conf_log_dir)) if v]
        if given:
            raise click.UsageError(f"--log-config sets the levels and files: {', '.join(given)} would have no effect")
    directory, tag = log_dir or conf_log_dir, None
    if broker_cfg is not None:
        tag = broker_tag(broker_cfg.broker_name, broker_cfg.broker_id, os.getpid())
        if broker_cfg.isolate_log_enable:  # RocketMQ's brokerLogDir
            directory = os.path.join(directory or default_log_dir(), f"{broker_cfg.broker_name}_{broker_cfg.broker_id}")
    try:
        directory = configure(main_file, verbose=verbose, console_level=console_level,
                              log_dir=directory, log_config=log_config, process_tag=tag)  # fmt: skip
    except LogConfigError as e:
        raise click.ClickException(str(e)) from None
    if directory is not None:
        logging.getLogger("pumice").info("logs in %s", directory)


def _log_data_plane() -> None:
    """One line: which data plane runs (pumice.native); a warning when it is the pure-Python one."""
    from pumice.native import NATIVE, data_plane_line

    logging.getLogger("pumice").log(logging.INFO if NATIVE is not None else logging.WARNING, data_plane_line())


@main.command("store-demo", short_help="The store alone: write, dispatch, read back, query (no network).")
@click.option("--store-dir", default=None,
              help="Store root directory, kept afterwards.  [default: a temporary directory, removed at the "
                   "end]")  # fmt: skip
@click.option("--keep", is_flag=True, help="Keep the temporary store directory (its path is printed).")
@click.option("--messages", "-n", default=10_000, show_default=True, type=click.IntRange(1, 10_000_000))
@click.option("--topic", default="TopicTest", show_default=True)
@click.option("--queues", default=4, show_default=True, type=click.IntRange(1, 1024))
@click.option("-v", "--verbose", "verbose_here", is_flag=True, help="Log at DEBUG level.")
def store_demo(store_dir: str | None, keep: bool, messages: int, topic: str, queues: int, verbose_here: bool) -> None:
    """Run the embedded store alone: write, dispatch, read back and query by key.

    It appends messages to a real store directory in RocketMQ's on-disk format, lets
    dispatch build the ConsumeQueue and IndexFile, then reads every queue back and looks
    messages up by key and msgId. No broker, no network.
    """
    import shutil
    import tempfile

    from pumice.common.logging_config import configure

    if verbose_here:
        configure(None, verbose=True)
    console = Console(soft_wrap=True)  # piped output is not cut at 80 columns
    temporary = store_dir is None
    if store_dir is None:
        store_dir = tempfile.mkdtemp(prefix="pumice-store-demo-")
    try:
        _store_demo(console, store_dir, messages, topic, queues)
    finally:
        if temporary and not keep:
            shutil.rmtree(store_dir, ignore_errors=True)
            console.print(f"store in {store_dir}: removed (--keep or --store-dir keeps it)")
        else:
            console.print(f"store kept in {store_dir} ({_disk_use_mb(store_dir):.1f} MB on disk)")


def _disk_use_mb(root: str) -> float:
    """Blocks in use under ``root`` (sparse files count what they hold, not their length)."""
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            try:
                total += os.stat(os.path.join(d, f)).st_blocks * 512
            except OSError:
                pass
    return total / 1e6


def _store_demo(console: Console, store_dir: str, messages: int, topic: str, queues: int) -> None:
    from pumice.store import DefaultMessageStore, GetMessageStatus, MessageExtBrokerInner, MessageStoreConfig
    from pumice.store.message_store import StoreLockedError

    config = MessageStoreConfig(store_path_root_dir=store_dir)
    store = DefaultMessageStore(config)
    try:
        if not store.load():
            raise click.ClickException(f"cannot load the store at {store_dir}")
        store.start()
    except StoreLockedError as e:
        raise click.ClickException(str(e)) from e
    try:
        before = {q: store.get_max_offset_in_queue(topic, q) for q in range(queues)}
        run = int(time.time())
        batch = []
        t0 = time.perf_counter()
        last = None
        for i in range(messages):
            batch.append(
                MessageExtBrokerInner(
                    topic=topic,
                    body=f"message {i} of run {run}".encode(),
                    queue_id=i % queues,
                    properties={"TAGS": "TagA" if i % 2 == 0 else "TagB", "KEYS": f"run{run}-{i}"},
                    born_timestamp=int(time.time() * 1000),
                    store_host=(b"\x7f\x00\x00\x01", 10911),
                )
            )
            if len(batch) == 256 or i == messages - 1:
                r = store.put_messages(batch)
                if not r.is_ok():
                    raise click.ClickException(f"put failed: {r.status.name} {r.remark}")
                last = r
                batch = []
        put_s = time.perf_counter() - t0
        deadline = time.monotonic() + 60
        while store.dispatch_behind_bytes() > 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        table = Table(title=f"{topic} in {store_dir}")
        for col in ("queue", "min offset", "max offset", "new", "read back", "TagA only"):
            table.add_column(col, justify="right")
        from pumice.common.java_hash import tags_code

        total_read = 0
        for q in range(queues):
            offset, got, tag_a = before[q], 0, 0
            for _ in range(1_000_000):
                res = store.get_message("dev", topic, q, offset, 32)
                if res is None or res.status is not GetMessageStatus.FOUND:
                    break
                got += res.message_count
                offset = res.next_begin_offset
                res.release()
            offset = before[q]
            for _ in range(1_000_000):
                res = store.get_message("dev", topic, q, offset, 32, tags_codes={tags_code("TagA")})
                if res is None or res.status is not GetMessageStatus.FOUND:
                    break
                tag_a += res.message_count
                offset = res.next_begin_offset
                res.release()
            total_read += got
            table.add_row(
                str(q),
                str(store.get_min_offset_in_queue(topic, q)),
                str(store.get_max_offset_in_queue(topic, q)),
                str(store.get_max_offset_in_queue(topic, q) - before[q]),
                str(got),
                str(tag_a),
            )
        console.print(table)
        key = f"run{run}-{messages // 2}"
        found = store.query_message(topic, key, 4)
        console.print(
            f"wrote {messages} messages in {put_s:.3f}s ({messages / put_s:,.0f} msg/s); read back {total_read}"
        )
        console.print(f"query by key {key!r}: {[m.body.decode() for m in found]}")
        if last is not None and last.append_message_result is not None:
            msg_id = last.append_message_result.msg_ids[-1]
            m = store.look_message_by_msg_id(msg_id)
            console.print(f"lookup by msgId {msg_id}: {m.body.decode() if m else None!r}")
        if total_read != messages:
            console.print(f"[red]read back {total_read} of {messages} messages[/red]")
            sys.exit(1)
    finally:
        store.shutdown()


@main.command(short_help="The name server (RocketMQ's mqnamesrv), port 9876.")
@click.option("-c", "config_file", type=click.Path(dir_okay=False), help="namesrv.conf (RocketMQ keys).")
@click.option("-p", "print_config", is_flag=True, help="Print the effective config and exit.")
@_logging_options
def namesrv(
    config_file: str | None, print_config: bool, verbose_here: bool, log_dir: str | None, log_config: str | None
) -> None:
    """The name server: brokers register here, clients ask it for routes (port 9876).

    Logs go to ~/logs/rocketmqlogs/namesrv.log (and remoting.log); the terminal shows
    warnings and errors. Stop it with Ctrl-C or SIGTERM.
    """

    from pumice.config import ConfigError, apply_properties, load_properties, to_properties
    from pumice.namesrv.namesrv_config import NamesrvConfig
    from pumice.namesrv.namesrv_controller import NamesrvController

    config = NamesrvConfig()
    try:
        if config_file:
            apply_properties([config], load_properties(config_file), config_file)
        config.validate()
    except (ConfigError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    if print_config:
        click.echo(to_properties(config), nl=False)
        return
    _setup_logging("namesrv.log", verbose_here, log_dir, log_config, logging.WARNING, config.log_dir)

    controller = NamesrvController(config)

    def banner() -> str:
        return (
            f"The Name Server boot success. serializeType=JSON, listening on {config.listen_host}:"
            f"{controller.server.port}" + (f"; metrics on {controller.metrics.url}" if controller.metrics else "")
        )

    _serve((controller.start, controller.shutdown, banner))


Service = tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]], Callable[[], str]]


def _serve(*services: Service) -> None:
    """Start each (start, shutdown, banner) in order, run until SIGTERM or SIGINT, stop in reverse."""
    import asyncio
    import signal

    from pumice.common.gc_freeze import freeze_start_up_heap

    async def run() -> None:
        # handlers first (as RocketMQ's shutdown hook): a signal during a long recovery lets
        # start-up finish, then stops cleanly, instead of killing the process half-way
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        started: list[Callable[[], Awaitable[None]]] = []
        try:
            for start, shutdown, banner in services:
                # a start that fails half-way is shut down too (e.g. the broker's store, so
                # that its abort file goes and the next start is not an abnormal recovery)
                started.append(shutdown)
                await start()
                click.echo(banner())
                if stop.is_set():
                    click.echo("stop requested during start-up: stopping")
                    return
            freeze_start_up_heap()  # after every start-up: the heap that lives as long as the process
            sys.stdout.flush()
            await stop.wait()
        finally:
            for shutdown in reversed(started):
                try:
                    await shutdown()
                except Exception as e:  # the others still stop
                    click.echo(f"shutdown failed: {e!r}", err=True)

    try:
        _run_loop(run())
    except OSError as e:
        hint = ""
        if e.errno == errno.EADDRINUSE:
            hint = (
                "; is another pumice dev, broker or name server running? Stop it, or choose other ports "
                "(listenPort in the conf file; pumice dev --namesrv-port / --broker-port)"
            )
        raise click.ClickException(f"cannot start: {e}{hint}") from None
    except RuntimeError as e:
        raise click.ClickException(f"cannot start: {e}") from None


def _run_loop(coro: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed (the servers' event loop), else on asyncio's own."""
    import asyncio

    try:
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(coro)


@main.command(short_help="The broker (RocketMQ's mqbroker), port 10911.")
@click.option("-c", "config_file", type=click.Path(dir_okay=False), help="broker.conf (RocketMQ keys).")
@click.option("-n", "namesrv_addr", help="Name servers, host:port;host:port (namesrvAddr).")
@click.option("-p", "print_config", is_flag=True, help="Print the effective config and exit.")
@click.option("--enable-proxy", is_flag=True,
              help="Also serve RocketMQ 5's gRPC clients (the proxy in LOCAL mode) on grpcServerPort (8081) of "
                   "rmq-proxy.json in $RMQ_PROXY_HOME/conf, else $ROCKETMQ_HOME/conf.")  # fmt: skip
@_logging_options
def broker(
    config_file: str | None,
    namesrv_addr: str | None,
    print_config: bool,
    enable_proxy: bool,
    verbose_here: bool,
    log_dir: str | None,
    log_config: str | None,
) -> None:
    """The broker: stores messages and serves producers and consumers (port 10911).

    Logs go to ~/logs/rocketmqlogs (broker.log, store.log, remoting.log, ha.log); the
    terminal shows warnings and errors. Stop it with Ctrl-C or SIGTERM: it flushes and
    unregisters.
    """
    from pumice.broker.broker_config import load_broker_config
    from pumice.broker.broker_controller import BrokerController
    from pumice.config import ConfigError, to_properties
    from pumice.store.message_store import StoreLockedError

    try:
        broker_cfg, store_cfg = load_broker_config(config_file)
        if namesrv_addr:
            broker_cfg.namesrv_addr = namesrv_addr
            broker_cfg.validate()
        proxy_cfg = _proxy_config(None) if enable_proxy else None
    except (ConfigError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    if print_config:
        click.echo(to_properties(broker_cfg, store_cfg), nl=False)
        return
    _setup_logging("broker.log", verbose_here, log_dir, log_config, logging.WARNING, broker_cfg.log_dir, broker_cfg)
    _log_data_plane()
    controller = BrokerController(broker_cfg, store_cfg)

    def banner() -> str:
        tip = f"The broker[{broker_cfg.broker_name}, {broker_cfg.broker_addr}] boot success. serializeType=JSON"
        tip += f" and name server is {broker_cfg.namesrv_addr}" if broker_cfg.namesrv_addr else ""
        return tip + (f"; metrics on {controller.metrics.url}" if controller.metrics else "")

    services: list[Service] = [(controller.start, controller.shutdown, banner)]
    if proxy_cfg is not None:
        services.append(_proxy_service(controller, proxy_cfg))
    try:
        _serve(*services)
    except StoreLockedError as e:
        raise click.ClickException(str(e)) from None


def _proxy_config(grpc_port: int | None) -> Any:
    """rmq-proxy.json (ProxyConfigError is a ValueError: the caller reports it)."""
    from pumice.proxy.proxy_config import load_proxy_config

    config = load_proxy_config()
    if grpc_port is not None:
        config.grpc_server_port = grpc_port
    return config


def _proxy_service(controller: Any, proxy_cfg: Any, optional: bool = False) -> Service:
    """The gRPC endpoint as a service after the broker's (it stops first). ``optional`` (pumice
    dev's default port): a port in use is a warning in the banner, not a failed start."""
    try:
        from pumice.proxy.grpc_server import ProxyServer
    except ImportError as e:  # the stubs are generated by the build (python3 -m pumice.proxy.generate)
        raise click.ClickException(f"the gRPC proxy cannot load: {e}") from None
    proxy = ProxyServer(controller, proxy_cfg, optional=optional)
    return (proxy.start, proxy.shutdown, proxy.banner)


@main.command(short_help="A name server and a broker on 127.0.0.1:9876: start here.")
@click.option("-c", "config_file", type=click.Path(dir_okay=False),
              help="A broker.conf for the embedded broker (RocketMQ keys); the options below win over it. It "
                   "listens on 127.0.0.1 and registers with the embedded name server: namesrvAddr, listenHost "
                   "and brokerIP1 are refused.")  # fmt: skip
@click.option("--store-dir", default=None,
              help=f"Store root directory.  [default: storePathRootDir of -c, else {DEFAULT_STORE_DIR}]")  # fmt: skip
@click.option("--namesrv-port", default=9876, show_default=True, type=click.IntRange(0, 65535))
@click.option("--broker-port", default=None, type=click.IntRange(3, 65534),
              help="The broker's port (also -2 and +1 are used).  [default: listenPort of -c, else 10911]")  # fmt: skip
@click.option("--dledger", "dledger_nodes", default=0, type=click.IntRange(0, 9), metavar="N",
              help="Instead of one broker, a DLedger group of N brokers (RaftNode00: n0, n1, ...; 3 for "
                   "automatic failover) on broker ports +0, +10, +20, ..., DLedger ports --dledger-port +0, +1, "
                   "..., stores <store-dir>/n0, n1, ...")  # fmt: skip
@click.option("--dledger-port", default=40911, show_default=True, type=click.IntRange(1, 65526),
              help="The first DLedger node's dLegerPeers port.")  # fmt: skip
@click.option("--proxy/--no-proxy", "enable_proxy", default=True, show_default=True,
              help="Serve RocketMQ 5's gRPC clients (the proxy in LOCAL mode) beside the broker.")  # fmt: skip
@click.option("--grpc-port", default=None, type=click.IntRange(0, 65535),
              help="The gRPC port.  [default: grpcServerPort of rmq-proxy.json, else 8081]")  # fmt: skip
@click.option("--dashboard/--no-dashboard", "enable_dashboard", default=True, show_default=True,
              help="Serve the web dashboard (pumice dashboard) on 127.0.0.1.")  # fmt: skip
@click.option("--dashboard-port", default=None, type=click.IntRange(0, 65535),
              help="The dashboard's port.  [default: 8080; taken: the dev runs without it and says so]")  # fmt: skip
@_logging_options
def dev(
    config_file: str | None,
    store_dir: str | None,
    namesrv_port: int,
    broker_port: int | None,
    dledger_nodes: int,
    dledger_port: int,
    enable_proxy: bool,
    grpc_port: int | None,
    enable_dashboard: bool,
    dashboard_port: int | None,
    verbose_here: bool,
    log_dir: str | None,
    log_config: str | None,
) -> None:
    """A name server and a broker in one process on 127.0.0.1 (the main job).

    Point RocketMQ 4.x clients at 127.0.0.1:9876, RocketMQ 5's gRPC clients at 127.0.0.1:8081
    (--no-proxy: none; when 8081 is taken and no --grpc-port is given, the broker runs without
    it and says so). Data goes to ~/.pumice/store (files are
    sparse: a new store takes about 25 MB on disk); logs to ~/logs/rocketmqlogs, and INFO
    lines to the terminal (-v: DEBUG). Ctrl-C stops both cleanly. With --dledger 3: a
    DLedger group of three brokers instead (a master elected, two slaves; docs/DLEDGER.md).
    """
    from pumice.broker.broker_config import load_broker_config
    from pumice.broker.broker_controller import BrokerController
    from pumice.config import ConfigError, load_properties
    from pumice.namesrv.namesrv_config import NamesrvConfig
    from pumice.namesrv.namesrv_controller import NamesrvController
    from pumice.store.message_store import StoreLockedError

    try:
        broker_cfg, store_cfg = load_broker_config(config_file)
        given = set(load_properties(config_file)) if config_file else set()
        proxy_cfg = _proxy_config(grpc_port) if enable_proxy and not dledger_nodes else None
    except (ConfigError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    overridden = sorted(given & {"namesrvAddr", "listenHost", "brokerIP1"})
    if overridden:
        raise click.ClickException(
            f"{config_file}: {', '.join(overridden)} cannot apply to pumice dev (127.0.0.1, its own name server): "
            "remove them, or run pumice broker -c"
        )
    if store_dir is None:
        store_dir = store_cfg.store_path_root_dir if "storePathRootDir" in given else DEFAULT_STORE_DIR
    store_dir = os.path.abspath(os.path.expanduser(store_dir))
    store_cfg.store_path_root_dir = store_dir
    if broker_port is not None or "listenPort" not in given:
        broker_cfg.listen_port = broker_port or 10911
        store_cfg.ha_listen_port = broker_cfg.listen_port + 1
    broker_cfg.listen_host = "127.0.0.1"
    broker_cfg.broker_ip1 = "127.0.0.1"
    _setup_logging("broker.log", verbose_here, log_dir, log_config, logging.INFO, broker_cfg.log_dir, broker_cfg)
    _log_data_plane()
    kv_path = os.path.join(os.path.dirname(store_dir), "kvConfig.json")
    namesrv_ctl = NamesrvController(
        NamesrvConfig(listen_port=namesrv_port, listen_host="127.0.0.1", kv_config_path=kv_path)
    )
    brokers = (
        _dledger_dev_group(config_file, store_dir, broker_cfg.listen_port, dledger_nodes, dledger_port)
        if dledger_nodes
        else [BrokerController(broker_cfg, store_cfg)]
    )

    async def start_namesrv() -> None:
        await namesrv_ctl.start()
        for b in brokers:
            b.config.namesrv_addr = f"127.0.0.1:{namesrv_ctl.server.port}"

    def namesrv_banner() -> str:
        return f"name server on 127.0.0.1:{namesrv_ctl.server.port}"

    def broker_banner() -> str:
        return f"broker {broker_cfg.broker_name} on {broker_cfg.broker_addr}, store in {store_dir}; Ctrl-C stops"

    def node_banner(b: BrokerController) -> Callable[[], str]:
        def banner() -> str:
            sc = b.store_config
            return (f"DLedger node {sc.d_leger_self_id} of {sc.d_leger_group}: broker on {b.config.broker_addr}, "
                    f"dLegerPeers port {sc.dledger_peer_map[sc.d_leger_self_id or '']}, store in "
                    f"{sc.store_path_root_dir}")  # fmt: skip

        return banner

    services: list[Service] = [(start_namesrv, namesrv_ctl.shutdown, namesrv_banner)]
    if dledger_nodes:
        services += [(b.start, b.shutdown, node_banner(b)) for b in brokers]
        services.append((_nothing, _nothing, lambda: "the group elects a master in a few seconds; Ctrl-C stops"))
    else:
        services.append((brokers[0].start, brokers[0].shutdown, broker_banner))
        if proxy_cfg is not None:
            services.append(_proxy_service(brokers[0], proxy_cfg, optional=grpc_port is None))
    if enable_dashboard:
        from pumice.dashboard.server import dev_dashboard

        services.append(dev_dashboard(lambda: f"127.0.0.1:{namesrv_ctl.server.port}", dashboard_port))
    try:
        _serve(*services)
    except StoreLockedError as e:
        raise click.ClickException(f"{e} (--store-dir)") from None


async def _nothing() -> None:
    pass


@main.command(short_help="The web dashboard (rocketmq-dashboard's pages), port 8080.")
@click.option("-n", "namesrv_addr", default=lambda: os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
              show_default="$NAMESRV_ADDR, else 127.0.0.1:9876", help="Name servers, host:port;host:port.")  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on. The dashboard has no authentication: keep it on 127.0.0.1 unless "
                   "everyone who reaches it may administer the cluster.")  # fmt: skip
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--sample-interval", default=10.0, show_default=True, type=click.FloatRange(0.5, 600),
              help="Seconds between the samples of TPS and lag the charts draw (an hour is kept).")  # fmt: skip
@click.option("--access-key", envvar="PUMICE_ACCESS_KEY", show_envvar=True,
              help="ACL account the dashboard signs its requests with (with --secret-key).")  # fmt: skip
@click.option("--secret-key", envvar="PUMICE_SECRET_KEY", show_envvar=True, help="The ACL account's secret key.")
def dashboard(
    namesrv_addr: str, host: str, port: int, sample_interval: float, access_key: str | None, secret_key: str | None
) -> None:
    """The web dashboard of any RocketMQ 4.x cluster: cluster, topics, consumer groups, producers,
    messages, trace, ACL, DLedger, store health, replication and charts (docs/dashboard.md)."""
    from pumice.dashboard.server import DashboardServer

    if bool(access_key) != bool(secret_key):
        raise click.UsageError("give both --access-key and --secret-key, or neither")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = DashboardServer(namesrv_addr, host, port, sample_interval, access_key, secret_key)
    _serve((server.start, server.shutdown, server.banner))


def _dledger_dev_group(
    config_file: str | None, store_dir: str, broker_port: int, nodes: int, dledger_port: int
) -> list[Any]:
    """``pumice dev --dledger N``: N brokers of RaftNode00 as the distribution's
    conf/dledger/broker-n*.conf describe them, on 127.0.0.1."""
    from pumice.broker.broker_config import apply_role, load_broker_config
    from pumice.broker.broker_controller import BrokerController

    peers = ";".join(f"n{i}-127.0.0.1:{dledger_port + i}" for i in range(nodes))
    out = []
    for i in range(nodes):
        broker_cfg, store_cfg = load_broker_config(config_file)
        broker_cfg.broker_name = "RaftNode00"
        broker_cfg.broker_cluster_name = "RaftCluster"
        broker_cfg.listen_host = broker_cfg.broker_ip1 = "127.0.0.1"
        broker_cfg.listen_port = broker_port + 10 * i
        store_cfg.store_path_root_dir = os.path.join(store_dir, f"n{i}")
        store_cfg.store_path_commit_log = None
        store_cfg.enable_d_leger_commit_log = True
        store_cfg.d_leger_group = "RaftNode00"
        store_cfg.d_leger_peers = peers
        store_cfg.d_leger_self_id = f"n{i}"
        store_cfg.validate()
        apply_role(broker_cfg, store_cfg)
        out.append(BrokerController(broker_cfg, store_cfg))
    return out


admin.short_help = "mqadmin's commands: topics, groups, offsets, messages, ACL."
spark_jobs.short_help = "Spark jobs over a store directory (export, stats, reindex)."
main.add_command(admin)
main.add_command(spark_jobs)


def _whole_short_help(group: click.Group) -> None:
    """Command lists show each command's whole first sentence (wrapped), not click's cut at
    the terminal's width with "..."."""
    for cmd in group.commands.values():
        if cmd.short_help is None and cmd.help:
            first = " ".join(cmd.help.strip().split("\n\n")[0].split())
            end = first.find(". ")
            cmd.short_help = first if end < 0 else first[: end + 1]
        if isinstance(cmd, click.Group):
            _whole_short_help(cmd)


_whole_short_help(main)

if __name__ == "__main__":
    main()
