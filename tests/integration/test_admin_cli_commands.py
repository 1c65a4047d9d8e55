"""The `pumice admin` commands of issue 21 against real `pumice namesrv` and `pumice broker`
processes: each command's effect is checked through the cluster (the route, a send, the
offsets, the broker's config), and its text output against mqadmin 4.9.8's shape.

One cluster for the module; its broker registers every 60 s, so a wipeWritePerm lasts
until addWritePerm (as on a Java broker, the next registration would undo it). Its name server
writes its config to the cluster's directory on updateNamesrvConfig (configStorePath), not to
~/namesrv.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from pumice.cli import main
from pumice.client import ConsumeStatus, Message, MessageQueue, MQAdmin, Producer, PushConsumer
from pumice.client.pull_consumer import ConsumeFromWhere
from tests.helpers.clusters import Cluster
from tests.helpers.waiting import eventually

BROKER = "broker-t"


@pytest.fixture(scope="module", name="cluster")
def cluster_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("admin_cli_commands")
    c = Cluster(tmp, "registerNameServerPeriod=60000\n", ns_conf=f"configStorePath={tmp / 'namesrv.properties'}\n")
    try:
        yield c
    finally:
        c.close()


def cli(c: Cluster, *args: str) -> Result:
    r = CliRunner().invoke(main, ["admin", args[0], "-n", c.ns, *args[1:]])
    assert "Traceback" not in r.output
    return r


def ok(c: Cluster, *args: str) -> Result:
    r = cli(c, *args)
    assert r.exit_code == 0 and r.stderr == "", (args, r.output, r.exception)
    return r


def js(c: Cluster, *args: str) -> Any:
    return orjson.loads(ok(c, *args, "--json").stdout)


def error_line(r: Result) -> str:
    assert r.exit_code == 1 and r.stdout == "", r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def make_topic(c: Cluster, topic: str, queues: int = 2) -> None:
    ok(c, "updateTopic", "-c", "TestCluster", "-t", topic, "-r", str(queues), "-w", str(queues))
    eventually(lambda: cli(c, "topicRoute", "-t", topic).exit_code == 0, what=f"route of {topic}")


def perm(c: Cluster, topic: str) -> int:
    return int(js(c, "topicRoute", "-t", topic)["queueDatas"][0]["perm"])


def test_every_command_takes_json(cluster: Cluster) -> None:
    r = CliRunner().invoke(main, ["admin", "--help"])
    names = re.findall(r"^  (\w+)", r.stdout.split("Commands:")[1], re.M)
    for name in ("queryMsgByUniqueKey", "getBrokerConfig", "updateBrokerConfig", "deleteSubGroup", "updateTopicPerm",
                 "statsAll", "topicClusterList", "wipeWritePerm", "addWritePerm", "consumerStatus", "printMsg",
                 "cloneGroupOffset", "getNamesrvConfig", "updateNamesrvConfig", "updateKvConfig", "deleteKvConfig",
                 "updateOrderConf", "getConsumerConfig", "brokerConsumeStats", "producer", "allocateMQ", "queryCq",
                 "cleanExpiredCQ", "cleanUnusedTopic", "printMsgByQueue", "skipAccumulatedMessage", "sendMsgStatus",
                 "checkMsgSendRT", "clusterRT", "queryMsgTraceById", "exportMetadata", "exportConfigs",
                 "exportMetrics", "consumer", "startMonitoring"):  # fmt: skip
        assert name in names, name
    for name in names:
        help_text = CliRunner().invoke(main, ["admin", name, "--help"]).stdout
        assert "--json" in help_text and "--namesrvAddr" in help_text, name


def test_topic_route_perm_and_clusters(cluster: Cluster) -> None:
    make_topic(cluster, "PermTopic", queues=3)
    # topicRoute prints the route as pretty JSON, as mqadmin; -l as a table with a total
    route = orjson.loads(ok(cluster, "topicRoute", "-t", "PermTopic").stdout)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.br} and route["queueDatas"][0]["perm"] == 6
    r = ok(cluster, "topicRoute", "-t", "PermTopic", "-l")
    row = next(line.split() for line in r.stdout.splitlines() if line.split()[:2] == ["TestCluster", BROKER])
    assert row[2:] == [f"{{0={cluster.br}}}", "3", "3", "6"], r.stdout
    assert "Total: 1 3 3" in r.stdout
    # updateTopicPerm: the route's perm follows; the same perm again changes nothing
    r = ok(cluster, "updateTopicPerm", "-c", "TestCluster", "-t", "PermTopic", "-p", "4")
    assert f"update topic perm from 6 to 4 in {cluster.br} success." in r.stdout
    eventually(lambda: perm(cluster, "PermTopic") == 4, 20, "perm 4 in the route")
    route = js(cluster, "topicRoute", "-t", "PermTopic")
    assert (route["queueDatas"][0]["readQueueNums"], route["queueDatas"][0]["writeQueueNums"]) == (3, 3)
    assert "new perm equals to the old one!" in ok(cluster, "updateTopicPerm", "-b", cluster.br, "-t", "PermTopic",
                                                    "-p", "4").stdout  # fmt: skip
    doc = js(cluster, "updateTopicPerm", "-b", cluster.br, "-t", "PermTopic", "-p", "6")
    assert doc["brokers"] == [{"addr": cluster.br, "oldPerm": 4}] and doc["changed"] is True
    eventually(lambda: perm(cluster, "PermTopic") == 6, 20, "perm 6 in the route")
    r = cli(cluster, "updateTopicPerm", "-b", cluster.br, "-t", "PermTopic", "-p", "5")
    assert r.exit_code == 2 and "Invalid value for '-p'" in r.stderr
    # topicClusterList
    assert ok(cluster, "topicClusterList", "-t", "PermTopic").stdout.splitlines() == ["TestCluster"]
    assert js(cluster, "topicClusterList", "-t", "PermTopic")["clusters"] == ["TestCluster"]
    assert error_line(cli(cluster, "topicClusterList", "-t", "NoTopic")).startswith("Error: TOPIC_NOT_EXIST (17)")


def test_wipe_and_add_write_perm(cluster: Cluster) -> None:
    make_topic(cluster, "WipeTopic")
    ok(cluster, "sendMessage", "-t", "WipeTopic", "-p", "before")
    r = ok(cluster, "wipeWritePerm", "-b", BROKER)
    m = re.fullmatch(rf"wipe write perm of broker\[{BROKER}\] in name server\[{re.escape(cluster.ns)}\] OK, (\d+)\n",
                     r.stdout)  # fmt: skip
    assert m and int(m.group(1)) >= 1, r.stdout
    assert perm(cluster, "WipeTopic") == 4
    line = error_line(cli(cluster, "sendMessage", "-t", "WipeTopic", "-p", "refused"))
    assert line.startswith("Error: "), line
    doc = js(cluster, "addWritePerm", "-b", BROKER)
    assert doc[cluster.ns]["ok"] is True and doc[cluster.ns]["topicCount"] >= 1
    assert perm(cluster, "WipeTopic") == 6
    assert js(cluster, "sendMessage", "-t", "WipeTopic", "-p", "after")["sendStatus"] == "SEND_OK"


def test_broker_config(cluster: Cluster) -> None:
    r = ok(cluster, "getBrokerConfig", "-b", cluster.br)
    assert r.stdout.startswith(f"============{cluster.br}============\n")
    conf = dict(re.findall(r"^(\S+)\s+=  (.*)$", r.stdout, re.M))
    assert conf["brokerName"] == BROKER and conf["brokerClusterName"] == "TestCluster"
    r = ok(cluster, "updateBrokerConfig", "-b", cluster.br, "-k", "flushConsumerOffsetInterval", "-v", "4321")
    assert r.stdout == f"update broker config success, {cluster.br}\n"
    assert js(cluster, "getBrokerConfig", "-b", cluster.br)["flushConsumerOffsetInterval"] == "4321"
    doc = js(cluster, "updateBrokerConfig", "-c", "TestCluster", "-k", "flushConsumerOffsetInterval", "-v", "5000")
    assert doc == {cluster.br: {"ok": True, "error": None}}
    r = ok(cluster, "getBrokerConfig", "-c", "TestCluster")
    assert f"============Master: {cluster.br}============" in r.stdout
    assert re.search(r"^flushConsumerOffsetInterval\s+=  5000$", r.stdout, re.M)
    assert js(cluster, "getBrokerConfig", "-c", "TestCluster")[cluster.br]["flushConsumerOffsetInterval"] == "5000"
    line = error_line(cli(cluster, "updateBrokerConfig", "-b", cluster.br, "-k", "noSuchKey", "-v", "1"))
    assert line.startswith("Error: SYSTEM_ERROR (1): ") and "noSuchKey" in line


def test_cluster_list_more_stats(cluster: Cluster) -> None:
    r = ok(cluster, "clusterList")
    header = r.stdout.splitlines()[0]
    assert "#InTPS(LOAD)" in header and "#OutTPS(LOAD)" in header and "#SPACE" in header
    row = next(line.split() for line in r.stdout.splitlines() if cluster.br in line)
    assert row[:5] == ["TestCluster", BROKER, "0", cluster.br, "V4_9_8"]
    assert re.fullmatch(r"[\d.]+\(\d+,\d+ms\)", row[5]), row
    r = ok(cluster, "clusterList", "-m")
    assert "#InTotalYest" in r.stdout and "#OutTotalToday" in r.stdout
    row = next(line.split() for line in r.stdout.splitlines() if BROKER in line)
    assert row[:2] == ["TestCluster", BROKER] and all(x.isdigit() for x in row[2:]), row
    more = js(cluster, "clusterList", "-m")["brokers"][0]
    assert set(more) == {"cluster", "brokerName", "inTotalYest", "outTotalYest", "inTotalToday", "outTotalToday"}


def test_messages_unique_key_and_print_msg(cluster: Cluster) -> None:
    make_topic(cluster, "PrintTopic", queues=2)
    sent = [js(cluster, "sendMessage", "-t", "PrintTopic", "-p", f"body {i}", "-c", "TagA" if i % 2 else "TagB",
               "-b", BROKER, "-i", str(i % 2)) for i in range(4)]  # fmt: skip
    # queryMsgByUniqueKey: the client msgId
    doc = eventually(lambda: js(cluster, "queryMsgByUniqueKey", "-t", "PrintTopic", "-i", sent[2]["msgId"]),
                     what="unique key index")  # fmt: skip
    assert [m["body"] for m in doc["messages"]] == ["body 2"] and doc["messages"][0]["msgId"] == sent[2]["msgId"]
    r = ok(cluster, "queryMsgByUniqueKey", "-t", "PrintTopic", "-i", sent[2]["msgId"])
    fields = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)
    assert fields["Topic"].strip() == "PrintTopic" and fields["Message Body"].strip() == "body 2"
    line = error_line(cli(cluster, "queryMsgByUniqueKey", "-t", "PrintTopic", "-i", "0" * 32))
    assert line.startswith("Error: no message of PrintTopic has the unique key")
    # printMsg: each queue's range, then its messages, as mqadmin
    r = ok(cluster, "printMsg", "-t", "PrintTopic")
    for q in range(2):
        want = f"minOffset=0, maxOffset=2, MessageQueue [topic=PrintTopic, brokerName={BROKER}, queueId={q}]"
        assert want in r.stdout
    printed = re.findall(r"^MSGID: (\S+) .* BODY: (.*)$", r.stdout, re.M)
    assert sorted(printed) == sorted((s["msgId"], f"body {i}") for i, s in enumerate(sent))
    assert r.stdout.rstrip().endswith("--------------------------------------------------------")
    r = ok(cluster, "printMsg", "-t", "PrintTopic", "-s", "TagA", "-d", "false")
    printed = re.findall(r"^MSGID: (\S+) .* BODY: (.*)$", r.stdout, re.M)
    assert sorted(printed) == sorted((sent[i]["msgId"], "NOT PRINT BODY") for i in (1, 3))
    doc = js(cluster, "printMsg", "-t", "PrintTopic")
    assert sorted(m["body"] for q in doc["queues"] for m in q["messages"]) == [f"body {i}" for i in range(4)]


def test_consumer_group_commands(cluster: Cluster) -> None:
    make_topic(cluster, "GroupTopic", queues=2)
    for i in range(6):
        ok(cluster, "sendMessage", "-t", "GroupTopic", "-p", f"g{i}", "-b", BROKER, "-i", str(i % 2))
    got: list[bytes] = []
    consumer = PushConsumer("CmdGroup", cluster.ns, instance_name="cmd-group",
                            consume_from_where=ConsumeFromWhere.FIRST)  # fmt: skip
    consumer.subscribe("GroupTopic", "*")
    consumer.register_message_listener(lambda msgs, ctx: got.extend(m.body for m in msgs) or ConsumeStatus.SUCCESS)
    consumer.start()
    try:
        eventually(lambda: len(got) >= 6, 30, "the 6 messages consumed")
        consumer.persist_offsets()

        def progress_done() -> Any:
            doc = js(cluster, "consumerProgress", "-g", "CmdGroup", "-t", "GroupTopic", "-s", "true")
            assert [(q["queueId"], q["consumerOffset"]) for q in doc["queues"]] == [(0, 3), (1, 3)], doc
            assert all(q["clientIp"] == "127.0.0.1" or q["clientIp"] for q in doc["queues"]), doc
            return doc

        doc = eventually(progress_done, 30, "offsets committed and queues owned")
        client_id = js(cluster, "consumerConnection", "-g", "CmdGroup")["connections"][0]["clientId"]
        ip = client_id.split("@")[0]
        assert {q["clientIp"] for q in doc["queues"]} == {ip}
        # consumerProgress -s: the #Client IP column holds the owner's IP (not N/A)
        r = ok(cluster, "consumerProgress", "-g", "CmdGroup", "-s", "true")
        assert "#Client IP" in r.stdout
        row = next(line.split() for line in r.stdout.splitlines() if line.split()[:3] == ["GroupTopic", BROKER, "0"])
        assert row[3:7] == ["3", "3", ip, "0"], r.stdout
        assert "#Client IP" not in ok(cluster, "consumerProgress", "-g", "CmdGroup").stdout
        # consumerStatus: the running info of each client, and one client's in full
        r = ok(cluster, "consumerStatus", "-g", "CmdGroup")
        assert client_id in r.stdout and "Same subscription in the same group of consumer" in r.stdout
        assert "Rebalance OK" in r.stdout
        r = ok(cluster, "consumerStatus", "-g", "CmdGroup", "-i", client_id)
        for section in ("#Consumer Properties#", "#Consumer Subscription#", "#Consumer Offset#", "#Consumer MQ Detail#",
                        "#Consumer RT&TPS#"):  # fmt: skip
            assert section in r.stdout, section
        assert re.search(r"^consumerGroup\s+: CmdGroup$", r.stdout, re.M), r.stdout
        status = js(cluster, "consumerStatus", "-g", "CmdGroup")
        info = status["clients"][0]["runningInfo"]
        assert info["properties"]["consumerGroup"] == "CmdGroup" and len(info["mqTable"]) >= 2
        # consumer: the same table of the online clients
        r = ok(cluster, "consumer", "-g", "CmdGroup")
        assert client_id in r.stdout and "Rebalance OK" in r.stdout, r.stdout
        assert [c["clientId"] for c in js(cluster, "consumer", "-g", "CmdGroup")["clients"]] == [client_id]
        # queryMsgByUniqueKey -g -d: the online client consumes the message once more
        sent = js(cluster, "sendMessage", "-t", "GroupTopic", "-p", "direct", "-b", BROKER, "-i", "0")
        eventually(lambda: b"direct" in got, 20, "the direct message consumed")
        doc = eventually(lambda: js(cluster, "queryMsgByUniqueKey", "-t", "GroupTopic", "-i", sent["msgId"], "-g",
                                    "CmdGroup", "-d", client_id), what="consumed directly")  # fmt: skip
        assert doc["consumeResult"] == "CR_SUCCESS"
        assert got.count(b"direct") == 2
    finally:
        consumer.shutdown()
    # cloneGroupOffset: the target group's offsets equal the source's
    r = ok(cluster, "cloneGroupOffset", "-s", "CmdGroup", "-d", "CmdClone", "-t", "GroupTopic")
    assert r.stdout.strip() == "clone group offset success. srcGroup[CmdGroup], destGroup=[CmdClone], topic[GroupTopic]"
    src = js(cluster, "consumerProgress", "-g", "CmdGroup", "-t", "GroupTopic")["queues"]
    dest = js(cluster, "consumerProgress", "-g", "CmdClone", "-t", "GroupTopic")["queues"]
    assert [(q["queueId"], q["consumerOffset"]) for q in dest] == [(q["queueId"], q["consumerOffset"]) for q in src]
    assert [q["consumerOffset"] for q in dest] == [4, 3]
    # statsAll: the topic's consuming groups, their backlog and the 24-hour counts
    r = ok(cluster, "statsAll", "-t", "GroupTopic")
    assert "#Accumulation" in r.stdout and "#OutMsg24Hour" in r.stdout
    rows = {row["group"]: row for row in js(cluster, "statsAll", "-t", "GroupTopic")["stats"]}
    assert {"CmdGroup", "CmdClone"} <= set(rows), rows
    assert rows["CmdGroup"]["accumulation"] == 0 and rows["CmdGroup"]["inMsg24Hour"] == 7
    assert rows["CmdGroup"]["outMsg24Hour"] >= 7
    # deleteSubGroup: gone from the broker, with its retry topic (-c)
    ok(cluster, "updateSubGroup", "-c", "TestCluster", "-g", "CmdClone")
    r = ok(cluster, "deleteSubGroup", "-c", "TestCluster", "-g", "CmdClone", "-r", "true")
    assert (f"delete subscription group [CmdClone] from broker [{cluster.br}] in cluster [TestCluster] success."
            in r.stdout)  # fmt: skip
    assert "delete topic [%DLQ%CmdClone] from NameServer success." in r.stdout
    r = ok(cluster, "deleteSubGroup", "-b", cluster.br, "-g", "CmdGroup")
    assert r.stdout == f"delete subscription group [CmdGroup] from broker [{cluster.br}] success.\n"
    with Producer("CmdPG", cluster.ns) as p:  # the cluster still serves sends
        assert p.send(Message("GroupTopic", b"x"), MessageQueue("GroupTopic", BROKER, 0)).queue_offset == 4
        # producer: the broker knows the producer group and its client (GET_ALL_PRODUCER_INFO)
        r = ok(cluster, "producer", "-b", cluster.br)
        want = (
            r"^producer group \(CmdPG\) instance : clientId=\S+,remoteIP=/127\.0\.0\.1:\d+, "
            r"language=PYTHON, version=409, lastUpdateTimestamp=\d+$"
        )
        assert re.search(want, r.stdout, re.M), r.stdout
        assert js(cluster, "producer", "-b", cluster.br)["producers"]["CmdPG"][0]["language"] == "PYTHON"


def table_of(text: str, sep: str = "=  ") -> dict[str, str]:
    """``key<spaces>=  value`` lines (getNamesrvConfig, getConsumerConfig) as a dict."""
    return {k.strip(): v for k, _, v in (line.partition(sep) for line in text.splitlines() if sep in line)}


def test_namesrv_config_kv_and_order_conf(cluster: Cluster) -> None:
    r = ok(cluster, "getNamesrvConfig")
    assert r.stdout.startswith(f"============{cluster.ns}============\n")
    conf = table_of(r.stdout)
    assert conf["listenPort"] == str(cluster.ns_port) and conf["orderMessageEnable"] == "false"
    assert js(cluster, "getNamesrvConfig")[cluster.ns]["kvConfigPath"] == str(cluster.tmp / "kv.json")
    # updateNamesrvConfig: the name server's config (and its stored copy) change
    r = ok(cluster, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert r.stdout == f"update name server config success![{cluster.ns}]\norderMessageEnable : true\n"
    assert table_of(ok(cluster, "getNamesrvConfig").stdout)["orderMessageEnable"] == "true"
    assert "orderMessageEnable=true" in (cluster.tmp / "namesrv.properties").read_text()
    line = error_line(cli(cluster, "updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x"))
    assert line.startswith("Error: NO_PERMISSION (16)"), line
    # updateKvConfig / deleteKvConfig: the name server's KV entry
    with MQAdmin(cluster.ns) as admin:
        r = ok(cluster, "updateKvConfig", "-s", "CmdNamespace", "-k", "k1", "-v", "v1")
        assert r.stdout == "create or update kv config to namespace success.\n"
        assert admin.get_kv_config("CmdNamespace", "k1") == "v1"
        doc = js(cluster, "updateKvConfig", "-s", "CmdNamespace", "-k", "k1", "-v", "v2")
        assert doc["nameServers"] == [cluster.ns] and admin.get_kv_config("CmdNamespace", "k1") == "v2"
        r = ok(cluster, "deleteKvConfig", "-s", "CmdNamespace", "-k", "k1")
        assert r.stdout == "delete kv config from namespace success.\n"
        assert admin.get_kv_config("CmdNamespace", "k1") is None
        assert js(cluster, "deleteKvConfig", "-s", "CmdNamespace", "-k", "k1")["key"] == "k1"
    # updateOrderConf: the ORDER_TOPIC_CONFIG entry, on the route with orderMessageEnable
    make_topic(cluster, "CmdOrderTopic")
    r = ok(cluster, "updateOrderConf", "-t", "CmdOrderTopic", "-m", "put", "-v", f"{BROKER}:1")
    assert r.stdout == f"update orderConf success. topic=[CmdOrderTopic], orderConf=[{BROKER}:1]\n"
    assert js(cluster, "topicRoute", "-t", "CmdOrderTopic")["orderTopicConf"] == f"{BROKER}:1"
    r = ok(cluster, "updateOrderConf", "-t", "CmdOrderTopic", "-m", "get")
    assert r.stdout == f"get orderConf success. topic=[CmdOrderTopic], orderConf=[{BROKER}:1]\n"
    assert js(cluster, "updateOrderConf", "-t", "CmdOrderTopic", "-m", "get")["orderConf"] == f"{BROKER}:1"
    r = ok(cluster, "updateOrderConf", "-t", "CmdOrderTopic", "-m", "delete")
    assert r.stdout == "delete orderConf success. topic=[CmdOrderTopic]\n"
    assert "orderTopicConf" not in js(cluster, "topicRoute", "-t", "CmdOrderTopic")
    assert js(cluster, "updateOrderConf", "-t", "CmdOrderTopic", "-m", "get")["orderConf"] is None
    assert cli(cluster, "updateOrderConf", "-t", "CmdOrderTopic", "-m", "put").exit_code == 2
    assert cli(cluster, "updateOrderConf", "-t", "CmdOrderTopic", "-m", "list").exit_code == 2
    doc = js(cluster, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    assert doc == {"nameServers": [cluster.ns], "key": "orderMessageEnable", "value": "false"}


def java_hash(s: str) -> int:
    """Java's String.hashCode (a message's tags code)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_queue_and_send_commands(cluster: Cluster) -> None:
    make_topic(cluster, "CqTopic", queues=2)
    sent = [js(cluster, "sendMessage", "-t", "CqTopic", "-p", f"cq {i}", "-c", "TagA" if i < 3 else "TagB",
               "-b", BROKER, "-i", str(i % 2)) for i in range(5)]  # fmt: skip
    q0 = [s for s in sent if s["queueId"] == 0]  # bodies 0, 2, 4: TagA, TagA, TagB
    # queryCq: each entry's CommitLog offset (the offset msgId's last 16 hex digits) and tags code
    r = ok(cluster, "queryCq", "-t", "CqTopic", "-q", "0", "-i", "0", "-c", "4", "-b", cluster.br)
    assert "max: 3, min: 0" in r.stdout
    entries = re.findall(r"physicOffset=(\d+), physicSize=(\d+), tagsCode=(-?\d+)", r.stdout)
    assert [int(p) for p, _, _ in entries] == [int(s["offsetMsgId"][-16:], 16) for s in q0]
    assert [int(c) for _, _, c in entries] == [java_hash("TagA"), java_hash("TagA"), java_hash("TagB")]
    assert re.findall(r"^idx: (\d+)$", r.stdout, re.M) == ["0", "1", "2"]
    doc = js(cluster, "queryCq", "-t", "CqTopic", "-q", "0", "-i", "1", "-c", "1")  # the route's broker
    assert [(e["index"], e["physicOffset"]) for e in doc["entries"]] == [(1, int(q0[1]["offsetMsgId"][-16:], 16))]
    assert (doc["maxQueueIndex"], doc["brokerAddr"]) == (3, cluster.br)
    line = error_line(cli(cluster, "queryCq", "-t", "CqTopic", "-q", "0", "-i", "7"))
    assert line == "Error: Index 7 of 0@CqTopic is not exist!", line
    # printMsgByQueue: one queue's messages in order, and the count per tag
    r = ok(cluster, "printMsgByQueue", "-t", "CqTopic", "-a", BROKER, "-i", "0", "-p", "true", "-d", "true", "-f",
           "true")  # fmt: skip
    printed = re.findall(r"^MSGID: (\S+) .*queueOffset=(\d+).* BODY: (.*)$", r.stdout, re.M)
    want = [(s["msgId"], str(s["queueOffset"]), f"cq {i}") for i, s in zip((0, 2, 4), q0, strict=True)]
    assert printed == want, r.stdout
    assert dict(re.findall(r"^Tag: (\S+)\s+Count: (\d+)$", r.stdout, re.M)) == {"TagA": "2", "TagB": "1"}
    assert ok(cluster, "printMsgByQueue", "-t", "CqTopic", "-a", BROKER, "-i", "0").stdout == ""
    doc = js(cluster, "printMsgByQueue", "-t", "CqTopic", "-a", BROKER, "-i", "1", "-p", "true", "-d", "true", "-f",
             "true", "-s", "TagA")  # fmt: skip
    assert [m["body"] for m in doc["messages"]] == ["cq 1"] and doc["tagCounts"] == {"TagA": 1}
    # allocateMQ: the queues shared among the IPs (RebalanceResult JSON)
    result = orjson.loads(ok(cluster, "allocateMQ", "-t", "CqTopic", "-i", "10.0.0.1,10.0.0.2").stdout)["result"]
    assert {ip: [m["queueId"] for m in mqs] for ip, mqs in result.items()} == {"10.0.0.1": [0], "10.0.0.2": [1]}
    assert js(cluster, "allocateMQ", "-t", "CqTopic", "-i", "10.0.0.1")["result"]["10.0.0.1"][1]["queueId"] == 1
    # checkMsgSendRT: the queues in turn, every send ok
    r = ok(cluster, "checkMsgSendRT", "-t", "CqTopic", "-a", "4", "-s", "16")
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith(BROKER)]
    assert [row[1:3] for row in rows] == [["0", "true"], ["1", "true"], ["0", "true"], ["1", "true"]], r.stdout
    assert re.search(r"^Avg RT: \d+\.\d\d$", r.stdout, re.M)
    doc = js(cluster, "checkMsgSendRT", "-t", "CqTopic", "-a", "2", "-s", "8")
    assert [s["sendResult"] for s in doc["sends"]] == [True, True] and doc["avgRtMs"] >= 0
    assert js(cluster, "topicStatus", "-t", "CqTopic")["queues"][0]["maxOffset"] == 3 + 2 + 1
    # sendMsgStatus: to the broker's own topic
    r = ok(cluster, "sendMsgStatus", "-b", BROKER, "-s", "64", "-c", "2")
    want = (
        rf"^rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, .*messageQueue=MessageQueue "
        rf"\[topic={BROKER}, brokerName={BROKER}, queueId=\d+\], queueOffset=\d+\]$"
    )
    sends = re.findall(want, r.stdout, re.M)
    assert len(sends) == 2, r.stdout
    assert [s["sendStatus"] for s in js(cluster, "sendMsgStatus", "-b", BROKER, "-c", "1")["sends"]] == ["SEND_OK"]
    # clusterRT: one round per broker (no -i)
    r = ok(cluster, "clusterRT", "-a", "3", "-s", "32", "-c", "TestCluster")
    assert r.stdout.splitlines()[0].split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount",
                                                "#failCount"]  # fmt: skip
    row = next(line.split() for line in r.stdout.splitlines() if line.startswith("TestCluster"))
    assert row[:2] == ["TestCluster", BROKER] and float(row[2]) >= 0 and row[3:] == ["3", "0"], r.stdout
    r = ok(cluster, "clusterRT", "-a", "2", "-p", "true", "-m", "room1")
    assert re.fullmatch(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\|room1\|TestCluster\|{BROKER}\|\d+\n", r.stdout), r.stdout
    doc = js(cluster, "clusterRT", "-a", "2")
    assert [(b["brokerName"], b["successCount"], b["failCount"]) for b in doc["brokers"]] == [(BROKER, 2, 0)]
    line = error_line(cli(cluster, "clusterRT", "-a", "1", "-c", "NoCluster"))
    assert line == "Error: cluster [NoCluster] not exist", line


def test_query_msg_trace_by_id(cluster: Cluster) -> None:
    """A trace record as TraceDataEncoder writes one (Pub, then SubAfter with its group), keyed by the
    message's id, in a trace topic of its own (-t)."""
    make_topic(cluster, "CmdTraceTopic", queues=1)
    uniq = "7F00000100002A9F00000000DEADBEEF"
    pub = "\x01".join(["Pub", "1700000000000", "DefaultRegion", "TracePG", "SomeTopic", uniq, "TagT", "k1",
                       "127.0.0.1:10911", "11", "3", "0", "OFFSETID", "true"]) + "\x02"  # fmt: skip
    sub = "\x01".join(["SubAfter", "req1", uniq, "5", "false", "k1", "0", "1700000001000", "TraceCG"]) + "\x02"
    other = "\x01".join(["SubAfter", "req2", "OTHERID", "5", "true", "k1", "0", "1700000001000", "OtherCG"]) + "\x02"
    with Producer("TracePG2", cluster.ns) as p:
        p.send(Message("CmdTraceTopic", (pub + sub + other).encode(), keys=[uniq]))
    doc = eventually(lambda: js(cluster, "queryMsgTraceById", "-i", uniq, "-t", "CmdTraceTopic"), what="key index")
    assert [(t["type"], t["groupName"], t["status"], t["costTime"]) for t in doc["traces"]] == [
        ("Pub", "TracePG", "success", 3), ("SubAfter", "TraceCG", "failed", 5)]  # fmt: skip
    r = ok(cluster, "queryMsgTraceById", "-i", uniq, "-t", "CmdTraceTopic")
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith(("Pub", "Sub", "#Type"))]
    assert rows[0] == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
    assert rows[1][:3] == ["Pub", "TracePG", "127.0.0.1"] and rows[1][-2:] == ["3ms", "success"], r.stdout
    assert rows[2] == ["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"]
    assert rows[3][:3] == ["Sub", "TraceCG", "127.0.0.1"] and rows[3][-2:] == ["5ms", "failed"], r.stdout
    line = error_line(cli(cluster, "queryMsgTraceById", "-i", "NOSUCHID", "-t", "CmdTraceTopic"))
    assert line.startswith("Error: no trace of NOSUCHID in CmdTraceTopic"), line


def test_group_config_skip_and_broker_stats(cluster: Cluster) -> None:
    make_topic(cluster, "SkipTopic", queues=2)
    for i in range(5):
        ok(cluster, "sendMessage", "-t", "SkipTopic", "-p", f"s{i}", "-b", BROKER, "-i", str(i % 2))
    ok(cluster, "updateSubGroup", "-b", cluster.br, "-g", "SkipGroup", "-r", "5")
    # getConsumerConfig: the group's settings on each broker that has it
    r = ok(cluster, "getConsumerConfig", "-g", "SkipGroup")
    assert r.stdout.startswith(f"=============================TestCluster:{BROKER}=============================\n")
    conf = table_of(r.stdout)
    assert (conf["groupName"], conf["retryMaxTimes"], conf["consumeEnable"]) == ("SkipGroup", "5", "true")
    assert list(conf)[:2] == ["groupName", "consumeEnable"]
    doc = js(cluster, "getConsumerConfig", "-g", "SkipGroup")
    assert doc["brokers"][0]["cluster"] == "TestCluster" and doc["brokers"][0]["config"]["retryMaxTimes"] == 5
    assert ok(cluster, "getConsumerConfig", "-g", "NoSuchGroup").stdout == ""
    # skipAccumulatedMessage: the group's offsets go to the end of each queue
    r = ok(cluster, "skipAccumulatedMessage", "-g", "SkipGroup", "-t", "SkipTopic")
    assert "#rollbackOffset" in r.stdout.splitlines()[0]
    rows = sorted(line.split() for line in r.stdout.splitlines() if line.startswith(BROKER))
    assert rows == [[BROKER, "0", "3", "0", "3", "3"], [BROKER, "1", "2", "0", "2", "2"]], r.stdout
    progress = js(cluster, "consumerProgress", "-g", "SkipGroup", "-t", "SkipTopic")
    assert progress["diffTotal"] == 0 and [q["consumerOffset"] for q in progress["queues"]] == [3, 2]
    ok(cluster, "sendMessage", "-t", "SkipTopic", "-p", "late", "-b", BROKER, "-i", "1")
    assert js(cluster, "consumerProgress", "-g", "SkipGroup", "-t", "SkipTopic")["diffTotal"] == 1
    doc = js(cluster, "skipAccumulatedMessage", "-g", "SkipGroup", "-t", "SkipTopic", "-f", "false")
    # -f false, as mqadmin's: an offset is only moved back, never forward (queue 1 keeps its backlog)
    assert [(o["queueId"], o["consumerOffset"], o["rollbackOffset"]) for o in doc["offsets"]] == [(0, 3, 3), (1, 2, 2)]
    assert js(cluster, "consumerProgress", "-g", "SkipGroup", "-t", "SkipTopic")["diffTotal"] == 1
    ok(cluster, "skipAccumulatedMessage", "-g", "SkipGroup", "-t", "SkipTopic")  # -f true: forward too
    assert js(cluster, "consumerProgress", "-g", "SkipGroup", "-t", "SkipTopic")["diffTotal"] == 0
    # brokerConsumeStats: every group's offsets on the broker
    r = ok(cluster, "brokerConsumeStats", "-b", cluster.br)
    assert r.stdout.splitlines()[0].split()[:3] == ["#Topic", "#Group", "#Broker"]
    rows = [line.split() for line in r.stdout.splitlines() if line.split()[:2] == ["SkipTopic", "SkipGroup"]]
    assert [row[2:7] for row in rows] == [[BROKER, "0", "3", "3", "0"], [BROKER, "1", "3", "3", "0"]], r.stdout
    total = int(re.search(r"^Diff Total: (\d+)$", r.stdout, re.M).group(1))  # type: ignore[union-attr]
    doc = js(cluster, "brokerConsumeStats", "-b", cluster.br, "-t", "10000")
    assert doc["diffTotal"] == total and {("SkipTopic", "SkipGroup", 0, 0), ("SkipTopic", "SkipGroup", 1, 0)} <= {
        (q["topic"], q["group"], q["queueId"], q["diff"]) for q in doc["queues"]}  # fmt: skip
    assert all(q["diff"] >= 1 for q in js(cluster, "brokerConsumeStats", "-b", cluster.br, "-l", "1")["queues"])


def test_clean_commands(cluster: Cluster) -> None:
    """Nothing expired and every topic has its config: the cleaning keeps every queue."""
    make_topic(cluster, "CleanTopic", queues=2)
    for i in range(3):
        ok(cluster, "sendMessage", "-t", "CleanTopic", "-p", f"c{i}", "-b", BROKER, "-i", "0")
    for command in ("cleanExpiredCQ", "cleanUnusedTopic"):
        for where in (["-c", "TestCluster"], ["-b", cluster.br], []):
            r = ok(cluster, command, *where)
            assert r.stdout.splitlines()[-1].split() == [cluster.br, "success"], (command, r.stdout)
        assert js(cluster, command, "-b", cluster.br) == {cluster.br: {"ok": True, "error": None}}
        line = error_line(cli(cluster, command, "-c", "NoCluster"))
        assert line == "Error: the cluster 'NoCluster' is unknown to the name server", line
    queues = js(cluster, "topicStatus", "-t", "CleanTopic")["queues"]
    assert [(q["minOffset"], q["maxOffset"]) for q in queues] == [(0, 3), (0, 0)]
    assert js(cluster, "sendMessage", "-t", "CleanTopic", "-p", "after", "-b", BROKER, "-i", "0")["queueOffset"] == 3


def test_export_commands(cluster: Cluster, tmp_path: Path) -> None:
    make_topic(cluster, "ExportTopic", queues=3)
    ok(cluster, "updateSubGroup", "-c", "TestCluster", "-g", "ExportGroup")
    d = tmp_path / "export"
    # exportMetadata: the user topics and groups, system ones left out
    r = ok(cluster, "exportMetadata", "-c", "TestCluster", "-f", str(d))
    assert r.stdout == f"export {d}/metadata.json success\n"
    meta = orjson.loads((d / "metadata.json").read_bytes())
    assert set(meta) == {"topicConfigTable", "subscriptionGroupTable", "exportTime"}
    assert meta["topicConfigTable"]["ExportTopic"]["readQueueNums"] == 3 and "TBW102" not in meta["topicConfigTable"]
    assert "ExportGroup" in meta["subscriptionGroupTable"] and "TOOLS_CONSUMER" not in meta["subscriptionGroupTable"]
    assert not any(t.startswith("%RETRY%") for t in meta["topicConfigTable"])
    doc = js(cluster, "exportMetadata", "-c", "TestCluster", "-f", str(d), "-t")
    assert doc["file"] == f"{d}/topic.json" and set(doc["content"]) == {"topicConfigTable", "exportTime"}
    assert orjson.loads((d / "topic.json").read_bytes())["topicConfigTable"] == doc["content"]["topicConfigTable"]
    ok(cluster, "exportMetadata", "-b", cluster.br, "-g", "-f", str(d / "b"))
    assert "ExportGroup" in orjson.loads((d / "b" / "subscriptionGroup.json").read_bytes())["subscriptionGroupTable"]
    assert cli(cluster, "exportMetadata", "-b", cluster.br, "-f", str(d)).exit_code == 2
    assert cli(cluster, "exportMetadata", "-f", str(d)).exit_code == 2
    # exportConfigs: the brokers' main settings and the cluster's size
    r = ok(cluster, "exportConfigs", "-c", "TestCluster", "-f", str(d))
    assert r.stdout == f"export {d}/configs.json success\n"
    configs = orjson.loads((d / "configs.json").read_bytes())
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    broker = configs["brokerConfigs"][BROKER]
    assert (broker["brokerClusterName"], broker["brokerName"], broker["brokerId"]) == ("TestCluster", BROKER, "0")
    assert js(cluster, "exportConfigs", "-c", "TestCluster", "-f", str(d))["content"] == configs
    # exportMetrics: each broker's runtime figures
    r = ok(cluster, "exportMetrics", "-c", "TestCluster", "-f", str(d))
    assert r.stdout == f"export {d}/metrics.json success\n"
    metrics = orjson.loads((d / "metrics.json").read_bytes())
    report = metrics["evaluateReport"][BROKER]
    assert set(report) == {"runtimeEnv", "runtimeQuota", "runtimeVersion"}
    assert report["runtimeQuota"]["topicSize"] >= 1 and report["runtimeQuota"]["groupSize"] >= 1
    assert float(report["runtimeQuota"]["diskRatio"]["commitLogDiskRatio"]) > 0
    assert report["runtimeVersion"]["rocketmqVersion"] == "V4_9_8"
    assert set(metrics["totalData"]) == {"totalTps", "totalOneDayNum"}
    doc = js(cluster, "exportMetrics", "-c", "TestCluster", "-f", str(d))
    assert doc["file"] == f"{d}/metrics.json" and BROKER in doc["content"]["evaluateReport"]
    line = error_line(cli(cluster, "exportConfigs", "-c", "NoCluster", "-f", str(d)))
    assert line == "Error: the cluster 'NoCluster' is unknown to the name server", line


def test_start_monitoring(cluster: Cluster) -> None:
    """MonitorService's round: a group's undone messages per topic, as DefaultMonitorListener logs them."""
    make_topic(cluster, "MonTopic", queues=1)
    for i in range(2):
        ok(cluster, "sendMessage", "-t", "MonTopic", "-p", f"m{i}", "-b", BROKER, "-i", "0")
    got: list[bytes] = []
    consumer = PushConsumer(
        "MonGroup", cluster.ns, instance_name="mon-group", consume_from_where=ConsumeFromWhere.FIRST
    )
    consumer.subscribe("MonTopic", "*")
    consumer.register_message_listener(lambda msgs, ctx: got.extend(m.body for m in msgs) or ConsumeStatus.SUCCESS)
    consumer.start()
    try:
        eventually(lambda: len(got) >= 2, 30, "the 2 messages consumed")
        consumer.persist_offsets()
        eventually(lambda: js(cluster, "consumerProgress", "-g", "MonGroup")["diffTotal"] == 0, 20, "committed")
    finally:
        consumer.shutdown()
    for i in range(3):  # undone: nobody consumes these
        ok(cluster, "sendMessage", "-t", "MonTopic", "-p", f"late{i}", "-b", BROKER, "-i", "0")
    r = ok(cluster, "startMonitoring", "--rounds", "2", "-i", "0")
    lines = r.stdout.splitlines()
    assert lines.count("=========================================beginRound") == 2
    assert lines.count("=========================================endRound") == 2
    mine = [line for line in lines if "consumerGroup=MonGroup," in line]
    assert len(mine) == 2 and re.fullmatch(
        r"reportUndoneMsgs: UndoneMsgs \[consumerGroup=MonGroup, topic=MonTopic, undoneMsgsTotal=3, "
        r"undoneMsgsSingleMQ=3, undoneMsgsDelayTimeMills=\d+\]",
        mine[0],
    ), mine
    doc = js(cluster, "startMonitoring", "--rounds", "1")
    row = next(u for u in doc["undoneMsgs"] if u["consumerGroup"] == "MonGroup")
    assert (row["topic"], row["undoneMsgsTotal"], row["undoneMsgsSingleMQ"]) == ("MonTopic", 3, 3)
    assert row["undoneMsgsDelayTimeMills"] >= 0
