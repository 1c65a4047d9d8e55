"""Stats commands of ``pumice admin`` (mqadmin's ``command.stats``).

statsAll: per topic and consuming group, the backlog, the minute's in and out TPS and the
messages in and out over the last 24 hours (VIEW_BROKER_STATS_DATA's TOPIC_PUT_NUMS and
GROUP_GET_NUMS, QUERY_TOPIC_CONSUME_BY_WHO, GET_CONSUME_STATS), as mqadmin prints them.
"""

from __future__ import annotations

from typing import Any

import click

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQClientError
from pumice.common.mix_all import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, common_options, run


def sum_24h(stats: dict[str, Any]) -> int:
    """mqadmin's compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for span in ("statsDay", "statsHour", "statsMinute"):
        total = int((stats.get(span) or {}).get("sum", 0) or 0)
        if total:
            return total
    return 0


def minute_tps(stats: dict[str, Any]) -> float:
    return float((stats.get("statsMinute") or {}).get("tps", 0.0) or 0.0)


async def _topic_rows(a: AsyncMQAdmin, topic: str, active_only: bool) -> list[dict[str, Any]]:
    route = await a.topic_route(topic)
    masters = [b.master_addr for b in route.broker_datas if b.master_addr]
    in_tps, in_24h = 0.0, 0
    groups: set[str] = set()
    for addr in masters:
        try:
            stats = await a.broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
            in_tps += minute_tps(stats)
            in_24h += sum_24h(stats)
        except MQClientError:
            pass  # no stats yet: nothing was put
        groups.update(await a.topic_consumed_by(addr, topic))
    rows = []
    for group in sorted(groups):
        out_tps, out_24h = 0.0, 0
        for addr in masters:
            try:
                stats = await a.broker_stats_data(addr, "GROUP_GET_NUMS", f"{topic}@{group}")
                out_tps += minute_tps(stats)
                out_24h += sum_24h(stats)
            except MQClientError:
                pass
        try:
            backlog = max((await a.consumer_progress(group, topic)).total_lag, 0)
        except MQClientError:
            backlog = 0
        if not active_only or in_24h > 0 or out_24h > 0:
            rows.append({"topic": topic, "group": group, "accumulation": backlog, "inTps": in_tps, "outTps": out_tps,
                         "inMsg24Hour": in_24h, "outMsg24Hour": out_24h})  # fmt: skip
    if not groups and (not active_only or in_24h > 0):
        rows.append({"topic": topic, "group": None, "accumulation": 0, "inTps": in_tps, "outTps": None,
                     "inMsg24Hour": in_24h, "outMsg24Hour": None})  # fmt: skip
    return rows


@click.command("statsAll")
@common_options
@click.option("-a", "--activeTopic", "active_only", is_flag=True, help="Only topics with traffic in the last 24 h.")
@click.option("-t", "--topic", help="Only this topic.")
def stats_all(opts: Common, active_only: bool, topic: str | None) -> None:
    """Backlog, TPS and 24-hour message counts per topic and consumer group."""

    async def body(a: AsyncMQAdmin) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for t in sorted(await a.topic_list()):
            if t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)) or (topic and t != topic):
                continue
            try:
                rows += await _topic_rows(a, t, active_only)
            except MQClientError:
                continue  # as mqadmin: a topic that fails is left out
        return rows

    rows = run(opts, body)
    if opts.json:
        out.emit_json({"stats": rows})
        return
    out.print_table(
        ["#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"],
        [(r["topic"], r["group"] or "", r["accumulation"], f"{r['inTps']:.2f}",
          "" if r["outTps"] is None else f"{r['outTps']:.2f}", r["inMsg24Hour"],
          "NO_CONSUMER" if r["outMsg24Hour"] is None else r["outMsg24Hour"]) for r in rows],
        right=["#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"],
    )  # fmt: skip


COMMANDS: tuple[click.Command, ...] = (stats_all,)
