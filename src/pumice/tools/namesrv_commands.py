"""Name server commands of ``pumice admin`` (mqadmin's ``command.namesrv``).

wipeWritePerm and addWritePerm: a broker's topics made read-only, or writable again, on every
name server given with ``-n`` (until the broker's next registration, which restores its perm).
"""

from __future__ import annotations

import click

from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, common_options, run


def _perm_command(opts: Common, broker_name: str, wipe: bool) -> None:
    name = broker_name.strip()
    results = run(opts, lambda a: a.wipe_write_perm(name) if wipe else a.add_write_perm(name))
    verb = "wipe" if wipe else "add"
    if opts.json:
        out.emit_json({
            ns: {"ok": isinstance(r, int), "topicCount": r if isinstance(r, int) else None,
                 "error": None if isinstance(r, int) else r}
            for ns, r in results.items()
        })  # fmt: skip
    else:
        for ns, r in results.items():
            if isinstance(r, int):
                click.echo(f"{verb} write perm of broker[{name}] in name server[{ns}] OK, {r}")
            else:
                click.echo(f"{verb} write perm of broker[{name}] in name server[{ns}] Failed: {r}")
    if not all(isinstance(r, int) for r in results.values()):
        raise click.exceptions.Exit(1)


@click.command("wipeWritePerm")
@common_options
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
def wipe_write_perm(opts: Common, broker_name: str) -> None:
    """Make a broker's topics read-only on every name server (until it registers again)."""
    _perm_command(opts, broker_name, wipe=True)


@click.command("addWritePerm")
@common_options
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
def add_write_perm(opts: Common, broker_name: str) -> None:
    """Give a broker's topics their write perm back on every name server."""
    _perm_command(opts, broker_name, wipe=False)


COMMANDS: tuple[click.Command, ...] = (wipe_write_perm, add_write_perm)
