"""Queue allocation among the members of a consumer group (rebalance strategies).

``allocate_averagely`` is RocketMQ's AllocateMessageQueueAveragely: queues and client ids
sorted; each client gets a contiguous run of ``len(mqs) // len(cids)`` queues, the first
``len(mqs) % len(cids)`` clients one more. A client not in ``cids`` gets nothing.

The push consumer takes a pluggable ``AllocateStrategy``: a callable
``(group, current_cid, mqs, cids) -> mqs`` (Java's AllocateMessageQueueStrategy.allocate).
Two are provided: ``allocate_message_queue_averagely`` (the default, the function above) and
``allocate_message_queue_averagely_by_circle`` (AllocateMessageQueueAveragelyByCircle: queue
``i`` of the sorted list goes to client ``i % len(cids)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pumice.client.message import MessageQueue

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


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


def allocate_message_queue_averagely(
    group: str, current_cid: str, mqs: Sequence[MessageQueue], cids: Sequence[str]
) -> list[MessageQueue]:
    """AllocateMessageQueueAveragely as an ``AllocateStrategy`` (``group`` is not used)."""
    return allocate_averagely(current_cid, mqs, cids)


def allocate_message_queue_averagely_by_circle(
    group: str, current_cid: str, mqs: Sequence[MessageQueue], cids: Sequence[str]
) -> list[MessageQueue]:
    """AllocateMessageQueueAveragelyByCircle: sorted queue ``i`` to sorted client ``i % n``."""
    mq_all = sorted(mqs)
    cid_all = sorted(set(cids))
    if not mq_all or current_cid not in cid_all:
        return []
    index = cid_all.index(current_cid)
    return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]
