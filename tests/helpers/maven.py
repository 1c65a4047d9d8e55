"""The Java peers' Maven builds (tests/java, tests/java5, tests/java-v5grpc, tests/java-rocketmq,
tests/java-rocketmq5; .ci/run builds them before the suite): ``package`` returns a project's
classpath, running ``mvn -q package`` only when no earlier build is current. An up-to-date
``mvn -q package`` still costs 15 s or more (20-50 s on a busy 2-core machine) for every module
and worker that asks.

A build is current when target/classpath.txt is newer than the pom (Maven rewrites it only when
the dependencies change), the jar (for a project that makes one) newer than the pom and every file
under src/, and every jar classpath.txt names is still there (in ~/.m2)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.parallel import maven_lock


def built_classpath(project: Path, classpath_file: Path, jar: Path | None = None) -> str | None:
    """``[<jar>:]<the jars of classpath.txt>`` of a current build of ``project``; None: build it."""
    try:
        pom = (project / "pom.xml").stat().st_mtime
        if classpath_file.stat().st_mtime < pom:  # the dependencies are the pom's
            return None
        if jar is not None:
            built = jar.stat().st_mtime
            if pom > built or any(p.stat().st_mtime > built for p in (project / "src").rglob("*") if p.is_file()):
                return None
        classpath = classpath_file.read_text().strip()
    except OSError:
        return None
    jars = [j for j in classpath.split(os.pathsep) if j]
    if not jars or not all(os.path.isfile(j) for j in jars):
        return None
    return _with_jar(jar, classpath)


def _with_jar(jar: Path | None, classpath: str) -> str:
    return classpath if jar is None else f"{jar}{os.pathsep}{classpath}"


def package(project: Path, classpath_file: Path, jar: Path | None = None, timeout_s: float = 600) -> str:
    """``project``'s classpath (``built_classpath``), built first with Maven under the machine's
    Maven lock (another worker may be rewriting the same target/) unless current. Fails (never
    skips) with the tail of Maven's output when the build does."""
    cmd = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(project / "pom.xml"), "package"]
    with maven_lock():
        if (current := built_classpath(project, classpath_file, jar)) is not None:
            return current
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except FileNotFoundError as e:
            raise AssertionError("mvn is not installed: .ci/run installs Maven (apt maven) for the Java suites") from e
        if p.returncode != 0 or (jar is not None and not jar.exists()) or not classpath_file.exists():
            tail = "\n".join((p.stdout + p.stderr).splitlines()[-60:])
            raise AssertionError(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{tail}")
        return _with_jar(jar, classpath_file.read_text().strip())
