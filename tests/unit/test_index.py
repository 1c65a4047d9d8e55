"""IndexFile / IndexService behaviour: hash and slot collisions, time bounds, file roll-over, keys, expiry."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.common.java_hash import index_key_hash, java_string_hash
from pumice.store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig, MessageSysFlag
from pumice.store import commit_log as commit_log_module
from pumice.store.index_file import IndexFile
from pumice.store.index_service import IndexService
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched

SLOTS = 64  # small_config max_hash_slot_num
ENTRIES_PER_FILE = 255  # small_config max_index_num = 256; entry 0 is never used


def put(store: DefaultMessageStore, body: bytes, sys_flag: int = 0, topic: str = "T", **props: str) -> int:
    r = store.put_message(MessageExtBrokerInner(topic=topic, body=body, properties=dict(props), sys_flag=sys_flag))
    assert r.is_ok(), r
    assert r.append_message_result is not None
    return r.append_message_result.wrote_offset


def index_files(store: DefaultMessageStore) -> list[str]:
    return sorted(os.listdir(store.config.index_dir))


def slot_mates(prefix: str, count: int) -> list[str]:
    """``count`` keys whose ``prefix#key`` strings land in one slot with pairwise different hashes."""
    by_slot: dict[int, dict[int, str]] = {}
    for i in itertools.count():
        k = f"key{i}"
        h = index_key_hash(f"{prefix}#{k}")
        same = by_slot.setdefault(h % SLOTS, {})
        same.setdefault(h, k)
        if len(same) == count:
            return list(same.values())
    raise AssertionError("unreachable")


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Store timestamps under test control: put ``now[0] = t`` before a put."""
    now = [1_700_000_000_000]
    monkeypatch.setattr(commit_log_module, "_now_ms", lambda: now[0])
    yield now


# -- collisions --------------------------------------------------------------------------


def test_equal_hash_codes_are_both_indexed_and_the_store_checks_the_key(store: DefaultMessageStore) -> None:
    assert java_string_hash("T#Aa") == java_string_hash("T#BB")
    off_aa = put(store, b"aa", KEYS="Aa")
    off_bb = put(store, b"bb", KEYS="BB")
    wait_dispatched(store)
    # the index itself cannot tell them apart ...
    raw = store.index_service.query_offset("T", "Aa", 32, 0, 2**63 - 1).phy_offsets
    assert sorted(raw) == sorted([off_aa, off_bb])
    # ... the store reads each hit back and keeps only the real key
    assert [m.body for m in store.query_message("T", "Aa")] == [b"aa"]
    assert [m.body for m in store.query_message("T", "BB")] == [b"bb"]


def test_same_key_in_another_topic_is_not_returned(store: DefaultMessageStore) -> None:
    put(store, b"t", KEYS="k")
    put(store, b"u", topic="U", KEYS="k")
    wait_dispatched(store)
    assert [m.body for m in store.query_message("T", "k")] == [b"t"]
    assert [m.body for m in store.query_message("U", "k")] == [b"u"]


def test_slot_collisions_are_chained(store: DefaultMessageStore) -> None:
    keys = slot_mates("T", 6)
    offsets = {k: put(store, k.encode(), KEYS=k) for k in keys}
    for i in range(20):  # unrelated traffic between and after
        put(store, b"noise", KEYS=f"noise{i}")
    offsets[keys[0] + "-again"] = put(store, b"again", KEYS=keys[0])
    wait_dispatched(store)
    f = store.index_service.index_file_list[-1]
    assert f.index_count - 1 == 27
    assert f.hash_slot_count < f.index_count - 1  # some puts really landed in used slots
    for k in keys[1:]:
        assert [(m.body, m.commit_log_offset) for m in store.query_message("T", k)] == [(k.encode(), offsets[k])]
    got = store.query_message("T", keys[0])
    assert sorted(m.commit_log_offset for m in got) == sorted([offsets[keys[0]], offsets[keys[0] + "-again"]])


def test_index_file_chain_walk_in_one_slot(tmp_path: Path) -> None:
    f = IndexFile(str(tmp_path / "20240101000000000"), SLOTS, 256)
    keys = slot_mates("X", 4)
    for i in range(40):
        k = keys[i % 4]
        assert f.put_key(f"X#{k}", 1000 + i, 1_700_000_000_000)
    for j, k in enumerate(keys):
        expect = [1000 + i for i in range(39, -1, -1) if i % 4 == j]  # newest first
        assert f.select_phy_offset(f"X#{k}", 100, 0, 2**63 - 1) == expect
    assert f.select_phy_offset("X#absent", 100, 0, 2**63 - 1) == []
    f.close()


# -- time bounds -------------------------------------------------------------------------


def test_index_file_time_bounds_and_max_num(tmp_path: Path) -> None:
    t0 = 1_700_000_000_000
    f = IndexFile(str(tmp_path / "20240101000000000"), SLOTS, 256)
    for i in range(10):
        assert f.put_key("T#k", 100 * i, t0 + 5000 * i)  # one hit every 5 s
        assert f.put_key("T#other", 100 * i + 50, t0 + 5000 * i)
    assert (f.begin_timestamp, f.end_timestamp) == (t0, t0 + 45_000)
    assert (f.begin_phy_offset, f.end_phy_offset) == (0, 950)
    everything = f.select_phy_offset("T#k", 100, 0, 2**63 - 1)
    assert everything == [100 * i for i in range(9, -1, -1)]
    assert f.select_phy_offset("T#k", 100, t0 + 10_000, t0 + 20_000) == [400, 300, 200]
    assert f.select_phy_offset("T#k", 100, t0 + 10_001, t0 + 19_999) == [300]
    assert f.select_phy_offset("T#k", 100, t0 + 46_000, t0 + 99_000) == []
    assert f.select_phy_offset("T#k", 100, 0, t0 - 1) == []
    assert f.select_phy_offset("T#k", 3, 0, 2**63 - 1) == [900, 800, 700]
    assert f.select_phy_offset("T#k", 2, t0 + 10_000, t0 + 20_000) == [400, 300]
    assert f.is_time_matched(t0 + 1, t0 + 2)
    assert f.is_time_matched(t0 - 10, t0 + 99_000)
    assert not f.is_time_matched(t0 + 46_000, t0 + 99_000)
    f.close()


def test_query_message_with_time_bounds(store: DefaultMessageStore, fake_clock: list[int]) -> None:
    t0 = fake_clock[0]
    offsets = []
    for i in range(6):
        fake_clock[0] = t0 + 10_000 * i
        offsets.append(put(store, f"m{i}".encode(), KEYS="k"))
    wait_dispatched(store)

    def bodies(begin: int, end: int, max_num: int = 32) -> list[bytes]:
        return sorted(m.body for m in store.query_message("T", "k", max_num, begin, end))

    assert bodies(0, 2**63 - 1) == [f"m{i}".encode() for i in range(6)]
    assert bodies(t0 + 10_000, t0 + 30_000) == [b"m1", b"m2", b"m3"]
    assert bodies(t0 + 15_000, t0 + 25_000) == [b"m2"]
    assert bodies(t0 + 51_000, t0 + 90_000) == []
    assert bodies(0, t0 - 1) == []
    newest_two = store.query_message("T", "k", 2)
    assert [m.body for m in newest_two] == [b"m5", b"m4"]


# -- files, keys, transactions -----------------------------------------------------------


def test_full_index_file_rolls_and_queries_span_files(store: DefaultMessageStore) -> None:
    offsets = []
    for i in range(200):  # 3 keys a message: UNIQ_KEY, and two KEYS tokens
        offsets.append(put(store, f"{i}".encode(), KEYS=f"k{i} grp{i % 3}", UNIQ_KEY=f"u{i}"))
    wait_dispatched(store)
    files = store.index_service.index_file_list
    assert len(files) == 3  # 600 entries, 255 a file
    assert [f.index_count - 1 for f in files] == [255, 255, 90]
    assert len(index_files(store)) == 3
    assert all(name.isdigit() and len(name) == 17 for name in index_files(store))
    assert [f.end_phy_offset for f in files] == sorted(f.end_phy_offset for f in files)
    for i in (0, 84, 85, 86, 170, 199):
        assert [m.body for m in store.query_message("T", f"k{i}")] == [f"{i}".encode()]
        assert [m.body for m in store.query_message("T", f"u{i}")] == [f"{i}".encode()]
    grp0 = store.query_message("T", "grp0", 1000)
    assert sorted(int(m.body) for m in grp0) == list(range(0, 200, 3))
    assert len(store.query_message("T", "grp1", 10)) == 10
    assert store.query_message("T", "k200") == []


def test_keys_of_one_message_straddling_two_files(store: DefaultMessageStore) -> None:
    for i in range(200):  # 2 keys a message: message 127 has entry 255 in file 1 and entry 256 in file 2
        put(store, f"{i}".encode(), KEYS=f"k{i}", UNIQ_KEY=f"u{i}")
    wait_dispatched(store)
    assert len(store.index_service.index_file_list) == 2
    for i in (126, 127, 128):
        assert [m.body for m in store.query_message("T", f"u{i}")] == [f"{i}".encode()]
        assert [m.body for m in store.query_message("T", f"k{i}")] == [f"{i}".encode()]


def test_batched_and_one_by_one_indexing_write_the_same_files(tmp_path: Path, fake_clock: list[int]) -> None:
    def build(root: str, batched: bool) -> list[bytes]:
        with DefaultMessageStore(small_config(root)) as s:
            msgs = [
                MessageExtBrokerInner(
                    topic="T", body=f"{i}".encode(), properties={"KEYS": f"g{i % 7} h{i % 11}", "UNIQ_KEY": f"u{i}"}
                )
                for i in range(300)
            ]
            if batched:
                for j in range(0, 300, 60):
                    assert s.put_messages(msgs[j : j + 60]).is_ok()
            else:
                for m in msgs:
                    assert s.put_message(m).is_ok()
                    wait_dispatched(s)
            wait_dispatched(s)
            s.index_service.flush()
            out = []
            for name in sorted(os.listdir(s.config.index_dir)):
                with open(os.path.join(s.config.index_dir, name), "rb") as f:
                    out.append(f.read())
            assert len(out) == 4  # 900 entries
            assert sorted(int(m.body) for m in s.query_message("T", "g3", 1000)) == list(range(3, 300, 7))
            return out

    assert build(str(tmp_path / "batched"), True) == build(str(tmp_path / "single"), False)


def test_keys_are_split_on_spaces(store: DefaultMessageStore) -> None:
    put(store, b"multi", KEYS="alpha  beta gamma", UNIQ_KEY="UNIQ0001")
    wait_dispatched(store)
    for k in ("alpha", "beta", "gamma", "UNIQ0001"):
        assert [m.body for m in store.query_message("T", k)] == [b"multi"], k
    assert store.query_message("T", "alpha  beta gamma") == []
    assert store.query_message("T", "") == []


def test_rollback_records_are_not_indexed(store: DefaultMessageStore) -> None:
    put(store, b"rb", sys_flag=MessageSysFlag.TRANSACTION_ROLLBACK_TYPE, KEYS="rk", UNIQ_KEY="ru")
    put(store, b"pp", sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE, KEYS="pk")
    put(store, b"cc", sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE, KEYS="ck")
    wait_dispatched(store)
    assert store.index_service.query_offset("T", "rk", 32, 0, 2**63 - 1).phy_offsets == []
    assert store.query_message("T", "ru") == []
    assert [m.body for m in store.query_message("T", "pk")] == [b"pp"]
    assert [m.body for m in store.query_message("T", "ck")] == [b"cc"]


def test_index_disabled_builds_nothing(tmp_path: Path) -> None:
    with DefaultMessageStore(small_config(str(tmp_path / "s"), message_index_enable=False)) as s:
        put(s, b"x", KEYS="k")
        wait_dispatched(s)
        assert s.query_message("T", "k") == []
        assert s.index_service.index_file_list == []


def test_index_survives_a_clean_reopen(store_config: MessageStoreConfig) -> None:
    with DefaultMessageStore(store_config) as s:
        for i in range(100):
            put(s, f"{i}".encode(), KEYS=f"k{i}", UNIQ_KEY=f"u{i}")
        wait_dispatched(s)
    with DefaultMessageStore(store_config) as s:
        assert len(s.index_service.index_file_list) == 1
        for i in (0, 50, 99):
            assert [m.body for m in s.query_message("T", f"k{i}")] == [f"{i}".encode()]
        put(s, b"new", KEYS="k0")
        wait_dispatched(s)
        assert sorted(m.body for m in s.query_message("T", "k0")) == [b"0", b"new"]


# -- expiry ------------------------------------------------------------------------------


def delete_expired(svc: IndexService, min_offset: int, expect: int) -> int:
    """``delete_expired_file`` until ``expect`` files are gone (bounded).

    A file still referenced (the background flush of a just-filled file) is not deleted by
    one call; the periodic clean-up retries, as here.
    """
    gone = 0
    deadline = time.monotonic() + 10
    while True:
        gone += svc.delete_expired_file(min_offset)
        if gone >= expect or time.monotonic() > deadline:
            return gone
        time.sleep(0.001)  # polling for the reference to drop


def test_delete_expired_file_keeps_the_last_file(store: DefaultMessageStore) -> None:
    offsets = [put(store, f"{i}".encode(), KEYS=f"k{i} x{i}", UNIQ_KEY=f"u{i}") for i in range(200)]
    wait_dispatched(store)
    svc = store.index_service
    files = list(svc.index_file_list)
    assert len(files) == 3
    names = [f.file_name for f in files]

    assert svc.delete_expired_file(files[0].end_phy_offset) == 0  # end_phy_offset < min, strictly
    assert delete_expired(svc, files[0].end_phy_offset + 1, 1) == 1
    assert svc.index_file_list == files[1:]
    assert not os.path.exists(names[0])
    assert all(os.path.exists(n) for n in names[1:])
    assert store.query_message("T", "k0") == []
    assert [m.body for m in store.query_message("T", "k199")] == [b"199"]

    assert delete_expired(svc, offsets[-1] + 10**9, 1) == 1  # everything is old, the last file stays
    assert svc.delete_expired_file(offsets[-1] + 10**9) == 0
    assert svc.index_file_list == files[2:]
    assert os.path.exists(names[2])
    assert [m.body for m in store.query_message("T", "k199")] == [b"199"]
    put(store, b"more", KEYS="k-more")
    wait_dispatched(store)
    assert [m.body for m in store.query_message("T", "k-more")] == [b"more"]
