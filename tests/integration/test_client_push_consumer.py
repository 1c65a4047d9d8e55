"""pumice.client push consumers against real `pumice namesrv` and `pumice broker` processes
(and, for interop, the Apache C++ client in a subprocess, see cpp_client.py)."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pumice.client import (
    AsyncProducer,
    AsyncPushConsumer,
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    Producer,
    PushConsumer,
    select_by_hash,
)
from pumice.client.mq_client_api import MQClientAPIImpl
from pumice.client.offset_store import LocalFileOffsetStore
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clients import FAST, create_topic
from tests.helpers.clusters import Cluster, stop
from tests.helpers.waiting import eventually_async
from tests.integration import cpp_client

# every delay level 1 s, so that retries (level 3 + reconsumeTimes) come back quickly
FAST_DELAYS = "messageDelayLevel=" + " ".join(["1s"] * 18) + "\n"


class PushCluster(Cluster):
    def start_broker(self) -> Any:
        conf = self.tmp / "broker.conf"
        text = conf.read_text()
        if "messageDelayLevel" not in text:
            conf.write_text(text + FAST_DELAYS)
        return super().start_broker()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PushCluster]:
    c = PushCluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def run(coro: Awaitable[Any], seconds: float = 90) -> Any:
    return asyncio.run(asyncio.wait_for(coro, seconds))  # type: ignore[arg-type]


async def produce(cluster: Cluster, topic: str, n: int, prefix: str = "m", tags: str | None = None) -> list[str]:
    async with AsyncProducer("PushPG", cluster.ns) as p:
        for i in range(n):
            await p.send(Message(topic, f"{prefix}{i}".encode(), tags=tags, keys=f"k{prefix}{i}"))
    return [f"{prefix}{i}" for i in range(n)]


async def broker_offsets(cluster: Cluster, group: str, topic: str, queues: int) -> dict[int, int]:
    api = MQClientAPIImpl()
    try:
        out = {}
        for q in range(queues):
            try:
                out[q] = await api.query_consumer_offset(cluster.br, group, topic, q)
            except MQClientError:
                out[q] = -1
        return out
    finally:
        await api.close()


async def max_offsets(cluster: Cluster, topic: str, queues: int) -> dict[int, int]:
    api = MQClientAPIImpl()
    try:
        return {q: await api.get_max_offset(cluster.br, topic, q) for q in range(queues)}
    finally:
        await api.close()


class Recorder:
    """A handler that records every message it is given (thread-safe: sync handlers run in threads)."""

    def __init__(self, status: Callable[[MessageExt], ConsumeStatus] | None = None) -> None:
        self.msgs: list[MessageExt] = []
        self.batches: list[int] = []
        self.lock = threading.Lock()
        self.status = status

    def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        with self.lock:
            self.msgs += msgs
            self.batches.append(len(msgs))
        if self.status is not None:
            return self.status(msgs[0])
        return ConsumeStatus.SUCCESS

    def bodies(self) -> list[str]:
        with self.lock:
            return [m.body.decode() for m in self.msgs]


def main_queues(c: AsyncPushConsumer, topic: str) -> set[int]:
    return {mq.queue_id for mq in c.assignment() if mq.topic == topic}


# -- clustering, concurrent -------------------------------------------------------------------


def test_concurrent_push_exactly_once_and_offsets_committed(cluster: PushCluster) -> None:
    topic, group = "PushTopic", "PushCG"

    async def main() -> None:
        await create_topic(cluster, topic, queues=4)
        sent = await produce(cluster, topic, 120, "pre")
        rec = Recorder()

        async def handler(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            await asyncio.sleep(0.001)
            return rec(msgs, ctx)

        c = AsyncPushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, consume_thread_count=8,
                              consume_message_batch_max_size=4, **FAST)  # fmt: skip
        c.subscribe(topic, "*")
        c.register_message_listener(handler)
        await c.start()
        try:
            await eventually_async(lambda: main_queues(c, topic) == {0, 1, 2, 3}, 30, what="all four queues")
            sent += await produce(cluster, topic, 80, "post")  # while the consumer long-polls
            await eventually_async(lambda: len(rec.msgs) >= len(sent), 30, what="every message")
            await asyncio.sleep(0.5)  # nothing more comes
            counts = collections.Counter(rec.bodies())
            assert set(counts) == set(sent) and max(counts.values()) == 1, counts.most_common(3)
            assert max(rec.batches) <= 4 and max(rec.batches) > 1  # consume_message_batch_max_size
            assert all(m.topic == topic and m.reconsume_times == 0 and m.broker_name == "broker-t" for m in rec.msgs)
            assert {m.keys[0] for m in rec.msgs} == {f"k{b}" for b in sent}
            ends = await max_offsets(cluster, topic, 4)
            # committed every 0.5 s: the broker soon shows the end of every queue
            await eventually_async(
                lambda: _equal(broker_offsets(cluster, group, topic, 4), ends), 30, what="offsets at the end"
            )
        finally:
            await c.shutdown()
        assert await broker_offsets(cluster, group, topic, 4) == ends
        # a new member of the group starts where the group stopped: nothing is consumed twice
        rec2 = Recorder()
        c2 = AsyncPushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, **FAST)
        c2.subscribe(topic)
        c2.register_message_listener(rec2)
        async with c2:
            await eventually_async(
                lambda: main_queues(c2, topic) == {0, 1, 2, 3}, 30, what="queues of the second consumer"
            )
            await produce(cluster, topic, 5, "late")
            await eventually_async(lambda: len(rec2.msgs) >= 5, 30, what="the late messages")
            await asyncio.sleep(0.5)
        assert sorted(rec2.bodies()) == [f"late{i}" for i in range(5)]

    run(main())


async def _equal(a: Awaitable[Any], b: Any) -> bool:
    return await a == b


def test_tag_filter_with_blocking_push_consumer(cluster: PushCluster) -> None:
    topic, group = "TagTopic", "TagCG"

    async def setup() -> dict[int, int]:
        await create_topic(cluster, topic, queues=2)
        for tags in ("TagA", "TagB", "TagC"):
            await produce(cluster, topic, 10, tags, tags=tags)
        return await max_offsets(cluster, topic, 2)

    ends = run(setup())
    rec = Recorder()
    c = PushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, **FAST)
    c.subscribe(topic, "TagA || TagC")
    c.register_message_listener(rec)  # a plain function: it runs in the consumer's threads
    c.start()
    try:
        deadline = time.monotonic() + 30
        while len(rec.msgs) < 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        assert sorted(rec.bodies()) == sorted([f"TagA{i}" for i in range(10)] + [f"TagC{i}" for i in range(10)])
        assert {m.tags for m in rec.msgs} == {"TagA", "TagC"}
        # the filtered-out messages do not hold the offsets back
        deadline = time.monotonic() + 15
        while run(broker_offsets(cluster, group, topic, 2)) != ends and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        c.shutdown()
    assert run(broker_offsets(cluster, group, topic, 2)) == ends


# -- broadcasting ---------------------------------------------------------------------------


def test_broadcasting_every_member_gets_everything_with_local_offsets(cluster: PushCluster, tmp_path: Path) -> None:
    topic, group = "BcTopic", "BcCG"

    async def main() -> None:
        await create_topic(cluster, topic, queues=4)
        sent = await produce(cluster, topic, 40, "b")
        members = []
        recs = [Recorder(), Recorder()]
        for i, rec in enumerate(recs):
            c = AsyncPushConsumer(group, cluster.ns, instance_name=f"bc{i}", message_model=MessageModel.BROADCASTING,
                                  consume_from_where=ConsumeFromWhere.FIRST,
                                  offset_store_path=tmp_path / f"m{i}" / "offsets.json", **FAST)  # fmt: skip
            c.subscribe(topic)
            c.register_message_listener(rec)
            members.append(c)
        try:
            for c in members:
                await c.start()
            for c in members:
                await eventually_async(
                    lambda c=c: main_queues(c, topic) == {0, 1, 2, 3}, 30, what="every queue in each member"
                )
                assert not any(mq.topic.startswith("%RETRY%") for mq in c.assignment())
            sent += await produce(cluster, topic, 20, "c")
            for rec in recs:
                await eventually_async(
                    lambda rec=rec: len(rec.msgs) >= len(sent), 30, what="every message in each member"
                )
            await asyncio.sleep(1.0)
        finally:
            for c in members:
                await c.shutdown()
        for rec in recs:
            counts = collections.Counter(rec.bodies())
            assert set(counts) == set(sent) and max(counts.values()) == 1
        ends = await max_offsets(cluster, topic, 4)
        for i in range(2):
            store = LocalFileOffsetStore(group, path=tmp_path / f"m{i}" / "offsets.json")
            assert {mq.queue_id: off for mq, off in store.read_file().items() if mq.topic == topic} == ends
        # never on the broker
        api = MQClientAPIImpl()
        try:
            assert f"{topic}@{group}" not in await api.get_all_consumer_offset(cluster.br)
        finally:
            await api.close()
        # a member restarted on its file goes on where it stopped
        rec3 = Recorder()
        c3 = AsyncPushConsumer(group, cluster.ns, instance_name="bc0", message_model=MessageModel.BROADCASTING,
                               consume_from_where=ConsumeFromWhere.FIRST,
                               offset_store_path=tmp_path / "m0" / "offsets.json", **FAST)  # fmt: skip
        c3.subscribe(topic)
        c3.register_message_listener(rec3)
        async with c3:
            await eventually_async(lambda: main_queues(c3, topic) == {0, 1, 2, 3}, 30, what="queues after restart")
            await produce(cluster, topic, 4, "d")
            await eventually_async(lambda: len(rec3.msgs) >= 4, 30, what="new messages after restart")
            await asyncio.sleep(0.5)
        assert sorted(rec3.bodies()) == [f"d{i}" for i in range(4)]

    run(main(), 120)


# -- retries and the DLQ ----------------------------------------------------------------------


def test_reconsume_later_is_redelivered_then_dead_lettered(cluster: PushCluster) -> None:
    topic, group = "RetryTopic", "RetryCG"

    async def main() -> None:
        await create_topic(cluster, topic, queues=2)
        arrivals: dict[str, list[tuple[int, float, str]]] = collections.defaultdict(list)

        def handler(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            m = msgs[0]
            arrivals[m.body.decode()].append((m.reconsume_times, time.monotonic(), m.topic))
            if m.body == b"boom":
                raise RuntimeError("an exception counts as RECONSUME_LATER")
            if m.body.startswith(b"fail") or (m.body == b"once" and m.reconsume_times == 0):
                return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.SUCCESS

        c = AsyncPushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, max_reconsume_times=2,
                              **FAST)  # fmt: skip
        c.subscribe(topic)
        c.register_message_listener(handler)
        async with c:
            await eventually_async(lambda: len(main_queues(c, topic)) == 2, 30, what="the queues")
            await eventually_async(
                lambda: any(mq.topic == f"%RETRY%{group}" for mq in c.assignment()), 30, what="the retry queue"
            )
            async with AsyncProducer("PushPG", cluster.ns) as p:
                for body in (b"ok", b"once", b"fail", b"boom"):
                    await p.send(Message(topic, body, tags="T", keys=body.decode()))
            # once: 0 → RECONSUME_LATER, then 1 from %RETRY% → SUCCESS
            await eventually_async(lambda: len(arrivals["once"]) >= 2, 30, what="the redelivery of 'once'")
            # fail / boom: 0, 1, 2 (maxReconsumeTimes 2) then the DLQ
            await eventually_async(
                lambda: len(arrivals["fail"]) >= 3 and len(arrivals["boom"]) >= 3, 30, what="three tries"
            )
            await asyncio.sleep(2.5)  # no fourth try
            assert c.stats["sent_back"] >= 5
        assert [rt for rt, _, _ in arrivals["ok"]] == [0]
        assert [rt for rt, _, _ in arrivals["once"]] == [0, 1]
        assert all(t == topic for a in arrivals.values() for _, _, t in a)  # the original topic, not %RETRY%
        first, again = arrivals["once"][0][1], arrivals["once"][1][1]
        assert 0.8 <= again - first <= 8.0  # delay level 3 = 1 s on this broker
        for body in ("fail", "boom"):
            assert [rt for rt, _, _ in arrivals[body]] == [0, 1, 2]
        api = MQClientAPIImpl()
        try:  # the DLQ is write-only (as in Java): look its messages up by key
            dlq = [(await eventually_async(lambda k=k: api.query_message(cluster.br, f"%DLQ%{group}", k), 30,
                                           what=k))[0]
                   for k in ("fail", "boom")]  # fmt: skip
            assert await api.query_message(cluster.br, f"%DLQ%{group}", "once") == []
        finally:
            await api.close()
        assert sorted(m.body for m in dlq) == [b"boom", b"fail"]
        assert all(m.properties.get("RETRY_TOPIC") == topic and m.reconsume_times == 3 for m in dlq)

    run(main(), 90)


def test_failed_send_back_is_consumed_again_locally(cluster: PushCluster) -> None:
    topic, group = "LocalRetryTopic", "LocalRetryCG"

    async def main() -> None:
        await create_topic(cluster, topic, queues=1)
        arrivals: list[tuple[int, str]] = []
        c = AsyncPushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST,
                              consume_retry_local_delay_s=0.3, **FAST)  # fmt: skip
        real_send_back = c._send_back

        async def broken_send_back(*args: Any) -> bool:
            return False  # as if the broker could not be reached

        c._send_back = broken_send_back  # type: ignore[method-assign]
        c.subscribe(topic)
        c.register_message_listener(
            lambda msgs, ctx: (
                arrivals.append((msgs[0].reconsume_times, msgs[0].topic))
                or (ConsumeStatus.RECONSUME_LATER if msgs[0].reconsume_times == 0 else ConsumeStatus.SUCCESS)
            )
        )
        async with c:
            await eventually_async(lambda: main_queues(c, topic) == {0}, 30, what="the queue")
            await produce(cluster, topic, 1, "lr")
            await eventually_async(lambda: len(arrivals) >= 2, 30, what="the local retry")
            # the failed message held the offset back until it succeeded
            await eventually_async(
                lambda: _equal(broker_offsets(cluster, group, topic, 1), {0: 1}), 30, what="offset 1"
            )
        assert arrivals == [(0, topic), (1, topic)]
        assert c._send_back is not real_send_back

    run(main())


def test_refused_send_back_goes_through_the_retry_topic_by_producer_then_the_dlq(cluster: PushCluster) -> None:
    """CONSUMER_SEND_MSG_BACK refused: the consumer sends the message to %RETRY%<group> itself
    (Java's fallback); the broker counts RECONSUME_TIME against MAX_RECONSUME_TIMES and moves it
    to the DLQ at the end, as it does for send-backs."""
    topic, group = "FallbackTopic", "FallbackCG"

    async def main() -> None:
        await create_topic(cluster, topic, queues=1)
        arrivals: list[tuple[int, str]] = []
        c = AsyncPushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, max_reconsume_times=2,
                              **FAST)  # fmt: skip
        refused: list[str] = []

        async def refuse(addr: str, msg: MessageExt, *args: Any) -> None:
            refused.append(msg.msg_id)
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, "refused by the test")

        c.instance.api.consumer_send_message_back = refuse  # type: ignore[method-assign]
        c.subscribe(topic)

        def handler(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            arrivals.append((msgs[0].reconsume_times, msgs[0].topic))
            return ConsumeStatus.RECONSUME_LATER

        c.register_message_listener(handler)
        async with c:
            await eventually_async(lambda: main_queues(c, topic) == {0}, 30, what="the queue")
            await eventually_async(
                lambda: any(mq.topic == f"%RETRY%{group}" for mq in c.assignment()), 30, what="the retry queue"
            )
            async with AsyncProducer("PushPG", cluster.ns) as p:
                msg_id = (await p.send(Message(topic, b"fb", tags="T", keys="fb-key"))).msg_id
            try:
                await eventually_async(lambda: len(arrivals) >= 2 and len(refused) >= 2, 30, what="two tries")
                await asyncio.sleep(2.5)  # no third try: the second went to the DLQ
            finally:
                print(arrivals, refused, c.stats)
            assert c.stats["sent_back"] == 2 and c.stats["send_back_failed"] == 0
            # the failed message did not hold the queue back: its offset moved on
            await eventually_async(
                lambda: _equal(broker_offsets(cluster, group, topic, 1), {0: 1}), 30, what="offset 1"
            )
        # Java's rule for re-sent messages: RECONSUME_TIME (reconsumeTimes + 1) >= MAX_RECONSUME_TIMES
        # is the DLQ, one try fewer than CONSUMER_SEND_MSG_BACK gives (it compares before adding 1)
        assert arrivals == [(0, topic), (1, topic)]
        api = MQClientAPIImpl()
        try:
            [dlq] = await eventually_async(
                lambda: api.query_message(cluster.br, f"%DLQ%{group}", "fb-key"), 30, what="the DLQ"
            )
        finally:
            await api.close()
        assert dlq.body == b"fb" and dlq.reconsume_times == 2 and dlq.tags == "T"
        assert dlq.properties.get("RETRY_TOPIC") == topic and dlq.properties.get("ORIGIN_MESSAGE_ID") == msg_id
        assert "RECONSUME_TIME" not in dlq.properties and "DELAY" not in dlq.properties

    run(main(), 90)


def test_orderly_gives_up_after_max_reconsume_times_to_the_dlq(cluster: PushCluster) -> None:
    topic, group = "OrderDlqTopic", "OrderDlqCG"

    async def main() -> None:
        await create_topic(cluster, topic, queues=1)
        seen: list[tuple[str, int]] = []

        def handler(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            seen.append((msgs[0].body.decode(), msgs[0].reconsume_times))
            ctx.suspend_current_queue_time_s = 0.1
            ok = msgs[0].body != b"poison"
            return ConsumeStatus.SUCCESS if ok else ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT

        c = AsyncPushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, max_reconsume_times=2,
                              **FAST)  # fmt: skip
        c.subscribe(topic)
        c.register_message_listener_orderly(handler)
        async with c:
            await eventually_async(lambda: main_queues(c, topic) == {0}, 30, what="the queue")
            async with AsyncProducer("PushPG", cluster.ns) as p:
                for body in (b"a", b"poison", b"b"):
                    await p.send(Message(topic, body, keys=body.decode()))
            await eventually_async(lambda: len(seen) >= 5, 30, what="all deliveries")
            await eventually_async(
                lambda: _equal(broker_offsets(cluster, group, topic, 1), {0: 3}), 30, what="offset 3"
            )
        # retried in place (nothing overtakes it), then given up: b comes after the last try
        assert seen == [("a", 0), ("poison", 0), ("poison", 1), ("poison", 2), ("b", 0)]
        api = MQClientAPIImpl()
        try:
            dlq = await eventually_async(
                lambda: api.query_message(cluster.br, f"%DLQ%{group}", "poison"), 30, what="the DLQ"
            )
        finally:
            await api.close()
        assert [m.body for m in dlq] == [b"poison"]

    run(main())


# -- rebalance ------------------------------------------------------------------------------


def test_rebalance_restarts_a_queue_whose_pulling_stopped(cluster: PushCluster) -> None:
    """A pull task that ended (a bug, an unexpected error) or a queue with no pull round for
    120 s is dropped by the next rebalance and taken again from its stored offset."""
    topic, group = "StallTopic", "StallCG"

    async def main() -> None:
        await create_topic(cluster, topic, queues=1)
        got: list[bytes] = []
        c = AsyncPushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, **FAST)
        c.subscribe(topic)
        c.register_message_listener(lambda msgs, ctx: got.extend(m.body for m in msgs) or ConsumeStatus.SUCCESS)
        async with c:
            await eventually_async(lambda: main_queues(c, topic) == {0}, 30, what="the queue")
            await produce(cluster, topic, 3, "a")
            await eventually_async(lambda: len(got) == 3, 30, what="the first three")
            mq = MessageQueue(topic, "broker-t", 0)
            first = c.process_queue(mq)
            assert first is not None and first.pull_task is not None
            first.pull_task.cancel()  # pulling dies without the queue being dropped
            await asyncio.sleep(0.2)
            assert first.pull_task.done()
            await produce(cluster, topic, 2, "b")
            # (a rebalance of its own, e.g. on NOTIFY_CONSUMER_IDS_CHANGED when a heartbeat adds
            # the retry topic, may restart the queue first: the outcome is the same)
            await c.rebalance()
            second = c.process_queue(mq)
            assert second is not None and second is not first and first.dropped
            await eventually_async(lambda: len(got) == 5, 30, what="the two sent while the queue was stalled")
            # no pull round for PULL_MAX_IDLE_TIME: dropped and taken again as well
            second.last_pull_time -= 121.0
            assert second.is_pull_expired()
            await c.rebalance()
            third = c.process_queue(mq)
            assert third is not None and third is not second and second.dropped
            # a live queue is left alone
            await c.rebalance()
            assert c.process_queue(mq) is third
            await produce(cluster, topic, 1, "c")
            await eventually_async(lambda: len(got) >= 6, 30, what="the last one")
        assert sorted(set(got)) == [b"a0", b"a1", b"a2", b"b0", b"b1", b"c0"]

    run(main())


def test_rebalance_when_members_join_and_leave(cluster: PushCluster) -> None:
    topic, group = "RebTopic", "RebCG"

    async def main() -> None:
        await create_topic(cluster, topic, queues=8)
        recs = [Recorder(), Recorder()]
        members = []
        for i, rec in enumerate(recs):
            c = AsyncPushConsumer(group, cluster.ns, instance_name=f"reb{i}", consume_from_where=ConsumeFromWhere.FIRST,
                                  **FAST)  # fmt: skip
            c.subscribe(topic)
            c.register_message_listener(rec)
            members.append(c)
        a, b = members
        every = set(range(8))
        await a.start()
        try:
            await eventually_async(lambda: main_queues(a, topic) == every, 30, what="A alone has every queue")
            sent = await produce(cluster, topic, 40, "x")
            await b.start()
            try:
                # B's heartbeat makes the broker notify A: both re-balance, each gets half, none shared
                await eventually_async(
                    lambda: (
                        main_queues(a, topic) | main_queues(b, topic) == every
                        and not main_queues(a, topic) & main_queues(b, topic)
                        and len(main_queues(a, topic)) == len(main_queues(b, topic)) == 4
                    ),
                    30,
                    what="an even split",
                )
                sent += await produce(cluster, topic, 40, "y")
                await eventually_async(
                    lambda: set(recs[0].bodies()) | set(recs[1].bodies()) >= set(sent), 30, what="all"
                )
                assert recs[1].msgs, "B consumed nothing"
            finally:
                await b.shutdown()  # UNREGISTER_CLIENT: the broker notifies A
            await eventually_async(lambda: main_queues(a, topic) == every, 30, what="A has every queue again")
            sent += await produce(cluster, topic, 40, "z")
            await eventually_async(
                lambda: set(recs[0].bodies()) >= {s for s in sent if s[0] == "z"}, 30, what="A gets it all"
            )
        finally:
            await a.shutdown()
        assert set(recs[0].bodies()) | set(recs[1].bodies()) == set(sent)

    run(main(), 120)


# -- orderly --------------------------------------------------------------------------------


def _take_all(group: str, cid: str, mqs: Any, cids: Any) -> list[MessageQueue]:
    return list(mqs)  # a greedy strategy: two members both want every queue


def test_orderly_keeps_queue_order_and_holds_locks(cluster: PushCluster) -> None:
    topic, group = "OrderTopic", "OrderCG"
    keys = [f"order-{i}" for i in range(8)]
    per_key = 25

    async def main() -> None:
        await create_topic(cluster, topic, queues=4)
        seen: dict[str, list[tuple[str, int, int]]] = {"A": [], "B": []}
        failed_once: set[str] = set()
        in_handler: dict[MessageQueue, int] = collections.Counter()
        overlap: list[MessageQueue] = []

        def handler_for(name: str) -> Callable[[list[MessageExt], ConsumeContext], ConsumeStatus]:
            def handler(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
                in_handler[ctx.mq] += 1
                if in_handler[ctx.mq] > 1:
                    overlap.append(ctx.mq)
                try:
                    time.sleep(0.001)
                    body = msgs[0].body.decode()
                    key, seq = body.rsplit(":", 1)
                    if int(seq) % 10 == 3 and body not in failed_once:  # suspend the queue, same message again
                        failed_once.add(body)
                        ctx.suspend_current_queue_time_s = 0.2
                        return ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                    seen[name].append((key, int(seq), ctx.mq.queue_id))
                    return ConsumeStatus.SUCCESS
                finally:
                    in_handler[ctx.mq] -= 1

            return handler

        def member(name: str) -> AsyncPushConsumer:
            c = AsyncPushConsumer(group, cluster.ns, instance_name=f"ord{name}", allocate_strategy=_take_all,
                                  consume_from_where=ConsumeFromWhere.FIRST, consume_thread_count=4,
                                  **FAST)  # fmt: skip
            c.subscribe(topic)
            c.register_message_listener_orderly(handler_for(name))
            return c

        a, b = member("A"), member("B")
        await a.start()
        try:
            await eventually_async(lambda: main_queues(a, topic) == {0, 1, 2, 3}, 30, what="A locks every queue")
            async with AsyncProducer("PushPG", cluster.ns) as p:
                for seq in range(per_key):
                    for key in keys:
                        await p.send(Message(topic, f"{key}:{seq}".encode()), selector=select_by_hash(key))
            await b.start()  # B wants every queue too, but A holds their locks
            # the broker refuses B's locks: somebody else holds each queue
            api = MQClientAPIImpl()
            try:
                mqs = [MessageQueue(topic, "broker-t", q) for q in range(4)]
                assert await api.lock_batch_mq(cluster.br, group, "intruder@1", mqs) == set()
            finally:
                await api.close()
            await eventually_async(lambda: len(seen["A"]) >= len(keys) * per_key, 40, what="A consumes everything")
            await asyncio.sleep(1.0)
            assert main_queues(b, topic) == set() and seen["B"] == []
            # A leaves: it unlocks its queues, B (notified) locks and consumes them
            await a.shutdown()
            await eventually_async(lambda: main_queues(b, topic) == {0, 1, 2, 3}, 30, what="B takes the queues over")
            async with AsyncProducer("PushPG", cluster.ns) as p:
                for key in keys:
                    await p.send(Message(topic, f"{key}:{per_key}".encode()), selector=select_by_hash(key))
            await eventually_async(lambda: len(seen["B"]) >= len(keys), 30, what="B consumes the new messages")
        finally:
            await a.shutdown()
            await b.shutdown()
        assert not overlap, f"two handler calls at once on {overlap[:3]}"
        for key in keys:
            a_seqs = [s for k, s, _ in seen["A"] if k == key]
            assert a_seqs == list(range(per_key)), (key, a_seqs)  # in order, each once, retries in place
            assert len({q for k, _, q in seen["A"] if k == key}) == 1
            assert [s for k, s, _ in seen["B"] if k == key] == [per_key]

    run(main(), 120)


# -- broker restart -------------------------------------------------------------------------


def test_broker_restart_during_consumption_loses_nothing(cluster: PushCluster) -> None:
    topic, group = "RestartTopic", "RestartCG"
    run(create_topic(cluster, topic, queues=4))
    rec = Recorder()
    c = PushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, **FAST)
    c.subscribe(topic)
    c.register_message_listener(rec)
    c.start()
    acked: list[str] = []
    stop_sending = threading.Event()

    def send_loop() -> None:
        p = Producer("RestartPG", cluster.ns, send_msg_timeout_s=2.0)
        p.start()
        try:
            for i in range(600):
                if stop_sending.is_set():
                    break
                try:
                    p.send(Message(topic, f"r{i}".encode()))
                    acked.append(f"r{i}")
                except MQClientError:
                    time.sleep(0.05)
                time.sleep(0.005)
        finally:
            p.shutdown()

    sender = threading.Thread(target=send_loop, daemon=True)
    sender.start()
    try:
        deadline = time.monotonic() + 20
        while len(acked) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop(cluster.broker)  # SIGTERM, clean stop
        time.sleep(1.0)
        cluster.broker = cluster.start_broker()  # same store, same port
        deadline = time.monotonic() + 30
        n = len(acked)
        while len(acked) < n + 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop_sending.set()
        sender.join(30)
        assert not sender.is_alive()
        want = set(acked)
        assert len(want) >= 200, len(want)
        deadline = time.monotonic() + 40
        while not want <= set(rec.bodies()) and time.monotonic() < deadline:
            time.sleep(0.2)
        missing = want - set(rec.bodies())
        assert not missing, f"{len(missing)} acknowledged messages never consumed: {sorted(missing)[:10]}"
    finally:
        stop_sending.set()
        c.shutdown()


# -- interop with the Apache C++ client -----------------------------------------------------

cpp = pytest.mark.skipif(not cpp_client.platform_supported(), reason="the rocketmq wheel is x86_64 Linux only")


def _need_cpp() -> None:
    reason = cpp_client.missing_reason()
    if reason:
        pytest.fail(f"the C++ client cannot run: {reason}")


@cpp
def test_interop_pumice_producer_to_cpp_push_consumer(cluster: PushCluster, tmp_path: Path) -> None:
    _need_cpp()
    topic = "IopToCpp"
    run(create_topic(cluster, topic, queues=4))
    sent = run(produce(cluster, topic, 20, "p", tags="TagP"))
    got = cpp_client.consume("push", cluster.ns, topic, "IopCppCG", 20, tmp_path / "c", deadline_s=60, wait_s=40)
    msgs = got.of("message")
    assert {m["body"] for m in msgs} == set(sent), got.describe()
    assert all(m["tags"] == "TagP" and m["topic"] == topic for m in msgs), got.describe()


@cpp
def test_interop_cpp_producer_to_pumice_push_consumer(cluster: PushCluster, tmp_path: Path) -> None:
    _need_cpp()
    topic, group = "IopFromCpp", "IopPumiceCG"
    sent = cpp_client.produce(cluster.ns, topic, "CppPG", 20, tmp_path / "p", tag="TagC", keys_prefix="ck")
    assert len(sent.of("sent")) == 20 and all(e["ok"] for e in sent.of("sent")), sent.describe()
    rec = Recorder()

    async def main() -> None:
        c = AsyncPushConsumer(group, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, **FAST)
        c.subscribe(topic, "TagC")
        c.register_message_listener(rec)
        async with c:
            await eventually_async(lambda: len(rec.msgs) >= 20, 30, what="the C++ client's messages")
            await asyncio.sleep(0.5)

    run(main())
    assert sorted(rec.bodies()) == sorted(f"body-{i}" for i in range(20))
    assert {m.keys[0] for m in rec.msgs} == {f"ck{i}" for i in range(20)}
    assert all(m.tags == "TagC" and m.topic == topic for m in rec.msgs)


@cpp
def test_interop_cpp_and_pumice_share_one_consumer_group(cluster: PushCluster, tmp_path: Path) -> None:
    _need_cpp()
    topic, group = "IopMixed", "IopMixedCG"
    run(create_topic(cluster, topic, queues=8))
    rec = Recorder()

    async def main() -> cpp_client.CppRun:
        c = AsyncPushConsumer(group, cluster.ns, instance_name="mixed", consume_from_where=ConsumeFromWhere.FIRST,
                              **FAST)  # fmt: skip
        c.subscribe(topic)
        c.register_message_listener(rec)
        async with c:
            await eventually_async(lambda: len(main_queues(c, topic)) == 8, 30, what="Pumice alone has every queue")
            proc = cpp_client.start_consumer("push", cluster.ns, topic, group, 0, tmp_path / "c", wait_s=15,
                                             deadline_s=45)  # fmt: skip
            with proc:
                # the C++ member joins: the broker notifies Pumice, which gives half of the queues away
                await eventually_async(lambda: len(main_queues(c, topic)) == 4, 30, what="Pumice keeps half")
                await asyncio.sleep(3.0)  # the C++ client re-balances on the same notification
                sent = await produce(cluster, topic, 80, "mix")
                await eventually_async(lambda: len(rec.msgs) >= 20, 30, what="Pumice's share")
                got = await asyncio.to_thread(proc.wait)
            await asyncio.sleep(0.5)
        return got, sent  # type: ignore[return-value]

    got, sent = run(main(), 120)
    cpp_bodies = {m["body"] for m in got.of("message")}
    pumice_bodies = set(rec.bodies())
    assert cpp_bodies, got.describe()
    assert pumice_bodies
    assert cpp_bodies | pumice_bodies == set(sent), got.describe()
