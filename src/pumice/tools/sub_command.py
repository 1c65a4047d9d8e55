"""What every ``pumice admin`` command shares (mqadmin's ``SubCommand`` plumbing).

``common_options`` adds ``-n``/``--json``/``--debug`` and the ACL keys (``--access-key``,
``--secret-key``; else ``$PUMICE_ACCESS_KEY``/``$PUMICE_SECRET_KEY``; else mqadmin's
``$ROCKETMQ_HOME/conf/tools.yml``) and TLS (``--tls``, ``--tls-ca``) and hands them over as one
``Common``;
``run`` runs the command's body on a started ``AsyncMQAdmin`` and turns the expected failures
into one ``Error: …`` line and exit 1; ``TIMESTAMP`` parses ``-s``/``-e``; ``check_addrs``,
``check_queue`` and ``targets_given`` are the argument checks several commands make; ``refuse_unless``
refuses, by name and with a reason, the values of an mqadmin option Pumice does not support.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import os
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click
import yaml

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQBrokerError, MQClientError, RemotingError, RemotingTimeoutError
from pumice.client.route import TopicRouteData
from pumice.config import is_host_port
from pumice.remoting.tls import client_context

T = TypeVar("T")
DEFAULT_NAMESRV = "127.0.0.1:9876"
NOW = -1
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})$")


@dataclass
class Common:
    namesrv_addr: str
    json: bool
    debug: bool
    access_key: str | None = None
    secret_key: str | None = None
    tls: ssl.SSLContext | None = None


def tools_yml_keys() -> tuple[str | None, str | None]:
    """mqadmin's credentials: accessKey and secretKey of $ROCKETMQ_HOME/conf/tools.yml, if both are there."""
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None, None
    try:
        with open(os.path.join(home, "conf", "tools.yml"), encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return None, None
    if not isinstance(data, dict) or not data.get("accessKey") or not data.get("secretKey"):
        return None, None
    return str(data["accessKey"]), str(data["secretKey"])


def common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """-n, --json and --debug on a command; the command gets them as one ``Common`` (``opts``)."""

    @click.option(
        "-n",
        "--namesrvAddr",
        "namesrv_addr",
        envvar="NAMESRV_ADDR",
        default=DEFAULT_NAMESRV,
        show_default=True,
        show_envvar=True,
        metavar="HOST:PORT[;HOST:PORT]",
        callback=check_addrs,
        help="Name server address list; defaults to $NAMESRV_ADDR, else 127.0.0.1:9876.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document (pretty, orjson) on stdout.")
    @click.option("--debug", is_flag=True, help="Print a traceback for an unexpected error.")
    @click.option(
        "--access-key",
        envvar="PUMICE_ACCESS_KEY",
        show_envvar=True,
        help="ACL account to sign requests with (with --secret-key); else mqadmin's $ROCKETMQ_HOME/conf/tools.yml.",
    )
    @click.option("--secret-key", envvar="PUMICE_SECRET_KEY", show_envvar=True, help="The ACL account's secret key.")
    @click.option("--tls", "use_tls", is_flag=True, help="TLS to the name servers and brokers (tlsMode on their side).")
    @click.option(
        "--tls-ca",
        type=click.Path(exists=True, dir_okay=False),
        help="A CA file the servers' certificates are checked against (implies --tls; default: the system's CAs).",
    )
    @functools.wraps(f)
    def wrapper(
        namesrv_addr: str, as_json: bool, debug: bool, access_key: str | None, secret_key: str | None,
        use_tls: bool, tls_ca: str | None, **kwargs: Any,
    ) -> Any:  # fmt: skip
        if bool(access_key) != bool(secret_key):
            raise click.UsageError("give both --access-key and --secret-key, or neither")
        if not access_key:
            access_key, secret_key = tools_yml_keys()
        tls = client_context(ca_file=tls_ca) if use_tls or tls_ca else None
        return f(Common(namesrv_addr, as_json, debug, access_key, secret_key, tls), **kwargs)

    return wrapper


def check_addrs(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """host:port[;host:port], each port 1 to 65535 (an OverflowError from connect() before)."""
    if value is None:
        return None
    for addr in (a.strip() for a in value.split(";")):
        if addr and not is_host_port(addr):
            raise click.BadParameter(f"{addr!r} is not host:port with a port of 1 to 65535", ctx, param)
    return value


def fail(message: str) -> NoReturn:
    click.echo(f"Error: {message}", err=True)
    raise click.exceptions.Exit(1)


def _remoting_message(e: RemotingError, namesrv_addrs: list[str]) -> str:
    addr = e.addr or "?"
    role = "name server" if addr in namesrv_addrs else "broker"
    text = str(e)
    prefix = f"cannot connect to {addr}: "
    if text.startswith(prefix):
        return f"cannot connect to the {role} {addr}: {text[len(prefix) :]}"
    if isinstance(e, RemotingTimeoutError):
        return f"the {role} {addr} did not answer: {text}"
    return f"the {role} {addr} failed: {text}"


def run(opts: Common, body: Callable[[AsyncMQAdmin], Awaitable[T]]) -> T:
    """``body(admin)`` on a started AsyncMQAdmin; expected failures end the command with one line."""

    async def main() -> T:
        async with AsyncMQAdmin(
            opts.namesrv_addr, access_key=opts.access_key, secret_key=opts.secret_key, use_tls=opts.tls or False
        ) as admin:
            return await body(admin)

    namesrv_addrs = [a.strip() for a in opts.namesrv_addr.split(";") if a.strip()]
    pumice_log = logging.getLogger("pumice")
    saved_level = pumice_log.level
    if not opts.debug and logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # the client logs what it retries or drops; the command reports the outcome in one line
        pumice_log.setLevel(logging.ERROR)
    try:
        return asyncio.run(main())
    except (click.ClickException, click.exceptions.Exit):
        raise
    except MQBrokerError as e:
        fail(f"{e.code_name} ({e.code}): {e.remark}")
    except RemotingError as e:
        fail(_remoting_message(e, namesrv_addrs))
    except MQClientError as e:
        fail(str(e))
    except Exception as e:
        if opts.debug:
            raise
        fail(f"unexpected {type(e).__name__}: {e} (run again with --debug for the traceback)")
    finally:
        pumice_log.setLevel(saved_level)


class Timestamp(click.ParamType):
    """Epoch milliseconds, ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time) or ``now`` (-1)."""

    name = "timestamp"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text == "now":
            return NOW
        if text.isdigit():
            return int(text)
        m = _DATE.match(text)
        if m:
            y, mo, d, h, mi, s, ms = (int(g) for g in m.groups())
            try:
                dt = datetime.datetime(y, mo, d, h, mi, s, ms * 1000)
            except ValueError as e:
                self.fail(f"{text!r} is not a valid date: {e}", param, ctx)
            return int(dt.timestamp() * 1000)
        self.fail(f"{text!r} is not a timestamp: give epoch milliseconds, yyyy-MM-dd#HH:mm:ss:SSS or now", param, ctx)


TIMESTAMP = Timestamp()


def check_queue(route: TopicRouteData, topic: str, broker_name: str, queue_id: int | None, read: bool) -> None:
    """BadParameter (exit 2) unless ``topic``'s route has ``broker_name`` (and ``queue_id``)."""
    names = sorted({q.broker_name for q in route.queue_datas})
    qd = next((q for q in route.queue_datas if q.broker_name == broker_name), None)
    if qd is None:
        raise click.BadParameter(
            f"the topic {topic} has no broker {broker_name!r} (its brokers: {', '.join(names) or 'none'})",
            param_hint="'-b' / '--brokerName'",
        )
    nums = qd.read_queue_nums if read else qd.write_queue_nums
    if queue_id is not None and not 0 <= queue_id < nums:
        raise click.BadParameter(
            f"{topic} has queues 0..{nums - 1} on {broker_name}, not {queue_id}", param_hint="'-i' / '--queueId'"
        )


def refuse_unless(allowed: Callable[[Any], bool], reason: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A callback for an mqadmin option Pumice takes only in part: a value ``allowed`` refuses
    is a usage error (exit 2) naming the option, with ``reason``."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None and not allowed(value):
            raise click.BadParameter(reason, ctx, param)
        return value

    return callback


def targets_given(cluster: str | None, broker_addr: str | None) -> None:
    """UsageError (exit 2) unless exactly one of ``-c`` clusterName and ``-b`` brokerAddr is given."""
    if bool(cluster) == bool(broker_addr):
        raise click.UsageError("give exactly one of -c clusterName and -b brokerAddr")
