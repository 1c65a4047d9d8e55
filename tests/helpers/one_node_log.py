"""OneNodeLog: a one-node ``ReplicatedLog`` for DLedgerCommitLog's store-level tests, until
the real DLedgerServer (dl/raft) is merged.

It places entries as DLedger does (the 48-byte header from ``pumice.dledger.dledger_entry``,
``size + 8`` must fit in the file or a blank ends it) in ``<root>/dledger-<selfId>/data``, and
commits them at once (a group of one), or holds them until ``commit()`` when
``auto_commit=False``; ``refuse`` makes appends answer that code without placing anything,
``outcome`` completes the futures with that code instead of SUCCESS; ``change_role`` reports
a role change to the broker's handler. ``load`` walks the data files to their end and counts
everything found committed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from pumice.dledger.dledger_entry import (
    BLANK_SIZE,
    BODY_OFFSET,
    DLedgerEntry,
    decode_header,
    encode_blank,
    encode_entry,
)
from pumice.dledger.dledger_response_code import DLedgerResponseCode
from pumice.store.mapped_file_queue import MappedFileQueue


class OneNodeLog:
    def __init__(self, root: str, file_size: int, self_id: str = "n0", *, auto_commit: bool = True) -> None:
        self.self_id = self_id
        self.data_file_queue = MappedFileQueue(os.path.join(root, f"dledger-{self_id}", "data"), file_size)
        self.file_size = file_size
        self.auto_commit = auto_commit
        self.refuse: DLedgerResponseCode | None = None
        self.outcome = DLedgerResponseCode.SUCCESS
        self.leader = True
        self._lock = threading.Lock()
        self._ends: list[int] = []  # each entry's end, by index
        self._begin_index = 0
        self._committed_index = -1
        self._pending: list[tuple[int, Future[int]]] = []
        self.started = False
        self._role_handlers: list[Callable[[int, str], None]] = []

    # -- ReplicatedLog -----------------------------------------------------------------------

    @property
    def committed_pos(self) -> int:
        i = self._committed_index - self._begin_index
        return self._ends[i] if i >= 0 else 0

    @property
    def committed_index(self) -> int:
        return self._committed_index

    @property
    def ledger_begin_index(self) -> int:
        return self._begin_index

    @property
    def ledger_end_index(self) -> int:
        return self._begin_index + len(self._ends) - 1

    def is_leader(self) -> bool:
        return self.leader

    def status(self) -> dict[str, Any]:
        return {"group": "g", "selfId": self.self_id, "role": "LEADER" if self.leader else "FOLLOWER", "term": 0,
                "leaderId": self.self_id if self.leader else None, "ledgerBeginIndex": self._begin_index,
                "ledgerEndIndex": self.ledger_end_index, "committedIndex": self._committed_index,
                "peers": {self.self_id: "127.0.0.1:0"}}  # fmt: skip

    def append_as_leader(
        self, bodies: Sequence[bytearray], hook: Callable[[DLedgerEntry, bytearray], None]
    ) -> tuple[list[DLedgerEntry], Future[int]]:
        fut: Future[int] = Future()
        if self.refuse is not None or not self.leader:
            fut.set_result(self.refuse or DLedgerResponseCode.NOT_LEADER)
            return [], fut
        placed = []
        with self._lock:
            for body in bodies:
                entry = DLedgerEntry(body=b"", index=self.ledger_end_index + 1, term=1)
                size = BODY_OFFSET + len(body)
                mfq = self.data_file_queue
                mf = mfq.get_last_mapped_file_create(0)
                assert mf is not None
                if mf.wrote_position + size + BLANK_SIZE > self.file_size:
                    mf.close_with_blank(mf.wrote_position, encode_blank(self.file_size - mf.wrote_position))
                    mf = mfq.get_last_mapped_file_create(0)
                    assert mf is not None
                entry.pos = mf.file_from_offset + mf.wrote_position
                hook(entry, body)
                entry.body = bytes(body)
                mf.append_message(encode_entry(entry))
                self._ends.append(entry.pos + entry.size)
                placed.append(entry)
            last = placed[-1].index
            if self.auto_commit:
                self._committed_index = last
                fut.set_result(self.outcome)
            else:
                self._pending.append((last, fut))
        return placed, fut

    def load(self) -> bool:
        if not self.data_file_queue.load():
            return False
        for mf in self.data_file_queue.mapped_files:
            pos = 0
            while pos + BODY_OFFSET <= self.file_size:
                magic, size, index, *_ = decode_header(mf.mmap, pos)
                if magic == -1 or size == 0:
                    break
                if not self._ends:
                    self._begin_index = index
                self._ends.append(mf.file_from_offset + pos + size)
                pos += size
            mf.set_positions(self.file_size if magic == -1 else pos)
        self._committed_index = self.ledger_end_index
        return True

    def start_data_at(self, offset: int) -> None:
        assert not self.data_file_queue.mapped_files
        assert self.data_file_queue.get_last_mapped_file_create(offset) is not None

    def start(self) -> None:
        self.started = True

    def shutdown(self) -> None:
        self.started = False

    def close(self) -> None:
        self.data_file_queue.flush(0)
        self.data_file_queue.shutdown()

    def add_role_change_handler(self, handler: Callable[[int, str], None]) -> None:
        self._role_handlers.append(handler)

    # -- the test's controls -----------------------------------------------------------------

    def change_role(self, term: int, role: str) -> None:
        """Report a role change to the handlers, from a thread of the log's own (as DLedger)."""
        self.leader = role == "LEADER"
        t = threading.Thread(target=lambda: [h(term, role) for h in self._role_handlers])
        t.start()
        t.join()

    def commit(self) -> None:
        """Commit everything appended (and complete its futures with ``outcome``)."""
        with self._lock:
            self._committed_index = self.ledger_end_index
            pending, self._pending = self._pending, []
        for _, fut in pending:
            fut.set_result(self.outcome)

    def fail_pending(self, code: DLedgerResponseCode) -> None:
        """Complete the pending appends with ``code``, committing nothing (a lost quorum)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for _, fut in pending:
            fut.set_result(code)
