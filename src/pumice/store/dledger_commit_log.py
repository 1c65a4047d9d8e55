"""DLedgerCommitLog: the CommitLog in DLedger mode (``enableDLegerCommitLog=true``), RocketMQ
4.9's ``store/dledger/DLedgerCommitLog``.

Every message is one entry of a replicated DLedger log; the entry's body is the message's
CommitLog record, byte for byte as ``CommitLog`` encodes it. The data files are the
replicated log's (``<root>/dledger-<selfId>/data``), named by start offset, of
``mappedFileSizeCommitLog`` bytes:

=========  ======  ===========================================================================
offset     size    what
=========  ======  ===========================================================================
pos        48      the DLedger entry header (magic 1, size, index, term, pos, ..., body length)
pos + 48   n       the CommitLog record; its PHYSICALOFFSET field holds ``pos + 48``
...        8+      a DLedger blank ends a file: int -1, int the length of the rest
=========  ======  ===========================================================================

So a message's physical offset (ConsumeQueue, IndexFile, msgId) is its entry's pos + 48, and
a read at that offset finds the record in the data files as in a plain CommitLog. The leader
encodes the records under the put lock, takes their queue offsets from ``topic_queue_table``
and appends one entry per message; a hook patches ``pos + 48`` in before the bytes are
written. The put is acknowledged when the log's future says how the quorum went:

=================================================================  =====================
DLedger outcome                                                    PutMessageStatus
=================================================================  =====================
SUCCESS                                                            PUT_OK
NOT_LEADER, INCONSISTENT_LEADER, LEADER_NOT_READY, DISK_FULL       SERVICE_NOT_AVAILABLE
WAIT_QUORUM_ACK_TIMEOUT, LEADER_PENDING_FULL; an append refused     OS_PAGECACHE_BUSY
before it is placed (4.9's ``pos == -1``)
anything else                                                      UNKNOWN_ERROR
=================================================================  =====================

An existing plain CommitLog (``storePathCommitLog``) is served first, as 4.9 migrates: it is
recovered and closed with a blank, the DLedger data begin at the end of its last file
(``divided_offset``), and reads below that offset go to it; the store's clean-up deletes its
files, DLedger expires its own.

Only committed entries are visible: ``get_max_offset`` is the committed position, and
``get_data`` stops there, so dispatch builds ConsumeQueues from committed entries only, on
the leader and on followers alike. There is no HA service (the log replicates itself).

The store never imports ``pumice.dledger``: it talks to a ``ReplicatedLog`` (the protocol
below), which ``DLedgerServer`` satisfies; the broker controller builds it.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

import orjson

from pumice.common.message import HostAddress
from pumice.common.message_decoder import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET_OFFSET,
    QUEUE_OFFSET_OFFSET,
    STORE_TIMESTAMP_OFFSETS,
)
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.store.commit_log import CommitLog
from pumice.store.dispatch_request import DispatchRequest
from pumice.store.mapped_file import MappedFile, SelectMappedBufferResult
from pumice.store.mapped_file_queue import MappedFileQueue
from pumice.store.message_check import END, CheckResult
from pumice.store.message_store_config import MessageStoreConfig
from pumice.store.put_message_result import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)
from pumice.store.store_checkpoint import StoreCheckpoint

log = logging.getLogger(__name__)

BODY_OFFSET = 48  # DLedgerEntry.BODY_OFFSET: a message's offset is its entry's pos + 48
DLEDGER_BLANK_MAGIC_CODE = -1  # MmapFileList.BLANK_MAGIC_CODE

# DLedgerResponseCode values the put maps (pumice.dledger.dledger_response_code holds them all;
# tests/unit/test_dledger_commit_log.py checks these against it)
SUCCESS = 200
NOT_LEADER = 404
INCONSISTENT_LEADER = 409
DISK_FULL = 415
WAIT_QUORUM_ACK_TIMEOUT = 502
LEADER_PENDING_FULL = 503
LEADER_NOT_READY = 505

_UNAVAILABLE = frozenset({NOT_LEADER, INCONSISTENT_LEADER, LEADER_NOT_READY, DISK_FULL})
_BUSY = frozenset({WAIT_QUORUM_ACK_TIMEOUT, LEADER_PENDING_FULL})
_INTS = struct.Struct(">ii")
_BLANK = struct.Struct(">iI")  # a plain CommitLog's blank: the rest of the file, BLANK_MAGIC_CODE
_LONG = struct.Struct(">q")
_OFFSETS = struct.Struct(">qq")
_TRAN_MASK = MessageSysFlag.TRANSACTION_MASK
_NO_OFFSET_TYPES = (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)
# how long a blocking put (wait_flush=True) waits for the quorum beyond DLedger's own
# maxWaitAckTimeMs (2.5 s), which completes the future with WAIT_QUORUM_ACK_TIMEOUT itself
_QUORUM_WAIT_S = 10.0


class AppendedEntry(Protocol):
    """What the store reads of an entry the log placed (``DLedgerEntry`` has these)."""

    index: int
    pos: int
    size: int


class ReplicatedLog(Protocol):
    """What DLedgerCommitLog needs of DLedger (``DLedgerServer`` provides it).

    ``append_as_leader`` places one entry per body at once (under the log's own lock), runs
    ``hook(entry, body)`` on each body after its pos is known and before its bytes are
    written, and returns the entries with a future that DLedger completes with the outcome's
    response code (SUCCESS once a quorum holds them; WAIT_QUORUM_ACK_TIMEOUT, TERM_CHANGED,
    ...). An append refused before anything is placed (not the leader, pending requests
    full, a full disk) returns no entry and a future already done with the code, or raises
    an exception whose ``code`` is it (``DLedgerError``).
    ``committed_pos`` is the data offset just past the last committed entry (0 before any).
    """

    data_file_queue: MappedFileQueue

    @property
    def committed_pos(self) -> int: ...

    @property
    def committed_index(self) -> int: ...

    @property
    def ledger_begin_index(self) -> int: ...

    @property
    def ledger_end_index(self) -> int: ...

    def is_leader(self) -> bool: ...

    def append_as_leader(
        self, bodies: Sequence[bytearray], hook: Callable[[AppendedEntry, bytearray], None]
    ) -> tuple[Sequence[AppendedEntry], Future[int]]: ...

    def load(self) -> bool:
        """Map the data and index files and recover them (DLedger's recovery)."""
        ...

    def start_data_at(self, offset: int) -> None:
        """Begin the (empty) data files at ``offset``: 4.9 goes on after an old CommitLog."""
        ...

    def start(self) -> None: ...

    def shutdown(self) -> None:
        """Stop replicating (no append, commit nor truncation after it); the files stay mapped."""
        ...

    def close(self) -> None:
        """Flush, persist the checkpoint and unmap the files (after dispatch has stopped)."""
        ...

    def status(self) -> dict[str, Any]:
        """For operators: group, selfId, role, term, leaderId, ledger begin/end, committedIndex,
        peers, and on the leader each member's endIndex, how far behind it is and whether it
        answers (``DLedgerServer.status``)."""
        ...


_RUNTIME_KEYS = (
    ("dLedgerGroup", "group"), ("dLedgerSelfId", "selfId"), ("dLedgerRole", "role"), ("dLedgerTerm", "term"),
    ("dLedgerLeaderId", "leaderId"), ("dLedgerLedgerBeginIndex", "ledgerBeginIndex"),
    ("dLedgerLedgerEndIndex", "ledgerEndIndex"), ("dLedgerCommittedIndex", "committedIndex"),
)  # fmt: skip


def dledger_runtime_info(status: dict[str, Any]) -> dict[str, object]:
    """DLedger mode's keys in GET_BROKER_RUNTIME_INFO (Pumice's; ``pumice admin dLedgerStatus``
    reads them):

    =========================  ======================================================================
    key                        value
    =========================  ======================================================================
    dLedgerGroup, …SelfId      dLegerGroup and dLegerSelfId
    dLedgerRole                CANDIDATE, FOLLOWER or LEADER
    dLedgerTerm                the node's current term
    dLedgerLeaderId            the leader it knows (empty when none)
    dLedgerLedgerBeginIndex,   its log's first and last index, and the last committed one (-1: none)
    …EndIndex, …CommittedIndex
    dLedgerPeers               JSON ``{id: host:port}``
    dLedgerMembers             the leader only: JSON ``{id: {"endIndex", "behind", "live"}}``, each
                               member's last index the leader knows, how many entries it is behind
                               the leader's end, and whether it answered the last heartbeat
    =========================  ======================================================================
    """
    info: dict[str, object] = {key: "" if status.get(name) is None else status[name] for key, name in _RUNTIME_KEYS}
    info["dLedgerPeers"] = orjson.dumps(status.get("peers", {})).decode()
    if "members" in status:
        info["dLedgerMembers"] = orjson.dumps(status["members"]).decode()
    return info


def put_status_of(code: int) -> PutMessageStatus:
    """4.9's mapping of a DLedger outcome to a put's status (table in the docstring)."""
    if code == SUCCESS:
        return PutMessageStatus.PUT_OK
    if code in _UNAVAILABLE:
        return PutMessageStatus.SERVICE_NOT_AVAILABLE
    if code in _BUSY:
        return PutMessageStatus.OS_PAGECACHE_BUSY
    return PutMessageStatus.UNKNOWN_ERROR


def _patch_physical_offset(entry: AppendedEntry, body: bytearray) -> None:
    """The append hook: the record's PHYSICALOFFSET is where it lands, its entry's pos + 48."""
    _LONG.pack_into(body, PHYSICAL_OFFSET_OFFSET, entry.pos + BODY_OFFSET)


class DLedgerCommitLog(CommitLog):
    def __init__(self, config: MessageStoreConfig, replicated_log: ReplicatedLog) -> None:
        super().__init__(config, None)
        self.replicated_log = replicated_log
        # the data files are the log's: every read of the base class goes to them
        self.mapped_file_queue = replicated_log.data_file_queue
        # a plain CommitLog found at start (storePathCommitLog): served below ``divided_offset``
        self.old_log = CommitLog(config, None)
        self.old_file_queue = self.old_log.mapped_file_queue
        self.divided_offset = -1  # 4.9's dividedCommitlogOffset: where the DLedger data begin

    # -- life cycle ----------------------------------------------------------------------

    def load(self) -> bool:
        """The log's files (recovered by the log); an old CommitLog's first, as 4.9 migrates:
        recovered normally, closed with a blank, and the DLedger data begin at the end of
        its last file when they are empty."""
        if not self.old_log.load() or not self.replicated_log.load():
            log.error("load DLedger commit log Failed")
            return False
        if self.old_file_queue.mapped_files:
            self.old_log.recover_normally()
            first = self.mapped_file_queue.get_first_mapped_file()
            if first is not None:
                self.divided_offset = first.file_from_offset
            else:
                last = self.old_file_queue.mapped_files[-1]
                if last.wrote_position < last.file_size:
                    pos = last.wrote_position
                    last.close_with_blank(pos, _BLANK.pack(last.file_size - pos, BLANK_MAGIC_CODE))
                    last.flush(0)
                self.divided_offset = last.file_from_offset + last.file_size
                self.replicated_log.start_data_at(self.divided_offset)
                log.info("the old CommitLog ends in a blank; DLedger data begin at %d", self.divided_offset)
        log.info("load DLedger commit log OK (old CommitLog below %d)", self.divided_offset)
        return True

    def start(self) -> None:
        self.replicated_log.start()

    def shutdown(self) -> None:
        self.replicated_log.shutdown()

    def close(self) -> None:
        """The log's files are unmapped only now: dispatch reads them until it stops."""
        self.replicated_log.close()
        self.old_file_queue.flush(0)  # its blank (the old CommitLog takes no other write here)
        self.old_log.close()

    def commit_caught_up(self) -> bool:
        return True

    # -- flush: DLedger flushes its own files (every flushFileInterval) --------------------

    def handle_disk_flush(self, result: PutMessageResult, wait_store_msg_ok: bool) -> PutMessageResult:
        return result

    def wakeup_flush(self) -> None:
        pass

    def submit_flush_request(
        self, result: PutMessageResult, callback: Callable[[bool], None] | None = None
    ) -> Future[bool]:
        fut: Future[bool] = Future()
        fut.set_result(True)
        if callback is not None:
            callback(True)
        return fut

    # -- put -------------------------------------------------------------------------------

    def _put_blob(
        self,
        blob: bytearray,
        reqs: list[DispatchRequest],
        store_host: HostAddress,
        wait_flush: bool,
        wait: bool,
        one_queue: bool = False,
    ) -> tuple[PutMessageResult, int]:
        """Append the encoded records, one entry each; with ``wait_flush`` wait for the quorum,
        else the result's ``quorum`` future tells when its status is final."""
        bodies: list[bytearray] = []
        start = 0
        for req in reqs:
            bodies.append(blob[start : start + req.msg_size])
            start += req.msg_size
        with self.put_message_lock:
            begin = int(time.time() * 1000)
            self.begin_time_in_lock = begin
            try:
                table = self.topic_queue_table
                logics: list[int] = []
                advanced: dict[tuple[str, int], int] = {}
                for req, body in zip(reqs, bodies, strict=True):
                    sf = req.sys_flag
                    if sf & _TRAN_MASK in _NO_OFFSET_TYPES:
                        qoff = 0
                    else:
                        key = (req.topic, req.queue_id)
                        qoff = advanced.get(key, table.get(key, 0))
                        advanced[key] = qoff + 1
                    _OFFSETS.pack_into(body, QUEUE_OFFSET_OFFSET, qoff, 0)
                    _LONG.pack_into(body, STORE_TIMESTAMP_OFFSETS[(sf >> 4) & 1], begin)
                    logics.append(qoff)
                try:
                    entries, future = self.replicated_log.append_as_leader(bodies, _patch_physical_offset)
                except Exception as e:
                    code = getattr(e, "code", None)
                    if not isinstance(code, int):  # a bug or an I/O error below: refused, never half-counted
                        log.exception("Put message error")
                        return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, remark=f"DLedger append failed: {e}"), 0
                    entries, future = [], Future()
                    future.set_result(code)  # DLedgerError: refused before anything was placed
                if not entries:
                    code = future.result() if future.done() else -1
                    log.warning("DLedger refused the append (code %s)", code)
                    remark = f"DLedger refused the append (code {code}): this node is not a ready leader"
                    return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY, remark=remark), 0
                table.update(advanced)  # only once the entries are placed, as 4.9
            finally:
                self.begin_time_in_lock = 0
        wrote_offsets = [e.pos + BODY_OFFSET for e in entries]
        amr = AppendMessageResult(
            AppendMessageStatus.PUT_OK,
            wrote_offset=wrote_offsets[0],
            wrote_bytes=len(blob),
            store_timestamp=begin,
            logics_offset=logics[0],
            msg_num=len(reqs),
            store_host=store_host,
            wrote_offsets=wrote_offsets,
            logics_offsets=logics,
        )
        result = PutMessageResult(PutMessageStatus.PUT_OK, amr)
        quorum: Future[None] = Future()

        def settle(f: Future[int]) -> None:
            try:
                code = f.result()
            except Exception as e:  # the log failed the future instead of giving a code
                code = -1
                result.remark = f"DLedger append failed: {e}"
            result.status = put_status_of(code)
            if code != SUCCESS and not result.remark:
                result.remark = f"DLedger append outcome {code}"
            quorum.set_result(None)

        future.add_done_callback(settle)
        if not wait_flush:
            result.quorum = quorum
            return result, begin
        try:
            quorum.result(timeout=_QUORUM_WAIT_S)
        except TimeoutError:
            result.status = PutMessageStatus.OS_PAGECACHE_BUSY
            result.remark = "DLedger did not answer the append in time"
        return result, begin

    def append_data(self, start_offset: int, data: bytes | memoryview) -> bool:
        """The HA service's slave append: never in DLedger mode (the log replicates itself)."""
        return False

    # -- read ------------------------------------------------------------------------------

    def get_min_offset(self) -> int:
        if self.old_file_queue.mapped_files:
            return self.old_log.get_min_offset()
        return self.mapped_file_queue.get_min_offset()

    def find_mapped_file(self, offset: int) -> MappedFile | None:
        if offset < self.divided_offset:
            return self.old_file_queue.find_mapped_file_by_offset(offset)
        return super().find_mapped_file(offset)

    def get_message(self, offset: int, size: int) -> SelectMappedBufferResult | None:
        if offset < self.divided_offset:
            return self.old_log.get_message(offset, size)
        return super().get_message(offset, size)

    def get_max_offset(self) -> int:
        """The committed position (4.9: else the data files' start, else 0)."""
        committed = self.replicated_log.committed_pos
        if committed > 0:
            return committed
        return max(self.mapped_file_queue.get_min_offset(), 0)

    def get_data(self, offset: int) -> SelectMappedBufferResult | None:
        """Committed bytes from ``offset`` to the end of its file or the committed position."""
        if offset < self.divided_offset:
            return self.old_log.get_data(offset)
        committed = self.replicated_log.committed_pos
        if offset >= committed:
            return None
        sbr = super().get_data(offset)
        if sbr is not None and sbr.start_offset + sbr.size > committed:
            size = committed - sbr.start_offset
            sbr.buffer = sbr.buffer[:size]
            sbr.size = size
        return sbr

    def get_message_at(self, offset: int) -> SelectMappedBufferResult | None:
        """The record at ``offset`` (an entry's pos + 48), if it is committed."""
        if offset < self.divided_offset:
            return self.old_log.get_message_at(offset)
        sbr = super().get_message_at(offset)
        if sbr is not None and sbr.start_offset + sbr.size > self.replicated_log.committed_pos:
            sbr.release()
            return None
        return sbr

    def check_message_and_return_size(
        self, buf: memoryview | bytes, pos: int, limit: int, check_crc: bool = False
    ) -> CheckResult:
        """The entry at ``pos``: its record checked past the 48-byte header, the size to
        move on being the entry's; a DLedger blank rolls to the next file; a record of a
        plain CommitLog (its second int a CommitLog magic) goes to the plain reader."""
        if limit - pos < 8:
            return END
        magic, second = _INTS.unpack_from(buf, pos)
        if second in (_SIGNED_MESSAGE_MAGIC, _SIGNED_BLANK_MAGIC):
            return super().check_message_and_return_size(buf, pos, limit, check_crc)
        if magic == DLEDGER_BLANK_MAGIC_CODE:
            return None, 0, True
        if limit - pos < BODY_OFFSET:
            return END
        req, size, ok = super().check_message_and_return_size(buf, pos + BODY_OFFSET, limit, check_crc)
        if size > 0:
            return req, size + BODY_OFFSET, ok
        return req, size, ok

    def tail_queue_offsets(self, start: int) -> dict[tuple[str, int], int]:
        """Next queue offset of each queue that the entries in ``[start, write end)`` use,
        read from their records (QUEUEOFFSET + 1; PREPARED and ROLLBACK take none). A new
        leader counts its uncommitted entries of earlier terms so: Raft's rule commits them
        only with the first entry of its own term, so they are not dispatched yet, but their
        queue offsets are taken."""
        table: dict[tuple[str, int], int] = {}
        end = self.mapped_file_queue.get_max_wrote_position()
        offset = start
        while offset < end:
            sbr = CommitLog.get_data(self, offset)  # past the committed position too
            if sbr is None:
                break
            try:
                pos, rolled = 0, False
                while pos < sbr.size:
                    req, size, ok = self.check_message_and_return_size(sbr.buffer, pos, sbr.size)
                    if ok and size == 0:
                        rolled = True
                        break
                    if not ok or req is None:
                        return table
                    if req.sys_flag & _TRAN_MASK not in _NO_OFFSET_TYPES:
                        key = (req.topic, req.queue_id)
                        table[key] = max(table.get(key, 0), req.consume_queue_offset + 1)
                    pos += size
                offset = self.roll_next_file(sbr.start_offset + pos) if rolled else sbr.start_offset + pos
                if pos == 0 and not rolled:
                    break
            finally:
                sbr.release()
        return table

    # -- recovery: the log recovers its files in load() --------------------------------------

    def recover_normally(self) -> int:
        return self._recovered_end()

    def recover_abnormally(self, checkpoint: StoreCheckpoint) -> tuple[int, int]:
        return self._recovered_end(), -1

    def _recovered_end(self) -> int:
        end = self.mapped_file_queue.get_max_wrote_position()
        log.info(
            "DLedger commit log: data ends at %d, committed to %d (entries %d..%d, committed %d)",
            end, self.replicated_log.committed_pos, self.replicated_log.ledger_begin_index,
            self.replicated_log.ledger_end_index, self.replicated_log.committed_index,
        )  # fmt: skip
        return end


_SIGNED_MESSAGE_MAGIC = MESSAGE_MAGIC_CODE - (1 << 32)
_SIGNED_BLANK_MAGIC = BLANK_MAGIC_CODE - (1 << 32)
