"""Master/slave replication with real `pumice namesrv` and two `pumice broker` processes.

The slave (brokerRole=SLAVE, brokerId=1, the master's brokerName) learns the master's HA
address from the name server, copies the CommitLog byte for byte, builds its own queues,
copies topics and offsets (SlaveSynchronize), refuses sends and serves pulls that the
master's suggestWhichBrokerId sends its way.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pumice.client import (
    AsyncMQAdmin,
    AsyncProducer,
    AsyncPullConsumer,
    Message,
    MessageQueue,
    MQClientError,
    PullStatus,
    SendStatus,
)
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clients import create_topic
from tests.helpers.clusters import HACluster, json_file, run, same_commit_log, send
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually, eventually_async


def test_slave_copies_the_master_and_serves_the_pulls_it_is_suggested(tmp_path: Path) -> None:
    c = HACluster(tmp_path)
    try:

        async def before_slave() -> MessageQueue:
            await create_topic(c, "HATopic", queues=2, cluster_name="HACluster")
            mq = MessageQueue("HATopic", "broker-ha", 0)
            async with AsyncProducer("PG", c.ns) as p:
                for i in range(30):
                    r = await p.send(Message("HATopic", f"m{i}".encode(), keys=f"k{i}"), mq)
                    assert r.send_status is SendStatus.SEND_OK
                # delivered after 1 s; the master's delayOffset.json, for the slave to copy
                delayed = Message("HADelay", b"later", delay_time_level=1)
                assert (await p.send(delayed)).send_status is SendStatus.SEND_OK
            async with AsyncPullConsumer("HACG", c.ns) as pc:
                await pc.update_consume_offset(mq, 7)  # an offset on the master, for the slave to copy
            return mq

        mq = run(before_slave())
        master_delay = c.tmp / "m" / "config" / "delayOffset.json"
        # written every 10 s once the delivery moved a level's offset
        eventually(lambda: json_file(master_delay).get("offsetTable"), 25, "the master's delay offsets")
        # A slave that starts empty after the master has data copies it from the start, and
        # SlaveSynchronize copies topics, consumer offsets and delay offsets (3 s after start).
        c.start_slave()
        c.wait_replicated("HATopic")
        cfg = c.tmp / "s" / "config"
        group_offsets = lambda: json_file(cfg / "consumerOffset.json").get("offsetTable", {}).get("HATopic@HACG")  # noqa: E731
        assert eventually(group_offsets, 20, "HACG's offset on the slave") == {"0": 7}
        slave_delay = cfg / "delayOffset.json"
        eventually(lambda: json_file(slave_delay) == json_file(master_delay), 20, "delay offsets on the slave")

        async def with_slave() -> None:
            async with AsyncMQAdmin(c.ns) as admin:
                route = await eventually_async(lambda: _two_brokers(admin), what="route with the slave")
                assert route == {0: c.m, 1: c.s}
            # replication goes on while both run
            async with AsyncProducer("PG", c.ns) as p:
                for i in range(30, 50):
                    assert (await p.send(Message("HATopic", f"m{i}".encode()), mq)).send_status is SendStatus.SEND_OK
            await asyncio.to_thread(c.wait_replicated)
            # a slave refuses sends
            rc = RemotingClient()
            try:
                r = await rc.invoke(c.s, send("HATopic", b"to-slave", "ks"))
                assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE, (r.code, r.remark)
            finally:
                await rc.close()
            # The first pull goes to the master, which suggests broker 1; the rest go to the slave.
            before = await asyncio.to_thread(c.slave_gets)
            async with AsyncPullConsumer("HACG", c.ns) as pc:
                bodies: list[bytes] = []
                offset = 0
                for _ in range(20):
                    res = await pc.pull(mq, "*", offset, 8)
                    if res.status is PullStatus.FOUND:
                        bodies += [m.body for m in res.msgs]
                    offset = res.next_begin_offset
                    if offset >= 50:
                        break
                assert bodies == [f"m{i}".encode() for i in range(50)]
                assert pc.instance.pull_from_which_node[("HACG", mq)] == 1
            served = await asyncio.to_thread(c.slave_gets) - before
            assert served >= 42, served  # all but the first pull's 8 came from the slave

        run(with_slave())
    finally:
        c.close()
    # both stopped cleanly: no abort file
    assert not (tmp_path / "m" / "abort").exists() and not (tmp_path / "s" / "abort").exists()


def test_sync_master_answers_slave_not_available_until_a_slave_acknowledges(tmp_path: Path) -> None:
    c = HACluster(tmp_path, role="SYNC_MASTER")
    try:
        mq = MessageQueue("SyncTopic", "broker-ha", 0)

        async def send_one(body: bytes) -> SendStatus:
            async with AsyncProducer("PG", c.ns) as p:
                return (await p.send(Message("SyncTopic", body), mq)).send_status

        run(create_topic(c, "SyncTopic", queues=1, cluster_name="HACluster"))
        assert run(send_one(b"alone")) is SendStatus.SLAVE_NOT_AVAILABLE  # stored, not replicated
        assert c.master is not None
        eventually(
            lambda: any("SLAVE_NOT_AVAILABLE" in line and "no slave is connected" in line
                        for line in c.master.output_lines),  # type: ignore[union-attr]
            10, "the master saying why it answers SLAVE_NOT_AVAILABLE",
        )  # fmt: skip
        c.start_slave()

        async def replicated() -> bool:
            return await send_one(b"with-slave") is SendStatus.SEND_OK

        run(eventually_async(replicated, 20, "SEND_OK once the slave is connected"))
        assert same_commit_log(c)  # acknowledged means the slave has it already
    finally:
        c.close()


def test_a_slave_with_broker_id_0_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text(f"brokerRole=SLAVE\nbrokerId=0\nlistenPort={free_port()}\nstorePathRootDir={tmp_path / 's'}\n")
    p = subprocess.run([sys.executable, "-m", "pumice.cli", "broker", "-c", str(conf)],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert p.returncode != 0
    assert "Slave's brokerId must be > 0" in p.stdout + p.stderr
    assert not (tmp_path / "s").exists()  # refused before the store was touched


async def _two_brokers(admin: AsyncMQAdmin) -> dict[int, str] | None:
    route = await admin.topic_route("HATopic")
    addrs = {int(k): v for k, v in route.broker_datas[0].broker_addrs.items()}
    return addrs if len(addrs) == 2 else None


async def commit_offsets(addr: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    client = RemotingClient()
    try:
        for queue_id, offset in offsets.items():
            fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
            r = await client.invoke(addr, RemotingCommand(code=RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=fields))
            assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        await client.close()


def test_cpp_clients_against_a_master_and_its_slave(tmp_path: Path) -> None:
    """The C++ producer writes to the master; the C++ push consumer follows the master's
    suggestion and gets most of its messages from the slave."""
    from tests.integration.cpp_client import consume, missing_reason, platform_supported, produce

    if not platform_supported():
        pytest.skip("the rocketmq wheel is x86_64 Linux only")
    reason = missing_reason()
    if reason:
        pytest.fail(f"the C++ client cannot run: {reason}")
    n = 200  # 50 a queue: more than one pull of 32 each
    c = HACluster(tmp_path)
    try:
        c.start_slave()

        run(create_topic(c, "CppHA", queues=4, cluster_name="HACluster"))
        sent = produce(c.ns, "CppHA", "CppHAPG", n, tmp_path / "p", keys_prefix="h", deadline_s=60)
        assert sum(e["ok"] for e in sent.of("sent")) == n, sent.describe()
        c.wait_replicated("CppHA")
        # accessMessageInMemoryMaxRatio=0 puts every message "on disk", so a new group would get
        # QUERY_NOT_FOUND and start at the end (CONSUME_FROM_LAST_OFFSET, as with a Java broker):
        # the group starts at 0, as an operator's resetOffset would set it
        run(commit_offsets(f"127.0.0.1:{c.master_port}", "CppHACG", "CppHA", {q: 0 for q in range(4)}))
        before = c.slave_gets()
        got = consume("push", c.ns, "CppHA", "CppHACG", n, tmp_path / "c", deadline_s=60, wait_s=40)
        assert {m["keys"] for m in got.of("message")} == {f"h{i}" for i in range(n)}, got.describe()
        assert c.slave_gets() - before >= n - 4 * 32  # all but each queue's first pull
    finally:
        c.close()


def test_consumers_read_from_the_slave_when_the_master_is_gone(tmp_path: Path) -> None:
    """The master dies (SIGKILL): the name server keeps the topic's queues with the slave's
    address, so consumers go on reading from the slave; producers get a clear error."""
    c = HACluster(tmp_path)
    try:
        c.start_slave()
        mq = MessageQueue("FailTopic", "broker-ha", 0)

        async def produce() -> None:
            await create_topic(c, "FailTopic", queues=1, cluster_name="HACluster")
            async with AsyncProducer("PG", c.ns) as p:
                for i in range(20):
                    assert (await p.send(Message("FailTopic", f"f{i}".encode()), mq)).send_status is SendStatus.SEND_OK

        run(produce())
        c.wait_replicated("FailTopic")
        assert c.master is not None
        c.master.send_signal(signal.SIGKILL)
        c.master.wait(10)

        async def after() -> None:
            async with AsyncMQAdmin(c.ns) as admin:

                async def slave_only() -> bool:
                    route = await admin.topic_route("FailTopic")
                    return {int(k): v for k, v in route.broker_datas[0].broker_addrs.items()} == {1: c.s}

                await eventually_async(slave_only, what="the route without the master")
            async with AsyncPullConsumer("FailCG", c.ns) as pc:
                bodies: list[bytes] = []
                offset = 0
                for _ in range(10):  # 8 a pull: with accessMessageInMemoryMaxRatio=0 all counts as on disk
                    res = await pc.pull(mq, "*", offset, 32)
                    assert res.status is PullStatus.FOUND, res.status
                    bodies += [m.body for m in res.msgs]
                    offset = res.next_begin_offset
                    if offset >= 20:
                        break
                assert bodies == [f"f{i}".encode() for i in range(20)]
            async with AsyncProducer("PG", c.ns, retry_times_when_send_failed=0) as p:
                with pytest.raises(MQClientError, match="topic FailTopic has no writable queue: no master broker of "
                                                        "broker-ha is in its route"):  # fmt: skip
                    await p.send(Message("FailTopic", b"no master"))

        run(after())
    finally:
        c.close()


def test_a_slave_started_before_its_master_finds_it_within_seconds(tmp_path: Path) -> None:
    """The slave's registration names no master yet: it asks the name server again every 2 s
    (4.9 waits 10 s, then registerNameServerPeriod, 30 s), so SYNC_MASTER sends succeed soon after the
    master starts."""
    from tests.helpers.clusters import start, stop

    c = HACluster(tmp_path, role="SYNC_MASTER")
    try:
        assert c.master is not None
        stop(c.master)
        c.start_slave()
        assert c.slave is not None
        eventually(lambda: any("no master registered" in line for line in c.slave.output_lines), 10,  # type: ignore[union-attr]
                   "the slave saying it looks for its master")  # fmt: skip
        c.master = start(["broker", "-c", str(tmp_path / "master.conf")], "boot success")
        run(create_topic(c, "LateTopic", queues=1, cluster_name="HACluster"))
        mq = MessageQueue("LateTopic", "broker-ha", 0)

        async def replicated() -> bool:
            async with AsyncProducer("LatePG", c.ns) as p:
                return (await p.send(Message("LateTopic", b"x"), mq)).send_status is SendStatus.SEND_OK

        run(eventually_async(replicated, 12, "SEND_OK within seconds of the master's start"))
    finally:
        c.close()
