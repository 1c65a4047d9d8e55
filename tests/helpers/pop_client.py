"""A POP client over raw remoting requests, built as RocketMQ 5.x's remoting client builds them
(MQClientAPIImpl's popMessageAsync, ackMessageAsync, changeInvisibleTimeAsync,
batchAckMessageAsync): the handle from the response header, an orderly message's reconsumeTimes
from orderCountInfo, acks of retry messages on the retry topic the handle names. Used by
tests/integration/test_pop_consumption.py (Pumice) and tests/oracle5/test_pop_reference5.py
(Pumice and RocketMQ 5.3.3)."""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass

import orjson

from pumice.client.admin import AsyncMQAdmin
from pumice.common import extra_info_util as eiu
from pumice.common.message import MessageExt
from pumice.common.message_decoder import decode_message
from pumice.common.pop_check_point import REVIVE_GROUP
from pumice.common.subscription_group import SubscriptionGroupConfig
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import send


@dataclass
class Popped:
    msg: MessageExt
    handle: str

    @property
    def info(self) -> eiu.ExtraInfo:
        return eiu.split(self.handle)

    @property
    def body(self) -> bytes:
        return self.msg.body


def decode_records(body: bytes) -> list[MessageExt]:
    out, pos = [], 0
    while pos < len(body):
        m = decode_message(body, pos)
        out.append(m)
        pos += m.store_size
    return out


class PopClient:
    """What the 5.x remoting client sends (MQClientAPIImpl's popMessageAsync, ackMessageAsync,
    changeInvisibleTimeAsync, batchAckMessageAsync), over one connection."""

    def __init__(self, addr: str, broker_name: str = "broker-t") -> None:
        self.addr = addr
        self.broker_name = broker_name
        self.client = RemotingClient()

    async def invoke(self, code: int, fields: dict[str, object], body: bytes = b"", timeout_s: float = 5.0):
        return await self.client.invoke(self.addr, RemotingCommand(code=code, ext_fields=fields, body=body), timeout_s)

    async def pop_raw(self, group: str, topic: str, *, queue_id: int = -1, n: int = 32, invisible_ms: int = 2000,
                      poll_ms: int = 0, **extra: object) -> RemotingCommand:  # fmt: skip
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "maxMsgNums": n,
                  "invisibleTime": invisible_ms, "pollTime": poll_ms, "bornTime": int(time.time() * 1000),
                  "initMode": 0, "order": "false", **extra}  # fmt: skip
        return await self.invoke(RequestCode.POP_MESSAGE, fields, timeout_s=poll_ms / 1000 + 5)

    async def pop(self, group: str, topic: str, **kw: object) -> list[Popped]:
        """The messages of one pop, each with the handle the 5.x client builds."""
        r = await self.pop_raw(group, topic, **kw)  # type: ignore[arg-type]
        if r.code != ResponseCode.SUCCESS:
            assert r.code == ResponseCode.POLLING_TIMEOUT, (r.code, r.remark)
            return []
        h = r.ext_fields
        starts = eiu.parse_start_offset_info(h["startOffsetInfo"])
        offsets = eiu.parse_msg_offset_info(h["msgOffsetInfo"])
        counts = {}  # orderly pops: "<retry>@qo<queueId>%<offset>" or "<retry>@<queueId>" -> times popped before
        for one in filter(None, (h.get("orderCountInfo") or "").split(";")):
            retry, key, n = one.split(" ")
            counts[f"{retry}@{key}"] = int(n)
        out = []
        for m in decode_records(bytes(r.body)):
            handle = m.properties.get("POP_CK")
            if handle is None:
                key = eiu.start_offset_info_map_key(m.topic, m.queue_id)
                assert m.queue_offset in offsets[key]
                pop_time, invisible, revive_qid = int(h["popTime"]), int(h["invisibleTime"]), int(h["reviveQid"])
                handle = eiu.build_extra_info(
                    starts[key], pop_time, invisible, revive_qid, m.topic, self.broker_name, m.queue_id, m.queue_offset
                )
            flag = eiu.retry_flag(m.topic)
            n = counts.get(f"{flag}@qo{m.queue_id}%{m.queue_offset}", counts.get(f"{flag}@{m.queue_id}", 0))
            if n > 0:  # as the 5.x client sets an orderly message's reconsumeTimes
                m.reconsume_times = n
            out.append(Popped(m, handle))
        return out

    async def pop_until(self, group: str, topic: str, want: int, timeout_s: float = 10, **kw: object) -> list[Popped]:
        got: list[Popped] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            got += await self.pop(group, topic, poll_ms=1000, **kw)
        return got

    def _ack_fields(self, group: str, topic: str, p: Popped) -> dict[str, object]:
        info = p.info  # a retry message is acked on the retry topic its handle names
        return {"consumerGroup": group, "topic": eiu.real_topic(topic, group, info.retry), "queueId": info.queue_id,
                "extraInfo": p.handle, "offset": info.queue_offset}  # fmt: skip

    async def ack(self, group: str, topic: str, p: Popped) -> RemotingCommand:
        return await self.invoke(RequestCode.ACK_MESSAGE, self._ack_fields(group, topic, p))

    async def change_invisible_time(self, group: str, topic: str, p: Popped, ms: int) -> RemotingCommand:
        return await self.invoke(RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
                                 {**self._ack_fields(group, topic, p), "invisibleTime": ms})  # fmt: skip

    async def batch_ack(self, group: str, topic: str, popped: list[Popped]) -> RemotingCommand:
        acks = []
        for p in popped:
            info = p.info
            bits = 1 << (info.queue_offset - info.ck_queue_offset)
            raw = bits.to_bytes((bits.bit_length() + 7) // 8, "little")
            acks.append({"c": group, "t": topic, "r": info.retry, "so": info.ck_queue_offset, "q": info.queue_id,
                         "rq": info.revive_qid, "pt": info.pop_time, "it": info.invisible_time,
                         "b": base64.b64encode(raw).decode()})  # fmt: skip
        body = orjson.dumps({"acks": acks, "brokerName": self.broker_name})
        return await self.invoke(RequestCode.BATCH_ACK_MESSAGE, {}, body)

    async def pull(self, topic: str, queue_id: int, offset: int = 0) -> list[MessageExt]:
        r = await self.invoke(RequestCode.PULL_MESSAGE, {
            "consumerGroup": REVIVE_GROUP, "topic": topic, "queueId": queue_id, "queueOffset": offset,
            "maxMsgNums": 32, "sysFlag": 4, "subscription": "*", "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subVersion": 0,
        })  # fmt: skip
        return decode_records(bytes(r.body)) if r.code == ResponseCode.SUCCESS else []

    async def close(self) -> None:
        await self.client.close()


async def setup(ns: str, br: str, topic: str, group: str, queues: int = 1, retry_max_times: int = 16,
                broker_name: str = "broker-t") -> PopClient:  # fmt: skip
    """``topic`` and ``group`` made on the broker ``br`` (its admin codes); a client of it."""
    async with AsyncMQAdmin(ns) as admin:
        await admin.create_topic(topic, broker_addr=br, read_queue_nums=queues, write_queue_nums=queues)
        await admin.update_subscription_group(SubscriptionGroupConfig(group, retry_max_times=retry_max_times),
                                              broker_addr=br)  # fmt: skip
    return PopClient(br, broker_name)


async def _max_offset(c: PopClient, topic: str, queue_id: int) -> int:
    r = await c.invoke(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(r.ext_fields["offset"])


async def send_all(c: PopClient, topic: str, bodies: list[bytes], queues: int = 1) -> None:
    """Send ``bodies`` round the queues, then wait (at most 10 s) until each is in its
    ConsumeQueue: dispatch may trail a send's answer (the dispatch thread held it, under load)."""
    want = [await _max_offset(c, topic, q) for q in range(queues)]
    for i, b in enumerate(bodies):
        r = await c.client.invoke(c.addr, send(topic, b, b.decode(), i % queues))
        assert r.code == ResponseCode.SUCCESS, r.remark
        want[i % queues] += 1
    deadline = time.monotonic() + 10
    for q in range(queues):
        while (have := await _max_offset(c, topic, q)) < want[q]:
            assert time.monotonic() < deadline, f"{topic} queue {q}: {have} of {want[q]} dispatched after 10 s"
            await asyncio.sleep(0.02)
