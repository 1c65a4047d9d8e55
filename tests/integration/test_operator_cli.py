"""The operator's first hour (issue 21), with real processes: `pumice dev` logs to RocketMQ's
files and shows INFO on the terminal (DEBUG with -v after the command), takes -c, keeps a new
store small on disk and in memory; every command takes -h; --version; --log-config hands
logging to the standard library; store-demo cleans up; errors name the file or the topic."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pumice.client import Message, MQClientError, Producer
from tests.helpers.clusters import start, stop
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually


def pumice(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pumice.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})  # fmt: skip


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def rss_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            out[key] = int(value.split()[0])
    return out


def test_dev_logs_files_and_terminal(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    ns_port, br_port = free_port(), free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text("mapedFileSizeCommitLog=1048576\nbrokerName=devBroker\n")
    proc = start(["dev", "-c", str(conf), "--store-dir", str(tmp_path / "store"), "--namesrv-port", str(ns_port),
                  "--broker-port", str(br_port), "--log-dir", str(logs), "-v", "--no-proxy", "--no-dashboard"],
                 "Ctrl-C stops")  # fmt: skip
    try:
        with Producer("DevLogProducer", f"127.0.0.1:{ns_port}") as p:
            assert p.send(Message("DevLogTopic", b"hello")).send_status.name == "SEND_OK"
        # -c took effect: a 1 MiB CommitLog file, and the broker's name
        commit_log = sorted((tmp_path / "store" / "commitlog").iterdir())
        assert commit_log and commit_log[0].stat().st_size == 1048576
        # a new store is small on disk (sparse files) and in memory
        assert disk_bytes(tmp_path / "store") < 100 * 1024 * 1024
        assert rss_kb(proc.pid)["RssFile"] < 200 * 1024

        def logged() -> bool:
            text = {f.name: f.read_text() for f in logs.iterdir()}
            assert f"The broker[devBroker, 127.0.0.1:{br_port}] boot success" in text["broker.log"]
            assert "create topic TopicConfig [topicName=DevLogTopic, readQueueNums=4" in text["broker.log"]
            assert "new producer connected" in text["broker.log"]
            assert "start-up heap frozen" in text["broker.log"]  # pumice.common.gc_freeze, once started
            assert "load over" in text["store.log"] and "create topic" not in text["store.log"]
            assert "HAService listening" in text["ha.log"] and "HAService" not in text["store.log"]
            assert "The Name Server boot success" in text["namesrv.log"]
            assert f"Broker listening on 127.0.0.1:{br_port}" in text["remoting.log"]
            return True

        eventually(logged, 10, "the log files")
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    out = "".join(proc.output_lines)  # type: ignore[attr-defined]
    assert " INFO " in out and "register broker" in out  # the terminal's INFO stream
    assert " DEBUG " in out and "connection from 127.0.0.1" in out  # -v after the command: DEBUG
    assert "The broker[devBroker] shut down." in (logs / "broker.log").read_text()


def test_broker_log_config_and_default_terminal(tmp_path: Path) -> None:
    ns_port, br_port = free_port(), free_port()
    mine = tmp_path / "mine.log"
    (tmp_path / "logging.json").write_text(json.dumps({
        "version": 1,
        "handlers": {"f": {"class": "logging.FileHandler", "filename": str(mine), "level": "INFO"}},
        "root": {"level": "INFO", "handlers": ["f"]},
    }))  # fmt: skip
    base = (
        f"listenPort={br_port}\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{ns_port}\n"
        f"storePathRootDir={tmp_path / 'store'}\nfastListenPortEnable=false\n"
    )
    (tmp_path / "broker.conf").write_text(base)
    proc = start(["broker", "-c", str(tmp_path / "broker.conf"), "--log-config", str(tmp_path / "logging.json")],
                 "boot success")  # fmt: skip
    try:
        eventually(lambda: "boot success" in mine.read_text(), 10, "the user's log file")
    finally:
        stop(proc)
    # Pumice's own log settings beside --log-config would be ignored: refused by name
    (tmp_path / "broker.conf").write_text(base + f"logDir={tmp_path / 'unused'}\n")
    both = pumice("broker", "-c", str(tmp_path / "broker.conf"), "--log-config", str(tmp_path / "logging.json"), "-v")
    assert both.returncode == 2 and "-v, logDir would have no effect" in both.stderr, both.stderr
    assert not (tmp_path / "unused").exists()
    # logDir in broker.conf, and the terminal shows no INFO lines by default
    (tmp_path / "broker.conf").write_text(base + f"logDir={tmp_path / 'kd'}\n")
    proc = start(["broker", "-c", str(tmp_path / "broker.conf")], "boot success")
    try:
        eventually(lambda: "boot success" in (tmp_path / "kd" / "broker.log").read_text(), 10, "logDir's broker.log")
    finally:
        stop(proc)
    assert not [line for line in proc.output_lines if " INFO " in line]  # type: ignore[attr-defined]
    (tmp_path / "broker.conf").write_text(base)
    bad = pumice("broker", "-c", str(tmp_path / "broker.conf"), "--log-config", str(tmp_path / "nope.ini"))
    assert bad.returncode == 1 and "--log-config" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    "args", [[], ["dev"], ["broker"], ["namesrv"], ["store-demo"], ["admin"], ["spark"], ["admin", "topicList"]]
)
def test_dash_h_everywhere(args: list[str]) -> None:
    from click.testing import CliRunner

    from pumice.cli import main

    for flag in ("-h", "--help"):
        r = CliRunner().invoke(main, [*args, flag])
        assert r.exit_code == 0 and r.stdout.startswith("Usage:"), (args, flag, r.output)


def test_version_and_untruncated_command_list() -> None:
    r = pumice("--version")
    assert r.returncode == 0 and re.fullmatch(r"pumice \S+ \(RocketMQ 4\.9 wire and store format\)\n", r.stdout)
    for group in ([], ["admin"], ["spark"]):
        listing = pumice(*group, "--help").stdout.split("Commands:")[1]
        assert "..." not in listing, (group, listing)
    assert "printMsg" in pumice("admin", "-h").stdout


def test_store_demo_cleans_up(tmp_path: Path) -> None:
    r = pumice("store-demo", "-n", "200")
    assert r.returncode == 0, r.stderr
    m = re.search(r"store in (\S+): removed", r.stdout)
    assert m and not Path(m.group(1)).exists()
    kept = tmp_path / "kept"
    r = pumice("store-demo", "-n", "200", "--store-dir", str(kept))
    assert r.returncode == 0 and f"store kept in {kept}" in r.stdout and (kept / "commitlog").is_dir()


def test_dev_refuses_keys_it_would_override(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("namesrvAddr=10.0.0.1:9876\nlistenHost=0.0.0.0\n")
    r = pumice("dev", "-c", str(conf), "--store-dir", str(tmp_path / "store"))
    assert r.returncode == 1 and r.stderr.strip() == (
        f"Error: {conf}: listenHost, namesrvAddr cannot apply to pumice dev (127.0.0.1, its own name server): "
        "remove them, or run pumice broker -c"
    )
    assert not (tmp_path / "store").exists()


def test_errors_name_the_file_and_the_topic(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("listenPort=abc\n")
    r = pumice("broker", "-c", str(conf))
    assert r.returncode == 1
    assert r.stderr.strip() == f"Error: {conf}: bad value for listenPort: 'abc': expected a whole number"
    # a name server with no broker: the error names the user's topic, not the template TBW102
    ns_port = free_port()
    (tmp_path / "ns.conf").write_text(f"listenPort={ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={tmp_path / 'kv'}\n")
    ns = start(["namesrv", "-c", str(tmp_path / "ns.conf")], "boot success")
    try:
        # its port taken: one line that says what to do
        r = pumice("namesrv", "-c", str(tmp_path / "ns.conf"))
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "address already in use" in r.stderr and "is another pumice dev, broker or name server" in r.stderr
        with Producer("NoBrokerProducer", f"127.0.0.1:{ns_port}") as p, pytest.raises(MQClientError) as e:
            p.send(Message("MyOrders", b"x"))
        assert "No route info of this topic: MyOrders" in str(e.value) and "broker running" in str(e.value)
    finally:
        stop(ns)


pytestmark = pytest.mark.timeout(120)


def test_a_terminal_that_is_never_read_does_not_stop_the_broker(tmp_path: Path) -> None:
    """-v on a pipe nobody reads: far more than the pipe's 64 KiB of DEBUG lines; the broker
    keeps answering (logging is queued to a writer thread that drops what it cannot keep)."""
    import socket

    from pumice.remoting.remoting_command import RemotingCommand
    from tests.helpers.clusters import run
    from tests.helpers.waiting import eventually

    ns_port, br_port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", "dev", "--store-dir", str(tmp_path / "store"), "--namesrv-port",
         str(ns_port), "--broker-port", str(br_port), "--log-dir", str(tmp_path / "logs"), "-v", "--no-proxy",
         "--no-dashboard"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:

        def up() -> bool:
            with socket.create_connection(("127.0.0.1", br_port), timeout=1):
                return True

        eventually(up, 30, "the broker's port", retry_on=(OSError,))
        for _ in range(1000):  # two DEBUG lines each, ~200 KB: three times a pipe's 64 KiB
            socket.create_connection(("127.0.0.1", br_port), timeout=5).close()

        async def ping() -> int:
            from pumice.remoting.remoting_client import RemotingClient

            c = RemotingClient()
            try:
                return (await c.invoke(f"127.0.0.1:{br_port}", RemotingCommand(code=28), 5)).code
            finally:
                await c.close()

        assert run(ping(), 30) == 0
        assert "connection from 127.0.0.1" in (tmp_path / "logs" / "remoting.log").read_text()
    finally:
        proc.kill()
        proc.wait(10)
