"""The term-start record: what a Pumice leader appends when its term begins with entries of
earlier terms not yet committed (docs/DLEDGER.md, "Beyond DLedger").

Pumice commits an entry of an earlier term only together with one of the current term (Raft's
rule). DLedger's leader writes nothing of its own, and the broker's role change waits for
``committedIndex == ledgerEndIndex``, so without an entry of the new term such a leader would
wait for ever. The entry body must stay a CommitLog message record (RocketMQ's followers dispatch
every body), so the entry is one record of the 4.9 format:

==================  ============================================================================
field               value
==================  ============================================================================
TOPIC               ``RMQ_SYS_DLEDGER_TERM_START``
SYSFLAG             TRANSACTION_ROLLBACK_TYPE (0xC): RocketMQ's and Pumice's dispatch give a
                    ROLLBACK record no ConsumeQueue entry and no index key
QUEUEID, QUEUEOFFSET  0, 0 (a ROLLBACK record takes no queue offset)
PHYSICALOFFSET      the entry's pos + 48, written by the append hook as the broker's are
BORN/STORE HOST     this node's DLedger address (IPv4; 127.0.0.1 when it is a name or IPv6)
BORN/STORE TIME     the leader's clock when the term starts
BODY                the term, 8 bytes big-endian
PROPERTIES          empty
==================  ============================================================================
"""

from __future__ import annotations

import socket
import struct
import time

from pumice.common.message import LOOPBACK, HostAddress
from pumice.common.message_decoder import encode_record, record_topic
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.dledger.dledger_entry import BODY_OFFSET, DLedgerEntry

TERM_START_TOPIC = "RMQ_SYS_DLEDGER_TERM_START"
PHYSICAL_OFFSET_IN_RECORD = 28  # MessageDecoder.PHY_POS_POSITION
_LONG = struct.Struct(">q")


def _host(address: str) -> HostAddress:
    host, _, port = address.rpartition(":")
    try:
        return socket.inet_aton(host), int(port)
    except (OSError, ValueError):
        return LOOPBACK


def term_start_body(term: int, self_address: str, now_ms: int | None = None) -> bytes:
    """The record for ``term``, its PHYSICALOFFSET still 0 (``place_record`` fills it)."""
    host = _host(self_address)
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    return encode_record(
        body=_LONG.pack(term), topic=TERM_START_TOPIC, properties="",
        sys_flag=MessageSysFlag.TRANSACTION_ROLLBACK_TYPE, born_timestamp=ts, born_host=host,
        store_timestamp=ts, store_host=host,
    )  # fmt: skip


def place_record(entry: DLedgerEntry, body: bytearray) -> None:
    """The append hook: the record's PHYSICALOFFSET is where it lies in the data files."""
    _LONG.pack_into(body, PHYSICAL_OFFSET_IN_RECORD, entry.pos + BODY_OFFSET)


def is_term_start(body: bytes | bytearray | memoryview) -> bool:
    """Whether an entry body is a term-start record (for tools and tests)."""
    try:
        return record_topic(body) == TERM_START_TOPIC
    except (ValueError, IndexError, struct.error, UnicodeDecodeError):
        return False
