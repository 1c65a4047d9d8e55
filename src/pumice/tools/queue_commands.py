"""ConsumeQueue commands of ``pumice admin`` (mqadmin's ``command.queue``).

queryCq: the entries of a ConsumeQueue from an index (QUERY_CONSUME_QUEUE), with a group's
subscription and filter when ``-g`` names one.
"""

from __future__ import annotations

from typing import Any

import click
import orjson

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQClientError
from pumice.tools import admin_output as out
from pumice.tools.sub_command import Common, check_addrs, common_options, run

_RULE = "======================================"


def _java(v: Any) -> str:
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def entry_text(e: dict[str, Any]) -> str:
    """Java's ConsumeQueueData.toString."""
    v = {k: _java(e.get(k)) for k in ("physicOffset", "physicSize", "tagsCode", "extendDataJson", "bitMap", "msg")}
    return (f"ConsumeQueueData{{physicOffset={v['physicOffset']}, physicSize={v['physicSize']}, "
            f"tagsCode={v['tagsCode']}, extendDataJson='{v['extendDataJson']}', bitMap='{v['bitMap']}', "
            f"eval={_java(e.get('eval', False))}, msg='{v['msg']}'}}")  # fmt: skip


@click.command("queryCq")
@common_options
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-q", "--queue", "queue_id", type=click.IntRange(0), required=True, help="Queue id.")
@click.option("-i", "--index", type=click.IntRange(0), required=True, help="The first entry's index (queue offset).")
@click.option("-c", "--count", type=click.IntRange(1), default=10, show_default=True, help="How many entries.")
@click.option("-b", "--broker", "broker_addr", callback=check_addrs,
              help="Broker address (default: the first broker of the topic's route).")  # fmt: skip
@click.option("-g", "--consumer", "group", help="Consumer group: also its subscription and filter.")
def query_cq(opts: Common, topic: str, queue_id: int, index: int, count: int, broker_addr: str | None,
             group: str | None) -> None:  # fmt: skip
    """ConsumeQueue entries of a queue: CommitLog offset, size and tags code of each."""
    t = topic.strip()

    async def body(a: AsyncMQAdmin) -> tuple[str, dict[str, Any]]:
        addr = broker_addr.strip() if broker_addr else None
        if not addr:
            route = await a.topic_route(t)
            addr = route.broker_datas[0].master_addr if route.broker_datas else None
            if addr is None:
                raise MQClientError("No topic route data!")
        return addr, await a.query_consume_queue(addr, t, queue_id, index, count, group.strip() if group else None)

    addr, cq = run(opts, body)
    entries = list(cq.get("queueData") or [])
    if opts.json:
        out.emit_json({
            "brokerAddr": addr, "topic": t, "queueId": queue_id,
            "maxQueueIndex": cq.get("maxQueueIndex"), "minQueueIndex": cq.get("minQueueIndex"),
            "subscriptionData": cq.get("subscriptionData"), "filterData": cq.get("filterData"),
            "entries": [{"index": index + n, **e} for n, e in enumerate(entries)],
        })  # fmt: skip
        return
    if cq.get("subscriptionData") is not None:
        click.echo("Subscription data: ")
        click.echo(orjson.dumps(cq["subscriptionData"], option=orjson.OPT_INDENT_2).decode())
        click.echo(_RULE)
    if cq.get("filterData") is not None:
        click.echo("Filter data: ")
        click.echo(str(cq["filterData"]))
        click.echo(_RULE)
    click.echo("Queue data: ")
    click.echo(f"max: {cq.get('maxQueueIndex', 0)}, min: {cq.get('minQueueIndex', 0)}")
    click.echo(_RULE)
    for n, e in enumerate(entries):
        click.echo(f"idx: {index + n}")
        click.echo(entry_text(e))
        click.echo(_RULE)


COMMANDS: tuple[click.Command, ...] = (query_cq,)
