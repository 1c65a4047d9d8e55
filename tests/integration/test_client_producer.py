"""pumice.client producers against real `pumice namesrv` and `pumice broker` processes."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pumice.client import (
    AsyncMQAdmin,
    AsyncProducer,
    AsyncPullConsumer,
    Message,
    MessageExt,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    MQClientInstance,
    Producer,
    PullStatus,
    RemotingConnectError,
    SendResult,
    SendStatus,
)
from pumice.client.message import COMPRESSED_FLAG, decode_messages
from pumice.client.message_id import parse_uniq_key
from pumice.common.message_decoder import decode_message_id
from tests.helpers.clients import create_topic
from tests.helpers.clusters import Cluster, run, start, stop
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually_async


async def pull_all(consumer: AsyncPullConsumer, topic: str, expression: str = "*") -> list[MessageExt]:
    """Every message of every queue of ``topic`` (bounded: 100 pulls per queue)."""
    out: list[MessageExt] = []
    for mq in await consumer.fetch_subscribe_message_queues(topic):
        offset = 0
        for _ in range(100):
            res = await consumer.pull(mq, expression, offset, 32)
            out += res.msgs
            if res.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL):
                break
            offset = res.next_begin_offset
    return out


def test_sync_async_oneway_and_batch_sends_are_stored(cluster: Cluster) -> None:
    # async API: a topic the name server does not know is created through TBW102
    async def async_part() -> list[SendResult]:
        async with AsyncProducer("PG", cluster.ns) as p:
            r1 = await p.send(Message("AutoTopic", b"async-1", tags="T1"))
            task = p.send_async(Message("AutoTopic", b"async-2"))
            r2 = await asyncio.wait_for(task, 10)
            await p.send_oneway(Message("AutoTopic", b"oneway-async"))
            return [r1, r2]

    r1, r2 = run(async_part())
    for r in (r1, r2):
        assert r.send_status is SendStatus.SEND_OK and r.message_queue.broker_name == "broker-t"
        assert len(r.msg_id) == 32 and r.msg_id == r.transaction_id
        (host, port), _ = decode_message_id(r.offset_msg_id)
        assert (host, port) == (b"\x7f\x00\x00\x01", cluster.broker_port)
    assert parse_uniq_key(r1.msg_id).counter + 1 == parse_uniq_key(r2.msg_id).counter

    # sync API
    with Producer("PG2", cluster.ns) as p:
        r3 = p.send(Message("AutoTopic", b"sync-1"))
        done = threading.Event()
        got: list[tuple[Any, Any]] = []
        fut = p.send_async(Message("AutoTopic", b"sync-async"), lambda res, err: (got.append((res, err)), done.set()))
        assert done.wait(10) and fut.result(1) is got[0][0] and got[0][1] is None
        p.send_oneway(Message("AutoTopic", b"sync-oneway"))
        batch = p.send_batch([Message("AutoTopic", b"batch-%d" % i, keys=f"bk{i}") for i in range(3)])
    assert r3.send_status is SendStatus.SEND_OK
    ids = batch.msg_id.split(",")
    assert len(ids) == 3 and len(set(ids)) == 3 and len(batch.offset_msg_id.split(",")) == 3

    async def check() -> None:
        async with AsyncPullConsumer("CG", cluster.ns) as c:
            msgs = await eventually_async(lambda: _all_if(c, "AutoTopic", 9), what="9 stored messages")
        bodies = sorted(m.body for m in msgs)
        assert bodies == sorted([b"async-1", b"async-2", b"oneway-async", b"sync-1", b"sync-async", b"sync-oneway",
                                 b"batch-0", b"batch-1", b"batch-2"])  # fmt: skip
        by_body = {m.body: m for m in msgs}
        assert by_body[b"async-1"].msg_id == r1.msg_id and by_body[b"async-1"].offset_msg_id == r1.offset_msg_id
        assert by_body[b"async-1"].tags == "T1"
        # a batch lands in one queue, in order, at consecutive offsets, each with its own UNIQ_KEY
        b = [by_body[b"batch-%d" % i] for i in range(3)]
        assert {m.queue_id for m in b} == {batch.message_queue.queue_id}
        assert [m.queue_offset for m in b] == [batch.queue_offset + i for i in range(3)]
        assert [m.msg_id for m in b] == ids and [m.keys for m in b] == [["bk0"], ["bk1"], ["bk2"]]

    run(check())


async def _all_if(c: AsyncPullConsumer, topic: str, n: int) -> list[MessageExt] | None:
    msgs = await pull_all(c, topic)
    return msgs if len(msgs) >= n else None


def test_big_body_is_stored_compressed_and_read_back_inflated(cluster: Cluster) -> None:
    body = b"".join(b"line %06d of a compressible body\n" % i for i in range(400))  # ~14 KiB
    assert len(body) > 4096

    async def main() -> None:
        await create_topic(cluster, "ZipTopic", queues=1)
        mq = MessageQueue("ZipTopic", "broker-t", 0)
        async with AsyncProducer("PG", cluster.ns) as p:
            await p.send(Message("ZipTopic", body), mq)
            await p.send(Message("ZipTopic", b"s" * 4096), mq)  # at the threshold: not compressed
        async with AsyncPullConsumer("CG", cluster.ns) as c:
            res = await eventually_async(lambda: _found(c, mq, 2), what="two messages")
        big, small = res.msgs
        assert big.body == body and big.sys_flag & COMPRESSED_FLAG
        assert small.body == b"s" * 4096 and not small.sys_flag & COMPRESSED_FLAG
        stored = decode_messages(res.raw_body, decompress=False)
        assert len(stored[0].body) < len(body) // 4 and stored[0].body != body

    run(main())


async def _found(c: AsyncPullConsumer, mq: MessageQueue, n: int) -> Any:
    res = await c.pull(mq, "*", 0, 32)
    return res if len(res.msgs) >= n else None


def test_keys_tags_properties_and_delay_round_trip(cluster: Cluster) -> None:
    async def main() -> None:
        await create_topic(cluster, "PropTopic", queues=1)
        mq = MessageQueue("PropTopic", "broker-t", 0)
        async with AsyncProducer("PG", cluster.ns) as p:
            msg = Message("PropTopic", b"props", tags="TagA", keys=["order-1", "user-7"],
                          properties={"color": "red", "n": "3"}, flag=42)  # fmt: skip
            r = await p.send(msg, mq)
            await p.send(Message("PropTopic", b"other", tags="TagB"), mq)
            t0 = time.time() * 1000
            delayed = await p.send(Message("PropTopic", b"later", tags="TagA", delay_time_level=1), mq)
        async with AsyncPullConsumer("CG", cluster.ns) as c:
            res = await eventually_async(lambda: _found(c, mq, 2), what="the first two messages")
            m = res.msgs[0]
            assert (m.body, m.tags, m.keys, m.flag) == (b"props", "TagA", ["order-1", "user-7"], 42)
            assert m.user_properties() == {"color": "red", "n": "3"} and m.msg_id == r.msg_id
            # WAIT is not stored for a single message (RocketMQ 4.9.4 on)
            assert m.properties["CLUSTER"] == "TestCluster" and "WAIT" not in m.properties
            # the tag filter: TagB is left out
            only_a = await c.pull(mq, "TagA", 0, 32)
            assert [x.body for x in only_a.msgs] == [b"props"]
            # delay level 1 (1 s): delivered to the topic later, at queue offset 2
            late = await eventually_async(lambda: _found(c, mq, 3), what="the delayed message")
            d = late.msgs[2]
            assert d.body == b"later" and d.msg_id == delayed.msg_id and d.store_timestamp - t0 >= 900
            assert d.properties.get("DELAY") == "1"  # kept, with REAL_TOPIC and REAL_QID, as 4.9 stores it

    run(main())


def test_send_retries_on_another_broker_when_one_is_down(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "broker-u.conf"
    port = free_port()
    conf.write_text(
        f"brokerClusterName=TestCluster\nbrokerName=broker-u\nlistenPort={port}\nlistenHost=127.0.0.1\n"
        f"brokerIP1=127.0.0.1\nnamesrvAddr={cluster.ns}\nstorePathRootDir={tmp_path / 'store-u'}\n"
        "mapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\npreallocateCommitLog=false\n"
        "prefaultCommitLog=false\nfastListenPortEnable=false\n"
    )
    second = start(["broker", "-c", str(conf)], "boot success")
    caplog.set_level(logging.INFO, logger="pumice.client.producer")
    try:

        async def main() -> None:
            async with AsyncMQAdmin(cluster.ns) as admin:
                await admin.create_topic("TwoBrokers", cluster="TestCluster", read_queue_nums=4, write_queue_nums=4)
                await eventually_async(
                    lambda: _brokers_in_route(admin, "TwoBrokers", 2), what="both brokers in the route"
                )
            plain = AsyncProducer("PG", cluster.ns, send_latency_fault_enable=False)
            tolerant = AsyncProducer("PG2", cluster.ns)
            async with plain, tolerant:
                for p in (plain, tolerant):
                    mqs = await p.fetch_publish_message_queues("TwoBrokers")
                    assert {m.broker_name for m in mqs} == {"broker-t", "broker-u"} and len(mqs) == 8
                stop(second)  # the producers still route to broker-u
                results = [await plain.send(Message("TwoBrokers", b"p%d" % i)) for i in range(8)]
                assert {r.message_queue.broker_name for r in results} == {"broker-t"}
                retried = [r for r in caplog.records if "broker-u" in r.getMessage() and "failed" in r.getMessage()]
                assert len(retried) >= 2  # round robin met broker-u, and the retry went elsewhere
                t0 = time.monotonic()
                results = [await tolerant.send(Message("TwoBrokers", b"t%d" % i)) for i in range(8)]
                assert {r.message_queue.broker_name for r in results} == {"broker-t"}
                assert tolerant.fault is not None and not tolerant.fault.is_available("broker-u")
                assert tolerant.fault.is_available("broker-t")
                assert time.monotonic() - t0 < 5
                # a send to the dead broker's queue itself is tried once and fails
                with pytest.raises(MQClientError):
                    await plain.send(Message("TwoBrokers", b"x"), MessageQueue("TwoBrokers", "broker-u", 0))

        run(main())
    finally:
        if second.poll() is None:
            stop(second)


async def _brokers_in_route(admin: AsyncMQAdmin, topic: str, n: int) -> bool:
    route = await admin.topic_route(topic)
    return len(route.broker_datas) == n and len(route.queue_datas) == n


def test_error_paths_raise_typed_errors(cluster: Cluster) -> None:
    async def main() -> None:
        await create_topic(cluster, "ErrTopic", queues=2)
        async with AsyncProducer("PG", cluster.ns, max_message_size=1024) as p:
            with pytest.raises(MQClientError, match="max_message_size"):
                await p.send(Message("ErrTopic", b"x" * 1025))
            with pytest.raises(MQClientError, match="max_message_size"):
                await p.send_batch([Message("ErrTopic", b"x" * 600), Message("ErrTopic", b"y" * 600)])
            # a queue id the topic does not have: the broker's SYSTEM_ERROR, tried once
            with pytest.raises(MQBrokerError) as e:
                await p.send(Message("ErrTopic", b"x"), MessageQueue("ErrTopic", "broker-t", 9))
            assert e.value.code == 1 and "queueId[9] is illegal" in e.value.remark
            assert str(e.value).startswith("SYSTEM_ERROR (1): ")
        # a read-only topic (perm 4): refused by the client, with the reason
        async with AsyncMQAdmin(cluster.ns) as admin:
            await admin.create_topic("ReadOnlyTopic", cluster="TestCluster", read_queue_nums=1, write_queue_nums=1,
                                     perm=4)  # fmt: skip
            await eventually_async(lambda: admin.topic_route("ReadOnlyTopic"), what="route of ReadOnlyTopic")
        async with AsyncProducer("PG", cluster.ns) as p:
            with pytest.raises(MQClientError, match="ReadOnlyTopic has no writable queue: its queues are read-only"):
                await p.send(Message("ReadOnlyTopic", b"x"))
        async with AsyncPullConsumer("CG", cluster.ns) as c:
            with pytest.raises(MQBrokerError) as e:
                await c.fetch_subscribe_message_queues("NoSuchTopic")
            assert e.value.code == 17 and str(e.value).startswith("TOPIC_NOT_EXIST (17): ")
            # the route says broker-t; the broker itself has no such topic for a pull
            c.instance.broker_addr_table.setdefault("broker-t", {0: cluster.br})
            with pytest.raises(MQBrokerError) as e:
                await c.pull(MessageQueue("NoSuchTopic", "broker-t", 0), "*", 0, 1)
            assert e.value.code == 17
        dead = MQClientInstance(f"127.0.0.1:{free_port()}")
        await dead.start()
        try:
            with pytest.raises(RemotingConnectError):
                await dead.get_topic_route("ErrTopic")
        finally:
            await dead.shutdown()

    run(main())
