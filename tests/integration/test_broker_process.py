"""`pumice namesrv` and `pumice broker` as real processes on 127.0.0.1, driven over sockets."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from pumice.common.message_decoder import create_message_id, decode_message
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_check import scan_records
from tests.helpers.clusters import Cluster, call, pull, req, run, running_namesrv, send, start, stop
from tests.helpers.ports import free_port


def test_send_route_pull_offsets_query_and_restart(cluster: Cluster) -> None:
    async def phase1() -> str:
        c = RemotingClient()
        try:
            r = await c.invoke(cluster.br, send("OrderTopic", b"first", "k1"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            msg_id = r.ext_fields["msgId"]
            # the new topic reaches the name server without waiting for the 30 s registration
            for _ in range(50):
                route = await c.invoke(cluster.ns, RemotingCommand(code=105, ext_fields={"topic": "OrderTopic"}))
                if route.code == 0:
                    break
                await asyncio.sleep(0.1)
            assert route.code == 0
            data = orjson.loads(route.body)
            assert data["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.br}
            assert data["queueDatas"][0]["writeQueueNums"] == 4
            # pull: the record bytes, with a msgId equal to the one the send returned
            r = await c.invoke(cluster.br, pull("OrderTopic", 0))
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["nextBeginOffset"] == "1"
            m = decode_message(r.body)
            assert m.body == b"first" and create_message_id(m.store_host, m.commit_log_offset) == msg_id
            # long polling: a held pull is answered by the next send
            held = asyncio.create_task(c.invoke(cluster.br, pull("OrderTopic", 1, suspend_ms=10_000), timeout_s=15))
            await asyncio.sleep(0.3)
            assert not held.done()
            for i in range(2, 6):
                assert (await c.invoke(cluster.br, send("OrderTopic", b"m%d" % i, f"k{i}"))).code == 0
            r = await held
            assert r.code == ResponseCode.SUCCESS and b"m2" in bytes(r.body)
            # offsets
            upd = RemotingCommand(code=15, ext_fields={"consumerGroup": "CG", "topic": "OrderTopic", "queueId": 0,
                                                       "commitOffset": 3})  # fmt: skip
            assert (await c.invoke(cluster.br, upd)).code == 0
            q = RemotingCommand(code=14, ext_fields={"consumerGroup": "CG", "topic": "OrderTopic", "queueId": 0})
            assert (await c.invoke(cluster.br, q)).ext_fields["offset"] == "3"
            ask = RemotingCommand(code=30, ext_fields={"topic": "OrderTopic", "queueId": 0})
            for _ in range(50):  # dispatch runs behind the appends
                mx = await c.invoke(cluster.br, ask)
                if mx.ext_fields["offset"] == "5":
                    break
                await asyncio.sleep(0.05)
            assert mx.ext_fields["offset"] == "5"
            # query by key and view by id
            qm = RemotingCommand(code=12, ext_fields={"topic": "OrderTopic", "key": "k4", "maxNum": 8,
                                                      "beginTimestamp": 0, "endTimestamp": 2**62})  # fmt: skip
            for _ in range(50):  # the index is built by dispatch, just after the ConsumeQueue
                r = await c.invoke(cluster.br, qm)
                if r.code == 0:
                    break
                await asyncio.sleep(0.05)
            assert r.code == 0 and decode_message(r.body).body == b"m4"
            qm.ext_fields["maxNum"] = 0  # as upstream: no message asked for, none found (it was read as 32)
            assert (await c.invoke(cluster.br, qm)).code == ResponseCode.QUERY_NOT_FOUND
            del qm.ext_fields["maxNum"]  # @CFNotNull upstream
            r = await c.invoke(cluster.br, qm)
            assert r.code == ResponseCode.SYSTEM_ERROR and "maxNum" in (r.remark or "")
            view = await c.invoke(cluster.br, RemotingCommand(code=33, ext_fields={"offset": m.commit_log_offset}))
            assert view.code == 0 and decode_message(view.body).body == b"first"
            # heartbeat: the group's retry topic is created and routable
            hb = {"clientID": "127.0.0.1@1", "producerDataSet": [], "consumerDataSet": [
                {"groupName": "CG", "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0, "unitMode": False,
                 "subscriptionDataSet": [{"topic": "OrderTopic", "subString": "*"}]}]}  # fmt: skip
            assert (await c.invoke(cluster.br, RemotingCommand(code=34, body=orjson.dumps(hb)))).code == 0
            ids = await c.invoke(cluster.br, RemotingCommand(code=38, ext_fields={"consumerGroup": "CG"}))
            assert orjson.loads(ids.body) == {"consumerIdList": ["127.0.0.1@1"]}
            for _ in range(50):
                route = await c.invoke(cluster.ns, RemotingCommand(code=105, ext_fields={"topic": "%RETRY%CG"}))
                if route.code == 0:
                    break
                await asyncio.sleep(0.1)
            assert route.code == 0
            return msg_id
        finally:
            await c.close()

    msg_id = run(phase1())
    # a clean restart: messages and offsets survive
    stop(cluster.broker)
    assert not (cluster.tmp / "store" / "abort").exists()
    assert (cluster.tmp / "store" / "config" / "consumerOffset.json").exists()
    cluster.broker = cluster.start_broker()

    async def phase2() -> None:
        c = RemotingClient()
        try:
            q = RemotingCommand(code=14, ext_fields={"consumerGroup": "CG", "topic": "OrderTopic", "queueId": 0})
            assert (await c.invoke(cluster.br, q)).ext_fields["offset"] == "3"
            r = await c.invoke(cluster.br, pull("OrderTopic", 0, sys_flag=0))
            assert r.code == 0
            end, n, _ = scan_records(r.body, 0, len(r.body), True)
            assert n == 5 and end == len(r.body)
            assert (
                create_message_id(decode_message(r.body).store_host, decode_message(r.body).commit_log_offset) == msg_id
            )
            assert (await c.invoke(cluster.br, send("OrderTopic", b"after", "k9"))).ext_fields["queueOffset"] == "5"
        finally:
            await c.close()

    run(phase2())


def test_broker_config_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("listenPort=10911\nnoSuchKey=1\n")
    p = subprocess.run([sys.executable, "-m", "pumice.cli", "broker", "-c", str(bad)], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert p.returncode != 0 and "noSuchKey" in p.stderr and "Traceback" not in p.stderr
    bad.write_text("flushDiskType=SOMETIMES\n")
    p = subprocess.run([sys.executable, "-m", "pumice.cli", "broker", "-c", str(bad)], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert p.returncode != 0 and "flushDiskType" in p.stderr and "SYNC_FLUSH" in p.stderr
    # -p prints a broker.conf that starts the same broker: fed back, it prints the same again
    good = tmp_path / "good.conf"
    good.write_text(f"listenPort=10955\nbrokerIP1=10.0.0.7\nstorePathRootDir={tmp_path}/s\nslaveReadEnable=true\n")
    printed = []
    for conf in (good, tmp_path / "printed.conf"):
        p = subprocess.run([sys.executable, "-m", "pumice.cli", "broker", "-p", "-c", str(conf)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
        assert p.returncode == 0, p.stderr
        printed.append(p.stdout)
        (tmp_path / "printed.conf").write_text(p.stdout)
    assert printed[0] == printed[1]
    assert "brokerIP1=10.0.0.7\n" in printed[0] and "slaveReadEnable=true\n" in printed[0]
    assert "None" not in printed[0] and "=True" not in printed[0]
    ns = tmp_path / "ns.conf"
    ns.write_text("listenPort=9877\nserverWorkerThreads=8\n")
    p = subprocess.run([sys.executable, "-m", "pumice.cli", "namesrv", "-p", "-c", str(ns)], capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert p.returncode == 0 and "listenPort=9877\n" in p.stdout and "orderMessageEnable=false\n" in p.stdout, p


def test_a_failed_start_stops_what_it_started(tmp_path: Path) -> None:
    """The fast port (listenPort - 2) is taken: start-up fails after the store started. The
    store is shut down on the way out, so its abort file goes and the next start is a normal
    recovery (it was left behind), and the managers' files are not rewritten from defaults."""
    port = free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenHost=127.0.0.1\nlistenPort={port}\nstorePathRootDir={tmp_path}/store\n"
                    "mapedFileSizeCommitLog=65536\n")  # fmt: skip
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port - 2))
        taken.listen()
        p = subprocess.run([sys.executable, "-m", "pumice.cli", "broker", "-c", str(conf)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert p.returncode != 0 and "cannot start" in p.stderr, p.stderr
    assert (tmp_path / "store" / "checkpoint").exists()  # the store had started
    assert not (tmp_path / "store" / "abort").exists()
    # a topics.json that cannot be read stops start-up, and stays as it was for the operator
    topics = tmp_path / "store" / "config" / "topics.json"
    topics.write_text("{not json")
    (tmp_path / "store" / "config" / "topics.json.bak").unlink(missing_ok=True)
    p = subprocess.run([sys.executable, "-m", "pumice.cli", "broker", "-c", str(conf)], capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert p.returncode != 0 and "topics.json" in p.stderr, p.stderr
    assert topics.read_text() == "{not json"


def test_a_broker_started_before_its_name_server_registers_10_s_after_its_start(tmp_path: Path) -> None:
    """The start's registration finds no name server; as 4.9's schedule, the broker registers
    again 10 s after its start, not a whole registerNameServerPeriod (30 s) later."""
    ns_port, br_port = free_port(), free_port()
    (tmp_path / "ns.conf").write_text(f"listenHost=127.0.0.1\nlistenPort={ns_port}\nkvConfigPath={tmp_path}/kv.json\n")
    (tmp_path / "broker.conf").write_text(
        f"brokerClusterName=LateCluster\nbrokerName=broker-late\nlistenHost=127.0.0.1\nlistenPort={br_port}\n"
        f"brokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={tmp_path}/store\n"
        "mapedFileSizeCommitLog=1048576\npreallocateCommitLog=false\nfastListenPortEnable=false\n"
    )
    broker = start(["broker", "-c", str(tmp_path / "broker.conf")], "boot success")
    started = time.monotonic()
    try:
        namesrv = start(["namesrv", "-c", str(tmp_path / "ns.conf")], "boot success")
        try:
            brokers: dict = {}
            while time.monotonic() - started < 20:  # 30 s would be the period
                (r,) = call(f"127.0.0.1:{ns_port}", None, req(RequestCode.GET_BROKER_CLUSTER_INFO))
                assert r.code == ResponseCode.SUCCESS, r.remark
                brokers = orjson.loads(r.body)["brokerAddrTable"]
                if "broker-late" in brokers:
                    break
                time.sleep(0.5)
            assert "broker-late" in brokers, f"not registered {time.monotonic() - started:.1f} s after the start"
            assert time.monotonic() - started >= 5  # the registration of the schedule, not an early retry
        finally:
            stop(namesrv)
    finally:
        stop(broker)


def test_a_second_broker_on_the_same_store_leaves_the_running_one_alone(cluster: Cluster) -> None:
    """Started twice (an operator, a service manager): the second stops at the store's lock,
    before it reads the running broker's config files (which its shutdown would rewrite) and
    without unregistering the running broker from the name server."""
    topics = cluster.tmp / "store" / "config" / "topics.json"
    second = cluster.tmp / "second.conf"
    second.write_text((cluster.tmp / "broker.conf").read_text().replace(f"listenPort={cluster.broker_port}",
                                                                       f"listenPort={free_port()}")
                      + "traceTopicEnable=true\n")  # fmt: skip

    async def main() -> None:
        c = RemotingClient()
        try:
            assert (await c.invoke(cluster.br, send("LockTopic", b"x", "k"))).code == 0  # topics.json is written
            for _ in range(100):
                if topics.exists() and "LockTopic" in topics.read_text():
                    break
                await asyncio.sleep(0.05)
            before = topics.read_bytes()
            cmd = [sys.executable, "-m", "pumice.cli", "broker", "-c", str(second)]
            p = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=60)
            assert p.returncode != 0 and "Lock failed" in p.stderr, p.stderr
            # the README's words, and a remedy pumice broker has (it has no --store-dir)
            assert "is locked by another process" in p.stderr and "storePathRootDir" in p.stderr, p.stderr
            assert "--store-dir" not in p.stderr, p.stderr
            assert topics.read_bytes() == before  # not rewritten with the second one's trace topic
            r = await c.invoke(cluster.ns, RemotingCommand(code=106))  # GET_BROKER_CLUSTER_INFO
            assert orjson.loads(r.body)["brokerAddrTable"]["broker-t"]["brokerAddrs"] == {"0": cluster.br}
        finally:
            await c.close()

    run(main())


def test_delayed_delivery_retry_and_dlq(cluster: Cluster) -> None:
    async def wait_for(
        c: RemotingClient, topic: str, offset: int, queue_id: int = 0, seconds: float = 15
    ) -> RemotingCommand:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            r = await c.invoke(cluster.br, pull(topic, offset, queue_id=queue_id, sys_flag=0))
            if r.code == ResponseCode.SUCCESS:
                return r
            await asyncio.sleep(0.1)
        raise AssertionError(f"nothing arrived on {topic}:{queue_id} at {offset} within {seconds}s")

    async def main() -> None:
        c = RemotingClient()
        try:
            # DELAY=1 (1 s): not on the topic at once, then delivered with its tag and keys
            req = send("DelayTopic", b"later", "dk1")
            req.ext_fields["i"] += "\x02DELAY\x011"
            t0 = time.monotonic()
            assert (await c.invoke(cluster.br, req)).code == 0
            first = await c.invoke(cluster.br, pull("DelayTopic", 0, sys_flag=0))
            assert first.code != ResponseCode.SUCCESS
            r = await wait_for(c, "DelayTopic", 0)
            assert time.monotonic() - t0 >= 0.9
            m = decode_message(r.body)
            assert m.body == b"later" and m.properties["KEYS"] == "dk1"
            assert (m.properties["DELAY"], m.properties["REAL_TOPIC"]) == ("1", "DelayTopic")  # as 4.9 stores them

            # a consumer gives the message back: it comes again on %RETRY%CG, delayed by level 1; its
            # ORIGIN_MESSAGE_ID is the stored message's id, not the header's (a client's word, as upstream)
            back = RemotingCommand(code=36, ext_fields={"offset": m.commit_log_offset, "group": "CG", "delayLevel": 1,
                                                        "originMsgId": "X\x01\x02junk"})  # fmt: skip
            assert (await c.invoke(cluster.br, back)).code == 0
            r = await wait_for(c, "%RETRY%CG", 0)
            retry = decode_message(r.body)
            assert retry.body == b"later" and retry.reconsume_times == 1
            assert retry.properties["RETRY_TOPIC"] == "DelayTopic" and retry.properties["ORIGIN_MESSAGE_ID"] == m.msg_id
            assert "junk" not in str(retry.properties)

            # past maxReconsumeTimes it goes to the dead-letter queue instead
            dead = RemotingCommand(code=36, ext_fields={"offset": retry.commit_log_offset, "group": "CG",
                                                        "delayLevel": 0, "maxReconsumeTimes": 1})  # fmt: skip
            assert (await c.invoke(cluster.br, dead)).code == 0
            for _ in range(50):
                mx = await c.invoke(cluster.br, RemotingCommand(code=30, ext_fields={"topic": "%DLQ%CG", "queueId": 0}))
                if mx.ext_fields.get("offset") == "1":
                    break
                await asyncio.sleep(0.1)
            assert mx.ext_fields["offset"] == "1"
            # maxReconsumeTimes 0 (a Java consumer's setMaxReconsumeTimes(0)): no retry at all
            never = RemotingCommand(code=36, ext_fields={"offset": m.commit_log_offset, "group": "CG",
                                                         "delayLevel": 0, "maxReconsumeTimes": "0"})  # fmt: skip
            assert (await c.invoke(cluster.br, never)).code == 0
            for _ in range(50):
                mx = await c.invoke(cluster.br, RemotingCommand(code=30, ext_fields={"topic": "%DLQ%CG", "queueId": 0}))
                if mx.ext_fields.get("offset") == "2":
                    break
                await asyncio.sleep(0.1)
            assert mx.ext_fields["offset"] == "2"
            # the DLQ is readable and writable, as 4.9.3 and later create it: its messages can be pulled
            dlq = await c.invoke(cluster.br, pull("%DLQ%CG", 0))
            assert dlq.code == ResponseCode.SUCCESS and dlq.ext_fields["nextBeginOffset"] == "2"

            async def back_to(group: str) -> RemotingCommand:
                fields = {"offset": m.commit_log_offset, "group": group, "delayLevel": 0}
                return await c.invoke(cluster.br, RemotingCommand(code=36, ext_fields=fields))

            async def topic_exists(topic: str) -> bool:
                r = await c.invoke(cluster.br, RemotingCommand(code=21))  # GET_ALL_TOPIC_CONFIG
                return topic in orjson.loads(r.body)["topicConfigTable"]

            # a group with retryQueueNums 0 or less wants no retries: SUCCESS, nothing stored, as upstream
            for group, nums in (("CG0", 0), ("CGN", -1)):
                body = orjson.dumps({"groupName": group, "retryQueueNums": nums})
                assert (await c.invoke(cluster.br, RemotingCommand(code=200, body=body))).code == 0
                assert (await back_to(group)).code == ResponseCode.SUCCESS
                assert not await topic_exists(f"%RETRY%{group}") and not await topic_exists(f"%DLQ%{group}")
            # a read-only retry topic, or a broker that takes no writes: NO_PERMISSION
            ro = {"topic": "%RETRY%CGRO", "readQueueNums": 1, "writeQueueNums": 1, "perm": 4,
                  "topicFilterType": "SINGLE_TAG"}  # fmt: skip
            assert (await c.invoke(cluster.br, RemotingCommand(code=17, ext_fields=ro))).code == 0
            r = await back_to("CGRO")
            assert (r.code, r.remark) == (
                ResponseCode.NO_PERMISSION,
                "the topic[%RETRY%CGRO] sending message is forbidden",
            )
            try:
                r = await c.invoke(cluster.br, RemotingCommand(code=25, body=b"brokerPermission=4"))
                assert r.code == 0
                r = await back_to("CG")
                assert (r.code, r.remark) == (
                    ResponseCode.NO_PERMISSION,
                    "the broker[127.0.0.1] sending message is forbidden",
                )
            finally:
                await c.invoke(cluster.br, RemotingCommand(code=25, body=b"brokerPermission=6"))
            assert (await back_to("CG")).code == ResponseCode.SUCCESS
        finally:
            await c.close()

    run(main())


def test_fast_port_serves_everything_but_pulls(tmp_path: Path) -> None:
    """The VIP channel on listenPort - 2 answers sends but not pulls, as the seeds describe."""
    port = free_port()  # port - 2 is free too
    with running_namesrv(tmp_path) as ns:
        conf = tmp_path / "broker.conf"
        conf.write_text(
            f"listenPort={port}\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\nnamesrvAddr={ns}\n"
            f"storePathRootDir={tmp_path / 'store'}\nmapedFileSizeCommitLog=1048576\nprefaultCommitLog=false\n"
        )
        broker = start(["broker", "-c", str(conf)], "boot success")
        try:

            async def main() -> None:
                c = RemotingClient()
                fast = f"127.0.0.1:{port - 2}"
                try:
                    assert (await c.invoke(fast, send("VipTopic", b"v", "vk"))).code == ResponseCode.SUCCESS
                    r = await c.invoke(fast, pull("VipTopic", 0, sys_flag=0))
                    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
                    r = await c.invoke(f"127.0.0.1:{port}", pull("VipTopic", 0, sys_flag=0))
                    assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND)
                finally:
                    await c.close()

            run(main())
        finally:
            stop(broker)


@pytest.mark.parametrize(
    ("home", "acl_file", "message", "extra"),
    [
        (None, None, "aclEnable=true needs ROCKETMQ_HOME (or rocketmqHome in broker.conf)", ""),
        ("home", "accounts: [\n", "the ACL files under", ""),
        ("home", "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [a]\n",
         "Parse resource permission failed for topic:a", ""),
        ("home", "", "haWhiteRemoteAddresses '10.0.0.1;*.168.1.1'", "haWhiteRemoteAddresses=10.0.0.1;*.168.1.1\n"),
    ],
)  # fmt: skip
def test_acl_that_cannot_load_stops_start_up(
    tmp_path: Path, home: str | None, acl_file: str | None, message: str, extra: str
) -> None:
    """aclEnable=true with no home for the rules, or a file (or an HA white list) that does not
    load: one line naming it, exit 1, before the store is touched."""
    conf = tmp_path / "broker.conf"
    lines = f"listenHost=127.0.0.1\nlistenPort={free_port()}\nstorePathRootDir={tmp_path}/store\naclEnable=true\n"
    lines += extra
    if home is not None:
        (tmp_path / home / "conf").mkdir(parents=True)
        (tmp_path / home / "conf" / "plain_acl.yml").write_text(acl_file or "")
        lines += f"rocketmqHome={tmp_path / home}\n"
    conf.write_text(lines)
    env = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"}
    p = subprocess.run([sys.executable, "-m", "pumice.cli", "broker", "-c", str(conf)], capture_output=True,
                       text=True, timeout=60, env=env)  # fmt: skip
    assert p.returncode == 1 and "cannot start" in p.stderr and message in p.stderr, p.stderr
    assert not (tmp_path / "store" / "commitlog").exists()
