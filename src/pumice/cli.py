"""The ``pumice`` console script."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from pumice.spark.cli import spark as spark_jobs
from pumice.tools.admin_cli import admin

DEFAULT_STORE_DIR = os.path.join(os.path.expanduser("~"), ".pumice", "store")


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level.")
def main(verbose: bool) -> None:
    """Pumice: a RocketMQ-compatible message broker in Python."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@main.command("store-demo")
@click.option("--store-dir", default=DEFAULT_STORE_DIR + "-demo", show_default=True, help="Store root directory.")
@click.option("--messages", "-n", default=10_000, show_default=True, type=click.IntRange(1, 10_000_000))
@click.option("--topic", default="TopicTest", show_default=True)
@click.option("--queues", default=4, show_default=True, type=click.IntRange(1, 1024))
def store_demo(store_dir: str, messages: int, topic: str, queues: int) -> None:
    """Run the embedded store alone: write, dispatch, read back and query by key.

    It appends messages to a real store directory in RocketMQ's on-disk format, lets
    dispatch build the ConsumeQueue and IndexFile, then reads every queue back and looks
    messages up by key and msgId.
    """
    from pumice.store import DefaultMessageStore, GetMessageStatus, MessageExtBrokerInner, MessageStoreConfig
    from pumice.store.message_store import StoreLockedError

    console = Console()
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


@main.command()
@click.option("-c", "config_file", type=click.Path(dir_okay=False), help="namesrv.conf (RocketMQ keys).")
@click.option("-p", "print_config", is_flag=True, help="Print the effective config and exit.")
def namesrv(config_file: str | None, print_config: bool) -> None:
    """The name server: brokers register here, clients ask it for routes (port 9876)."""

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

    controller = NamesrvController(config)

    def banner() -> str:
        return (
            f"The Name Server boot success. serializeType=JSON, listening on {config.listen_host}:"
            f"{controller.server.port}"
        )

    _serve((controller.start, controller.shutdown, banner))


Service = tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]], Callable[[], str]]


def _serve(*services: Service) -> None:
    """Start each (start, shutdown, banner) in order, run until SIGTERM or SIGINT, stop in reverse."""
    import asyncio
    import signal

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
    except (OSError, RuntimeError) as e:
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


@main.command()
@click.option("-c", "config_file", type=click.Path(dir_okay=False), help="broker.conf (RocketMQ keys).")
@click.option("-n", "namesrv_addr", help="Name servers, host:port;host:port (namesrvAddr).")
@click.option("-p", "print_config", is_flag=True, help="Print the effective config and exit.")
def broker(config_file: str | None, namesrv_addr: str | None, print_config: bool) -> None:
    """The broker: stores messages and serves producers and consumers (port 10911)."""
    from pumice.broker.broker_config import load_broker_config
    from pumice.broker.broker_controller import BrokerController
    from pumice.config import ConfigError, to_properties
    from pumice.store.message_store import StoreLockedError

    try:
        broker_cfg, store_cfg = load_broker_config(config_file)
        if namesrv_addr:
            broker_cfg.namesrv_addr = namesrv_addr
            broker_cfg.validate()
    except (ConfigError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    if print_config:
        click.echo(to_properties(broker_cfg, store_cfg), nl=False)
        return
    controller = BrokerController(broker_cfg, store_cfg)

    def banner() -> str:
        return (
            f"The broker[{broker_cfg.broker_name}, {broker_cfg.broker_addr}] boot success. serializeType=JSON "
            f"and name server is {broker_cfg.namesrv_addr}"
        )

    try:
        _serve((controller.start, controller.shutdown, banner))
    except StoreLockedError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.option("--store-dir", default=DEFAULT_STORE_DIR, show_default=True, help="Store root directory.")
@click.option("--namesrv-port", default=9876, show_default=True, type=click.IntRange(0, 65535))
@click.option("--broker-port", default=10911, show_default=True, type=click.IntRange(3, 65534))
def dev(store_dir: str, namesrv_port: int, broker_port: int) -> None:
    """A name server and a broker in one process on 127.0.0.1 (the main job).

    Point RocketMQ 4.x clients at 127.0.0.1:9876. Data goes to ~/.pumice/store; Ctrl-C
    stops both cleanly.
    """
    from pumice.broker.broker_config import BrokerConfig
    from pumice.broker.broker_controller import BrokerController
    from pumice.namesrv.namesrv_config import NamesrvConfig
    from pumice.namesrv.namesrv_controller import NamesrvController
    from pumice.store.message_store import StoreLockedError
    from pumice.store.message_store_config import MessageStoreConfig

    kv_path = os.path.join(os.path.dirname(os.path.abspath(store_dir)), "kvConfig.json")
    namesrv_ctl = NamesrvController(
        NamesrvConfig(listen_port=namesrv_port, listen_host="127.0.0.1", kv_config_path=kv_path)
    )
    broker_cfg = BrokerConfig(listen_port=broker_port, listen_host="127.0.0.1", broker_ip1="127.0.0.1")
    broker_ctl = BrokerController(broker_cfg, MessageStoreConfig(store_path_root_dir=store_dir))

    async def start_namesrv() -> None:
        await namesrv_ctl.start()
        broker_cfg.namesrv_addr = f"127.0.0.1:{namesrv_ctl.server.port}"

    def namesrv_banner() -> str:
        return f"name server on 127.0.0.1:{namesrv_ctl.server.port}"

    def broker_banner() -> str:
        return f"broker {broker_cfg.broker_name} on {broker_cfg.broker_addr}, store in {store_dir}; Ctrl-C stops"

    try:
        _serve(
            (start_namesrv, namesrv_ctl.shutdown, namesrv_banner),
            (broker_ctl.start, broker_ctl.shutdown, broker_banner),
        )
    except StoreLockedError as e:
        raise click.ClickException(str(e)) from None


main.add_command(admin)
main.add_command(spark_jobs)

if __name__ == "__main__":
    main()
