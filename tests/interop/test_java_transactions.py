"""Transactional messages with the official Java client (rocketmq-client 4.9.8's
TransactionMQProducer) against `pumice broker`: commit, rollback, UNKNOW then a check-back that
commits or rolls back, checks exhausted (TRANS_CHECK_MAX_TIME_TOPIC) and one of those resumed
(RESUME_CHECK_HALF_MESSAGE), and a broker restart between the half message and its check.

As in 4.9, a half still within its CHECK_IMMUNITY_TIME_IN_SECONDS is stored again at each
pass and each pass counts toward transactionCheckMax.

The module's broker checks every 0.5 s, after 1 s (transactionTimeOut), at most 3 times. As in
4.9, a check the broker cannot send (the producer group has no connection: a Java producer
registers at its heartbeat, so the drivers heartbeat every 0.5 s) still counts toward
transactionCheckMax.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from pumice.client.admin import AsyncMQAdmin
from pumice.client.exceptions import MQClientError
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import stop
from tests.helpers.interop import create_topic
from tests.helpers.java_driver import JavaDriver

BROKER_CONF = "transactionTimeOut=1000\ntransactionCheckInterval=500\ntransactionCheckMax=3\n"


def sent_of(driver: JavaDriver, count: int) -> dict[int, dict[str, Any]]:
    driver.wait_event("done", 60)
    assert not driver.of("error"), driver.of("error")
    sent = {e["i"]: e for e in driver.of("sent")}
    assert sorted(sent) == list(range(count)) and all(e["status"] == "SEND_OK" for e in sent.values())
    return sent


def wait_discarded(cluster, n: int, timeout_s: float = 20) -> None:
    """Wait until TRANS_CHECK_MAX_TIME_TOPIC holds ``n`` messages and is routed."""

    async def wait() -> None:
        async with AsyncMQAdmin(cluster.ns) as admin:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    if sum(q.max_offset for q in await admin.topic_status("TRANS_CHECK_MAX_TIME_TOPIC")) >= n:
                        return
                except MQClientError:
                    pass  # not routed yet
                assert time.monotonic() < deadline, "the discarded halves never reached TRANS_CHECK_MAX_TIME_TOPIC"
                await asyncio.sleep(0.2)

    asyncio.run(wait())


def resume_check(cluster, msg_id: str) -> tuple[int, str | None]:
    """RESUME_CHECK_HALF_MESSAGE, as DefaultMQAdminExt.resumeCheckHalfMessage sends it."""

    async def call() -> tuple[int, str | None]:
        client = RemotingClient()
        try:
            req = RemotingCommand(code=RequestCode.RESUME_CHECK_HALF_MESSAGE, ext_fields={"msgId": msg_id})
            r = await client.invoke(cluster.br, req, timeout_s=10)
            return r.code, r.remark
        finally:
            await client.close()

    return asyncio.run(call())


def received_by_i(consumer: JavaDriver) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for m in consumer.received():
        out[int(m["props"]["i"])].append(m)
    return out


def test_commit_rollback_and_unknown_then_checked_commit(java, interop_cluster) -> None:
    """60 transactions: local transactions answer COMMIT, ROLLBACK and UNKNOW in turn; the
    broker checks each UNKNOW one and the producer then commits it. The 40 committed are each
    delivered once, under their topic with their transactionId as msgId; the 20 rolled back
    never; only the UNKNOW ones are checked."""
    create_topic(interop_cluster, "JTx")
    consumer = java("push", name="consumer", topic="JTx", group="CTx", duration=90)
    consumer.wait_event("started", 30)
    tx = java("transact", name="tx", topic="JTx", group="PTx", count=60, states="commit,rollback,unknown",
              check="commit", label="tx", heartbeat_ms=500, duration=60)  # fmt: skip
    sent = sent_of(tx, 60)
    assert [sent[i]["state"] for i in range(3)] == ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"]
    committed = {i for i in range(60) if i % 3 != 1}
    consumer.wait_for(lambda d: set(received_by_i(d)) >= committed, 60, "the 40 committed messages")
    time.sleep(2)  # rolled-back halves would show up by now
    got = received_by_i(consumer)
    assert set(got) == committed
    for i, ms in got.items():
        assert len(ms) == 1, (i, ms)
        m = ms[0]
        assert (m["topic"], m["bodyText"], m["msgId"]) == ("JTx", f"tx-{i}", sent[i]["transactionId"])
        # as 4.9: the committed record keeps the half's properties
        assert m["props"]["TRAN_MSG"] == "true" and m["props"]["PGROUP"] == "PTx", m["props"]
        assert m["props"]["REAL_TOPIC"] == "JTx"
    checked = {e["i"] for e in tx.of("checked")}
    assert checked == {i for i in range(60) if i % 3 == 2}
    for e in tx.of("checked"):
        assert (e["topic"], e["bodyText"]) == ("JTx", f"tx-{e['i']}")  # the half under its real topic
        assert e["transactionId"] == sent[e["i"]]["transactionId"]


def test_a_check_that_rolls_back_and_checks_that_run_out(java, run_java, interop_cluster) -> None:
    """UNKNOW at send: one producer's check answers ROLLBACK (checked once, never delivered);
    the other's keeps answering UNKNOW, so after transactionCheckMax (3) checks its halves go
    to TRANS_CHECK_MAX_TIME_TOPIC and are checked no more."""
    create_topic(interop_cluster, "JTxCheck")
    consumer = java("push", name="consumer", topic="JTxCheck", group="CTxCheck", duration=90)
    consumer.wait_event("started", 30)
    roll = java("transact", name="roll", topic="JTxCheck", group="PRoll", count=3, states="unknown",
                check="rollback", label="roll", heartbeat_ms=500, duration=60)  # fmt: skip
    never = java("transact", name="never", topic="JTxCheck", group="PNever", count=3, states="unknown",
                 check="unknown", label="never", heartbeat_ms=500, duration=60)  # fmt: skip
    sent_of(roll, 3)
    sent_of(never, 3)
    roll.wait_for(lambda d: {e["i"] for e in d.of("checked")} == {0, 1, 2}, 30, "a check of each")
    never.wait_for(lambda d: {e["i"] for e in d.of("checked") if e["checks"] == 3} == {0, 1, 2}, 40, "3 checks each")
    wait_discarded(interop_cluster, 3)
    discarded = [
        e for e in run_java("pull", topic="TRANS_CHECK_MAX_TIME_TOPIC", group="CTxDiscarded")
        if e["event"] == "received"
    ]  # fmt: skip
    assert sorted(m["bodyText"] for m in discarded) == ["never-0", "never-1", "never-2"]
    time.sleep(3)  # six more check passes: nothing more is checked or delivered
    assert collections.Counter(e["i"] for e in roll.of("checked")) == {0: 1, 1: 1, 2: 1}
    assert collections.Counter(e["i"] for e in never.of("checked")) == {0: 3, 1: 3, 2: 3}
    assert consumer.received() == []
    # the dashboard's resumeCheckHalfMessage: a discarded half is checked again, from its first check
    again = next(m for m in discarded if m["bodyText"] == "never-1")
    assert resume_check(interop_cluster, again["offsetMsgId"]) == (ResponseCode.SUCCESS, None)
    never.wait_for(lambda d: len([e for e in d.of("checked") if e["i"] == 1]) >= 4, 20, "never-1 checked again")
    wait_discarded(interop_cluster, 4)  # three more checks, then discarded again
    assert collections.Counter(e["i"] for e in never.of("checked")) == {0: 3, 1: 6, 2: 3}
    # anything but a half message is refused, and so is a msgId that is not one
    plain = next(e for e in run_java("produce", topic="JTxCheck", count=1, label="plain") if e["event"] == "sent")
    code, remark = resume_check(interop_cluster, plain["offsetMsgId"])
    assert code == ResponseCode.SYSTEM_ERROR and "not a half message" in (remark or ""), remark
    code, remark = resume_check(interop_cluster, "not-an-id")
    assert code == ResponseCode.SYSTEM_ERROR and "is not an offset message id" in (remark or ""), remark


def test_a_half_survives_a_broker_restart_and_is_checked_after_it(java, interop_cluster) -> None:
    """Two half messages left UNKNOW; the broker is stopped at once (before transactionTimeOut)
    and started again. The restarted broker finds them (the half queue and the check's offsets
    are on disk), checks them, the producer commits, and each is delivered once."""
    c = interop_cluster
    create_topic(c, "JTxRestart")
    tx = java("transact", name="tx", topic="JTxRestart", group="PTxRestart", count=2, states="unknown",
              check="commit", label="rs", heartbeat_ms=500, duration=60)  # fmt: skip
    sent = sent_of(tx, 2)
    stop(c.broker)
    # the producer reconnects at its next heartbeat (10 s); as in 4.9, a check with no producer
    # to ask counts toward transactionCheckMax, so this broker allows more
    conf = c.tmp / "broker.conf"
    before = conf.read_text()
    conf.write_text(before + "transactionCheckMax=60\n")
    try:
        c.broker = c.start_broker()
    finally:
        conf.write_text(before)
    consumer = java("push", name="consumer", topic="JTxRestart", group="CTxRestart", duration=60)
    consumer.wait_for(lambda d: len(d.received()) >= 2, 40, "both messages, committed after the restart")
    time.sleep(2)
    got = received_by_i(consumer)
    assert {i: len(ms) for i, ms in got.items()} == {0: 1, 1: 1}
    assert {ms[0]["msgId"] for ms in got.values()} == {s["transactionId"] for s in sent.values()}
    assert {e["i"] for e in tx.of("checked")} == {0, 1}
