"""Checking one CommitLog record and parsing what dispatch needs (``CommitLog.checkMessageAndReturnSize``).

The record layout is ``pumice.common.message_decoder``'s. A check answers a ``CheckResult``
(request, size, success) whose ``check_kind`` is one of:

=========  =======  =====  =========================================================
kind       success  size   meaning
=========  =======  =====  =========================================================
VALID      True     > 0    a whole record; ``request`` is its DispatchRequest
BLANK      True     0      the blank end-of-file record: go on at the next file
SKIP       False    > 0    TOTALSIZE is sane but the record is not: skip ``size`` bytes
END        False    ≤ 0    no valid data from here (torn write, zeros, bad magic)
=========  =======  =====  =========================================================

``scan_records`` is recovery's one-pass walk: the same rules, nothing decoded.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable

from zlib_ng.zlib_ng import crc32 as _crc32

from pumice.common.java_hash import tags_code as _tags_code
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import (
    BLANK_MAGIC_CODE,
    HEAD_STRUCTS,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    STORE_TIMESTAMP_OFFSETS,
    Buffer,
)
from pumice.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC
from pumice.native import NATIVE
from pumice.store.dispatch_request import DispatchRequest

_native = NATIVE  # the tests swap it to hold both paths to the same answers


class CheckKind(enum.Enum):
    VALID = "valid"
    BLANK = "blank"
    SKIP = "skip"
    END = "end"


# (request, size, success), as 4.9's DispatchRequest(size, success): a plain tuple, not a
# NamedTuple, whose construction cost 9% of this function (2.24 → 2.45 µs a 1 KiB record);
# check_kind names what it says
CheckResult = tuple[DispatchRequest | None, int, bool]


def check_kind(result: CheckResult) -> CheckKind:
    _, size, success = result
    if success:
        return CheckKind.VALID if size > 0 else CheckKind.BLANK
    return CheckKind.SKIP if size > 0 else CheckKind.END


END: CheckResult = (None, -1, False)
BLANK: CheckResult = (None, 0, True)
_SIZE_MAGIC = struct.Struct(">iI")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">H")
_LONG = struct.Struct(">q")


_PREFIX = struct.Struct(">iIIiiqqi")  # TOTALSIZE .. SYSFLAG (40 bytes)
_TAIL = struct.Struct(">qi")  # PREPARED TRANSACTION OFFSET, BODYLENGTH
_KEYS = MessageConst.PROPERTY_KEYS
_TAGS = MessageConst.PROPERTY_TAGS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL


def check_message_and_return_size(
    buf: Buffer,
    pos: int,
    limit: int,
    check_crc: bool = False,
    delay_ms: Callable[[int], int] | None = None,
) -> CheckResult:
    """Validate the record at ``buf[pos:limit]`` and parse what dispatch needs."""
    if limit - pos < 8:
        return END
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return BLANK
    if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_SIZE or total > limit - pos:
        return END
    total, _, crc, queue_id, _, queue_offset, phys, sys_flag = _PREFIX.unpack_from(buf, pos)
    hsize = HEAD_STRUCTS[(sys_flag >> 4) & 3].size
    if total < hsize + 3:
        return END
    store_ts = _LONG.unpack_from(buf, pos + STORE_TIMESTAMP_OFFSETS[(sys_flag >> 4) & 1])[0]
    prepared, blen = _TAIL.unpack_from(buf, pos + hsize - 12)
    p = pos + hsize
    end = pos + total
    if blen < 0 or p + blen + 1 > end:
        return None, total, False
    mv = memoryview(buf)  # type: ignore[arg-type]
    if check_crc and _crc32(mv[p : p + blen]) & 0x7FFFFFFF != crc:
        return END
    p += blen
    tlen = mv[p]
    if p + 1 + tlen + 2 > end:
        return None, total, False
    topic = str(mv[p + 1 : p + 1 + tlen], "utf-8")
    p += 1 + tlen
    plen = _SHORT.unpack_from(buf, p)[0]
    if p + 2 + plen != end:
        return None, total, False
    tcode, keys, uniq = 0, None, None
    ps = ""
    if plen:
        ps = str(mv[p + 2 : end], "utf-8")
        level = None
        for pair in ps.split(PROPERTY_SEPARATOR):
            name, _, value = pair.partition(NAME_VALUE_SEPARATOR)
            if name == _TAGS:
                tcode = _tags_code(value) if value else 0
            elif name == _KEYS:
                keys = value
            elif name == _UNIQ:
                uniq = value
            elif name == _DELAY:
                level = value
        if level and delay_ms is not None and topic == RMQ_SYS_SCHEDULE_TOPIC and level.isdigit() and int(level) > 0:
            tcode = store_ts + delay_ms(int(level))
    req = DispatchRequest(topic, queue_id, phys, total, tcode, store_ts, queue_offset, keys, uniq, sys_flag,
                          prepared, ps)  # fmt: skip
    return req, total, True


def scan_records(buf: Buffer, pos: int, limit: int, check_crc: bool) -> tuple[int, int, bool]:
    """Walk valid records from ``pos``; returns (end, records, hit_blank).

    ``end`` is where the first record that is not valid starts (or the blank record, when
    ``hit_blank``). A record is valid when its magic, its length fields (body, topic,
    properties) add up to TOTALSIZE inside ``limit``, and, with ``check_crc``, the body CRC
    matches. This is the recovery scan: one pass, nothing decoded. Native where built
    (``pumice._native.scan_records``, which asks zlib-ng for each CRC); the twin
    ``scan_records_pure`` is the reference and runs for what the native walk does not take.
    """
    if _native is not None:
        done = _native.scan_records(buf, pos, limit, _crc32 if check_crc else None)
        if done is not None:
            return done
    return scan_records_pure(buf, pos, limit, check_crc)


def scan_records_pure(buf: Buffer, pos: int, limit: int, check_crc: bool) -> tuple[int, int, bool]:
    """``scan_records``' pure-Python twin."""
    mv = memoryview(buf)  # type: ignore[arg-type]
    size_magic = _SIZE_MAGIC.unpack_from
    prefix = _PREFIX.unpack_from
    int_at = _INT.unpack_from
    short_at = _SHORT.unpack_from
    crc32_ = _crc32
    sizes = [h.size for h in HEAD_STRUCTS]
    records = 0
    while limit - pos >= 40:
        total, magic, crc, _, _, _, _, sys_flag = prefix(buf, pos)
        if magic != MESSAGE_MAGIC_CODE:
            return pos, records, magic == BLANK_MAGIC_CODE and total == limit - pos
        if total < MIN_RECORD_SIZE or total > limit - pos:
            return pos, records, False
        p = pos + sizes[(sys_flag >> 4) & 3]
        blen = int_at(buf, p - 4)[0]
        end = pos + total
        if blen < 0 or p + blen + 3 > end:
            return pos, records, False
        t = p + blen
        tl = mv[t]
        if t + 3 + tl > end or t + 3 + tl + short_at(buf, t + 1 + tl)[0] != end:
            return pos, records, False
        if check_crc and crc32_(mv[p:t]) & 0x7FFFFFFF != crc:
            return pos, records, False
        records += 1
        pos = end
    if limit - pos >= 8:
        total, magic = size_magic(buf, pos)
        return pos, records, magic == BLANK_MAGIC_CODE and total == limit - pos
    return pos, records, False
