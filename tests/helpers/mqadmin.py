"""mqadmin (rocketmq-tools 4.9.8, from the tests/java build) run as a user runs it.

``MQAdmin(classpath, ns, work)("<command>", *args)`` runs ``java ... MQAdminStartup <command>
-n <ns> <args>`` to its end and returns an ``Out`` (exit status, stdout, stderr, with parsers
for what mqadmin prints); ``MQAdmin.start`` runs a command that runs until killed
(``Running``). ``mqadmin_classpath()`` is the classpath, built with Maven only when missing or
older than tests/java's sources.

A call costs a JVM: two things keep that small. It runs through ``pumice.interop.MQAdminExit``
(tests/java; tests/java5 has one for mqadmin 5.5.0), which calls MQAdminStartup's main and ends
the JVM when it returns, instead of idling 3 s for Netty's quiet period (``start`` and
``LINGERING`` commands run MQAdminStartup itself: startMonitoring works, and sendMessage's
trace is sent, after main returns); and the JVMs map a class-data archive of the classpath
(jvm_cds: 40% less CPU a call).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.java_driver import JVM_FLAGS, build_jar
from tests.helpers.jvm_cds import cds_flags

ROCKETMQ_HOME = Path(__file__).resolve().parents[1] / "interop" / "rocketmq-home"
MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
MAIN_EXIT = "pumice.interop.MQAdminExit"  # MAIN, then the JVM's end (tests/java and tests/java5 both have it)
# commands with work still running when main returns: sendMessage's trace (-m true) is sent by
# its dispatcher's thread, and a JVM ended at once drops it
LINGERING = {"sendMessage"}
CALL_TIMEOUT_S = 60


@dataclass
class Out:
    args: list[str]
    rc: int
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        head = f"mqadmin {' '.join(self.args)} -> exit {self.rc}"
        return f"{head}\n--- stdout:\n{self.stdout}\n--- stderr:\n{self.stderr}"

    def ok(self) -> Out:
        """Exit 0 and nothing on stderr (a failed command prints its stack trace there)."""
        assert self.rc == 0 and not self.stderr.strip(), self.describe()
        return self

    def failed(self, *needles: str) -> Out:
        """A failure as mqadmin 4.9 reports it: exit 0, the stack trace with each needle."""
        assert self.rc == 0 and "SubCommandException" in self.stderr, self.describe()
        for n in needles:
            assert n in self.text, f"{n!r} not printed\n{self.describe()}"
        return self

    def has(self, *needles: str) -> Out:
        for n in needles:
            assert n in self.stdout, f"{n!r} not printed\n{self.describe()}"
        return self

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.stdout.splitlines() if line.strip()]

    def row(self, *cells: str) -> list[str]:
        """The whitespace-split cells of the first line that starts with ``cells``."""
        for line in self.lines():
            parts = line.split()
            if parts[: len(cells)] == list(cells):
                return parts
        raise AssertionError(f"no row starting with {cells}\n{self.describe()}")

    def rows(self, *cells: str) -> list[list[str]]:
        return [p for p in (line.split() for line in self.lines()) if p[: len(cells)] == list(cells)]

    def table(self, sep: str) -> dict[str, str]:
        """``key <sep> value`` lines, split at the first ``sep`` (brokerStatus and a message's
        fields ``:``, getBrokerConfig ``=``); keys may hold spaces (``Queue ID``)."""
        out = {}
        for line in self.lines():
            m = re.match(rf"^(\S(?:[^{re.escape(sep)}]*?\S)?)\s*{re.escape(sep)}\s*(.*)$", line)
            if m:
                out.setdefault(m.group(1), m.group(2).strip())
        return out


class MQAdmin:
    """``java ... org.apache.rocketmq.tools.command.MQAdminStartup <command> -n <ns> <args>``."""

    def __init__(self, classpath: str, ns: str, work: Path, home: Path = ROCKETMQ_HOME) -> None:
        self.home = home  # its conf/tools.yml, if any, holds the ACL keys mqadmin signs with
        self.classpath = classpath
        self.ns = ns
        self.work = work
        self._n = 0
        self._lock = threading.Lock()
        self._cds: list[str] | None = None  # the class-data archive's flags (jvm_cds), once known
        work.mkdir(parents=True, exist_ok=True)

    def cmd(self, args: list[str], main: str = MAIN) -> tuple[list[str], Path]:
        """The command line, and the directory of its client log (rocketmq_client.log)."""
        with self._lock:
            self._n += 1
            n = self._n
            if self._cds is None:  # the first call trains the archive (a clusterList) when the machine has none
                props = (f"-Drocketmq.home.dir={self.home}", f"-Drocketmq.client.logRoot={self.work / 'logs' / 'cds'}")
                self._cds = cds_flags(JVM_FLAGS, self.classpath, [MAIN_EXIT, "clusterList", "-n", self.ns], self.work,
                                      props)  # fmt: skip
        logs = self.work / "logs" / f"{n:03d}-{args[0] if args else 'help'}"
        return [
            "java", *JVM_FLAGS, *self._cds, f"-Drocketmq.home.dir={self.home}", f"-Drocketmq.client.logRoot={logs}",
            "-Drocketmq.client.logLevel=INFO", "-cp", self.classpath, main, *args,
        ], logs  # fmt: skip

    def __call__(self, command: str, *args: str, namesrv: bool = True, timeout_s: float = CALL_TIMEOUT_S) -> Out:
        argv = [command, *(["-n", self.ns] if namesrv else []), *args] if command else []
        try:
            main = MAIN if command in LINGERING else MAIN_EXIT
            p = subprocess.run(self.cmd(argv, main)[0], cwd=self.work, capture_output=True, text=True,
                               timeout=timeout_s, env=os.environ | {"LC_ALL": "C.UTF-8"})  # fmt: skip
        except subprocess.TimeoutExpired as e:  # run() has killed it by its pid
            raise AssertionError(f"mqadmin {' '.join(argv)} did not end within {timeout_s}s: {e.stdout!r}") from None
        return Out(argv, p.returncode, p.stdout, p.stderr)

    def start(self, command: str, *args: str) -> Running:
        """A command that runs until killed (clusterRT, startMonitoring)."""
        argv = [command, "-n", self.ns, *args]
        cmd, logs = self.cmd(argv)
        proc = subprocess.Popen(cmd, cwd=self.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=os.environ | {"LC_ALL": "C.UTF-8"})  # fmt: skip
        return Running(argv, proc, logs)


class Running:
    def __init__(self, args: list[str], proc: subprocess.Popen[str], logs: Path) -> None:
        self.args = args
        self.proc = proc
        self.logs = logs
        self.out: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line.rstrip("\n"))

    def client_log(self) -> str:
        try:
            return (self.logs / "rocketmq_client.log").read_text(errors="replace")
        except OSError:
            return ""

    def wait_line(self, needle: str, timeout_s: float = CALL_TIMEOUT_S) -> str:
        """The first line printed that holds ``needle`` (killed, and failing, past the timeout)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = next((x for x in list(self.out) if needle in x), None)
            if line is not None:
                return line
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.02)
        out = self.kill()
        raise AssertionError(f"{needle!r} not printed\n{out.describe()}")

    def wait(self, timeout_s: float = CALL_TIMEOUT_S) -> Out:
        """Its exit (killed past the timeout); what it printed."""
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass
        return self.kill()

    def kill(self) -> Out:
        """Kill it by its pid if it still runs; what it printed."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(15)
        self._reader.join(5)
        assert self.proc.stderr is not None
        return Out(self.args, self.proc.returncode, "\n".join(self.out) + "\n", self.proc.stderr.read())


def mqadmin_classpath() -> str:
    """The jar and classpath tests/java builds (Maven runs only when that build is not current:
    ``build_jar``, tests/helpers/maven.py)."""
    return build_jar()
