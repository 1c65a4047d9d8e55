"""The push consumer's pull decisions: ``decide_before_pull`` (flow control, orderly locks) and
``decide_pull_result`` (each PullStatus), as pure functions; then the pull loop applying them,
against a fake client instance (scripted pull answers, no sockets)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from pumice.client import AsyncPushConsumer, ConsumeStatus, MessageExt, MessageModel, MessageQueue
from pumice.client.message import PullResult, PullStatus
from pumice.client.offset_store import OffsetStore
from pumice.client.process_queue import ProcessQueue
from pumice.client.push_consumer import PullAction, PullLimits, decide_before_pull, decide_pull_result

MQ = MessageQueue("T", "b", 0)


def msg(offset: int, body: bytes = b"x", topic: str = "T", props: dict[str, str] | None = None) -> MessageExt:
    return MessageExt(topic=topic, body=body, properties=dict(props or {}), queue_offset=offset, msg_id=f"id{offset}")


def result(status: PullStatus, next_offset: int, msgs: list[MessageExt] | None = None) -> PullResult:
    return PullResult(status, next_offset, min_offset=0, max_offset=100, msgs=list(msgs or []))


# -- decide_before_pull ---------------------------------------------------------------------


def cached(n: int, body: bytes = b"12345", first: int = 0) -> ProcessQueue:
    pq = ProcessQueue(MQ, first)
    pq.put_messages([msg(first + i, body) for i in range(n)])
    return pq


def test_an_empty_queue_is_pulled_at_once() -> None:
    d = decide_before_pull(ProcessQueue(MQ), PullLimits())
    assert d.action is PullAction.PULL and d.delay_s == 0


def test_too_many_messages_cached_waits_the_flow_control_delay() -> None:
    limits = PullLimits(threshold_count=10, flow_control_delay_s=0.25)
    assert decide_before_pull(cached(10), limits).action is PullAction.PULL  # at the threshold: still pulled
    d = decide_before_pull(cached(11), limits)
    assert d.action is PullAction.FLOW_CONTROL and d.delay_s == 0.25
    assert "pullThresholdForQueue 10" in d.reason


def test_too_many_bytes_cached_waits() -> None:
    pq = cached(11)  # 55 body bytes
    assert decide_before_pull(pq, PullLimits(threshold_size_bytes=55)).action is PullAction.PULL
    d = decide_before_pull(pq, PullLimits(threshold_size_bytes=54, flow_control_delay_s=0.5))
    assert d.action is PullAction.FLOW_CONTROL and d.delay_s == 0.5 and "pullThresholdSizeForQueue" in d.reason


def test_offset_span_limits_concurrent_consumers_only() -> None:
    pq = cached(2)
    pq.put_messages([msg(3000)])  # span 3000, three messages
    d = decide_before_pull(pq, PullLimits(max_span=2000))
    assert d.action is PullAction.FLOW_CONTROL and "consumeConcurrentlyMaxSpan 2000" in d.reason
    assert decide_before_pull(pq, PullLimits(max_span=3000)).action is PullAction.PULL
    assert decide_before_pull(pq, PullLimits(max_span=None)).action is PullAction.PULL  # orderly


def test_orderly_clustering_waits_for_the_broker_lock() -> None:
    pq = ProcessQueue(MQ)
    assert decide_before_pull(pq, PullLimits(lock_required=False)).action is PullAction.PULL
    d = decide_before_pull(pq, PullLimits(lock_required=True, lock_fail_delay_s=3.0))
    assert d.action is PullAction.LOCK_WAIT and d.delay_s == 3.0
    pq.locked = True
    assert decide_before_pull(pq, PullLimits(lock_required=True)).action is PullAction.PULL


def test_flow_control_comes_before_the_lock_and_nothing_is_changed() -> None:
    pq = cached(11)
    before = (pq.msg_count, pq.msg_size, pq.consuming, pq.locked, pq.pull_offset, pq.in_flight_offsets())
    d = decide_before_pull(pq, PullLimits(threshold_count=10, lock_required=True))
    assert d.action is PullAction.FLOW_CONTROL
    assert (pq.msg_count, pq.msg_size, pq.consuming, pq.locked, pq.pull_offset, pq.in_flight_offsets()) == before


# -- decide_pull_result ---------------------------------------------------------------------


@pytest.mark.parametrize("has_messages", [False, True])
def test_found_messages_are_consumed_and_no_offset_is_stored(has_messages: bool) -> None:
    msgs = [msg(5), msg(6)]
    res = result(PullStatus.FOUND, 7, msgs)
    d = decide_pull_result(res, pull_offset=5, has_messages=has_messages)
    assert d.action is PullAction.CONSUME and d.next_offset == 7
    assert d.msgs is res.msgs and [m.queue_offset for m in d.msgs] == [5, 6]
    assert d.store_offset == -1  # the consume service stores offsets as messages finish
    assert res.status is PullStatus.FOUND and res.msgs == msgs  # the result is left as it was


@pytest.mark.parametrize("status", [PullStatus.FOUND, PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG])
def test_nothing_to_consume_moves_on_and_stores_the_offset_when_nothing_is_in_flight(status: PullStatus) -> None:
    # FOUND without messages: the client-side tag filter left none
    d = decide_pull_result(result(status, 12), pull_offset=9, has_messages=False)
    assert d.action is PullAction.NEXT_OFFSET and d.next_offset == 12 and d.store_offset == 12 and d.msgs == []
    d = decide_pull_result(result(status, 12), pull_offset=9, has_messages=True)
    assert d.action is PullAction.NEXT_OFFSET and d.next_offset == 12
    assert d.store_offset == -1  # an unfinished message holds the offset back


def test_an_illegal_offset_is_corrected() -> None:
    d = decide_pull_result(result(PullStatus.OFFSET_ILLEGAL, 40), pull_offset=3, has_messages=False)
    assert d.action is PullAction.CORRECT_OFFSET and d.next_offset == 40 and d.store_offset == 40
    assert "offset 3 is illegal" in d.reason and "40" in d.reason
    d = decide_pull_result(result(PullStatus.OFFSET_ILLEGAL, 40), pull_offset=3, has_messages=True)
    assert d.action is PullAction.CORRECT_OFFSET and d.next_offset == 40 and d.store_offset == -1


def test_every_status_is_decided() -> None:
    seen = {decide_pull_result(result(s, 1), pull_offset=0, has_messages=False).action for s in PullStatus}
    assert seen == {PullAction.NEXT_OFFSET, PullAction.CORRECT_OFFSET}


# -- the pull loop applying them (fake client instance) -------------------------------------


class MemoryOffsetStore(OffsetStore):
    """Offsets in a dict; records what was persisted."""

    def __init__(self, stored: dict[MessageQueue, int]) -> None:
        super().__init__("G")
        self.stored = dict(stored)
        self.persisted: list[tuple[MessageQueue, int]] = []

    async def _read_stored(self, mq: MessageQueue) -> int:
        return self.stored.get(mq, -1)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            if mq in self.offset_table:
                self.stored[mq] = self.offset_table[mq]
                self.persisted.append((mq, self.offset_table[mq]))


class FakeInstance:
    """What the push consumer asks of its MQClientInstance, for one queue. ``answers`` are
    handed out in order, each once ``ready(i)`` holds; afterwards pulls hang (a long poll)."""

    client_id = "127.0.0.1@fake"

    def __init__(self, answers: list[PullResult], ready: Callable[[int], bool] = lambda i: True) -> None:
        self.answers = answers
        self.ready = ready
        self.pulls: list[int] = []

    async def start(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    def register_consumer(self, group: str, provider: Any, inner: Any = None) -> None:
        pass

    async def unregister_consumer(self, group: str) -> None:
        pass

    def add_consumer_ids_changed_listener(self, listener: Any) -> None:
        pass

    async def get_topic_route(self, topic: str) -> None:
        pass

    async def send_heartbeat_to_all_brokers(self) -> int:
        return 0

    async def subscribe_queues(self, topic: str, refresh: bool = False) -> list[MessageQueue]:
        return [MQ]

    async def pull_kernel(self, mq: MessageQueue, sub: Any, *, offset: int, **kwargs: Any) -> PullResult:
        i = len(self.pulls)
        self.pulls.append(offset)
        if i >= len(self.answers):
            await asyncio.Event().wait()
        deadline = time.monotonic() + 5
        while not self.ready(i):
            assert time.monotonic() < deadline, f"pull {i} never became ready"
            await asyncio.sleep(0.005)
        return self.answers[i]


async def wait_until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


def consumer(instance: Any, store: OffsetStore, **kwargs: Any) -> AsyncPushConsumer:
    c = AsyncPushConsumer(
        "G", client_instance=instance, message_model=MessageModel.BROADCASTING, offset_store=store,
        persist_consumer_offset_interval_s=3600, **kwargs,
    )  # fmt: skip
    c.subscribe("T")
    return c


@pytest.mark.parametrize("orderly", [False, True])
def test_the_loop_consumes_moves_on_and_corrects_an_illegal_offset(orderly: bool) -> None:
    store = MemoryOffsetStore({MQ: 5})
    got: list[tuple[int, str]] = []
    retry = msg(6, topic="%RETRY%G", props={"RETRY_TOPIC": "T"})
    instance = FakeInstance(
        [
            result(PullStatus.FOUND, 7, [msg(5), retry]),
            result(PullStatus.NO_NEW_MSG, 7),
            result(PullStatus.OFFSET_ILLEGAL, 20),
            result(PullStatus.NO_MATCHED_MSG, 25),
        ],
        # after the FOUND one: once both messages were consumed (nothing in flight)
        ready=lambda i: i == 0 or store.offset_table.get(MQ, -1) >= 7,
    )

    async def main() -> None:
        c = consumer(instance, store)

        async def handler(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
            got.extend((m.queue_offset, m.topic) for m in msgs)
            return ConsumeStatus.SUCCESS

        c.register_message_listener(handler, orderly=orderly)
        async with c:
            await wait_until(lambda: len(instance.pulls) == 5)
            assert c.assignment() == {MQ}
            pq = c.process_queue(MQ)
            assert pq is not None and pq.pull_offset == 25 and not pq.has_messages()
            assert await c.committed_offset(MQ) == 25
            # only OFFSET_ILLEGAL persists at once (the interval is an hour here)
            assert store.persisted == [(MQ, 20)]
        assert store.stored[MQ] == 25  # persisted at shutdown

    asyncio.run(asyncio.wait_for(main(), 20))
    assert instance.pulls == [5, 7, 7, 20, 25]
    assert got == [(5, "T"), (6, "T")]  # in order, the retried one under its original topic


def test_the_loop_holds_pulls_under_flow_control() -> None:
    store = MemoryOffsetStore({MQ: 0})
    instance = FakeInstance([result(PullStatus.FOUND, 3, [msg(0), msg(1), msg(2)]), result(PullStatus.NO_NEW_MSG, 3)])

    async def main() -> None:
        c = consumer(instance, store, pull_threshold_for_queue=2, pull_delay_on_flow_control_s=0.01)
        release = asyncio.Event()

        async def handler(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
            await release.wait()
            return ConsumeStatus.SUCCESS

        c.register_message_listener(handler)
        async with c:
            await wait_until(lambda: c.stats["flow_control"] >= 5)
            assert instance.pulls == [0]  # three cached, threshold two: no second pull
            release.set()
            await wait_until(lambda: len(instance.pulls) == 3)
            assert instance.pulls == [0, 3, 3]
            assert await c.committed_offset(MQ) == 3

    asyncio.run(asyncio.wait_for(main(), 20))
