"""Producer commands of ``pumice admin`` (mqadmin's ``command.producer``).

producer: every producer group a broker knows, and each of its clients (GET_ALL_PRODUCER_INFO).
"""

from __future__ import annotations

import click

from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, check_addrs, common_options, run


@click.command("producer")
@common_options
@click.option("-b", "--broker", "broker_addr", required=True, callback=check_addrs, help="Broker address (host:port).")
def producer(opts: Common, broker_addr: str) -> None:
    """The producer groups a broker knows and their clients."""
    groups = run(opts, lambda a: a.producer_info(broker_addr.strip()))
    if opts.json:
        out.emit_json({"brokerAddr": broker_addr.strip(), "producers": groups})
        return
    for group, clients in groups.items():
        if not clients:
            click.echo(f"producer group ({group}) instances are empty")
            continue
        for c in clients:
            info = (f"clientId={c.get('clientId')},remoteIP={c.get('remoteIP')}, language={c.get('language')}, "
                    f"version={c.get('version')}, lastUpdateTimestamp={c.get('lastUpdateTimestamp')}")  # fmt: skip
            click.echo(f"producer group ({group}) instance : {info}")


COMMANDS: tuple[click.Command, ...] = (producer,)
