"""MemberState: DLedger's ``currterm`` bytes, written (tmp, fsync, rename) before a term or a
vote is acted on, and read back after a restart."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_response_code import DLedgerError
from pumice.dledger.member_state import MemberState, Role, decode_term_file


def _config(tmp_path: Path) -> DLedgerConfig:
    return DLedgerConfig(group="g", self_id="n1", peers="n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3",
                         store_base_dir=str(tmp_path))  # fmt: skip


def test_term_and_vote_files_as_dledger_writes_them(tmp_path: Path) -> None:
    ms = MemberState(_config(tmp_path))
    assert (ms.curr_term, ms.curr_vote_for, ms.role) == (0, None, Role.CANDIDATE)
    assert ms.next_term() == 1
    path = tmp_path / "dledger-n1" / "currterm"
    assert path.read_bytes() == b"voteLeader=\ncurrTerm=1\n"
    ms.set_curr_vote_for("n0")
    assert path.read_bytes() == b"voteLeader=n0\ncurrTerm=1\n"
    again = MemberState(_config(tmp_path))
    assert (again.curr_term, again.curr_vote_for) == (1, "n0")
    assert not (tmp_path / "dledger-n1" / "currterm.tmp").exists()


def test_a_known_larger_term_is_adopted(tmp_path: Path) -> None:
    ms = MemberState(_config(tmp_path))
    ms.change_to_candidate(7)
    assert ms.next_term() == 7 and ms.next_term() == 8


def test_vote_is_fsynced_before_it_counts(tmp_path: Path) -> None:
    ms = MemberState(_config(tmp_path))
    ms.next_term()
    synced: list[int] = []
    real_fsync = os.fsync
    with mock.patch("os.fsync", side_effect=lambda fd: synced.append(fd) or real_fsync(fd)):
        ms.set_curr_vote_for("n2")
    assert len(synced) >= 2  # the file and its directory


def test_a_failed_write_keeps_the_old_term_and_vote(tmp_path: Path) -> None:
    ms = MemberState(_config(tmp_path))
    ms.next_term()
    with mock.patch("pumice.dledger.member_state.atomic_write", side_effect=OSError(28, "No space left")):
        with pytest.raises(OSError):
            ms.set_curr_vote_for("n0")
        with pytest.raises(OSError):
            ms.next_term()
    assert (ms.curr_term, ms.curr_vote_for) == (1, None)


def test_reading_java_properties_text() -> None:
    assert decode_term_file("#comment\ncurrTerm=4\nvoteLeader=n0\n") == (4, "n0")
    assert decode_term_file("currTerm = 3\r\nvoteLeader=\r\n") == (3, None)
    with pytest.raises(ValueError):
        decode_term_file("currTerm=x")


def test_a_corrupt_term_file_is_a_clear_error(tmp_path: Path) -> None:
    d = tmp_path / "dledger-n1"
    d.mkdir()
    (d / "currterm").write_text("currTerm=oops\n")
    with pytest.raises(DLedgerError, match="currterm"):
        MemberState(_config(tmp_path))


def test_quorum_and_roles(tmp_path: Path) -> None:
    ms = MemberState(_config(tmp_path))
    assert not ms.is_quorum(1) and ms.is_quorum(2)
    ms.next_term()
    ms.change_to_follower(1, "n0")
    assert ms.is_follower() and ms.leader_id == "n0" and ms.leader_address == "127.0.0.1:1"
    with pytest.raises(DLedgerError):
        ms.change_to_leader(5)
