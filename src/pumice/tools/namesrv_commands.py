"""Name server commands of ``pumice admin`` (mqadmin's ``command.namesrv``).

wipeWritePerm and addWritePerm: a broker's topics made read-only, or writable again, on every
name server given with ``-n`` (until the broker's next registration, which restores its perm).
getNamesrvConfig and updateNamesrvConfig: each name server's configuration, read or changed
(GET_NAMESRV_CONFIG, UPDATE_NAMESRV_CONFIG); updateKvConfig and deleteKvConfig: a KV config entry
put on, or deleted from, every name server (PUT_KV_CONFIG, DELETE_KV_CONFIG).
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


@click.command("getNamesrvConfig")
@common_options
def get_namesrv_config(opts: Common) -> None:
    """The configuration of every name server given with -n (GET_NAMESRV_CONFIG)."""
    configs = run(opts, lambda a: a.get_namesrv_config())
    if opts.json:
        out.emit_json(configs)
        return
    for ns, props in configs.items():
        click.echo(f"============{ns}============")
        for k, v in props.items():
            click.echo(f"{k:<50}=  {v}")


@click.command("updateNamesrvConfig")
@common_options
@click.option("-k", "--key", required=True, help="Config key.")
@click.option("-v", "--value", required=True, help="Config value.")
def update_namesrv_config(opts: Common, key: str, value: str) -> None:
    """Change a config key on every name server given with -n (UPDATE_NAMESRV_CONFIG)."""
    k, v = key.strip(), value.strip()
    done = run(opts, lambda a: a.update_namesrv_config({k: v}))
    if opts.json:
        out.emit_json({"nameServers": done, "key": k, "value": v})
        return
    click.echo(f"update name server config success![{', '.join(done)}]")
    click.echo(f"{k} : {v}")


@click.command("updateKvConfig")
@common_options
@click.option("-s", "--namespace", required=True, help="The namespace.")
@click.option("-k", "--key", required=True, help="The key.")
@click.option("-v", "--value", required=True, help="The value.")
def update_kv_config(opts: Common, namespace: str, key: str, value: str) -> None:
    """Create or update a KV config entry on every name server (PUT_KV_CONFIG)."""
    ns, k, v = namespace.strip(), key.strip(), value.strip()
    done = run(opts, lambda a: a.put_kv_config(ns, k, v))
    if opts.json:
        out.emit_json({"nameServers": done, "namespace": ns, "key": k, "value": v})
        return
    click.echo("create or update kv config to namespace success.")


@click.command("deleteKvConfig")
@common_options
@click.option("-s", "--namespace", required=True, help="The namespace.")
@click.option("-k", "--key", required=True, help="The key.")
def delete_kv_config(opts: Common, namespace: str, key: str) -> None:
    """Delete a KV config entry from every name server (DELETE_KV_CONFIG)."""
    ns, k = namespace.strip(), key.strip()
    done = run(opts, lambda a: a.delete_kv_config(ns, k))
    if opts.json:
        out.emit_json({"nameServers": done, "namespace": ns, "key": k})
        return
    click.echo("delete kv config from namespace success.")


COMMANDS: tuple[click.Command, ...] = (
    wipe_write_perm,
    add_write_perm,
    get_namesrv_config,
    update_namesrv_config,
    update_kv_config,
    delete_kv_config,
)
