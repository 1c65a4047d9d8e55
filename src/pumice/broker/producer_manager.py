"""ProducerManager: which client connections are in which producer group.

Filled by the ``producerDataSet`` of HEART_BEAT (``[{"groupName": ...}]``; Java clients name
their ``CLIENT_INNER_PRODUCER`` group too), emptied by UNREGISTER_CLIENT with a
``producerGroup``, by a closed connection, or after 120 s without a heartbeat (the connection
is then closed, as upstream's scanNotActiveChannel). GET_PRODUCER_CONNECTION_LIST answers
from it (mqadmin producerConnection).

=====================  ==================================================================
group_channel_table    producer group → Channel → ClientChannelInfo (clientId, language,
                       version, last heartbeat)
=====================  ==================================================================
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from pumice.broker.consumer_manager import CHANNEL_EXPIRED_TIMEOUT_S, ClientChannelInfo
from pumice.remoting.remoting_server import Channel

log = logging.getLogger(__name__)


class ProducerManager:
    def __init__(self) -> None:
        self.group_channel_table: dict[str, dict[Channel, ClientChannelInfo]] = {}

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        """A heartbeat: a new member, or a known one's heartbeat time renewed."""
        table = self.group_channel_table.setdefault(group, {})
        if info.channel not in table:
            log.info("new producer connected, group: %s %s %s", group, info.client_id, info.channel)
        table[info.channel] = info

    def unregister_producer(self, group: str, channel: Channel) -> None:
        table = self.group_channel_table.get(group)
        if table is not None and table.pop(channel, None) is not None:
            log.info("unregister a producer[%s] from groupChannelTable %s", group, channel)
            if not table:
                del self.group_channel_table[group]

    def do_channel_close_event(self, channel: Channel) -> None:
        for group in list(self.group_channel_table):
            self.unregister_producer(group, channel)

    def scan_not_active_channel(self) -> None:
        """Drop (and close) the connections without a heartbeat for 120 s."""
        now = time.monotonic()
        for group, table in list(self.group_channel_table.items()):
            for channel, info in list(table.items()):
                if now - info.last_update > CHANNEL_EXPIRED_TIMEOUT_S:
                    log.warning("producer %s of %s sent no heartbeat for 120 s: drop it", info.client_id, group)
                    del table[channel]
                    channel.close()
            if not table:
                del self.group_channel_table[group]

    def producer_table(self) -> dict[str, list[dict[str, Any]]]:
        """GET_ALL_PRODUCER_INFO's ProducerTableInfo ``data``: group → its members as
        ProducerInfo (``remoteIP`` as Netty prints an address, ``/ip:port``; the last
        heartbeat as epoch ms)."""
        now_ms, now = time.time() * 1000, time.monotonic()

        def info(c: ClientChannelInfo) -> dict[str, Any]:
            return {
                "clientId": c.client_id, "remoteIP": f"/{c.channel.remote_addr}", "language": c.language,
                "version": int(c.version or 0), "lastUpdateTimestamp": int(now_ms - (now - c.last_update) * 1000),
            }  # fmt: skip

        return {
            group: [info(c) for c in sorted(table.values(), key=lambda c: c.client_id)]
            for group, table in sorted(self.group_channel_table.items())
        }

    def find_channel(self, client_id: str) -> Channel | None:
        """An open connection of the producer ``client_id`` (a request-reply's REPLY_TO_CLIENT)."""
        for table in self.group_channel_table.values():
            for channel, info in table.items():
                if info.client_id == client_id and not channel.closed:
                    return channel
        return None

    def available_channel(self, group: str) -> Channel | None:
        """A random open connection of the group (getAvailableChannel: a transaction check)."""
        table = self.group_channel_table.get(group)
        live = [c for c in table if not c.closed] if table else []
        return random.choice(live) if live else None

    def connections(self, group: str) -> list[ClientChannelInfo] | None:
        """The group's members, or None for a group nobody is in."""
        table = self.group_channel_table.get(group)
        return sorted(table.values(), key=lambda c: c.client_id) if table else None
