"""SendMessageProcessor over a real store and a real loopback connection."""

from __future__ import annotations

import asyncio
import struct
import zlib
from dataclasses import dataclass

from pumice.broker.send_message_processor import SendMessageProcessor
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import ProcessorPool, RemotingServer
from pumice.remoting.response_code import ResponseCode
from pumice.store import BrokerRole, DefaultMessageStore, FlushDiskType, MessageExtBrokerInner
from pumice.store.message_decoder import create_message_id, decode_message
from pumice.store.put_message_result import PutMessageResult, PutMessageStatus
from tests.conftest import small_config, wait_dispatched


@dataclass
class TC:
    read_queue_nums: int
    write_queue_nums: int
    perm: int = 6


class Topics:
    def __init__(self, auto_create: bool = True) -> None:
        self.table = {"Existing": TC(4, 4)}
        self.auto_create = auto_create
        self.created: list[str] = []

    def select_topic_config(self, topic: str) -> TC | None:
        return self.table.get(topic)

    def create_topic_in_send_message_method(self, topic, default_topic, remote_addr, queue_nums, sys_flag):
        if not self.auto_create or default_topic != "TBW102":
            return None
        self.table[topic] = TC(queue_nums, queue_nums)
        self.created.append(topic)
        return self.table[topic]


def batch_body(items: list[tuple[bytes, str]]) -> bytes:
    out = b""
    for body, props in items:
        pb = props.encode()
        total = 20 + len(body) + 2 + len(pb)
        out += struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(pb)) + pb
    return out


def run_with(store: DefaultMessageStore, topics: Topics, scenario) -> None:
    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)
        proc = SendMessageProcessor(store, topics, store_host="127.0.0.1:10911", cluster_name="DefaultCluster")
        pool = ProcessorPool("send", 4, 1000)
        for code in (10, 310, 320):
            server.register_processor(code, proc, pool)
        await server.start()
        client = RemotingClient()
        try:
            await scenario(client, f"127.0.0.1:{server.port}")
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_send_v1_v2_and_batches_store_the_messages(tmp_path) -> None:
    store = DefaultMessageStore(small_config(str(tmp_path / "s")))
    store.load()
    store.start()
    topics = Topics()

    async def scenario(c: RemotingClient, addr: str) -> None:
        # code 10, full names, as the C++ client sends (ints and strings mixed)
        r = await c.invoke(
            addr,
            RemotingCommand(
                code=10,
                ext_fields={
                    "producerGroup": "PG",
                    "topic": "Existing",
                    "defaultTopic": "TBW102",
                    "defaultTopicQueueNums": 4,
                    "queueId": 1,
                    "sysFlag": 0,
                    "bornTimestamp": "1700000000000",
                    "flag": 0,
                    "properties": "TAGS\x01TagA\x02KEYS\x01k-1\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",
                },
                body=b"one",
            ),
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "0"
        assert r.ext_fields["transactionId"] == "U1"
        msg_id = r.ext_fields["msgId"]
        m = store.look_message_by_msg_id(msg_id)
        assert m is not None and m.body == b"one" and m.topic == "Existing" and m.queue_id == 1
        assert m.properties["CLUSTER"] == "DefaultCluster" and m.properties["TAGS"] == "TagA"
        assert msg_id == create_message_id((b"\x7f\x00\x00\x01", 10911), m.commit_log_offset)
        # code 310, letters and JSON numbers/booleans
        r = await c.invoke(
            addr,
            RemotingCommand(
                code=310,
                ext_fields={
                    "a": "PG",
                    "b": "Existing",
                    "c": "TBW102",
                    "d": 4,
                    "e": 1,
                    "f": 0,
                    "g": 1795,
                    "h": 0,
                    "i": "TAGS\x01TagB\x02KEYS\x01k-2",
                    "j": 0,
                    "k": False,
                },
                body=b"two",
            ),
        )
        assert r.code == 0 and r.ext_fields["queueOffset"] == "1"
        # code 320 batch and code 10 with batch="1" (the C++ client)
        body = batch_body([(b"b1", "KEYS\x01kb1"), (b"b2", "KEYS\x01kb2"), (b"b3", "")])
        r = await c.invoke(
            addr,
            RemotingCommand(
                code=320,
                ext_fields={
                    "a": "PG",
                    "b": "Existing",
                    "c": "TBW102",
                    "d": 4,
                    "e": 2,
                    "f": 0,
                    "g": 1,
                    "h": 0,
                    "m": True,
                },
                body=body,
            ),
        )
        assert r.code == 0 and len(r.ext_fields["msgId"].split(",")) == 3 and r.ext_fields["queueOffset"] == "0"
        r = await c.invoke(
            addr,
            RemotingCommand(
                code=10,
                ext_fields={
                    "producerGroup": "PG",
                    "topic": "Existing",
                    "defaultTopic": "TBW102",
                    "defaultTopicQueueNums": "4",
                    "queueId": "2",
                    "sysFlag": "0",
                    "bornTimestamp": "1",
                    "flag": "0",
                    "batch": "1",
                },
                body=batch_body([(b"c1", ""), (b"c2", "")]),
            ),
        )
        assert r.code == 0 and r.ext_fields["queueOffset"] == "3"
        wait_dispatched(store)
        assert [m.body for m in store.query_message("Existing", "kb2")] == [b"b2"]
        res = store.get_message("g", "Existing", 2, 0, 32)
        assert res is not None
        with res:
            assert [decode_message(b).body for b in res.buffers] == [b"b1", b"b2", b"b3", b"c1", b"c2"]

    try:
        run_with(store, topics, scenario)
    finally:
        store.shutdown()


def test_auto_create_missing_topic_and_bad_requests(tmp_path) -> None:
    store = DefaultMessageStore(small_config(str(tmp_path / "s")))
    store.load()
    store.start()
    topics = Topics()

    def send(topic: str, **extra: object) -> RemotingCommand:
        fields = {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 3,
                  "queueId": -1, "sysFlag": 0, "bornTimestamp": 1, "flag": 0}  # fmt: skip
        fields.update(extra)
        return RemotingCommand(code=10, ext_fields=fields, body=b"x")

    async def scenario(c: RemotingClient, addr: str) -> None:
        r = await c.invoke(addr, send("NewTopic"))
        assert r.code == 0 and topics.created == ["NewTopic"] and 0 <= int(r.ext_fields["queueId"]) < 3
        r = await c.invoke(addr, send("Other", defaultTopic="NotTBW"))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST and "Other" in (r.remark or "")
        r = await c.invoke(addr, send("Existing", queueId=9))
        assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[9]" in (r.remark or "")
        r = await c.invoke(addr, RemotingCommand(code=10, ext_fields={"topic": "Existing"}))
        assert r.code == ResponseCode.SYSTEM_ERROR and "'producerGroup'" in (r.remark or "")
        r = await c.invoke(addr, RemotingCommand(code=320, ext_fields={"a": "PG", "b": "Existing", "e": 0},
                                                 body=b"\x00\x00\x00\x30garbage"))  # fmt: skip
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        r = await c.invoke(addr, send("Existing", properties="KEYS\x01" + "k" * 40000))
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        # a DELAY that is not a Java int is refused (upstream's parseInt throws); past the top level is capped
        for bad in ("abc", "99999999999999999999", "5_0", " 3"):
            r = await c.invoke(addr, send("Existing", properties=f"DELAY\x01{bad}"))
            assert (r.code, r.remark) == (ResponseCode.MESSAGE_ILLEGAL, f"DELAY {bad!r} is not a delay level (an int)")
        r = await c.invoke(addr, send("Existing", queueId=0, properties="DELAY\x01999"))
        assert r.code == ResponseCode.SUCCESS
        assert store.get_max_offset_in_queue("Existing", 0) == 0  # not on the topic: scheduled

    try:
        run_with(store, topics, scenario)
    finally:
        store.shutdown()


def test_store_statuses_map_to_response_codes(tmp_path) -> None:
    slave = DefaultMessageStore(small_config(str(tmp_path / "slave"), broker_role=BrokerRole.SLAVE))
    slave.load()
    slave.start()

    async def refused(c: RemotingClient, addr: str) -> None:
        r = await c.invoke(addr, RemotingCommand(code=310, ext_fields={"a": "PG", "b": "Existing", "e": 0}, body=b"x"))
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in (r.remark or "")

    try:
        run_with(slave, Topics(), refused)
    finally:
        slave.shutdown()

    sync = DefaultMessageStore(small_config(str(tmp_path / "sync"), flush_disk_type=FlushDiskType.SYNC_FLUSH))
    sync.load()
    sync.start()

    async def flushed(c: RemotingClient, addr: str) -> None:
        r = await c.invoke(addr, RemotingCommand(code=310, ext_fields={"a": "PG", "b": "Existing", "e": 0}, body=b"x"))
        assert r.code == ResponseCode.SUCCESS
        mfq = sync.commit_log.mapped_file_queue
        assert mfq.flushed_where >= sync.get_max_phy_offset() > 0  # acknowledged after the flush

    try:
        run_with(sync, Topics(), flushed)
    finally:
        sync.shutdown()


def test_malformed_or_delayed_batches_are_illegal_and_write_nothing(tmp_path) -> None:
    good = batch_body([(b"hello", "KEYS\x01k"), (b"second", "")])
    # hand-built: totalSize 22 + 5 + 6, magic, bodyCRC and flag 0, bodyLength 5, body, propertiesLength 6
    assert good[:33] == b"\x00\x00\x00\x21" + b"\x00" * 12 + b"\x00\x00\x00\x05hello\x00\x06KEYS\x01k"
    bad_bodies = {
        "truncated": good[:-1],
        "cut in the head": good[:10],
        "totalSize disagrees": struct.pack(">i", 34) + good[4:],
        "negative body length": struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00",
        "properties not UTF-8": batch_body([(b"x", "")])[:-2] + b"\x00\x02\xff\xfe",
        "delayed": batch_body([(b"d", "DELAY\x013")]),
        # maxMessageSize (4096 here) bounds the body, then the records it makes (as upstream's encoder)
        "the batch body is 5022 bytes, maxMessageSize is 4096": batch_body([(b"x" * 5000, "")]),
        "the batch's records are over 4096 bytes": batch_body([(b"", "")] * 100),  # 2,200 bytes in
    }
    with DefaultMessageStore(small_config(str(tmp_path), max_message_size=4096)) as store:
        topics = Topics()
        topics.table["T"] = TC(4, 4)

        async def scenario(c: RemotingClient, addr: str) -> None:
            for why, body in bad_bodies.items():
                fields = {"a": "PG", "b": "T", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0}
                r = await c.invoke(addr, RemotingCommand(code=320, ext_fields=fields, body=body))
                assert r.code == ResponseCode.MESSAGE_ILLEGAL, (why, r.code, r.remark)
                assert r.remark, why
                assert not why.startswith("the batch") or why in r.remark, r.remark
            r = await c.invoke(addr, RemotingCommand(code=320, ext_fields=fields, body=good))
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "0", r.remark
            # the batch-level DELAY property is refused too, as the Java broker does
            fields["i"] = "DELAY\x012"
            r = await c.invoke(addr, RemotingCommand(code=320, ext_fields=fields, body=good))
            assert r.code == ResponseCode.MESSAGE_ILLEGAL and "delay" in r.remark

        run_with(store, topics, scenario)
        wait_dispatched(store)
        assert store.get_max_offset_in_queue("T", 0) == 2  # only the good batch was written
        got = store.get_message("G", "T", 0, 0, 32)
        assert got is not None
        with got:
            msgs = [decode_message(bytes(b)) for b in got.buffers]
        assert [m.body for m in msgs] == [b"hello", b"second"]
        assert msgs[0].properties == {"KEYS": "k", "CLUSTER": "DefaultCluster"}
        assert msgs[1].properties == {"CLUSTER": "DefaultCluster"}


def test_a_compressed_batch_from_the_cpp_client_is_inflated_and_stored_plain(tmp_path) -> None:
    plain = batch_body([(b"x" * 3000, "KEYS\x01z1"), (b"y" * 3000, "")])
    with DefaultMessageStore(small_config(str(tmp_path), max_message_size=16 * 1024)) as store:
        topics = Topics()
        topics.table["Z"] = TC(1, 1)

        async def scenario(c: RemotingClient, addr: str) -> None:
            def req(body: bytes) -> RemotingCommand:
                fields = {"a": "PG", "b": "Z", "c": "TBW102", "d": 1, "e": 0, "f": 1, "g": 0, "h": 0}
                return RemotingCommand(code=320, ext_fields=fields, body=body)

            r = await c.invoke(addr, req(zlib.compress(plain)))
            assert r.code == ResponseCode.SUCCESS, r.remark
            for bad in (plain, zlib.compress(plain * 3), zlib.compress(plain)[:-4]):  # not zlib, too big, cut
                r = await c.invoke(addr, req(bad))
                assert r.code == ResponseCode.MESSAGE_ILLEGAL and "compressed" in r.remark

        run_with(store, topics, scenario)
        wait_dispatched(store)
        got = store.get_message("G", "Z", 0, 0, 32)
        assert got is not None
        with got:
            msgs = [decode_message(bytes(b)) for b in got.buffers]
        assert [m.body for m in msgs] == [b"x" * 3000, b"y" * 3000]
        assert all(m.sys_flag & 1 == 0 for m in msgs)  # stored plain, so readers do not inflate again


def test_a_send_back_the_store_refuses_is_system_error_named_by_the_status(tmp_path) -> None:
    """As upstream's consumerSendMsgBack (any status but PUT_OK): SYSTEM_ERROR with the status's
    name, e.g. SERVICE_NOT_AVAILABLE on a slave; it answered the send codes (14)."""

    class RetryTopics(Topics):
        def create_topic_in_send_message_back_method(self, topic, queue_nums, perm, topic_sys_flag=0):
            return self.table.setdefault(topic, TC(queue_nums, queue_nums, perm))

    with DefaultMessageStore(small_config(str(tmp_path))) as store:
        assert store.put_message(MessageExtBrokerInner(topic="Existing", body=b"failed", queue_id=0)).is_ok()

        async def main() -> None:
            server = RemotingServer("127.0.0.1", 0)
            proc = SendMessageProcessor(store, RetryTopics(), store_host="127.0.0.1:10911", cluster_name="C")
            proc._put = lambda msgs: PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)  # type: ignore[method-assign]
            server.register_processor(36, proc, ProcessorPool("send", 4, 100))
            await server.start()
            client = RemotingClient()
            try:
                back = RemotingCommand(code=36, ext_fields={"offset": 0, "group": "G", "delayLevel": 0})
                r = await client.invoke(f"127.0.0.1:{server.port}", back)
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE")
            finally:
                await client.close()
                await server.close()

        asyncio.run(asyncio.wait_for(main(), 30))
