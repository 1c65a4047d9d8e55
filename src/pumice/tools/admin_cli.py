"""``pumice admin``: mqadmin's everyday commands, with mqadmin's names and flags.

Every command takes ``-n`` (name servers, ``host:port;host:port``; default ``$NAMESRV_ADDR``,
else ``127.0.0.1:9876``), ``--json`` (one pretty-printed JSON document on stdout instead of
the table) and ``--debug`` (a traceback for an unexpected error).

Exit codes: 0 done; 1 the broker or name server refused (``Error: TOPIC_NOT_EXIST (17):
<remark>`` on stderr), could not be reached (the address is named), or the request failed;
2 a usage error (a missing or bad flag, a bad timestamp, a broker name or queue id the topic
does not have), as click reports them. Expected failures print one line, never a traceback.

Timestamps (``-s``/``-e``) are epoch milliseconds, ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time,
or ``now`` (for resetOffsetByTime: each queue's max offset, as mqadmin).

The commands live in one module per mqadmin command group (see ``pumice.tools``); this
module holds the ``admin`` click group and registers them.
"""

from __future__ import annotations

import click

from pumice.tools import (
    acl_commands,
    broker_commands,
    connection_commands,
    consumer_commands,
    export_commands,
    message_commands,
    namesrv_commands,
    producer_commands,
    queue_commands,
    stats_commands,
    topic_commands,
)


@click.group(name="admin")
def admin() -> None:
    """mqadmin's commands against a Pumice (or RocketMQ 4.x) cluster.

    Names and flags are mqadmin's. -n defaults to $NAMESRV_ADDR, else 127.0.0.1:9876; --json
    prints one pretty JSON document instead of the table. Errors print one line on stderr
    (exit 1; usage errors exit 2).
    """


for _module in (topic_commands, broker_commands, consumer_commands, connection_commands, message_commands,
                namesrv_commands, stats_commands, acl_commands, producer_commands, queue_commands,
                export_commands):  # fmt: skip
    for _command in _module.COMMANDS:
        admin.add_command(_command)
admin.add_command(acl_commands.delete_acl_config, "deleteAccessConfig")  # mqadmin's alias
