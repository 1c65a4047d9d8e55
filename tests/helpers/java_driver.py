"""Run the Java driver programs (tests/java, the official rocketmq-client 4.9.8) as processes.

``build_jar()`` (the ``java_classpath`` fixtures of tests/interop and tests/oracle) runs
``mvn -q -B -f tests/java/pom.xml package`` unless an earlier build is current (``maven.package``)
and returns the classpath:
target/pumice-interop.jar and the dependency jars listed in target/classpath.txt. ``JavaDriver`` starts
``java pumice.interop.Driver <subcommand> --name value ...`` with a small heap and reads its
JSON lines (one object per line; anything else, such as a library's log line, is kept in
``noise``) as they come. Long-running subcommands (push, litepull) stop on "stop" on stdin;
every process is stopped by its pid, killed when it does not stop in time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.maven import package

JAVA_DIR = Path(__file__).resolve().parents[1] / "java"
JAR = JAVA_DIR / "target" / "pumice-interop.jar"
CLASSPATH_FILE = JAVA_DIR / "target" / "classpath.txt"
# the RocketMQ 5.5.0 remoting client and tools (fastjson2): pumice.interop5.Driver5
JAVA5_DIR = Path(__file__).resolve().parents[1] / "java5"
MAIN, MAIN5 = "pumice.interop.Driver", "pumice.interop5.Driver5"
JVM_FLAGS = [
    "-Dfile.encoding=UTF-8",
    "-Xmx256m",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
]

Event = dict[str, Any]
_REBALANCE = re.compile(
    r"doRebalance, \S+, (?:truncateMessageQueueNotMyTopic )?(?P<what>add a new mq|remove unnecessary mq), "
    r"MessageQueue \[topic=(?P<topic>[^,]+), brokerName=[^,]+, queueId=(?P<queue>\d+)\]"
)


def build_jar(timeout_s: float = 600, java_dir: Path = JAVA_DIR) -> str:
    """The driver jar of ``java_dir`` (tests/java, or JAVA5_DIR) and its classpath, built with Maven
    unless a build is current (``maven.package``)."""
    jar = java_dir / "target" / f"{'pumice-interop5' if java_dir == JAVA5_DIR else 'pumice-interop'}.jar"
    return package(java_dir, java_dir / "target" / "classpath.txt", jar, timeout_s)


def body(label: str, i: int, size: int = 0) -> bytes:
    """Driver.body: message i's bytes, "LABEL-i|" then 0..255 repeated, cut to size (0: "LABEL-i")."""
    head = f"{label}-{i}{'|' if size > 0 else ''}".encode()
    if size <= 0:
        return head
    tail = bytes(range(256)) * (size // 256 + 1)
    return (head + tail)[:size]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class JavaDriver:
    """One ``pumice.interop.Driver`` process; ``events`` grows as its lines arrive."""

    def __init__(
        self, classpath: str, work_dir: Path, subcommand: str, args: dict[str, Any], name: str = "", main: str = MAIN
    ) -> None:
        self.name = name or subcommand
        work_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = work_dir / "logs" / self.name
        argv: list[str] = []
        for key, value in args.items():
            for v in value if isinstance(value, list | tuple) else [value]:
                argv += [f"--{key}", str(v).lower() if isinstance(v, bool) else str(v)]
        self.cmd = [
            "java", *JVM_FLAGS,
            f"-Drocketmq.client.logRoot={self.log_dir}",
            f"-Drocketmq.client.localOffsetStoreDir={work_dir / 'offsets'}",
            "-Drocketmq.client.logLevel=INFO",
            "-cp", classpath, main, subcommand, *argv,
        ]  # fmt: skip
        self.stderr_path = work_dir / f"{self.name}.stderr"
        self._stderr = self.stderr_path.open("w")
        self.proc = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, encoding="utf-8",
            cwd=work_dir, env=os.environ | {"LC_ALL": "C.UTF-8"},  # UTF-8 arguments (Java 17 reads them by locale)
        )  # fmt: skip
        self.events: list[Event] = []
        self.noise: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            with self._cond:
                if isinstance(event, dict):
                    self.events.append(event)
                else:
                    self.noise.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def of(self, event: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e["event"] == event]

    def wait_for(self, check: Callable[[JavaDriver], Any], timeout_s: float, what: str = "condition") -> Any:
        """Wait until ``check(self)`` is truthy (re-checked on each new line); its value."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                value = check(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: {what} not reached within {timeout_s}s\n{self.describe()}")
                self._cond.wait(min(left, 0.5))

    def wait_event(self, event: str, timeout_s: float, count: int = 1) -> list[Event]:
        return self.wait_for(lambda d: len(d.of(event)) >= count and d.of(event), timeout_s, f"{count} {event!r}")

    @staticmethod
    def wait_all(drivers: list[JavaDriver], check: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """Wait until ``check()`` is truthy (every 0.1 s) for a condition over several drivers."""
        deadline = time.monotonic() + timeout_s
        while not (value := check()):
            if time.monotonic() > deadline:
                details = "\n".join(f"--- {d.name}:\n{d.describe()}" for d in drivers)
                raise AssertionError(f"{what} not reached within {timeout_s}s\n{details}")
            time.sleep(0.1)
        return value

    def received(self) -> list[Event]:
        return self.of("received")

    def assigned(self, topic: str) -> set[int]:
        """The queue ids of ``topic`` its rebalance holds now, from its client log ("add a new
        mq" once the start offset is computed, "remove unnecessary mq")."""
        held: set[int] = set()
        for m in _REBALANCE.finditer(self.client_log()):
            if m["topic"] == topic:
                (held.add if m["what"] == "add a new mq" else held.discard)(int(m["queue"]))
        return held

    def client_log(self) -> str:
        """The client's own log (rocketmq_client.log: connections, rebalances, errors)."""
        try:
            return (self.log_dir / "rocketmq_client.log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 20) -> list[Event]:
        """Ask it to stop ("stop" on stdin), wait for its exit; kill it by pid after the timeout."""
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        return self.wait(timeout_s)

    def wait(self, timeout_s: float) -> list[Event]:
        """Wait for its exit (killed past the timeout); its events. Fails unless it exited 0."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not exit within {timeout_s}s\n{self.describe()}") from None
        self._reader.join(5)
        self._stderr.close()
        assert code == 0, f"{self.name} exited {code}\n{self.describe()}"
        return self.events

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()

    def describe(self) -> str:
        try:
            err = self.stderr_path.read_text()[-3000:]
        except OSError:
            err = ""
        with self._cond:
            tail = [json.dumps(e)[:300] for e in self.events[-15:]]
            noise = self.noise[-10:]
        return (
            f"cmd: {' '.join(self.cmd[-12:])}\nlast events:\n"
            + "\n".join(tail)
            + (f"\nother output: {noise}\nstderr tail:\n{err}")
        )
