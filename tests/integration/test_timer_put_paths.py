"""Timer properties on the puts other than SEND_MESSAGE (issue 34's timer part), against a real
`pumice broker`: RocketMQ 5.3.3 runs its timer routing (HookUtils.handleScheduleMessage) as a
hook of every put, so

- a SEND_BATCH_MESSAGE whose own properties (the request's, appended to each message) have a
  timer property is held in ``rmq_sys_wheel_timer`` and each message comes on its topic when due;
  a timer property on a message inside the batch (which 5.3.3 ignores, storing it at once) is
  refused MESSAGE_ILLEGAL, naming it;
- the message an END_TRANSACTION commit puts is routed from the commit (the half is held as it
  is); a time past ``timerMaxDelaySec`` refuses the commit with 5.3.3's code and remark, the half
  kept for the check;
- CONSUMER_SEND_MSG_BACK's copy with a delay level drops the timer properties (the level wins).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from pumice.client import Message
from pumice.client.message import MessageExt, decode_messages
from pumice.client.message_batch import encode_batch
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, pull, req, run, running_cluster, send

pytestmark = pytest.mark.timeout(120)

PRECISION = 100
BOUND_MS = 1000  # as test_timer_messages: a shared 2-core CI
cluster = running_cluster("timerputs", f"timerPrecisionMs={PRECISION}\ntimerMaxDelaySec=60\n")
ILLEGAL = (
    "timer message illegal, the delay time should not be bigger than the max delay 60000ms; or if set del msg, "
    "the delay time should be bigger than the current time"
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def pull_until(c: RemotingClient, br: str, topic: str, want: int, timeout_s: float) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        r = await c.invoke(br, pull(topic, len(got), 0, sys_flag=0, suspend_ms=500), 10)
        if r.code == ResponseCode.SUCCESS:
            got += decode_messages(r.body)
        else:
            await asyncio.sleep(0.05)
    return got


async def pull_now(c: RemotingClient, br: str, topic: str, offset: int = 0, queue_id: int = 0) -> list[MessageExt]:
    r = await c.invoke(br, pull(topic, offset, queue_id, sys_flag=0, suspend_ms=0), 10)
    return decode_messages(r.body) if r.code == ResponseCode.SUCCESS else []


def batch_request(topic: str, body: bytes, header_props: str, queue_id: int = 0) -> RemotingCommand:
    return req(RequestCode.SEND_BATCH_MESSAGE, body, a="PG", b=topic, c="TBW102", d=4, e=queue_id, f=0, g=now_ms(), h=0,
               i=header_props, j=0, m="true")  # fmt: skip


def test_a_batch_with_a_timer_property_is_held_until_due(cluster: Cluster) -> None:
    topic = "TimerBatchT"
    ids = ["7F000001000000000000000000000B01", "7F000001000000000000000000000B02"]
    body = encode_batch([Message(topic, b"b-0"), Message(topic, b"b-1")], [{"UNIQ_KEY": i} for i in ids])

    async def scenario() -> tuple[int, list[MessageExt], list[MessageExt]]:
        c = RemotingClient()
        try:
            due = now_ms() + 1500
            r = await c.invoke(cluster.br, batch_request(topic, body, f"WAIT\x01true\x02TIMER_DELIVER_MS\x01{due}"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            early = await pull_now(c, cluster.br, topic)
            return due, early, await pull_until(c, cluster.br, topic, 2, 10)
        finally:
            await c.close()

    due, early, got = run(scenario())
    assert early == [], "the batch was stored on its topic at once"
    assert [m.body for m in got] == [b"b-0", b"b-1"]
    for m, uniq in zip(got, ids, strict=True):
        assert due <= m.store_timestamp <= due + BOUND_MS, m.store_timestamp - due
        assert m.properties["UNIQ_KEY"] == uniq and m.queue_id == 0 and "TIMER_OUT_MS" in m.properties


def test_a_timer_property_inside_a_batch_is_refused(cluster: Cluster) -> None:
    topic = "TimerBatchInnerT"
    body = encode_batch([Message(topic, b"i-0"), Message(topic, b"i-1")],
                        [{}, {"TIMER_DELAY_MS": "1500"}])  # fmt: skip

    async def scenario() -> tuple[RemotingCommand, list[MessageExt]]:
        c = RemotingClient()
        try:
            r = await c.invoke(cluster.br, batch_request(topic, body, "WAIT\x01true"))
            return r, await pull_now(c, cluster.br, topic)
        finally:
            await c.close()

    r, stored = run(scenario())
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "TIMER_DELAY_MS" in (r.remark or ""), (r.code, r.remark)
    assert stored == []


def half_message(topic: str, body: bytes, props: dict[str, str], queue_id: int = 0) -> RemotingCommand:
    r = send(topic, body, body.decode(), queue_id)
    r.ext_fields["f"] = 4  # TRANSACTION_PREPARED_TYPE
    r.ext_fields["i"] += "\x02TRAN_MSG\x01true\x02PGROUP\x01TimerTxPG" + "".join(
        f"\x02{k}\x01{v}" for k, v in props.items()
    )
    return r


def end_transaction(prepared: RemotingCommand) -> RemotingCommand:
    return req(RequestCode.END_TRANSACTION, producerGroup="TimerTxPG",
               tranStateTableOffset=prepared.ext_fields["queueOffset"],
               commitLogOffset=int(str(prepared.ext_fields["msgId"])[16:32], 16), commitOrRollback=8,
               fromTransactionCheck="false", msgId=prepared.ext_fields["msgId"])  # fmt: skip


def test_a_committed_transaction_is_held_until_due(cluster: Cluster) -> None:
    topic = "TimerTxT"

    async def scenario() -> tuple[int, list[MessageExt], list[MessageExt]]:
        c = RemotingClient()
        try:
            prepared = await c.invoke(cluster.br, half_message(topic, b"tx-0", {"TIMER_DELAY_MS": "1500"}))
            assert prepared.code == ResponseCode.SUCCESS, prepared.remark
            await asyncio.sleep(0.3)  # the time counts from the commit
            committed_at = now_ms()
            r = await c.invoke(cluster.br, end_transaction(prepared))
            assert r.code == ResponseCode.SUCCESS, r.remark
            early = await pull_now(c, cluster.br, topic)
            return committed_at, early, await pull_until(c, cluster.br, topic, 1, 10)
        finally:
            await c.close()

    committed_at, early, got = run(scenario())
    assert early == [], "the commit was stored on its topic at once"
    (m,) = got
    assert m.body == b"tx-0" and committed_at + 1500 <= m.store_timestamp <= committed_at + 1500 + BOUND_MS + 300
    assert "TIMER_OUT_MS" in m.properties and m.properties["TRAN_MSG"] == "true"


def test_a_commit_past_the_max_delay_is_refused_and_the_half_kept(cluster: Cluster) -> None:
    topic = "TimerTxFarT"

    async def scenario() -> tuple[RemotingCommand, RemotingCommand, list[MessageExt]]:
        c = RemotingClient()
        try:
            prepared = await c.invoke(cluster.br, half_message(topic, b"tx-far", {"TIMER_DELAY_SEC": "61"}))
            assert prepared.code == ResponseCode.SUCCESS, prepared.remark  # 5.3.3 checks at the commit
            first = await c.invoke(cluster.br, end_transaction(prepared))
            again = await c.invoke(cluster.br, end_transaction(prepared))  # the half is still there to end
            return first, again, await pull_now(c, cluster.br, topic)
        finally:
            await c.close()

    first, again, stored = run(scenario())
    assert (first.code, first.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL)
    assert (again.code, again.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL)
    assert stored == []


def test_a_send_back_with_a_delay_level_drops_the_timer_properties(cluster: Cluster) -> None:
    topic, group = "TimerBackT", "TimerBackGroup"

    async def scenario() -> list[MessageExt]:
        c = RemotingClient()
        try:
            r = send(topic, b"back-0", "k")
            r.ext_fields["i"] += f"\x02TIMER_DELIVER_MS\x01{now_ms() - 1000}"  # past: stored at once, as 5.3.3
            sent = await c.invoke(cluster.br, r)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            (m,) = await pull_now(c, cluster.br, topic)
            assert "TIMER_DELIVER_MS" in m.properties
            back = req(RequestCode.CONSUMER_SEND_MSG_BACK, offset=m.commit_log_offset, group=group, delayLevel=1,
                       originMsgId=m.msg_id, originTopic=topic, unitMode="false", maxReconsumeTimes=16)  # fmt: skip
            answer = await c.invoke(cluster.br, back)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            return await pull_until(c, cluster.br, f"%RETRY%{group}", 1, 10)
        finally:
            await c.close()

    (copy,) = run(scenario())
    assert copy.body == b"back-0" and copy.reconsume_times == 1
    assert "TIMER_DELIVER_MS" not in copy.properties, copy.properties  # 5.3.3: the delay level wins
