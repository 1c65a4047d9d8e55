"""Apache RocketMQ 5.3.3 as reference processes: the name server, and the broker with its proxy in
LOCAL mode (what ``bin/mqbroker --enable-proxy`` runs), for the RocketMQ 5 clients (issue 34).

``cached_classpath()`` runs ``mvn -q -B -f tests/java-rocketmq5/pom.xml package`` unless an earlier
build is current (``maven.package``) and returns the jars of rocketmq-namesrv,
rocketmq-broker, rocketmq-proxy and rocketmq-tools 5.3.3. ``RocketMQ5(root)`` starts two JVMs on
127.0.0.1 with everything under ``root``:

==================  ===========================================================================
process             command
==================  ===========================================================================
name server         ``NamesrvStartup -c <root>/namesrv/namesrv.conf``
broker + proxy      ``ProxyStartup -pm local -bc <root>/broker/broker.conf`` with
                    ``$RMQ_PROXY_HOME/conf/rmq-proxy.json`` (``RMQ_PROXY_HOME`` = ``ROCKETMQ_HOME``
                    = ``<root>/home``): one JVM, the broker (remoting) and the proxy's gRPC
                    (``grpcServerPort``) and remoting (``remotingListenPort``) servers
mqadmin             ``MQAdminStartup <command> -n <namesrv> ...`` (``RocketMQ5.mqadmin``), bounded
==================  ===========================================================================

Files under ``root``: ``home/conf`` (rmq-proxy.json and the caller's ``home_files``, e.g. an ACL
file), ``store/`` (the broker's storePathRootDir: commitlog, consumequeue, timerlog, timerwheel,
config/), and per process ``<name>.out`` (stdout and stderr) and ``logs/<name>.log`` (its
logback log, tests/oracle5/rocketmq5-home/conf). ``-Duser.home`` is the process's directory, so
nothing lands in the real home. Boot waits are bounded (``BOOT_TIMEOUT_S``); processes are
stopped by pid: ``stop()`` (SIGTERM: RocketMQ's shutdown hooks, SIGKILL past the timeout),
``kill()`` (SIGKILL of the broker JVM: it leaves its abort file), ``discard()`` (SIGKILL of both:
a server whose store nobody reads after), ``restart()`` (the same ports and store).

Callers add or override keys: ``broker_conf`` (broker.conf, RocketMQ's names: ``timerWheelEnable``,
``timerPrecisionMs``, ``aclEnable``, ``transactionCheckInterval``...), ``proxy_conf``
(rmq-proxy.json: ``minInvisibleTimeMillsForRecv``...) and ``jvm_flags`` (the broker's JVM, after
``SERVER_JVM_FLAGS``: a later ``-Xmx`` wins). The defaults keep the store small for a 2-core CI
(``DEFAULT_BROKER_CONF``).

Ports: a broker on listenPort P also listens on P - 2 (the fast channel) and P + 1 (HA, set
explicitly: 5.x's default haListenPort is a fixed 10912); ``free_port()`` hands out P with
P - 2 .. P + 2 free. The proxy's gRPC and remoting ports are two more free ports.

``V5Server`` is what a test of the v5 clients needs of a server, so one test can run against
RocketMQ 5.3.3 and Pumice alike (tests/oracle5/conftest.py's ``V5_SERVERS``).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest

from pumice.remoting.request_code import RequestCode
from tests.helpers import pumice5
from tests.helpers.clusters import call, req
from tests.helpers.maven import package
from tests.helpers.mqadmin import Out
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
PEER_DIR = REPO / "tests" / "java-rocketmq5"
CLASSPATH_FILE = PEER_DIR / "target" / "classpath.txt"
LOGBACK_DIR = REPO / "tests" / "oracle5" / "rocketmq5-home" / "conf"
ROCKETMQ5_VERSION = "5.3.3"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
ADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
# Java 17: the store's mapped-file cleaner and Netty reflect into java.base (as for 4.9); the
# proxy's TLS test mode makes a self-signed certificate with sun.security.x509
_OPENS = [
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports", "java.base/sun.security.x509=ALL-UNNAMED",
]  # fmt: skip
SERVER_JVM_FLAGS = ["-Dfile.encoding=UTF-8", "-XX:+UseSerialGC", "-XX:-UsePerfData", *_OPENS]
# the smallest heaps seen to work (50 messages through the proxy: broker ~320 MB resident, name
# server ~165 MB); a heavier test passes bigger ones in jvm_flags. Direct memory: every thread that
# writes to 5.3.3's commit log holds an encoder buffer of its own, maxMessageSize + 64 KiB (4 MiB +
# 64 KiB) of direct memory, and some 30 threads do (the proxy's executors, the revive services,
# the timer's, the transaction services): at 128 MiB the next one failed with OutOfMemoryError
# "Cannot reserve 4259840 bytes of direct buffer memory", which 5.3.3 swallows. That was the
# timed-redelivery stall: the timer's TimerDequeuePutMessageService could no longer deliver (delay
# messages and POP checkpoints stuck), the revive thread's put of a retry message was lost, and
# TransactionalOpBatchService wrote no op messages (committed transactions checked back again and
# delivered twice). Only what is allocated counts: 512 MiB is a ceiling, not a reservation
NAMESRV_MEMORY = ["-Xmx128m", "-Xms32m"]
BROKER_MEMORY = ["-Xmx256m", "-Xms64m", "-XX:MaxDirectMemorySize=512m"]
ADMIN_JVM_FLAGS = [
    "-Dfile.encoding=UTF-8",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # a short-lived JVM: C1 only starts faster
    "-XX:-UsePerfData",
    *_OPENS,
]
BOOT_TIMEOUT_S = 120.0
ADMIN_TIMEOUT_S = 60.0
DEFAULT_CLUSTER = "DefaultCluster"
# small files for a 2-core CI; mapped files are sparse, but each is mmap'ed whole
DEFAULT_BROKER_CONF: dict[str, object] = {
    "brokerId": 0,
    "brokerRole": "ASYNC_MASTER",
    "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": 32 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 20 * 30000,
    "mappedFileSizeTimerLog": 8 * 1024 * 1024,
    "maxHashSlotNum": 5000,
    "maxIndexNum": 20000,
    "diskMaxUsedSpaceRatio": 95,
}
DEFAULT_PROXY_CONF: dict[str, object] = {
    "grpcShutdownTimeSeconds": 1,  # 30 by default: every stop() would wait that long
}


class V5Server(Protocol):
    """A server the RocketMQ 5 clients talk to: RocketMQ 5.3.3 (``RocketMQ5``) or Pumice (a
    ``pumice broker --enable-proxy`` process, added beside it by the gRPC part of issue 34)."""

    @property
    def namesrv(self) -> str: ...  # host:port of the name server
    @property
    def broker_addr(self) -> str: ...  # host:port of the broker's remoting server
    @property
    def grpc_endpoint(self) -> str: ...  # host:port of the gRPC MessagingService
    @property
    def store_dir(self) -> Path: ...
    def create_topic(self, name: str, queues: int = 8, message_type: str | None = "NORMAL") -> None: ...
    def create_group(self, name: str, fifo: bool = False, max_retries: int = 16) -> None: ...
    def stop(self) -> None: ...


@functools.cache
def cached_classpath() -> str:
    """RocketMQ 5.3.3's namesrv, broker, proxy and tools jars, resolved with Maven unless an earlier
    build is current (``maven.package``); once per process."""
    return package(PEER_DIR, CLASSPATH_FILE, timeout_s=900)


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _conf_value(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


class ServerJvm:
    """One RocketMQ 5.3.3 server JVM in ``workdir``: stdout and stderr to ``<name>.out``, its log
    to ``logs/<name>.log``; ``start()`` waits (bounded) for ``marker`` on stdout."""

    def __init__(self, name: str, main: str, args: list[str], marker: str, workdir: Path, home: Path,
                 logback: str, classpath: str, jvm_flags: list[str] | None = None) -> None:  # fmt: skip
        self.name, self.main, self.args, self.marker = name, main, args, marker
        self.jvm_flags = [*SERVER_JVM_FLAGS, *(jvm_flags or [])]  # a later -X flag wins
        self.workdir, self.home, self.classpath = workdir, home, classpath
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir = workdir / "logs"
        self.log_dir.mkdir(exist_ok=True)
        self.out_path = workdir / f"{name}.out"
        self.logback = LOGBACK_DIR / logback
        self.proc: subprocess.Popen[bytes] | None = None
        self.boot_s = 0.0  # how long the last start() waited for the boot line

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.pid

    def start(self, timeout_s: float = BOOT_TIMEOUT_S) -> None:
        cmd = [
            "java", *self.jvm_flags,
            f"-Duser.home={self.workdir}",
            f"-Drocketmq.home.dir={self.home}",
            f"-Dpumice.peer.logdir={self.log_dir}",
            f"-Drmq.logback.configurationFile={self.logback}",
            "-cp", self.classpath, self.main, *self.args,
        ]  # fmt: skip
        seen = (
            self.out_path.stat().st_size if self.out_path.exists() else 0
        )  # this start's boot line, not an earlier one
        env = os.environ | {"ROCKETMQ_HOME": str(self.home), "RMQ_PROXY_HOME": str(self.home), "LC_ALL": "C.UTF-8"}
        t0 = time.monotonic()
        with self.out_path.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir, env=env
            )
        deadline = t0 + timeout_s
        while time.monotonic() < deadline:
            if self.marker in _read_from(self.out_path, seen):
                self.boot_s = time.monotonic() - t0
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.kill()
        raise AssertionError(
            f"{self.name} ({self.main}) did not boot within {timeout_s}s (exit {self.proc.returncode})\n"
            + self.describe()
        )

    def describe(self) -> str:
        log = _tail(self.log_dir / f"{self.name}.log")
        return f"--- {self.out_path}:\n{_tail(self.out_path)}\n--- {self.name} log tail:\n{log}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 60) -> int | None:
        """SIGTERM (RocketMQ's shutdown hooks run), wait, SIGKILL past the timeout; the exit code
        (143: ended by SIGTERM; -9: killed)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"{self.name} did not stop within {timeout_s}s\n{self.describe()}") from None
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL by pid: no shutdown hook runs."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


# The shared server's settings (tests/conftest.py's ``rocketmq5_shared``): the union of what its
# modules need. Transactions checked back after 1 s (the orphan scenarios), bodies up to 64 KiB
# through the proxy (the over-the-limit scenarios), SQL92 filters.
SHARED_BROKER_CONF: dict[str, object] = {
    "transactionTimeOut": 1000,
    "transactionCheckInterval": 1000,
    "enablePropertyFilter": True,
}
SHARED_PROXY_CONF: dict[str, object] = {
    "maxMessageSize": 64 * 1024,
    # consumers (tests/oracle5/test_grpc_consumers.py): invisible times of a few seconds, and push
    # consumers' (auto_renew) 4 s renewed 2.5 s ahead by a scan every second
    "minInvisibleTimeMillsForRecv": 2000,
    "defaultInvisibleTimeMills": 4000,
    "renewSchedulePeriodMillis": 1000,
    "renewAheadTimeMillis": 2500,
}


def timed_duplicate_on_the_reference(server: Any) -> None:
    """Skip a timed scenario (redelivery after the invisible time, delivery times) against RocketMQ
    5.3.3 unless PUMICE_ORACLE_ALL=1: tests/oracle5/test_grpc_consumers.py runs each of them against
    5.3.3 on every run; another module's copy with another client checks the same server behaviour
    and would add minutes of waiting. Pumice's side always runs."""
    if isinstance(server, RocketMQ5) and os.environ.get("PUMICE_ORACLE_ALL") != "1":
        pytest.skip("a timed scenario test_grpc_consumers.py runs against 5.3.3; PUMICE_ORACLE_ALL=1 runs this copy")


def serve(request: Any, tmp_path_factory: Any, servers: dict[str, Any]) -> Iterator[Any]:
    """A module's ``v5_server`` fixture body: ``servers[request.param]`` started in a directory of
    its own and stopped after, or (``None``) the worker's shared RocketMQ 5.3.3, left running."""
    start = servers[request.param]
    if start is None:
        yield request.getfixturevalue("rocketmq5_shared")
        return
    server = start(tmp_path_factory.mktemp(request.param))
    try:
        yield server
    finally:
        server.stop()


class RocketMQ5:
    """RocketMQ 5.3.3's name server and its broker with the proxy in LOCAL mode, under ``root``
    (a ``V5Server``). Starts both in the constructor unless ``start=False``."""

    def __init__(
        self,
        root: Path,
        *,
        broker_conf: Mapping[str, object] | None = None,
        proxy_conf: Mapping[str, object] | None = None,
        home_files: Mapping[str, str] | None = None,
        cluster: str = DEFAULT_CLUSTER,
        broker_name: str = "broker-a",
        classpath: str | None = None,
        jvm_flags: list[str] | None = None,
        start: bool = True,
    ) -> None:
        self.root = root
        self.cluster, self.broker_name = cluster, broker_name
        self.classpath = classpath or cached_classpath()
        self.home = root / "home"
        (self.home / "conf").mkdir(parents=True, exist_ok=True)
        for rel, text in (home_files or {}).items():  # e.g. conf/plain_acl.yml
            (self.home / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.home / rel).write_text(text)
        self._store_dir = root / "store"
        self.namesrv_port, self.broker_port = free_port(), free_port()
        self.grpc_port, self.proxy_remoting_port = free_port(), free_port()
        self.boot_s = 0.0

        ns_dir = root / "namesrv"
        ns_dir.mkdir(parents=True, exist_ok=True)
        ns_conf = ns_dir / "namesrv.conf"
        ns_conf.write_text(f"listenPort={self.namesrv_port}\nkvConfigPath={ns_dir / 'kvConfig.json'}\n")
        self.namesrv_jvm = ServerJvm(
            "namesrv", NAMESRV_MAIN, ["-c", str(ns_conf)], "The Name Server boot success",
            ns_dir, self.home, "logback_namesrv.xml", self.classpath, NAMESRV_MEMORY,
        )  # fmt: skip

        conf: dict[str, object] = {
            "brokerClusterName": cluster,
            "brokerName": broker_name,
            "namesrvAddr": self.namesrv,
            "brokerIP1": "127.0.0.1",
            "listenPort": self.broker_port,
            "haListenPort": self.broker_port + 1,
            "storePathRootDir": self._store_dir,
            "storePathCommitLog": self._store_dir / "commitlog",
            **DEFAULT_BROKER_CONF,
            **(broker_conf or {}),
        }
        broker_dir = root / "broker"
        broker_dir.mkdir(parents=True, exist_ok=True)
        self.broker_conf_path = broker_dir / "broker.conf"
        self.broker_conf_path.write_text("".join(f"{k}={_conf_value(v)}\n" for k, v in conf.items()))
        proxy: dict[str, object] = {
            "rocketMQClusterName": cluster,
            "namesrvAddr": self.namesrv,
            "grpcServerPort": self.grpc_port,
            "remotingListenPort": self.proxy_remoting_port,
            **DEFAULT_PROXY_CONF,
            **(proxy_conf or {}),
        }
        (self.home / "conf" / "rmq-proxy.json").write_text(json.dumps(proxy, indent=2) + "\n")
        self.broker_jvm = ServerJvm(
            "broker", PROXY_MAIN, ["-pm", "local", "-bc", str(self.broker_conf_path)],
            "rocketmq-proxy startup successfully", broker_dir, self.home, "logback_broker.xml", self.classpath,
            [*BROKER_MEMORY, *(jvm_flags or [])],
        )  # fmt: skip
        if start:
            self.start()

    # -- addresses (V5Server) --
    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def proxy_remoting_addr(self) -> str:
        """The proxy's own remoting server (5.x clients may use it as a name server and broker)."""
        return f"127.0.0.1:{self.proxy_remoting_port}"

    @property
    def store_dir(self) -> Path:
        return self._store_dir

    # -- life cycle --
    def start(self) -> None:
        """Start whatever is not running: the name server, then the broker with its proxy
        (``boot_s``: how long it took)."""
        t0 = time.monotonic()
        try:
            if not self.namesrv_jvm.running():
                self.namesrv_jvm.start()
            if not self.broker_jvm.running():
                self.broker_jvm.start()
                self._wait_registered(t0 + BOOT_TIMEOUT_S - time.monotonic())
        except BaseException:
            self.stop()
            raise
        self.boot_s = time.monotonic() - t0

    def _wait_registered(self, timeout_s: float) -> None:
        """Until the name server routes to the broker. 5.3.3's broker registers at start only with
        the name servers its client has already found reachable (a scan that has just begun
        then), else 10 s later (the first periodic registration): clients and mqadmin ``-c``
        see no broker until then."""

        def registered() -> bool:
            (resp,) = call(self.namesrv, None, req(RequestCode.GET_BROKER_CLUSTER_INFO))
            return resp.code == 0 and self.broker_addr.encode() in (resp.body or b"")

        eventually(registered, max(timeout_s, 1.0), f"{self.broker_name} registered with {self.namesrv}",
                   every=0.2, retry_on=(AssertionError, OSError, TimeoutError))  # fmt: skip

    def stop(self, timeout_s: float = 60) -> None:
        """The broker (with its proxy), then the name server, by pid."""
        try:
            self.broker_jvm.stop(timeout_s)
        finally:
            self.namesrv_jvm.stop(timeout_s)

    def kill(self) -> None:
        """SIGKILL of the broker JVM (broker and proxy); the name server keeps running."""
        self.broker_jvm.kill()

    def discard(self) -> None:
        """SIGKILL of both JVMs, by pid: the end of a server whose store is thrown away (a test
        module's, the worker's shared one). Its ``stop()`` took 13-17 s on 2 cores, for nothing
        a test reads."""
        try:
            self.broker_jvm.kill()
        finally:
            self.namesrv_jvm.kill()

    def restart(self, kill: bool = False) -> None:
        """The broker with its proxy again on the same ports and store: after a SIGTERM, or a
        SIGKILL with ``kill=True``."""
        if kill:
            self.kill()
        else:
            self.broker_jvm.stop()
        self.start()

    def describe(self) -> str:
        return f"{self.namesrv_jvm.describe()}\n{self.broker_jvm.describe()}"

    def __enter__(self) -> RocketMQ5:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- mqadmin 5.3.3 --
    def mqadmin(self, command: str, *args: str, timeout_s: float = ADMIN_TIMEOUT_S) -> Out:
        """``mqadmin <command> -n <namesrv> <args>`` (MQAdminStartup 5.3.3) run to its end, bounded
        by ``timeout_s`` (killed past it: an AssertionError)."""
        work = self.root / "mqadmin"
        work.mkdir(exist_ok=True)
        argv = [command, "-n", self.namesrv, *args]
        cmd = [
            "java", *ADMIN_JVM_FLAGS,
            f"-Duser.home={work}",
            f"-Drocketmq.home.dir={self.home}",
            f"-Drmq.logback.configurationFile={LOGBACK_DIR / 'logback_tools.xml'}",
            "-cp", self.classpath, ADMIN_MAIN, *argv,
        ]  # fmt: skip
        env = os.environ | {"ROCKETMQ_HOME": str(self.home), "LC_ALL": "C.UTF-8"}
        try:
            p = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout_s, cwd=work, env=env, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as e:  # subprocess.run kills the JVM
            raise AssertionError(f"mqadmin {' '.join(argv)} did not end within {timeout_s}s: {e.stdout!r}") from None
        return Out(argv, p.returncode, p.stdout, p.stderr)

    def create_topic(self, name: str, queues: int = 8, message_type: str | None = "NORMAL") -> None:
        """What ``updateTopic -c <cluster>`` sends its one broker (UPDATE_AND_CREATE_TOPIC, with
        ``attributes=+message.type=<message_type>`` unless None), over remoting: an mqadmin JVM per
        topic costs seconds (``mqadmin()`` runs the command itself); then waits for the route."""
        pumice5.create_topic(self.broker_addr, self.namesrv, name, queues, message_type)

    def create_group(self, name: str, fifo: bool = False, max_retries: int = 16) -> None:
        """What ``updateSubGroup -c <cluster>`` sends its one broker (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP):
        ``consumeMessageOrderly`` = fifo (a FIFO group for the v5 clients), ``retryMaxTimes`` =
        max_retries (max attempts = max_retries + 1), over remoting."""
        pumice5.create_group(self.broker_addr, name, fifo, max_retries)
