"""FilterAPI: a subscription expression into the tag hash codes the ConsumeQueue filter uses.

``"*"`` or an empty expression takes every message; ``"TagA || TagB"`` takes the messages
whose tagsCode is the Java ``hashCode`` of one of the tags (RocketMQ's SubscriptionData
``codeSet``). Only the TAG expression type is supported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pumice.common.java_hash import tags_code

SUB_ALL = "*"


@dataclass(frozen=True)
class SubscriptionData:
    topic: str
    sub_string: str
    tags_set: frozenset[str] = field(default_factory=frozenset)
    code_set: frozenset[int] = field(default_factory=frozenset)

    @property
    def matches_all(self) -> bool:
        return not self.tags_set

    def is_matched(self, code: int) -> bool:
        return self.matches_all or code in self.code_set


def build_subscription_data(topic: str, sub_string: str | None) -> SubscriptionData:
    s = (sub_string or "").strip()
    if not s or s == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL)
    tags = frozenset(t.strip() for t in s.split("||") if t.strip())
    if not tags or SUB_ALL in tags:
        return SubscriptionData(topic, SUB_ALL)
    return SubscriptionData(topic, s, tags, frozenset(tags_code(t) for t in tags))
