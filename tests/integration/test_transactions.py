"""Transactional messages with the Pumice client's TransactionProducer against real `pumice
namesrv` and `pumice broker` processes: commit, rollback, UNKNOW then checked, a producer gone
and another member of its group answering the check, and 1,000 concurrent transactions with
none lost or duplicated. (tests/interop runs the Java TransactionMQProducer.)

The broker checks every 0.3 s, after 1 s (transactionTimeOut).
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time

from pumice.client import (
    AsyncTransactionProducer,
    LitePullConsumer,
    LocalTransactionState,
    Message,
    SendStatus,
    TransactionProducer,
)
from pumice.client.message import MessageExt
from tests.helpers.clients import create_topic
from tests.helpers.clusters import Cluster, running_cluster

COMMIT, ROLLBACK, UNKNOW = (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
                            LocalTransactionState.UNKNOW)  # fmt: skip


cluster = running_cluster("tx", "transactionTimeOut=1000\ntransactionCheckInterval=300\ntransactionCheckMax=100\n")


class Listener:
    """Local transactions answer by the message's "state" property; checks answer ``check``."""

    def __init__(self, check: LocalTransactionState = COMMIT) -> None:
        self.check = check
        self.checked: list[str] = []
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState[msg.properties["state"]]

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        with self.lock:
            self.checked.append(msg.properties["n"])
        return self.check


def tx_message(topic: str, n: int, state: LocalTransactionState) -> Message:
    return Message(topic, f"tx-{n}".encode(), properties={"n": str(n), "state": state.name})


def consume(cluster: Cluster, topic: str, want: int, settle_s: float = 2.0, timeout_s: float = 60) -> list[MessageExt]:
    """Every message of ``topic`` (a new group, from the start): waits for ``want`` of them, then
    ``settle_s`` more for any that should not be there."""
    consumer = LitePullConsumer(f"C{topic}", cluster.ns, auto_commit=False)
    consumer.subscribe(topic, "*")
    consumer.start()
    got: list[MessageExt] = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            got += consumer.poll(0.5)
        settle = time.monotonic() + settle_s
        while time.monotonic() < settle:
            got += consumer.poll(0.2)
    finally:
        consumer.shutdown()
    return got


def test_commit_rollback_and_unknown_then_checked(cluster: Cluster) -> None:
    asyncio.run(create_topic(cluster, "PyTx"))
    listener = Listener(check=COMMIT)
    states = [COMMIT, ROLLBACK, UNKNOW] * 4
    with TransactionProducer("PyTxPG", cluster.ns, transaction_listener=listener) as p:
        results = [p.send_message_in_transaction(tx_message("PyTx", n, s)) for n, s in enumerate(states)]
        assert all(r.send_status is SendStatus.SEND_OK for r in results)
        assert [r.local_transaction_state for r in results] == states
        got = consume(cluster, "PyTx", 8)
    by_n = collections.Counter(m.properties["n"] for m in got)
    assert by_n == {str(n): 1 for n, s in enumerate(states) if s is not ROLLBACK}
    ids = {r.msg_id for r in results}
    for m in got:
        assert m.msg_id in ids and m.body == f"tx-{m.properties['n']}".encode()
        assert m.properties["TRAN_MSG"] == "true" and m.properties["PGROUP"] == "PyTxPG"
    assert sorted(set(listener.checked), key=int) == [str(n) for n, s in enumerate(states) if s is UNKNOW]


def test_a_check_rolls_back_and_another_member_of_the_group_answers(cluster: Cluster) -> None:
    """The producer that sent the halves is gone before the check; another producer of its group
    answers it. One answer rolls back, the other commits."""
    asyncio.run(create_topic(cluster, "PyTxHandOver"))
    first = TransactionProducer("PyHandPG", cluster.ns, transaction_listener=Listener(check=UNKNOW))
    first.start()
    try:
        keep = first.send_message_in_transaction(tx_message("PyTxHandOver", 0, UNKNOW))
        drop = first.send_message_in_transaction(tx_message("PyTxHandOver", 1, UNKNOW))
    finally:
        first.shutdown()

    class Other(Listener):
        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            super().check_local_transaction(msg)
            return COMMIT if msg.properties["n"] == "0" else ROLLBACK

    other = Other()
    with TransactionProducer("PyHandPG", cluster.ns, transaction_listener=other, instance_name="other"):
        got = consume(cluster, "PyTxHandOver", 1, settle_s=3)
    assert [m.msg_id for m in got] == [keep.msg_id] and drop.msg_id != keep.msg_id
    assert set(other.checked) == {"0", "1"}


def test_a_thousand_concurrent_transactions_none_lost_or_duplicated(cluster: Cluster) -> None:
    asyncio.run(create_topic(cluster, "PyTxMany"))
    listener = Listener(check=COMMIT)
    states = [COMMIT, ROLLBACK, UNKNOW, COMMIT]

    async def send_all() -> list[str]:
        async with AsyncTransactionProducer("PyManyPG", cluster.ns, transaction_listener=listener) as p:
            sem = asyncio.Semaphore(64)

            async def one(n: int) -> str:
                async with sem:
                    r = await p.send_message_in_transaction(tx_message("PyTxMany", n, states[n % 4]))
                    assert r.send_status is SendStatus.SEND_OK
                    return r.msg_id

            ids = await asyncio.gather(*(one(n) for n in range(1000)))
            # the UNKNOW ones are committed when the broker checks: stay up to answer
            deadline = time.monotonic() + 30
            while len(set(listener.checked)) < 250 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            return list(ids)

    ids = asyncio.run(send_all())
    assert len(set(ids)) == 1000
    got = consume(cluster, "PyTxMany", 750)
    counts = collections.Counter(m.properties["n"] for m in got)
    assert counts == {str(n): 1 for n in range(1000) if states[n % 4] is not ROLLBACK}
