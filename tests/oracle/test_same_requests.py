"""The same requests to Apache RocketMQ 4.9.7 and to Pumice, compared (issue 17).

A fresh RocketMQ name server and broker, and a fresh `pumice namesrv` and `pumice broker`, with
the same broker.conf settings, get the same set-up (topics ``DiffT`` with 4 queues, ``DiffRO``
read-only, ``DiffWO`` write-only; three messages to queue 0 and one to queue 1, sent with the
same fields, so that both CommitLogs hold the same records, less Pumice's MSG_REGION and TRACE_ON), then
the same recorded sequence of requests: valid ones, missing fields, out-of-range queue ids and
offsets, unknown topics and groups, permissions off, an unknown request code. For each, the
response codes must be equal, and so must the header fields clients read (offsets, queue ids,
the CommitLog offset in a msgId, suggestWhichBrokerId, min/max offsets, nextBeginOffset). A
remark's wording is not compared. The bodies keyed by MessageQueue (TopicStatsTable 202,
ConsumeStats 208, ResetOffsetBody 222 and the RESET_CONSUMER_CLIENT_OFFSET 220 each broker
sends this connection, a member of ``DiffHB`` by its heartbeat) are compared byte for byte,
less the store times and the group's TPS (``BODY_VARIES``).

``KNOWN`` lists the differences that remain, each with its reason (docs/COMPATIBILITY.md).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingTimeoutError
from tests.helpers.clusters import start
from tests.helpers.ports import free_port
from tests.helpers.request_codes import table
from tests.oracle.rocketmq_peer import JavaBroker, JavaNamesrv, stop_all

BORN = 1_700_000_000_000
SAME_CONF = "brokerClusterName=DiffCluster\nbrokerName=broker-d\nbrokerId=0\nflushDiskType=ASYNC_FLUSH\n"


@dataclass(frozen=True)
class Case:
    name: str
    code: int
    fields: dict[str, Any]
    body: bytes | None = None
    compare: tuple[str, ...] = ()  # header fields compared besides the code
    target: str = "broker"  # or "namesrv"
    compare_body: bool = False  # byte for byte, less BODY_VARIES


def send(topic: str, body: bytes, key: str, queue_id: int = 0, **extra: Any) -> dict[str, Any]:
    fields = {"a": "DiffPG", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": BORN, "h": 0,
              "i": f"TAGS\x01TagA\x02KEYS\x01{key}\x02UNIQ_KEY\x01{key.upper():0>32}", "j": 0, "k": False}  # fmt: skip
    return {k: v for k, v in (fields | extra).items() if v is not None}


def pull(topic: str = "DiffT", offset: int = 0, queue_id: int = 0, **extra: Any) -> dict[str, Any]:
    fields = {"consumerGroup": "DiffG", "topic": topic, "queueId": queue_id, "queueOffset": offset,
              "maxMsgNums": 32, "sysFlag": 4, "subscription": "*", "commitOffset": 0, "suspendTimeoutMillis": 0,
              "subVersion": 0}  # fmt: skip
    return {k: v for k, v in (fields | extra).items() if v is not None}


def topic_fields(topic: str, perm: int) -> dict[str, Any]:
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": perm,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}  # fmt: skip


PULLED = ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")
SENT = ("queueId", "queueOffset", "msgId")
CASES = [
    Case("send: next message of queue 0", 310, send("DiffT", b"d-3", "k3"), b"d-3", SENT),
    Case("send: queue id out of range", 310, send("DiffT", b"x", "kx", queue_id=9), b"x"),
    Case("send: topic not writeable", 310, send("DiffRO", b"x", "kx"), b"x"),
    Case("send: no topic field", 310, send("DiffT", b"x", "kx", b=None), b"x"),
    Case("send: illegal topic name", 310, send("bad topic!", b"x", "kx"), b"x"),
    Case("send: the default topic itself", 310, send("TBW102", b"x", "kx"), b"x"),
    Case(
        "send v1: next message of queue 1",
        10,
        {
            "producerGroup": "DiffPG",
            "topic": "DiffT",
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "queueId": 1,
            "sysFlag": 0,
            "bornTimestamp": BORN,
            "flag": 0,
            "properties": "KEYS\x01v1\x02UNIQ_KEY\x0100000000000000000000000000000V1\x02",
            "reconsumeTimes": 0,
            "unitMode": False,
            "batch": False,
        },
        b"v1",
        SENT,
    ),
    Case("pull: from 0", 11, pull(), None, PULLED),
    Case("pull: from 2", 11, pull(offset=2), None, PULLED),
    Case("pull: at the end", 11, pull(offset=4), None, PULLED),
    Case("pull: past the end", 11, pull(offset=100), None, PULLED),
    Case("pull: empty queue 3 at 5", 11, pull(offset=5, queue_id=3), None, PULLED),
    Case("pull: queue id out of range", 11, pull(queue_id=7)),
    Case("pull: unknown topic", 11, pull(topic="NoSuchTopic")),
    Case("pull: topic not readable", 11, pull(topic="DiffWO")),
    Case("pull: no subscription, no heartbeat", 11, pull(sysFlag=0, subscription=None)),
    Case("pull: no queueOffset", 11, pull(queueOffset=None)),
    Case(
        "query offset: none committed",
        14,
        {"consumerGroup": "DiffG", "topic": "DiffT", "queueId": 0},
        None,
        ("offset",),
    ),
    Case("update offset", 15, {"consumerGroup": "DiffG", "topic": "DiffT", "queueId": 0, "commitOffset": 2}),
    Case("query offset: committed", 14, {"consumerGroup": "DiffG", "topic": "DiffT", "queueId": 0}, None, ("offset",)),
    Case("query offset: unknown topic", 14, {"consumerGroup": "DiffG", "topic": "NoSuchTopic", "queueId": 0}),
    Case("max offset: queue 0", 30, {"topic": "DiffT", "queueId": 0}, None, ("offset",)),
    Case("max offset: empty queue", 30, {"topic": "DiffT", "queueId": 3}, None, ("offset",)),
    Case("max offset: unknown topic", 30, {"topic": "NoSuchTopic", "queueId": 0}, None, ("offset",)),
    Case("min offset: queue 0", 31, {"topic": "DiffT", "queueId": 0}, None, ("offset",)),
    Case("search by time: 0", 29, {"topic": "DiffT", "queueId": 0, "timestamp": 0}, None, ("offset",)),
    Case("search by time: far ahead", 29, {"topic": "DiffT", "queueId": 0, "timestamp": 1 << 50}, None, ("offset",)),
    Case("earliest store time", 32, {"topic": "DiffT", "queueId": 0}),
    Case("earliest store time: empty queue", 32, {"topic": "DiffT", "queueId": 3}),
    Case("view by offset: 0", 33, {"offset": 0}),
    Case("view by offset: nothing there", 33, {"offset": 1 << 30}),
    Case(
        "query by key", 12, {"topic": "DiffT", "key": "k1", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 1 << 50}
    ),
    Case("topic stats", 202, {"topic": "DiffT"}, compare_body=True),
    Case("topic stats: unknown topic", 202, {"topic": "NoSuchTopic"}),
    Case("consume stats", 208, {"consumerGroup": "DiffG", "topic": "DiffT"}, compare_body=True),
    Case("consumer list: unknown group", 38, {"consumerGroup": "NoSuchGroup"}),
    Case("consumer connections: unknown group", 203, {"consumerGroup": "NoSuchGroup"}),
    Case("producer connections: unknown group", 204, {"producerGroup": "NoSuchGroup"}),
    Case("all topic configs", 21, {}),
    Case("broker runtime info", 28, {}),
    Case("broker config", 26, {}),
    Case("who consumes", 300, {"topic": "DiffT"}),
    Case("an unknown request code", 9999, {}),
    Case("max offset: queue id out of range", 30, {"topic": "DiffT", "queueId": 99}, None, ("offset",)),
    Case("create topic: illegal name", 17, topic_fields("bad topic!", 6)),
    Case("create topic: the default topic", 17, topic_fields("TBW102", 7)),
    Case("create topic: no perm field", 17, {k: v for k, v in topic_fields("DiffX", 6).items() if k != "perm"}),
    Case("create subscription group", 200, {}, orjson.dumps({"groupName": "DiffG2", "consumeEnable": True})),
    Case("all subscription groups", 201, {}),
    Case("delete subscription group: unknown", 207, {"groupName": "NoSuchGroup"}),
    Case("all consumer offsets", 43, {}),
    Case("all delay offsets", 45, {}),
    Case(
        "heartbeat: a consumer group",
        34,
        {},
        orjson.dumps(
            {
                "clientID": "diff@1",
                "producerDataSet": [],
                "consumerDataSet": [
                    {
                        "groupName": "DiffHB",
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "unitMode": False,
                        "subscriptionDataSet": [
                            {
                                "topic": "DiffT",
                                "subString": "*",
                                "tagsSet": [],
                                "codeSet": [],
                                "subVersion": 1,
                                "expressionType": "TAG",
                                "classFilterMode": False,
                            }
                        ],
                    }
                ],
            }
        ),
    ),
    Case("consumer list: after the heartbeat", 38, {"consumerGroup": "DiffHB"}),
    *(
        Case(
            f"update offset: DiffHB queue {q}",
            15,
            {"consumerGroup": "DiffHB", "topic": "DiffT", "queueId": q, "commitOffset": q},
        )
        for q in range(4)
    ),
    Case(
        "reset offset: not forced",
        222,
        {"topic": "DiffT", "group": "DiffHB", "timestamp": -1, "isForce": False},
        compare_body=True,
    ),
    Case(
        "reset offset: forced, to time 0",
        222,
        {"topic": "DiffT", "group": "DiffHB", "timestamp": 0, "isForce": True},
        compare_body=True,
    ),
    # the broker asks this connection (GET_CONSUMER_STATUS_FROM_CLIENT), answered with MEMBER_STATUS
    Case("consumer status: an online group", 223, {"topic": "DiffT", "group": "DiffHB"}, compare_body=True),
    Case(
        "pull: by the heartbeat's subscription",
        11,
        pull(consumerGroup="DiffHB", sysFlag=0, subscription=None),
        None,
        PULLED,
    ),
    Case("unregister client", 35, {"clientID": "diff@1", "consumerGroup": "DiffHB"}),
    Case(
        "send back: no such message",
        36,
        {
            "offset": 1 << 30,
            "group": "DiffG",
            "delayLevel": 0,
            "originMsgId": "0" * 32,
            "originTopic": "DiffT",
            "unitMode": False,
            "maxReconsumeTimes": 16,
        },
    ),
    Case(
        "end transaction: no such half",
        37,
        {
            "producerGroup": "DiffPG",
            "tranStateTableOffset": 0,
            "commitLogOffset": 1 << 30,
            "commitOrRollback": 8,
            "fromTransactionCheck": False,
            "msgId": "0" * 32,
        },
    ),
    Case(
        "lock queues: empty body", 41, {}, orjson.dumps({"consumerGroup": "DiffG", "clientId": "diff@1", "mqSet": []})
    ),
    Case("delete topic: unknown", 215, {"topic": "NoSuchTopic"}),
    Case("ns: topic list", 206, {}, target="namesrv"),
    Case("ns: put a kv config", 100, {"namespace": "DiffNs", "key": "k", "value": "v"}, target="namesrv"),
    Case("ns: the kv config put", 101, {"namespace": "DiffNs", "key": "k"}, None, ("value",), target="namesrv"),
    Case("ns: kv list of a namespace", 219, {"namespace": "DiffNs"}, target="namesrv"),
    Case("ns: topics of the cluster", 224, {"cluster": "DiffCluster"}, target="namesrv"),
    Case("ns: topics of an unknown cluster", 224, {"cluster": "NoSuchCluster"}, target="namesrv"),
    Case("ns: route with no topic field", 105, {}, target="namesrv"),
    Case("ns: route of DiffT", 105, {"topic": "DiffT"}, target="namesrv"),
    Case("ns: route of an unknown topic", 105, {"topic": "NoSuchTopic"}, target="namesrv"),
    Case("ns: cluster info", 106, {}, target="namesrv"),
    Case("ns: a kv config that is not there", 101, {"namespace": "DiffNs", "key": "k"}, target="namesrv"),
    Case("ns: an unknown request code", 9999, {}, target="namesrv"),
]


def every_served_code() -> list[Case]:
    """Each request code Pumice serves (docs/COMPATIBILITY.md's table) that CASES does not send,
    with no fields at all, to the process that serves it; sent after CASES (some change state)."""
    sent = {(c.code, c.target) for c in CASES}
    out = []
    for code, (name, process, status) in sorted(table().items()):
        target = "namesrv" if process == "name server" else "broker" if process.startswith("broker") else None
        if target is not None and status.startswith("served") and (code, target) not in sent:
            out.append(Case(f"{name}: no fields", code, {}, target=target))
    return out


CASES += every_served_code()

# name -> why the answers differ (each listed in docs/COMPATIBILITY.md)
KNOWN: dict[str, str] = {
    "pull: past the end": "an offset past the end moves to 0 while the queue still starts at 0 (the seeds' "
    "rule): 4.9 moves it to the end, skipping every message a consumer whose offset came from an older store "
    "never read",
    **dict.fromkeys(
        ["send: next message of queue 0", "send v1: next message of queue 1"],
        "Pumice stores MSG_REGION and TRACE_ON in every sent message, as RocketMQ 5.x brokers do (4.9 only with "
        "a send hook): its records are longer, so the CommitLog offset in the msgId differs",
    ),
    "ns: an unknown request code": "4.9's name server never answers one (the client waits out its timeout); "
    "Pumice answers REQUEST_CODE_NOT_SUPPORTED",
    "GET_BROKER_CLUSTER_ACL_INFO: no fields": "with ACL off, 4.9's handler fails on the missing validator and "
    "sends no answer (the client waits out its timeout); Pumice answers SYSTEM_ERROR saying ACL is off",
    **dict.fromkeys(
        [
            f"{name}: no fields"
            for name in (
                "DELETE_KV_CONFIG",
                "WIPE_WRITE_PERM_OF_BROKER",
                "DELETE_TOPIC_IN_NAMESRV",
                "GET_BROKER_CONSUME_STATS",
                "ADD_WRITE_PERM_OF_BROKER",
            )
        ],
        "a request with no extFields at all: 4.9 checks required fields only when extFields is present "
        "(RemotingCommand.decodeCommandCustomHeader) and runs these with nulls, answering SUCCESS having "
        "done nothing; Pumice answers SYSTEM_ERROR naming the missing field",
    ),
}


@dataclass
class Side:
    ns: str
    broker: str


async def set_up(side: Side) -> None:
    c = RemotingClient()
    try:
        for topic, perm in (("DiffT", 6), ("DiffRO", 4), ("DiffWO", 2)):
            r = await c.invoke(side.broker, RemotingCommand(code=17, ext_fields=topic_fields(topic, perm)))
            assert r.code == 0, (side, topic, r.remark)
        for i, q in enumerate((0, 0, 0, 1)):
            fields = send("DiffT", b"d-%d" % i, f"k{i}", queue_id=q)
            r = await c.invoke(side.broker, RemotingCommand(code=310, ext_fields=fields, body=b"d-%d" % i))
            assert r.code == 0, (side, r.remark)
        for _ in range(100):  # dispatched
            r = await c.invoke(side.broker, RemotingCommand(code=30, ext_fields={"topic": "DiffT", "queueId": 0}))
            if r.ext_fields.get("offset") == "3":
                break
            await asyncio.sleep(0.05)
        for _ in range(100):  # registered with the topics
            r = await c.invoke(side.ns, RemotingCommand(code=105, ext_fields={"topic": "DiffWO"}))
            if r.code == 0:
                break
            await asyncio.sleep(0.2)
        assert r.code == 0, (side, "the name server never got the topics")
    finally:
        await c.close()


# a Java consumer's GetConsumerStatusBody (fastjson: MessageQueue keys bare, in its HashMap's order)
MEMBER_STATUS = (
    b'{"messageQueueTable":{'
    + b",".join(b'{"brokerName":"broker-d","queueId":%d,"topic":"DiffT"}:%d' % (q, 10 + q) for q in (3, 1, 2, 0))
    + b"}}"
)
# what differs between two brokers in a body: store times, a per-minute rate
BODY_VARIES = re.compile(rb'("(?:lastUpdateTimestamp|lastTimestamp|consumeTps)":)[-0-9.E]+')


def body_text(body: bytes | bytearray | memoryview | None) -> str:
    return BODY_VARIES.sub(rb"\1_", bytes(body or b"")).decode("utf-8", "replace")


def answer(r: RemotingCommand, case: Case) -> tuple[Any, ...]:
    fields = []
    for f in case.compare:
        v = r.ext_fields.get(f)
        fields.append(v[-16:] if f == "msgId" and v else v)  # the CommitLog offset (the hosts differ)
    if case.compare_body:
        fields.append(body_text(r.body))
    return (r.code, *fields)


async def ask_all(side: Side) -> dict[str, tuple[Any, ...]]:
    c = RemotingClient()
    out = {}
    notices: list[RemotingCommand] = []  # what the broker sends this connection (a consumer, by its heartbeat)

    def on_request(addr: str, cmd: RemotingCommand) -> None:
        notices.append(cmd)
        if cmd.code == 221:  # GET_CONSUMER_STATUS_FROM_CLIENT
            c.send_response(addr, cmd.make_response(0, body=MEMBER_STATUS))

    c.on_request = on_request
    try:
        for case in CASES:
            addr = side.broker if case.target == "broker" else side.ns
            req = RemotingCommand(code=case.code, ext_fields=dict(case.fields), body=case.body or b"")
            try:
                r = await c.invoke(addr, req, timeout_s=5)
            except RemotingTimeoutError:
                out[case.name] = ("no answer",)
                continue
            out[case.name] = answer(r, case)
        resets = [n for n in notices if n.code == 220]
        out["RESET_CONSUMER_CLIENT_OFFSET to the consumer"] = tuple(
            (n.ext_fields.get("timestamp"), str(n.ext_fields.get("isForce")).lower(), body_text(n.body)) for n in resets
        )
    finally:
        await c.close()
    return out


@pytest.fixture(scope="module")
def answers(peer_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("same-requests")
    started: list[Any] = []
    try:
        java_ns = JavaNamesrv(tmp / "java-ns", free_port(), classpath=peer_classpath)
        started.append(java_ns)
        jport = free_port()
        java_broker = JavaBroker(
            tmp / "java-broker",
            f"{SAME_CONF}listenPort={jport}\nnamesrvAddr={java_ns.addr}\nbrokerIP1=127.0.0.1\n"
            f"storePathRootDir={tmp}/java-store\nstorePathCommitLog={tmp}/java-store/commitlog\n"
            "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n",
            classpath=peer_classpath,
        )
        started.append(java_broker)
        ns_port, pport = free_port(), free_port()
        (tmp / "namesrv.conf").write_text(f"listenPort={ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp}/kv.json\n")
        started.append(start(["namesrv", "-c", str(tmp / "namesrv.conf")], "boot success"))
        (tmp / "broker.conf").write_text(
            f"{SAME_CONF}listenPort={pport}\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\n"
            f"namesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={tmp}/pumice-store\nmapedFileSizeCommitLog=1048576\n"
            "mapedFileSizeConsumeQueue=6000\npreallocateCommitLog=false\nprefaultCommitLog=false\n"
        )
        started.append(start(["broker", "-c", str(tmp / "broker.conf")], "boot success"))
        java = Side(java_ns.addr, java_broker.addr)
        pumice = Side(f"127.0.0.1:{ns_port}", f"127.0.0.1:{pport}")

        async def both() -> dict[str, Any]:
            await asyncio.gather(set_up(java), set_up(pumice))
            return {"java": await ask_all(java), "pumice": await ask_all(pumice)}

        yield asyncio.run(asyncio.wait_for(both(), 180))
    finally:
        stop_all(started)


def test_the_same_requests_get_the_same_answers(answers: dict[str, Any]) -> None:
    differ = {
        name: (answers["java"][name], answers["pumice"][name])
        for name in answers["java"]
        if answers["java"][name] != answers["pumice"][name]
    }
    unexplained = {name: d for name, d in differ.items() if name not in KNOWN}
    assert not unexplained, orjson.dumps(unexplained, option=orjson.OPT_INDENT_2).decode()
    assert set(KNOWN) <= set(differ), f"listed but gone (remove from KNOWN): {set(KNOWN) - set(differ)}"
