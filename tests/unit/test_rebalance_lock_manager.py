"""RebalanceLockManager: queue locks for orderly consumers."""

from __future__ import annotations

import re
import time

import pytest

from pumice.broker.rebalance_lock_manager import RebalanceLockManager, mq_set
from pumice.remoting.remoting_command import MissingFieldError

Q0, Q1 = ("T", "b", 0), ("T", "b", 1)


def test_a_queue_has_one_holder_until_it_unlocks_or_expires() -> None:
    m = RebalanceLockManager(max_live_time_s=0.2)
    assert m.try_lock_batch("G", [Q0, Q1], "c1") == [Q0, Q1]
    assert m.try_lock_batch("G", [Q0, Q1], "c2") == []  # held by c1
    assert m.try_lock_batch("G", [Q0], "c1") == [Q0]  # renewal
    assert m.try_lock_batch("Other", [Q0], "c2") == [Q0]  # locks are per group
    m.unlock_batch("G", [Q0, Q1], "c2")  # not c2's: nothing freed
    assert m.try_lock_batch("G", [Q1], "c2") == []
    m.unlock_batch("G", [Q1], "c1")
    assert m.try_lock_batch("G", [Q1], "c2") == [Q1]
    time.sleep(0.3)  # c1's lock on Q0 was not renewed
    assert m.try_lock_batch("G", [Q0], "c2") == [Q0]


@pytest.mark.parametrize(
    ("mq_set_value", "remark"),
    [
        ([{"topic": "T", "brokerName": "b", "queueId": "abc"}], "bad queueId: 'abc'"),
        ([{"topic": "T", "brokerName": "b", "queueId": 2**40}], "bad queueId"),
        ([{"topic": "T", "brokerName": "b", "queueId": 1}, 5], "mqSet entry 5 is not a MessageQueue"),
        ({"topic": "T"}, "mqSet is not a JSON array"),
    ],
)
def test_a_lock_body_that_is_not_a_message_queue_set_is_refused_with_a_remark(
    mq_set_value: object, remark: str
) -> None:
    with pytest.raises(MissingFieldError, match=re.escape(remark)):
        mq_set({"consumerGroup": "G", "clientId": "c", "mqSet": mq_set_value})
    assert mq_set({"mqSet": [{"topic": "T", "brokerName": "b", "queueId": "3"}]}) == [("T", "b", 3)]
