"""MemberState: this node's place in its DLedger group (dledger 0.3.1.2, ``MemberState.java``):
role, term, the vote given in that term, the leader, the peers; and the ``currterm`` file.

``<storeBaseDir>/dledger-<selfId>/currterm``, java.util.Properties lines as DLedger writes them
(its Hashtable's order):

==========================  =============================================================
line                        meaning
==========================  =============================================================
``voteLeader=<id>``         the candidate voted for in the current term; empty for none
``currTerm=<n>``            the current term
==========================  =============================================================

Beyond DLedger: the file is written to ``currterm.tmp``, fsynced, the old one kept as
``currterm.bak`` (as DLedger), renamed and the directory fsynced (``atomic_write``) BEFORE the
node acts on the new term or vote: a node that voted and lost power never votes twice in one
term. DLedger's own write has no fsync. The bytes are the same.
"""

from __future__ import annotations

import logging
import os
from enum import Enum

from pumice.common.atomic_file import atomic_write
from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_response_code import DLedgerError, DLedgerResponseCode

log = logging.getLogger(__name__)

TERM_PERSIST_FILE = "currterm"
TERM_PERSIST_KEY_TERM = "currTerm"
TERM_PERSIST_KEY_VOTE_FOR = "voteLeader"


class Role(Enum):
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"


def encode_term_file(term: int, vote_for: str | None) -> bytes:
    return f"{TERM_PERSIST_KEY_VOTE_FOR}={vote_for or ''}\n{TERM_PERSIST_KEY_TERM}={term}\n".encode()


def decode_term_file(text: str) -> tuple[int, str | None]:
    """(term, vote) from a ``currterm`` file's text; term 0 and no vote when absent. Lines that
    are not ``key=value`` are skipped (as Properties does); a term that is not a number raises
    ValueError (DLedger logs it and starts at 0: Pumice refuses to guess a term)."""
    term, vote = 0, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == TERM_PERSIST_KEY_TERM:
            term = int(value)
        elif key == TERM_PERSIST_KEY_VOTE_FOR:
            vote = value or None
    return term, vote


class MemberState:
    def __init__(self, config: DLedgerConfig) -> None:
        self.config = config
        self.group = config.group
        self.self_id = config.self_id
        self.peer_map = config.peer_map()
        self.role = Role.CANDIDATE
        self.leader_id: str | None = None
        self.curr_term = 0
        self.curr_vote_for: str | None = None
        self.known_max_term_in_group = -1
        self.transferee: str | None = None
        self.term_to_take_leadership = -1
        self.peers_live: dict[str, bool] = {}
        self.term_path = config.term_path
        self._load_term()

    # -- the currterm file --------------------------------------------------------------

    def _load_term(self) -> None:
        try:
            with open(self.term_path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return
        try:
            self.curr_term, self.curr_vote_for = decode_term_file(text)
        except ValueError as e:
            raise DLedgerError(DLedgerResponseCode.DISK_ERROR, f"{self.term_path}: {e}") from None
        log.info("[%s] loaded term %d, vote %s from %s", self.self_id, self.curr_term, self.curr_vote_for,
                 self.term_path)  # fmt: skip

    def _persist_term(self) -> None:
        os.makedirs(os.path.dirname(self.term_path), exist_ok=True)
        atomic_write(self.term_path, encode_term_file(self.curr_term, self.curr_vote_for))

    # -- term and vote --------------------------------------------------------------------

    def set_curr_vote_for(self, candidate: str | None) -> None:
        """Records the vote on disk before it is given (the caller answers ACCEPT after)."""
        previous = self.curr_vote_for
        self.curr_vote_for = candidate
        try:
            self._persist_term()
        except OSError:
            self.curr_vote_for = previous
            raise
        log.info("[%s] term %d: voted for %s", self.self_id, self.curr_term, candidate)

    def next_term(self) -> int:
        """A candidate's next term: the largest known in the group, else one more; the vote
        cleared; on disk before it is returned."""
        if self.role is not Role.CANDIDATE:
            raise DLedgerError(DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"{self.role.name} != CANDIDATE")
        previous = (self.curr_term, self.curr_vote_for)
        self.curr_term = max(self.known_max_term_in_group, self.curr_term + 1)
        self.curr_vote_for = None
        try:
            self._persist_term()
        except OSError:
            self.curr_term, self.curr_vote_for = previous
            raise
        log.info("[%s] term %d -> %d", self.self_id, previous[0], self.curr_term)
        return self.curr_term

    # -- roles ------------------------------------------------------------------------------

    def change_to_leader(self, term: int) -> None:
        if term != self.curr_term:
            raise DLedgerError(DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"{self.curr_term} != {term}")
        self.role = Role.LEADER
        self.leader_id = self.self_id
        self.peers_live.clear()

    def change_to_follower(self, term: int, leader_id: str) -> None:
        if term != self.curr_term:
            raise DLedgerError(DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"{self.curr_term} != {term}")
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.transferee = None

    def change_to_candidate(self, term: int) -> None:
        if term < self.curr_term:
            raise DLedgerError(DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"should {term} >= {self.curr_term}")
        self.known_max_term_in_group = max(self.known_max_term_in_group, term)
        self.role = Role.CANDIDATE
        self.leader_id = None
        self.transferee = None

    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def is_follower(self) -> bool:
        return self.role is Role.FOLLOWER

    def is_candidate(self) -> bool:
        return self.role is Role.CANDIDATE

    def is_peer_member(self, node_id: str | None) -> bool:
        return node_id is not None and node_id in self.peer_map

    def peer_size(self) -> int:
        return len(self.peer_map)

    def is_quorum(self, num: int) -> bool:
        return num >= len(self.peer_map) // 2 + 1

    @property
    def self_address(self) -> str:
        return self.peer_map[self.self_id]

    @property
    def leader_address(self) -> str | None:
        return self.peer_map.get(self.leader_id) if self.leader_id else None
