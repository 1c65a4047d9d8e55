"""SubscriptionData: a consumer's topic and TAG expression, as heartbeats carry it.

``"*"`` (or empty) takes every message; ``"TagA || TagB"`` takes messages tagged TagA or
TagB. The broker filters by the tags' Java hash codes; since two tags may share a code, the
client filters again by the tag strings (``matches``), as the Java client does.

Heartbeat JSON (``ConsumerData.subscriptionDataSet`` items)::

    {"topic": "T", "subString": "TagA || TagB", "tagsSet": ["TagA", "TagB"],
     "codeSet": [hashA, hashB], "subVersion": <ms>, "classFilterMode": false,
     "expressionType": "TAG"}
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pumice.store.java_hash import tags_code

SUB_ALL = "*"


@dataclass(frozen=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    @property
    def matches_all(self) -> bool:
        return not self.tags_set

    def matches(self, tags: str | None) -> bool:
        return self.matches_all or (tags is not None and tags in self.tags_set)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": list(self.tags_set),
            "codeSet": list(self.code_set),
            "subVersion": self.sub_version,
            "classFilterMode": False,
            "expressionType": "TAG",
        }


def build_subscription(topic: str, expression: str | None) -> SubscriptionData:
    s = (expression or "").strip()
    if not s or s == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL)
    tags = tuple(dict.fromkeys(t.strip() for t in s.split("||") if t.strip()))
    if not tags or SUB_ALL in tags:
        return SubscriptionData(topic, SUB_ALL)
    return SubscriptionData(topic, s, tags, tuple(tags_code(t) for t in tags))
