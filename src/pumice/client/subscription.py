"""SubscriptionData: a consumer's topic and expression, as heartbeats carry it.

A TAG expression: ``"*"`` (or empty) takes every message; ``"TagA || TagB"`` takes messages
tagged TagA or TagB. The broker filters by the tags' Java hash codes; since two tags may share
a code, the client filters again by the tag strings (``matches``), as the Java client does.
An SQL92 expression (``MessageSelector.by_sql``, for brokers with ``enablePropertyFilter``) is
evaluated by the broker only; the expression is checked locally first (``pumice.sql92``).

Heartbeat JSON (``ConsumerData.subscriptionDataSet`` items)::

    {"topic": "T", "subString": "TagA || TagB", "tagsSet": ["TagA", "TagB"],
     "codeSet": [hashA, hashB], "subVersion": <ms>, "classFilterMode": false,
     "expressionType": "TAG"}
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pumice.common.java_hash import tags_code
from pumice.sql92 import compile_sql92

SUB_ALL = "*"
TAG = "TAG"
SQL92 = "SQL92"


@dataclass(frozen=True)
class MessageSelector:
    """A subscription's expression and its type (RocketMQ's MessageSelector)."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str = SUB_ALL) -> MessageSelector:
        return cls(TAG, expression)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """Messages whose properties match ``expression`` (RocketMQ's SQL92 subset); raises
        Sql92Error at once for an expression that does not compile."""
        compile_sql92(expression)
        return cls(SQL92, expression)


@dataclass(frozen=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    expression_type: str = "TAG"

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
            "expressionType": self.expression_type,
        }


def build_subscription(topic: str, expression: str | MessageSelector | None) -> SubscriptionData:
    if isinstance(expression, MessageSelector):
        if expression.expression_type.upper() == SQL92:
            return SubscriptionData(topic, expression.expression, expression_type=SQL92)
        expression = expression.expression
    s = (expression or "").strip()
    if not s or s == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL)
    tags = tuple(dict.fromkeys(t.strip() for t in s.split("||") if t.strip()))
    if not tags or SUB_ALL in tags:
        return SubscriptionData(topic, SUB_ALL)
    return SubscriptionData(topic, s, tags, tuple(tags_code(t) for t in tags))
