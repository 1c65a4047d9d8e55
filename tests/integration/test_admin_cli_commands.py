"""The `pumice admin` commands of issue 21 against real `pumice namesrv` and `pumice broker`
processes: each command's effect is checked through the cluster (the route, a send, the
offsets, the broker's config), and its text output against mqadmin 4.9.8's shape.

One cluster for the module; its broker registers every 60 s, so a wipeWritePerm lasts
until addWritePerm (as on a Java broker, the next registration would undo it).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from click.testing import CliRunner, Result

from pumice.cli import main
from pumice.client import ConsumeStatus, Message, MessageQueue, Producer, PushConsumer
from pumice.client.pull_consumer import ConsumeFromWhere
from tests.helpers.clusters import Cluster, running_cluster
from tests.helpers.waiting import eventually

cluster = running_cluster("admin_cli_commands", extra_conf="registerNameServerPeriod=60000\n")
BROKER = "broker-t"


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
                 "cloneGroupOffset"):  # fmt: skip
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
