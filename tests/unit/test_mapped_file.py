"""MappedFile, MappedFileQueue and AllocateMappedFileService on their own."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pumice.store.allocate_mapped_file_service import AllocateMappedFileService
from pumice.store.mapped_file import MappedFile, offset_to_file_name
from pumice.store.mapped_file_queue import MappedFileQueue

SIZE = 4096


def _fill(mfq: MappedFileQueue, files: int) -> None:
    for i in range(files):
        mf = mfq.get_last_mapped_file_create(0)
        assert mf is not None
        assert mf.append_message(bytes([i + 1]) * SIZE)


def test_file_names_are_20_digit_offsets(tmp_path: Path) -> None:
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 3)
    assert sorted(os.listdir(tmp_path)) == [offset_to_file_name(i * SIZE) for i in range(3)]
    assert offset_to_file_name(1073741824) == "00000000001073741824"
    assert mfq.get_max_offset() == 3 * SIZE
    assert mfq.get_min_offset() == 0


def test_find_by_offset_uses_the_computed_index_and_falls_back_to_a_scan(tmp_path: Path) -> None:
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 4)
    assert mfq.find_mapped_file_by_offset(2 * SIZE + 5) is mfq.mapped_files[2]
    # drop file 1 from the list: the computed index now points at the wrong file for offsets in 2 and 3
    gone = mfq.mapped_files[1]
    mfq.delete_expired_file([gone])
    assert mfq.find_mapped_file_by_offset(3 * SIZE + 1) is mfq.mapped_files[2]
    assert mfq.find_mapped_file_by_offset(3 * SIZE + 1).file_from_offset == 3 * SIZE
    assert mfq.find_mapped_file_by_offset(SIZE + 1) is None  # the hole
    assert mfq.find_mapped_file_by_offset(10 * SIZE) is None
    assert mfq.find_mapped_file_by_offset(10 * SIZE, return_first_on_not_found=True) is mfq.mapped_files[0]


def test_find_by_time_returns_the_first_file_modified_at_or_after(tmp_path: Path) -> None:
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 3)
    for i, mf in enumerate(mfq.mapped_files):
        t = 1_700_000_000 + i * 100
        os.utime(mf.file_name, (t, t))
    assert mfq.get_mapped_file_by_time(1_700_000_050_000) is mfq.mapped_files[1]
    assert mfq.get_mapped_file_by_time(1_700_000_100_000) is mfq.mapped_files[1]
    assert mfq.get_mapped_file_by_time(0) is mfq.mapped_files[0]
    assert mfq.get_mapped_file_by_time(1_800_000_000_000) is mfq.mapped_files[2]  # none: the last


def test_a_last_file_of_the_wrong_size_with_data_fails_the_load(tmp_path: Path) -> None:
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 2)
    mfq.shutdown()
    with open(tmp_path / offset_to_file_name(2 * SIZE), "wb") as f:
        f.write(b"x" * 100)
    assert not MappedFileQueue(str(tmp_path), SIZE).load()  # "please check it manually"


def test_a_short_file_before_others_fails_the_load(tmp_path: Path) -> None:
    # loading up to it would drop the later files, and rewriting it would revive old bytes
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 3)
    mfq.shutdown()
    os.truncate(tmp_path / offset_to_file_name(SIZE), SIZE // 2)
    assert not MappedFileQueue(str(tmp_path), SIZE).load()


@pytest.mark.parametrize("length", [0, 100])
def test_an_empty_last_file_of_the_wrong_size_is_removed(tmp_path: Path, length: int) -> None:
    # a kill between creating a file and sizing it
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 2)
    mfq.shutdown()
    with open(tmp_path / offset_to_file_name(2 * SIZE), "wb") as f:
        f.write(bytes(length))
    again = MappedFileQueue(str(tmp_path), SIZE)
    assert again.load()
    assert [mf.file_from_offset for mf in again.mapped_files] == [0, SIZE]
    assert all(mf.wrote_position == SIZE for mf in again.mapped_files)
    assert not os.path.exists(tmp_path / offset_to_file_name(2 * SIZE))
    again.shutdown()


def test_truncate_dirty_files_trims_and_removes_and_zeroes(tmp_path: Path) -> None:
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 3)
    mfq.truncate_dirty_files(SIZE + 100)
    assert [mf.file_from_offset for mf in mfq.mapped_files] == [0, SIZE]
    assert mfq.mapped_files[1].wrote_position == 100
    assert bytes(mfq.mapped_files[1].mmap[100:SIZE]) == bytes(SIZE - 100)
    assert bytes(mfq.mapped_files[1].mmap[:100]) == b"\x02" * 100
    assert not os.path.exists(tmp_path / offset_to_file_name(2 * SIZE))


def test_selected_buffer_holds_a_reference_until_released(tmp_path: Path) -> None:
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), SIZE)
    mf.append_message(b"abcdef")
    sel = mf.select_mapped_buffer(1, 3)
    assert sel is not None and bytes(sel.buffer) == b"bcd" and sel.start_offset == 1
    assert mf.select_mapped_buffer(4, 3) is None  # past the write position
    assert not mf.destroy(60_000)  # a reader holds it: refused
    assert os.path.exists(mf.file_name)
    assert mf.select_mapped_buffer(0, 1) is None  # shut down: no new readers
    sel.release()
    assert mf.destroy(60_000)
    assert not os.path.exists(mf.file_name)


def test_destroy_forcibly_after_the_interval(tmp_path: Path) -> None:
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), SIZE)
    mf.append_message(b"abc")
    sel = mf.select_mapped_buffer(0, 3)
    assert sel is not None
    assert not mf.destroy(10_000)
    mf.first_shutdown_timestamp -= 20_000  # pretend the grace period is over
    assert mf.destroy(10_000)
    assert not os.path.exists(mf.file_name)
    sel.release()


def test_allocate_service_makes_the_next_file_ahead(tmp_path: Path) -> None:
    service = AllocateMappedFileService(preallocate=True, prefault=True)
    try:
        mfq = MappedFileQueue(str(tmp_path), SIZE, service)
        first = mfq.get_last_mapped_file_create(0)
        assert first is not None and first.file_from_offset == 0
        ahead = tmp_path / offset_to_file_name(SIZE)
        deadline = time.monotonic() + 5
        # the file appears, then gets its size: wait for both (bounded)
        while not (ahead.exists() and os.path.getsize(ahead) == SIZE) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert ahead.exists(), "the next file was not made ahead of need"
        assert os.path.getsize(ahead) == SIZE
        first.append_message(b"x" * SIZE)
        second = mfq.get_last_mapped_file_create(0)
        assert second is not None and second.file_from_offset == SIZE
        assert os.stat(ahead).st_ino == os.stat(second.file_name).st_ino
    finally:
        service.shutdown()
    # a file made ahead that nobody took is removed at shutdown
    assert not (tmp_path / offset_to_file_name(2 * SIZE)).exists()


def test_a_file_larger_than_configured_is_refused(tmp_path: Path) -> None:
    p = tmp_path / offset_to_file_name(0)
    p.write_bytes(b"x" * (SIZE + 1))
    with pytest.raises(ValueError, match="larger"):
        MappedFile(str(p), SIZE)


def test_expired_files_past_the_keep_offset_stay(tmp_path: Path) -> None:
    """Retention never deletes a file that dispatch has not finished reading."""
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 4)
    gone = mfq.delete_expired_file_by_time(0, 0, 1000, True, keep_from_offset=SIZE + 10)
    assert gone == 1  # file 0 ends at SIZE <= keep offset; file 1 holds it and stays
    assert [mf.file_from_offset for mf in mfq.mapped_files] == [SIZE, 2 * SIZE, 3 * SIZE]


def _truncate_in_file_1(mfq: MappedFileQueue) -> None:
    mfq.truncate_dirty_files(SIZE + 100)


def _delete_last(mfq: MappedFileQueue) -> None:
    mfq.delete_last_mapped_file()


@pytest.mark.parametrize("cut", [_truncate_in_file_1, _delete_last], ids=["truncate_dirty_files", "delete_last"])
def test_a_file_cut_off_while_a_reader_holds_it_is_not_reopened_with_its_old_bytes(
    tmp_path: Path, cut: Callable[[MappedFileQueue], None]
) -> None:
    # a pull still sending a view of file 2 when a truncation removes it: destroy cannot
    # delete a held file, and the file made next at offset 2 * SIZE must start empty
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    _fill(mfq, 3)  # file i holds bytes i + 1
    held = mfq.mapped_files[2]
    sbr = held.select_mapped_buffer(0, 16)
    assert sbr is not None
    try:
        cut(mfq)
        assert [mf.file_from_offset for mf in mfq.mapped_files] == [0, SIZE]
        last = mfq.mapped_files[-1]
        assert last.append_message(b"\x09" * (SIZE - last.wrote_position))
        new = mfq.get_last_mapped_file_create(0)
        assert new is not None and new is not held and new.file_from_offset == 2 * SIZE
        assert new.append_message(b"\x0a" * 100)
        assert bytes(new.mmap[100:]) == bytes(SIZE - 100)  # not the old file's 0x03 bytes
        assert bytes(sbr.buffer) == b"\x03" * 16  # the reader's map still has its bytes
    finally:
        sbr.release()
    assert held.is_cleanup_over()  # unmapped once the reader let go
    mfq.shutdown()
    again = MappedFileQueue(str(tmp_path), SIZE)
    assert again.load()
    assert [mf.file_from_offset for mf in again.mapped_files] == [0, SIZE, 2 * SIZE]
    assert bytes(again.mapped_files[2].mmap[100:]) == bytes(SIZE - 100)
    again.shutdown()


def test_a_destroyed_queue_leaves_no_held_file_for_the_next_queue_in_its_directory(tmp_path: Path) -> None:
    # a ConsumeQueue (and its extension) destroyed while a pull reads it, then made again
    mfq = MappedFileQueue(str(tmp_path / "q"), SIZE)
    _fill(mfq, 2)
    sbr = mfq.mapped_files[0].select_mapped_buffer(0, 16)
    assert sbr is not None
    try:
        mfq.destroy()
        again = MappedFileQueue(str(tmp_path / "q"), SIZE)
        assert again.load() and again.mapped_files == []
        mf = again.get_last_mapped_file_create(0)
        assert mf is not None and mf.append_message(b"\x0a" * 100)
        assert bytes(mf.mmap[100:]) == bytes(SIZE - 100)  # not the destroyed file's 0x01 bytes
        assert bytes(sbr.buffer) == b"\x01" * 16
        again.shutdown()
    finally:
        sbr.release()
