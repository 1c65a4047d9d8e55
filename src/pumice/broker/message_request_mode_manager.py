"""MessageRequestModeManager: whether a group consumes a topic by PULL or by POP (RocketMQ 5's
MessageRequestModeManager), as SET_MESSAGE_REQUEST_MODE (``mqadmin setConsumeMode``) sets it.

File ``<storeRoot>/config/messageRequestMode.json`` (5.3.3's format)::

    {
      "messageRequestModeMap": {
        "TopicA": {"GroupA": {"consumerGroup": "GroupA", "mode": "POP", "popShareQueueNum": 0,
                              "topic": "TopicA"}}
      }
    }
"""

from __future__ import annotations

from typing import Any

from pumice.broker.config_file import ConfigFile

MODES = ("PULL", "POP")


class MessageRequestModeManager(ConfigFile):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.mode_map: dict[str, dict[str, dict[str, Any]]] = {}

    def encode(self) -> dict[str, Any]:
        return {"messageRequestModeMap": self.mode_map}

    def decode(self, data: Any) -> None:
        table = data.get("messageRequestModeMap") or {}
        if not isinstance(table, dict):
            raise TypeError("messageRequestModeMap is not an object")
        self.mode_map = {str(t): {str(g): dict(b) for g, b in groups.items()} for t, groups in table.items()}

    def set_mode(self, topic: str, group: str, mode: str, pop_share_queue_num: int) -> bool:
        """Set and save; False if the save failed (it is retried)."""
        body = {"consumerGroup": group, "mode": mode, "popShareQueueNum": pop_share_queue_num, "topic": topic}
        with self._lock:
            self.mode_map.setdefault(topic, {})[group] = body
        return self.persist()

    def get_mode(self, topic: str, group: str) -> dict[str, Any] | None:
        with self._lock:
            return self.mode_map.get(topic, {}).get(group)
