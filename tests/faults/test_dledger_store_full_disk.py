"""The DLedger store on a full disk (issue 32): appends are refused with DISK_FULL and a
remark, never a SIGBUS, nothing half-written is left, and appends go on once space is back.

On a 256 MiB ext4 image (``conftest.loop_disk``): the store's files are small (1 MiB data
files, 32 KiB index files); 100 entries are appended, the disk is filled to the last block
(``squeeze``) and entries are appended as leader until one is refused (bounded); a
truncation still works; every entry acknowledged before is read back, the store reopens on
the full disk with all of them, the clean-space round marks the disk full (DLedger's ratio
rule), then space is freed and appends go on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_mmap_file_store import DLedgerMmapFileStore
from pumice.dledger.dledger_response_code import DLedgerError, DLedgerResponseCode
from tests.helpers.faults import LoopDisk

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

BODY = 3000
MAX_APPENDS = 20_000  # 60 MB at most: far past what a squeezed disk holds


def open_store(root: Path) -> DLedgerMmapFileStore:
    cfg = DLedgerConfig(
        group="g",
        self_id="n0",
        peers="n0-127.0.0.1:40911",
        store_base_dir=str(root),
        mapped_file_size_for_entry_data=1 << 20,
        mapped_file_size_for_entry_index=32 * 1024,
    )
    store = DLedgerMmapFileStore(cfg)
    store.load_and_recover()
    return store


def body_of(i: int) -> bytes:
    return i.to_bytes(4, "big") * (BODY // 4)


def append_until_refused(store: DLedgerMmapFileStore, start: int) -> tuple[int, DLedgerError | None]:
    i = start
    for i in range(start, start + MAX_APPENDS):
        try:
            (e,) = store.append_as_leader([DLedgerEntry(body=body_of(i))], 1)
        except DLedgerError as err:
            return i, err
        assert e.index == i
    return i + 1, None


def test_full_disk_refuses_appends_with_disk_full_and_recovers(loop_disk: LoopDisk) -> None:
    root = loop_disk.mount / "store"
    opened: list[DLedgerMmapFileStore] = []
    try:
        _fill_refuse_and_resume(loop_disk, root, opened)
    finally:
        for store in opened:  # unmapped, or the image cannot be unmounted
            store.shutdown()


def _fill_refuse_and_resume(loop_disk: LoopDisk, root: Path, opened: list[DLedgerMmapFileStore]) -> None:
    store = open_store(root)
    opened.append(store)
    for i in range(100):
        store.append_as_leader([DLedgerEntry(body=body_of(i))], 1)
    loop_disk.squeeze()
    n, err = append_until_refused(store, 100)
    assert err is not None, f"{n - 100} appends on a full disk ({loop_disk.describe()})"
    assert err.code == DLedgerResponseCode.DISK_FULL and str(err), err
    assert store.ledger_end_index == n - 1
    # a truncation needs no space (a follower told to cut on a full disk can)
    assert store.truncate(store.get(n - 10), 1, "n0") == n - 10
    n -= 9
    for i in range(0, n, 97):
        assert store.get(i).body == body_of(i)
    opened.pop().shutdown()  # flushes and writes the checkpoint on the full disk

    store = open_store(root)
    opened.append(store)  # reopen on the full disk: every entry is there, none half-written
    assert store.ledger_end_index == n - 1
    assert store.get(n - 1).body == body_of(n - 1)
    store.delete_expired_files(hour=-1)  # the clean-space round: the disk is over the full ratio
    assert store.is_disk_full
    with pytest.raises(DLedgerError) as ei:
        store.append_as_leader([DLedgerEntry(body=b"x")], 1)
    assert ei.value.code == DLedgerResponseCode.DISK_FULL and "used" in str(ei.value)

    loop_disk.release()
    store.delete_expired_files(hour=-1)
    assert not store.is_disk_full
    m, err = append_until_refused(store, n)
    assert m > n + 100, f"only {m - n} appends after space came back: {err}"
