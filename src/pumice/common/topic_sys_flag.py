"""``TopicSysFlag``: a topic's unit bits, as topicSysFlag carries them (topics.json, the route).

====  =============  ===========================================
bit   name           set by
====  =============  ===========================================
0x1   FLAG_UNIT      a unit topic (mqadmin updateTopic ``-u``)
0x2   FLAG_UNIT_SUB  it has unit subscriptions (``-s``)
====  =============  ===========================================
"""

from __future__ import annotations

FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2


def build_sys_flag(unit: bool, has_unit_sub: bool) -> int:
    return (FLAG_UNIT if unit else 0) | (FLAG_UNIT_SUB if has_unit_sub else 0)
