"""POP over remoting, the same scenarios against `pumice broker` and RocketMQ 5.3.3's broker (its
remoting port; the proxy is not in the way): the requests the 5.x remoting client sends
(tests/helpers/pop_client.py), and the expectations both meet.

- pop two messages, ack one: the other comes back with reconsumeTimes 1 under its topic, its
  handle naming the retry topic; the acked one never comes back;
- orderly pops (order=true) over two queues: one message per queue in flight, the next only
  after the ack;
- bad requests get 5.3.3's codes (but a request without its int fields: 5.3.3 reads them as 0
  and answers an empty pop, POLLING_TIMEOUT; Pumice answers SYSTEM_ERROR naming the field).

5.3.3 revives through its timer (the checkpoint is due 1 s before its revive time, then the
revive scan's margins): with a 2 s invisible time the scenario took 6.4 s there, 4.2 s on Pumice.
The 5.3.3 is the worker's shared one (tests/conftest.py's ``rocketmq5_shared``), made to refuse
unknown groups (``autoCreateSubscriptionGroup=false``, at run time) while the module runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from pumice.common.message import MessageExt
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers import pop_client
from tests.helpers.clusters import Cluster, call, req, run
from tests.helpers.pop_client import PopClient, Popped, send_all
from tests.helpers.rocketmq5 import RocketMQ5


@dataclass
class Server:
    name: str
    ns: str
    br: str
    broker_name: str
    cluster: str


@pytest.fixture(scope="module", params=["pumice", "rocketmq5"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root: Path = tmp_path_factory.mktemp(request.param)
    if request.param == "pumice":
        c = Cluster(root, "autoCreateSubscriptionGroup=false\n")
        try:
            yield Server("pumice", c.ns, c.br, "broker-t", "TestCluster")
        finally:
            c.close()
    else:  # the worker's shared 5.3.3, made to refuse unknown groups while the module runs
        r: RocketMQ5 = request.getfixturevalue("rocketmq5_shared")
        auto_create_subscription_group(r.broker_addr, False)
        try:
            yield Server("rocketmq5", r.namesrv, r.broker_addr, r.broker_name, r.cluster)
        finally:
            auto_create_subscription_group(r.broker_addr, True)


def auto_create_subscription_group(broker: str, on: bool) -> None:
    """The broker's ``autoCreateSubscriptionGroup`` at run time (UPDATE_BROKER_CONFIG)."""
    body = f"autoCreateSubscriptionGroup={str(on).lower()}\n".encode()
    (r,) = call(broker, None, req(RequestCode.UPDATE_BROKER_CONFIG, body))
    assert r.code == ResponseCode.SUCCESS, r.remark


async def setup(s: Server, topic: str, group: str, queues: int = 1) -> PopClient:
    return await pop_client.setup(s.ns, s.br, topic, group, queues, broker_name=s.broker_name)


async def revive_queue(c: PopClient, cluster: str, queue_id: int) -> list[MessageExt]:
    """Every record of a revive queue (the shared 5.3.3's holds other modules' first), bounded."""
    records: list[MessageExt] = []
    for _ in range(1000):
        more = await c.pull(f"rmq_sys_REVIVE_LOG_{cluster}", queue_id, records[-1].queue_offset + 1 if records else 0)
        if not more:
            break
        records += more
    return records


def test_not_acked_comes_back_with_attempt_2_the_acked_never(server: Server) -> None:
    async def go() -> None:
        c = await setup(server, "RefPopExp", "RefGExp")
        try:
            await send_all(c, "RefPopExp", [b"keep", b"lose"])
            first = await c.pop_until("RefGExp", "RefPopExp", 2, invisible_ms=2000)
            assert sorted(p.body for p in first) == [b"keep", b"lose"]
            keep = next(p for p in first if p.body == b"keep")
            assert (await c.ack("RefGExp", "RefPopExp", keep)).code == ResponseCode.SUCCESS
            back = await c.pop_until("RefGExp", "RefPopExp", 1, timeout_s=30, invisible_ms=60_000)
            assert [(p.body, p.msg.reconsume_times, p.msg.topic, p.info.retry) for p in back] == [
                (b"lose", 1, "RefPopExp", "1")]  # fmt: skip
            assert (await c.ack("RefGExp", "RefPopExp", back[0])).code == ResponseCode.SUCCESS
            # the checkpoint in the revive queue the handle names (5.3.3's timer moved it there by now)
            records = await revive_queue(c, server.cluster, first[0].info.revive_qid)
            cks = [orjson.loads(m.body) for m in records if m.tags == "ck"]
            mine = [ck for ck in cks if ck.get("c") == "RefGExp" and ck.get("t") == "RefPopExp"]
            assert mine, cks
            assert sorted(mine[0]) == ["bm", "bn", "c", "d", "it", "n", "pt", "q", "reviveTime", "ro", "so", "t"], mine
        finally:
            await c.close()

    run(go(), 90)


def test_orderly_pops_one_in_flight_per_queue(server: Server) -> None:
    async def go() -> None:
        c = await setup(server, "RefPopFifo", "RefGFifo", queues=2)
        fifo = {"order": "true", "n": 1, "invisible_ms": 60_000}
        try:
            await send_all(c, "RefPopFifo", [b"A1", b"B1", b"A2", b"B2"], queues=2)
            got: list[Popped] = []
            deadline = time.monotonic() + 20
            while len(got) < 2 and time.monotonic() < deadline:
                got += await c.pop("RefGFifo", "RefPopFifo", poll_ms=1000, **fifo)
            assert sorted(p.body for p in got) == [b"A1", b"B1"] and all(p.info.is_order for p in got)
            assert await c.pop("RefGFifo", "RefPopFifo", **fifo) == []  # both queues wait for their acks
            a1 = next(p for p in got if p.body == b"A1")
            assert (await c.ack("RefGFifo", "RefPopFifo", a1)).code == ResponseCode.SUCCESS
            (a2,) = await c.pop_until("RefGFifo", "RefPopFifo", 1, **fifo)
            assert a2.body == b"A2" and a2.msg.reconsume_times == 0
        finally:
            await c.close()

    run(go(), 60)


def test_bad_requests_get_the_same_codes(server: Server) -> None:
    async def go() -> None:
        c = await setup(server, "RefPopBad", "RefGBad")
        try:
            await send_all(c, "RefPopBad", [b"x"])
            (p,) = await c.pop_until("RefGBad", "RefPopBad", 1, invisible_ms=60_000)
            codes = {
                "unknown group": (await c.pop_raw("RefNoSuchGroup", "RefPopBad")).code,
                "unknown topic": (await c.pop_raw("RefGBad", "RefNoSuchTopic")).code,
                "33 messages": (await c.pop_raw("RefGBad", "RefPopBad", n=33)).code,
                "queue 5 of 1": (await c.pop_raw("RefGBad", "RefPopBad", queue_id=5)).code,
                "born 10 s ago": (
                    await c.pop_raw("RefGBad", "RefPopBad", bornTime=int(time.time() * 1000) - 10_000)
                ).code,
                "nothing to pop": (await c.pop_raw("RefGBad", "RefPopBad")).code,
                "no queueId": (
                    await c.invoke(RequestCode.POP_MESSAGE, {"consumerGroup": "RefGBad", "topic": "RefPopBad"})
                ).code,
            }
            for name, bad in (("handle of 3 fields", "1 2 3"), ("empty handle", ""),
                              ("handle of letters", "a b c d e f g h")):  # fmt: skip
                fields = {**c._ack_fields("RefGBad", "RefPopBad", p), "extraInfo": bad}
                codes[name] = (await c.invoke(RequestCode.ACK_MESSAGE, fields)).code
            fields = {**c._ack_fields("RefGBad", "RefPopBad", p), "offset": 99}
            codes["ack offset 99"] = (await c.invoke(RequestCode.ACK_MESSAGE, fields)).code
            fields = {**c._ack_fields("RefGBad", "RefPopBad", p), "queueId": 7}
            codes["ack queue 7"] = (await c.invoke(RequestCode.ACK_MESSAGE, fields)).code
            past = Popped(p.msg, p.handle.rsplit(" ", 1)[0] + " 1")
            codes["change past the end"] = (await c.change_invisible_time("RefGBad", "RefPopBad", past, 10)).code
            codes["empty batch ack"] = (await c.invoke(RequestCode.BATCH_ACK_MESSAGE, {}, b'{"acks":[]}')).code
            codes["ack"] = (await c.ack("RefGBad", "RefPopBad", p)).code
            codes["ack again"] = (await c.ack("RefGBad", "RefPopBad", p)).code
            assert codes == {
                "unknown group": ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                "unknown topic": ResponseCode.TOPIC_NOT_EXIST,
                "33 messages": ResponseCode.INVALID_PARAMETER, "queue 5 of 1": ResponseCode.INVALID_PARAMETER,
                "born 10 s ago": ResponseCode.POLLING_TIMEOUT, "nothing to pop": ResponseCode.POLLING_TIMEOUT,
                # missing int fields: 5.3.3 reads them as 0 (an empty pop); Pumice names the field
                "no queueId": ResponseCode.SYSTEM_ERROR if server.name == "pumice" else ResponseCode.POLLING_TIMEOUT,
                "handle of 3 fields": ResponseCode.SYSTEM_ERROR,
                "empty handle": ResponseCode.SYSTEM_ERROR, "handle of letters": ResponseCode.SYSTEM_ERROR,
                "ack offset 99": ResponseCode.NO_MESSAGE, "ack queue 7": ResponseCode.MESSAGE_ILLEGAL,
                "change past the end": ResponseCode.NO_MESSAGE, "empty batch ack": ResponseCode.NO_MESSAGE,
                "ack": ResponseCode.SUCCESS, "ack again": ResponseCode.SUCCESS,
            }, server.name  # fmt: skip
        finally:
            await c.close()

    run(go(), 60)


pytestmark = pytest.mark.timeout(300)
