"""README.md's examples, run as written, top to bottom, against `pumice dev` (issue 21).

Every fenced block in an executable language says what the test does with it, after its
language (GitHub shows only the language):

==================  =====================================================================
info string         what the test does
==================  =====================================================================
``bash run``        its lines run in one bash script, in order, with the blocks below
``python run``      run by the venv's python3 at that point of the script
``LANG file=NAME``  written to NAME (its folders made) in the script's directory at that point
``LANG skip=WHY``   not run; WHY must say why
==================  =====================================================================

A block with none of these fails the first test, so an example cannot be added untested.
The script runs in a temporary directory with HOME pointing at a temporary home (so
``~/.pumice/store`` and ``~/logs/rocketmqlogs`` are the test's), after the test started
``pumice dev`` there on the README's ports (9876, 10909, 10911, 10912, 8081), in its own process
group, which the test kills at the end (background brokers the README starts included).
Maven (the Java section's classpath) reads and fills the real ``~/.m2/repository``, pip (the v5
client's venv) the real pip cache, and installs from the wheels tests/peers5/install.sh keeps
when they are there (``pip_wheels_env``); the Spark examples' JVMs run with
``tests.helpers.spark.SHORT_JVM_OPTS`` (SPARK_SUBMIT_OPTS). Each block's time is printed, and
ends a failure's message.

Every block is bounded: one that runs past ``BLOCK_TIMEOUT_S`` (a hung send, a JVM that never
exits) stops the script, and the test fails with that block's output; the whole script is
bounded by ``SCRIPT_TIMEOUT_S``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.ports import free_port
from tests.helpers.spark import short_jvm_env
from tests.helpers.v5_python import venv_dir

README = Path(__file__).resolve().parents[2] / "README.md"
EXECUTABLE = {"bash", "sh", "python", "java", "properties", "ini", "yaml", "json", "toml", "xml"}
PORTS = (9876, 10909, 10911, 10912, 8081, 8080)  # 8081: the gRPC endpoint (RocketMQ 5's clients); 8080: the dashboard
# Maven under the test's HOME reads and fills the real local repository, not an empty one
MAVEN_OPTS = f"-Dmaven.repo.local={Path.home() / '.m2' / 'repository'}"
# pip under the test's HOME (the v5 client's venv) reads and fills the real cache likewise
PIP_CACHE_DIR = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
MARK = "### README block at line "
BLOCK_TIMEOUT_S = 600  # three Spark jobs (one block) ran past 420 s at a load average of 9-10 on 2 cores
SCRIPT_TIMEOUT_S = 1200


@dataclass
class Block:
    lang: str
    attrs: dict[str, str]
    text: str
    line: int


def readme_blocks() -> list[Block]:
    out: list[Block] = []
    lines = README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*(.*)$", lines[i])
        if m is None:
            i += 1
            continue
        start = i + 1
        lang, rest = m.group(1), m.group(2)
        attrs: dict[str, str] = {}
        for part in re.finditer(r"(\w+)(?:=(\S+(?:\s+(?!\w+=)\S+)*))?", rest):
            attrs[part.group(1)] = part.group(2) or ""
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        out.append(Block(lang, attrs, "\n".join(body) + "\n", start))
        i += 1
    return out


def test_every_executable_block_is_run_or_says_why_not() -> None:
    blocks = readme_blocks()
    assert blocks, "README.md has no code blocks"
    for b in blocks:
        if b.lang not in EXECUTABLE:
            continue
        modes = [k for k in ("run", "file", "skip") if k in b.attrs]
        assert len(modes) == 1, f"README.md:{b.line}: ```{b.lang} needs one of run, file=NAME, skip=WHY"
        if "skip" in b.attrs:
            assert len(b.attrs["skip"]) > 10, f"README.md:{b.line}: skip= must say why"
        if "file" in b.attrs:
            assert b.attrs["file"].strip(), f"README.md:{b.line}: a name"
    assert sum("run" in b.attrs for b in blocks) >= 8


def script(blocks: list[Block]) -> str:
    """One bash script of the README's runnable blocks, in order."""
    out = ["set -eu", ""]
    for b in blocks:
        if b.lang not in EXECUTABLE or "skip" in b.attrs:
            continue
        out.append(f"echo '{MARK}{b.line}'")
        if "file" in b.attrs:
            name = b.attrs["file"]
            out += [f'mkdir -p "$(dirname {name})"', f"cat > {name} <<'PUMICE_README_EOF'", b.text.rstrip("\n"),
                    "PUMICE_README_EOF"]  # fmt: skip
        elif b.lang == "python":
            out += ["python3 - <<'PUMICE_README_EOF'", b.text.rstrip("\n"), "PUMICE_README_EOF"]
        else:
            out.append(b.text.rstrip("\n"))
        out.append("")
    return "\n".join(out) + "\n"


def sections(output: str) -> dict[int, str]:
    """The script's output per README block (by the block's line)."""
    parts = re.split(rf"^{re.escape(MARK)}(\d+)$", output, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def block_times(started: dict[int, float], end: float) -> str:
    """One line per block: its README line and the seconds it ran (until the next block started,
    or ``end`` for the last), the slowest first."""
    lines = sorted(started)  # the script runs the blocks in README order
    took = {n: (started[lines[i + 1]] if i + 1 < len(lines) else end) - started[n] for i, n in enumerate(lines)}
    return "\n".join(f"README block at line {n}: {s:.1f} s" for n, s in sorted(took.items(), key=lambda t: -t[1]))


def run_script(path: Path, cwd: Path, env: dict[str, str], out_path: Path, block_timeout_s: float = BLOCK_TIMEOUT_S,
               script_timeout_s: float = SCRIPT_TIMEOUT_S) -> str:  # fmt: skip
    """Run the script ``script()`` wrote (in its own process group, stopped at the end); its output.
    Fails with the output of the block that ran past ``block_timeout_s``, or of the script's end
    when it exits non-zero or runs past ``script_timeout_s``. Each block's time is printed (the
    test's captured stdout) and ends each failure's message."""
    started = time.monotonic()
    with out_path.open("wb") as f:
        runner = subprocess.Popen(["bash", str(path)], cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # fmt: skip
    block_started: dict[int, float] = {}  # a block's line -> when its marker was first seen
    try:
        block = 0
        while (rc := runner.poll()) is None:
            now = time.monotonic()
            blocks = sections(out_path.read_text(errors="replace"))
            for n in blocks.keys() - block_started.keys():
                block_started[n] = now
            block = max(blocks, default=0)
            if block and now - block_started[block] > block_timeout_s:
                raise AssertionError(f"README block at line {block} still running after {block_timeout_s:.0f} s; "
                                     f"its output:\n{blocks[block][-6000:]}\n"
                                     f"{block_times(block_started, now)}")  # fmt: skip
            if now - started > script_timeout_s:
                raise AssertionError(f"README script still running after {script_timeout_s:.0f} s; its output's "
                                     f"end:\n{out_path.read_text(errors='replace')[-6000:]}\n"
                                     f"{block_times(block_started, now)}")  # fmt: skip
            time.sleep(0.2)
    finally:
        stop_group(runner)
    output = out_path.read_text(errors="replace")
    for n in sections(output).keys() - block_started.keys():  # markers of blocks that ended within the last poll
        block_started[n] = time.monotonic()
    times = block_times(block_started, time.monotonic())
    print(f"README script: {time.monotonic() - started:.1f} s\n{times}")
    assert rc == 0, f"README script exit {rc}; its output's end:\n{output[-6000:]}\n{times}"
    return output


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def stop_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def pip_wheels_env() -> dict[str, str]:
    """pip's settings for the v5 block: the wheels tests/peers5/install.sh keeps (the same pinned
    set pip resolves rocketmq-python-client 5.1.2 to), and no index, when that set is complete:
    the block then downloads and builds nothing (it took minutes from the index); else none."""
    wheels = Path(f"{venv_dir()}-wheels")
    if not (wheels / "pumice-requirements.txt").is_file():
        return {}
    return {"PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}


def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    busy = [p for p in PORTS if not port_free(p)]
    assert not busy, f"the README's ports {busy} are in use: stop what listens there (another pumice dev?)"
    bindir = Path(sys.executable).parent
    assert (bindir / "pumice").exists(), f"no pumice console script next to {sys.executable}: pip install -e ."
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PUMICE_LOG_DIR", "NAMESRV_ADDR", "ROCKETMQ_HOME")}
    env |= {"HOME": str(home), "PATH": f"{bindir}:{env.get('PATH', '')}", "MAVEN_OPTS": MAVEN_OPTS,
            "PIP_CACHE_DIR": PIP_CACHE_DIR} | pip_wheels_env()  # fmt: skip
    env = short_jvm_env(env)  # the Spark examples' JVMs each run a job or two
    dev_out = tmp_path / "dev.out"
    with dev_out.open("wb") as f:
        dev = subprocess.Popen([str(bindir / "pumice"), "dev"], cwd=work, env=env, stdout=f, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while b"Ctrl-C stops" not in dev_out.read_bytes():
            assert dev.poll() is None and time.monotonic() < deadline, dev_out.read_text()
            time.sleep(0.2)
        (tmp_path / "readme.sh").write_text(script(readme_blocks()))
        output = run_script(tmp_path / "readme.sh", work, env, tmp_path / "readme.out")
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            dev_rc = dev.wait(30)
        finally:
            stop_group(dev, signal.SIGKILL)
    assert dev_rc == 0, dev_out.read_text()[-3000:]

    # what each example must have shown
    by_block = sections(output)
    blocks = {b.line: b for b in readme_blocks()}

    def out_of(first_line_fragment: str) -> str:
        line = next(n for n, b in blocks.items() if first_line_fragment in b.text and n in by_block)
        return by_block[line]

    assert out_of("PushConsumer(").count("SEND_OK") == 3 and "3 messages consumed" in out_of("PushConsumer(")
    assert "SEND_OK" in out_of("Produce.java")
    assert "OrderTopic" in out_of("MQAdminStartup topicList"), out_of("MQAdminStartup topicList")
    assert "OK " in out_of("CppProducers")
    admin = out_of("pumice admin consumerProgress -g OrderConsumers")
    assert "OrderConsumers" in admin or "#Diff" in admin or "Diff" in admin, admin
    assert "order-1" in admin or "order 1" in admin, admin
    assert "messages of OrderTopic in the store directory" in out_of("SparkSession")
    assert "stats:" in out_of("pumice spark stats") and "export:" in out_of("pumice spark stats")
    ha = out_of("pumice broker -c slave.conf")
    assert "broker-ha" in ha and "SEND_OK" in ha, ha
    assert "brokerRole=SYNC_MASTER" in out_of("pumice broker -c master.conf -p")
    assert "broker.log" in out_of("ls ~/logs/rocketmqlogs/")
    assert out_of("8080/topic/OrderTopic").strip() == "True", out_of("8080/topic/OrderTopic")
    more = out_of("create_reply_message")
    assert "reply: b're: ping'" in more and "SEND_OK COMMIT_MESSAGE" in more, more
    assert "amounts over 100: [150, 300]" in more, more
    secure = out_of("pumice namesrv -c secure-namesrv.conf")
    assert "SEND_OK" in secure and "refused:" in secure and "No accessKey is configured" in secure, secure


pytestmark = pytest.mark.timeout(1500)


def test_script_shape() -> None:
    """The harness itself: the blocks come back with their attributes, in order."""
    blocks = readme_blocks()
    langs = {b.lang for b in blocks}
    assert {"bash", "python", "java", "properties"} <= langs
    text = script(blocks)
    assert "cat > master.conf" in text and "java -cp" in text and "skip=" not in text and "cat > pom.xml" in text
    assert text.index("cat > master.conf") < text.index("pumice broker -c master.conf &")
    assert shutil.which("bash")


def test_a_block_that_runs_past_its_time_fails_with_its_output(tmp_path: Path) -> None:
    """A hung example (issue 31.14: a Java send that timed out, a JVM never shut down) fails the
    test within the block's bound, naming the block and showing what it printed, and is stopped."""
    blocks = [
        Block("bash", {"run": ""}, "echo first\n", 10),
        Block("bash", {"run": ""}, "echo waiting\nsleep 300\n", 20),
    ]
    (tmp_path / "s.sh").write_text(script(blocks))
    t0 = time.monotonic()
    with pytest.raises(AssertionError) as e:
        run_script(tmp_path / "s.sh", tmp_path, dict(os.environ), tmp_path / "s.out", block_timeout_s=2)
    assert time.monotonic() - t0 < 15
    assert "README block at line 20 still running after 2 s" in str(e.value) and "waiting" in str(e.value)
    assert "first" not in str(e.value)  # the block's own output, not the script's
    # each block's time ends the message, the slowest first: which block to look at
    times = str(e.value).split("waiting\n")[-1].strip().splitlines()
    assert [t.split(":")[0] for t in times] == ["README block at line 20", "README block at line 10"], times
    assert float(times[0].split(": ")[1].removesuffix(" s")) >= 2, times
    sleepers = subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True).stdout.split()
    mine = [p for p in sleepers if Path(f"/proc/{p}/cwd").exists() and os.readlink(f"/proc/{p}/cwd") == str(tmp_path)]
    assert not mine, "the hung block's process was left running"


def test_the_java_example_exits_when_its_send_fails(tmp_path: Path) -> None:
    """The README's Java producer, built with the README's pom.xml and Maven command, against a
    name server address where nothing listens: the send fails and the JVM exits with the error
    (its producer shut down in ``finally``) instead of hanging on the client's threads."""
    blocks = readme_blocks()
    pom = next(b for b in blocks if b.attrs.get("file") == "pom.xml")
    mvn = next(b for b in blocks if "run" in b.attrs and "build-classpath" in b.text)
    java = next(b for b in blocks if b.lang == "java" and "DefaultMQProducer" in b.text)
    (tmp_path / "pom.xml").write_text(pom.text)
    env = os.environ | {"MAVEN_OPTS": MAVEN_OPTS}
    built = subprocess.run(
        ["bash", "-euc", mvn.text], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stdout + built.stderr
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
    assert "127.0.0.1:9876" in java.text
    (tmp_path / "Produce.java").write_text(java.text.replace("127.0.0.1:9876", nowhere))
    run = ["java", "-cp", (tmp_path / "classpath.txt").read_text().strip(), "Produce.java"]
    proc = subprocess.Popen(run, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(10)
        raise AssertionError(f"the Java example did not exit after its send failed:\n{out[-3000:]}") from None
    assert proc.returncode != 0 and "at Produce.main" in out, out[-3000:]  # the send's error
