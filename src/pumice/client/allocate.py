"""Queue allocation among the members of a consumer group (rebalance strategies).

``allocate_averagely`` is RocketMQ's AllocateMessageQueueAveragely: queues and client ids
sorted; each client gets a contiguous run of ``len(mqs) // len(cids)`` queues, the first
``len(mqs) % len(cids)`` clients one more. A client not in ``cids`` gets nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from pumice.client.message import MessageQueue


def allocate_averagely(current_cid: str, mqs: Sequence[MessageQueue], cids: Sequence[str]) -> list[MessageQueue]:
    mq_all = sorted(mqs)
    cid_all = sorted(set(cids))
    if not mq_all or current_cid not in cid_all:
        return []
    index = cid_all.index(current_cid)
    n, c = len(mq_all), len(cid_all)
    mod = n % c
    if n <= c:
        average = 1
    else:
        average = n // c + 1 if mod > 0 and index < mod else n // c
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n - start)
    return [mq_all[(start + i) % n] for i in range(max(count, 0))]
