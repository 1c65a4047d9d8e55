"""Store benchmark: append, dispatch, sequential read and key lookups.

Prints msgs/s and MB/s for each phase. Runs on the default geometry (1 GiB CommitLog files)
in a temporary directory on the same disk as the project unless --dir is given.

    python3 -m bench.store_bench [--messages N] [--size BYTES] [--dir PATH] [--no-prefault]

``--no-prefault``: prefaultCommitLog=false, and the first file is not warmed either, so
appends take the first-touch page faults (what the prefault buys, in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import random
import shutil
import tempfile
import time

from pumice.common.message_decoder import message_properties_to_string
from pumice.store import DefaultMessageStore, GetMessageStatus, MessageExtBrokerInner, MessageStoreConfig

QUEUES = 8


def _messages(n: int, size: int, start: int) -> list[MessageExtBrokerInner]:
    """Input messages, made before the clock starts and frozen out of the GC's scans.

    A broker's heap holds a few in-flight messages, not the whole run's input: without the
    freeze, every collection would walk them and the figures would measure the GC. Each
    message carries its properties both as a map and as the wire string, as a broker
    request does (the producer sends the string; the broker parses it).
    """
    body = os.urandom(size)
    host = (b"\x7f\x00\x00\x01", 10911)
    now = int(time.time() * 1000)
    out = [
        MessageExtBrokerInner(
            topic="BenchTopic",
            body=body,
            queue_id=i % QUEUES,
            properties={"TAGS": "TagA", "KEYS": f"key-{i}", "UNIQ_KEY": f"7F0000010000{i:020X}"},
            born_timestamp=now,
            born_host=host,
            store_host=host,
        )
        for i in range(start, start + n)
    ]
    for m in out:
        m.properties_string = message_properties_to_string(m.properties)
    gc.collect()
    gc.freeze()
    return out


def _line(name: str, n: int, nbytes: int, secs: float) -> None:
    print(f"{name:<28} {n:>9,} msgs {secs:8.3f} s {n / secs:>12,.0f} msg/s {nbytes / secs / 1e6:>9.1f} MB/s")


PREFAULT = True


def _config(root: str) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=root, prefault_commit_log=PREFAULT)


def _warm_first_file(store: DefaultMessageStore) -> None:
    """Steady state: every file a broker writes was pre-faulted while the previous one filled.
    The very first file is handed out at once, so fault it in before the clock starts."""
    store.commit_log.put_message(_messages(1, 16, 10**9)[0])
    mf = store.commit_log.mapped_file_queue.get_last_mapped_file()
    assert mf is not None
    if PREFAULT:
        mf.prefault()


def _time_dispatch(store: DefaultMessageStore) -> float:
    """Seconds to dispatch the whole CommitLog from offset 0 in this thread."""
    reput = store.reput_message_service
    reput.reput_from_offset = 0
    t0 = time.perf_counter()
    while reput.do_reput():
        pass
    t = time.perf_counter() - t0
    assert reput.behind() == 0
    return t


def _append_alone(root: str, messages: int, size: int) -> DefaultMessageStore:
    """Phases 1-3 on a loaded store whose dispatch thread is not running."""
    store = DefaultMessageStore(_config(root))
    assert store.load()
    commit_log = store.commit_log
    commit_log.dispatch_hints = collections.deque()

    _warm_first_file(store)
    single = max(1, messages // 4)
    msgs = _messages(single, size, 0)
    t0 = time.perf_counter()
    for m in msgs:
        r = commit_log.put_message(m)
        assert r.is_ok(), r
    t = time.perf_counter() - t0
    record = r.append_message_result.wrote_bytes  # type: ignore[union-attr]
    _line("append, 1 at a time", single, single * record, t)

    msgs = _messages(messages, size, single)
    t0 = time.perf_counter()
    for i in range(0, messages, 32):
        r = commit_log.put_messages(msgs[i : i + 32])
        assert r.is_ok(), r
    t = time.perf_counter() - t0
    _line("append, batches of 32", messages, messages * record, t)
    total = single + messages
    del msgs

    # dispatch from the hints the appends left (kept unbounded here so all of them count)
    _line("dispatch, from append hints", total, total * record, _time_dispatch(store))
    store.shutdown()

    # rebuild the ConsumeQueues and index by parsing the CommitLog, as a slave or a rebuild does
    shutil.rmtree(os.path.join(root, "consumequeue"))
    shutil.rmtree(os.path.join(root, "index"))
    store = DefaultMessageStore(_config(root))
    assert store.load()
    _line("dispatch, parsing the log", total, total * record, _time_dispatch(store))
    store.shutdown_flag = False  # the read phases need a started store; dispatch is caught up
    return store


def _append_with_dispatch(root: str, messages: int, size: int) -> None:
    """A started store: appends and the dispatch thread share the process, as in a broker."""
    with DefaultMessageStore(_config(root)) as store:
        _warm_first_file(store)
        msgs = _messages(messages, size, 0)
        max_behind = 0
        t0 = time.perf_counter()
        for i in range(0, messages, 32):
            r = store.put_messages(msgs[i : i + 32])
            assert r.is_ok(), r
            if i % 3200 == 0:
                max_behind = max(max_behind, store.dispatch_behind_bytes())
        t_put = time.perf_counter() - t0
        while store.dispatch_behind_bytes() > 0:
            time.sleep(0.0005)
        t = time.perf_counter() - t0
        amr = r.append_message_result
        assert amr is not None
        record = amr.wrote_bytes // amr.msg_num
        _line("append 32s + dispatch, e2e", messages, messages * record, t)
        print(
            f"{'':<28} appends done at {t_put:.3f} s; dispatch caught up {t - t_put:.3f} s later; "
            f"max lag seen {max_behind / 1e6:.1f} MB"
        )


def _reads(store: DefaultMessageStore, size: int) -> None:
    total = sum(store.get_max_offset_in_queue("BenchTopic", q) for q in range(QUEUES))
    t0 = time.perf_counter()
    read = 0
    nbytes = 0
    for q in range(QUEUES):
        offset = 0
        while True:
            res = store.get_message("bench", "BenchTopic", q, offset, 32)
            if res is None or res.status is not GetMessageStatus.FOUND:
                break
            read += res.message_count
            nbytes += res.buffer_total_size
            offset = res.next_begin_offset
            res.release()
    t = time.perf_counter() - t0
    assert read == total, (read, total)
    _line("sequential read (pull 32)", read, nbytes, t)

    rng = random.Random(7)
    keys = [f"key-{rng.randrange(total)}" for _ in range(5000)]
    t0 = time.perf_counter()
    for k in keys:
        assert len(store.query_message("BenchTopic", k, 4)) == 1
    t = time.perf_counter() - t0
    _line("key lookups", len(keys), len(keys) * (size + 150), t)


def run(messages: int, size: int, root: str) -> None:
    store = _append_alone(os.path.join(root, "a"), messages, size)
    try:
        _reads(store, size)
    finally:
        store.shutdown()
    _append_with_dispatch(os.path.join(root, "b"), messages, size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--no-prefault", action="store_true", help="prefaultCommitLog=false, no warm first file")
    args = ap.parse_args()
    global PREFAULT
    PREFAULT = not args.no_prefault
    root = args.dir or tempfile.mkdtemp(prefix="pumice-bench-", dir=os.path.dirname(os.path.abspath(__file__)))
    try:
        print(f"store in {root}; body {args.size} B; {QUEUES} queues; UNIQ_KEY + 1 key per message; "
              f"prefault {'on' if PREFAULT else 'off'}")  # fmt: skip
        run(args.messages, args.size, root)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
