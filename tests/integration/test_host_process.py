"""What an operator trips over on a real host (issue 31), against real `pumice namesrv` and
`pumice broker` processes on 127.0.0.1: the name server from $NAMESRV_ADDR, a broker with no
name server, a second broker taking another's brokerName and brokerId, brokers sharing a log
directory, a name server's request sent to a broker, a plain client against TLS."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from pumice.client import ConsumeStatus, PushConsumer
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, run, running_namesrv, start, stop
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually
from tests.unit.test_rocketmq_conf_samples import BROKER_CLASSES, java_keys

BASE_CONF = (
    "listenHost=127.0.0.1\nmappedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\npreallocateCommitLog=false\n"
    "prefaultCommitLog=false\nfastListenPortEnable=false\n"
)


def broker_conf(tmp: Path, name: str, lines: str = "") -> tuple[Path, int]:
    """A broker.conf of broker ``name`` on a free port with a store of its own; its path and port."""
    port = free_port()
    conf = tmp / f"{name}-{port}.conf"
    store = tmp / f"store-{port}"
    conf.write_text(f"brokerName={name}\nlistenPort={port}\nstorePathRootDir={store}\n{BASE_CONF}{lines}")
    return conf, port


def invoke(addr: str, cmd: RemotingCommand) -> RemotingCommand:
    async def call() -> RemotingCommand:
        c = RemotingClient()
        try:
            return await c.invoke(addr, cmd, 10)
        finally:
            await c.close()

    return run(call(), 30)


def brokers_of(ns: str) -> dict[str, dict[str, str]]:
    """brokerName -> {brokerId: address}, from GET_BROKER_CLUSTER_INFO."""
    r = invoke(ns, RemotingCommand(code=106))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return {n: bd["brokerAddrs"] for n, bd in orjson.loads(r.body)["brokerAddrTable"].items()}


def output(proc: subprocess.Popen[str]) -> str:
    return "".join(proc.output_lines)  # type: ignore[attr-defined]


def test_a_broker_without_a_name_server_says_so(tmp_path: Path) -> None:
    conf, _ = broker_conf(tmp_path, "broker-alone")
    alone = start(["broker", "-c", str(conf)], "boot success", env={"NAMESRV_ADDR": ""})
    try:
        # the log's writer thread may print it just after the boot line
        eventually(lambda: "has no name server" in output(alone), 10, "the warning")
        assert "$NAMESRV_ADDR" in output(alone) and "name server is None" not in output(alone), output(alone)
    finally:
        stop(alone)


def test_the_name_server_comes_from_namesrv_addr(tmp_path: Path) -> None:
    """The distribution's confs have no namesrvAddr: $NAMESRV_ADDR is read, as RocketMQ's BrokerConfig does."""
    with running_namesrv(tmp_path) as ns:
        conf, port = broker_conf(tmp_path, "broker-env")
        proc = start(["broker", "-c", str(conf)], "boot success", env={"NAMESRV_ADDR": ns})
        try:
            assert f"name server is {ns}" in output(proc), output(proc)
            assert brokers_of(ns)["broker-env"] == {"0": f"127.0.0.1:{port}"}
        finally:
            stop(proc)


def test_a_second_broker_with_the_same_name_and_id_is_warned_and_the_name_server_logs_it(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    conf, port = broker_conf(tmp_path, "broker-t", f"brokerClusterName=TestCluster\nnamesrvAddr={c.ns}\n")
    try:
        second = start(["broker", "-c", str(conf)], "boot success")
        try:
            # RocketMQ's route behaviour is kept: the last registration's address wins ...
            assert brokers_of(c.ns)["broker-t"] == {"0": f"127.0.0.1:{port}"}
            # ... but both sides say so: the broker that took the route, and the name server
            warning = re.compile(r"name server .*broker-t\[0\].*was registered by ([\d.:]+)")
            said = eventually(lambda: warning.search(output(second)), 10, "the second broker's warning")
            assert said.group(1) == c.br, output(second)
            eventually(lambda: f"register broker 127.0.0.1:{port}: broker-t[0]" in output(c.namesrv), 10,
                       "the name server's warning")  # fmt: skip
            assert "still alive" in output(c.namesrv)
        finally:
            stop(second)
    finally:
        c.close()


def test_brokers_sharing_a_log_directory_are_told_apart(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    with running_namesrv(tmp_path) as ns:
        procs = []
        try:
            for name, extra in (("broker-a", ""), ("broker-b", ""), ("broker-c", "isolateLogEnable=true\n")):
                conf, _ = broker_conf(tmp_path, name, f"namesrvAddr={ns}\nlogDir={logs}\n{extra}")
                procs.append(start(["broker", "-c", str(conf)], "boot success"))
        finally:
            for p in procs:
                stop(p)
    shared = (logs / "broker.log").read_text()
    for name, p in zip(("broker-a", "broker-b"), procs, strict=False):
        assert f"[{name}_0 pid={p.pid}]" in shared, shared[:2000]
    # every line of the shared file names its broker
    tagged = re.compile(r"^\S+ \S+ \w+ \[broker-[ab]_0 pid=\d+\] ")
    first_lines = [line for line in shared.splitlines() if re.match(r"^\d{4}-\d\d-\d\d ", line)]
    assert first_lines and all(tagged.match(line) for line in first_lines), first_lines[:5]
    # isolateLogEnable: a directory of its own, brokerName_brokerId as RocketMQ names it
    assert "broker-c" not in shared
    assert f"[broker-c_0 pid={procs[2].pid}]" in (logs / "broker-c_0" / "broker.log").read_text()


def test_a_name_server_request_sent_to_a_broker_says_it_is_a_broker(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    try:
        r = invoke(c.br, RemotingCommand(code=105, ext_fields={"topic": "TBW102"}))  # GET_ROUTEINFO_BY_TOPIC
        # 4.9's code and its words, then what to do
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert r.remark is not None and r.remark.startswith(" request type 105 not supported"), r.remark
        assert "this is a broker" in r.remark and "name server" in r.remark, r.remark
        r = invoke(c.br, RemotingCommand(code=13))  # a code no one serves: 4.9's remark alone
        assert (r.code, r.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 13 not supported")
    finally:
        c.close()


def test_a_plain_client_against_an_enforcing_server_is_told_about_tls(tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    kv = tmp_path / "kv.json"
    conf.write_text(f"listenPort={port}\nlistenHost=127.0.0.1\nkvConfigPath={kv}\ntlsMode=enforcing\n")
    namesrv = start(["namesrv", "-c", str(conf)], "boot success")  # with the self-signed test certificate
    try:
        with pytest.raises(RemotingConnectError, match=r"closed before any answer: .*enforces TLS"):
            invoke(f"127.0.0.1:{port}", RemotingCommand(code=106))
    finally:
        stop(namesrv)


def test_a_consumer_of_a_topic_that_does_not_exist_is_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running_namesrv(tmp_path) as ns, caplog.at_level(logging.INFO, logger="pumice.client"):
        consumer = PushConsumer("GhostReaders", ns)
        consumer.subscribe("NoSuchTopic", "*")
        consumer.register_message_listener(lambda msgs, ctx: ConsumeStatus.SUCCESS)
        consumer.start()  # starts: the topic may be created later
        consumer.shutdown()
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]  # not its retry topic: the broker makes that
    assert "NoSuchTopic" in warned[0].getMessage()
    assert "GhostReaders" in warned[0].getMessage() and "no route" in warned[0].getMessage()


# RocketMQ's defaults that depend on the CPUs: the key table gives them for 2
CPU_DEPENDENT = {"sendMessageThreadPoolNums", "putMessageFutureThreadPoolNums", "pullMessageThreadPoolNums",
                 "processReplyMessageThreadPoolNums", "queryMessageThreadPoolNums", "heartbeatThreadPoolNums",
                 "endTransactionThreadPoolNums", "clientCallbackExecutorThreads"}  # fmt: skip


def test_a_whole_mqbroker_p_dump_starts_quietly_and_the_rest_is_one_line(tmp_path: Path) -> None:
    keys = java_keys(*BROKER_CLASSES)
    if os.cpu_count() != 2:
        keys = {k: v for k, v in keys.items() if k not in CPU_DEPENDENT}
    dump = "".join(f"{k}={'' if v == 'null' else v}\n" for k, v in keys.items())
    dump += f"storePathRootDir={tmp_path / 'store'}\nlistenPort=10911\n"  # as mqbroker sets it before -p
    conf = tmp_path / "broker.conf"
    cmd = [sys.executable, "-m", "pumice.cli", "broker", "-c", str(conf), "-p"]  # loads, prints, exits
    conf.write_text(dump)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "brokerName=" in p.stdout, p.stderr
    assert "no effect" not in p.stderr, p.stderr  # every ignored key is at RocketMQ's default
    conf.write_text(dump + "serverWorkerThreads=16\nclientWorkerThreads=8\ncommercialEnable=false\n")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    said = [line for line in p.stderr.splitlines() if "no effect in Pumice" in line]
    assert p.returncode == 0 and len(said) == 1, p.stderr
    for key in ("serverWorkerThreads=16", "clientWorkerThreads=8", "commercialEnable=false"):
        assert key in said[0], said
