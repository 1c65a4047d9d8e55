"""Launchers: each broker started fresh, in its own empty directory under the run's temp dir, on
127.0.0.1 and ports from ``bench.processes.free_port``, and stopped by pid.

``LAUNCHERS`` maps a broker's name to its launcher; ``launcher.missing()`` says why it cannot run
here (None when it can) and ``launcher.start(root, fsync)`` returns a ``Running`` broker:

* ``pumice``: ``python3 -m pumice.cli namesrv`` and ``... broker -c broker.conf``
  (``flushDiskType=ASYNC_FLUSH``; ``SYNC_FLUSH`` with ``fsync``).
* ``pumice-pure``: the same, its processes started with ``PUMICE_PURE=1`` (the pure-Python twins
  of the native data plane, what a machine without Rust runs).
* ``rocketmq``: Apache RocketMQ 4.9.7's own name server and broker (tests/oracle/rocketmq_peer.py,
  its JVM flags: -Xmx512m, SerialGC), same flush types.
* ``kafka``: Kafka 3.9.1 in KRaft mode (one node, broker and controller), jars from
  bench/peers/kafka/pom.xml, Kafka's own start-script JVM options (-Xmx1G, G1);
  ``log.flush.interval.messages=1`` with ``fsync``.
* ``redis``: ``redis-server`` with ``appendonly yes``, ``appendfsync everysec`` (``always`` with
  ``fsync``), no RDB snapshots, no AOF rewrite.
* ``nats``: ``nats-server -js -sd <dir>`` (JetStream, file storage; no per-message fsync mode).
* ``rabbitmq``: ``rabbitmq-server`` with the ``rabbitmq_stream`` plugin, its own node name, ports,
  Mnesia and log directories and its own ``epmd`` (no per-message fsync mode).

Every process started here is a child of this one and is stopped by its pid (SIGTERM, then
SIGKILL past a timeout), with whatever it started itself.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peers.cpu import tree_pids
from bench.processes import free_port

REPO = Path(__file__).resolve().parents[2]
KAFKA_CLASSPATH = REPO / "bench" / "peers" / "kafka" / "target" / "classpath.txt"
ROCKETMQ_CLASSPATH = REPO / "tests" / "java-rocketmq" / "target" / "classpath.txt"
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
BOOT_TIMEOUT_S = 90.0
KAFKA_JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-Djava.awt.headless=true"]  # fmt: skip


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _spawn(cmd: list[str], out: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``cmd`` with stdout and stderr to ``out``, in a session of its own (a Ctrl-C here
    does not reach it: the ``finally`` of the run stops it in order)."""
    with out.open("ab") as f:
        return subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, cwd=cwd,
            env=env if env is not None else dict(os.environ), start_new_session=True,
        )  # fmt: skip


def _stop_proc(p: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGTERM by pid and wait; SIGKILL past ``timeout_s``; then SIGKILL whatever it had started
    that is still there (its descendants, by pid)."""
    if p.poll() is not None:
        return
    family = [q for q in tree_pids([p.pid]) if q != p.pid]
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(10)
    for q in family:
        try:
            os.kill(q, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_for(what: str, ready: Callable[[], bool], proc: Any, log: Path, timeout_s: float = BOOT_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} during start-up: {_tail(log, 800)}")
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start within {timeout_s:.0f} s: {_tail(log, 800)}")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _in_file(path: Path, text: str) -> Callable[[], bool]:
    return lambda: text in _tail(path, 1 << 20)


@dataclass
class Running:
    """A started broker: how drivers reach it (``endpoint``), where it stores (``data_dir``), the
    pids whose process trees are its CPU, and how it is stopped (``stoppers``, last first)."""

    name: str
    data_dir: Path
    endpoint: dict[str, Any]
    stoppers: list[Callable[[], None]] = field(default_factory=list)
    root_pids: list[int] = field(default_factory=list)
    fsync: bool = False

    def stop(self) -> None:
        errors = []
        for stop in reversed(self.stoppers):
            try:
                stop()
            except Exception as e:  # go on stopping the others
                errors.append(e)
        self.stoppers.clear()
        if errors:
            raise errors[0]


def _java_missing(classpath: Path, project: str) -> str | None:
    """Why a JVM broker cannot run here: no java, or its Maven project not built."""
    if shutil.which("java") is None:
        return "java is not installed"
    if not classpath.exists():
        return f"{project} is not built (bash bench/peers/install.sh)"
    return None


class Launcher(ABC):
    name = ""
    summary = ""  # how it runs, for the report
    fsync_mode = ""  # the per-message fsync setting used in the fsync workload ("" = it has none)

    def missing(self) -> str | None:
        return None

    @abstractmethod
    def start(self, root: Path, fsync: bool) -> Running: ...

    def _begin(self, root: Path, fsync: bool) -> tuple[Path, Running]:
        home = root / f"{self.name}-{'fsync' if fsync else 'default'}-{time.monotonic_ns()}"
        home.mkdir(parents=True)
        return home, Running(self.name, home / "data", {}, fsync=fsync)


def _start_guarded(run: Running, fn: Callable[[], None]) -> Running:
    try:
        fn()
    except BaseException:
        run.stop()
        raise
    return run


class PumiceLauncher(Launcher):
    name = "pumice"
    summary = "`pumice.cli namesrv` + `broker`, ASYNC_FLUSH (SYNC_FLUSH for the fsync workload), 4 queues a topic"
    fsync_mode = "flushDiskType=SYNC_FLUSH"

    def start(self, root: Path, fsync: bool) -> Running:
        home, run = self._begin(root, fsync)
        ns_port, br_port = free_port(), free_port()
        (home / "ns.conf").write_text(f"listenPort={ns_port}\nlistenHost=127.0.0.1\nkvConfigPath={home}/kv.json\n")
        flush = "SYNC_FLUSH" if fsync else "ASYNC_FLUSH"
        (home / "broker.conf").write_text(
            f"brokerClusterName=BenchCluster\nlistenPort={br_port}\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\n"
            f"namesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={run.data_dir}\nfastListenPortEnable=false\n"
            f"flushDiskType={flush}\n"
        )
        run.endpoint = {"namesrv": f"127.0.0.1:{ns_port}", "cluster": "BenchCluster"}

        def go() -> None:
            for role, conf in (("namesrv", "ns.conf"), ("broker", "broker.conf")):
                log = home / f"{role}.out"
                p = _spawn([sys.executable, "-m", "pumice.cli", role, "-c", str(home / conf)], log, home, self.env())
                run.stoppers.append(lambda p=p: _stop_proc(p))
                run.root_pids.append(p.pid)
                _wait_for(f"pumice {role}", _in_file(log, "boot success"), p, log)

        return _start_guarded(run, go)

    def env(self) -> dict[str, str] | None:
        return None


class PurePumiceLauncher(PumiceLauncher):
    name = "pumice-pure"
    summary = (
        "the same, its name server and broker started with PUMICE_PURE=1 (the pure-Python twins of "
        "pumice._native); the client is the same native one"
    )

    def env(self) -> dict[str, str] | None:
        return {**os.environ, "PUMICE_PURE": "1"}


class RocketMQLauncher(Launcher):
    name = "rocketmq"
    summary = (
        "Apache RocketMQ 4.9.7 NamesrvStartup + BrokerStartup (tests/oracle/rocketmq_peer.py JVM flags: "
        "-Xmx512m, SerialGC, waitTimeMillsInSendQueue=3000: at its default of 200 ms it refused the single-send "
        "phases as SYSTEM_BUSY on 2026-11-29), ASYNC_FLUSH / SYNC_FLUSH, 4 queues a topic"
    )
    fsync_mode = "flushDiskType=SYNC_FLUSH"

    def missing(self) -> str | None:
        return _java_missing(ROCKETMQ_CLASSPATH, "tests/java-rocketmq")

    def start(self, root: Path, fsync: bool) -> Running:
        from tests.oracle.rocketmq_peer import JavaBroker, JavaNamesrv

        home, run = self._begin(root, fsync)
        cp = ROCKETMQ_CLASSPATH.read_text().strip()
        ns_port, br_port = free_port(), free_port()
        flush = "SYNC_FLUSH" if fsync else "ASYNC_FLUSH"
        conf = (
            f"brokerClusterName=BenchCluster\nbrokerName=bench-broker\nbrokerId=0\nlistenPort={br_port}\n"
            f"namesrvAddr=127.0.0.1:{ns_port}\nbrokerIP1=127.0.0.1\nstorePathRootDir={run.data_dir}\n"
            f"storePathCommitLog={run.data_dir}/commitlog\nflushDiskType={flush}\nautoCreateTopicEnable=false\n"
        )
        run.endpoint = {"namesrv": f"127.0.0.1:{ns_port}", "cluster": "BenchCluster"}

        def go() -> None:
            ns = JavaNamesrv(home / "namesrv", ns_port, classpath=cp)
            run.stoppers.append(lambda: ns.stop(30) and None)
            run.root_pids.append(ns.pid)
            br = JavaBroker(home / "broker", conf, classpath=cp)
            run.stoppers.append(lambda: br.stop(30) and None)
            run.root_pids.append(br.pid)

        return _start_guarded(run, go)


class KafkaLauncher(Launcher):
    name = "kafka"
    summary = "Kafka 3.9.1, KRaft, one node (broker + controller), -Xmx1G G1, 4 partitions, replication factor 1"
    fsync_mode = "log.flush.interval.messages=1, acks=all"

    def missing(self) -> str | None:
        return _java_missing(KAFKA_CLASSPATH, "bench/peers/kafka")

    def start(self, root: Path, fsync: bool) -> Running:
        home, run = self._begin(root, fsync)
        cp = KAFKA_CLASSPATH.read_text().strip()
        port, cport = free_port(), free_port()
        props = home / "server.properties"
        props.write_text(
            "process.roles=broker,controller\nnode.id=1\n"
            f"controller.quorum.voters=1@127.0.0.1:{cport}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
            "controller.listener.names=CONTROLLER\ninter.broker.listener.name=PLAINTEXT\n"
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
            f"log.dirs={run.data_dir}\nnum.partitions=4\ndefault.replication.factor=1\n"
            "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n"
            "auto.create.topics.enable=false\n" + ("log.flush.interval.messages=1\n" if fsync else "")
        )
        log4j = home / "log4j.properties"
        log4j.write_text(
            "log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={home}/server.log\nlog4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\nlog4j.logger.kafka.controller=INFO\n"
        )
        java = ["java", *KAFKA_JVM, f"-Dlog4j.configuration=file:{log4j}", f"-Dkafka.logs.dir={home}", "-cp", cp]
        # one id in 64 starts with "-": StorageTool's argparse takes "-t -x…" for a missing value
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        run.endpoint = {"bootstrap": f"127.0.0.1:{port}"}

        def go() -> None:
            fmt = subprocess.run(
                [*java, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(props)],
                capture_output=True, text=True, timeout=120, cwd=home, check=False,
            )  # fmt: skip
            if fmt.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed: {(fmt.stdout + fmt.stderr)[-800:]}")
            log = home / "kafka.out"
            p = _spawn([*java, "kafka.Kafka", str(props)], log, home)
            run.stoppers.append(lambda: _stop_proc(p, 60))
            run.root_pids.append(p.pid)
            _wait_for("kafka", _in_file(home / "server.log", "Kafka Server started"), p, home / "server.log")

        return _start_guarded(run, go)


class RedisLauncher(Launcher):
    name = "redis"
    summary = "redis-server, a stream per topic, AOF (everysec; always for the fsync workload), no RDB, no AOF rewrite"
    fsync_mode = "appendonly yes, appendfsync always"

    def missing(self) -> str | None:
        return None if shutil.which("redis-server") else "redis-server is not installed (apt redis-server)"

    def start(self, root: Path, fsync: bool) -> Running:
        home, run = self._begin(root, fsync)
        run.data_dir.mkdir()
        port = free_port()
        log = home / "redis.log"
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(run.data_dir),
               "--daemonize", "no", "--logfile", str(log), "--save", "", "--appendonly", "yes",
               "--appendfsync", "always" if fsync else "everysec", "--auto-aof-rewrite-percentage", "0",
               "--maxclients", "4096"]  # fmt: skip
        run.endpoint = {"host": "127.0.0.1", "port": port}

        def go() -> None:
            p = _spawn(cmd, home / "redis.out", home)
            run.stoppers.append(lambda: _stop_proc(p))
            run.root_pids.append(p.pid)
            _wait_for("redis-server", _in_file(log, "Ready to accept connections"), p, log)

        return _start_guarded(run, go)


class NatsLauncher(Launcher):
    name = "nats"
    summary = "nats-server -js, a file-storage stream per topic, 1 replica"

    def missing(self) -> str | None:
        return None if shutil.which("nats-server") else "nats-server is not installed (apt nats-server)"

    def start(self, root: Path, fsync: bool) -> Running:
        home, run = self._begin(root, fsync)
        run.data_dir.mkdir()
        port = free_port()
        log = home / "nats.log"
        cmd = ["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(run.data_dir), "-l", str(log)]
        run.endpoint = {"url": f"nats://127.0.0.1:{port}"}

        def go() -> None:
            p = _spawn(cmd, home / "nats.out", home)
            run.stoppers.append(lambda: _stop_proc(p))
            run.root_pids.append(p.pid)
            _wait_for("nats-server", _in_file(log, "Server is ready"), p, log)

        return _start_guarded(run, go)


class RabbitMQLauncher(Launcher):
    name = "rabbitmq"
    summary = "rabbitmq-server with rabbitmq_stream, one stream per topic, single node"

    def missing(self) -> str | None:
        if not os.access(RABBITMQ_SERVER, os.X_OK):
            return "rabbitmq-server is not installed (apt rabbitmq-server)"
        if shutil.which("epmd") is None:
            return "epmd (erlang) is not installed"
        return None

    def start(self, root: Path, fsync: bool) -> Running:
        home, run = self._begin(root, fsync)
        run.data_dir.mkdir()
        amqp, stream, dist, epmd_port = free_port(), free_port(), free_port(), free_port()
        (home / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{amqp}\nstream.listeners.tcp.1 = 127.0.0.1:{stream}\n"
            f"stream.advertised_host = 127.0.0.1\nstream.advertised_port = {stream}\n"
            "disk_free_limit.absolute = 100MB\nlog.console = false\nlog.file.level = warning\n"
        )
        (home / "enabled_plugins").write_text("[rabbitmq_stream].\n")
        (home / "rabbitmq-env.conf").write_text("")
        env = dict(os.environ)
        env.update({
            "HOME": str(home), "ERL_EPMD_PORT": str(epmd_port), "RABBITMQ_NODENAME": f"bench{amqp}@localhost",
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(home / "rabbitmq-env.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(home / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"), "RABBITMQ_MNESIA_BASE": str(run.data_dir),
            "RABBITMQ_LOG_BASE": str(home / "log"), "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
            "RABBITMQ_DIST_PORT": str(dist), "RABBITMQ_NODE_PORT": str(amqp), "LC_ALL": "C.UTF-8",
        })  # fmt: skip
        run.endpoint = {"host": "127.0.0.1", "port": stream}

        def go() -> None:
            # its own epmd, in the foreground, so that it is a child of this process and stopped by pid
            e = _spawn(["epmd", "-port", str(epmd_port), "-address", "127.0.0.1"], home / "epmd.out", home, env)
            run.stoppers.append(lambda: _stop_proc(e))
            _wait_for("epmd", lambda: _port_open(epmd_port), e, home / "epmd.out", 20)
            log = home / "rabbitmq.out"
            p = _spawn([RABBITMQ_SERVER], log, home, env)
            run.stoppers.append(lambda: _stop_proc(p, 60))
            run.root_pids.append(p.pid)
            _wait_for("rabbitmq-server", lambda: _port_open(stream), p, log, 120)

        return _start_guarded(run, go)


LAUNCHERS: dict[str, Launcher] = {
    la.name: la
    for la in (
        PumiceLauncher(),
        PurePumiceLauncher(),
        RocketMQLauncher(),
        KafkaLauncher(),
        RedisLauncher(),
        NatsLauncher(),
        RabbitMQLauncher(),
    )
}
