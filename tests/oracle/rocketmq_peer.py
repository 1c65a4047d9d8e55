"""Apache RocketMQ's own name server and broker (4.9.7) as processes next to Pumice.

``peer_classpath()`` runs ``mvn -q -B -f tests/java-rocketmq/pom.xml package`` (unless an earlier
build is current: ``maven.package``) and returns the jars of rocketmq-broker and rocketmq-namesrv
4.9.7 (the newest of the two that Maven Central serves: their 4.9.8 answers 404; the client in
tests/java is 4.9.8). ``JavaNamesrv`` and
``JavaBroker`` start ``NamesrvStartup -c <conf>`` and ``BrokerStartup -c <conf>`` on 127.0.0.1
with the conf file written into their directory, wait (bounded) for the boot line on stdout, and
are stopped by pid: ``stop()`` (SIGTERM, RocketMQ's shutdown hook, then SIGKILL past the
timeout) or ``kill()`` (SIGKILL).

Both need ``-Drocketmq.home.dir`` with conf/logback_namesrv.xml and conf/logback_broker.xml
(tests/oracle/rocketmq-home: one log file under ``-Dpumice.peer.logdir``). ``-Duser.home`` is the
process's directory too, so nothing lands in the real home (4.9 puts a default store, logs and
kvConfig.json under it). On Java 17 the store's mapped-file cleaner reflects into java.nio and
jdk.internal.ref: without ``--add-opens java.base/jdk.internal.ref`` the shutdown hook dies
in ``StoreCheckpoint.shutdown`` and leaves the abort file and no topics.json behind.

A broker on listenPort P also listens on P - 2 (the VIP channel: 4.9 always opens it) and
P + 1 (HA): ``free_port()`` (tests/helpers/ports.py) hands out P with P - 2 .. P + 2 free.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.helpers.maven import package

REPO = Path(__file__).resolve().parents[2]
PEER_DIR = REPO / "tests" / "java-rocketmq"
CLASSPATH_FILE = PEER_DIR / "target" / "classpath.txt"
ROCKETMQ_HOME = Path(__file__).resolve().parent / "rocketmq-home"
ROCKETMQ_VERSION = "4.9.7"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
JVM_FLAGS = [
    "-Dfile.encoding=UTF-8",
    "-Xmx512m",
    "-Xms128m",
    "-XX:MaxDirectMemorySize=256m",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
]  # fmt: skip
BOOT_TIMEOUT_S = 60.0


def peer_classpath(timeout_s: float = 600) -> str:
    """The 4.9.7 broker's and name server's jars, resolved with Maven unless an earlier build is
    current (``maven.package``)."""
    return package(PEER_DIR, CLASSPATH_FILE, timeout_s=timeout_s)


@functools.cache
def _cached_classpath() -> str:
    return peer_classpath()


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class _JavaProcess:
    """One RocketMQ server JVM; its stdout (and stderr) goes to ``<tmp>/<name>.out``, its log
    to ``<tmp>/logs/<name>.log``."""

    name = ""
    main = ""
    marker = ""

    def __init__(self, tmp: Path, conf_text: str, classpath: str | None = None) -> None:
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.log_dir = tmp / "logs"
        self.log_dir.mkdir(exist_ok=True)
        self.conf = tmp / f"{self.name}.conf"
        self.conf.write_text(conf_text)
        self.out_path = tmp / f"{self.name}.out"
        self.cmd = [
            "java", *JVM_FLAGS,
            f"-Duser.home={tmp}",
            f"-Drocketmq.home.dir={ROCKETMQ_HOME}",
            f"-Dpumice.peer.logdir={self.log_dir}",
            "-cp", classpath or _cached_classpath(), self.main, "-c", str(self.conf),
        ]  # fmt: skip
        with self.out_path.open("ab") as out:
            self.proc = subprocess.Popen(
                self.cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=tmp,
                env=os.environ | {"ROCKETMQ_HOME": str(ROCKETMQ_HOME), "LC_ALL": "C.UTF-8"},
            )  # fmt: skip
        self.pid = self.proc.pid
        self.returncode: int | None = None
        self._wait_boot()

    def _wait_boot(self) -> None:
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.marker in _tail(self.out_path, 1 << 20):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.kill()
        raise AssertionError(
            f"{self.name} ({self.main}) did not boot within {BOOT_TIMEOUT_S}s (exit {self.proc.returncode})\n"
            f"--- {self.out_path}:\n{_tail(self.out_path)}\n--- log:\n{self.log_tail()}"
        )

    def log_tail(self, chars: int = 4000) -> str:
        return _tail(self.log_dir / f"{self.name}.log", chars)

    def describe(self) -> str:
        return f"--- {self.name} stdout:\n{_tail(self.out_path)}\n--- {self.name} log tail:\n{self.log_tail()}"

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM (RocketMQ's shutdown hook runs), wait for the exit, SIGKILL past the timeout;
        the exit code (143: ended by SIGTERM, the hook having run; -9: killed)."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"{self.name} did not stop within {timeout_s}s\n{self.describe()}") from None
        self.returncode = self.proc.returncode
        return self.returncode

    def kill(self) -> None:
        """SIGKILL by pid (nothing runs: a broker leaves its abort file)."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.returncode = self.proc.returncode


class JavaNamesrv(_JavaProcess):
    """``NamesrvStartup -c <tmp>/namesrv.conf`` listening on 127.0.0.1:``port`` (all interfaces,
    as 4.9 binds)."""

    name = "namesrv"
    main = NAMESRV_MAIN
    marker = "The Name Server boot success"

    def __init__(self, tmp: Path, port: int, extra_conf: str = "", classpath: str | None = None) -> None:
        self.port = port
        conf = f"listenPort={port}\nkvConfigPath={tmp / 'kvConfig.json'}\n{extra_conf}"
        super().__init__(tmp, conf, classpath)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


class JavaBroker(_JavaProcess):
    """``BrokerStartup -c <tmp>/broker.conf`` with ``conf_text`` as that file (it must set
    listenPort, namesrvAddr, brokerIP1=127.0.0.1, storePathRootDir and storePathCommitLog: 4.9's
    default CommitLog path is ~/store/commitlog whatever the root)."""

    name = "broker"
    main = BROKER_MAIN
    marker = "boot success"

    def __init__(self, tmp: Path, conf_text: str, classpath: str | None = None) -> None:
        m = re.search(r"^listenPort=(\d+)\s*$", conf_text, re.M)
        if m is None or "storePathCommitLog=" not in conf_text:
            raise ValueError("the broker conf needs listenPort and storePathCommitLog")
        self.port = int(m.group(1))
        if not re.search(r"^waitTimeMillsInSendQueue=", conf_text, re.M):
            # 4.9's 200 ms shed sends as TIMEOUT_CLEAN_QUEUE when the 2-core CI machine is busy
            # (seen in CI): the tests compare what is stored, not how a busy JVM sheds load
            conf_text = conf_text.rstrip("\n") + "\nwaitTimeMillsInSendQueue=3000\n"
        super().__init__(tmp, conf_text, classpath)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


def stop_all(started: list[Any]) -> None:
    """Stop a test's processes by pid, the last started first: Java peers (``stop()``) and
    `pumice` processes (``subprocess.Popen``)."""
    from tests.helpers.clusters import stop

    for p in reversed(started):
        if isinstance(p, _JavaProcess):
            p.stop()
        elif p.poll() is None:
            stop(p)
