"""Drive the Apache C++ RocketMQ client (PyPI ``rocketmq==0.4.4``, bundling librocketmq.so) in a subprocess.

The native library can crash or hang (shutdown, a blocked send), so it never runs inside pytest:
the tests call the helpers below, which run this file as a child process with a hard time limit
and read back one JSON object per line on its stdout.

Command line (the child side)::

    python3 -m tests.integration.cpp_client produce --namesrv 127.0.0.1:9876 --topic T --group G \\
        --count 3 --tag TagA --keys-prefix k [--batch] [--property K=V ...] [--delay-level L] [--orderly-keys K] \\
        [--interval-ms MS]
    python3 -m tests.integration.cpp_client consume --mode push|pull --namesrv 127.0.0.1:9876 \\
        --topic T --group G --expect 3 [--expression TagA] [--wait-s 20] [--reconsume-later-first N] [--orderly]

Events printed (``event`` key): ``started``; ``sent`` (i, ok, status, msg_id, offset, or error);
``message`` (topic, tags, keys, body, msg_id, queue_id, queue_offset, reconsume_times, properties, recv_time
= time.time() on arrival, and for push: status, the CConsumeStatus the callback returned);
``pull`` (queue_id, status, next_begin_offset, ...), ``error``; ``shutdown`` (seconds, or
``timed_out``); ``deadline`` when the watchdog ends the process. Exit codes: 0 = everything
asked for happened, 1 = some sends failed / fewer messages than expected, 2 = the library failed
to import or start, 3 = the watchdog fired (``--deadline-s`` passed), 4 = shutdown() hung for more
than SHUTDOWN_WAIT_S (seen when the name server does not answer; the process exits anyway).

The C++ client writes its log to ``$HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.<N>`` (its
SetXxxLogPath calls are no-ops in this version), so the helpers set HOME to a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROCKETMQ_PIP = "rocketmq==0.4.4"
SHUTDOWN_WAIT_S = 10.0

# -- child side -------------------------------------------------------------------------------

_out_lock = threading.Lock()


def emit(event: str, **fields: object) -> None:
    line = json.dumps({"event": event, **fields}, default=_jsonable)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _jsonable(v: object) -> object:
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    return str(v)


def _exit(code: int) -> None:
    """Leave without running the bindings' __del__ (a second shutdown + destroy of the native objects)."""
    with _out_lock:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _start_watchdog(deadline_s: float) -> None:
    def fire() -> None:
        emit("deadline", seconds=deadline_s)
        _exit(3)

    t = threading.Timer(deadline_s, fire)
    t.daemon = True
    t.start()


def _bounded_shutdown(shutdown: object) -> bool:
    """Call ``shutdown()`` in a thread; False (and a ``timed_out`` event) if it hangs past SHUTDOWN_WAIT_S."""
    t0 = time.monotonic()
    errors: list[str] = []

    def run() -> None:
        try:
            shutdown()  # type: ignore[operator]
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(SHUTDOWN_WAIT_S)
    if th.is_alive():
        emit("shutdown", timed_out=True, seconds=round(time.monotonic() - t0, 3))
        return False
    emit("shutdown", timed_out=False, seconds=round(time.monotonic() - t0, 3), errors=errors)
    return True


def _import_client():  # -> module
    try:
        import rocketmq.client as client
    except Exception as e:
        emit("error", stage="import", error=f"{type(e).__name__}: {e}")
        _exit(2)
    return client


def _properties(msg: object, names: Sequence[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for name in names:
        v = msg.get_property(name)  # type: ignore[attr-defined]
        if v:
            props[name] = v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else str(v)
    return props


_PROPERTY_NAMES = ("TAGS", "KEYS", "UNIQ_KEY", "WAIT", "CLUSTER", "DELAY", "RETRY_TOPIC", "RECONSUME_TIME")


def _message_event(msg: object, extra_props: Sequence[str]) -> dict[str, object]:
    return {
        "topic": msg.topic,  # type: ignore[attr-defined]
        "tags": msg.tags,  # type: ignore[attr-defined]
        "keys": msg.keys,  # type: ignore[attr-defined]
        "body": msg.body,  # type: ignore[attr-defined]
        "msg_id": msg.id,  # type: ignore[attr-defined]
        "queue_id": msg.queue_id,  # type: ignore[attr-defined]
        "queue_offset": msg.queue_offset,  # type: ignore[attr-defined]
        "commit_log_offset": msg.commit_log_offset,  # type: ignore[attr-defined]
        "reconsume_times": msg.reconsume_times,  # type: ignore[attr-defined]
        "properties": _properties(msg, (*_PROPERTY_NAMES, *extra_props)),
        "recv_time": time.time(),
    }


def cmd_produce(a: argparse.Namespace) -> int:
    client = _import_client()
    producer = client.Producer(a.group, timeout=a.send_timeout_ms)
    producer.set_namesrv_addr(a.namesrv)
    try:
        producer.start()
    except Exception as e:
        emit("error", stage="start", error=f"{type(e).__name__}: {e}")
        _exit(2)
    emit("started", pid=os.getpid())
    props = dict(p.split("=", 1) for p in a.property)

    def make(i: int):  # -> client.Message
        msg = client.Message(a.topic)
        if a.tag:
            msg.set_tags(a.tag)
        if a.keys_prefix:
            msg.set_keys(f"{a.keys_prefix}{i}")
        for k, v in props.items():
            msg.set_property(k, v)
        msg.set_body(f"{a.body_prefix}{i}")
        if a.delay_level:
            msg.set_delay_time_level(a.delay_level)
        return msg

    failures = 0
    if a.batch:
        msgs = [make(i) for i in range(a.count)]
        try:
            r = producer.send_batch(msgs)
            emit("sent", i=0, n=a.count, ok=True, status=r.status.name, msg_id=r.msg_id, offset=r.offset)
        except Exception as e:
            failures += 1
            emit("sent", i=0, n=a.count, ok=False, error=f"{type(e).__name__}: {e}")
    else:
        for i in range(a.count):
            try:
                t = time.time()
                if a.orderly_keys:  # SendMessageOrderly; the default selector picks queue (i % K) % queue count
                    r = producer.send_orderly(make(i), i % a.orderly_keys)
                else:
                    r = producer.send_sync(make(i))
                emit("sent", i=i, ok=True, status=r.status.name, msg_id=r.msg_id, offset=r.offset, time=t)
            except Exception as e:
                failures += 1
                emit("sent", i=i, ok=False, error=f"{type(e).__name__}: {e}")
            if a.interval_ms > 0:
                time.sleep(a.interval_ms / 1000)
    if not _bounded_shutdown(producer.shutdown):
        return 4
    return 1 if failures else 0


def cmd_consume_push(a: argparse.Namespace) -> int:
    client = _import_client()
    from rocketmq.client import RecvMessage, _CConsumeStatus, dll

    consumer = client.PushConsumer(a.group, orderly=a.orderly)
    consumer.set_namesrv_addr(a.namesrv)
    consumer.set_thread_count(a.thread_count)
    consumer.set_message_batch_max_size(1)
    got = threading.Event()
    count = [0]
    failed_once: set[str] = set()  # bodies answered RECONSUME_LATER once (--reconsume-later-first)

    def on_message(_consumer: object, cmsg: object) -> int:
        # the binding's subscribe() maps a raised exception to RECONSUME_LATER and then re-raises it, which
        # makes ctypes return 0 (CONSUME_SUCCESS); so register a callback that returns the status itself
        try:
            ev = _message_event(RecvMessage(cmsg), a.show_property)
            status = _CConsumeStatus.CONSUME_SUCCESS
            with _out_lock:
                body = str(ev["body"])
                if body not in failed_once and len(failed_once) < a.reconsume_later_first:
                    failed_once.add(body)
                    status = _CConsumeStatus.RECONSUME_LATER
            emit("message", **ev, status=status.name)
            with _out_lock:
                count[0] += 1
                if count[0] >= a.expect:
                    got.set()
            return status.value
        except Exception as e:
            emit("error", stage="callback", error=f"{type(e).__name__}: {e}")
            return _CConsumeStatus.RECONSUME_LATER.value

    client.ffi_check(dll.Subscribe(consumer._handle, a.topic.encode(), a.expression.encode()))
    consumer._register_callback(on_message)
    try:
        consumer.start()
    except Exception as e:
        emit("error", stage="start", error=f"{type(e).__name__}: {e}")
        _exit(2)
    emit("started", pid=os.getpid())
    if a.expect > 0:
        got.wait(a.wait_s)
    else:
        time.sleep(a.wait_s)
    if a.linger_s > 0:
        time.sleep(a.linger_s)
    if not _bounded_shutdown(consumer.shutdown):
        return 4
    return 0 if count[0] >= a.expect else 1


def cmd_consume_pull(a: argparse.Namespace) -> int:
    """A bounded pull loop (the binding's PullConsumer.pull spins forever on BROKER_TIMEOUT)."""
    import ctypes

    client = _import_client()
    from rocketmq.ffi import _CMessageQueue, _CPullStatus, dll

    consumer = client.PullConsumer(a.group)
    consumer.set_namesrv_addr(a.namesrv)
    try:
        consumer.start()
    except Exception as e:
        emit("error", stage="start", error=f"{type(e).__name__}: {e}")
        _exit(2)
    emit("started", pid=os.getpid())
    deadline = time.monotonic() + a.wait_s
    held: list[object] = []  # the arrays FetchSubscriptionMessageQueues allocated, released at the end

    def fetch_queues() -> list[object]:
        queues_p = ctypes.POINTER(_CMessageQueue)()
        size = ctypes.c_int()
        try:
            client.ffi_check(
                dll.FetchSubscriptionMessageQueues(
                    consumer._handle, a.topic.encode(), ctypes.pointer(queues_p), ctypes.pointer(size)
                )
            )
        except Exception as e:
            emit("error", stage="fetch_queues", error=f"{type(e).__name__}: {e}")
            return []
        held.append(queues_p)
        qs = [queues_p[i] for i in range(size.value)]
        emit("queues", queues=[{"topic": q.topic.decode(), "broker": q.brokerName.decode(), "queue_id": q.queueId}
                               for q in qs])  # fmt: skip
        return qs

    # no route yet: ask again (each call asks the name server while the topic has no route) until --wait-s
    queues = fetch_queues()
    while not queues and time.monotonic() < deadline:
        time.sleep(a.idle_sleep_s * 5)
        queues = fetch_queues()
    offsets = {q.queueId: a.start_offset for q in queues}
    count = 0
    # every round pulls each queue once; bounded by --max-rounds and --wait-s
    for _round in range(a.max_rounds):
        if count >= a.expect > 0 or time.monotonic() > deadline:
            break
        idle = True
        for q in queues:
            res = dll.Pull(consumer._handle, ctypes.pointer(q), a.expression.encode(), offsets[q.queueId], 32)
            status = _CPullStatus(res.pullStatus).name
            emit("pull", queue_id=q.queueId, offset=offsets[q.queueId], status=status,
                 next_begin_offset=res.nextBeginOffset, min_offset=res.minOffset, max_offset=res.maxOffset,
                 size=res.size)  # fmt: skip
            if res.pullStatus != _CPullStatus.BROKER_TIMEOUT:
                offsets[q.queueId] = res.nextBeginOffset
            if res.pullStatus == _CPullStatus.FOUND:
                idle = False
                for i in range(res.size):
                    emit("message", **_message_event(client.RecvMessage(res.msgFoundList[i]), a.show_property))
                    count += 1
            dll.ReleasePullResult(res)
        if idle:
            time.sleep(a.idle_sleep_s)
    for queues_p in held:
        dll.ReleaseSubscriptionMessageQueue(queues_p)
    if not _bounded_shutdown(consumer.shutdown):
        return 4
    return 0 if count >= a.expect else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cpp_client", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "consume"):
        s = sub.add_parser(name)
        s.add_argument("--namesrv", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--group", required=True)
        s.add_argument("--deadline-s", type=float, default=60.0, help="hard limit: the process exits 3 after this")
        s.add_argument("--show-property", action="append", default=[], help="extra property to report")
        if name == "produce":
            s.add_argument("--count", type=int, default=1)
            s.add_argument("--tag", default="")
            s.add_argument("--keys-prefix", default="")
            s.add_argument("--body-prefix", default="body-")
            s.add_argument("--property", action="append", default=[], help="K=V user property (repeatable)")
            s.add_argument("--batch", action="store_true", help="send all --count messages as one batch")
            s.add_argument("--send-timeout-ms", type=int, default=3000)
            s.add_argument("--delay-level", type=int, default=0, help="Message.set_delay_time_level (0: none)")
            s.add_argument("--orderly-keys", type=int, default=0, help="send_orderly with sharding key i %% K")
            s.add_argument("--interval-ms", type=float, default=0.0, help="pause after each single send (0: none)")
        else:
            s.add_argument("--mode", choices=("push", "pull"), required=True)
            s.add_argument("--expect", type=int, default=1, help="stop after this many messages (0: wait --wait-s)")
            s.add_argument("--expression", default="*")
            s.add_argument("--wait-s", type=float, default=20.0)
            s.add_argument("--linger-s", type=float, default=0.0, help="push: stay up this long after --expect")
            s.add_argument("--start-offset", type=int, default=0, help="pull: first offset of every queue")
            s.add_argument("--max-rounds", type=int, default=200, help="pull: at most this many rounds")
            s.add_argument("--idle-sleep-s", type=float, default=0.2)
            s.add_argument(
                "--reconsume-later-first",
                type=int,
                default=0,
                metavar="N",
                help="push: answer RECONSUME_LATER the first time each of the first N bodies arrives",
            )
            s.add_argument("--orderly", action="store_true", help="push: RegisterMessageCallbackOrderly")
            s.add_argument("--thread-count", type=int, default=1, help="push: consume threads")
    a = p.parse_args(argv)
    if a.cmd == "produce" and a.count > 10_000:
        p.error("--count is capped at 10000")
    _start_watchdog(a.deadline_s)
    if a.cmd == "produce":
        code = cmd_produce(a)
    elif a.mode == "push":
        code = cmd_consume_push(a)
    else:
        code = cmd_consume_pull(a)
    _exit(code)
    return code  # not reached


# -- parent side (pytest) ---------------------------------------------------------------------


def platform_supported() -> bool:
    """The wheel ships only a manylinux1 x86_64 librocketmq.so."""
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


def missing_reason() -> str | None:
    """None if ``import rocketmq.client`` works in a child interpreter, else what is missing."""
    r = subprocess.run(
        [sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True, timeout=60, check=False
    )
    if r.returncode == 0:
        return None
    tail = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
    return (
        f"the C++ RocketMQ client does not import: {tail}. Install it with `python3 -m pip install "
        f"{ROCKETMQ_PIP}` (its librocketmq.so needs only libc6, libstdc++6 and libgcc-s1 from Debian)"
    )


@dataclass
class CppRun:
    args: list[str]
    returncode: int | None  # None: killed by the parent's time limit
    events: list[dict] = field(default_factory=list)
    stderr: str = ""
    seconds: float = 0.0
    home: Path | None = None
    bad_lines: list[str] = field(default_factory=list)

    def of(self, event: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == event]

    def log_text(self, limit: int = 20_000) -> str:
        """The tail of the C++ client's own log files under $HOME/logs/rocketmq-cpp."""
        if self.home is None:
            return ""
        parts = []
        for f in sorted((self.home / "logs" / "rocketmq-cpp").glob("*rocketmq-cpp.log*")):
            parts.append(f"== {f.name}\n" + f.read_text(errors="replace")[-limit:])
        return "\n".join(parts)

    def describe(self) -> str:
        """Everything useful for an assertion message."""
        return (
            f"cpp_client {' '.join(self.args)}\nexit={self.returncode} after {self.seconds:.1f}s\n"
            f"events={json.dumps(self.events, indent=None)[:4000]}\nstderr={self.stderr[-4000:]}\n"
            f"bad stdout lines={self.bad_lines[:20]}\nC++ log:\n{self.log_text(4000)}"
        )


def _child_cmd(args: Sequence[str]) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), *args]


def _child_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["HOME"] = str(home)  # the C++ log goes to $HOME/logs/rocketmq-cpp
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _parse(run: CppRun, stdout: str) -> None:
    for line in stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            run.events.append(json.loads(line))
        except ValueError:
            run.bad_lines.append(line)


class CppClientProcess:
    """A running child (e.g. a push consumer that must be up before the producer sends)."""

    def __init__(self, args: Sequence[str], home: Path, timeout_s: float) -> None:
        self.args = list(args)
        self.home = home
        self.timeout_s = timeout_s
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            _child_cmd(self.args), env=_child_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True, start_new_session=True,
        )  # fmt: skip

    def wait(self) -> CppRun:
        """Wait for the child (killing its process group when the time limit passes) and parse its output."""
        remaining = max(0.1, self.timeout_s - (time.monotonic() - self.t0))
        killed = False
        try:
            out, err = self.proc.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            killed = True
            self.kill()
            out, err = self.proc.communicate(timeout=10)
        run = CppRun(self.args, None if killed else self.proc.returncode, stderr=err, home=self.home)
        run.seconds = time.monotonic() - self.t0
        _parse(run, out)
        return run

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> CppClientProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.proc.wait(10)


def run_cpp_client(args: Sequence[str], home: Path, timeout_s: float = 90.0) -> CppRun:
    return CppClientProcess(args, home, timeout_s).wait()


def produce(
    namesrv: str, topic: str, group: str, count: int, home: Path, *, tag: str = "", keys_prefix: str = "",
    batch: bool = False, properties: dict[str, str] | None = None, deadline_s: float = 60.0,
    extra: Sequence[str] = (),
) -> CppRun:  # fmt: skip
    args = ["produce", "--namesrv", namesrv, "--topic", topic, "--group", group, "--count", str(count),
            "--deadline-s", str(deadline_s)]  # fmt: skip
    if tag:
        args += ["--tag", tag]
    if keys_prefix:
        args += ["--keys-prefix", keys_prefix]
    if batch:
        args.append("--batch")
    for k, v in (properties or {}).items():
        args += ["--property", f"{k}={v}"]
    args += list(extra)
    return run_cpp_client(args, home, timeout_s=deadline_s + 15)


def consume_args(
    mode: str, namesrv: str, topic: str, group: str, expect: int, *, expression: str = "*",
    wait_s: float = 20.0, deadline_s: float = 60.0, extra: Sequence[str] = (),
) -> list[str]:  # fmt: skip
    return ["consume", "--mode", mode, "--namesrv", namesrv, "--topic", topic, "--group", group,
            "--expect", str(expect), "--expression", expression, "--wait-s", str(wait_s),
            "--deadline-s", str(deadline_s), *extra]  # fmt: skip


def consume(mode: str, namesrv: str, topic: str, group: str, expect: int, home: Path, **kw: object) -> CppRun:
    args = consume_args(mode, namesrv, topic, group, expect, **kw)  # type: ignore[arg-type]
    deadline_s = float(kw.get("deadline_s", 60.0))  # type: ignore[arg-type]
    return run_cpp_client(args, home, timeout_s=deadline_s + 15)


def start_consumer(mode: str, namesrv: str, topic: str, group: str, expect: int, home: Path,
                   **kw: object) -> CppClientProcess:  # fmt: skip
    """A consumer child left running; call ``.wait()`` for its CppRun (use it as a context manager)."""
    args = consume_args(mode, namesrv, topic, group, expect, **kw)  # type: ignore[arg-type]
    deadline_s = float(kw.get("deadline_s", 60.0))  # type: ignore[arg-type]
    return CppClientProcess(args, home, timeout_s=deadline_s + 15)


if __name__ == "__main__":
    sys.exit(main())
