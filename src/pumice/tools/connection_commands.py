"""Connection commands of ``pumice admin`` (mqadmin's ``command.connection``).

consumerConnection and producerConnection: a group's online clients.
"""

from __future__ import annotations

from typing import Any

import click

from pumice.client.admin_types import Connection
from pumice.remoting.mq_version import version_desc
from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, check_addrs, common_options, run


def _connections_json(conns: list[Connection]) -> list[dict[str, Any]]:
    return [
        {"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language, "version": c.version,
         "versionDesc": version_desc(c.version)}
        for c in conns
    ]  # fmt: skip


def _print_connections(conns: list[Connection]) -> None:
    out.print_table(
        ["#", "#ClientId", "#ClientAddr", "#Language", "#Version"],
        [(f"{i:03d}", c.client_id, c.client_addr, c.language, version_desc(c.version))
         for i, c in enumerate(conns, 1)],
    )  # fmt: skip


@click.command("consumerConnection")
@common_options
@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group.")
@click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help="Ask this broker (host:port).")
def consumer_connection(opts: Common, group: str, broker_addr: str | None) -> None:
    """A group's online clients and subscriptions."""
    if broker_addr:
        conn = run(opts, lambda a: a.consumer_connection_at(group, broker_addr))
    else:
        conn = run(opts, lambda a: a.consumer_connection(group))
    subs = {t: str((s or {}).get("subString", "")) for t, s in sorted(conn.subscriptions.items())}
    if opts.json:
        out.emit_json({
            "group": group,
            "connections": _connections_json(conn.connections),
            "subscriptions": subs,
            "consumeType": conn.consume_type,
            "messageModel": conn.message_model,
            "consumeFromWhere": conn.consume_from_where,
        })  # fmt: skip
        return
    _print_connections(conn.connections)
    click.echo("Below is subscription:")
    out.print_table(["#", "#Topic", "#SubExpression"], [(f"{i:03d}", t, s) for i, (t, s) in enumerate(subs.items(), 1)])
    click.echo(f"ConsumeType: {conn.consume_type}")
    click.echo(f"MessageModel: {conn.message_model}")
    click.echo(f"ConsumeFromWhere: {conn.consume_from_where}")


@click.command("producerConnection")
@common_options
@click.option("-g", "--producerGroup", "group", required=True, help="Producer group.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to (its brokers are asked).")
def producer_connection(opts: Common, group: str, topic: str) -> None:
    """A producer group's connections to the brokers of a topic."""
    conns = run(opts, lambda a: a.producer_connection(group, topic))
    if opts.json:
        out.emit_json({"group": group, "connections": _connections_json(conns)})
        return
    _print_connections(conns)


COMMANDS: tuple[click.Command, ...] = (consumer_connection, producer_connection)
