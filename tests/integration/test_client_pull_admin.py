"""pumice.client pull consumers and admin against real `pumice namesrv` and `pumice broker` processes."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from pumice.client import (
    AsyncLitePullConsumer,
    AsyncMQAdmin,
    AsyncProducer,
    AsyncPullConsumer,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageExt,
    MessageQueue,
    MQAdmin,
    MQBrokerError,
    MQClientError,
    PullStatus,
)
from pumice.client.admin_types import SubscriptionGroupConfig
from pumice.client.mq_client_api import MQClientAPIImpl
from tests.helpers.clients import create_topic
from tests.helpers.clusters import Cluster, run
from tests.helpers.waiting import eventually_async


async def send_n(cluster: Cluster, mq: MessageQueue, n: int, tags: str | None = None, prefix: str = "m") -> list:
    async with AsyncProducer("PG", cluster.ns) as p:
        return [await p.send(Message(mq.topic, f"{prefix}{i}".encode(), tags=tags, keys=f"{prefix}key{i}"), mq)
                for i in range(n)]  # fmt: skip


async def committed_on_broker(cluster: Cluster, group: str, mq: MessageQueue) -> int:
    api = MQClientAPIImpl()
    try:
        return await api.query_consumer_offset(cluster.br, group, mq.topic, mq.queue_id)
    finally:
        await api.close()


def test_pull_by_queue_statuses_and_offsets(cluster: Cluster) -> None:
    async def main() -> None:
        await create_topic(cluster, "PullTopic", queues=2)
        mq = MessageQueue("PullTopic", "broker-t", 0)
        results = await send_n(cluster, mq, 5)
        async with AsyncPullConsumer("PullCG", cluster.ns, pull_suspend_s=1.0) as c:
            assert await c.fetch_subscribe_message_queues("PullTopic") == [mq, MessageQueue("PullTopic", "broker-t", 1)]
            first = await eventually_async(lambda: _found(c, mq, 0, 3), what="three messages")
            assert [m.body for m in first.msgs] == [b"m0", b"m1", b"m2"] and first.next_begin_offset == 3
            assert [m.queue_offset for m in first.msgs] == [0, 1, 2]
            assert first.msgs[0].broker_name == "broker-t" and first.msgs[0].properties["MAX_OFFSET"] == "5"
            assert (first.min_offset, first.max_offset) == (0, 5)
            assert (await c.pull(mq, "*", 5, 32)).status is PullStatus.NO_NEW_MSG
            illegal = await c.pull(mq, "*", 99, 32)
            # past the end of a queue whose min offset is 0: Java's store corrects to the min offset
            assert illegal.status is PullStatus.OFFSET_ILLEGAL and illegal.next_begin_offset == 0
            # a blocking pull is held by the broker for pull_suspend_s, then answered
            t0 = time.monotonic()
            held = await c.pull(mq, "*", 5, 32, block=True)
            assert held.status is PullStatus.NO_NEW_MSG and 0.8 <= time.monotonic() - t0 < 5
            # ... or answered by the next message
            waiting = asyncio.ensure_future(c.pull(mq, "*", 5, 32, block=True, timeout_s=10))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await send_n(cluster, mq, 1, prefix="late")
            late = await asyncio.wait_for(waiting, 10)
            assert late.status is PullStatus.FOUND and [m.body for m in late.msgs] == [b"late0"]
            # offsets
            assert (await c.min_offset(mq), await c.max_offset(mq)) == (0, 6)
            assert await c.search_offset(mq, 0) == 0
            assert await c.search_offset(mq, int(time.time() * 1000) + 60_000) >= results[-1].queue_offset
            assert await c.earliest_msg_store_time(mq) == first.msgs[0].store_timestamp
            await c.update_consume_offset(mq, 4)
            assert await c.fetch_consume_offset(mq) == 4 == await committed_on_broker(cluster, "PullCG", mq)
            # a pull may commit an offset too
            await c.pull(mq, "*", 4, 1, commit_offset=5)
            assert await c.fetch_consume_offset(mq) == 5

    run(main())


async def _found(c: AsyncPullConsumer, mq: MessageQueue, offset: int, n: int):
    res = await c.pull(mq, "*", offset, n)
    return res if len(res.msgs) >= n else None


def poll_until(consumer: LitePullConsumer, n: int, seconds: float = 15) -> list[MessageExt]:
    out: list[MessageExt] = []
    deadline = time.monotonic() + seconds
    while len(out) < n and time.monotonic() < deadline:
        out += consumer.poll(0.5)
    return out


def test_lite_pull_assign_seek_and_commit(cluster: Cluster) -> None:
    mq = MessageQueue("LiteTopic", "broker-t", 0)
    run(create_topic(cluster, "LiteTopic", queues=2))
    run(send_n(cluster, mq, 5))
    c = LitePullConsumer("LiteCG", cluster.ns, consume_from_where=ConsumeFromWhere.FIRST, auto_commit=False,
                         pull_batch_size=2, pull_suspend_s=1.0)  # fmt: skip
    c.assign([mq])
    c.start()
    try:
        got = poll_until(c, 5)
        assert [m.body for m in got] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        assert max(len(b) for b in [got[:2], got[2:4]]) <= 2 and c.consumed_offset(mq) == 5
        assert c.assignment() == {mq} and c.poll(0.3) == []
        c.commit_sync()
        assert run(committed_on_broker(cluster, "LiteCG", mq)) == 5 == c.committed(mq)
        c.seek(mq, 2)
        assert [m.queue_offset for m in poll_until(c, 3)] == [2, 3, 4]
        c.seek_to_begin(mq)
        assert poll_until(c, 1)[0].queue_offset == 0
        c.seek_to_end(mq)
        assert c.poll(0.5) == [] and c.consumed_offset(mq) == 5
        c.commit({mq: 1})
        assert run(committed_on_broker(cluster, "LiteCG", mq)) == 1
        with pytest.raises(MQClientError, match="outside"):
            c.seek(mq, 99)
        with pytest.raises(MQClientError, match="not assigned"):
            c.seek(MessageQueue("LiteTopic", "broker-t", 1), 0)
    finally:
        c.shutdown()
    # a new consumer of the group resumes at the committed offset
    again = LitePullConsumer("LiteCG", cluster.ns, auto_commit=False, pull_suspend_s=1.0)
    again.assign([mq])
    again.start()
    try:
        assert poll_until(again, 1)[0].queue_offset == 1
    finally:
        again.shutdown()


def test_lite_pull_subscribe_filters_tags_and_auto_commits(cluster: Cluster) -> None:
    async def main() -> None:
        await create_topic(cluster, "SubTopic", queues=2)
        q0, q1 = MessageQueue("SubTopic", "broker-t", 0), MessageQueue("SubTopic", "broker-t", 1)
        c = AsyncLitePullConsumer("SubCG", cluster.ns, consume_from_where=ConsumeFromWhere.FIRST,
                                  auto_commit_interval_s=0.5, pull_suspend_s=1.0)  # fmt: skip
        c.subscribe("SubTopic", "TagA")
        await c.start()
        admin = AsyncMQAdmin(cluster.ns)
        await admin.start()
        try:
            assert c.assignment() == {q0, q1}
            await send_n(cluster, q0, 3, tags="TagA", prefix="a")
            await send_n(cluster, q1, 3, tags="TagB", prefix="b")
            await send_n(cluster, q1, 2, tags="TagA", prefix="c")
            got: list[MessageExt] = []
            deadline = time.monotonic() + 15
            while len(got) < 5 and time.monotonic() < deadline:
                got += await c.poll(0.5)
            assert sorted(m.body for m in got) == [b"a0", b"a1", b"a2", b"c0", b"c1"]
            conn = await admin.consumer_connection("SubCG")
            assert [x.client_id for x in conn.connections] == [c.instance.client_id]
            assert conn.consume_type == "CONSUME_ACTIVELY" and conn.subscriptions["SubTopic"]["subString"] == "TagA"
            # auto commit: the broker sees the consumed offsets within a few intervals
            await eventually_async(lambda: _committed(cluster, q1, 5), what="auto-committed offsets")
            progress = await admin.consumer_progress("SubCG", "SubTopic")
            assert [(q.mq, q.broker_offset, q.consumer_offset, q.lag) for q in progress.queues] == [
                (q0, 3, 3, 0), (q1, 5, 5, 0)]  # fmt: skip
        finally:
            await c.shutdown()
            await admin.shutdown()

    run(main())


async def _committed(cluster: Cluster, mq: MessageQueue, offset: int) -> bool:
    return await committed_on_broker(cluster, "SubCG", mq) == offset


def test_admin_topics_clusters_queries_and_offsets(cluster: Cluster) -> None:
    async def main() -> None:
        async with AsyncMQAdmin(cluster.ns) as admin:
            assert await admin.create_topic("AdmTopic", cluster="TestCluster", read_queue_nums=3,
                                            write_queue_nums=3) == [cluster.br]  # fmt: skip
            route = await eventually_async(lambda: admin.topic_route("AdmTopic"), what="route")
            assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [
                ("broker-t", 3, 3)]  # fmt: skip
            assert "AdmTopic" in await admin.topic_list()
            mq = MessageQueue("AdmTopic", "broker-t", 1)
            sent = await send_n(cluster, mq, 4, prefix="adm")
            status = await eventually_async(lambda: _status_max(admin, mq, 4), what="topic status")
            assert [(s.mq.queue_id, s.min_offset, s.max_offset) for s in status] == [(0, 0, 0), (1, 0, 4), (2, 0, 0)]
            assert status[1].last_update_timestamp > 0 and status[0].last_update_timestamp == 0

            rows = await admin.cluster_list()
            assert [(r.cluster, r.broker_name, r.broker_id, r.addr) for r in rows] == [
                ("TestCluster", "broker-t", 0, cluster.br)]  # fmt: skip
            assert rows[0].runtime["brokerVersionDesc"] == "V4_9_8" and rows[0].error is None
            assert (await admin.broker_status(cluster.br))["runningFlags"] == "OK"

            # messages by key, by offset msgId, by UNIQ_KEY and by queue offset
            found = await eventually_async(lambda: admin.query_msg_by_key("AdmTopic", "admkey2"), what="index")
            assert [m.body for m in found] == [b"adm2"] and found[0].broker_name == "broker-t"
            by_id = await admin.query_msg_by_id(sent[1].offset_msg_id)
            assert by_id.body == b"adm1" and by_id.offset_msg_id == sent[1].offset_msg_id
            by_uniq = await admin.query_msg_by_id(sent[3].msg_id, topic="AdmTopic")
            assert by_uniq.body == b"adm3" and by_uniq.msg_id == sent[3].msg_id
            with pytest.raises(MQClientError, match="no message"):
                await admin.query_msg_by_id(sent[3].msg_id)  # a UNIQ_KEY needs the topic
            at = await admin.query_msg_by_offset("AdmTopic", "broker-t", 1, 2)
            assert at.body == b"adm2" and at.queue_offset == 2
            with pytest.raises(MQClientError, match="no message at offset 9"):
                await admin.query_msg_by_offset("AdmTopic", "broker-t", 1, 9)

            # consumer progress from committed offsets (no consumer online), then reset by time
            api = admin.api
            await api.update_consumer_offset(cluster.br, "AdmCG", "AdmTopic", 1, 1)
            progress = await admin.consumer_progress("AdmCG")
            row = next(q for q in progress.queues if q.mq == mq)
            assert (row.broker_offset, row.consumer_offset, row.lag) == (4, 1, 3)
            assert progress.total_lag == 3 and progress.to_dict()["totalLag"] == 3
            third = await admin.query_msg_by_offset("AdmTopic", "broker-t", 1, 3)
            # queues 0 and 2 have no offset of the group: the broker refuses (as 4.9's), and
            # mqadmin's own way (the fallback when no consumer is online) writes them
            with pytest.raises(MQBrokerError) as refused:
                await admin.reset_offset_by_time("AdmCG", "AdmTopic", third.store_timestamp)
            assert refused.value.code == 1 and "<AdmCG> not exist" in refused.value.remark
            stats = await admin.reset_offset_by_time_old("AdmCG", "AdmTopic", third.store_timestamp)
            reset = {MessageQueue("AdmTopic", r.broker_name, r.queue_id): r.rollback_offset for r in stats}
            assert set(reset) == {MessageQueue("AdmTopic", "broker-t", q) for q in range(3)}
            # messages stored in the same millisecond tie: any of them may be the answer
            assert 1 <= reset[mq] <= 3
            at_reset = await admin.query_msg_by_offset("AdmTopic", "broker-t", 1, reset[mq])
            assert at_reset.store_timestamp == third.store_timestamp
            assert await api.query_consumer_offset(cluster.br, "AdmCG", "AdmTopic", 1) == reset[mq]
            stats = await admin.reset_offset_by_time_old("AdmCG", "AdmTopic", 0)
            reset = {MessageQueue("AdmTopic", r.broker_name, r.queue_id): r.rollback_offset for r in stats}
            assert reset[mq] == 0 and await api.query_consumer_offset(cluster.br, "AdmCG", "AdmTopic", 1) == 0

            with pytest.raises(MQBrokerError) as e:
                await admin.consumer_connection("AdmCG")
            assert e.value.code == 206
            await admin.update_subscription_group(SubscriptionGroupConfig("AdmGroup", retry_max_times=3),
                                                  cluster="TestCluster")  # fmt: skip
            groups = orjson.loads((await api.invoke_ok(cluster.br, 201)).body)["subscriptionGroupTable"]
            assert groups["AdmGroup"]["retryMaxTimes"] == 3

            assert await admin.delete_topic("AdmTopic", cluster="TestCluster") == [cluster.br]
            with pytest.raises(MQBrokerError) as e:
                await admin.topic_route("AdmTopic")
            assert e.value.code == 17
            assert "AdmTopic" not in await admin.topic_list()
            with pytest.raises(MQClientError, match="unknown"):
                await admin.create_topic("X", cluster="NoCluster")

    run(main())


async def _status_max(admin: AsyncMQAdmin, mq: MessageQueue, n: int):
    status = await admin.topic_status(mq.topic)
    return status if next(s for s in status if s.mq == mq).max_offset == n else None


def test_sync_admin_wraps_every_call(cluster: Cluster) -> None:
    with MQAdmin(cluster.ns) as admin:
        admin.create_topic("SyncAdm", broker_addr=cluster.br, read_queue_nums=1, write_queue_nums=1)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "SyncAdm" not in admin.topic_list():
            time.sleep(0.1)
        assert "SyncAdm" in admin.topic_list()
        assert admin.topic_route("SyncAdm").queue_datas[0].write_queue_nums == 1
        with pytest.raises(MQBrokerError) as e:
            admin.topic_route("Missing")
        assert e.value.code == 17


def test_lite_pull_members_of_a_group_share_the_queues(cluster: Cluster) -> None:
    async def main() -> None:
        await create_topic(cluster, "ShareTopic", queues=4)
        first = AsyncLitePullConsumer("ShareCG", cluster.ns, instance_name="one", pull_suspend_s=1.0)
        second = AsyncLitePullConsumer("ShareCG", cluster.ns, instance_name="two", pull_suspend_s=1.0)
        for c in (first, second):
            c.subscribe("ShareTopic")
        await first.start()
        try:
            assert len(first.assignment()) == 4
            await second.start()
            # the broker tells the first member that the group changed; it gives two queues away
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and len(first.assignment()) != 2:
                await asyncio.sleep(0.1)
            assert len(first.assignment()) == 2 and len(second.assignment()) == 2
            assert first.assignment() | second.assignment() == {
                MessageQueue("ShareTopic", "broker-t", q) for q in range(4)}  # fmt: skip
        finally:
            await second.shutdown()
            await first.shutdown()

    run(main())
