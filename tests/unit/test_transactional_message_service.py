"""Transactional messages over a real store: the half form, END_TRANSACTION's checks and records
(through SendMessageProcessor on a loopback connection), and the check pass."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.send_message_processor import SendMessageProcessor
from pumice.broker.topic_config_manager import TopicConfigManager
from pumice.broker.transactional_message_service import TransactionalMessageService
from pumice.common.message import MessageExt
from pumice.common.message_decoder import decode_message, decode_message_id
from pumice.common.mix_all import CID_SYS_RMQ_TRANS as SYS_TRANS_GROUP
from pumice.common.mix_all import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC as CHECK_MAX_TIME_TOPIC
from pumice.common.mix_all import RMQ_SYS_TRANS_HALF_TOPIC as HALF_TOPIC
from pumice.common.mix_all import RMQ_SYS_TRANS_OP_HALF_TOPIC as OP_TOPIC
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import ProcessorPool, RemotingServer
from pumice.remoting.response_code import ResponseCode
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched

HOST = (b"\x7f\x00\x00\x01", 10911)


def make(
    tmp_path,
) -> tuple[DefaultMessageStore, TopicConfigManager, ConsumerOffsetManager, TransactionalMessageService]:
    store = DefaultMessageStore(small_config(str(tmp_path / "s")))
    store.load()
    store.start()
    topics = TopicConfigManager(str(tmp_path / "topics.json"), "broker-a", "DefaultCluster")
    offsets = ConsumerOffsetManager(str(tmp_path / "offsets.json"))
    return store, topics, offsets, TransactionalMessageService(store, topics, offsets, HOST, "127.0.0.1:10911")


def half_request(n: int, topic: str = "TxTopic", queue_id: int = 2) -> RemotingCommand:
    props = f"TRAN_MSG\x01true\x02PGROUP\x01TxPG\x02UNIQ_KEY\x01U{n}\x02DELAY\x013\x02n\x01{n}"
    fields = {"a": "TxPG", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 4, "g": 1, "h": 0, "i": props}
    return RemotingCommand(code=310, ext_fields=fields, body=f"half-{n}".encode())


def end(group: str, queue_offset: int, commit_log_offset: int, state: int) -> RemotingCommand:
    fields = {"producerGroup": group, "tranStateTableOffset": queue_offset, "commitLogOffset": commit_log_offset,
              "commitOrRollback": state, "fromTransactionCheck": "false", "msgId": "U",
              "transactionId": "U"}  # fmt: skip
    return RemotingCommand(code=37, ext_fields=fields)


def serve_send_codes(
    store: DefaultMessageStore, proc: SendMessageProcessor, main: Callable[[RemotingClient, str], Awaitable[None]]
) -> None:
    """Run ``main(client, address)`` against ``proc`` serving 310 and 37 on a loopback port;
    everything stopped after, the store too."""

    async def serve() -> None:
        server = RemotingServer("127.0.0.1", 0)
        for code in (310, 37):
            server.register_processor(code, proc, ProcessorPool("send", 4, 100))
        await server.start()
        c = RemotingClient()
        try:
            await main(c, f"127.0.0.1:{server.port}")
        finally:
            await c.close()
            await server.close()

    try:
        asyncio.run(asyncio.wait_for(serve(), 30))
    finally:
        store.shutdown()


def test_end_transaction_checks_the_half_then_commits_or_rolls_back(tmp_path) -> None:
    store, topics, _, service = make(tmp_path)
    topics.create_topic_in_send_message_back_method("TxTopic", 4, 6)
    proc = SendMessageProcessor(store, topics, store_host="127.0.0.1:10911", cluster_name="DefaultCluster",
                                transactions=service)  # fmt: skip

    async def main(c: RemotingClient, addr: str) -> None:
        sent = []
        for n in range(2):
            r = await c.invoke(addr, half_request(n))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("2", str(n))  # the half queue's
            sent.append((n, decode_message_id(r.ext_fields["msgId"])[1]))
        wait_dispatched(store)
        half = store.look_message_by_offset(sent[0][1])
        assert half is not None and (half.topic, half.queue_id, half.sys_flag & 0xC) == (HALF_TOPIC, 0, 0)
        assert (half.properties["REAL_TOPIC"], half.properties["REAL_QID"]) == ("TxTopic", "2")
        assert "DELAY" not in half.properties  # a half is never delayed
        assert store.get_max_offset_in_queue("TxTopic", 2) == 0  # invisible to consumers
        (_, phy0), (_, phy1) = sent
        for request, remark in (
            (end("OtherPG", 0, phy0, 8), "The producer group wrong"),
            (end("TxPG", 1, phy0, 8), "The transaction state table offset wrong"),
            (end("TxPG", 0, phy0 + 1, 8), "Find prepared transaction message failed"),
        ):
            r = await c.invoke(addr, request)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        r = await c.invoke(addr, end("TxPG", 0, phy0, 7))
        assert r.code == ResponseCode.SYSTEM_ERROR and "is not 8 (COMMIT)" in r.remark
        assert (await c.invoke(addr, end("TxPG", 0, phy0, 0))).code == ResponseCode.SUCCESS  # UNKNOWN: left
        assert (await c.invoke(addr, end("TxPG", 0, phy0, 8))).code == ResponseCode.SUCCESS
        assert (await c.invoke(addr, end("TxPG", 1, phy1, 12))).code == ResponseCode.SUCCESS
        wait_dispatched(store)
        wait_dispatched(store)
        committed = store.get_message("G", "TxTopic", 2, 0, 10)
        assert committed is not None and committed.message_count == 1
        m = decode_message(committed.buffers[0])
        committed.release()
        assert (m.topic, m.queue_id, m.body, m.sys_flag & 0xC) == ("TxTopic", 2, b"half-0", 8)
        assert m.prepared_transaction_offset == phy0 and m.properties["UNIQ_KEY"] == "U0"
        ops = store.get_message("G", OP_TOPIC, 0, 0, 10)
        assert ops is not None
        bodies = [(decode_message(b).body, decode_message(b).properties["TAGS"]) for b in ops.buffers]
        ops.release()
        assert bodies == [(b"0", "d"), (b"1", "d")]

    serve_send_codes(store, proc, main)


def test_a_transaction_with_two_copies_of_its_half_is_committed_once(tmp_path) -> None:
    """The check stores a half again before it asks; a slow answer to one check and the answer
    to the next then commit two copies of one transaction. It is stored once (4.9 stores it
    twice); each copy still gets its op record, so the check stops asking about both."""
    store, topics, _, service = make(tmp_path)
    topics.create_topic_in_send_message_back_method("TxTopic", 4, 6)
    proc = SendMessageProcessor(store, topics, store_host="127.0.0.1:10911", cluster_name="DefaultCluster",
                                transactions=service)  # fmt: skip

    async def main(c: RemotingClient, addr: str) -> None:
        r = await c.invoke(addr, half_request(7))
        assert r.code == ResponseCode.SUCCESS, r.remark
        wait_dispatched(store)
        first = store.look_message_by_offset(decode_message_id(r.ext_fields["msgId"])[1])
        assert first is not None
        copy = service._put_back(store.look_message_by_offset(first.commit_log_offset))  # the check's re-put
        assert copy is not None and copy.commit_log_offset != first.commit_log_offset
        wait_dispatched(store)
        answers = await asyncio.gather(
            c.invoke(addr, end("TxPG", first.queue_offset, first.commit_log_offset, 8)),
            c.invoke(addr, end("TxPG", copy.queue_offset, copy.commit_log_offset, 8)),
        )
        assert [a.code for a in answers] == [ResponseCode.SUCCESS, ResponseCode.SUCCESS]
        wait_dispatched(store)
        assert store.get_max_offset_in_queue("TxTopic", 2) == 1, "the transaction was committed twice"
        assert store.get_max_offset_in_queue(OP_TOPIC, 0) == 2  # both copies are done
        # a later copy's ROLLBACK does not undo the commit, and stores nothing either
        again = service._put_back(store.look_message_by_offset(copy.commit_log_offset))
        assert again is not None
        wait_dispatched(store)
        r = await c.invoke(addr, end("TxPG", again.queue_offset, again.commit_log_offset, 12))
        assert r.code == ResponseCode.SUCCESS
        wait_dispatched(store)
        assert store.get_max_offset_in_queue("TxTopic", 2) == 1
        assert store.get_max_offset_in_queue(OP_TOPIC, 0) == 3

    serve_send_codes(store, proc, main)


def put_half(service: TransactionalMessageService, n: int, age_ms: int, **props: str) -> None:
    msg = MessageExtBrokerInner(
        topic="TxTopic", body=f"half-{n}".encode(), queue_id=1,
        properties={"TRAN_MSG": "true", "PGROUP": "TxPG", "UNIQ_KEY": f"U{n}", "n": str(n), **props},
        sys_flag=4, born_timestamp=int(time.time() * 1000) - age_ms, born_host=HOST, store_host=HOST,
    )  # fmt: skip
    r = service.store.put_messages((service.prepare_message(msg),))
    assert r.is_ok(), r


def test_the_check_asks_about_old_halves_without_an_op_record_and_discards_after_check_max(tmp_path) -> None:
    store, topics, offsets, service = make(tmp_path)
    asked: list[MessageExt] = []
    discarded: list[MessageExt] = []
    service.send_check = asked.append
    discard = service.discard_message
    service.discard_message = lambda m: (discarded.append(m), discard(m))[1]  # type: ignore[method-assign]

    def check() -> None:
        service.check(1000, 2, 72)
        time.sleep(0.05)
        store.dispatch_now()

    try:
        put_half(service, 0, age_ms=5000)  # old: checked
        put_half(service, 1, age_ms=5000)  # old, but rolled back: not checked
        put_half(service, 2, age_ms=0)  # young: the pass stops here
        store.dispatch_now()
        half1 = store.look_message_by_offset(store.get_commit_log_offset_in_queue(HALF_TOPIC, 0, 1))
        assert half1 is not None
        store.put_messages((service.op_message(half1),))
        store.dispatch_now()
        check()
        assert [m.properties["n"] for m in asked] == ["0"]
        first = asked[0]
        # asked about the copy stored at the queue's end, under the half's real topic's names
        assert first.queue_offset == 3 and first.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert offsets.query_offset(SYS_TRANS_GROUP, HALF_TOPIC, 0) == 2
        assert offsets.query_offset(SYS_TRANS_GROUP, OP_TOPIC, 0) == 1  # the op record is done with
        check()  # half 2 still young, so the copy of 0 waits behind it
        assert len(asked) == 1
        time.sleep(1.1)
        check()  # 2 (now old), then the copy of 0
        assert [m.properties["n"] for m in asked] == ["0", "2", "0"]
        assert asked[-1].properties["TRANSACTION_CHECK_TIMES"] == "2"
        for _ in range(3):
            check()  # the copy of 2 is asked about once more; then each has had its 2 checks
        assert [m.properties["n"] for m in asked] == ["0", "2", "0", "2"]
        assert sorted(m.properties["n"] for m in discarded) == ["0", "2"]
        assert topics.select_topic_config(CHECK_MAX_TIME_TOPIC) is not None
        assert store.get_max_offset_in_queue(CHECK_MAX_TIME_TOPIC, 0) == 2
        n_asked = len(asked)
        check()
        assert len(asked) == n_asked  # nothing left to check
    finally:
        store.shutdown()
