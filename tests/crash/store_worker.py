"""A broker-side store process for the crash tests: opens a store and writes until it is killed.

Run as ``python3 -m tests.crash.store_worker --store DIR --flush sync|async --seed N
--commit-log-size BYTES ...`` (``--help`` lists the rest). Several writer threads put
messages (single puts and ``put_messages`` batches) on a few topics and queues, with bodies
of varied sizes, some sized to land right at the end of the current CommitLog file.

stdout, one line per event, each written with one ``write`` call the moment it happens:

=================================================================  ===========================
``READY``                                                          the store is loaded and started
``ACK <key> <topic> <queueId> <queueOffset> <commitLogOffset>``    a put returned PUT_OK (printed after it returned)
``NACK <key> <status>``                                            a put returned another status
``STAT behind=<b> min=<o> max=<o> files=<n> acked=<n>``            periodic progress
``ERROR <text>``                                                   a writer thread raised
``DONE``                                                           budget spent, store shut down cleanly
=================================================================  ===========================

Every message has a unique KEYS key ``<prefix>w<writer>-<seq>-<bodySize>`` and a body that
is a function of the key alone (``body_for_key``), so the verifier can check the bytes of
anything it reads without being told the body. The worker is bounded: it stops writing
after ``--max-messages`` and exits (cleanly) after ``--max-seconds`` if never killed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import threading
import time
import traceback

from pumice.store import (
    DefaultMessageStore,
    FlushDiskType,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
)

RECORD_OVERHEAD = 91 + 1 + 2  # fixed head (IPv4 hosts) + TOPICLENGTH + PROPERTIESLENGTH
END_FILE_MIN_BLANK_LENGTH = 8


def body_for_key(key: str) -> bytes:
    """The body of the message with this key: sha256(key) repeated to the size the key ends with."""
    size = int(key.rsplit("-", 1)[1])
    digest = hashlib.sha256(key.encode()).digest()
    return (digest * (size // len(digest) + 1))[:size]


def make_key(prefix: str, writer: int | str, seq: int, size: int) -> str:
    return f"{prefix}w{writer}-{seq}-{size}"


def tag_for(queue_id: int) -> str:
    return f"tag{queue_id}"


def properties_for(key: str, queue_id: int) -> dict[str, str]:
    return {"KEYS": key, "TAGS": tag_for(queue_id)}


def make_config(
    root: str,
    flush: str,
    commit_log_size: int,
    cq_size: int = 20 * 200,
    index_slots: int = 512,
    index_num: int = 4096,
    **overrides: object,
) -> MessageStoreConfig:
    """The store geometry shared by the worker and the verifier (sizes must match to load)."""
    values: dict[str, object] = {
        "store_path_root_dir": root,
        "flush_disk_type": FlushDiskType.SYNC_FLUSH if flush == "sync" else FlushDiskType.ASYNC_FLUSH,
        "mapped_file_size_commit_log": commit_log_size,
        "mapped_file_size_consume_queue": cq_size,
        "max_hash_slot_num": index_slots,
        "max_index_num": index_num,
        "preallocate_commit_log": False,
        "prefault_commit_log": False,
        # never let a disk-space rule delete files behind the tests' back
        "disk_max_used_space_ratio": 95,
        "clean_file_forcibly_enable": False,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)  # type: ignore[arg-type]


class Emitter:
    """One ``os.write`` per call, so a SIGKILL never leaves half an event in the file."""

    def __init__(self, fd: int = 1) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def emit(self, text: str) -> None:
        data = text.encode()
        with self.lock:
            while data:
                n = os.write(self.fd, data)
                data = data[n:]


class Worker:
    def __init__(self, args: argparse.Namespace, store: DefaultMessageStore, out: Emitter) -> None:
        self.args = args
        self.store = store
        self.out = out
        self.stop = threading.Event()
        self.budget_lock = threading.Lock()
        self.budget = args.max_messages
        self.acked = 0
        self.topics = [f"CrashTopic{i}" for i in range(args.topics)]
        self.file_size = args.commit_log_size

    def take(self, n: int) -> int:
        with self.budget_lock:
            n = min(n, self.budget)
            self.budget -= n
            return n

    # -- sizes ---------------------------------------------------------------------------

    def random_size(self, rng: random.Random) -> int:
        a = self.args
        if rng.random() < 0.5:  # mostly small, a long tail up to body_max
            return rng.randint(a.body_min, max(a.body_min, min(a.body_max, a.body_min * 8)))
        return rng.randint(a.body_min, a.body_max)

    def near_end_size(self, rng: random.Random, prefix: str, writer: int, seq: int, topic: str, qid: int) -> int | None:
        """A body size that makes the record end exactly at, or just past, the room left in the file."""
        mf = self.store.commit_log.mapped_file_queue.get_last_mapped_file()
        if mf is None:
            return None
        remaining = self.file_size - mf.wrote_position  # racy with the other writers: fine
        if remaining <= END_FILE_MIN_BLANK_LENGTH:
            remaining = self.file_size
        target = remaining - END_FILE_MIN_BLANK_LENGTH + rng.randint(-3, 1)
        size = max(1, target - 200)
        for _ in range(3):  # the key (in the properties) carries the size, so iterate
            key = make_key(prefix, writer, seq, size)
            props = properties_for(key, qid)
            plen = sum(len(k) + len(v) + 2 for k, v in props.items()) - 1
            size = target - RECORD_OVERHEAD - len(topic.encode()) - plen
        if not 1 <= size <= self.args.near_end_max:
            return None
        return size

    # -- threads -------------------------------------------------------------------------

    def writer(self, w: int) -> None:
        a = self.args
        rng = random.Random(a.seed * 1_000_003 + w)
        prefix = a.key_prefix
        seq = 0
        try:
            while not self.stop.is_set():
                topic = rng.choice(self.topics)
                qid = rng.randrange(a.queues)
                batch = rng.random() < a.batch_prob
                want = rng.randint(2, a.batch_max) if batch and a.batch_max >= 2 else 1
                n = self.take(want)
                if n == 0:
                    return
                msgs: list[MessageExtBrokerInner] = []
                total = 0
                for _ in range(n):
                    seq += 1
                    size = None
                    if n == 1 and rng.random() < a.near_end_prob:
                        size = self.near_end_size(rng, prefix, w, seq, topic, qid)
                    if size is None:
                        size = self.random_size(rng)
                    if msgs and total + size + 300 > self.file_size // 2:
                        break  # a batch never spans files: keep it well under one
                    key = make_key(prefix, w, seq, size)
                    total += size + 300
                    msgs.append(
                        MessageExtBrokerInner(
                            topic=topic,
                            body=body_for_key(key),
                            queue_id=qid,
                            properties=properties_for(key, qid),
                            born_timestamp=time.time_ns() // 1_000_000,
                        )
                    )
                r = self.store.put_messages(msgs) if len(msgs) > 1 else self.store.put_message(msgs[0])
                ar = r.append_message_result
                if r.status is PutMessageStatus.PUT_OK and ar is not None:
                    offs = ar.wrote_offsets or [ar.wrote_offset]
                    logics = ar.logics_offsets or [ar.logics_offset]
                    lines = [
                        f"ACK {m.properties['KEYS']} {m.topic} {m.queue_id} {qo} {po}\n"
                        for m, qo, po in zip(msgs, logics, offs, strict=True)
                    ]
                    self.out.emit("".join(lines))  # after put returned, never before
                    with self.budget_lock:
                        self.acked += len(msgs)
                else:
                    self.out.emit("".join(f"NACK {m.properties['KEYS']} {r.status.value}\n" for m in msgs))
                    if r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
                        time.sleep(0.01)
        except Exception:
            self.out.emit(f"ERROR writer {w}: {traceback.format_exc()!r}\n")

    def cleaner(self) -> None:
        """Ask for manual deletion and run a clean-up pass, over and over, while the writers write."""
        manual = getattr(self.store, "execute_delete_files_manually", None)
        clean_pass = getattr(self.store, "clean_files_periodically", None)
        if manual is None:
            self.out.emit("ERROR execute_delete_files_manually is missing\n")
            return
        try:
            while not self.stop.wait(self.args.cleanup_interval_ms / 1000):
                manual()
                if clean_pass is not None:  # else rely on the store's own scheduler
                    clean_pass()
        except Exception:
            self.out.emit(f"ERROR cleaner: {traceback.format_exc()!r}\n")

    def stats(self) -> None:
        cl = self.store.commit_log
        while not self.stop.wait(self.args.stat_interval_ms / 1000):
            try:
                self.out.emit(
                    f"STAT behind={self.store.dispatch_behind_bytes()} min={cl.get_min_offset()} "
                    f"max={cl.get_max_offset()} files={len(cl.mapped_file_queue.mapped_files)} acked={self.acked}\n"
                )
            except Exception:
                self.out.emit(f"ERROR stats: {traceback.format_exc()!r}\n")


def slow_dispatch(store: DefaultMessageStore, delay_us_per_msg: float) -> None:
    """Make dispatch lag the writers (test-side fault injection: wraps the instance's method).

    Each dispatch call first sleeps ``delay_us_per_msg`` per request (at most 50 ms), which
    caps dispatch well below what the writers put, so the CommitLog runs ahead of the
    ConsumeQueues and the index and the dispatch hints overflow.
    """
    inner = store.reput_message_service.dispatch

    def do_dispatch(reqs):  # type: ignore[no-untyped-def]
        time.sleep(min(0.05, len(reqs) * delay_us_per_msg / 1e6))
        return inner(reqs)

    store.reput_message_service.dispatch = do_dispatch


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m tests.crash.store_worker", description=__doc__.split("\n")[0])
    p.add_argument("--store", required=True, help="store root directory")
    p.add_argument("--flush", choices=("sync", "async"), required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--commit-log-size", type=int, default=256 * 1024)
    p.add_argument("--cq-size", type=int, default=20 * 200)
    p.add_argument("--index-slots", type=int, default=512)
    p.add_argument("--index-num", type=int, default=4096)
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--topics", type=int, default=3)
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--body-min", type=int, default=16)
    p.add_argument("--body-max", type=int, default=4096)
    p.add_argument("--near-end-prob", type=float, default=0.1, help="chance a single put is sized to the file end")
    p.add_argument("--near-end-max", type=int, default=32 * 1024, help="largest body a near-end put may use")
    p.add_argument("--batch-prob", type=float, default=0.3)
    p.add_argument("--batch-max", type=int, default=8)
    p.add_argument("--key-prefix", default="", help="prefix of every key (the test passes the cycle)")
    p.add_argument("--max-messages", type=int, default=200_000)
    p.add_argument("--max-seconds", type=float, default=60.0)
    p.add_argument("--cleanup", action="store_true", help="call execute_delete_files_manually() repeatedly")
    p.add_argument("--cleanup-interval-ms", type=int, default=20)
    p.add_argument("--dispatch-delay-us", type=float, default=0.0, help="dispatch sleeps this per message")
    p.add_argument("--stat-interval-ms", type=int, default=20)
    return p.parse_args(argv)


def worker_config(args: argparse.Namespace) -> MessageStoreConfig:
    extra: dict[str, object] = {}
    if args.cleanup:
        # every file but the last is "expired" at once; clean often
        extra.update(file_reserved_time=0, clean_resource_interval=50, delete_commit_log_files_interval=0,
                     delete_consume_queue_files_interval=0)  # fmt: skip
    return make_config(
        args.store,
        args.flush,
        args.commit_log_size,
        args.cq_size,
        args.index_slots,
        args.index_num,
        **extra,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Emitter()
    store = DefaultMessageStore(worker_config(args))
    if not store.load():
        out.emit("ERROR load failed\n")
        return 2
    if args.cleanup and hasattr(store, "clean_files_initial_delay_ms"):
        store.clean_files_initial_delay_ms = 0  # the scheduler's first pass (RocketMQ: after 60 s)
    store.start()
    if args.dispatch_delay_us > 0:
        slow_dispatch(store, args.dispatch_delay_us)
    out.emit("READY\n")
    worker = Worker(args, store, out)
    threads = [threading.Thread(target=worker.writer, args=(w,), daemon=True) for w in range(args.writers)]
    threads.append(threading.Thread(target=worker.stats, daemon=True))
    if args.cleanup:
        threads.append(threading.Thread(target=worker.cleaner, daemon=True))
    for t in threads:
        t.start()
    # never killed: stop writing after the budget, keep the store open until the deadline
    time.sleep(args.max_seconds)
    worker.stop.set()
    for t in threads:
        t.join(timeout=10)
    store.shutdown()
    out.emit("DONE\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
