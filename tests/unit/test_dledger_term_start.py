"""A leader whose log ends in entries of an earlier term, not committed, appends a term-start
record (docs/DLEDGER.md, "Beyond DLedger"): Raft's rule commits those entries only with one of
the current term, and the broker's role change waits for everything to be committed, so without
it the new leader would never become a master. Three DLedgerServers on loopback ports with file
stores; n0 and n1 hold three entries of term 1 that nobody committed, all three at term 2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.common.message_decoder import decode_message
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import BODY_OFFSET, DLedgerEntry
from pumice.dledger.dledger_mmap_file_store import DLedgerMmapFileStore
from pumice.dledger.dledger_server import DLedgerServer
from pumice.dledger.term_start_record import TERM_START_TOPIC, is_term_start, term_start_body
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually

BODIES = [f"m{i}".encode().ljust(64, b".") for i in range(3)]


def _configs(tmp_path: Path) -> list[DLedgerConfig]:
    ports = [free_port() for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    return [
        DLedgerConfig(group="g", self_id=f"n{i}", peers=peers, store_base_dir=str(tmp_path),
                      mapped_file_size_for_entry_data=1 << 20, mapped_file_size_for_entry_index=32 * 1024)
        for i in range(3)
    ]  # fmt: skip


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[DLedgerServer]]:
    configs = _configs(tmp_path)
    for c in configs:
        Path(c.default_path).mkdir(parents=True)
        # an election of term 2 came to nothing: whoever wins now wins a term after the entries'
        Path(c.term_path).write_text("voteLeader=\ncurrTerm=2\n")
    for c in configs[:2]:  # the term-1 leader placed these on n0 and n1, then died before a commit
        store = DLedgerMmapFileStore(c)
        store.load_and_recover()
        store.append_as_leader([DLedgerEntry(body=b) for b in BODIES], 1, None)
        store.shutdown()
    out: list[DLedgerServer] = []
    stores: list[DLedgerMmapFileStore] = []
    try:
        for c in configs:
            store = DLedgerMmapFileStore(c)
            store.load_and_recover()
            store.start()
            stores.append(store)
            out.append(DLedgerServer(c, store, host="127.0.0.1"))
        for s in out:
            s.start()
        yield out
    finally:
        for s in out:
            s.shutdown()
        for st in stores:
            st.shutdown()


def test_a_new_leader_commits_earlier_terms_through_a_term_start_record(servers: list[DLedgerServer]) -> None:
    leader = eventually(lambda: next((s for s in servers if s.is_leader()), None), 20, "a leader")
    assert leader.config.self_id in ("n0", "n1")  # n2's empty log loses every vote
    assert leader.term >= 2
    # everything of term 1 commits, with the record of the new term after it; no client append
    eventually(lambda: leader.store.committed_index == 3, 15, "term 1's entries committed")
    record = leader.store.get(3)
    assert record.term == leader.term and is_term_start(record.body)
    msg = decode_message(record.body)
    assert msg.topic == TERM_START_TOPIC
    assert msg.sys_flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    assert msg.commit_log_offset == record.pos + BODY_OFFSET and msg.queue_offset == 0
    assert int.from_bytes(msg.body, "big") == leader.term
    assert [leader.store.get(i).body for i in range(3)] == BODIES
    eventually(lambda: all(s.store.committed_index == 3 for s in servers), 15, "followers learn the commit")


def test_a_term_start_record_is_a_plain_rollback_record() -> None:
    body = term_start_body(7, "10.1.2.3:40911", now_ms=1_700_000_000_000)
    msg = decode_message(body)
    assert (msg.topic, msg.body, msg.queue_id, msg.queue_offset) == (TERM_START_TOPIC, (7).to_bytes(8, "big"), 0, 0)
    assert msg.store_timestamp == msg.born_timestamp == 1_700_000_000_000
    assert msg.store_host == (bytes([10, 1, 2, 3]), 40911) and msg.properties == {}
    assert is_term_start(body) and not is_term_start(b"not a record") and not is_term_start(BODIES[0])
