"""Run the official RocketMQ 5 Java client over gRPC (rocketmq-client-java 5.0.8,
tests/java-v5grpc: ``pumice.v5grpc.GrpcClient5``) as a process.

``build()`` runs ``mvn -q -B -f tests/java-v5grpc/pom.xml package`` (unless an earlier build is
current: ``maven.package``) and returns the classpath (target/pumice-v5grpc.jar and the jars of target/classpath.txt).
``run`` starts ``GrpcClient5 <subcommand> --endpoint H:P ...`` to its end and parses its JSON
lines into a ``V5Run`` (tests/helpers/v5_python.py: the same events as the Python driver's);
``start`` runs one beside the test (a push consumer), stopped by its pid.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.java_driver import JVM_FLAGS
from tests.helpers.maven import package
from tests.helpers.v5_python import V5Run, _parse

JAVA_DIR = Path(__file__).resolve().parents[1] / "java-v5grpc"
JAR = JAVA_DIR / "target" / "pumice-v5grpc.jar"
CLASSPATH_FILE = JAVA_DIR / "target" / "classpath.txt"
MAIN = "pumice.v5grpc.GrpcClient5"
CLIENT_VERSION = "5.0.8"
DEFAULT_TIMEOUT_S = 90.0


def build(timeout_s: float = 600) -> str:
    """The jar and its classpath, built with Maven unless a build is current (``maven.package``)."""
    return package(JAVA_DIR, CLASSPATH_FILE, JAR, timeout_s)


def _command(classpath: str, subcommand: str, endpoint: str, args: tuple[str, ...], home: Path,
             timeout_s: float) -> list[str]:  # fmt: skip
    # the driver's own watchdog ends it a little before ours kills it
    return ["java", *JVM_FLAGS, f"-Duser.home={home}", "-cp", classpath, MAIN, subcommand, "--endpoint", endpoint,
            "--timeout-s", str(max(1.0, timeout_s - 5)), *args]  # fmt: skip


def _env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return os.environ | {"HOME": str(home), "LC_ALL": "C.UTF-8"}


def run(classpath: str, subcommand: str, endpoint: str, *args: str, home: Path,
        timeout_s: float = DEFAULT_TIMEOUT_S) -> V5Run:  # fmt: skip
    """Run the driver to its end (killed past ``timeout_s``: an AssertionError)."""
    cmd = _command(classpath, subcommand, endpoint, args, home, timeout_s)
    argv = cmd[cmd.index(MAIN) + 1 :]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=_env(home), cwd=home,
                           stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"killed after {timeout_s}s\n{_parse(argv, -9, out, err).describe()}") from None
    return _parse(argv, p.returncode, p.stdout, p.stderr)
