"""Cluster and broker commands of ``pumice admin`` (mqadmin's ``command.cluster`` and ``command.broker``).

clusterList, brokerStatus, deleteExpiredCommitLog, getBrokerConfig, updateBrokerConfig.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from pumice.client.admin import AsyncMQAdmin
from pumice.client.admin_types import BrokerInfo
from pumice.client.exceptions import MQClientError
from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, check_addrs, common_options, run, targets_given


def _int(rt: dict[str, str], key: str) -> int:
    try:
        return int(rt.get(key, "0"))
    except ValueError:
        return 0


def _more_stats(r: BrokerInfo) -> dict[str, Any]:
    """mqadmin clusterList -m: messages in and out yesterday and today (the runtime's midnight totals)."""
    rt = r.runtime
    return {
        "cluster": r.cluster, "brokerName": r.broker_name,
        "inTotalYest": _int(rt, "msgPutTotalTodayMorning") - _int(rt, "msgPutTotalYesterdayMorning"),
        "outTotalYest": _int(rt, "msgGetTotalTodayMorning") - _int(rt, "msgGetTotalYesterdayMorning"),
        "inTotalToday": _int(rt, "msgPutTotalTodayNow") - _int(rt, "msgPutTotalTodayMorning"),
        "outTotalToday": _int(rt, "msgGetTotalTodayNow") - _int(rt, "msgGetTotalTodayMorning"),
    }  # fmt: skip


def _print_cluster_list(opts: Common, rows: list[BrokerInfo], more: bool) -> None:
    if opts.json:
        if more:
            out.emit_json({"brokers": [_more_stats(r) for r in rows if r.broker_id == 0]})
            return
        out.emit_json({
            "brokers": [
                {"cluster": r.cluster, "brokerName": r.broker_name, "brokerId": r.broker_id, "addr": r.addr,
                 "runtime": r.runtime, "error": r.error}
                for r in rows
            ]
        })  # fmt: skip
        return
    if more:
        cols = ["#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday"]
        out.print_table(
            cols,
            [tuple(m.values()) for m in (_more_stats(r) for r in rows if r.broker_id == 0)],
            right=cols[2:],
        )
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

    def load(rt: dict[str, str], key: str, pool: str) -> str:  # mqadmin's "%.2f(queue size,head wait ms)"
        try:
            rate = float(rt[key].split(" ")[0])
        except (KeyError, ValueError, IndexError):
            return ""
        size = rt.get(f"{pool}ThreadPoolQueueSize", "0")
        wait = rt.get(f"{pool}ThreadPoolQueueHeadWaitTimeMills", "0")
        return f"{rate:.2f}({size},{wait}ms)"

    out.print_table(
        ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
         "#PCWait(ms)", "#Hour", "#SPACE"],
        [
            (r.cluster, r.broker_name, r.broker_id, r.addr, r.runtime.get("brokerVersionDesc", "") or r.error,
             load(r.runtime, "putTps", "send"), load(r.runtime, "getTransferedTps", "pull"),
             r.runtime.get("pageCacheLockTimeMills", ""), hours(r.runtime), space(r.runtime))
            for r in rows
        ],
        right=["#BID", "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE"],
    )  # fmt: skip


@click.command("clusterList")
@common_options
@click.option("-c", "--clusterName", "cluster", help="Only this cluster.")
@click.option("-m", "--moreStats", "more", is_flag=True, help="Messages in and out, yesterday and today.")
@click.option("-i", "--interval", type=click.IntRange(1), help="Print again every this many seconds, until Ctrl-C.")
def cluster_list(opts: Common, cluster: str | None, more: bool, interval: int | None) -> None:
    """The brokers of every cluster, with their runtime figures."""
    while True:
        rows = run(opts, lambda a: a.cluster_list(cluster))
        _print_cluster_list(opts, rows, more)
        if interval is None:
            return
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return


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


@click.command("getBrokerConfig")
@common_options
@broker_or_cluster("Every broker of this cluster (masters, then their slaves).")
def get_broker_config(opts: Common, broker_addr: str | None, cluster: str | None) -> None:
    """A broker's configuration (GET_BROKER_CONFIG)."""
    targets_given(cluster, broker_addr)

    async def body(a: AsyncMQAdmin) -> list[tuple[str, str, dict[str, str]]]:
        if broker_addr:
            return [(broker_addr, f"============{broker_addr}============", await a.get_broker_config(broker_addr))]
        info = await a.cluster_info()
        if cluster not in info.cluster_addr_table:
            raise MQClientError(f"the cluster {cluster!r} is unknown to the name server")
        got = []
        for name in sorted(info.cluster_addr_table[cluster or ""]):
            bd = info.broker_addr_table.get(name)
            if bd is None or bd.master_addr is None:
                continue
            master = bd.master_addr
            got.append((master, f"============Master: {master}============", await a.get_broker_config(master)))
            for bid, addr in sorted(bd.broker_addrs.items()):
                if bid != 0:
                    title = f"============My Master: {master}=====Slave: {addr}============"
                    got.append((addr, title, await a.get_broker_config(addr)))
        return got

    configs = run(opts, body)
    if opts.json:
        out.emit_json(configs[0][2] if broker_addr else {addr: props for addr, _, props in configs})
        return
    for _, title, props in configs:
        click.echo(title)
        for k, v in props.items():
            click.echo(f"{k:<50}=  {v}")
        click.echo("")


@click.command("updateBrokerConfig")
@common_options
@broker_or_cluster("Every master of this cluster.")
@click.option("-k", "--key", required=True, help="Config key.")
@click.option("-v", "--value", required=True, help="Config value.")
def update_broker_config(opts: Common, broker_addr: str | None, cluster: str | None, key: str, value: str) -> None:
    """Change a broker's configuration while it runs (UPDATE_BROKER_CONFIG)."""
    targets_given(cluster, broker_addr)
    props = {key.strip(): value.strip()}
    results = run(opts, lambda a: a.update_broker_config(props, cluster=cluster, broker_addr=broker_addr))
    if opts.json:
        out.emit_json({addr: {"ok": err is None, "error": err} for addr, err in results.items()})
    else:
        for addr, err in results.items():
            click.echo(f"update broker config success, {addr}" if err is None
                       else f"update broker config failed, {addr}: {err}")  # fmt: skip
    if any(err is not None for err in results.values()):
        raise click.exceptions.Exit(1)


COMMANDS: tuple[click.Command, ...] = (
    cluster_list,
    broker_status,
    delete_expired_commit_log,
    get_broker_config,
    update_broker_config,
)
