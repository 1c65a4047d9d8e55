"""DLedgerEntry: one entry of a DLedger log, its 48-byte header and its 32-byte index unit
(dledger 0.3.1.2, ``entry/DLedgerEntry.java``, ``entry/DLedgerEntryCoder.java``).

An entry in a data file, big-endian:

======  ====  ==========  =====================================================================
offset  size  field       meaning
======  ====  ==========  =====================================================================
0       4     magic       ``CURRENT_MAGIC`` = 1
4       4     size        the whole entry: 48 + body length
8       8     index       the entry's index, from 0, one more per entry
16      8     term        the leader's term when it was appended
24      8     pos         the entry's absolute offset in the data files (``POS_OFFSET``)
32      4     channel     reserved, 0
36      4     chainCrc    0 (RocketMQ never sets it)
40      4     bodyCrc     0 (likewise); ``HEADER_SIZE`` = 44
44      4     bodyLength  n
48      n     body        ``BODY_OFFSET``; in DLedger mode one CommitLog message record
======  ====  ==========  =====================================================================

End of a data file: an entry of ``size`` bytes goes in only if ``size + 8`` bytes are left;
otherwise the rest of the file is a blank, int ``-1`` (``BLANK_MAGIC_CODE``) and int the length
of the rest, and the entry starts the next file.

An index unit, one per entry at byte ``index * 32`` of the index files:

======  ====  =====  ======================================
offset  size  field  meaning
======  ====  =====  ======================================
0       4     magic  the entry's magic
4       8     pos    the entry's pos
12      4     size   the entry's size
16      8     index  the entry's index
24      8     term   the entry's term
======  ====  =====  ======================================

(DLEDGER.md §3.3 says 28 bytes are used and 4 are zero; ``DLedgerEntryCoder.encodeIndex`` at
0.3.1.2 writes 4 + 8 + 4 + 8 + 8 = 32.)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC_1 = 1
CURRENT_MAGIC = MAGIC_1
POS_OFFSET = 24
HEADER_SIZE = 44
BODY_OFFSET = 48
INDEX_UNIT_SIZE = 32
BLANK_MAGIC_CODE = -1
# An entry always leaves room for a blank's two ints after it.
BLANK_SIZE = 8

_HEADER = struct.Struct(">iiqqqiiii")  # magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodyLength
_INDEX_UNIT = struct.Struct(">iqiqq")  # magic, pos, size, index, term: all 32 bytes
_BLANK = struct.Struct(">ii")
assert _HEADER.size == BODY_OFFSET and _INDEX_UNIT.size == INDEX_UNIT_SIZE


@dataclass(slots=True)
class DLedgerEntry:
    """One entry; ``size`` and ``pos`` are set when it is placed (the leader) or read."""

    body: bytes = b""
    index: int = -1
    term: int = -1
    pos: int = -1
    magic: int = CURRENT_MAGIC
    channel: int = 0
    chain_crc: int = 0
    body_crc: int = 0
    size: int = 0

    def compute_size_in_bytes(self) -> int:
        self.size = BODY_OFFSET + len(self.body)
        return self.size

    def same_as(self, other: DLedgerEntry) -> bool:
        """DLedger's ``equals``: size, magic, index, term, channel and pos; not the body."""
        return (
            self.size == other.size
            and self.magic == other.magic
            and self.index == other.index
            and self.term == other.term
            and self.channel == other.channel
            and self.pos == other.pos
        )


def encode_entry(entry: DLedgerEntry) -> bytes:
    """The entry's bytes, header and body (its size is computed here)."""
    size = entry.compute_size_in_bytes()
    header = _HEADER.pack(
        entry.magic,
        size,
        entry.index,
        entry.term,
        entry.pos,
        entry.channel,
        entry.chain_crc,
        entry.body_crc,
        len(entry.body),
    )
    return header + bytes(entry.body)


def decode_header(
    buf: bytes | bytearray | memoryview, offset: int = 0
) -> tuple[int, int, int, int, int, int, int, int, int]:
    """(magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodyLength) at ``offset``."""
    return _HEADER.unpack_from(buf, offset)


def decode_entry(buf: bytes | bytearray | memoryview, offset: int = 0) -> DLedgerEntry:
    """The entry at ``offset``; raises ValueError if its lengths do not fit ``buf``."""
    magic, size, index, term, pos, channel, chain_crc, body_crc, body_len = _HEADER.unpack_from(buf, offset)
    if body_len < 0 or size != BODY_OFFSET + body_len or offset + size > len(buf):
        raise ValueError(f"entry at {offset}: size {size}, body length {body_len}, {len(buf) - offset} bytes available")
    body = bytes(buf[offset + BODY_OFFSET : offset + size])
    return DLedgerEntry(body, index, term, pos, magic, channel, chain_crc, body_crc, size)


def encode_blank(length: int) -> bytes:
    """The blank that closes a data file: its two ints (the rest of the file stays zero)."""
    return _BLANK.pack(BLANK_MAGIC_CODE, length)


def encode_index_unit(magic: int, pos: int, size: int, index: int, term: int) -> bytes:
    return _INDEX_UNIT.pack(magic, pos, size, index, term)


def decode_index_unit(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[int, int, int, int, int]:
    """(magic, pos, size, index, term) of the unit at ``offset``."""
    return _INDEX_UNIT.unpack_from(buf, offset)
