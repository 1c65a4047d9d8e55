"""Cluster and broker commands of ``pumice admin`` (mqadmin's ``command.cluster`` and ``command.broker``).

clusterList, brokerStatus, deleteExpiredCommitLog.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQClientError
from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, check_addrs, common_options, run, targets_given


@click.command("clusterList")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Only this cluster.")
def cluster_list(opts: Common, cluster: str | None) -> None:
    """The brokers of every cluster, with their runtime figures."""
    rows = run(opts, lambda a: a.cluster_list(cluster))
    if opts.json:
        out.emit_json({
            "brokers": [
                {"cluster": r.cluster, "brokerName": r.broker_name, "brokerId": r.broker_id, "addr": r.addr,
                 "runtime": r.runtime, "error": r.error}
                for r in rows
            ]
        })  # fmt: skip
        return
    now = time.time() * 1000

    def hours(rt: dict[str, str]) -> str:
        try:
            earliest = int(rt.get("earliestMessageTimeStamp", "-1"))
        except ValueError:
            return ""
        return f"{(now - earliest) / 3_600_000:.2f}" if earliest > 0 else "0.00"

    def space(rt: dict[str, str]) -> str:
        try:
            return f"{float(rt['commitLogDiskRatio']):.4f}"
        except (KeyError, ValueError):
            return ""

    def tps(rt: dict[str, str], key: str) -> str:  # the 10 s rate, as mqadmin shows it
        try:
            return f"{float(rt[key].split(' ')[0]):.2f}"
        except (KeyError, ValueError, IndexError):
            return ""

    out.print_table(
        ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS", "#OutTPS", "#InTotalToday",
         "#OutTotalToday", "#PCWait(ms)", "#Hour", "#SPACE", "#Status"],
        [
            (r.cluster, r.broker_name, r.broker_id, r.addr, r.runtime.get("brokerVersionDesc", ""),
             tps(r.runtime, "putTps"), tps(r.runtime, "getTransferedTps"), r.runtime.get("msgPutTotalTodayNow", ""),
             r.runtime.get("msgGetTotalTodayNow", ""), r.runtime.get("pageCacheLockTimeMills", ""), hours(r.runtime),
             space(r.runtime), r.error or r.runtime.get("runningFlags", ""))
            for r in rows
        ],
        right=["#BID", "#InTPS", "#OutTPS", "#InTotalToday", "#OutTotalToday", "#PCWait(ms)", "#Hour", "#SPACE"],
    )  # fmt: skip


def broker_or_cluster(cluster_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """-b brokerAddr or -c clusterName, exactly one (checked when the command runs)."""

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option("-c", "--clusterName", "cluster", help=cluster_help)(f)
        help_b = "Broker address (host:port)."
        return click.option("-b", "--brokerAddr", "broker_addr", callback=check_addrs, help=help_b)(f)

    return deco


@click.command("brokerStatus")
@common_options
@broker_or_cluster("Every broker of this cluster.")
def broker_status(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """A broker's runtime table (GET_BROKER_RUNTIME_INFO)."""
    targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> dict[str, dict[str, str]]:
        if broker_addr:
            return {broker_addr: await a.broker_status(broker_addr)}
        rows = await a.cluster_list(cluster)
        if not rows:
            raise MQClientError(f"the cluster {cluster!r} is unknown to the name server")
        return {r.addr: r.runtime if r.error is None else {"error": r.error} for r in rows}

    tables = run(opts, body)
    if opts.json:
        out.emit_json(tables[broker_addr] if broker_addr else tables)
        return
    if broker_addr:
        out.print_table(["#Key", "#Value"], sorted(tables[broker_addr].items()))
    else:
        out.print_table(
            ["#Addr", "#Key", "#Value"], [(addr, k, v) for addr, t in tables.items() for k, v in sorted(t.items())]
        )


@click.command("deleteExpiredCommitLog")
@common_options
@broker_or_cluster("Every master of this cluster.")
def delete_expired_commit_log(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """Delete expired CommitLog files now, whatever deleteWhen says (DELETE_EXPIRED_COMMITLOG)."""
    targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> dict[str, str | None]:
        return await a.delete_expired_commit_log(cluster, broker_addr)

    results = run(opts, body)
    if opts.json:
        out.emit_json({addr: {"ok": err is None, "error": err} for addr, err in results.items()})
    else:
        out.print_table(["#Broker", "#Result"], [(addr, err or "success") for addr, err in results.items()])
    if any(err is not None for err in results.values()):
        raise click.exceptions.Exit(1)


COMMANDS: tuple[click.Command, ...] = (cluster_list, broker_status, delete_expired_commit_log)
