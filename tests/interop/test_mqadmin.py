"""mqadmin (rocketmq-tools 4.9.8) against `pumice namesrv` + `pumice broker`, as a user runs it.

Every command ``MQAdminStartup`` 4.9.8 lists (56: ``test_help_lists_every_command`` checks the
list and that each has a job here) is run as ``java ... MQAdminStartup <command> -n <ns> ...``
against one real name server and broker for the module, with the setup it needs: a topic with
16 messages (8, a pause, then 8 more, two of each per queue), a Python producer that stays up,
a Python push consumer online and a group whose consumer has stopped. Each job asserts on what
the command prints, the way it prints it against a Java broker (the formats are those of the
4.9.8 sources), and, where the command changes something, on what the name server or broker
reports afterwards. The ACL commands fail on this broker, which has ACL off, with a remark that
says so (the ``ACL_OFF`` table; tests/interop/test_java_acl.py runs them with ACL on).

mqadmin 4.9 exits 0 when a command fails (MQAdminStartup prints the SubCommandException's stack
trace to stderr and returns); only a bad command line exits 1. So every check reads the
printed text: ``Out.ok`` is exit 0 with nothing on stderr.

Each call starts a JVM (about 1 s of CPU, ended when the command returns: tests/helpers/mqadmin.py):
the jobs of a phase run WORKERS (3) at a time (a thread pool); a job's own calls run one after the other. Phases
run in order: read-only commands; commands that change state (each job on its own topic or
group); sendMessage with its trace alone (mqadmin gives its trace send 500 ms at shutdown: with
two more JVMs at once on 2 cores, a CI run lost both tries' traces); wipeWritePerm/addWritePerm
alone (any registration in between would undo the wipe);
resetOffsetByTime with the consumer online. The tests are parametrized by job, each re-raising
its job's failure.

mqadmin needs ``<rocketmq.home.dir>/conf/logback_tools.xml`` (tests/interop/rocketmq-home: WARN
and above to stderr). It writes ``consumerStatus``'s running-info files under its working
directory (the module's tmp dir here) and ``queryMsgBy*``'s message bodies to
/tmp/rocketmq/msgbodys (fixed in its sources).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from pumice.broker.admin_broker_processor import ACL_OFF_REMARK
from pumice.client import ConsumeStatus, Message, MessageQueue, Producer, PushConsumer
from pumice.client.pull_consumer import ConsumeFromWhere
from pumice.common.message_decoder import decode_message_id
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.interop import InteropCluster
from tests.helpers.mqadmin import ROCKETMQ_HOME, MQAdmin, Out, mqadmin_classpath
from tests.helpers.waiting import eventually

# the broker registers every 60 s (the longest Pumice takes): wipeWritePerm lasts until the next
# registration, here as on a Java broker, and its check must not straddle one
BROKER_CONF = "registerNameServerPeriod=60000\n"
CLUSTER = "TestCluster"
BROKER = "broker-t"
TOPIC = "MqaTopic"  # 4 queues: 2 messages of batch A then 2 of batch B in each
ONLINE = "MqaConsumer"  # a Python push consumer, online all along
OFFLINE = "MqaOffline"  # consumed everything, then stopped
PRODUCER = "MqaProducer"  # a Python producer, up all along
# mqadmin JVMs at once: a call is CPU from its start to its end (tests/helpers/mqadmin.py ends
# the JVM when the command returns), so more than this on 2 cores starves the servers (a name
# server answering a route past mqadmin's 3 s timeout at 5)
WORKERS = 3

# MQAdminStartup.initCommand of 4.9.8, in its order (mqadmin with no arguments prints them)
COMMANDS_4_9_8 = (
    "updateTopic deleteTopic updateSubGroup deleteSubGroup updateBrokerConfig updateTopicPerm topicRoute "
    "topicStatus topicClusterList brokerStatus queryMsgById queryMsgByKey queryMsgByUniqueKey queryMsgByOffset "
    "queryMsgTraceById printMsg printMsgByQueue sendMsgStatus brokerConsumeStats producerConnection "
    "consumerConnection consumerProgress consumerStatus cloneGroupOffset producer clusterList topicList "
    "updateKvConfig deleteKvConfig wipeWritePerm addWritePerm resetOffsetByTime skipAccumulatedMessage "
    "updateOrderConf cleanExpiredCQ deleteExpiredCommitLog cleanUnusedTopic startMonitoring statsAll allocateMQ "
    "checkMsgSendRT clusterRT getNamesrvConfig updateNamesrvConfig getBrokerConfig getConsumerConfig queryCq "
    "sendMessage consumeMessage updateAclConfig deleteAclConfig clusterAclConfigVersion updateGlobalWhiteAddr "
    "exportMetadata exportConfigs exportMetrics"
).split()

# the ACL commands on this broker, which has ACL off (tests/interop/test_java_acl.py runs them
# on one with ACL on): command line, the response code mqadmin prints
ACL_OFF: dict[str, tuple[list[str], int]] = {
    "updateAclConfig": (["-c", CLUSTER, "-a", "RocketMQ", "-s", "12345678"], 209),
    "deleteAclConfig": (["-c", CLUSTER, "-a", "RocketMQ"], 210),
    "clusterAclConfigVersion": (["-c", CLUSTER], 1),
    "updateGlobalWhiteAddr": (["-c", CLUSTER, "-g", "10.10.*"], 211),
}


# -- the Python side: requests to the name server and broker, the clients ---------------------------


def rpc(addr: str, code: int, body: bytes = b"", **fields: Any) -> RemotingCommand:
    async def call() -> RemotingCommand:
        c = RemotingClient()
        try:
            return await c.invoke(addr, RemotingCommand(code=code, ext_fields=dict(fields), body=body), 5)
        finally:
            await c.close()

    return asyncio.run(asyncio.wait_for(call(), 15))


def route(env: Env, topic: str) -> dict[str, Any] | None:
    r = rpc(env.ns, 105, topic=topic)
    return orjson.loads(r.body) if r.code == ResponseCode.SUCCESS else None


def perm(env: Env, topic: str) -> int | None:
    data = route(env, topic)
    return data["queueDatas"][0]["perm"] if data and data["queueDatas"] else None


def committed(env: Env, group: str, topic: str, queue_id: int) -> int:
    r = rpc(env.br, 14, consumerGroup=group, topic=topic, queueId=queue_id)
    return int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1


@dataclass
class Sent:
    batch: str
    i: int
    key: str
    tag: str
    body: bytes
    uniq: str
    offset_id: str
    queue: int
    offset: int

    @property
    def commit_log_offset(self) -> int:
        return decode_message_id(self.offset_id)[1]


@dataclass
class Env:
    mq: MQAdmin
    cluster: InteropCluster
    work: Path
    sent: list[Sent] = field(default_factory=list)
    ts_split: int = 0  # between batch A and batch B: A long before, B just after
    producer: Producer | None = None
    consumer: PushConsumer | None = None
    received: Counter[bytes] = field(default_factory=Counter)
    received_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ns(self) -> str:
        return self.cluster.ns

    @property
    def br(self) -> str:
        return self.cluster.br

    @property
    def consumer_id(self) -> str:
        assert self.consumer is not None
        return self.consumer.client_id

    @property
    def producer_id(self) -> str:
        assert self.producer is not None
        return self.producer.impl.instance.client_id

    def one(self, key: str) -> Sent:
        return next(s for s in self.sent if s.key == key)

    def queue(self, q: int) -> list[Sent]:
        return sorted((s for s in self.sent if s.queue == q), key=lambda s: s.offset)

    def count(self, body: bytes) -> int:
        with self.received_lock:
            return self.received[body]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    if not (ROCKETMQ_HOME / "conf" / "logback_tools.xml").exists():
        pytest.fail(f"{ROCKETMQ_HOME}/conf/logback_tools.xml is missing: mqadmin does nothing without it")
    classpath = mqadmin_classpath()
    tmp = tmp_path_factory.mktemp("mqadmin")
    # the name server writes its config to ~/namesrv/namesrv.properties on updateNamesrvConfig
    # (configStorePath's default, as RocketMQ's): keep it in the tmp dir
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp))
        cluster = InteropCluster(tmp, BROKER_CONF)
    e = Env(MQAdmin(classpath, cluster.ns, tmp / "work"), cluster, tmp / "work")
    others: list[PushConsumer] = []
    try:
        setup(e, others)
        yield e
    finally:
        for c in [*others, e.consumer]:
            if c is not None:
                try:
                    c.shutdown()
                except Exception as err:  # the cluster must stop all the same
                    print(f"consumer shutdown: {err!r}")
        if e.producer is not None:
            e.producer.shutdown()
        cluster.close()


def setup(e: Env, others: list[PushConsumer]) -> None:
    # topics, through mqadmin updateTopic itself (cluster and broker forms)
    calls = {
        TOPIC: ["-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4"],
        "MqaPermTopic": ["-c", CLUSTER, "-t", "MqaPermTopic", "-r", "2", "-w", "2"],
        "MqaDelTopic": ["-b", e.br, "-t", "MqaDelTopic", "-r", "2", "-w", "2"],
        "MqaSendTopic": ["-c", CLUSTER, "-t", "MqaSendTopic", "-r", "2", "-w", "2"],
        "MqaRtTopic": ["-c", CLUSTER, "-t", "MqaRtTopic", "-r", "4", "-w", "4"],
    }
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        outs = dict(zip(calls, pool.map(lambda a: e.mq("updateTopic", *a), calls.values()), strict=True))
    for topic, out in outs.items():
        out.ok().has(f"create topic to {e.br} success.", f"TopicConfig [topicName={topic}, ")
    assert "readQueueNums=4, writeQueueNums=4, perm=RW-" in outs[TOPIC].stdout
    for topic in calls:
        eventually(lambda t=topic: route(e, t), 20, f"{topic}'s route")

    e.producer = Producer(PRODUCER, e.ns, instance_name="mqa-producer")
    e.producer.start()

    def send(batch: str, i: int, topic: str = TOPIC, queue: int | None = None) -> Sent:
        key, tag, body = f"mqa-{batch}-{i}", ("TagA", "TagB")[i % 2], f"mqadmin {batch} {i}".encode()
        mq = MessageQueue(topic, BROKER, i % 4 if queue is None else queue)
        assert e.producer is not None
        r = e.producer.send(Message(topic, body, tags=tag, keys=key), mq)
        assert r.send_status.name == "SEND_OK", r
        return Sent(batch, i, key, tag, body, r.msg_id, r.offset_msg_id, r.message_queue.queue_id, r.queue_offset)

    e.sent += [send("a", i) for i in range(8)]
    for i in range(3):
        send("del", i, "MqaDelTopic", i % 2)
    time.sleep(1.5)  # batch A lies well before ts_split, batch B just after it
    e.ts_split = int(time.time() * 1000)
    e.sent += [send("b", i) for i in range(8)]
    assert [len(e.queue(q)) for q in range(4)] == [4, 4, 4, 4]

    def handler(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        with e.received_lock:
            for m in msgs:
                e.received[bytes(m.body)] += 1
        return ConsumeStatus.SUCCESS

    def consumer(group: str, instance: str) -> PushConsumer:
        c = PushConsumer(group, e.ns, instance_name=instance, consume_from_where=ConsumeFromWhere.FIRST,
                         persist_consumer_offset_interval_s=1.0)  # fmt: skip
        c.subscribe(TOPIC, "*")
        c.register_message_listener(handler)
        c.start()
        return c

    offline = consumer(OFFLINE, "mqa-offline")
    others.append(offline)
    e.consumer = consumer(ONLINE, "mqa-online")
    for group in (OFFLINE, ONLINE):
        eventually(lambda g=group: all(committed(e, g, TOPIC, q) == 4 for q in range(4)), 30,
                   f"{group} committing offset 4 on every queue")  # fmt: skip
    assert all(e.count(s.body) == 2 for s in e.sent), "each message consumed once by each group"
    offline.shutdown()
    others.remove(offline)
    eventually(lambda: rpc(e.br, 38, consumerGroup=OFFLINE).code != ResponseCode.SUCCESS, 20, f"{OFFLINE} offline")


# -- jobs -----------------------------------------------------------------------------------------

Job = Callable[[Env], None]
PHASES: dict[str, dict[str, Job]] = {"read": {}, "change": {}, "trace": {}, "perm": {}, "reset": {}}
COVERED: dict[str, set[str]] = {}  # command -> the jobs that run it


def job(phase: str, *commands: str, name: str = "") -> Callable[[Job], Job]:
    def register(fn: Job) -> Job:
        key = name or fn.__name__.removeprefix("job_")
        assert key not in PHASES[phase], key
        PHASES[phase][key] = fn
        for c in commands:
            COVERED.setdefault(c, set()).add(key)
        return fn

    return register


def run_phase(phase: str, e: Env) -> dict[str, BaseException | None]:
    with concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix=f"mqadmin-{phase}") as pool:
        futures = {name: pool.submit(fn, e) for name, fn in PHASES[phase].items()}
        return {name: f.exception() for name, f in futures.items()}


# ---- read-only: topics, routes, brokers, messages, consumers ----


@job("read", "topicList")
def job_topic_list(e: Env) -> None:
    out = e.mq("topicList").ok()
    assert {TOPIC, "MqaPermTopic", "TBW102", CLUSTER, BROKER} <= set(out.lines()), out.describe()
    out = e.mq("topicList", "-c").ok().has("#Cluster Name", "#Topic", "#Consumer Group")
    groups = {r[2] for r in out.rows(CLUSTER, TOPIC) if len(r) == 3}
    # QUERY_TOPIC_CONSUME_BY_WHO: groups online or with offsets (a tool's pull consumer, running
    # meanwhile, may be there too)
    assert {ONLINE, OFFLINE} <= groups <= {ONLINE, OFFLINE, "TOOLS_CONSUMER"}, out.describe()


@job("read", "topicRoute")
def job_topic_route(e: Env) -> None:
    out = e.mq("topicRoute", "-t", TOPIC).ok()
    compact = re.sub(r"\s+", "", out.stdout)  # fastjson, pretty-printed, integer map keys unquoted
    for part in (f'"brokerAddrs":{{0:"{e.br}"}}', f'"brokerName":"{BROKER}"', f'"cluster":"{CLUSTER}"',
                 '"perm":6', '"readQueueNums":4', '"writeQueueNums":4', '"topicSysFlag":0'):  # fmt: skip
        assert part in compact, f"{part} not in\n{out.describe()}"
    assert "orderTopicConf" not in compact
    out = e.mq("topicRoute", "-t", TOPIC, "-l").ok()
    assert out.row(CLUSTER, BROKER)[2:6] == [f"{{0={e.br}}}", "4", "4", "6"], out.describe()
    assert out.row("Total:")[1:] == ["1", "4", "4"], out.describe()


@job("read", "topicStatus")
def job_topic_status(e: Env) -> None:
    out = e.mq("topicStatus", "-t", TOPIC).ok().has("#Broker Name", "#Min Offset", "#Max Offset", "#Last Updated")
    for q in range(4):
        assert out.row(BROKER, str(q))[2:4] == ["0", "4"], out.describe()  # min, max: 4 messages per queue


@job("read", "topicClusterList")
def job_topic_cluster_list(e: Env) -> None:
    assert e.mq("topicClusterList", "-t", TOPIC).ok().lines() == [CLUSTER]


@job("read", "brokerStatus")
def job_broker_status(e: Env) -> None:
    out = e.mq("brokerStatus", "-b", e.br).ok()
    t = out.table(":")
    assert t["brokerVersionDesc"] == "V4_9_8" and t["runningFlags"] == "OK", out.describe()
    assert int(t["putMessageTimesTotal"]) >= 19 and int(t["msgPutTotalTodayNow"]) >= 19  # 16 + 3 MqaDelTopic
    assert int(t["msgGetTotalTodayNow"]) >= 32, t  # two groups, 16 each
    assert int(t["commitLogMaxOffset"]) > 0 and t["commitLogMinOffset"] == "0"
    for key in ("bootTimestamp", "earliestMessageTimeStamp", "putTps", "getTransferedTps", "commitLogDiskRatio",
                "sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "runtime", "commitLogDirCapacity"):  # fmt: skip
        assert key in t, f"{key} missing\n{out.describe()}"
    out = e.mq("brokerStatus", "-c", CLUSTER).ok()
    assert int(out.row(e.br, "msgPutTotalTodayNow")[-1]) >= 19, out.describe()


@job("read", "clusterList")
def job_cluster_list(e: Env) -> None:
    out = e.mq("clusterList").ok().has("#Cluster Name", "#InTPS(LOAD)", "#OutTPS(LOAD)")
    r = out.row(CLUSTER, BROKER)
    assert r[2:5] == ["0", e.br, "V4_9_8"], out.describe()
    # "%9.2f(queue size,head wait ms)": a Java broker's figures; "nullms" before Pumice sent the wait
    assert re.fullmatch(r"[\d.]+\(\d+,\d+ms\)", r[5]) and re.fullmatch(r"[\d.]+\(\d+,\d+ms\)", r[6]), r
    assert float(r[-1]) > 0  # commitLogDiskRatio
    out = e.mq("clusterList", "-m").ok().has("#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
    r = out.row(CLUSTER, BROKER)
    assert r[2:4] == ["0", "0"] and int(r[4]) >= 19 and int(r[5]) >= 32, out.describe()


@job("read", "getBrokerConfig")
def job_get_broker_config(e: Env) -> None:
    out = e.mq("getBrokerConfig", "-b", e.br).ok().has(f"============{e.br}============")
    t = out.table("=")
    assert (t["brokerName"], t["brokerClusterName"], t["listenPort"]) == (BROKER, CLUSTER, str(e.cluster.broker_port))
    assert t["brokerRole"] == "ASYNC_MASTER" and t["registerNameServerPeriod"] == "60000"
    assert t["filterServerNums"] == "0" and t["useTLS"] == "false"  # what a Java broker lists too
    out = e.mq("getBrokerConfig", "-c", CLUSTER).ok().has(f"============Master: {e.br}============")
    assert out.table("=")["brokerName"] == BROKER


@job("read", "getNamesrvConfig")
def job_get_namesrv_config(e: Env) -> None:
    out = e.mq("getNamesrvConfig").ok().has(f"============{e.ns}============")
    t = out.table("=")
    assert t["listenPort"] == str(e.cluster.ns_port) and t["orderMessageEnable"] == "false", out.describe()
    assert t["kvConfigPath"] == str(e.cluster.tmp / "kv.json")


@job("read", "queryMsgByKey")
def job_query_msg_by_key(e: Env) -> None:
    s = e.one("mqa-a-3")
    out = e.mq("queryMsgByKey", "-t", TOPIC, "-k", s.key).ok().has("#Message ID", "#QID", "#Offset")
    assert [line.split() for line in out.lines()[1:]] == [[s.uniq, str(s.queue), str(s.offset)]], out.describe()
    out = e.mq("queryMsgByKey", "-t", TOPIC, "-k", "no-such-key")
    out.failed("CODE: 208", "query message by key finished, but no message.")


def check_message(out: Out, s: Sent, br: str) -> None:
    """The fields queryMsgById, queryMsgByUniqueKey and queryMsgByOffset print, and the body
    file they write."""
    t = out.table(":")
    assert (t["Topic"], t["Tags"], t["Keys"]) == (TOPIC, f"[{s.tag}]", f"[{s.key}]"), out.describe()
    assert (t["Queue ID"], t["Queue Offset"], t["CommitLog Offset"]) == (
        str(s.queue), str(s.offset), str(s.commit_log_offset)), out.describe()  # fmt: skip
    assert t["Store Host"] == br and t["Reconsume Times"] == "0", out.describe()
    assert f"UNIQ_KEY={s.uniq}" in t["Properties"] and f"KEYS={s.key}" in t["Properties"], out.describe()
    body = Path(t["Message Body Path"])
    assert body.name == s.uniq and body.read_bytes() == s.body


@job("read", "queryMsgByUniqueKey")
def job_query_msg_by_unique_key(e: Env) -> None:
    s = e.one("mqa-a-3")
    out = e.mq("queryMsgByUniqueKey", "-t", TOPIC, "-i", s.uniq).ok()
    check_message(out, s, e.br)
    # the message's track: QUERY_TOPIC_CONSUME_BY_WHO, then each group's connection and offsets
    out.has(f"MessageTrack [consumerGroup={ONLINE}, trackType=CONSUMED, exceptionDesc=null]",
            f"MessageTrack [consumerGroup={OFFLINE}, trackType=NOT_ONLINE, exceptionDesc=CODE:206 "
            f"DESC:the consumer group[{OFFLINE}] not online]")  # fmt: skip


@job("read", "queryMsgById")
def job_query_msg_by_id(e: Env) -> None:
    s = e.one("mqa-b-6")
    out = e.mq("queryMsgById", "-i", s.offset_id).ok()
    assert out.table(":")["OffsetID"] == s.offset_id, out.describe()
    check_message(out, s, e.br)
    # -g -d: CONSUME_MESSAGE_DIRECTLY (309), relayed by the broker to the online consumer
    before = e.count(s.body)
    out = e.mq("queryMsgById", "-i", s.offset_id, "-g", ONLINE, "-d", e.consumer_id).ok()
    out.has("ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS")
    assert e.count(s.body) == before + 1, "the consumer's listener got the message"


@job("read", "queryMsgByOffset")
def job_query_msg_by_offset(e: Env) -> None:
    s = e.one("mqa-b-1")
    out = e.mq("queryMsgByOffset", "-t", TOPIC, "-b", BROKER, "-i", str(s.queue), "-o", str(s.offset)).ok()
    assert out.table(":")["OffsetID"] == s.offset_id, out.describe()
    check_message(out, s, e.br)


@job("read", "printMsg")
def job_print_msg(e: Env) -> None:
    out = e.mq("printMsg", "-t", TOPIC, "-d", "true").ok()
    for q in range(4):
        out.has(f"minOffset=0, maxOffset=4, MessageQueue [topic={TOPIC}, brokerName={BROKER}, queueId={q}]")
    printed = re.findall(r"^MSGID: (\S+) .* BODY: (.*)$", out.stdout, re.M)
    assert sorted(printed) == sorted((s.uniq, s.body.decode()) for s in e.sent), out.describe()
    # -s: the tag expression, filtered by the broker's tag codes and the client
    out = e.mq("printMsg", "-t", TOPIC, "-s", "TagA", "-d", "true").ok()
    printed = re.findall(r"^MSGID: (\S+) ", out.stdout, re.M)
    assert sorted(printed) == sorted(s.uniq for s in e.sent if s.tag == "TagA"), out.describe()


@job("read", "printMsgByQueue")
def job_print_msg_by_queue(e: Env) -> None:
    out = e.mq("printMsgByQueue", "-t", TOPIC, "-a", BROKER, "-i", "1", "-p", "true", "-d", "true", "-f", "true")
    printed = re.findall(r"^MSGID: (\S+) .*queueOffset=(\d+).* BODY: (.*)$", out.ok().stdout, re.M)
    assert printed == [(s.uniq, str(s.offset), s.body.decode()) for s in e.queue(1)], out.describe()
    counts = dict(re.findall(r"^Tag: (\S+)\s+Count: (\d+)$", out.stdout, re.M))
    assert counts == {t: str(n) for t, n in Counter(s.tag for s in e.queue(1)).items()}, out.describe()


@job("read", "consumeMessage")
def job_consume_message(e: Env) -> None:
    q2 = e.queue(2)
    out = e.mq("consumeMessage", "-t", TOPIC, "-b", BROKER, "-i", "2", "-o", "1", "-c", "2").ok()
    out.has("The oldler 2 message will be provided", "Consume ok")
    printed = re.findall(r"^MSGID: (\S+) .* BODY: (.*)$", out.stdout, re.M)
    assert printed == [(s.uniq, s.body.decode()) for s in q2[1:3]], out.describe()


@job("read", "consumerProgress")
def job_consumer_progress(e: Env) -> None:
    out = e.mq("consumerProgress").ok().has("#Group", "#Count", "#Version", "#Diff Total")
    r = out.row(ONLINE)
    assert r[1:5] == ["1", "V4_9_8", "PUSH", "CLUSTERING"] and r[-1] == "0", out.describe()
    r = out.row(OFFLINE)
    assert r[1:3] == ["0", "OFFLINE"] and r[-1] == "0", out.describe()
    out = e.mq("consumerProgress", "-g", ONLINE).ok().has("Diff Total: 0")
    for q in range(4):
        assert out.row(TOPIC, BROKER, str(q))[3:6] == ["4", "4", "0"], out.describe()
    assert out.row(f"%RETRY%{ONLINE}", BROKER, "0")[3:6] == ["0", "0", "0"]
    out = e.mq("consumerProgress", "-g", ONLINE, "-s", "true").ok().has("#Client IP", "Diff Total: 0")
    ip = e.consumer_id.split("@")[0]
    for q in range(4):  # the queue's owner, from the consumer's running info (GET_CONSUMER_RUNNING_INFO)
        assert out.row(TOPIC, BROKER, str(q))[3:7] == ["4", "4", ip, "0"], out.describe()


@job("read", "consumerStatus")
def job_consumer_status(e: Env) -> None:
    out = e.mq("consumerStatus", "-g", ONLINE).ok()
    out.has("Same subscription in the same group of consumer", "Rebalance OK")
    r = out.row("1", e.consumer_id)
    assert r[2] == "V4_9_8", out.describe()
    info = (e.work / r[3]).read_text()  # the running info, written under mqadmin's working directory
    assert "#Consumer Properties#" in info and re.search(rf"consumerGroup\s+: {ONLINE}", info), info
    out = e.mq("consumerStatus", "-g", ONLINE, "-i", e.consumer_id).ok()
    out.has("#Consumer Properties#", "#Consumer Subscription#", "#Consumer Offset#", "#Consumer MQ Detail#")
    t = out.table(":")
    want = (ONLINE, "CLUSTERING", "CONSUME_PASSIVELY")
    assert (t["consumerGroup"], t["messageModel"], t["PROP_CONSUME_TYPE"]) == want, out.describe()
    assert re.search(rf"Topic: {TOPIC}\s+ClassFilter: false\s+SubExpression: \*", out.stdout), out.describe()
    offsets = [r[2:] for r in out.rows(TOPIC, BROKER) if len(r) == 4]  # "#Consumer Offset#": queue, offset
    assert sorted(offsets) == [[str(q), "4"] for q in range(4)], out.describe()
    details = re.findall(rf"^{TOPIC}\s+{BROKER}\s+(\d)\s+ProcessQueueInfo \[commitOffset=(\d+),", out.stdout, re.M)
    assert sorted(details) == [(str(q), "4") for q in range(4)], out.describe()


@job("read", "consumerConnection")
def job_consumer_connection(e: Env) -> None:
    out = e.mq("consumerConnection", "-g", ONLINE).ok()
    r = out.row(e.consumer_id)
    assert re.fullmatch(r"127\.0\.0\.1:\d+", r[1]) and r[2:] == ["PYTHON", "V4_9_8"], out.describe()
    assert out.row(TOPIC) == [TOPIC, "*"] and out.row(f"%RETRY%{ONLINE}") == [f"%RETRY%{ONLINE}", "*"]
    out.has("ConsumeType: CONSUME_PASSIVELY", "MessageModel: CLUSTERING",
            "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    e.mq("consumerConnection", "-g", OFFLINE).failed("CODE: 206", f"the consumer group[{OFFLINE}] not online")


@job("read", "producerConnection", "producer")
def job_producer_connection(e: Env) -> None:
    out = e.mq("producerConnection", "-g", PRODUCER, "-t", TOPIC).ok()
    r = out.row("0001", e.producer_id)
    assert re.fullmatch(r"127\.0\.0\.1:\d+", r[2]) and r[3:] == ["PYTHON", "V4_9_8"], out.describe()
    out = e.mq("producer", "-b", e.br).ok()  # GET_ALL_PRODUCER_INFO
    assert re.search(rf"producer group \({PRODUCER}\) instance : clientId={re.escape(e.producer_id)},"
                     r"remoteIP=/127\.0\.0\.1:\d+, language=PYTHON, version=409, lastUpdateTimestamp=\d+",
                     out.stdout), out.describe()  # fmt: skip


@job("read", "getConsumerConfig")
def job_get_consumer_config(e: Env) -> None:
    out = e.mq("getConsumerConfig", "-g", ONLINE).ok().has(f"={CLUSTER}:{BROKER}=")
    t = out.table("=")
    assert (t["groupName"], t["consumeEnable"], t["retryMaxTimes"]) == (ONLINE, "true", "16"), out.describe()


@job("read", "brokerConsumeStats")
def job_broker_consume_stats(e: Env) -> None:
    out = e.mq("brokerConsumeStats", "-b", e.br).ok().has("#Topic", "#Group", "#Diff", "Diff Total: 0")
    for group in (ONLINE, OFFLINE):
        for q in range(4):
            assert out.row(TOPIC, group, BROKER, str(q))[4:7] == ["4", "4", "0"], out.describe()


@job("read", "statsAll")
def job_stats_all(e: Env) -> None:
    out = e.mq("statsAll").ok().has("#Accumulation", "#InMsg24Hour", "#OutMsg24Hour")
    for group in (ONLINE, OFFLINE):  # VIEW_BROKER_STATS_DATA: TOPIC_PUT_NUMS, GROUP_GET_NUMS
        r = out.row(TOPIC, group)
        assert r[2] == "0" and r[-2:] == ["16", "16"], out.describe()
    r = out.row("MqaDelTopic")
    assert r[1] == "0" and r[-2:] == ["3", "NO_CONSUMER"], out.describe()
    out = e.mq("statsAll", "-t", TOPIC).ok()
    assert {ONLINE, OFFLINE} <= {r[1] for r in out.rows(TOPIC)} <= {ONLINE, OFFLINE, "TOOLS_CONSUMER"}


@job("read", "allocateMQ")
def job_allocate_mq(e: Env) -> None:
    out = e.mq("allocateMQ", "-t", TOPIC, "-i", "10.0.0.1,10.0.0.2").ok()
    result = json.loads(out.stdout)["result"]
    assert sorted(result) == ["10.0.0.1", "10.0.0.2"] and all(len(v) == 2 for v in result.values())
    assert sorted(m["queueId"] for v in result.values() for m in v) == [0, 1, 2, 3]


@job("read", "queryCq")
def job_query_cq(e: Env) -> None:
    out = e.mq("queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "4", "-b", e.br).ok().has("max: 4, min: 0")
    entries = re.findall(r"physicOffset=(\d+), physicSize=(\d+), tagsCode=(-?\d+)", out.stdout)
    assert [int(p) for p, _, _ in entries] == [s.commit_log_offset for s in e.queue(0)], out.describe()
    tag_codes = {s.tag: str(hash_code(s.tag)) for s in e.queue(0)}
    assert [c for _, _, c in entries] == [tag_codes[s.tag] for s in e.queue(0)], out.describe()


def hash_code(s: str) -> int:
    """Java's String.hashCode (a message's tags code)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@job("read", "exportMetadata", "exportConfigs", "exportMetrics")
def job_export(e: Env) -> None:
    d = e.work / "export"
    e.mq("exportMetadata", "-c", CLUSTER, "-f", str(d)).ok().has(f"export {d}/metadata.json success")
    meta = json.loads((d / "metadata.json").read_text())
    assert {TOPIC, "MqaPermTopic"} <= set(meta["topicConfigTable"]) and "TBW102" not in meta["topicConfigTable"]
    assert meta["topicConfigTable"][TOPIC]["readQueueNums"] == 4 and ONLINE in meta["subscriptionGroupTable"]
    e.mq("exportConfigs", "-c", CLUSTER, "-f", str(d)).ok().has(f"export {d}/configs.json success")
    configs = json.loads((d / "configs.json").read_text())
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    broker = configs["brokerConfigs"][BROKER]
    assert (broker["brokerClusterName"], broker["filterServerNums"], broker["useTLS"]) == (CLUSTER, "0", "false")
    e.mq("exportMetrics", "-c", CLUSTER, "-f", str(d)).ok().has(f"export {d}/metrics.json success")
    metrics = json.loads((d / "metrics.json").read_text())
    report = metrics["evaluateReport"][BROKER]
    assert "PYTHON%V4_9_8" in report["runtimeVersion"]["clientInfo"]
    assert report["runtimeQuota"]["topicSize"] >= 5 and report["runtimeQuota"]["groupSize"] >= 2, report
    assert float(report["runtimeQuota"]["diskRatio"]["commitLogDiskRatio"]) > 0


# ---- commands that change state: each job its own topic or group ----


@job("change", "updateTopicPerm")
def job_update_topic_perm(e: Env) -> None:
    out = e.mq("updateTopicPerm", "-c", CLUSTER, "-t", "MqaPermTopic", "-p", "4").ok()
    out.has(f"update topic perm from 6 to 4 in {e.br} success.")
    eventually(lambda: perm(e, "MqaPermTopic") == 4, 20, "the route's perm 4")  # the broker registers at once
    out = e.mq("topicRoute", "-t", "MqaPermTopic", "-l").ok()
    assert out.row(CLUSTER, BROKER)[-1] == "4", out.describe()
    e.mq("updateTopicPerm", "-b", e.br, "-t", "MqaPermTopic", "-p", "4").ok().has("new perm equals to the old one!")


@job("change", "deleteTopic", "updateTopic")
def job_delete_topic(e: Env) -> None:
    out = e.mq("deleteTopic", "-c", CLUSTER, "-t", "MqaDelTopic").ok()
    out.has(f"delete topic [MqaDelTopic] from cluster [{CLUSTER}] success.", "delete topic [MqaDelTopic] from "
            "NameServer success.")  # fmt: skip
    assert route(e, "MqaDelTopic") is None
    e.mq("topicRoute", "-t", "MqaDelTopic").failed("CODE: 17", "No topic route info in name server for the "
                                                   "topic: MqaDelTopic")  # fmt: skip
    # created again: its queues start at 0, the 3 messages it had are gone (4.9.8 destroys the
    # ConsumeQueues of a deleted topic)
    e.mq("updateTopic", "-b", e.br, "-t", "MqaDelTopic", "-r", "2", "-w", "2").ok()
    eventually(lambda: route(e, "MqaDelTopic"), 20, "MqaDelTopic's route")
    out = e.mq("topicStatus", "-t", "MqaDelTopic").ok()
    for q in range(2):
        assert out.row(BROKER, str(q))[2:4] == ["0", "0"], out.describe()


@job("change", "updateSubGroup", "deleteSubGroup")
def job_sub_groups(e: Env) -> None:
    out = e.mq("updateSubGroup", "-b", e.br, "-g", "MqaSubGroup", "-r", "5", "-m", "true", "-d", "true").ok()
    out.has(f"create subscription group to {e.br} success.", "SubscriptionGroupConfig [groupName=MqaSubGroup, "
            "consumeEnable=true, consumeFromMinEnable=true, consumeBroadcastEnable=true, retryQueueNums=1, "
            "retryMaxTimes=5")  # fmt: skip
    t = e.mq("getConsumerConfig", "-g", "MqaSubGroup").ok().table("=")
    assert (t["retryMaxTimes"], t["consumeFromMinEnable"], t["consumeBroadcastEnable"]) == ("5", "true", "true"), t
    out = e.mq("updateSubGroup", "-c", CLUSTER, "-g", "MqaSubGroup", "-r", "7").ok()
    out.has(f"create subscription group to {e.br} success.")
    out = e.mq("deleteSubGroup", "-c", CLUSTER, "-g", "MqaSubGroup").ok()
    out.has(f"delete subscription group [MqaSubGroup] from broker [{e.br}] in cluster [{CLUSTER}] success.",
            f"delete topic [%RETRY%MqaSubGroup] from cluster [{CLUSTER}] success.",
            "delete topic [%DLQ%MqaSubGroup] from NameServer success.")  # fmt: skip
    assert e.mq("getConsumerConfig", "-g", "MqaSubGroup").ok().stdout.strip() == ""  # no such group any more


@job("change", "updateKvConfig", "deleteKvConfig")
def job_kv_config(e: Env) -> None:
    e.mq("updateKvConfig", "-s", "MqaNamespace", "-k", "k1", "-v", "v1").ok().has(
        "create or update kv config to namespace success.")  # fmt: skip
    r = rpc(e.ns, 101, namespace="MqaNamespace", key="k1")
    assert (r.code, r.ext_fields.get("value")) == (ResponseCode.SUCCESS, "v1")
    e.mq("deleteKvConfig", "-s", "MqaNamespace", "-k", "k1").ok().has("delete kv config from namespace success.")
    assert rpc(e.ns, 101, namespace="MqaNamespace", key="k1").code == ResponseCode.QUERY_NOT_FOUND


@job("change", "updateNamesrvConfig", "updateOrderConf")
def job_namesrv_config_and_order_conf(e: Env) -> None:
    out = e.mq("updateTopic", "-c", CLUSTER, "-t", "MqaOrderTopic", "-r", "2", "-w", "2", "-o", "true").ok()
    out.has(f"set cluster orderConf. isOrder=true, orderConf=[{BROKER}:2]")
    e.mq("updateOrderConf", "-t", "MqaOrderTopic", "-m", "get").ok().has(
        f"get orderConf success. topic=[MqaOrderTopic], orderConf=[{BROKER}:2]")  # fmt: skip
    eventually(lambda: route(e, "MqaOrderTopic"), 20, "MqaOrderTopic's route")
    # the order conf rides on the route only with orderMessageEnable, false by default (as 4.9)
    assert "orderTopicConf" not in (route(e, "MqaOrderTopic") or {})
    e.mq("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true").ok().has(
        f"update name server config success![{e.ns}]", "orderMessageEnable : true")  # fmt: skip
    assert e.mq("getNamesrvConfig").ok().table("=")["orderMessageEnable"] == "true"
    assert (e.cluster.tmp / "namesrv" / "namesrv.properties").read_text().count("orderMessageEnable=true") == 1
    out = e.mq("topicRoute", "-t", "MqaOrderTopic").ok()
    assert f'"orderTopicConf":"{BROKER}:2"' in out.stdout, out.describe()
    e.mq("updateOrderConf", "-t", "MqaOrderTopic", "-v", f"{BROKER}:1", "-m", "put").ok().has(
        f"update orderConf success. topic=[MqaOrderTopic], orderConf=[{BROKER}:1]")  # fmt: skip
    assert (route(e, "MqaOrderTopic") or {})["orderTopicConf"] == f"{BROKER}:1"
    e.mq("updateOrderConf", "-t", "MqaOrderTopic", "-m", "delete").ok().has(
        "delete orderConf success. topic=[MqaOrderTopic]")  # fmt: skip
    assert "orderTopicConf" not in (route(e, "MqaOrderTopic") or {})
    e.mq("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false").ok()
    # a black-listed key: NO_PERMISSION (16), as 4.9
    e.mq("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x").failed("CODE: 16", "Can not update config "
                                                                             "in black list.")  # fmt: skip


@job("change", "updateBrokerConfig")
def job_update_broker_config(e: Env) -> None:
    out = e.mq("updateBrokerConfig", "-b", e.br, "-k", "flushConsumerOffsetInterval", "-v", "4000").ok()
    out.has(f"update broker config success, {e.br}")
    assert e.mq("getBrokerConfig", "-b", e.br).ok().table("=")["flushConsumerOffsetInterval"] == "4000"
    out = e.mq("updateBrokerConfig", "-c", CLUSTER, "-k", "flushConsumerOffsetInterval", "-v", "5000").ok()
    out.has(f"update broker config success, {e.br}")
    # Pumice refuses, by name, a key it does not know (a Java broker ignores it silently)
    e.mq("updateBrokerConfig", "-b", e.br, "-k", "noSuchKey", "-v", "1").failed(
        "CODE: 1", "UPDATE_BROKER_CONFIG: unknown key 'noSuchKey'")  # fmt: skip


@job("change", "cloneGroupOffset")
def job_clone_group_offset(e: Env) -> None:
    """The new group's consumer starts where the source group is: it gets none of the 16."""
    # a group that never had a consumer has no %RETRY% topic, and 4.9's consumerProgress needs its route
    e.mq("consumerProgress", "-g", "MqaClone").failed("CODE: 17", "No topic route info in name server for the "
                                                      "topic: %RETRY%MqaClone")  # fmt: skip
    out = e.mq("cloneGroupOffset", "-s", ONLINE, "-d", "MqaClone", "-t", TOPIC).ok()
    out.has(f"clone group offset success. srcGroup[{ONLINE}], destGroup=[MqaClone], topic[{TOPIC}]")
    assert [committed(e, "MqaClone", TOPIC, q) for q in range(4)] == [committed(e, ONLINE, TOPIC, q) for q in range(4)]
    got: list[bytes] = []
    c = PushConsumer("MqaClone", e.ns, instance_name="mqa-clone", consume_from_where=ConsumeFromWhere.FIRST)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(lambda msgs, ctx: got.extend(bytes(m.body) for m in msgs) or ConsumeStatus.SUCCESS)
    c.start()
    try:
        out = eventually(lambda: e.mq("consumerProgress", "-g", "MqaClone").ok(), 30, "MqaClone online")
        out.has("Diff Total: 0")
        for q in range(4):
            assert out.row(TOPIC, BROKER, str(q))[3:6] == ["4", "4", "0"], out.describe()
        assert got == [], got
    finally:
        c.shutdown()


@job("change", "resetOffsetByTime", "skipAccumulatedMessage", name="reset_offset_offline")
def job_reset_offset_offline(e: Env) -> None:
    """No member online: the broker answers CONSUMER_NOT_ONLINE and mqadmin writes the offsets
    itself (ResetOffsetByTimeOldCommand: GET_CONSUME_STATS, SEARCH_OFFSET_BY_TIMESTAMP,
    UPDATE_CONSUMER_OFFSET)."""
    out = e.mq("resetOffsetByTime", "-g", OFFLINE, "-t", TOPIC, "-s", str(e.ts_split)).ok()
    out.has(f"rollback consumer offset by specified consumerGroup[{OFFLINE}], topic[{TOPIC}], force[true], "
            f"timestamp(string)[{e.ts_split}], timestamp(long)[{e.ts_split}]", "#rollbackOffset")  # fmt: skip
    for q in range(4):  # broker, consumer, timestamp and rollback offsets: the first B message of each queue
        assert out.row(BROKER, str(q))[2:] == ["4", "4", "2", "2"], out.describe()
    out = e.mq("consumerProgress", "-g", OFFLINE).ok().has("Diff Total: 8")
    for q in range(4):
        assert out.row(TOPIC, BROKER, str(q))[3:6] == ["4", "2", "2"], out.describe()
    out = e.mq("skipAccumulatedMessage", "-g", OFFLINE, "-t", TOPIC).ok()
    for q in range(4):
        assert out.row(BROKER, str(q))[2:] == ["4", "2", "4", "4"], out.describe()
    assert all(committed(e, OFFLINE, TOPIC, q) == 4 for q in range(4))


@job("trace", "sendMessage", "queryMsgTraceById")
def job_send_message_and_trace(e: Env) -> None:
    # the trace record (msgTraceEnable): RMQ_SYS_TRACE_TOPIC, keyed by the message's id. The
    # trace topic is made by the first trace send and registered at once; under load that
    # registration may be the periodic one (60 s here): wait past it. mqadmin itself may drop
    # the trace: its AsyncTraceDispatcher gives the send 500 ms at shutdown, then stops the
    # trace producer; so a second message is sent when no trace came of the first.
    for attempt in range(2):
        out = e.mq("sendMessage", "-t", "MqaSendTopic", "-p", "hello mqadmin", "-k", "send-key", "-c", "TagS", "-m",
                   "true").ok()  # fmt: skip
        r = out.row(BROKER)
        assert r[2] == "SEND_OK" and r[1] in ("0", "1"), out.describe()
        uniq = r[3]
        try:
            out = eventually(lambda u=uniq: e.mq("queryMsgTraceById", "-i", u).ok().rows("Pub"), 75, "the trace record")
            break
        except AssertionError:
            if attempt:
                raise
            print(f"no trace record for {uniq}: mqadmin may have shut down before its trace send; sending again")
    assert out[0][2] == "127.0.0.1" and out[0][-1] == "success", out  # Pub, group, host, time, cost, status
    out = e.mq("queryMsgByUniqueKey", "-t", "MqaSendTopic", "-i", uniq).ok()
    t = out.table(":")
    assert (t["Keys"], t["Tags"]) == ("[send-key]", "[TagS]") and Path(t["Message Body Path"]).read_bytes() == (
        b"hello mqadmin"), out.describe()  # fmt: skip
    out = e.mq("sendMessage", "-t", "MqaSendTopic", "-p", "to queue 1", "-b", BROKER, "-i", "1").ok()
    assert out.row(BROKER)[1:3] == ["1", "SEND_OK"], out.describe()
    e.mq("queryMsgTraceById", "-i", "C0A8000100002A9F0000000000000000").failed(
        "CODE: 208", "query message by key finished, but no message.")  # fmt: skip


@job("change", "checkMsgSendRT", "sendMsgStatus")
def job_send_rt(e: Env) -> None:
    out = e.mq("checkMsgSendRT", "-t", "MqaRtTopic", "-a", "4", "-s", "64").ok().has("#Send Result", "Avg RT:")
    rows = out.rows(BROKER)
    assert len(rows) == 4 and all(r[2] == "true" for r in rows) and sorted(r[1] for r in rows) == list("0123")
    out = e.mq("sendMsgStatus", "-b", BROKER, "-s", "64", "-c", "2").ok()
    sent = re.findall(r"rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, .*topic=" + BROKER, out.stdout)
    assert len(sent) == 2, out.describe()


@job("change", "clusterRT")
def job_cluster_rt(e: Env) -> None:
    """clusterRT sends every interval until killed: its first block, then kill it by its pid."""
    run = e.mq.start("clusterRT", "-a", "3", "-s", "32", "-c", CLUSTER, "-i", "1")
    try:
        eventually(lambda: any(line.split()[:2] == [CLUSTER, BROKER] for line in run.out), 40, "clusterRT's first row")
    finally:
        out = run.kill()
    assert out.lines()[0].split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount", "#failCount"]
    r = out.row(CLUSTER, BROKER)
    assert float(r[2]) >= 0 and r[3:] == ["3", "0"], out.describe()


@job("change", "startMonitoring")
def job_start_monitoring(e: Env) -> None:
    """MonitorService's first round comes 20 s after its start and goes to the client log."""
    run = e.mq.start("startMonitoring")
    try:
        log = eventually(lambda: "endRound" in run.client_log() and run.client_log(), 60, "a monitor round")
    finally:
        out = run.kill()
    assert "doMonitorWork Exception" not in log and not out.stderr.strip(), out.describe()
    assert (f"[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup={ONLINE}, topic={TOPIC}, undoneMsgsTotal=0, "
            "undoneMsgsSingleMQ=0, undoneMsgsDelayTimeMills=0]") in log, log[-3000:]  # fmt: skip


@job("change", "cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog")
def job_clean(e: Env) -> None:
    for command in ("cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"):
        for where in (["-c", CLUSTER], ["-b", e.br]):
            assert e.mq(command, *where).ok().stdout == "success", command
    # nothing had expired, and every topic has its config: the queues are all there
    assert [int(x) for x in (rpc(e.br, 30, topic=TOPIC, queueId=q).ext_fields["offset"] for q in range(4))] == [4] * 4


def acl_off_job(command: str) -> Job:
    args, code = ACL_OFF[command]

    def run(e: Env) -> None:
        out = e.mq(command, *args)
        out.failed(f"CODE: {code}  DESC: {ACL_OFF_REMARK}")

    return run


for _command in ACL_OFF:
    job("change", _command, name=f"acl_off_{_command}")(acl_off_job(_command))


# ---- wipeWritePerm / addWritePerm: alone (a registration in between undoes the wipe) ----


@job("perm", "wipeWritePerm", "addWritePerm")
def job_wipe_and_add_write_perm(e: Env) -> None:
    topics = rpc(e.ns, 224, cluster=CLUSTER)  # GET_TOPICS_BY_CLUSTER: the broker's topics on the name server
    count = len(orjson.loads(topics.body)["topicList"])
    for attempt in (1, 2):
        # the route is read as soon as mqadmin prints (its JVM then takes 3 s to end): the broker's
        # next registration (every 60 s) gives the write perm back, as a Java broker's does
        run = e.mq.start("wipeWritePerm", "-b", BROKER)
        line = run.wait_line("wipe write perm of broker")
        perms = (perm(e, TOPIC), perm(e, "MqaSendTopic"))
        run.wait().ok()
        assert line == f"wipe write perm of broker[{BROKER}] in name server[{e.ns}] OK, {count}", line
        if perms == (4, 4) or attempt == 2:
            break  # else a registration came between the wipe and the look: once more
    assert perms == (4, 4), perms  # read only
    out = e.mq("addWritePerm", "-b", BROKER).ok()
    out.has(f"add write perm of broker[{BROKER}] in name server[{e.ns}] OK, {count}")
    assert perm(e, TOPIC) == 6 and perm(e, "MqaSendTopic") == 6
    out = e.mq("topicRoute", "-t", TOPIC, "-l").ok()
    assert out.row(CLUSTER, BROKER)[-1] == "6", out.describe()


# ---- resetOffsetByTime with the consumer online ----


@job("reset", "resetOffsetByTime", name="reset_offset_online")
def job_reset_offset_online(e: Env) -> None:
    """INVOKE_BROKER_TO_RESET_OFFSET: the broker finds each queue's offset at the time (the
    nearest message, as 4.9's getOffsetInQueueByTime) and sends RESET_CONSUMER_CLIENT_OFFSET to
    the online consumer, which consumes batch B again."""
    batch_b = [s for s in e.sent if s.batch == "b"]
    before = {s.body: e.count(s.body) for s in batch_b}
    out = e.mq("resetOffsetByTime", "-g", ONLINE, "-t", TOPIC, "-s", str(e.ts_split)).ok()
    out.has(f"rollback consumer offset by specified group[{ONLINE}], topic[{TOPIC}], force[true], "
            f"timestamp(string)[{e.ts_split}], timestamp(long)[{e.ts_split}]")  # fmt: skip
    assert sorted(r[1:3] for r in out.rows(BROKER)) == [[str(q), "2"] for q in range(4)], out.describe()
    eventually(lambda: all(e.count(b) > n for b, n in before.items()), 30, "batch B consumed again")
    assert all(e.count(s.body) == 2 for s in e.sent if s.batch == "a"), "batch A is not consumed again"
    assert e.consumer is not None
    e.consumer.persist_offsets()
    eventually(lambda: all(committed(e, ONLINE, TOPIC, q) == 4 for q in range(4)), 20, "offsets back at 4")
    out = e.mq("consumerProgress", "-g", ONLINE).ok().has("Diff Total: 0")
    for q in range(4):
        assert out.row(TOPIC, BROKER, str(q))[3:6] == ["4", "4", "0"], out.describe()


# -- the tests ------------------------------------------------------------------------------------


def check(results: dict[str, BaseException | None], name: str) -> None:
    err = results[name]
    if err is not None:
        raise err


def test_help_lists_every_command(env: Env) -> None:
    """mqadmin with no arguments lists 4.9.8's 56 commands; each has a job here."""
    out = env.mq("", namesrv=False).ok().has("The most commonly used mqadmin commands are:")
    listed = [line.split()[0] for line in out.lines()[1:] if line.startswith("   ")]
    assert listed == COMMANDS_4_9_8
    assert len(listed) == 56 and set(COVERED) == set(listed), set(listed) ^ set(COVERED)


@pytest.fixture(scope="module")
def read_results(env: Env) -> dict[str, BaseException | None]:
    return run_phase("read", env)


@pytest.fixture(scope="module")
def change_results(env: Env, read_results: dict[str, BaseException | None]) -> dict[str, BaseException | None]:
    return run_phase("change", env)


@pytest.fixture(scope="module")
def trace_results(env: Env, change_results: dict[str, BaseException | None]) -> dict[str, BaseException | None]:
    return run_phase("trace", env)


@pytest.fixture(scope="module")
def perm_results(env: Env, trace_results: dict[str, BaseException | None]) -> dict[str, BaseException | None]:
    return run_phase("perm", env)


@pytest.fixture(scope="module")
def reset_results(env: Env, perm_results: dict[str, BaseException | None]) -> dict[str, BaseException | None]:
    return run_phase("reset", env)


@pytest.mark.parametrize("name", list(PHASES["read"]))
def test_read(read_results: dict[str, BaseException | None], name: str) -> None:
    check(read_results, name)


@pytest.mark.parametrize("name", list(PHASES["change"]))
def test_change(change_results: dict[str, BaseException | None], name: str) -> None:
    check(change_results, name)


@pytest.mark.parametrize("name", list(PHASES["trace"]))
def test_trace(trace_results: dict[str, BaseException | None], name: str) -> None:
    check(trace_results, name)


@pytest.mark.parametrize("name", list(PHASES["perm"]))
def test_perm(perm_results: dict[str, BaseException | None], name: str) -> None:
    check(perm_results, name)


@pytest.mark.parametrize("name", list(PHASES["reset"]))
def test_reset(reset_results: dict[str, BaseException | None], name: str) -> None:
    check(reset_results, name)
