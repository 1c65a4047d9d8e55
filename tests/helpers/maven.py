"""The Java peers' Maven builds (tests/java, tests/java5, tests/java-v5grpc; .ci/run builds them
before the suite): whether an earlier build is current, so that a module needs no Maven run of its
own. An up-to-date ``mvn -q package`` still costs 15 s or more (20-50 s on a busy 2-core machine)
for every module that asks.

A build is current when its jar and target/classpath.txt are newer than the pom and every file
under src/, and every jar classpath.txt names is still there (in ~/.m2)."""

from __future__ import annotations

import os
from pathlib import Path


def built_classpath(project: Path, jar: Path, classpath_file: Path) -> str | None:
    """``<jar>:<the jars of classpath.txt>`` of a current build of ``project``; None: build it."""
    try:
        built = min(jar.stat().st_mtime, classpath_file.stat().st_mtime)
        classpath = classpath_file.read_text().strip()
        sources = [project / "pom.xml", *(p for p in (project / "src").rglob("*") if p.is_file())]
        if any(p.stat().st_mtime > built for p in sources):
            return None
    except OSError:
        return None
    if not all(os.path.isfile(j) for j in classpath.split(os.pathsep) if j):
        return None
    return f"{jar}{os.pathsep}{classpath}"
