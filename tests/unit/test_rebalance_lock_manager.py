"""RebalanceLockManager: queue locks for orderly consumers."""

from __future__ import annotations

import time

from pumice.broker.rebalance_lock_manager import RebalanceLockManager

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
