"""ConsumerManager: group membership from heartbeats, and the NOTIFY_CONSUMER_IDS_CHANGED
each remaining member gets when it changes (so it rebalances at once, not at its 20-s timer)."""

from __future__ import annotations

from pumice.broker import consumer_manager as consumer_manager_module
from pumice.broker.consumer_manager import ConsumerManager
from tests.helpers.fakes import FakeChannel


def join(cm: ConsumerManager, client: str, ch: FakeChannel, group: str = "G") -> bool:
    return cm.register_consumer(group, client, ch, {"subscriptionDataSet": [{"topic": "T", "subString": "*"}]})  # type: ignore[arg-type]


def test_members_are_told_when_the_group_changes() -> None:
    cm = ConsumerManager()
    a, b, c = FakeChannel("a"), FakeChannel("b"), FakeChannel("c")
    assert join(cm, "A", a)
    assert a.notices() == ["G"]
    assert join(cm, "B", b)
    assert (a.notices(), b.notices()) == (["G"], ["G"])
    assert not join(cm, "B", b)  # a heartbeat from a known member changes nothing
    assert (a.notices(), b.notices()) == ([], [])
    join(cm, "C", c)
    a.notices(), b.notices(), c.notices()
    cm.unregister_consumer("G", "C")  # UNREGISTER_CLIENT
    assert (a.notices(), b.notices(), c.notices()) == (["G"], ["G"], [])
    cm.do_channel_close_event(b)  # B's connection closed
    assert a.notices() == ["G"] and cm.get_consumer_ids("G") == ["A"]
    # A goes silent for 120 s: dropped with its connection closed, and the empty group goes too
    join(cm, "B", b)
    a.notices(), b.notices()
    cm.consumer_table["G"].channels["A"].last_update -= consumer_manager_module.CHANNEL_EXPIRED_TIMEOUT_S + 1
    cm.scan_not_active_channel()
    assert a.closed and (a.notices(), b.notices()) == ([], ["G"]) and cm.get_consumer_ids("G") == ["B"]
    cm.consumer_table["G"].channels["B"].last_update -= consumer_manager_module.CHANNEL_EXPIRED_TIMEOUT_S + 1
    cm.scan_not_active_channel()
    assert b.closed and "G" not in cm.consumer_table


def test_members_are_told_when_a_heartbeat_adds_or_drops_a_topic() -> None:
    """As 4.9's registerConsumer notifies on updateChannel || updateSubscription: a member that
    subscribes to another topic (DefaultMQPushConsumer.subscribe on a running consumer sends a
    heartbeat at once) makes every member rebalance now, not at its 20-s timer."""
    cm = ConsumerManager()
    a, b = FakeChannel("a"), FakeChannel("b")

    def beat(client: str, ch: FakeChannel, *topics: str, version: int = 1) -> bool:
        subs = [{"topic": t, "subString": "*", "subVersion": version} for t in topics]
        return cm.register_consumer("G", client, ch, {"subscriptionDataSet": subs})  # type: ignore[arg-type]

    beat("A", a, "T")
    beat("B", b, "T")
    a.notices(), b.notices()
    assert beat("A", a, "T", "T2")  # a topic added
    assert (a.notices(), b.notices()) == (["G"], ["G"])
    assert not beat("B", b, "T", "T2")  # nothing new
    assert not beat("A", a, "T", "T2", version=2)  # a newer tag set of the same topics: no rebalance
    assert (a.notices(), b.notices()) == ([], [])
    assert beat("B", b, "T2")  # a topic dropped
    assert (a.notices(), b.notices()) == (["G"], ["G"])
    assert sorted(cm.consumer_table["G"].subscriptions) == ["T2"]
