"""The HA auth frame and its checks (``ha_auth``), and setting a diverged CommitLog tail aside
(``ha_divergence``) on a store's real files."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pumice.acl.remote_address_strategy import remote_address_strategy
from pumice.store import ha_divergence
from pumice.store.ha_auth import MAGIC, HAAccount, HAAuthenticator, HAAuthError, encode_auth_frame, read_auth_frame
from pumice.store.message_store_config import MessageStoreConfig
from tests.helpers.store import opened, small_config
from tests.unit.test_ha import msg

NOW = 1_700_000_000_000
ACCOUNTS = {"admin": HAAccount("adminSecret", True), "user": HAAccount("userSecret", False)}


def _decode(frame: bytes):  # type: ignore[no-untyped-def]
    assert frame[:8] == MAGIC and len(frame) % 8 == 0
    stream = io.BytesIO(frame[8:])
    got = read_auth_frame(stream.read)
    assert stream.read() == b""  # the padding was read: the next 8 bytes are a report
    return got


def test_a_signed_frame_is_admitted_and_anything_else_refused_with_the_reason() -> None:
    auth = HAAuthenticator(ACCOUNTS.get, [remote_address_strategy("10.1.*.*")], allow_unauthenticated=False)
    auth.check_frame(_decode(encode_auth_frame("admin", "adminSecret", NOW)), NOW + 1000)
    cases = {
        "signature check failed": encode_auth_frame("admin", "guessed", NOW),
        "no ACL account 'nobody'": encode_auth_frame("nobody", "x", NOW),
        "is not admin": encode_auth_frame("user", "userSecret", NOW),
        "more than 5 min": encode_auth_frame("admin", "adminSecret", NOW - 6 * 60 * 1000),
    }
    for reason, frame in cases.items():
        with pytest.raises(HAAuthError, match=reason):
            auth.check_frame(_decode(frame), NOW)
    auth.check_unauthenticated("10.1.2.3")
    with pytest.raises(HAAuthError, match="haWhiteRemoteAddresses"):
        auth.check_unauthenticated("10.2.0.1")
    HAAuthenticator(ACCOUNTS.get, [], allow_unauthenticated=True).check_unauthenticated("10.2.0.1")


def test_a_malformed_frame_is_an_auth_error() -> None:
    with pytest.raises(HAAuthError, match="accessKey length 0"):
        read_auth_frame(io.BytesIO(b"\0\0" + b"\0" * 16).read)


def test_the_tail_is_cut_at_the_last_record_boundary_and_kept(tmp_path: Path) -> None:
    root = tmp_path / "s"
    cfg = small_config(str(root))
    with opened(cfg) as store:
        for i in range(6):
            store.put_message(msg(i))
        ends: list[int] = []
        for _ in range(6):
            r = store.look_message_by_offset(0 if not ends else ends[-1])
            assert r is not None
            ends.append((ends[-1] if ends else 0) + r.store_size)
        end = store.get_max_phy_offset()
    data = (root / "commitlog" / f"{0:020d}").read_bytes()
    # agreed below a point inside the 5th record: cut at its start; the check starts at the 4th
    dest, cut, verify_from = ha_divergence.set_aside_tail(
        cfg.commit_log_dir, cfg.mapped_file_size_commit_log, str(root), ends[3] + 7, end
    )
    assert (cut, verify_from) == (ends[3], ends[2])
    assert Path(dest, f"{cut:020d}").read_bytes() == data[cut:end]
    assert (root / "commitlog" / f"{0:020d}").read_bytes()[cut:end] == b"\0" * (end - cut)
    with opened(cfg) as store:  # recovery ends the log at the cut, readable
        assert store.get_max_phy_offset() == cut
        assert store.look_message_by_offset(ends[2]) is not None


def test_ha_access_key_fits_the_auth_frame() -> None:
    with pytest.raises(ValueError, match="longer than 255"):
        MessageStoreConfig(ha_access_key="a" * 256).validate()
    MessageStoreConfig(ha_access_key="admin").validate()
