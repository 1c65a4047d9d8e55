"""PullMessageProcessor and long polling over a real store and a loopback connection."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass

import orjson

from pumice.broker import pull_request_hold_service
from pumice.broker.bloom_filter import BloomFilter
from pumice.broker.consumer_filter_manager import ConsumerFilterManager
from pumice.broker.consumer_manager import ConsumerManager
from pumice.broker.pull_message_processor import MAX_SUSPEND_MS, PullMessageProcessor
from pumice.common.message_decoder import decode_message
from pumice.common.subscription_group import SubscriptionGroupConfig
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_codec import FrameDecoder, encode_bytes
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import WRITE_HIGH_WATER, ProcessorPool, RemotingServer
from pumice.remoting.response_code import ResponseCode
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from pumice.store.message_check import scan_records
from pumice.store.message_store_config import BrokerRole
from tests.helpers.fakes import FakeChannel
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched


@dataclass
class TC:
    read_queue_nums: int
    write_queue_nums: int
    perm: int = 6


class Topics:
    def select_topic_config(self, topic: str) -> TC | None:
        return {"T": TC(2, 2), "W": TC(1, 1, perm=2)}.get(topic)


class Offsets:
    def __init__(self) -> None:
        self.commits: list[tuple[str, str, int, int]] = []

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.commits.append((group, topic, queue_id, offset))


def pull(offset: int, queue_id: int = 0, sys_flag: int = 2, suspend_ms: int = 2000, **extra: object) -> RemotingCommand:
    """A pull carrying its subscription (sysFlag 4, "*" unless given), as the C++, Python and
    Spark clients send it; ``raw_pull`` sends the flags as given."""
    return raw_pull(offset, queue_id, sys_flag | 4, suspend_ms, **({"subscription": "*"} | extra))


def raw_pull(
    offset: int, queue_id: int = 0, sys_flag: int = 2, suspend_ms: int = 2000, **extra: object
) -> RemotingCommand:
    fields = {"consumerGroup": "G", "topic": "T", "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
              "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subVersion": 0}  # fmt: skip
    fields.update(extra)
    return RemotingCommand(code=11, ext_fields=fields)


def put(store: DefaultMessageStore, body: bytes, tag: str = "TagA", queue_id: int = 0) -> None:
    r = store.put_message(MessageExtBrokerInner(topic="T", body=body, queue_id=queue_id, properties={"TAGS": tag}))
    assert r.is_ok()


def run(tmp_path, scenario, processor_args: dict[str, object] | None = None, **config: object) -> None:
    store = DefaultMessageStore(small_config(str(tmp_path / "s"), **config))
    store.load()
    store.start()
    offsets = Offsets()

    async def main() -> None:
        proc = PullMessageProcessor(store, Topics(), offsets, **(processor_args or {}))
        store.message_arriving_listener = proc.hold_service
        server = RemotingServer("127.0.0.1", 0)
        server.register_processor(11, proc, ProcessorPool("pull", 8, 1000))
        await server.start()
        proc.hold_service.start()
        client = RemotingClient()
        try:
            await scenario(store, client, f"127.0.0.1:{server.port}", offsets)
        finally:
            await client.close()
            await proc.hold_service.shutdown()
            await server.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        store.shutdown()


def test_found_body_is_the_stored_records_and_codes_follow_the_store(tmp_path) -> None:
    async def scenario(store, c, addr, offsets) -> None:
        for i in range(5):
            put(store, b"m%d" % i)
        wait_dispatched(store)
        r = await c.invoke(addr, pull(0, sys_flag=1, commitOffset=3))
        assert r.code == ResponseCode.SUCCESS
        assert r.ext_fields["nextBeginOffset"] == "5" and r.ext_fields["maxOffset"] == "5"
        end, n, _ = scan_records(r.body, 0, len(r.body), True)  # 5 whole, valid records
        assert (end, n) == (len(r.body), 5)
        assert offsets.commits == [("G", "T", 0, 3)]
        r = await c.invoke(addr, pull(5, sys_flag=0))  # caught up, no suspend
        assert r.code == ResponseCode.PULL_NOT_FOUND and r.ext_fields["nextBeginOffset"] == "5"
        r = await c.invoke(addr, pull(9, sys_flag=0))
        # past the end: RocketMQ 4.9's store sends a queue whose min offset is 0 back to 0 (seeds B7)
        assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "0"
        r = await c.invoke(addr, pull(0, queue_id=1, sys_flag=0))  # empty queue, offset 0
        assert r.code == ResponseCode.PULL_NOT_FOUND
        r = await c.invoke(addr, pull(3, queue_id=1, sys_flag=0))  # empty queue, offset 3
        assert r.code == ResponseCode.PULL_OFFSET_MOVED
        # each PULL_OFFSET_MOVED left an OffsetMovedEvent, as 4.9's generateOffsetMovedEvent writes it
        wait_dispatched(store)
        events = store.get_message("X", "OFFSET_MOVED_EVENT", 0, 0, 10)
        assert events is not None and events.message_count == 2
        got = [decode_message(b) for b in events.buffers]
        events.release()
        assert [orjson.loads(m.body) for m in got] == [
            {"consumerGroup": "G", "messageQueue": {"brokerName": "broker-a", "queueId": q, "topic": "T"},
             "offsetNew": 0, "offsetRequest": requested}
            for q, requested in ((0, 9), (1, 3))
        ]  # fmt: skip
        assert got[0].body.startswith(b'{"consumerGroup":"G","messageQueue":{"brokerName":"broker-a","queueId":0,')
        assert got[0].properties == {"KEYS": "G", "DELAY": "0", "TAGS": "G"}
        assert list(got[0].properties) == ["KEYS", "DELAY", "TAGS"]  # the order of 4.9's HashMap
        r = await c.invoke(addr, pull(0, queue_id=2))
        assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[2]" in (r.remark or "")
        r = await c.invoke(addr, pull(0, topic="Nope"))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        r = await c.invoke(addr, pull(0, topic="W"))
        assert r.code == ResponseCode.NO_PERMISSION
        r = await c.invoke(addr, pull(0, sys_flag=4, subscription="TagZ"))
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "5"

    run(tmp_path, scenario)


def test_sql92_pulls_return_only_matching_records_when_property_filter_is_on(tmp_path) -> None:
    """enablePropertyFilter: an SQL92 subscription is evaluated on each record's properties
    (none matching: PULL_RETRY_IMMEDIATELY from past them); a bad one is SUBSCRIPTION_PARSE_FAILED;
    with the switch off, SYSTEM_ERROR as 4.9 answers."""

    def sql_pull(offset: int, expression: str) -> RemotingCommand:
        return raw_pull(offset, sys_flag=4, subscription=expression, expressionType="SQL92")

    async def scenario(store, c, addr, offsets) -> None:
        for i in range(6):
            r = store.put_message(
                MessageExtBrokerInner(topic="T", body=b"m%d" % i, properties={"TAGS": "A", "n": str(i)})
            )
            assert r.is_ok()
        wait_dispatched(store)
        r = await c.invoke(addr, sql_pull(0, "n >= 2 AND n < 5"))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["nextBeginOffset"] == "6"
        bodies = []
        pos = 0
        while pos < len(r.body):
            m = decode_message(r.body, pos)
            bodies.append(m.body)
            pos += m.store_size
        assert bodies == [b"m2", b"m3", b"m4"]
        r = await c.invoke(addr, sql_pull(0, "n > 100"))
        assert (r.code, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "6")
        r = await c.invoke(addr, sql_pull(0, "n >"))
        assert (r.code, r.remark) == (
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            "Parse the consumer's subscription failed",
        )

    run(tmp_path, scenario, {"enable_property_filter": True})

    async def refused(store, c, addr, offsets) -> None:
        r = await c.invoke(addr, sql_pull(0, "n > 1"))
        assert (r.code, r.remark) == (
            ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92"
        )  # fmt: skip

    run(tmp_path / "off", refused)


def test_long_polling_wakes_on_arrival(tmp_path, monkeypatch) -> None:
    # no full scan during the test: only the dispatcher's arrival notice can answer before the timeout
    monkeypatch.setattr(pull_request_hold_service, "FULL_SCAN_INTERVAL_S", 3600.0)

    async def scenario(store, c, addr, offsets) -> None:
        t0 = time.monotonic()
        waiting = asyncio.create_task(c.invoke(addr, pull(0, suspend_ms=10_000), timeout_s=15))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # held
        put(store, b"late")
        r = await waiting
        took = time.monotonic() - t0
        assert r.code == ResponseCode.SUCCESS and b"late" in r.body
        assert took < 9, took  # woken by the arrival, not by the 10 s timeout

    run(tmp_path, scenario)


def test_long_polling_times_out_with_pull_not_found(tmp_path) -> None:
    async def scenario(store, c, addr, offsets) -> None:
        t0 = time.monotonic()
        r = await c.invoke(addr, pull(0, suspend_ms=500), timeout_s=10)
        took = time.monotonic() - t0
        assert r.code == ResponseCode.PULL_NOT_FOUND
        assert 0.4 <= took < 5, took

    run(tmp_path, scenario)


def test_held_pull_ignores_messages_its_subscription_does_not_match(tmp_path) -> None:
    async def scenario(store, c, addr, offsets) -> None:
        waiting = asyncio.create_task(
            c.invoke(addr, pull(0, sys_flag=6, suspend_ms=10_000, subscription="TagB"), timeout_s=15)
        )
        await asyncio.sleep(0.3)
        put(store, b"a", tag="TagA")
        await asyncio.sleep(0.5)
        assert not waiting.done()  # TagA does not wake a TagB subscriber
        put(store, b"b", tag="TagB")
        r = await waiting
        assert r.code == ResponseCode.SUCCESS and b"b" in r.body and r.ext_fields["nextBeginOffset"] == "2"

    run(tmp_path, scenario)


def test_a_held_pull_that_fails_when_woken_is_answered_with_system_error(tmp_path) -> None:
    async def scenario(store, c, addr, offsets) -> None:
        real_get = store.get_message
        held = [False]

        def failing_when_woken(*args, **kwargs):  # the store read of the woken pull fails
            if held[0]:
                raise RuntimeError("disk on fire")
            held[0] = True
            return real_get(*args, **kwargs)

        store.get_message = failing_when_woken  # on the store: the processor may be compiled
        waiting = asyncio.create_task(c.invoke(addr, pull(0, suspend_ms=10_000), timeout_s=15))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # held
        put(store, b"late")
        r = await waiting  # answered, not left to the client's timeout
        assert r.code == ResponseCode.SYSTEM_ERROR and "disk on fire" in (r.remark or "")

    run(tmp_path, scenario)


# -- memory per connection: parked pulls, their wake-up, their timeout ----------------------------


async def raw_connection(addr: str) -> socket.socket:
    """A client socket that buffers little on its side (4 KiB), for a client that does not read."""
    host, port = addr.split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    return sock


def pipelined(n: int) -> bytes:
    """n long-polling pulls of queue 0 at offset 0, opaques 1..n, as one write."""
    frames = []
    for i in range(n):
        cmd = pull(0, suspend_ms=20_000)
        cmd.opaque = i + 1
        frames.append(encode_bytes(cmd))
    return b"".join(frames)


async def read_replies(sock: socket.socket, n: int, seconds: float = 20.0) -> list[RemotingCommand]:
    loop = asyncio.get_running_loop()
    dec = FrameDecoder(64 * 1024 * 1024)
    got: list[RemotingCommand] = []
    deadline = loop.time() + seconds
    while len(got) < n and loop.time() < deadline:
        data = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 5)
        assert data, "the server closed the connection"
        got += dec.feed(data)
    return got


async def until(check, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not reached in time")


def test_parked_pulls_woken_while_their_connection_is_congested_get_no_body(tmp_path) -> None:
    """A client parks many pulls and does not read: when a big message arrives, bodies go out
    until WRITE_HIGH_WATER bytes wait for it, and the other woken pulls get a small
    PULL_RETRY_IMMEDIATELY at their own offset (a body each took memory without bound)."""
    n = 30
    big = b"B" * (1024 * 1024)

    async def scenario(store, c, addr, offsets) -> None:
        hold = store.message_arriving_listener
        sock = await raw_connection(addr)
        try:
            await asyncio.get_running_loop().sock_sendall(sock, pipelined(n))
            await until(lambda: sum(len(v) for v in hold.pull_request_table.values()) == n)
            put(store, big)
            got = await read_replies(sock, n)
            assert sorted(r.opaque for r in got) == list(range(1, n + 1))  # every pull answered once
            found = [r for r in got if r.code == ResponseCode.SUCCESS]
            retry = [r for r in got if r.code == ResponseCode.PULL_RETRY_IMMEDIATELY]
            assert len(found) + len(retry) == n
            assert 1 <= len(found) <= WRITE_HIGH_WATER // len(big) + 1, len(found)
            assert all(decode_message(r.body).body == big for r in found)
            for r in retry:
                assert not r.body and r.ext_fields["nextBeginOffset"] == "0"
                assert (r.ext_fields["minOffset"], r.ext_fields["maxOffset"]) == ("0", "1")
                assert r.ext_fields["suggestWhichBrokerId"] == "0"
            # the connection serves normally once read: the retried pull finds the message
            r = await c.invoke(addr, pull(0, sys_flag=0))
            assert r.code == ResponseCode.SUCCESS and decode_message(r.body).body == big
        finally:
            sock.close()

    run(tmp_path, scenario, mapped_file_size_commit_log=4 * 1024 * 1024)


def test_a_connection_parks_pulls_up_to_its_share_then_gets_system_busy(tmp_path) -> None:
    """Each parked pull counts against its connection's share (MAX_HELD_BYTES_PER_CHANNEL);
    past it the pull is answered SYSTEM_BUSY with a remark, and answered pulls leave it."""
    (decoded,) = FrameDecoder().feed(encode_bytes(pull(0, suspend_ms=20_000)))
    share = 10_000
    fits = share // pull_request_hold_service.parked_cost(decoded)
    n = fits + 12

    async def scenario(store, c, addr, offsets) -> None:
        hold = store.message_arriving_listener
        hold.max_held_bytes_per_channel = share
        sock = await raw_connection(addr)
        try:
            await asyncio.get_running_loop().sock_sendall(sock, pipelined(n))
            busy = await read_replies(sock, n - fits, seconds=5)
            parked = [pr for prs in hold.pull_request_table.values() for pr in prs]
            assert len(parked) == fits and len(busy) == n - fits
            ch = parked[0].channel
            assert (ch.held, ch.held_bytes) == (fits, sum(pr.cost for pr in parked)) and ch.held_bytes <= share
            for r in busy:
                assert r.code == ResponseCode.SYSTEM_BUSY
                assert (r.remark or "").startswith(f"[PULL_HOLD_FULL]this connection already holds {fits} suspended")
            # a pull larger than a whole share is never parked
            r = await c.invoke(addr, pull(0, suspend_ms=20_000, junk="x" * share))
            assert r.code == ResponseCode.SYSTEM_BUSY
            # another connection has its own share
            other = asyncio.create_task(c.invoke(addr, pull(0, suspend_ms=20_000), timeout_s=10))
            await until(lambda: sum(len(v) for v in hold.pull_request_table.values()) == fits + 1)
            put(store, b"m")
            woken = await read_replies(sock, fits)
            assert sorted(r.opaque for r in woken) == sorted(pr.request.opaque for pr in parked)
            assert all(r.code == ResponseCode.SUCCESS for r in woken)
            assert (await other).code == ResponseCode.SUCCESS
            assert (ch.held, ch.held_bytes) == (0, 0)  # answered pulls leave the share
        finally:
            sock.close()

    run(tmp_path, scenario)


def test_the_suspend_timeout_is_clamped(tmp_path) -> None:
    """A pull asking to be held for days is held MAX_SUSPEND_MS (30 s) at most."""

    async def scenario(store, c, addr, offsets) -> None:
        hold = store.message_arriving_listener
        t0 = time.monotonic()
        waiting = asyncio.create_task(c.invoke(addr, pull(0, suspend_ms=10**10), timeout_s=10))
        await until(lambda: hold.pull_request_table)
        (pr,) = hold.pull_request_table[("T", 0)]
        assert pr.deadline <= t0 + MAX_SUSPEND_MS / 1000 + 1
        waiting.cancel()

    run(tmp_path, scenario)


# -- suggestWhichBrokerId and a slave's answers (PullMessageProcessor.processRequest) --------


class Groups:
    """The group's config: read from broker 3, or from broker 5 when consuming slowly."""

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig(group_name=group, broker_id=3, which_broker_when_consume_slowly=5)


def suggested(tmp_path, name: str, pull_offset: int, *, slave_read: bool, in_memory_ratio: int = 40,
              role: BrokerRole = BrokerRole.ASYNC_MASTER) -> tuple[int, int, list]:  # fmt: skip
    """(response code, suggestWhichBrokerId, offsets committed) of one pull of queue 0 holding 4 messages."""
    store = DefaultMessageStore(small_config(str(tmp_path / name), access_message_in_memory_max_ratio=in_memory_ratio))
    assert store.load()
    store.start()
    try:
        for i in range(4):
            put(store, b"m%d" % i)
        wait_dispatched(store)
        store.config.broker_role = role
        offsets = Offsets()
        proc = PullMessageProcessor(
            store, Topics(), offsets, subscription_groups=Groups(), slave_read_enable=slave_read
        )
        r = proc.pull(FakeChannel(), pull(pull_offset, sys_flag=1 | 2, commitOffset=2), broker_allow_suspend=True)  # type: ignore[arg-type]
        assert r is not None
        if r.after_send is not None:
            r.after_send()  # releases the mapped views of a found result
        return r.code, int(r.ext_fields["suggestWhichBrokerId"]), offsets.commits
    finally:
        store.shutdown()


def test_suggest_which_broker_follows_slave_read_and_slowness(tmp_path) -> None:
    assert suggested(tmp_path, "a", 0, slave_read=False)[:2] == (ResponseCode.SUCCESS, 0)  # master only
    assert suggested(tmp_path, "b", 0, slave_read=True)[:2] == (ResponseCode.SUCCESS, 3)  # the group's brokerId
    # a consumer further behind than the memory ratio allows is sent to whichBrokerWhenConsumeSlowly
    assert suggested(tmp_path, "c", 0, slave_read=True, in_memory_ratio=0)[:2] == (ResponseCode.SUCCESS, 5)


def test_a_slave_answers_offset_moved_with_retry_and_commits_nothing(tmp_path) -> None:
    code, suggest, commits = suggested(tmp_path, "m", 10, slave_read=True)
    assert (code, suggest) == (ResponseCode.PULL_OFFSET_MOVED, 3)
    assert commits == [("G", "T", 0, 2)]  # a master stores the pull's commit offset
    code, suggest, commits = suggested(tmp_path, "s", 10, slave_read=True, role=BrokerRole.SLAVE)
    assert (code, suggest) == (ResponseCode.PULL_RETRY_IMMEDIATELY, 3)  # a slave may lag: the consumer stays
    assert commits == []


# -- the subscription: the pull's own, or the group's heartbeats' --------------------------------


def heartbeat(consumers: ConsumerManager, subs: list[dict], model: str = "CLUSTERING") -> None:
    consumers.register_consumer("G", "c1", FakeChannel(), {"messageModel": model, "subscriptionDataSet": subs})  # type: ignore[arg-type]


def test_a_pull_without_its_subscription_uses_the_heartbeats_one_as_java_consumers_expect(tmp_path) -> None:
    """Java push consumers leave sysFlag 4 off and rely on their heartbeat's subscription
    (PullMessageProcessor step 8): no group or topic there is SUBSCRIPTION_NOT_EXIST, a pull
    newer than the heartbeat is SUBSCRIPTION_NOT_LATEST; a broadcasting group may be refused."""
    store = DefaultMessageStore(small_config(str(tmp_path / "s")))
    assert store.load()
    store.start()
    consumers = ConsumerManager(notify_ids_changed=False)

    class NoBroadcast(Groups):
        def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig:
            return SubscriptionGroupConfig(group_name=group, consume_broadcast_enable=False)

    proc = PullMessageProcessor(store, Topics(), Offsets(), consumers=consumers, subscription_groups=Groups())

    def code(**extra: object) -> tuple[int, str | None]:
        r = proc.pull(FakeChannel(), raw_pull(0, sys_flag=0, **extra), broker_allow_suspend=False)  # type: ignore[arg-type]
        assert r is not None
        if r.after_send is not None:
            r.after_send()
        return r.code, r.remark

    try:
        put(store, b"a", tag="TagA")
        put(store, b"b", tag="TagB")
        wait_dispatched(store)
        assert code() == (ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist")
        heartbeat(consumers, [{"topic": "Other", "subString": "*", "subVersion": 5}])
        assert code() == (ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist")
        heartbeat(consumers, [{"topic": "T", "subString": "TagB", "subVersion": 5}])
        assert code(subVersion=6)[0] == ResponseCode.SUBSCRIPTION_NOT_LATEST
        r = proc.pull(FakeChannel(), raw_pull(0, sys_flag=0, subVersion=5), broker_allow_suspend=False)  # type: ignore[arg-type]
        assert r is not None and r.code == ResponseCode.SUCCESS
        body = b"".join(bytes(v) for v in r.body_parts or [])
        assert decode_message(body).body == b"b" and scan_records(body, 0, len(body), True)[1] == 1  # TagB only
        r.after_send()
        # a member's late heartbeat with an older version does not bring back its old tag set
        heartbeat(consumers, [{"topic": "T", "subString": "TagA", "subVersion": 4}])
        assert consumers.get_consumer_group_info("G").subscriptions["T"]["subString"] == "TagB"
        # SQL92 would be hashed as a tag and skip every message: refused, as without enablePropertyFilter
        heartbeat(consumers, [{"topic": "T", "subString": "a > 1", "subVersion": 9, "expressionType": "SQL92"}])
        assert code(subVersion=9) == (
            ResponseCode.SYSTEM_ERROR,
            "The broker does not support consumer to filter message by SQL92",
        )
        assert code(sysFlag=4, subscription="a > 1", expressionType="SQL92")[0] == ResponseCode.SYSTEM_ERROR
        proc.subscription_groups = NoBroadcast()
        heartbeat(consumers, [{"topic": "T", "subString": "*", "subVersion": 10}], model="BROADCASTING")
        assert code()[0] == ResponseCode.NO_PERMISSION
    finally:
        store.shutdown()


def test_registered_sql92_filters_and_filter_support_retry(tmp_path) -> None:
    """A heartbeat's SQL92 subscription is pulled through the group's filter in the
    ConsumerFilterManager (FILTER_DATA_NOT_EXIST without one, FILTER_DATA_NOT_LATEST when the
    pull is newer); with filterSupportRetry a retry topic's messages are filtered by the group's
    filter for their original topic (RETRY_TOPIC), without it they all come back."""
    store = DefaultMessageStore(small_config(str(tmp_path / "s")))
    assert store.load()
    store.start()
    consumers = ConsumerManager(notify_ids_changed=False)
    filters = ConsumerFilterManager(str(tmp_path / "consumerFilter.json"), BloomFilter(20, 32))
    consumers.on_register, consumers.on_unregister = filters.register_group, filters.unregister

    class AnyTopic:
        def select_topic_config(self, topic: str) -> TC:
            return TC(1, 1)

    proc = PullMessageProcessor(store, AnyTopic(), Offsets(), consumers=consumers, subscription_groups=Groups(),
                                enable_property_filter=True, consumer_filters=filters)  # fmt: skip

    def pulled(topic: str, sub_version: int = 5) -> tuple[int, list[str]]:
        req = raw_pull(0, sys_flag=0, topic=topic, subVersion=sub_version)
        r = proc.pull(FakeChannel(), req, broker_allow_suspend=False)  # type: ignore[arg-type]
        assert r is not None
        body = b"".join(bytes(v) for v in r.body_parts or [])
        if r.after_send is not None:
            r.after_send()
        found, pos = [], 0
        while pos < len(body):
            m = decode_message(body, pos)
            found.append(m.properties["a"])
            pos += m.store_size
        return r.code, found

    sql = {"topic": "T", "subString": "a > 3", "expressionType": "SQL92", "subVersion": 5}
    retry = {"topic": "%RETRY%G", "subString": "*", "subVersion": 5}
    try:
        for i in range(6):
            for topic, extra in (("T", {}), ("%RETRY%G", {"RETRY_TOPIC": "T"})):
                msg = MessageExtBrokerInner(topic=topic, body=b"m", properties={"a": str(i)} | extra)
                assert store.put_message(msg).is_ok()
        wait_dispatched(store)
        consumers.on_register = None  # a heartbeat the filter manager did not see
        heartbeat(consumers, [sql, retry])
        assert pulled("T")[0] == ResponseCode.FILTER_DATA_NOT_EXIST
        consumers.on_register = filters.register_group
        heartbeat(consumers, [sql, retry])
        assert pulled("T") == (ResponseCode.SUCCESS, ["4", "5"])
        assert pulled("%RETRY%G") == (ResponseCode.SUCCESS, [str(i) for i in range(6)])
        proc.filter_support_retry = True
        assert pulled("%RETRY%G") == (ResponseCode.SUCCESS, ["4", "5"])
        consumers.on_register = None
        heartbeat(consumers, [sql | {"subVersion": 9}, retry])
        assert pulled("T", sub_version=9)[0] == ResponseCode.FILTER_DATA_NOT_LATEST
    finally:
        store.shutdown()
