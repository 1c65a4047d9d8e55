"""A class-data-sharing archive (AppCDS) for the tests' many short-lived JVMs of one classpath.

mqadmin's JVMs spend most of their CPU loading and verifying the same few thousand classes of
rocketmq-tools, Netty, fastjson and logback. Java 17 dumps the classes a run loaded
(``-XX:ArchiveClassesAtExit``) into an archive that later runs map, already parsed and verified
(``-XX:SharedArchiveFile``). ``cds_flags`` makes the archive once per machine (a training run)
and returns the flags that use it; the JVM checks the archive against the classpath's jars
(their sizes and times) and runs without it, silently, when they changed.

===================  ===========================================================================
archive              ``$TMPDIR/pumice-tests-cds/<key>.jsa``; key: sha256 of the java binary's
                     path and time, the JVM flags, the classpath and each entry's size and time
made                 under ``<archive>.lock`` (workers and worktrees share it), written to a
                     temporary name and renamed: a JVM never maps a half-written archive
no archive           the training run failed or dumped nothing: ``[]``, the JVMs run as before
old archives         of jars since rebuilt: deleted when a new one is made and they are a day old
===================  ===========================================================================
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CDS_DIR = Path(tempfile.gettempdir()) / "pumice-tests-cds"
# the JVM's own notes about the archive (dumping, a classpath that changed) go to stdout, where
# a test reads the program's output
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-Xlog:class+path=off"]
TRAIN_TIMEOUT_S = 120
STALE_S = 86400


def archive_key(java: str, flags: list[str], classpath: str) -> str:
    h = hashlib.sha256()
    real = os.path.realpath(java)
    h.update(f"{real}\0{os.stat(real).st_mtime_ns}\0{' '.join(flags)}\0{classpath}\0".encode())
    for entry in classpath.split(os.pathsep):
        try:
            st = os.stat(entry)
        except OSError:
            continue
        h.update(f"{entry}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:24]


def cds_flags(flags: list[str], classpath: str, train: list[str], cwd: Path, props: tuple[str, ...] = ()) -> list[str]:
    """The flags that map this classpath's archive (for JVMs started with ``flags``), made first
    (``java <flags> <props> -cp <classpath> <train>``, its output dropped) when the machine has
    none; ``[]`` when it cannot be made."""
    java = shutil.which("java")
    if java is None:
        return []
    CDS_DIR.mkdir(parents=True, exist_ok=True)
    archive = CDS_DIR / f"{archive_key(java, flags, classpath)}.jsa"
    use = [f"-XX:SharedArchiveFile={archive}", *QUIET]
    if archive.exists():
        return use
    with (CDS_DIR / f"{archive.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():  # made by another worker meanwhile
            return use
        partial = archive.with_suffix(f".{os.getpid()}.tmp")
        try:
            dump = [java, *flags, f"-XX:ArchiveClassesAtExit={partial}", *QUIET, *props, "-cp", classpath, *train]
            subprocess.run(dump, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=TRAIN_TIMEOUT_S)  # fmt: skip
        except subprocess.TimeoutExpired:  # run() killed it
            pass
        if not partial.exists() or partial.stat().st_size == 0:
            partial.unlink(missing_ok=True)
            return []
        partial.rename(archive)
    now = time.time()
    for old in CDS_DIR.glob("*.jsa"):
        with contextlib.suppress(OSError):
            if now - old.stat().st_mtime > STALE_S:
                old.unlink()
    return use
