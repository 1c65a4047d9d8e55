"""Topic attributes (RocketMQ 5.x): named settings a topic carries beside its queues and perm.

An admin sets them with UPDATE_AND_CREATE_TOPIC's ``attributes`` field (what ``mqadmin
updateTopic -a`` sends), a list of modifications (5.3.3's ``AttributeParser``)::

    +message.type=FIFO,+reserve.time=3600,-cleanup.policy

``+name=value`` adds or changes one, ``-name`` deletes one. The topic stores the result without
the sign (topics.json: ``"attributes": {"message.type": "FIFO"}``). The attributes 5.3.3 knows
(``TopicAttributes.ALL``); any other name is refused:

================  ==========  ====================================================  ========
name              changeable  values                                                default
================  ==========  ====================================================  ========
queue.type        no          BatchCQ, SimpleCQ                                     SimpleCQ
cleanup.policy    no          DELETE, COMPACTION                                    DELETE
message.type      yes         UNSPECIFIED, MIXED, TRANSACTION, FIFO, DELAY, NORMAL  NORMAL
reserve.time      yes         a long, -1 to Long.MAX_VALUE                          -1
================  ==========  ====================================================  ========

The rules of 5.3.3's ``AttributeUtil.alterCurrentAttributes``, with its messages (the broker
answers them as SYSTEM_ERROR remarks): a creation takes only ``+`` names ("only add attribute
is supported while creating topic. key: X"); a name twice ("alter duplication key. key: X");
an unknown name ("unsupported key: X"); an unchangeable one on an existing topic ("attempt to
update an unchangeable attribute. key: X"); a value outside the set ("value is not in set:
[...]") or range ("value is not in range(-1, 9223372036854775807)"); deleting a name the topic
does not have ("attempt to delete a nonexistent key: X"). Two values 5.3.3 takes change how it
stores the topic, which Pumice does not do, so they are refused rather than kept unheeded:
``queue.type=BatchCQ`` and ``cleanup.policy=COMPACTION``. ``reserve.time`` is kept (5.3.3 reads
it only in its tiered store).

``message_type_of`` is 5.3.3's ``TopicMessageType.parseFromMessageProperty``: which type a
message is, by its properties (what a v5 client checks against the route's accepted types).
"""

from __future__ import annotations

from dataclasses import dataclass

MESSAGE_TYPE = "message.type"
# TopicMessageType
UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED = "UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"
JAVA_LONG_MAX = 2**63 - 1
# values 5.3.3 accepts that change how it stores a topic, which Pumice does not
UNSERVED = {("queue.type", "BatchCQ"): "batch ConsumeQueues", ("cleanup.policy", "COMPACTION"): "compacted topics"}


class AttributeRefused(ValueError):
    """An attribute modification 5.3.3 refuses; the message is its remark."""


@dataclass(frozen=True)
class Attribute:
    name: str
    changeable: bool
    values: tuple[str, ...] = ()  # an enum attribute's universe (in Java's HashSet order)
    long_range: tuple[int, int] | None = None  # a long attribute's bounds

    def verify(self, value: str) -> None:
        if self.long_range is not None:
            low, high = self.long_range
            try:
                n = int(value)
            except ValueError:
                raise AttributeRefused(f'For input string: "{value}"') from None
            if not low <= n <= high:
                raise AttributeRefused(f"value is not in range({low}, {high})")
        elif value not in self.values:
            raise AttributeRefused(f"value is not in set: [{', '.join(self.values)}]")


TOPIC_ATTRIBUTES: dict[str, Attribute] = {
    a.name: a
    for a in (
        Attribute("queue.type", False, ("BatchCQ", "SimpleCQ")),
        Attribute("cleanup.policy", False, ("DELETE", "COMPACTION")),
        Attribute(MESSAGE_TYPE, True, (UNSPECIFIED, MIXED, TRANSACTION, FIFO, DELAY, NORMAL)),
        Attribute("reserve.time", True, long_range=(-1, JAVA_LONG_MAX)),
    )
}


def parse_to_map(modification: str | None) -> dict[str, str]:
    """``+a=1,-b`` → ``{"+a": "1", "-b": ""}`` (AttributeParser.parseToMap; its messages)."""
    out: dict[str, str] = {}
    if not modification:
        return out
    for kv in modification.split(","):
        if "=" in kv:
            key, _, value = kv.partition("=")
            value = value.split("=", 1)[0]  # Java's split("=")[1]
            if "+" not in key:
                raise AttributeRefused(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise AttributeRefused(f"delete attribute format is wrong: {key}")
        if key in out:
            raise AttributeRefused(f"key duplication: {key}")
        out[key] = value
    return out


def alter_current_attributes(create: bool, current: dict[str, str], modification: dict[str, str]) -> dict[str, str]:
    """The topic's attributes after ``modification`` (signed names, from ``parse_to_map``)."""
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in modification.items():
        name = key[1:]
        if not name or "+" in name or "-" in name:
            raise AttributeRefused("kv string format wrong.")
        if name in seen:
            raise AttributeRefused(f"alter duplication key. key: {name}")
        seen.add(name)
        if create:
            if not key.startswith("+"):
                raise AttributeRefused(f"only add attribute is supported while creating topic. key: {name}")
            init[name] = value
        elif key.startswith("+"):
            add[name] = value
        elif key.startswith("-"):
            if name not in current:
                raise AttributeRefused(f"attempt to delete a nonexistent key: {name}")
            delete[name] = value
        else:
            raise AttributeRefused(f"wrong format key: {name}")
    for names, initial, deleting in ((init, True, False), (add, False, False), (delete, False, True)):
        for name, value in names.items():
            attribute = TOPIC_ATTRIBUTES.get(name)
            if attribute is None:
                raise AttributeRefused(f"unsupported key: {name}")
            if not initial and not attribute.changeable:
                raise AttributeRefused(f"attempt to update an unchangeable attribute. key: {name}")
            if not deleting:
                attribute.verify(value)
                if (name, value) in UNSERVED:
                    raise AttributeRefused(f"{name}={value} is not supported: Pumice has no {UNSERVED[name, value]}")
    final = {**current, **init, **add}
    for name in delete:
        final.pop(name, None)
    return final


def topic_message_type(attributes: dict[str, str]) -> str:
    """TopicConfig.getTopicMessageType: the topic's ``message.type``, NORMAL without one."""
    return attributes.get(MESSAGE_TYPE) or NORMAL


def message_type_of(properties: dict[str, str]) -> str:
    """TopicMessageType.parseFromMessageProperty: TRANSACTION, DELAY, FIFO or NORMAL."""
    if properties.get("TRAN_MSG") == "true":
        return TRANSACTION
    if any(k in properties for k in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")):
        return DELAY
    if "__SHARDINGKEY" in properties:
        return FIFO
    return NORMAL
