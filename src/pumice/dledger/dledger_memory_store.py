"""DLedgerMemoryStore: a DLedger log held in memory (DLedger's ``storeType=memory``), with the
interface of DLedgerMmapFileStore (docs/DLEDGER.md) so that the server, the elector and the
pusher run on either; for tests and ``python -m pumice.dledger --store-type memory``.

Unlike dledger 0.3.1.2's memory store (which commits every append at once and cannot truncate),
it keeps the committed index the leader sends and truncates as the file store does. Entries are
placed end to end (``pos`` = the previous entry's end; no file ends, so positions match the
file store's only within its first data file). Nothing survives a restart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pumice.dledger.dledger_entry import DLedgerEntry
from pumice.dledger.dledger_response_code import DLedgerError, DLedgerResponseCode

AppendHook = Callable[[DLedgerEntry, bytearray], None]


class DLedgerMemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[DLedgerEntry] = []
        self.ledger_begin_index = -1
        self.ledger_end_index = -1
        self.ledger_end_term = -1
        self.committed_index = -1
        self.committed_pos = -1

    def load_and_recover(self) -> None:
        pass

    def start(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def _end_pos(self) -> int:
        return self._entries[-1].pos + self._entries[-1].size if self._entries else 0

    def _set_end(self) -> None:
        last = self._entries[-1] if self._entries else None
        self.ledger_begin_index = 0 if last else -1
        self.ledger_end_index = last.index if last else -1
        self.ledger_end_term = last.term if last else -1

    def append_as_leader(
        self, entries: list[DLedgerEntry], term: int, hook: AppendHook | None = None
    ) -> list[DLedgerEntry]:
        with self._lock:
            for entry in entries:
                entry.index = self.ledger_end_index + 1
                entry.term = term
                entry.pos = self._end_pos()
                entry.compute_size_in_bytes()
                if hook is not None:
                    body = bytearray(entry.body)
                    hook(entry, body)
                    entry.body = bytes(body)
                self._entries.append(entry)
                self._set_end()
            return entries

    def append_as_follower(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> DLedgerEntry:
        with self._lock:
            if entry.index != self.ledger_end_index + 1:
                raise DLedgerError(
                    DLedgerResponseCode.INCONSISTENT_INDEX, f"{entry.index} != {self.ledger_end_index + 1}"
                )
            if entry.pos != self._end_pos():
                raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"pos {entry.pos} != {self._end_pos()}")
            self._entries.append(_copy(entry))
            self._set_end()
            return entry

    def truncate(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> int:
        with self._lock:
            del self._entries[max(0, entry.index) :]
            if entry.pos != self._end_pos():
                raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"pos {entry.pos} != {self._end_pos()}")
            self._entries.append(_copy(entry))
            self._set_end()
            self.committed_index = min(self.committed_index, self.ledger_end_index)
            return self.ledger_end_index

    def get(self, index: int) -> DLedgerEntry:
        with self._lock:
            if index < 0 or index > self.ledger_end_index:
                raise DLedgerError(
                    DLedgerResponseCode.INDEX_OUT_OF_RANGE, f"{index} not in [0, {self.ledger_end_index}]"
                )
            return _copy(self._entries[index])

    def update_committed_index(self, term: int, index: int) -> None:
        with self._lock:
            index = min(index, self.ledger_end_index)
            if index <= self.committed_index:
                return
            self.committed_index = index
            last = self._entries[index]
            self.committed_pos = last.pos + last.size


def _copy(entry: DLedgerEntry) -> DLedgerEntry:
    return DLedgerEntry(entry.body, entry.index, entry.term, entry.pos, entry.magic, entry.channel, entry.chain_crc,
                        entry.body_crc, entry.size)  # fmt: skip
