"""ConsumerManager: which clients are in which consumer group, and what they subscribe to.

Filled by HEART_BEAT, emptied by UNREGISTER_CLIENT, by a closed connection, or after 120 s
without a heartbeat. When a group's members change, or a heartbeat adds or drops a topic of the
group's subscriptions (RocketMQ 4.9's registerConsumer: updateChannel || updateSubscription),
each member gets a oneway NOTIFY_CONSUMER_IDS_CHANGED so it rebalances at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pumice.remoting.remoting_command import RPC_ONEWAY, RemotingCommand
from pumice.remoting.remoting_server import Channel
from pumice.remoting.request_code import RequestCode

log = logging.getLogger(__name__)

CHANNEL_EXPIRED_TIMEOUT_S = 120.0


@dataclass
class ClientChannelInfo:
    client_id: str
    channel: Channel
    last_update: float = field(default_factory=time.monotonic)
    language: str = "OTHER"
    version: int = 0


@dataclass
class ConsumerGroupInfo:
    group_name: str
    consume_type: Any = None
    message_model: Any = None
    consume_from_where: Any = None
    channels: dict[str, ClientChannelInfo] = field(default_factory=dict)  # clientId → info
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)  # topic → SubscriptionData JSON

    def is_broadcasting(self) -> bool:
        """messageModel BROADCASTING, by name or by ordinal (0, what a C++ heartbeat sends)."""
        return str(self.message_model).upper() in ("BROADCASTING", "0")

    def update_subscriptions(self, subs: list[Any]) -> bool:
        """ConsumerGroupInfo.updateSubscription: a topic's subscription is replaced only by a
        newer subVersion (a member's late heartbeat never brings back an old tag set), and
        topics the heartbeat no longer names are dropped. True when a topic was added or
        dropped (a new tag set of a known topic is not a change, as in 4.9)."""
        new = {str(s["topic"]): s for s in subs if isinstance(s, dict) and "topic" in s}
        changed = False
        for topic, sub in new.items():
            old = self.subscriptions.get(topic)
            if old is None:
                log.info("subscription changed, add new topic, group: %s %s", self.group_name, topic)
                changed = True
            if old is None or sub_version(sub) > sub_version(old):
                self.subscriptions[topic] = sub
        for topic in [t for t in self.subscriptions if t not in new]:
            log.warning("subscription changed, group: %s remove topic %s", self.group_name, topic)
            del self.subscriptions[topic]
            changed = True
        return changed


def sub_version(sub: dict[str, Any]) -> int:
    """A SubscriptionData's subVersion (its creation time in ms); 0 when absent or unreadable."""
    try:
        return int(sub.get("subVersion", 0))
    except (TypeError, ValueError):
        return 0


class ConsumerManager:
    def __init__(self, notify_ids_changed: bool = True) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self.notify_ids_changed = notify_ids_changed
        # 4.9's REGISTER / UNREGISTER events (the ConsumerFilterManager's): every heartbeat's
        # subscriptions, and a group whose last member left
        self.on_register: Callable[[str, list[dict[str, Any]]], None] | None = None
        self.on_unregister: Callable[[str], None] | None = None

    def _remove_group(self, group: str) -> None:
        del self.consumer_table[group]
        if self.on_unregister is not None:
            self.on_unregister(group)

    def register_consumer(
        self, group: str, client_id: str, channel: Channel, data: dict[str, Any], language: str = "OTHER",
        version: int = 0, notify: bool = True,
    ) -> bool:  # fmt: skip
        """Record a heartbeat; True if the group's membership or its subscribed topics changed
        (the members are told, unless ``notify`` is False: the group's
        notifyConsumerIdsChangedEnable)."""
        info = self.consumer_table.setdefault(group, ConsumerGroupInfo(group))
        info.consume_type = data.get("consumeType")
        info.message_model = data.get("messageModel")
        info.consume_from_where = data.get("consumeFromWhere")
        old = info.channels.get(client_id)
        joined = old is None or old.channel is not channel
        info.channels[client_id] = ClientChannelInfo(client_id, channel, language=language, version=version)
        if joined:
            log.info("new consumer connected, group: %s %s %s", group, client_id, channel)
        subs = data.get("subscriptionDataSet") or []
        subs = subs if isinstance(subs, list) else []
        topics_changed = info.update_subscriptions(subs)
        if self.on_register is not None:
            self.on_register(group, [s for s in subs if isinstance(s, dict)])
        if (joined or topics_changed) and notify:
            self._notify(info)
        return joined or topics_changed

    def unregister_consumer(self, group: str, client_id: str, notify: bool = True) -> None:
        info = self.consumer_table.get(group)
        if info is not None and info.channels.pop(client_id, None) is not None:
            log.info("unregister consumer ok, group: %s %s", group, client_id)
            if not info.channels:
                self._remove_group(group)
            elif notify:
                self._notify(info)

    def do_channel_close_event(self, channel: Channel) -> None:
        for group, info in list(self.consumer_table.items()):
            gone = [cid for cid, c in info.channels.items() if c.channel is channel]
            for cid in gone:
                del info.channels[cid]
            if gone:
                if not info.channels:
                    self._remove_group(group)
                else:
                    self._notify(info)

    def scan_not_active_channel(self) -> None:
        """Drop members without a heartbeat for 120 s (closing their connections); the rest
        of the group is told, and a group left empty goes."""
        now = time.monotonic()
        for group, info in list(self.consumer_table.items()):
            gone = [cid for cid, c in info.channels.items() if now - c.last_update > CHANNEL_EXPIRED_TIMEOUT_S]
            for cid in gone:
                log.warning("consumer %s of %s sent no heartbeat for 120 s: drop it", cid, group)
                info.channels.pop(cid).channel.close()
            if gone:
                if not info.channels:
                    self._remove_group(group)
                else:
                    self._notify(info)

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def get_consumer_ids(self, group: str) -> list[str]:
        info = self.consumer_table.get(group)
        return sorted(info.channels) if info is not None else []

    def _notify(self, info: ConsumerGroupInfo) -> None:
        if not self.notify_ids_changed:
            return
        for c in info.channels.values():
            c.channel.send(
                RemotingCommand(
                    code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                    flag=RPC_ONEWAY,
                    ext_fields={"consumerGroup": info.group_name},
                    language="JAVA",
                )
            )
