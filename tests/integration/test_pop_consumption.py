"""POP consumption (RocketMQ 5's POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
BATCH_ACK_MESSAGE) against real `pumice broker` processes, with raw remoting requests built as
the 5.x remoting client builds them (its handle from the response header, acks of retry
messages on the retry topic the handle names).

The broker revives every 200 ms (reviveInterval); invisible times are 1–2 s, so a message
not acked comes back 2–3.5 s after its pop (its revive time, ackTimeInterval's second, a pass).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest

from pumice.common import extra_info_util as eiu
from pumice.common.pop_check_point import PopCheckPoint
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers import pop_client
from tests.helpers.clusters import Cluster, run, running_cluster, stop
from tests.helpers.pop_client import PopClient, Popped, decode_records, send_all

CONF = "reviveInterval=200\nautoCreateSubscriptionGroup=false\nflushConsumerOffsetInterval=500\n"
cluster = running_cluster("pop", CONF)
REVIVE_TOPIC = "rmq_sys_REVIVE_LOG_TestCluster"
BROKER = "broker-t"


async def setup(cluster: Cluster, topic: str, group: str, queues: int = 1, retry_max_times: int = 16) -> PopClient:
    return await pop_client.setup(cluster.ns, cluster.br, topic, group, queues, retry_max_times, BROKER)


def test_pop_then_ack_nothing_comes_back(cluster: Cluster) -> None:
    async def go() -> None:
        c = await setup(cluster, "PopAck", "GAck", queues=2)
        try:
            bodies = [f"ack-{i}".encode() for i in range(4)]
            await send_all(c, "PopAck", bodies, queues=2)
            r = await c.pop_raw("GAck", "PopAck", invisible_ms=1000)
            assert r.code == ResponseCode.SUCCESS, r.remark
            h = r.ext_fields
            assert int(h["invisibleTime"]) == 1000 and 0 <= int(h["reviveQid"]) < 8 and int(h["restNum"]) == 0
            # 5.3.3's header formats: "<retry> <queueId> <start>" and "<retry> <queueId> <o1>,<o2>", ';'-joined
            assert sorted(h["startOffsetInfo"].split(";")) == ["0 0 0", "0 1 0"]
            assert sorted(h["msgOffsetInfo"].split(";")) == ["0 0 0,1", "0 1 0,1"]
            popped = await c.pop("GAck", "PopAck")  # invisible: nothing
            assert popped == []
            # the checkpoints, in the revive queue the handle names, as 5.3.3's PopCheckPoint JSON
            ck_msgs = await c.pull(REVIVE_TOPIC, int(h["reviveQid"]))
            cks = [PopCheckPoint.from_json(m.body) for m in ck_msgs if m.tags == "ck"]
            mine = [ck for ck in cks if ck.cid == "GAck"]
            assert sorted((ck.queue_id, ck.start_offset, ck.num, tuple(ck.queue_offset_diff)) for ck in mine) == [
                (0, 0, 2, (0, 1)), (1, 0, 2, (0, 1))]  # fmt: skip
            raw = orjson.loads(next(m.body for m in ck_msgs if m.tags == "ck"))
            assert list(raw) == sorted(raw) and {"so", "pt", "it", "bm", "n", "q", "t", "c", "d", "bn"} <= set(raw)

            first = [Popped(m, "") for m in decode_records(bytes(r.body))]
            # the handles the client builds from the header, acked one by one
            handles = []
            starts = eiu.parse_start_offset_info(h["startOffsetInfo"])
            for p in first:
                key = eiu.start_offset_info_map_key(p.msg.topic, p.msg.queue_id)
                handles.append(Popped(p.msg, eiu.build_extra_info(
                    starts[key], int(h["popTime"]), 1000, int(h["reviveQid"]), "PopAck", BROKER, p.msg.queue_id,
                    p.msg.queue_offset)))  # fmt: skip
            assert sorted(p.body for p in handles) == bodies
            for p in handles:
                a = await c.ack("GAck", "PopAck", p)
                assert a.code == ResponseCode.SUCCESS, a.remark
            await asyncio.sleep(3.0)  # past the invisible time, the ack interval and a revive pass
            assert await c.pop("GAck", "PopAck", poll_ms=500) == []
        finally:
            await c.close()

    run(go())


def test_not_acked_comes_back_with_attempt_2(cluster: Cluster) -> None:
    async def go() -> None:
        c = await setup(cluster, "PopExp", "GExp")
        try:
            await send_all(c, "PopExp", [b"keep", b"lose"])
            first = await c.pop("GExp", "PopExp", invisible_ms=1000)
            assert sorted(p.body for p in first) == [b"keep", b"lose"]
            assert all(p.msg.reconsume_times == 0 for p in first)
            t0 = time.monotonic()
            keep = next(p for p in first if p.body == b"keep")
            assert (await c.ack("GExp", "PopExp", keep)).code == ResponseCode.SUCCESS
            back = await c.pop_until("GExp", "PopExp", 1, invisible_ms=1000)
            waited = time.monotonic() - t0
            assert [p.body for p in back] == [b"lose"], [p.body for p in back]
            p = back[0]
            # attempt 2: reconsumeTimes 1, answered under its topic, its handle naming the retry topic
            assert p.msg.reconsume_times == 1 and p.msg.topic == "PopExp"
            assert p.info.retry == "1" and p.msg.properties.get("1ST_POP_TIME")
            assert 0.9 < waited < 6, waited
            assert (await c.ack("GExp", "PopExp", p)).code == ResponseCode.SUCCESS
            await asyncio.sleep(2.5)
            assert await c.pop("GExp", "PopExp", poll_ms=500) == []
        finally:
            await c.close()

    run(go())


def test_change_invisible_time_and_batch_ack(cluster: Cluster) -> None:
    async def go() -> None:
        c = await setup(cluster, "PopChg", "GChg")
        try:
            bodies = [b"a", b"b", b"c", b"d"]
            await send_all(c, "PopChg", bodies)
            popped = {p.body: p for p in await c.pop("GChg", "PopChg", invisible_ms=60_000)}
            assert sorted(popped) == bodies
            # b: visible again in 1 s (a nack); its old handle is acked by the change itself
            r = await c.change_invisible_time("GChg", "PopChg", popped[b"b"], 1000)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (
                int(r.ext_fields["invisibleTime"]) == 1000
                and int(r.ext_fields["reviveQid"]) == popped[b"b"].info.revive_qid
            )
            assert int(r.ext_fields["popTime"]) >= popped[b"b"].info.pop_time
            # a and c acked in one batch; d stays invisible for 60 s
            r = await c.batch_ack("GChg", "PopChg", [popped[b"a"], popped[b"c"]])
            assert r.code == ResponseCode.SUCCESS, r.remark
            back = await c.pop_until("GChg", "PopChg", 1, invisible_ms=1000)
            assert [p.body for p in back] == [b"b"] and back[0].msg.reconsume_times == 1
            assert (await c.ack("GChg", "PopChg", back[0])).code == ResponseCode.SUCCESS
            await asyncio.sleep(2.0)
            assert await c.pop("GChg", "PopChg", poll_ms=800) == []  # not a, c (acked) nor d (60 s)
        finally:
            await c.close()

    run(go())


def test_max_attempts_then_dlq_as_the_proxy_does(cluster: Cluster) -> None:
    """5.3.3's proxy moves a message whose reconsumeTimes reached maxAttempts (retryMaxTimes + 1)
    to %DLQ%<group> with CONSUMER_SEND_MSG_BACK (delayLevel −1, maxReconsumeTimes 0), then acks it."""

    async def go() -> None:
        c = await setup(cluster, "PopDlq", "GDlq", retry_max_times=1)
        try:
            await send_all(c, "PopDlq", [b"poison"])
            attempts = []
            p = None
            for _ in range(3):
                got = await c.pop_until("GDlq", "PopDlq", 1, invisible_ms=1000)
                assert len(got) == 1
                p = got[0]
                attempts.append(p.msg.reconsume_times + 1)
            assert attempts == [1, 2, 3]
            assert p is not None and p.msg.reconsume_times >= 1 + 1
            back = await c.invoke(RequestCode.CONSUMER_SEND_MSG_BACK, {
                "offset": p.msg.commit_log_offset, "group": "GDlq", "delayLevel": -1, "originMsgId": p.msg.msg_id,
                "originTopic": "PopDlq", "maxReconsumeTimes": 0})  # fmt: skip
            assert back.code == ResponseCode.SUCCESS, back.remark
            assert (await c.ack("GDlq", "PopDlq", p)).code == ResponseCode.SUCCESS
            dead = await c.pull("%DLQ%GDlq", 0)
            assert [m.body for m in dead] == [b"poison"]
            await asyncio.sleep(2.0)
            assert await c.pop("GDlq", "PopDlq", poll_ms=500) == []
        finally:
            await c.close()

    run(go())


def test_long_polling(cluster: Cluster) -> None:
    async def go() -> None:
        c = await setup(cluster, "PopPoll", "GPoll", queues=2)
        try:
            t0 = time.monotonic()
            waiting = asyncio.ensure_future(c.pop("GPoll", "PopPoll", poll_ms=5000))
            await asyncio.sleep(0.5)
            assert not waiting.done()
            await send_all(c, "PopPoll", [b"late"])
            got = await waiting
            assert [p.body for p in got] == [b"late"] and time.monotonic() - t0 < 2.5
            t0 = time.monotonic()
            r = await c.pop_raw("GPoll", "PopPoll", poll_ms=800)
            assert r.code == ResponseCode.POLLING_TIMEOUT and r.remark == "NO_MESSAGE_IN_QUEUE"
            assert 0.7 <= time.monotonic() - t0 < 2.5
        finally:
            await c.close()

    run(go())


def test_bad_requests_get_5_3_3_codes(cluster: Cluster) -> None:
    async def go() -> None:
        c = await setup(cluster, "PopBad", "GBad")
        try:
            await send_all(c, "PopBad", [b"x"])
            (p,) = await c.pop("GBad", "PopBad", invisible_ms=1000)
            r = await c.pop_raw("NoSuchGroup", "PopBad")
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "NoSuchGroup" in r.remark
            r = await c.pop_raw("GBad", "NoSuchTopic")
            assert r.code == ResponseCode.TOPIC_NOT_EXIST and "NoSuchTopic" in r.remark
            r = await c.pop_raw("GBad", "PopBad", n=33)
            assert r.code == ResponseCode.INVALID_PARAMETER and "greater than 32" in r.remark
            r = await c.pop_raw("GBad", "PopBad", queue_id=5)
            assert r.code == ResponseCode.INVALID_PARAMETER and "queueId[5] is illegal" in r.remark
            r = await c.pop_raw("GBad", "PopBad", bornTime=int(time.time() * 1000) - 10_000)
            assert r.code == ResponseCode.POLLING_TIMEOUT and "timeout too much" in r.remark
            r = await c.invoke(RequestCode.POP_MESSAGE, {"consumerGroup": "GBad", "topic": "PopBad"})
            assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in r.remark
            for bad in ("", "1 2 3", "a b c d e f g h", "0 1 2 3 9 broker-t 0 0"):
                fields = {**c._ack_fields("GBad", "PopBad", p), "extraInfo": bad}
                r = await c.invoke(RequestCode.ACK_MESSAGE, fields)
                assert r.code == ResponseCode.SYSTEM_ERROR and r.remark, (bad, r.code, r.remark)
            fields = {**c._ack_fields("GBad", "PopBad", p), "offset": 99}
            r = await c.invoke(RequestCode.ACK_MESSAGE, fields)
            assert r.code == ResponseCode.NO_MESSAGE and "offset is illegal" in r.remark
            r = await c.invoke(RequestCode.ACK_MESSAGE, {**c._ack_fields("GBad", "PopBad", p), "queueId": 7})
            assert r.code == ResponseCode.MESSAGE_ILLEGAL and "queueId[7] is illegal" in r.remark
            bad_rq = p.handle.split(" ")
            bad_rq[3] = "50"
            r = await c.invoke(RequestCode.ACK_MESSAGE, {**c._ack_fields("GBad", "PopBad", p),
                                                         "extraInfo": " ".join(bad_rq)})  # fmt: skip
            assert r.code == ResponseCode.MESSAGE_ILLEGAL and "reviveQid 50" in r.remark
            r = await c.change_invisible_time("GBad", "PopBad", Popped(p.msg, p.handle.rsplit(" ", 1)[0] + " 1"), 10)
            assert r.code == ResponseCode.NO_MESSAGE
            r = await c.invoke(RequestCode.BATCH_ACK_MESSAGE, {}, b"{not json")
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            r = await c.invoke(RequestCode.BATCH_ACK_MESSAGE, {}, b'{"acks":[]}')
            assert r.code == ResponseCode.NO_MESSAGE
            r = await c.invoke(RequestCode.BATCH_ACK_MESSAGE, {}, b'{"acks":[{"c":"GBad","b":"!!"}]}')
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            # an expired handle: SUCCESS as 5.3.3, and the message is back all the same
            back = await c.pop_until("GBad", "PopBad", 1, invisible_ms=60_000)
            assert [m.body for m in back] == [b"x"]
            assert (await c.ack("GBad", "PopBad", p)).code == ResponseCode.SUCCESS
            assert (await c.ack("GBad", "PopBad", back[0])).code == ResponseCode.SUCCESS
            # the broker is still there
            assert (await c.pop_raw("GBad", "PopBad")).code == ResponseCode.POLLING_TIMEOUT
        finally:
            await c.close()

    run(go())


@pytest.fixture
def own_cluster(tmp_path: Path):
    c = Cluster(tmp_path, CONF)
    try:
        yield c
    finally:
        c.close()


def test_sigkill_mid_flight_loses_nothing_unacked_and_redelivers_nothing_acked(own_cluster: Cluster) -> None:
    cluster = own_cluster

    async def before() -> list[bytes]:
        c = await setup(cluster, "PopKill", "GKill")
        try:
            await send_all(c, "PopKill", [f"k{i}".encode() for i in range(6)])
            a = await c.pop("GKill", "PopKill", n=2, invisible_ms=2000)
            assert [p.body for p in a] == [b"k0", b"k1"]
            assert (await c.ack("GKill", "PopKill", a[0])).code == ResponseCode.SUCCESS
            await asyncio.sleep(1.2)  # the offsets are persisted every 500 ms
            b = await c.pop("GKill", "PopKill", n=2, invisible_ms=2000)
            return [p.body for p in b]  # answered: its checkpoint is stored; killed before any ack
        finally:
            await c.close()

    second = run(before())
    assert second == [b"k2", b"k3"]
    cluster.broker.kill()
    cluster.broker.wait(10)
    cluster.broker = cluster.start_broker()

    async def after() -> list[Popped]:
        c = PopClient(cluster.br)
        try:
            got: list[Popped] = []
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline:
                got += await c.pop("GKill", "PopKill", poll_ms=1000, invisible_ms=60_000)
                if {p.body for p in got} >= {b"k1", b"k2", b"k3", b"k4", b"k5"} and time.monotonic() > deadline - 7:
                    break
            return got
        finally:
            await c.close()

    got = run(after())
    bodies = [p.body for p in got]
    assert b"k0" not in bodies, bodies  # acked before the kill: never again
    assert set(bodies) == {b"k1", b"k2", b"k3", b"k4", b"k5"}, bodies
    for p in got:
        if p.body in (b"k1",):
            assert p.msg.reconsume_times == 1  # popped, not acked: revived from its checkpoint


def test_query_assignment_and_set_message_request_mode(cluster: Cluster) -> None:
    """What a 5.x push consumer with clientRebalance off asks (QUERY_ASSIGNMENT), before and after
    ``mqadmin setConsumeMode -m POP`` (SET_MESSAGE_REQUEST_MODE)."""

    async def go() -> None:
        c = await setup(cluster, "PopQa", "GQa", queues=2)
        try:
            sub = {"topic": "PopQa", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1,
                   "classFilterMode": False, "expressionType": "TAG"}  # fmt: skip
            consumer = {"groupName": "GQa", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [sub],
                        "unitMode": False}  # fmt: skip
            hb = {"clientID": "cid-1", "producerDataSet": [], "consumerDataSet": [consumer]}
            r = await c.invoke(RequestCode.HEART_BEAT, {}, orjson.dumps(hb))
            assert r.code == ResponseCode.SUCCESS, r.remark
            query = orjson.dumps({"topic": "PopQa", "consumerGroup": "GQa", "clientId": "cid-1",
                                  "strategyName": "AVG", "messageModel": "CLUSTERING"})  # fmt: skip

            async def assignments() -> list[tuple[str, int, str]]:
                deadline = time.monotonic() + 15
                while True:
                    r = await c.invoke(RequestCode.QUERY_ASSIGNMENT, {}, query)
                    assert r.code == ResponseCode.SUCCESS, r.remark
                    got = orjson.loads(r.body).get("messageQueueAssignments")
                    if got or time.monotonic() > deadline:
                        return sorted((a["messageQueue"]["brokerName"], a["messageQueue"]["queueId"], a["mode"])
                                      for a in got or [])  # fmt: skip
                    await asyncio.sleep(0.3)  # the topic's route reaches the name server

            assert await assignments() == [(BROKER, 0, "PULL"), (BROKER, 1, "PULL")]
            mode = {"topic": "PopQa", "consumerGroup": "GQa", "mode": "POP", "popShareQueueNum": 0}
            r = await c.invoke(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, orjson.dumps(mode))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert await assignments() == [(BROKER, -1, "POP")]
            for topic, code in (
                ("%RETRY%GQa", ResponseCode.NO_PERMISSION),
                ("NoSuchTopic", ResponseCode.TOPIC_NOT_EXIST),
            ):
                r = await c.invoke(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, orjson.dumps({**mode, "topic": topic}))
                assert r.code == code, (topic, r.code, r.remark)
            r = await c.invoke(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, orjson.dumps({**mode, "consumerGroup": "NoG"}))
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            r = await c.invoke(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, b"[")
            assert r.code == ResponseCode.SYSTEM_ERROR
        finally:
            await c.close()

    run(go())


def test_fifo_two_message_groups_in_order_and_the_order_info_kept_across_a_restart(own_cluster: Cluster) -> None:
    """Orderly pops (order=true): message group A in queue 0, B in queue 1; a queue's next message
    only after its batch is acked (or visible again: then the same message, attempt 2)."""
    cluster = own_cluster
    fifo = {"order": "true", "n": 1}

    async def before() -> None:
        c = await setup(cluster, "PopFifo", "GFifo", queues=2)
        try:
            await send_all(c, "PopFifo", [b"A1", b"B1", b"A2", b"B2"], queues=2)
            p1 = await c.pop("GFifo", "PopFifo", invisible_ms=2000, **fifo)
            p2 = await c.pop("GFifo", "PopFifo", invisible_ms=2000, **fifo)
            firsts = {p.body: p for p in p1 + p2}
            assert sorted(firsts) == [b"A1", b"B1"], sorted(firsts)
            assert all(p.info.is_order for p in firsts.values())
            assert await c.pop("GFifo", "PopFifo", **fifo) == []  # both queues wait for their acks
            assert (await c.ack("GFifo", "PopFifo", firsts[b"A1"])).code == ResponseCode.SUCCESS
            (a2,) = await c.pop("GFifo", "PopFifo", invisible_ms=2000, **fifo)
            assert a2.body == b"A2" and a2.msg.reconsume_times == 0
            assert (await c.ack("GFifo", "PopFifo", a2)).code == ResponseCode.SUCCESS
            # B1 not acked: after its invisible time it comes again, not B2, with attempt 2
            again = await c.pop_until("GFifo", "PopFifo", 1, invisible_ms=60_000, **fifo)
            assert [(p.body, p.msg.reconsume_times) for p in again] == [(b"B1", 1)]
            assert (await c.ack("GFifo", "PopFifo", again[0])).code == ResponseCode.SUCCESS
            (b2,) = await c.pop("GFifo", "PopFifo", invisible_ms=60_000, **fifo)
            assert b2.body == b"B2"
            (cluster.tmp / "b2").write_text(b2.handle)
        finally:
            await c.close()

    run(before())
    stop(cluster.broker)
    info = orjson.loads((cluster.tmp / "store" / "config" / "consumerOrderInfo.json").read_bytes())
    assert set(info["table"]) == {"PopFifo@GFifo"} and info["table"]["PopFifo@GFifo"]["1"]["o"] == [1]
    cluster.broker = cluster.start_broker()

    async def after() -> None:
        c = PopClient(cluster.br)
        try:
            # B2 is still in flight after the restart: nothing to pop
            assert await c.pop("GFifo", "PopFifo", poll_ms=500, **fifo) == []
            handle = (cluster.tmp / "b2").read_text()
            info = eiu.split(handle)
            fields = {"consumerGroup": "GFifo", "topic": "PopFifo", "queueId": info.queue_id, "extraInfo": handle,
                      "offset": info.queue_offset}  # fmt: skip
            assert (await c.invoke(RequestCode.ACK_MESSAGE, fields)).code == ResponseCode.SUCCESS
            r = await c.invoke(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "GFifo", "topic": "PopFifo",
                                                                    "queueId": 1})  # fmt: skip
            assert int(r.ext_fields["offset"]) == 2
            assert await c.pop("GFifo", "PopFifo", poll_ms=500, **fifo) == []
        finally:
            await c.close()

    run(after())
