"""Client benchmark: pumice.client and the Apache C++ client against the same real broker.

    python3 -m bench.client_bench [--seconds 5] [--producers 4] [--batch 64] [--consume 200000] [--no-cpp]
    python3 -m bench.client_bench --layers [30000]   # the producer's Python layers alone (send_layers)

Starts `pumice namesrv` and `pumice broker` (ASYNC_FLUSH) in a temporary directory, then measures
msg/s with 1 KiB bodies:

* Pumice: ``Producer.send`` in a loop (sync send, one thread); ``AsyncProducer.send_async`` with
  ``--in-flight`` sends outstanding; ``AsyncTransactionProducer.send_message_in_transaction``
  with ``--in-flight`` transactions outstanding (each committed at once); ``send_batch`` of
  ``--batch`` messages from ``--producers`` producers at once; ``AsyncPushConsumer`` consuming
  ``--consume`` stored messages (async handler, default consume batch of 1, 20 concurrent handler
  calls), and again with an SQL92 selector that picks half of them (the broker evaluates it on
  each record: ``enablePropertyFilter=true``; with ``--bit-map`` the broker also keeps 4.9's
  bloom-filter bit maps, ``enableConsumeQueueExt`` and ``enableCalcFilterBitMap``, the SQL92
  group registers before the messages are stored, and the fill of its topic is timed: each
  message's map is computed at dispatch, and a pull skips non-matching ones by their map); then a
  pipeline run, the
  batch producers in a child process while an ``AsyncPushConsumer`` here reads the same topic,
  with the CPU of the broker and of both client processes.
* C++ (PyPI rocketmq==0.4.4, each run in a child process of this script with a hard time
  limit): ``send_sync`` in a loop, ``send_batch`` of ``--batch`` messages from ``--producers``
  threads (one Producer each, with its defaults: 0.4.4 zlib-compresses whole batch bodies over
  4 KiB, which the broker inflates), and its PushConsumer (4 threads) consuming
  ``--consume`` stored messages.

The async Pumice runs use uvloop's event loop (``pumice.client.sync_loop.new_event_loop``, as the
sync classes and the pumice processes do). Each send figure is messages acknowledged / seconds;
consume figures count from the start of the consumer to the last message (so they include the
consumer's start-up and first rebalance).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.processes import cpu_seconds, run_on_uvloop, start_local_cluster, wait_idle

BODY = b"x" * 1024
QUEUES = 8


def _report(name: str, n: int, seconds: float, extra: str = "") -> None:
    rate = n / seconds if seconds > 0 else 0.0
    print(f"  {name:<44} {n:>9} msgs in {seconds:6.2f} s = {rate:>10,.0f} msg/s {extra}", flush=True)


# -- Pumice -----------------------------------------------------------------------------------------------------


async def _create_topics(ns: str, topics: list[str]) -> None:
    from pumice.client import AsyncMQAdmin

    async with AsyncMQAdmin(ns) as admin:
        for t in topics:
            await admin.create_topic(t, cluster="BenchCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        for t in topics:
            for _ in range(100):
                try:
                    await admin.topic_route(t)
                    break
                except Exception:
                    await asyncio.sleep(0.1)


def pumice_sync_send(ns: str, topic: str, seconds: float) -> tuple[int, float]:
    from pumice.client import Message, Producer

    p = Producer("BenchSyncPG", ns)
    p.start()
    try:
        p.send(Message(topic, BODY))  # warm-up: route, connection
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            p.send(Message(topic, BODY))
            n += 1
        return n, time.perf_counter() - t0
    finally:
        p.shutdown()


async def pumice_async_send(ns: str, topic: str, seconds: float, in_flight: int) -> tuple[int, float]:
    from pumice.client import AsyncProducer, Message

    async with AsyncProducer("BenchAsyncPG", ns) as p:
        await p.send(Message(topic, BODY))
        loop = asyncio.get_running_loop()
        pending = [0]
        room: list[asyncio.Future[None]] = []  # set when a send finishes while the loop below waits
        done = [0]
        failed = [0]

        def finished(t: asyncio.Task[Any]) -> None:
            pending[0] -= 1
            if t.cancelled() or t.exception() is not None:
                failed[0] += 1
            else:
                done[0] += 1
            if room and not room[0].done():
                room[0].set_result(None)

        async def wait_below(n: int) -> None:  # cheaper than asyncio.Semaphore: the bench's own cost
            while pending[0] > n:
                room[:] = [loop.create_future()]
                await room[0]

        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            await wait_below(in_flight - 1)
            pending[0] += 1
            p.send_async(Message(topic, BODY)).add_done_callback(finished)
        await wait_below(0)  # the tail
        if failed[0]:
            print(f"    ({failed[0]} async sends failed)")
        return done[0], time.perf_counter() - t0


async def pumice_transaction_send(ns: str, topic: str, seconds: float, in_flight: int) -> tuple[int, float]:
    """Transactions committed per second: each a half message, its local transaction (an async
    listener that commits at once) and a oneway END_TRANSACTION, ``in_flight`` at a time."""
    from pumice.client import AsyncTransactionProducer, LocalTransactionState, Message

    class Commit:
        async def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        async def check_local_transaction(self, msg: Any) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

    async with AsyncTransactionProducer("BenchTxPG", ns, transaction_listener=Commit()) as p:
        await p.send_message_in_transaction(Message(topic, BODY))
        done = [0]
        t0 = time.perf_counter()

        async def worker() -> None:
            while time.perf_counter() - t0 < seconds:
                await p.send_message_in_transaction(Message(topic, BODY))
                done[0] += 1

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return done[0], time.perf_counter() - t0


async def pumice_batch_send(ns: str, topic: str, seconds: float, producers: int, batch: int) -> tuple[int, float]:
    from pumice.client import AsyncProducer, Message

    async def one(i: int, t0: float) -> int:
        async with AsyncProducer(f"BenchBatchPG{i}", ns, instance_name=f"batch{i}") as p:
            n = 0
            while time.perf_counter() - t0 < seconds:
                await p.send_batch([Message(topic, BODY) for _ in range(batch)])
                n += batch
            return n

    t0 = time.perf_counter()
    counts = await asyncio.gather(*(one(i, t0) for i in range(producers)))
    return sum(counts), time.perf_counter() - t0


async def fill(ns: str, topic: str, n: int, batch: int) -> None:
    """``n`` messages (rounded up to 4 batches); message i has the property ``n`` = i % 10."""
    from pumice.client import AsyncProducer, Message

    async with AsyncProducer("BenchFillPG", ns) as p:
        sent = 0
        while sent < n:
            k = min(batch, n - sent)
            await asyncio.gather(*(
                p.send_batch([Message(topic, BODY, properties={"n": str((sent + j * k + i) % 10)}) for i in range(k)])
                for j in range(4)
            ))  # fmt: skip
            sent += 4 * k


async def pumice_push_consume(
    ns: str, topic: str, n: int, timeout_s: float, sql: str | None = None
) -> tuple[int, float]:
    """``n`` messages consumed (with ``sql``: of those the SQL92 selector picks)."""
    from pumice.client import AsyncPushConsumer, ConsumeFromWhere, ConsumeStatus, MessageSelector

    got = [0]
    done = asyncio.Event()

    async def handler(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got[0] += len(msgs)
        if got[0] >= n:
            done.set()
        return ConsumeStatus.SUCCESS

    c = AsyncPushConsumer("BenchPushCG" + ("Sql" if sql else ""), ns, consume_from_where=ConsumeFromWhere.FIRST)
    c.subscribe(topic, MessageSelector.by_sql(sql) if sql else "*")
    c.register_message_listener(handler)
    t0 = time.perf_counter()
    await c.start()
    try:
        try:
            async with asyncio.timeout(timeout_s):
                await done.wait()
        except TimeoutError:
            print(f"    (push consume timed out after {timeout_s} s)")
        return got[0], time.perf_counter() - t0
    finally:
        await c.shutdown()


async def register_sql_group(ns: str, topic: str, sql: str) -> None:
    """The SQL92 push group's first heartbeat: the broker's filter for it is born now."""
    from pumice.client import AsyncPushConsumer, ConsumeFromWhere, ConsumeStatus, MessageSelector

    async def nothing(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        return ConsumeStatus.RECONSUME_LATER  # the topic is empty: nothing comes

    c = AsyncPushConsumer("BenchPushCGSql", ns, consume_from_where=ConsumeFromWhere.FIRST)
    c.subscribe(topic, MessageSelector.by_sql(sql))
    c.register_message_listener(nothing)
    await c.start()
    await asyncio.sleep(1.5)
    await c.shutdown()


async def pumice_pipeline(ns: str, topic: str, seconds: float, producers: int, batch: int) -> None:
    """Produce and consume at once: an AsyncPushConsumer here, ``send_batch`` producers in a child
    process. Prints both rates, the consumer's lag when the producers stop and the CPU of all
    three processes: whichever is at a full core is the bottleneck."""
    from pumice.client import AsyncPushConsumer, ConsumeFromWhere, ConsumeStatus

    got = [0]

    async def handler(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got[0] += len(msgs)
        return ConsumeStatus.SUCCESS

    c = AsyncPushConsumer("BenchPipeCG", ns, consume_from_where=ConsumeFromWhere.FIRST)
    c.subscribe(topic)
    c.register_message_listener(handler)
    await c.start()
    try:
        for _ in range(100):  # the first rebalance: every queue pulled before producing starts
            if sum(mq.topic == topic for mq in c.assignment()) == QUEUES:
                break
            await asyncio.sleep(0.1)
        args = ["--child", "pumice-batch", "--namesrv", ns, "--topic", topic, "--seconds", str(seconds),
                "--producers", str(producers), "--batch", str(batch)]  # fmt: skip
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.client_bench", *args, stdout=asyncio.subprocess.PIPE
        )
        b0, c0, w0 = cpu_seconds(_BROKER_PID[0]), time.process_time(), time.perf_counter()
        out, _ = await asyncio.wait_for(child.communicate(), seconds + 60)
        w = time.perf_counter() - w0
        b, cc, consumed = cpu_seconds(_BROKER_PID[0]) - b0, time.process_time() - c0, got[0]
        r = json.loads(out.decode().strip().splitlines()[-1])
        t_end = time.perf_counter()
        while got[0] < r["n"] and time.perf_counter() - t_end < 30:
            await asyncio.sleep(0.005)
        catch_up = time.perf_counter() - t_end
        _report(f"pipeline: batch send ({batch}/batch, {producers} producers)", r["n"], r["seconds"])
        _report("pipeline: push consume, same time", consumed, w)
        print(
            f"    consumer behind by {r['n'] - consumed} msgs when the producers stopped, caught up in "
            f"{catch_up * 1000:.0f} ms; CPU of a core over {w:.1f} s: broker {b / w:.0%}, "
            f"producer process {r['cpu'] / w:.0%}, consumer process {cc / w:.0%}",
            flush=True,
        )
    finally:
        await c.shutdown()


# -- child processes ----------------------------------------------------------------------------------------------


def _child(argv: list[str]) -> None:
    """``--child MODE``: one C++ client measurement, or the Pumice producers of the pipeline run
    (``pumice-batch``); prints one JSON line and leaves with os._exit."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", required=True)
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=120.0)
    a = ap.parse_args(argv)

    def out(**kw: Any) -> None:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()

    threading.Timer(a.deadline, lambda: (out(error="deadline"), os._exit(3))).start()
    if a.child == "pumice-batch":
        n, s = run_on_uvloop(pumice_batch_send(a.namesrv, a.topic, a.seconds, a.producers, a.batch))
        out(n=n, seconds=s, cpu=time.process_time())
        os._exit(0)
    import rocketmq.client as rmq

    body = BODY.decode()

    def make() -> Any:
        m = rmq.Message(a.topic)
        m.set_body(body)
        return m

    if a.child in ("sync", "batch"):
        threads = 1 if a.child == "sync" else a.producers
        producers = []
        for i in range(threads):
            p = rmq.Producer(f"BenchCpp{a.child}PG{i}")
            p.set_namesrv_addr(a.namesrv)
            p.start()
            p.send_sync(make())  # warm-up
            producers.append(p)
        counts = [0] * threads
        errors = [0] * threads
        first_error: list[str] = []
        t0 = time.perf_counter()

        def run(i: int) -> None:
            p = producers[i]
            while time.perf_counter() - t0 < a.seconds:
                try:
                    if a.child == "sync":
                        p.send_sync(make())
                        counts[i] += 1
                    else:
                        p.send_batch([make() for _ in range(a.batch)])
                        counts[i] += a.batch
                except Exception as e:
                    errors[i] += 1
                    if not first_error:
                        first_error.append(f"{type(e).__name__}: {e}"[:300])

        ths = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        out(n=sum(counts), seconds=time.perf_counter() - t0, errors=sum(errors), first_error=first_error)
        os._exit(0)
    if a.child == "push":
        got = [0]
        lock = threading.Lock()
        done = threading.Event()

        def on_message(msg: Any) -> None:
            with lock:
                got[0] += 1
                if got[0] >= a.count:
                    done.set()

        c = rmq.PushConsumer("BenchCppPushCG")
        c.set_namesrv_addr(a.namesrv)
        c.set_thread_count(4)
        c.subscribe(a.topic, on_message)
        t0 = time.perf_counter()
        c.start()
        done.wait(a.deadline - 10)
        out(n=got[0], seconds=time.perf_counter() - t0)
        os._exit(0)
    out(error=f"unknown mode {a.child}")
    os._exit(2)


def cpp(mode: str, ns: str, topic: str, home: str, **kw: Any) -> dict[str, Any]:
    args = [sys.executable, "-m", "bench.client_bench", "--child", mode, "--namesrv", ns, "--topic", topic]
    for k, v in kw.items():
        args += [f"--{k}", str(v)]
    env = dict(os.environ, HOME=home)  # the C++ client logs under $HOME/logs
    deadline = float(kw.get("deadline", 120.0))
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=deadline + 15, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"error": "killed after the deadline"}
    for line in reversed(r.stdout.splitlines()):
        try:
            return dict(json.loads(line))
        except ValueError:
            continue
    return {"error": f"exit {r.returncode}: {r.stderr[-500:]}"}


def _cpp_available() -> str | None:
    r = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True, check=False)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


_BROKER_PID = [0]


def _fill_timed(ns: str, topic: str, n: int, batch: int) -> tuple[int, float]:
    t0 = time.perf_counter()
    run_on_uvloop(fill(ns, topic, n, batch))
    return n, time.perf_counter() - t0


def _timed(name: str, fn: Callable[[], tuple[int, float]]) -> None:
    """Run one Pumice measurement; also print how busy the broker and this client process were
    (which of the two is the bottleneck: the broker is one event loop on one core), and this
    process's CPU per message (``time.process_time``, as bench.peers counts client CPU)."""
    try:
        b0, c0, w0 = cpu_seconds(_BROKER_PID[0]), time.process_time(), time.perf_counter()
        n, s = fn()
        b, c, w = cpu_seconds(_BROKER_PID[0]) - b0, time.process_time() - c0, time.perf_counter() - w0
        per = f", {c / n * 1e6:.1f} µs a message" if n else ""
        _report(name, n, s, f"(broker CPU {b / w:.0%} of a core, client {c / w:.0%}{per})")
    except Exception as e:
        print(f"  {name:<44} failed: {type(e).__name__}: {e}", flush=True)


async def send_layers(n: int) -> float:
    """The producer's own CPU a send without I/O, in µs: ``AsyncProducer.send`` down to
    ``MQClientAPIImpl.invoke``, its RemotingClient answering at once with a canned SEND_OK (no
    broker, no socket, no frame codec: what the client's Python layers cost, which a loaded
    host's scheduling hides in the end-to-end figures)."""
    from pumice.client import AsyncProducer, Message, MessageQueue
    from pumice.remoting.remoting_command import RemotingCommand

    p = AsyncProducer("LayersPG", "127.0.0.1:1")
    p.started = True
    mqs = [MessageQueue("LayersTopic", "b0", i) for i in range(QUEUES)]
    p._known_publish_queues = lambda topic: mqs  # type: ignore[method-assign]
    p.instance.find_broker_addr = lambda *a, **k: "127.0.0.1:2"  # type: ignore[method-assign]

    async def invoke(addr: str, req: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        ext = {"msgId": "7F00000100002A9F0000000000000100", "queueId": req.ext_fields["e"], "queueOffset": "5"}
        return RemotingCommand(code=0, ext_fields=ext)

    p.instance.api.remoting.invoke = invoke  # type: ignore[method-assign]
    for _ in range(2000):  # warm-up
        await p.send(Message("LayersTopic", BODY))
    c0 = time.process_time()
    for _ in range(n):
        await p.send(Message("LayersTopic", BODY))
    return (time.process_time() - c0) / n * 1e6


def _layers(n: int, reps: int) -> None:
    """``send_layers`` in child processes, native and PUMICE_PURE=1 alternating; medians."""
    import statistics

    got: dict[str, list[float]] = {"native": [], "pure": []}
    for _ in range(reps):
        for path in got:
            env = dict(os.environ, PUMICE_PURE="1" if path == "pure" else "")
            code = f"import asyncio; from bench.client_bench import send_layers; print(asyncio.run(send_layers({n})))"
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
            got[path].append(float(out.stdout.strip().splitlines()[-1]))
    for path, v in got.items():
        runs = ", ".join(f"{x:.1f}" for x in v)
        print(f"  send layers, {path:<6} median {statistics.median(v):6.2f} µs a send ({runs})")


def main() -> None:
    if "--child" in sys.argv:
        _child(sys.argv[1:])
        return
    if "--layers" in sys.argv:
        i = sys.argv.index("--layers")
        n = int(sys.argv[i + 1]) if len(sys.argv) > i + 1 else 30_000
        print(f"producer layers, no I/O, {n} sends a run, 5 runs a path:")
        _layers(n, 5)
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--in-flight", type=int, default=256)
    ap.add_argument("--consume", type=int, default=200_000, help="messages each push consumer reads")
    ap.add_argument("--no-cpp", action="store_true")
    ap.add_argument("--bit-map", action="store_true", help="SQL92 bloom-filter bit maps (ConsumeQueueExt)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="pumice-client-bench-")
    conf = "brokerClusterName=BenchCluster\nflushDiskType=ASYNC_FLUSH\nenablePropertyFilter=true\n"
    if args.bit_map:
        conf += "enableConsumeQueueExt=true\nenableCalcFilterBitMap=true\n"
    procs, ns, _ = start_local_cluster(root, conf)
    _BROKER_PID[0] = procs[1].pid
    try:
        topics = ["SendTopic", "PumiceConsume", "PipeTopic", "CppConsume"]
        run_on_uvloop(_create_topics(ns, topics))
        run_on_uvloop(fill(ns, "SendTopic", 4 * args.batch, args.batch))  # the first CommitLog file, and its prefault
        print(f"(waited {wait_idle([procs[1].pid]):.1f} s for the broker's first-file work)")
        print(f"1 KiB bodies, {QUEUES} queues, {args.seconds:g} s per send run, one broker (ASYNC_FLUSH)")
        print("Pumice client:")
        _timed("sync send (Producer.send, 1 thread)", lambda: pumice_sync_send(ns, "SendTopic", args.seconds))
        _timed(
            f"async send ({args.in_flight} in flight)",
            lambda: run_on_uvloop(pumice_async_send(ns, "SendTopic", args.seconds, args.in_flight)),
        )
        _timed(
            f"transactional send ({args.in_flight} in flight, committed at once)",
            lambda: run_on_uvloop(pumice_transaction_send(ns, "SendTopic", args.seconds, args.in_flight)),
        )
        _timed(
            f"batch send ({args.batch}/batch, {args.producers} producers)",
            lambda: run_on_uvloop(pumice_batch_send(ns, "SendTopic", args.seconds, args.producers, args.batch)),
        )
        if args.bit_map:  # the SQL92 group's filter first: maps of later messages carry its bits
            run_on_uvloop(register_sql_group(ns, "PumiceConsume", "n < 5"))
            _timed(
                f"batch fill, bit maps computed ({args.batch}/batch)",
                lambda: _fill_timed(ns, "PumiceConsume", args.consume, args.batch),
            )
        else:
            run_on_uvloop(fill(ns, "PumiceConsume", args.consume, args.batch))
        _timed(
            f"push consume ({args.consume} stored)",
            lambda: run_on_uvloop(pumice_push_consume(ns, "PumiceConsume", args.consume, 120)),
        )
        half = args.consume // 2
        _timed(
            f"push consume, SQL92 'n < 5' ({half} of {args.consume} stored)",
            lambda: run_on_uvloop(pumice_push_consume(ns, "PumiceConsume", half, 120, sql="n < 5")),
        )
        wait_idle([procs[1].pid])
        run_on_uvloop(pumice_pipeline(ns, "PipeTopic", args.seconds, args.producers, args.batch))
        if args.no_cpp:
            return
        missing = _cpp_available()
        if missing:
            print(f"C++ client: not available ({missing})")
            return
        print("C++ client (rocketmq 0.4.4):")
        home = os.path.join(root, "home")
        os.makedirs(home, exist_ok=True)
        for name, mode, kw in (
            ("sync send (send_sync, 1 thread)", "sync", {"seconds": args.seconds}),
            (
                f"batch send ({args.batch}/batch, {args.producers} threads)",
                "batch",
                {"seconds": args.seconds, "producers": args.producers, "batch": args.batch},
            ),
        ):
            r = cpp(mode, ns, "SendTopic", home, **kw, deadline=args.seconds + 60)
            if "error" in r:
                print(f"  {name:<44} failed: {r['error']}")
            else:
                _report(name, r["n"], r["seconds"], f"({r['errors']} errors)" if r.get("errors") else "")
                if r.get("first_error"):
                    print(f"    first error: {r['first_error'][0]}")
        run_on_uvloop(fill(ns, "CppConsume", args.consume, args.batch))
        r = cpp("push", ns, "CppConsume", home, count=args.consume, deadline=130)
        name = f"push consume ({args.consume} stored, 4 threads)"
        if "error" in r:
            print(f"  {name:<44} failed: {r['error']}")
        else:
            _report(name, r["n"], r["seconds"])
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
