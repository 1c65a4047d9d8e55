"""`pumice admin` (mqadmin's commands) against real `pumice namesrv` and `pumice broker` processes.

Commands run in-process through click's CliRunner (the `pumice` group, so the registration is
tested too); the name-server-down case runs `python3 -m pumice.cli admin` as a real process.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner, Result

from pumice.cli import main
from pumice.client import LitePullConsumer, Message, MessageQueue, Producer
from tests.helpers.clusters import Cluster, RetentionCluster, running_cluster
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually

cluster = running_cluster("admin_cli")


def cli(cluster: Cluster | None, *args: str, env: dict[str, str] | None = None) -> Result:
    argv = ["admin", args[0], *(["-n", cluster.ns] if cluster is not None else []), *args[1:]]
    r = CliRunner().invoke(main, argv, env=env)
    assert "Traceback" not in r.output
    return r


def ok(cluster: Cluster | None, *args: str, env: dict[str, str] | None = None) -> Result:
    r = cli(cluster, *args, env=env)
    assert r.exit_code == 0, (args, r.output, r.exception)
    assert r.stderr == ""
    return r


def js(cluster: Cluster, *args: str) -> Any:
    return orjson.loads(ok(cluster, *args, "--json").stdout)


def error_line(r: Result, code: int) -> str:
    """The single stderr line of a failed command (exit ``code``), with no traceback."""
    assert r.exit_code == code, (r.output, r.exception)
    assert r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def make_topic(cluster: Cluster, topic: str, queues: int = 2) -> None:
    ok(cluster, "updateTopic", "-c", "TestCluster", "-t", topic, "-r", str(queues), "-w", str(queues))
    eventually(lambda: cli(cluster, "topicRoute", "-t", topic).exit_code == 0, what=f"route of {topic}")


def test_topic_and_broker_commands(cluster: Cluster) -> None:
    # updateTopic: table text and JSON
    r = ok(cluster, "updateTopic", "-c", "TestCluster", "-t", "CliTopic", "-r", "3", "-w", "3")
    assert f"create topic to {cluster.br} success." in r.stdout
    doc = js(cluster, "updateTopic", "-b", cluster.br, "-t", "CliTopic", "-r", "3", "-w", "3", "-p", "6")
    assert doc["brokers"] == [cluster.br] and doc["topicConfig"]["readQueueNums"] == 3
    route = eventually(lambda: js(cluster, "topicRoute", "-t", "CliTopic"), what="route")
    assert route["brokerDatas"] == [
        {"cluster": "TestCluster", "brokerName": "broker-t", "brokerAddrs": {"0": cluster.br}}
    ]
    assert route["queueDatas"][0]["readQueueNums"] == 3 and route["queueDatas"][0]["perm"] == 6
    r = ok(cluster, "topicRoute", "-t", "CliTopic")  # pretty JSON, as mqadmin
    assert orjson.loads(r.stdout)["queueDatas"][0]["readQueueNums"] == 3
    r = ok(cluster, "topicRoute", "-t", "CliTopic", "-l")
    assert "#BrokerName" in r.stdout and cluster.br in r.stdout
    # topicList, plain and with clusters
    assert "CliTopic" in ok(cluster, "topicList").stdout.splitlines()
    assert "CliTopic" in js(cluster, "topicList")["topics"]
    rows = {t["topic"]: t for t in js(cluster, "topicList", "-c")["topics"]}
    assert rows["CliTopic"]["clusters"] == ["TestCluster"]
    assert "#Cluster Name" in ok(cluster, "topicList", "-c").stdout
    # topicStatus
    status = js(cluster, "topicStatus", "-t", "CliTopic")
    assert [(q["brokerName"], q["queueId"], q["maxOffset"]) for q in status["queues"]] == [
        ("broker-t", 0, 0), ("broker-t", 1, 0), ("broker-t", 2, 0)]  # fmt: skip
    r = ok(cluster, "topicStatus", "-t", "CliTopic")
    assert "#Min Offset" in r.stdout and "#Max Offset" in r.stdout
    # clusterList and brokerStatus
    brokers = js(cluster, "clusterList")["brokers"]
    assert [(b["cluster"], b["brokerName"], b["brokerId"], b["addr"]) for b in brokers] == [
        ("TestCluster", "broker-t", 0, cluster.br)]  # fmt: skip
    assert brokers[0]["runtime"]["brokerVersionDesc"] == "V4_9_8" and brokers[0]["error"] is None
    r = ok(cluster, "clusterList")
    assert "#Cluster Name" in r.stdout and "TestCluster" in r.stdout and "V4_9_8" in r.stdout
    header = next(line.split() for line in r.stdout.splitlines() if "#Cluster" in line)
    row = next(line.split() for line in r.stdout.splitlines() if cluster.br in line)
    assert "#InTPS(LOAD)" in header and "#OutTPS(LOAD)" in header
    in_tps = float(brokers[0]["runtime"]["putTps"].split(" ")[0])
    assert in_tps >= 0 and float(row[5].split("(")[0]) >= 0  # the rate, then (queue size,head wait ms)
    assert js(cluster, "brokerStatus", "-b", cluster.br)["brokerVersionDesc"] == "V4_9_8"
    assert set(js(cluster, "brokerStatus", "-c", "TestCluster")) == {cluster.br}
    r = ok(cluster, "brokerStatus", "-b", cluster.br)
    assert any(line.split()[:2] == ["brokerVersionDesc", "V4_9_8"] for line in r.stdout.splitlines())
    # deleteTopic: gone from the name server
    doc = js(cluster, "deleteTopic", "-c", "TestCluster", "-t", "CliTopic")
    assert doc["brokers"] == [cluster.br]
    line = error_line(cli(cluster, "topicRoute", "-t", "CliTopic"), 1)
    assert line.startswith("Error: TOPIC_NOT_EXIST (17): ")


def test_message_commands(cluster: Cluster) -> None:
    make_topic(cluster, "MsgTopic", queues=2)
    sent = [js(cluster, "sendMessage", "-t", "MsgTopic", "-p", f"hello {i}", "-k", f"key{i} common", "-c", "TagA",
               "-b", "broker-t", "-i", str(i % 2)) for i in range(4)]  # fmt: skip
    assert [(s["brokerName"], s["queueId"], s["sendStatus"]) for s in sent] == [
        ("broker-t", i % 2, "SEND_OK") for i in range(4)]  # fmt: skip
    assert [s["queueOffset"] for s in sent] == [0, 0, 1, 1]
    r = ok(cluster, "sendMessage", "-t", "MsgTopic", "-p", "table send")
    assert "#Send Result" in r.stdout and "SEND_OK" in r.stdout
    with Producer("CliPG", cluster.ns) as p:
        binary = p.send(Message("MsgTopic", b"\xff\xfe\x00bin", tags="TagB"), MessageQueue("MsgTopic", "broker-t", 0))
        # producerConnection: the running producer, from its heartbeats
        doc = eventually(lambda: js(cluster, "producerConnection", "-g", "CliPG", "-t", "MsgTopic"), what="heartbeat")
        assert [(c["language"], c["clientAddr"].split(":")[0]) for c in doc["connections"]] == [("PYTHON", "127.0.0.1")]
        assert "#ClientAddr" in ok(cluster, "producerConnection", "-g", "CliPG", "-t", "MsgTopic").stdout
    line = error_line(cli(cluster, "producerConnection", "-g", "NoPG", "-t", "MsgTopic"), 1)
    assert line == "Error: SYSTEM_ERROR (1): the producer group[NoPG] not exist"

    # queryMsgById: the offset msgId, and the client msgId (UNIQ_KEY) with -t
    doc = js(cluster, "queryMsgById", "-i", sent[0]["offsetMsgId"])
    m = doc["messages"][0]
    assert (m["body"], m["bodyEncoding"], m["tags"], m["keys"]) == ("hello 0", "utf-8", "TagA", ["key0", "common"])
    assert (m["queueId"], m["queueOffset"], m["offsetMsgId"]) == (0, 0, sent[0]["offsetMsgId"])
    doc = eventually(lambda: js(cluster, "queryMsgById", "-i", sent[1]["msgId"], "-t", "MsgTopic"), what="uniq key")
    assert doc["messages"][0]["body"] == "hello 1"
    r = ok(cluster, "queryMsgById", "-i", sent[2]["offsetMsgId"])
    fields = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)
    assert fields["OffsetID"].strip() == sent[2]["offsetMsgId"] and fields["Tags"].strip() == "[TagA]"
    assert fields["Queue Offset"].strip() == "1" and fields["Message Body"].strip() == "hello 2"
    for label in ("Topic", "Keys", "Queue ID", "CommitLog Offset", "Reconsume Times", "Born Timestamp",
                  "Store Timestamp", "Born Host", "Store Host", "System Flag", "Properties"):  # fmt: skip
        assert label in fields, label
    line = error_line(cli(cluster, "queryMsgById", "-i", sent[1]["msgId"]), 1)
    assert line.startswith(f"Error: no message with id {sent[1]['msgId']}")

    # queryMsgByKey
    doc = eventually(lambda: js(cluster, "queryMsgByKey", "-t", "MsgTopic", "-k", "common"), what="key index")
    assert sorted(m["body"] for m in doc["messages"]) == ["hello 0", "hello 1", "hello 2", "hello 3"]
    assert [m["body"] for m in js(cluster, "queryMsgByKey", "-t", "MsgTopic", "-k", "key3")["messages"]] == ["hello 3"]
    r = ok(cluster, "queryMsgByKey", "-t", "MsgTopic", "-k", "key3")
    assert "#Message ID" in r.stdout and sent[3]["msgId"] in r.stdout and "hello 3" in r.stdout
    assert js(cluster, "queryMsgByKey", "-t", "MsgTopic", "-k", "nokey")["messages"] == []

    # queryMsgByOffset: text and binary bodies
    m = js(cluster, "queryMsgByOffset", "-t", "MsgTopic", "-b", "broker-t", "-i", "1", "-o", "1")
    assert (m["body"], m["queueId"], m["queueOffset"], m["brokerName"]) == ("hello 3", 1, 1, "broker-t")
    offset = str(binary.queue_offset)
    m = js(cluster, "queryMsgByOffset", "-t", "MsgTopic", "-b", "broker-t", "-i", "0", "-o", offset)
    assert (m["body"], m["bodyEncoding"], m["tags"]) == ("//4AYmlu", "base64", "TagB")
    r = ok(cluster, "queryMsgByOffset", "-t", "MsgTopic", "-b", "broker-t", "-i", "0", "-o", offset)
    assert "not UTF-8; base64> //4AYmlu" in r.stdout
    line = error_line(cli(cluster, "queryMsgByOffset", "-t", "MsgTopic", "-b", "broker-t", "-i", "0", "-o", "99"), 1)
    assert line.startswith("Error: no message at offset 99 of MsgTopic@broker-t#0")

    # consumeMessage: everything, a count, one queue from an offset, a time range
    doc = js(cluster, "consumeMessage", "-t", "MsgTopic")
    bodies = sorted(m["body"] for m in doc["messages"])
    assert doc["count"] == 6 and bodies == sorted(
        ["hello 0", "hello 1", "hello 2", "hello 3", "table send", "//4AYmlu"]
    )
    assert js(cluster, "consumeMessage", "-t", "MsgTopic", "-c", "2")["count"] == 2
    doc = js(cluster, "consumeMessage", "-t", "MsgTopic", "-b", "broker-t", "-i", "1", "-o", "1")
    assert doc["messages"][0]["body"] == "hello 3"
    assert all(m["queueId"] == 1 and m["queueOffset"] >= 1 for m in doc["messages"])
    later = str(int(time.time() * 1000) + 3_600_000)
    assert js(cluster, "consumeMessage", "-t", "MsgTopic", "-s", later)["count"] == 0
    assert js(cluster, "consumeMessage", "-t", "MsgTopic", "-s", "2000-01-01#00:00:00:000", "-e", later)["count"] == 6
    assert js(cluster, "consumeMessage", "-t", "MsgTopic", "-e", "2000-01-01#00:00:00:000")["count"] == 0
    r = ok(cluster, "consumeMessage", "-t", "MsgTopic", "-b", "broker-t", "-i", "0", "-c", "1")
    assert "Message Body:        hello 0" in r.stdout and "consumed 1 message(s) of MsgTopic" in r.stdout


def test_consumer_commands(cluster: Cluster) -> None:
    make_topic(cluster, "GrpTopic", queues=2)
    for i in range(5):
        ok(cluster, "sendMessage", "-t", "GrpTopic", "-p", f"m{i}", "-b", "broker-t", "-i", str(i % 2))
    # updateSubGroup
    doc = js(cluster, "updateSubGroup", "-c", "TestCluster", "-g", "CliGroup", "-r", "3", "-s", "true", "-d", "false")
    assert doc["brokers"] == [cluster.br]
    assert doc["subscriptionGroupConfig"]["retryMaxTimes"] == 3
    assert doc["subscriptionGroupConfig"]["consumeBroadcastEnable"] is False
    assert "create subscription group to" in ok(cluster, "updateSubGroup", "-b", cluster.br, "-g", "CliGroup").stdout

    # resetOffsetByTime: now (the max offsets), then the start of time (the min offsets)
    doc = js(cluster, "resetOffsetByTime", "-g", "CliGroup", "-t", "GrpTopic", "-s", "now")
    assert [(o["queueId"], o["offset"]) for o in doc["offsets"]] == [(0, 3), (1, 2)]
    progress = js(cluster, "consumerProgress", "-g", "CliGroup")
    assert [(q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"]) for q in progress["queues"]] == [
        (0, 3, 3, 0), (1, 2, 2, 0)]  # fmt: skip
    assert progress["diffTotal"] == 0
    r = ok(cluster, "resetOffsetByTime", "-g", "CliGroup", "-t", "GrpTopic", "-s", "2000-01-01#00:00:00:000")
    # nobody online: mqadmin's fallback and its table
    assert "rollback consumer offset by specified consumerGroup[CliGroup]" in r.stdout and "#rollbackOffset" in r.stdout
    progress = js(cluster, "consumerProgress", "-g", "CliGroup", "-t", "GrpTopic")
    assert [(q["queueId"], q["consumerOffset"], q["diff"]) for q in progress["queues"]] == [(0, 0, 3), (1, 0, 2)]
    assert progress["diffTotal"] == 5
    r = ok(cluster, "consumerProgress", "-g", "CliGroup")
    for col in (
        "#Topic",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#LastTime",
    ):
        assert col in r.stdout
    assert "Consume TPS: 0.00" in r.stdout and "Diff Total: 5" in r.stdout
    assert "#Client IP" not in r.stdout  # only with -s true, as mqadmin
    groups = {g["group"]: g for g in js(cluster, "consumerProgress")["groups"]}
    assert groups["CliGroup"]["diffTotal"] == 5 and groups["CliGroup"]["version"] == "OFFLINE"
    assert "#Diff Total" in ok(cluster, "consumerProgress").stdout

    # consumerConnection: nobody online, then a subscribed consumer
    line = error_line(cli(cluster, "consumerConnection", "-g", "CliGroup"), 1)
    assert line == "Error: CONSUMER_NOT_ONLINE (206): the consumer group[CliGroup] not online"
    consumer = LitePullConsumer("CliGroup", cluster.ns, auto_commit=False, pull_suspend_s=1.0)
    consumer.subscribe("GrpTopic", "*")
    consumer.start()
    try:
        doc = eventually(lambda: js(cluster, "consumerConnection", "-g", "CliGroup"), what="connection")
        assert len(doc["connections"]) == 1 and doc["connections"][0]["language"] == "PYTHON"
        assert doc["subscriptions"] == {"GrpTopic": "*"} and doc["consumeType"] == "CONSUME_ACTIVELY"
        assert doc["messageModel"] == "CLUSTERING"
        r = ok(cluster, "consumerConnection", "-g", "CliGroup")
        assert "#ClientId" in r.stdout and "Below is subscription:" in r.stdout and "GrpTopic" in r.stdout
        groups = {g["group"]: g for g in js(cluster, "consumerProgress")["groups"]}
        assert groups["CliGroup"]["count"] == 1 and groups["CliGroup"]["version"] == "V4_9_8"
        row = next(line.split() for line in ok(cluster, "consumerProgress").stdout.splitlines() if "CliGroup" in line)
        assert row == ["CliGroup", "1", "V4_9_8", "PULL", "CLUSTER", "0", "5"]
        # online: through the broker, which tells the consumer (-f true by default, as mqadmin)
        doc = js(cluster, "resetOffsetByTime", "-g", "CliGroup", "-t", "GrpTopic", "-s", "0")
        assert doc["force"] is True and doc["consumerOnline"] is True and len(doc["offsets"]) == 2
    finally:
        consumer.shutdown()


def test_errors_and_defaults(cluster: Cluster) -> None:
    # unknown topic: the code name, number and remark on one line, exit 1
    line = error_line(cli(cluster, "topicStatus", "-t", "Nope"), 1)
    assert line.startswith("Error: TOPIC_NOT_EXIST (17): ") and "Nope" in line
    # a broker that is down: one line naming its address
    dead = f"127.0.0.1:{free_port()}"
    line = error_line(cli(cluster, "brokerStatus", "-b", dead), 1)
    assert line.startswith(f"Error: cannot connect to the broker {dead}")
    # usage errors: exit 2, no traceback
    for args, needle in [
        (("resetOffsetByTime", "-g", "G", "-t", "T", "-s", "yesterday"), "Invalid value for '-s'"),
        (("resetOffsetByTime", "-g", "G", "-t", "T", "-s", "2024-13-01#00:00:00:000"), "not a valid date"),
        (("queryMsgByOffset", "-t", "T", "-b", "b", "-i", "0", "-o", "-1"), "Invalid value for '-o'"),
        (("queryMsgByOffset", "-t", "T", "-b", "b", "-i", "0"), "Missing option '-o'"),
        (("updateTopic", "-t", "T"), "exactly one of -c clusterName and -b brokerAddr"),
        (("sendMessage", "-t", "T", "-p", "x", "-i", "1"), "-i needs -b"),
        (("consumeMessage", "-t", "T", "-b", "b", "-o", "1"), "-o needs -i"),
        # ports out of range: a usage error, not "unexpected OverflowError" from connect()
        (("brokerStatus", "-b", "127.0.0.1:70000"), "'127.0.0.1:70000' is not host:port with a port of 1 to 65535"),
        (("updateSubGroup", "-b", "nohost", "-g", "G"), "'nohost' is not host:port"),
    ]:
        r = cli(cluster, *args)
        assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.stderr, (args, r.output)
    make_topic(cluster, "ErrTopic", queues=2)
    r = cli(cluster, "queryMsgByOffset", "-t", "ErrTopic", "-b", "nobroker", "-i", "0", "-o", "0")
    assert r.exit_code == 2 and "has no broker 'nobroker' (its brokers: broker-t)" in r.stderr
    r = cli(cluster, "consumeMessage", "-t", "ErrTopic", "-b", "broker-t", "-i", "7")
    assert r.exit_code == 2 and "queues 0..1 on broker-t, not 7" in r.stderr
    r = cli(None, "clusterList", "-n", f"{cluster.ns};127.0.0.1:99999")
    assert r.exit_code == 2 and "'127.0.0.1:99999' is not host:port" in r.stderr
    # a group that never consumed: an error, as mqadmin's CONSUMER_NOT_ONLINE (an empty table before)
    line = error_line(cli(cluster, "consumerProgress", "-g", "NoSuchGroup"), 1)
    assert line.startswith("Error: group 'NoSuchGroup': Not found the consumer group consume stats")
    # -n defaults to $NAMESRV_ADDR, and --help says so
    assert js_env(cluster)["brokers"][0]["addr"] == cluster.br
    help_text = ok(None, "clusterList", "--help").stdout
    assert "NAMESRV_ADDR" in help_text and "127.0.0.1:9876" in help_text and "--json" in help_text


def js_env(cluster: Cluster) -> Any:
    return orjson.loads(ok(None, "clusterList", "--json", env={"NAMESRV_ADDR": cluster.ns}).stdout)


def test_name_server_down_as_a_process(tmp_path: Path) -> None:
    addr = f"127.0.0.1:{free_port()}"
    proc = subprocess.run([sys.executable, "-m", "pumice.cli", "admin", "topicList", "-n", addr],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"Error: cannot connect to the name server {addr}: ")
    proc = subprocess.run([sys.executable, "-m", "pumice.cli", "admin", "consumeMessage", "-n", addr, "-t", "T",
                           "-s", "12:00"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "Invalid value for '-s'" in proc.stderr and "Traceback" not in proc.stderr


def test_delete_expired_commit_log(tmp_path: Path) -> None:
    """deleteExpiredCommitLog makes a broker whose deleteWhen hour never comes delete its
    expired CommitLog files (all but the last, with fileReservedTime=0) now."""
    c = RetentionCluster(tmp_path)
    try:
        make_topic(c, "OldTopic", queues=1)
        with Producer("PG_retention", c.ns) as p:
            for i in range(40):
                p.send(Message("OldTopic", f"m{i}-".encode() * 40), MessageQueue("OldTopic", "broker-t", 0))
        commit_log = tmp_path / "store" / "commitlog"
        first = sorted(commit_log.iterdir())[0]
        assert len(list(commit_log.iterdir())) >= 4
        time.sleep(0.5)  # several clean-up passes: nothing goes without the trigger
        assert first.exists()
        r = ok(c, "deleteExpiredCommitLog", "-b", c.br)
        assert c.br in r.stdout and "success" in r.stdout
        deadline = time.monotonic() + 20
        while first.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not first.exists()
        assert js(c, "deleteExpiredCommitLog", "-c", "TestCluster") == {c.br: {"ok": True, "error": None}}
        line = error_line(cli(c, "deleteExpiredCommitLog", "-c", "NoCluster"), 1)
        assert "NoCluster" in line and "unknown" in line
        r = cli(c, "deleteExpiredCommitLog")
        assert r.exit_code == 2 and "exactly one of -c clusterName and -b brokerAddr" in r.stderr
    finally:
        c.close()
