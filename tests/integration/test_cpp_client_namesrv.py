"""The Apache C++ client (PyPI rocketmq==0.4.4) against `pumice namesrv` and a recording fake broker.

The C++ clients run in subprocesses (tests/integration/cpp_client.py). They are given the address of
a recording TCP proxy in front of a real `pumice namesrv` process, so the tests see every name server
request and reply; the route they get points at a fake in-memory broker served by our RemotingServer
in this process, which records every request (SEND_MESSAGE answered with SUCCESS, pulls served from
memory). This proves the C++ client, our name server and our remoting codec interoperate, and
exercises the subprocess helpers that the broker's own C++ tests will use.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import orjson
import pytest

from pumice.common.message_decoder import create_message_id, encode_record
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_codec import FrameDecoder
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import Channel, ProcessorPool, RemotingServer
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import register, running_namesrv
from tests.integration import cpp_client

pytestmark = [
    pytest.mark.skipif(not cpp_client.platform_supported(), reason="rocketmq==0.4.4 ships only a Linux x86_64 .so"),
    pytest.mark.timeout(240),
]

TOPIC = "CppTopic"
GROUP = "CppProducerGroup"


@pytest.fixture(scope="module", autouse=True)
def cpp_client_importable() -> None:
    """Fail (never skip) when the platform is supported but the client does not import."""
    reason = cpp_client.missing_reason()
    if reason:
        pytest.fail(reason, pytrace=False)


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[str]:
    with running_namesrv(tmp_path) as addr:
        yield addr


# -- a fake broker and a recording proxy --------------------------------------------------------


class FakeBroker:
    """An in-memory broker that records every request.

    SEND_MESSAGE(10) stores the message (a batch as its records) and answers SUCCESS with string
    msgId/queueId/queueOffset; PULL_MESSAGE(11) serves v1 records from memory (PULL_NOT_FOUND after a
    short wait when there are none); HEART_BEAT(34), UNREGISTER_CLIENT(35), GET_CONSUMER_LIST_BY_GROUP(38),
    QUERY_CONSUMER_OFFSET(14, always 0), UPDATE_CONSUMER_OFFSET(15) and GET_MAX/MIN_OFFSET(30/31) are
    answered as a Java broker would; anything else gets REQUEST_CODE_NOT_SUPPORTED.
    """

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0, name="FakeBroker")
        self.server.register_default_processor(self, ProcessorPool("fake", workers=8, capacity=1000))
        self.requests: list[RemotingCommand] = []
        self.replies: list[RemotingCommand] = []
        self.queues: dict[tuple[str, int], list[bytes]] = defaultdict(list)
        self.commit_offset = 0
        self.consumers: dict[str, set[str]] = defaultdict(set)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def codes(self) -> list[int]:
        return [r.code for r in self.requests]

    def of(self, code: int) -> list[RemotingCommand]:
        return [r for r in self.requests if r.code == code]

    async def process_request(self, channel: Channel, req: RemotingCommand) -> RemotingCommand:
        self.requests.append(req)
        resp = await self._answer(req)
        self.replies.append(resp)
        return resp

    def _store(self, topic: str, qid: int, body: bytes, props: str, flag: int, sys_flag: int, born: int) -> str:
        q = self.queues[(topic, qid)]
        store_host = (bytes([127, 0, 0, 1]), self.server.port)
        rec = encode_record(
            body=body, topic=topic, properties=props, queue_id=qid, flag=flag, queue_offset=len(q),
            physical_offset=self.commit_offset, sys_flag=sys_flag, born_timestamp=born,
            store_timestamp=int(time.time() * 1000), store_host=store_host,
        )  # fmt: skip
        q.append(rec)
        msg_id = create_message_id(store_host, self.commit_offset)
        self.commit_offset += len(rec)
        return msg_id

    async def _answer(self, req: RemotingCommand) -> RemotingCommand:
        ok = ResponseCode.SUCCESS
        if req.code == 10:
            topic = req.ext_str("topic", required=True) or ""
            qid = req.ext_int("queueId", required=True) or 0
            sys_flag = req.ext_int("sysFlag", 0) or 0
            born = req.ext_long("bornTimestamp", 0) or 0
            first = len(self.queues[(topic, qid)])
            if req.ext_bool("batch"):
                items = _batch_records(bytes(req.body))
            else:
                items = [(bytes(req.body), req.ext_str("properties", "") or "", req.ext_int("flag", 0) or 0)]
            ids = [self._store(topic, qid, b, p, f, sys_flag, born) for b, p, f in items]
            return req.make_response(ok, ext_fields={"msgId": ",".join(ids), "queueId": str(qid),
                                                     "queueOffset": str(first)})  # fmt: skip
        if req.code == 11:
            topic = req.ext_str("topic", required=True) or ""
            qid = req.ext_int("queueId", required=True) or 0
            offset = req.ext_long("queueOffset", required=True) or 0
            n = max(1, req.ext_int("maxMsgNums", 32) or 32)
            q = self.queues.get((topic, qid), [])
            if offset >= len(q):  # a short hold, then NOT_FOUND: keeps long-polling consumers from spinning
                for _ in range(10):
                    await asyncio.sleep(0.05)
                    if offset < len(self.queues.get((topic, qid), [])):
                        break
                q = self.queues.get((topic, qid), [])
            fields = {"suggestWhichBrokerId": "0", "minOffset": "0", "maxOffset": str(len(q))}
            if offset < len(q):
                recs = q[offset : offset + n]
                fields["nextBeginOffset"] = str(offset + len(recs))
                return req.make_response(ok, ext_fields=fields, body=b"".join(recs))
            fields["nextBeginOffset"] = str(min(offset, len(q)))
            code = ResponseCode.PULL_NOT_FOUND if offset == len(q) else ResponseCode.PULL_OFFSET_MOVED
            return req.make_response(code, ext_fields=fields)
        if req.code == 34:
            hb = orjson.loads(bytes(req.body)) if req.body else {}
            for c in hb.get("consumerDataSet") or []:
                self.consumers[c.get("groupName", "")].add(hb.get("clientID", ""))
            return req.make_response(ok)
        if req.code == 38:
            ids = sorted(self.consumers.get(req.ext_str("consumerGroup", "") or "", ()))
            return req.make_response(ok, body=orjson.dumps({"consumerIdList": ids}))
        if req.code in (14, 31):
            return req.make_response(ok, ext_fields={"offset": "0"})
        if req.code == 30:
            q = self.queues.get((req.ext_str("topic", "") or "", req.ext_int("queueId", 0) or 0), [])
            return req.make_response(ok, ext_fields={"offset": str(len(q))})
        if req.code in (15, 35):
            return req.make_response(ok)
        return req.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")


def _batch_records(body: bytes) -> list[tuple[bytes, str, int]]:
    """(body, properties, flag) of each record: int32 totalSize | int32 magic | int32 bodyCRC |
    int32 flag | int32 bodyLen + body | int16 propsLen + props."""
    out = []
    pos = 0
    while pos + 20 <= len(body) and len(out) < 10_000:
        size, _magic, _crc, flag, blen = struct.unpack_from(">iiiii", body, pos)
        if size <= 0:
            break
        b = body[pos + 20 : pos + 20 + blen]
        (plen,) = struct.unpack_from(">h", body, pos + 20 + blen)
        props = body[pos + 22 + blen : pos + 22 + blen + plen].decode()
        out.append((b, props, flag))
        pos += size
    return out


class RecordingProxy:
    """A TCP proxy in front of the name server that decodes and records both directions."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.requests: list[RemotingCommand] = []
        self.responses: list[RemotingCommand] = []
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        host, port = self.upstream.rsplit(":", 1)
        ur, uw = await asyncio.open_connection(host, int(port))

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter, sink: list[RemotingCommand]) -> None:
            dec = FrameDecoder()
            try:
                while data := await r.read(65536):
                    sink.extend(dec.feed(data))
                    w.write(data)
                    await w.drain()
            finally:
                w.close()

        a = asyncio.ensure_future(pump(cr, uw, self.requests))
        b = asyncio.ensure_future(pump(ur, cw, self.responses))
        self._tasks |= {a, b}
        await asyncio.gather(a, b, return_exceptions=True)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)


def parse_properties(s: str) -> dict[str, str]:
    out = {}
    for pair in s.split("\x02"):
        if pair:
            k, _, v = pair.partition("\x01")
            out[k] = v
    return out


async def _with_fake_cluster(
    namesrv: str, topics: dict[str, int], body: Callable[[FakeBroker, RecordingProxy], Awaitable[None]]
) -> None:
    broker = FakeBroker()
    await broker.server.start()
    proxy = RecordingProxy(namesrv)
    await proxy.start()
    registrar = RemotingClient()  # keeps its connection open: the name server drops a broker on close
    try:
        r = await registrar.invoke(namesrv, register("broker-a", broker.addr, topics))
        assert r.code == ResponseCode.SUCCESS, r.remark
        await body(broker, proxy)
    finally:
        await registrar.close()
        await proxy.close()
        await broker.server.close()


# -- tests ---------------------------------------------------------------------------------------


def test_cpp_producer_sends_through_pumice_namesrv(namesrv: str, tmp_path: Path) -> None:
    home = tmp_path / "cpp-home"

    async def body(broker: FakeBroker, proxy: RecordingProxy) -> None:
        run = await asyncio.to_thread(
            cpp_client.produce, proxy.addr, TOPIC, GROUP, 3, home, tag="TagA", keys_prefix="k"
        )
        info = run.describe() + f"\nbroker saw {broker.codes()}\nnamesrv saw {[r.code for r in proxy.requests]}"

        # the producer reported success for each message
        assert run.returncode == 0, info
        sent = run.of("sent")
        assert [s["i"] for s in sent] == [0, 1, 2], info
        assert all(s["ok"] and s["status"] == "OK" for s in sent), info
        assert run.of("shutdown") and not run.of("shutdown")[0]["timed_out"], info

        # it asked our name server for the topic's route, and got it
        routes = [r for r in proxy.requests if r.code == 105]
        assert routes and routes[0].ext_str("topic") == TOPIC, info
        assert routes[0].language == "CPP", info
        by_opaque = {r.opaque: r for r in proxy.responses}
        reply = by_opaque[routes[0].opaque]
        assert reply.code == ResponseCode.SUCCESS, info
        assert orjson.loads(reply.body)["brokerDatas"][0]["brokerAddrs"] == {"0": broker.addr}

        # the fake broker got three SEND_MESSAGE (10) with full field names
        sends = [r for r in broker.requests if r.code == 10]
        assert len(sends) == 3, info
        for i, req in enumerate(sends):
            ext = req.ext_fields
            assert req.language == "CPP", req
            assert ext["producerGroup"] == GROUP and ext["topic"] == TOPIC, ext
            assert ext["defaultTopic"] == "TBW102", ext
            assert req.ext_int("defaultTopicQueueNums") == 4, ext
            assert 0 <= (req.ext_int("queueId") or 0) < 4, ext
            assert req.ext_int("sysFlag") == 0 and req.ext_int("flag") == 0, ext
            assert (req.ext_long("bornTimestamp") or 0) > 1_500_000_000_000, ext
            props = parse_properties(ext["properties"])
            assert props["TAGS"] == "TagA" and props["KEYS"] == f"k{i}", props
            assert props["WAIT"] == "true" and props["UNIQ_KEY"], props
            assert bytes(req.body) == f"body-{i}".encode()
            # the C++ client hands the user its own UNIQ_KEY as the message id
            assert sent[i]["msg_id"] == props["UNIQ_KEY"], info
            # and the queue offset from our reply
            qid = req.ext_int("queueId")
            assert sent[i]["offset"] == sum(1 for s in sends[:i] if s.ext_int("queueId") == qid), info

        # nothing unexpected reached the broker, and every request got a reply
        assert set(broker.codes()) <= {10, 34, 35}, info
        assert len(broker.replies) == len(broker.requests)

        # the C++ log went to the temporary HOME
        assert list((home / "logs" / "rocketmq-cpp").glob("*rocketmq-cpp.log*")), info

    asyncio.run(asyncio.wait_for(_with_fake_cluster(namesrv, {TOPIC: 4}, body), 180))


def test_cpp_batch_falls_back_to_tbw102(namesrv: str, tmp_path: Path) -> None:
    """An unknown topic: 105(T) → 17 from our name server → 105(TBW102) → one code-10 batch."""
    topic = "CppAutoTopic"

    async def body(broker: FakeBroker, proxy: RecordingProxy) -> None:
        run = await asyncio.to_thread(
            cpp_client.produce, proxy.addr, topic, GROUP, 3, tmp_path / "home", tag="TagB", keys_prefix="b", batch=True
        )
        info = run.describe() + f"\nbroker saw {broker.codes()}\nnamesrv saw {[r.code for r in proxy.requests]}"
        assert run.returncode == 0, info
        (sent,) = run.of("sent")
        assert sent["ok"] and sent["status"] == "OK" and sent["offset"] == 0, info

        asked = [r.ext_str("topic") for r in proxy.requests if r.code == 105]
        assert asked[:2] == [topic, "TBW102"], info
        first = {r.opaque: r for r in proxy.responses}[proxy.requests[0].opaque]
        assert first.code == ResponseCode.TOPIC_NOT_EXIST and topic in (first.remark or ""), info

        (send,) = broker.of(10)
        assert send.ext_str("topic") == topic and send.ext_str("defaultTopic") == "TBW102", send.ext_fields
        assert send.ext_str("batch") == "1" and send.ext_bool("batch"), send.ext_fields
        records = _batch_records(bytes(send.body))
        assert [b for b, _, _ in records] == [b"body-0", b"body-1", b"body-2"]
        for i, (_, props, _) in enumerate(records):
            p = parse_properties(props)
            assert p["TAGS"] == "TagB" and p["KEYS"] == f"b{i}" and p["UNIQ_KEY"], p
        assert len(broker.queues[(topic, send.ext_int("queueId") or 0)]) == 3

    asyncio.run(asyncio.wait_for(_with_fake_cluster(namesrv, {"TBW102": 8}, body), 180))


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_cpp_consumers_read_back_what_the_cpp_producer_sent(namesrv: str, tmp_path: Path, mode: str) -> None:
    """Exercises the consume helpers end to end (through the fake broker's in-memory queues)."""
    group = f"CppConsumer{mode.title()}"

    async def body(broker: FakeBroker, proxy: RecordingProxy) -> None:
        run = await asyncio.to_thread(
            cpp_client.produce, proxy.addr, TOPIC, GROUP, 4, tmp_path / "p", tag="TagA", keys_prefix="k"
        )
        assert run.returncode == 0, run.describe()
        uniq = {s["msg_id"] for s in run.of("sent")}
        seen = len(broker.requests)

        run = await asyncio.to_thread(cpp_client.consume, mode, proxy.addr, TOPIC, group, 4, tmp_path / "c")
        info = run.describe() + f"\nbroker saw {broker.codes()[seen:]}"
        assert run.returncode == 0, info
        msgs = run.of("message")
        assert sorted(m["body"] for m in msgs) == [f"body-{i}" for i in range(4)], info
        assert {m["msg_id"] for m in msgs} == uniq, info  # the C++ consumer shows UNIQ_KEY as the id
        assert all(m["tags"] == "TagA" and m["keys"] == "k" + m["body"][-1] for m in msgs), info
        assert all(m["topic"] == TOPIC and m["queue_offset"] == 0 for m in msgs), info

        mine = broker.requests[seen:]
        pulls = [r for r in mine if r.code == 11]
        assert pulls and all(r.ext_str("consumerGroup") == group for r in pulls), info
        heartbeats = [orjson.loads(bytes(r.body)) for r in mine if r.code == 34]
        if mode == "push":
            assert heartbeats, info  # sent during start()
            (cdata,) = heartbeats[0]["consumerDataSet"]
            # enums as ordinals, not names: PUSH = 1, CLUSTERING = 1, CONSUME_FROM_LAST_OFFSET = 0
            assert (cdata["groupName"], cdata["consumeType"], cdata["messageModel"]) == (group, 1, 1), cdata
            subs = {s["topic"] for s in cdata["subscriptionDataSet"]}
            assert subs == {TOPIC, f"%RETRY%{group}"}, cdata
            assert {r.ext_int("sysFlag") for r in pulls} <= {6, 7}, info
            assert pulls[0].ext_long("suspendTimeoutMillis") == 15000, info
            assert {14, 15, 38} <= {r.code for r in mine}, info
        else:
            # the pull consumer heartbeats from a timer (10 ms after start): a short run may send none
            for hb in heartbeats:
                (cdata,) = hb["consumerDataSet"]
                assert (cdata["groupName"], cdata["consumeType"], cdata["messageModel"]) == (group, 0, 1), cdata
            assert {r.ext_int("sysFlag") for r in pulls} == {4}, info
            assert pulls[0].ext_long("suspendTimeoutMillis") == 20000, info
        unregisters = [i for i, r in enumerate(mine) if r.code == 35]
        assert unregisters and mine[unregisters[0]].ext_str("consumerGroup") == group, info
        # a heartbeat from the client's timer can still follow UNREGISTER_CLIENT during shutdown (observed)
        assert {r.code for r in mine[unregisters[0] :]} <= {34, 35}, info

    asyncio.run(asyncio.wait_for(_with_fake_cluster(namesrv, {TOPIC: 4}, body), 180))
