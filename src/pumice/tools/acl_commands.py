"""ACL commands of ``pumice admin`` (mqadmin's ``command.acl``), for brokers with aclEnable=true.

updateAclConfig, deleteAclConfig (alias deleteAccessConfig), clusterAclConfigVersion,
updateGlobalWhiteAddr. Each goes to one broker (``-b``) or every master of a cluster (``-c``);
with ``-c`` a broker that refuses is named in the table and the command exits 1.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import click

from pumice.client.admin import AsyncMQAdmin
from pumice.tools import admin_output as out
from pumice.tools.broker_commands import broker_or_cluster
from pumice.tools.sub_command import Common, common_options, run, targets_given


def _edit(
    opts: Common, broker_addr: str | None, cluster: str | None,
    call: Callable[[AsyncMQAdmin], Awaitable[dict[str, str | None]]], done: str,
) -> None:  # fmt: skip
    """An edit on one broker or a cluster's masters, reported as mqadmin does:
    ``<done> <addr> success.`` per broker (or the broker's error)."""
    targets_given(cluster, broker_addr)
    results = run(opts, call)
    if opts.json:
        out.emit_json({addr: {"ok": err is None, "error": err} for addr, err in results.items()})
    else:
        for addr, err in results.items():
            click.echo(f"{done} {addr} success." if err is None else f"{done} {addr} failed: {err}")
    if any(err is not None for err in results.values()):
        raise click.exceptions.Exit(1)


@click.command("updateAclConfig")
@common_options
@broker_or_cluster("Every master of this cluster.")
@click.option("-a", "--accessKey", "account", required=True, help="The account's access key (7 characters or more).")
@click.option("-s", "--secretKey", "secret", required=True, help="Its secret key (7 characters or more).")
@click.option("-w", "--whiteRemoteAddress", "white", help="Addresses whose requests pass unsigned, e.g. 192.168.1.*.")
@click.option("-i", "--defaultTopicPerm", "topic_perm", help="Perm on topics not listed: DENY, PUB, SUB, PUB|SUB.")
@click.option("-u", "--defaultGroupPerm", "group_perm", help="Perm on groups not listed.")
@click.option("-t", "--topicPerms", "topic_perms", help="topicA=PUB,topicB=PUB|SUB,…")
@click.option("-g", "--groupPerms", "group_perms", help="groupA=SUB,groupB=DENY,…")
@click.option("-m", "--admin", "is_admin", default="false", help="true: may create and delete topics and groups.")
def update_acl_config(
    opts: Common, broker_addr: str | None, cluster: str | None, account: str, secret: str,
    white: str | None, topic_perm: str | None, group_perm: str | None, topic_perms: str | None,
    group_perms: str | None, is_admin: str,
) -> None:  # fmt: skip
    """Create or update an ACL account in the broker's plain_acl.yml (UPDATE_AND_CREATE_ACL_CONFIG)."""
    config = {
        "accessKey": account, "secretKey": secret, "whiteRemoteAddress": white,
        "defaultTopicPerm": topic_perm, "defaultGroupPerm": group_perm, "topicPerms": topic_perms,
        "groupPerms": group_perms, "admin": is_admin.strip().lower() == "true",
    }  # fmt: skip

    _edit(opts, broker_addr, cluster, lambda a: a.update_acl_config(config, cluster, broker_addr),
          "create or update plain access config to")  # fmt: skip


@click.command("deleteAclConfig")
@common_options
@broker_or_cluster("Every master of this cluster.")
@click.option("-a", "--accessKey", "account", required=True, help="The account to delete.")
def delete_acl_config(opts: Common, broker_addr: str | None, cluster: str | None, account: str) -> None:
    """Delete an ACL account from the broker's ACL files (DELETE_ACL_CONFIG); alias deleteAccessConfig."""
    _edit(opts, broker_addr, cluster, lambda a: a.delete_acl_config(account, cluster, broker_addr),
          "delete plain access config account from")  # fmt: skip


@click.command("updateGlobalWhiteAddr")
@common_options
@broker_or_cluster("Every master of this cluster.")
@click.option("-g", "--globalWhiteRemoteAddresses", "addrs", required=True, help="Patterns, comma-separated.")
@click.option("-p", "--aclFileFullPath", "acl_file", help="The ACL file to write (default: conf/plain_acl.yml).")
def update_global_white_addr(
    opts: Common, broker_addr: str | None, cluster: str | None, addrs: str, acl_file: str | None
) -> None:
    """Replace an ACL file's globalWhiteRemoteAddresses (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)."""
    _edit(opts, broker_addr, cluster, lambda a: a.update_global_white_addrs(addrs, acl_file, cluster, broker_addr),
          "update global white remote addresses to")  # fmt: skip


@click.command("clusterAclConfigVersion")
@common_options
@broker_or_cluster("Every master of this cluster.")
def cluster_acl_config_version(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """Each broker's ACL files and their versions (GET_BROKER_CLUSTER_ACL_INFO)."""
    targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> list[dict[str, object]]:
        return await a.acl_config_versions(cluster, broker_addr)

    infos = run(opts, body)
    if opts.json:
        out.emit_json(infos)
        return
    rows = []
    for info in infos:
        files = info["allAclFileVersion"]
        assert isinstance(files, dict)
        for path, version in sorted(files.items()):
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(version.get("timestamp", 0)) / 1000))
            rows.append(
                (info["clusterName"], info["brokerName"], info["brokerAddr"], path, version.get("counter"), stamp)
            )
    out.print_table(
        ["#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum", "#AclLastUpdateTime"],
        rows,
        right=["#AclConfigVersionNum"],
    )


COMMANDS: tuple[click.Command, ...] = (
    update_acl_config, delete_acl_config, update_global_white_addr, cluster_acl_config_version,
)  # fmt: skip
