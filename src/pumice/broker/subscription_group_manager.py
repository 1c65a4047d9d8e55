"""SubscriptionGroupManager: per consumer group settings (consume on/off, retry queues and times).

File ``<storeRoot>/config/subscriptionGroup.json`` (RocketMQ 4.9's format)::

    {
      "subscriptionGroupTable": {
        "GroupA": {"groupName": "GroupA", "consumeEnable": true, "consumeFromMinEnable": true,
                   "consumeBroadcastEnable": true, "retryQueueNums": 1, "retryMaxTimes": 16,
                   "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                   "notifyConsumerIdsChangedEnable": true},
        ...
      },
      "dataVersion": {"timestamp": 1700000000000, "counter": 2}
    }

Groups made at construction (the file's entries are loaded over them): TOOLS_CONSUMER,
FILTERSRV_CONSUMER, SELF_TEST_C_GROUP, CID_ONS-HTTP-PROXY, CID_ONSAPI_PULL,
CID_ONSAPI_PERMISSION, CID_ONSAPI_OWNER and CID_RMQ_SYS_TRANS (MixAll.CID_SYS_RMQ_TRANS, the
transaction check group; preloaded by 5.x). All keep RocketMQ's defaults, so
``consumeBroadcastEnable`` is true for every one of them, as upstream (the first three take
the default, the others set it to true explicitly).

``find_subscription_group_config`` creates a missing group with the defaults when
``auto_create_subscription_group`` is on, or for system groups (``CID_RMQ_SYS_`` prefix) in
any case, and then bumps dataVersion and persists. As in 5.x, a name that is blank, longer
than 255 characters or has characters outside ``[%|a-zA-Z0-9_-]`` is never created.
"""

from __future__ import annotations

import logging
from typing import Any

from pumice.broker.config_file import ConfigFile, DataVersion
from pumice.broker.topic_config_manager import is_topic_or_group_illegal
from pumice.common.mix_all import (
    CID_ONSAPI_OWNER_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_SYS_RMQ_TRANS,
    FILTERSRV_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    TOOLS_CONSUMER_GROUP,
    is_sys_consumer_group,
)
from pumice.common.subscription_group import SubscriptionGroupConfig

log = logging.getLogger(__name__)

SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
    CID_SYS_RMQ_TRANS,
)
GROUP_MAX_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH


class SubscriptionGroupManager(ConfigFile):
    def __init__(self, path: str, auto_create_subscription_group: bool = True) -> None:
        super().__init__(path)
        self.auto_create_subscription_group = auto_create_subscription_group
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {
            g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS
        }
        self.data_version = DataVersion()

    # -- ConfigFile -----------------------------------------------------------------------------

    def encode(self) -> dict[str, Any]:
        return {
            "subscriptionGroupTable": {g: c.to_json() for g, c in self.subscription_group_table.items()},
            "dataVersion": self.data_version.to_json(),
        }

    def decode(self, data: Any) -> None:
        table = data.get("subscriptionGroupTable") or {}
        if not isinstance(table, dict):
            raise TypeError("subscriptionGroupTable is not an object")
        loaded = {g: SubscriptionGroupConfig.from_json(c, g) for g, c in table.items()}
        version = DataVersion.from_json(data.get("dataVersion"))
        self.subscription_group_table.update(loaded)
        self.data_version.assign(version)

    # -- groups ---------------------------------------------------------------------------------

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config (live object), auto-created if allowed (see the module docstring);
        None if the group is unknown and may not be created (SUBSCRIPTION_GROUP_NOT_EXIST)."""
        config = self.subscription_group_table.get(group)
        if config is not None:
            return config
        if not (self.auto_create_subscription_group or is_sys_consumer_group(group)):
            return None
        if not group.strip() or len(group) > GROUP_MAX_LENGTH or is_topic_or_group_illegal(group):
            log.warning("subscription group %r not created: invalid name", group)
            return None
        with self._lock:
            config = self.subscription_group_table.get(group)
            if config is not None:
                return config
            config = self.subscription_group_table[group] = SubscriptionGroupConfig(group)
            self.data_version.next_version()
        log.info("auto create subscription group %s", config)
        self.persist()
        return config

    def find_subscription_group_configs(self, groups: list[str]) -> dict[str, SubscriptionGroupConfig | None]:
        """``find_subscription_group_config`` for many groups (a heartbeat's), with one save for
        all those it creates: 4,000 groups in one heartbeat must not mean 4,000 saves."""
        found: dict[str, SubscriptionGroupConfig | None] = {}
        created: list[SubscriptionGroupConfig] = []
        with self._lock:
            for group in dict.fromkeys(groups):
                config = self.subscription_group_table.get(group)
                if config is None and (self.auto_create_subscription_group or is_sys_consumer_group(group)):
                    if not group.strip() or len(group) > GROUP_MAX_LENGTH or is_topic_or_group_illegal(group):
                        log.warning("subscription group %r not created: invalid name", group)
                    else:
                        config = self.subscription_group_table[group] = SubscriptionGroupConfig(group)
                        created.append(config)
                found[group] = config
            if created:
                self.data_version.next_version()
        if created:
            log.info("auto create subscription groups %s", ", ".join(str(c) for c in created))
            self.persist()
        return found

    def contains_subscription_group(self, group: str) -> bool:
        return group in self.subscription_group_table

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        """Create or replace; bumps dataVersion and persists."""
        with self._lock:
            old = self.subscription_group_table.get(config.group_name)
            self.subscription_group_table[config.group_name] = config
            self.data_version.next_version()
        log.info("%s subscription group %s", "update" if old else "create", config)
        self.persist()

    def delete_subscription_group_config(self, group: str) -> bool:
        with self._lock:
            old = self.subscription_group_table.pop(group, None)
            if old is not None:
                self.data_version.next_version()
        if old is None:
            log.warning("delete subscription group failed, %s does not exist", group)
            return False
        log.info("delete subscription group %s", old)
        self.persist()
        return True
