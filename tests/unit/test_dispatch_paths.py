"""Dispatch from the append hints and dispatch by parsing the CommitLog write the same bytes."""

from __future__ import annotations

import os
import shutil
import time
from collections import deque

from pumice.store import DefaultMessageStore, MessageExtBrokerInner, MessageSysFlag
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched


def _messages(n: int) -> list[MessageExtBrokerInner]:
    out = []
    for i in range(n):
        props = {"TAGS": f"Tag{i % 3}", "KEYS": f"k{i} shared"}
        if i % 5 == 0:
            props["UNIQ_KEY"] = f"U{i:08d}"
        if i % 17 == 0:
            props["DELAY"] = "2"
        sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE if i % 23 == 0 else 0
        out.append(MessageExtBrokerInner(topic=f"T{i % 2}", body=b"b%d" % i * 40, queue_id=i % 3, properties=props,
                                         sys_flag=sys_flag))  # fmt: skip
    return out


def _files(root: str, sub: str) -> dict[str, bytes]:
    out = {}
    base = os.path.join(root, sub)
    for d, _, names in os.walk(base):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), base)] = f.read()
    return out


def test_hinted_and_parsed_dispatch_are_byte_identical(tmp_path) -> None:
    a_root, b_root = str(tmp_path / "a"), str(tmp_path / "b")
    store = DefaultMessageStore(small_config(a_root))
    parsed = []
    real_check = store.commit_log.check_message_and_return_size

    def counting_check(*args, **kw):  # type: ignore[no-untyped-def]
        parsed.append(1)
        return real_check(*args, **kw)

    store.commit_log.check_message_and_return_size = counting_check  # type: ignore[method-assign]
    assert store.load()
    store.start()
    msgs = _messages(300)
    for i in range(0, 300, 7):  # batches of up to 7, rolling over several 64 KiB files
        assert store.put_messages(msgs[i : i + 7]).is_ok()
    wait_dispatched(store)
    assert parsed == []  # every record went through the hints
    store.shutdown()

    shutil.copytree(a_root, b_root)
    shutil.rmtree(os.path.join(b_root, "consumequeue"))
    shutil.rmtree(os.path.join(b_root, "index"))
    again = DefaultMessageStore(small_config(b_root))  # rebuilt by parsing the log
    real_again = again.commit_log.check_message_and_return_size
    reparsed = []

    def counting_again(*args, **kw):  # type: ignore[no-untyped-def]
        reparsed.append(1)
        return real_again(*args, **kw)

    again.commit_log.check_message_and_return_size = counting_again  # type: ignore[method-assign]
    assert again.load()
    again.start()
    wait_dispatched(again)
    again.shutdown()
    assert len(reparsed) >= 300  # every record parsed back (plus the blank ends of files)

    cq_a, cq_b = _files(a_root, "consumequeue"), _files(b_root, "consumequeue")
    assert cq_a.keys() == cq_b.keys() and len(cq_a) >= 6
    for name in cq_a:
        assert cq_a[name] == cq_b[name], name
    ix_a, ix_b = _files(a_root, "index"), _files(b_root, "index")
    assert len(ix_a) == len(ix_b) >= 2  # 256-entry index files roll over
    # index files are named by creation time; their contents must match in order
    assert [ix_a[n] for n in sorted(ix_a)] == [ix_b[n] for n in sorted(ix_b)]


def test_dispatch_now_runs_on_the_caller_and_the_thread_remains_the_fallback(tmp_path) -> None:
    store = DefaultMessageStore(small_config(str(tmp_path)))
    assert store.load()
    store.start()
    try:
        store.dispatch_on_caller = True
        rs = store.reput_message_service
        with rs._lock:  # the thread cannot dispatch meanwhile; neither can a caller
            r = store.put_messages([MessageExtBrokerInner(topic="T", body=b"a", queue_id=0)])
            assert r.is_ok()
            assert store.dispatch_now() is False
        with rs._lock:
            pass
        # dispatched by whoever comes first: the caller now, or the thread it woke when it could not
        for _ in range(3):
            store.put_messages([MessageExtBrokerInner(topic="T", body=b"b", queue_id=0)])
            store.dispatch_now()
        wait_dispatched(store)
        assert store.get_max_offset_in_queue("T", 0) == 4
        # with the thread stopped, only the caller dispatches, at once
        _stop_dispatch_thread(store)
        store.put_messages([MessageExtBrokerInner(topic="T", body=b"c", queue_id=1)])
        assert store.get_max_offset_in_queue("T", 1) == 0
        assert store.dispatch_now() is True
        assert store.get_max_offset_in_queue("T", 1) == 1  # in the ConsumeQueue right after the call
        assert store.dispatch_now() is False  # nothing left
    finally:
        store.reput_message_service._stopped.clear()
        store.shutdown()


def _store_without_dispatch_thread(tmp_path) -> DefaultMessageStore:
    """A started store whose dispatch thread is stopped, so its wake-up flag stays as the
    puts and callers left it (a caller's dispatch still works)."""
    store = DefaultMessageStore(small_config(str(tmp_path)))
    assert store.load()
    store.start()
    store.dispatch_on_caller = True
    _stop_dispatch_thread(store)
    return store


def _stop_dispatch_thread(store: DefaultMessageStore) -> None:
    """Stop the dispatch thread alone: callers still dispatch (``_stopped`` is cleared again),
    and its wake-up flag, cleared here, stays as puts and callers leave it."""
    rs = store.reput_message_service
    rs._stopped.set()
    rs._wake.set()
    assert rs._thread is not None
    rs._thread.join(5)
    rs._stopped.clear()
    rs._wake.clear()


def _put(store: DefaultMessageStore, body: bytes, **kw: bool) -> tuple[int, int]:
    r = store.put_messages([MessageExtBrokerInner(topic="T", body=body, queue_id=0)], **kw)
    assert r.is_ok() and r.append_message_result is not None
    return r.append_message_result.wrote_offset, r.append_message_result.wrote_bytes


def test_a_put_wakes_the_dispatch_thread_unless_its_caller_dispatches(tmp_path) -> None:
    store = _store_without_dispatch_thread(tmp_path)
    rs = store.reput_message_service
    try:
        rs._wake.clear()
        store.put_messages([MessageExtBrokerInner(topic="T", body=b"a", queue_id=0)], caller_dispatches=True)
        assert not rs._wake.is_set()
        with rs._lock:  # as if the thread were dispatching: the caller cannot, so it tells the thread
            assert store.dispatch_now() is False
        assert rs._wake.is_set()
        assert store.dispatch_now() is True
        assert not store.dispatch_now()
        rs._wake.clear()
        store.put_messages([MessageExtBrokerInner(topic="T", body=b"b", queue_id=0)])  # a put nobody dispatches
        assert rs._wake.is_set()
        assert store.dispatch_now() is True
        assert store.get_max_offset_in_queue("T", 0) == 2
    finally:
        store.shutdown()


def test_a_caller_that_leaves_hints_behind_wakes_the_thread(tmp_path) -> None:
    store = _store_without_dispatch_thread(tmp_path)
    rs = store.reput_message_service
    try:
        for body in (b"a", b"b", b"c"):
            _put(store, body, caller_dispatches=True)
        assert not rs._wake.is_set()
        assert rs.dispatch_hinted_now(max_requests=2) is True  # two of three: more than one call's worth
        assert store.get_max_offset_in_queue("T", 0) == 2
        assert rs._wake.is_set()  # the thread takes the rest rather than the 10 ms poll
        assert store.dispatch_now() is True
        assert store.get_max_offset_in_queue("T", 0) == 3
    finally:
        store.shutdown()


def test_a_hint_evicted_while_dispatching_is_left_to_the_parser(tmp_path) -> None:
    """The hint deque is bounded and other threads append to it: if the head is evicted
    between the check and the pop, what was popped must not be dispatched as if it began
    where the checked one did (its messages would land at the wrong queue offsets)."""
    store = _store_without_dispatch_thread(tmp_path)
    rs = store.reput_message_service
    try:
        placed = [_put(store, body, caller_dispatches=True) for body in (b"first", b"second")]

        class EvictedOnce(deque):  # type: ignore[type-arg]
            evicted = False

            def popleft(self):  # type: ignore[no-untyped-def]
                if not self.evicted:
                    self.evicted = True
                    super().popleft()  # a concurrent append on a full deque dropped the head
                return super().popleft()

        store.commit_log.dispatch_hints = EvictedOnce(store.commit_log.dispatch_hints, maxlen=16384)
        assert store.dispatch_now() is False
        assert rs.reput_from_offset == placed[0][0]  # nothing skipped
        assert rs._wake.is_set()
        with rs._lock:
            assert rs.do_reput()  # the thread parses from there
        cq = store.get_consume_queue("T", 0)
        assert cq is not None
        assert [cq.get_entry(i)[:2] for i in range(2)] == placed  # type: ignore[index]
    finally:
        store.shutdown()


def test_an_idle_dispatch_thread_rarely_wakes_when_the_caller_dispatches(tmp_path) -> None:
    """With the broker's loop dispatching its own puts, the thread's poll is a safety net: an idle
    store wakes it about 10 times a second (each wake takes the GIL from the loop), and a put it
    is woken for is still dispatched at once."""
    store = DefaultMessageStore(small_config(str(tmp_path / "s")))
    assert store.load()
    store.dispatch_on_caller = True
    rs = store.reput_message_service
    passes = []
    real = rs.do_reput

    def counting() -> bool:
        passes.append(1)
        return real()

    rs.do_reput = counting  # type: ignore[method-assign]
    store.start()
    try:
        time.sleep(0.1)
        before = len(passes)
        time.sleep(1.0)
        assert len(passes) - before <= 15  # 100 a second before
        msg = MessageExtBrokerInner(topic="T", body=b"x", queue_id=0, properties={"TAGS": "a"})
        t0 = time.monotonic()
        assert store.put_messages([msg]).is_ok()  # not caller-dispatched: the put wakes the thread
        wait_dispatched(store)
        assert time.monotonic() - t0 < 0.09
        assert store.get_max_offset_in_queue("T", 0) == 1
    finally:
        store.shutdown()
