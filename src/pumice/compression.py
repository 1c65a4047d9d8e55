"""Message body compression, as RocketMQ 4.9.8 marks it in a message's sysFlag.

=============  ==========  ============================================================
sysFlag bits   meaning     body
=============  ==========  ============================================================
bit 0 (0x1)    COMPRESSED  compressed; bits 8-10 say how
bits 8-10      type        0 or 3: ZLIB (a zlib stream; 0 is every client before 4.9.8),
                           1: LZ4 (an LZ4 frame, LZ4FrameOutputStream),
                           2: ZSTD (a Zstandard frame, ZstdOutputStream)
=============  ==========  ============================================================

A 4.9.8 Java producer compresses bodies over 4 KiB with ``rocketmq.message.compressType``
(ZLIB by default). The broker stores bodies as sent; clients and the Spark reader inflate.
"""

from __future__ import annotations

import zlib
from enum import IntEnum

import lz4.frame
import zstandard

COMPRESSED_FLAG = 0x1
COMPRESSION_TYPE_MASK = 0x7 << 8


class CompressionType(IntEnum):
    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @property
    def flag(self) -> int:
        """The sysFlag bits of this type (MessageSysFlag.COMPRESSION_*_TYPE)."""
        return int(self) << 8


def compression_type(sys_flag: int) -> CompressionType:
    """The type a compressed message's sysFlag names; ValueError for 4 to 7."""
    value = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if value == 0:  # clients before 4.9.8 set no type: zlib
        return CompressionType.ZLIB
    try:
        return CompressionType(value)
    except ValueError:
        raise ValueError(f"unknown compression type {value} in sysFlag 0x{sys_flag:x}") from None


def decompress(body: bytes | bytearray | memoryview, sys_flag: int, limit: int | None = None) -> bytes:
    """The body a compressed message was sent with; ValueError when it does not inflate (or,
    with ``limit``, would inflate past ``limit`` bytes)."""
    kind = compression_type(sys_flag)
    cap = -1 if limit is None else limit + 1
    try:
        if kind is CompressionType.ZLIB:
            d = zlib.decompressobj()
            out = d.decompress(body, max(cap, 0))
            complete = d.eof
        elif kind is CompressionType.LZ4:
            ld = lz4.frame.LZ4FrameDecompressor()
            out = ld.decompress(bytes(body), max_length=cap)
            complete = ld.eof
        else:
            if limit is not None and len(_zstd_capped(body, cap)) > limit:  # a bomb stops at the cap
                raise ValueError(f"ZSTD body inflates past {limit} bytes")
            zd = zstandard.ZstdDecompressor().decompressobj()
            out = zd.decompress(bytes(body))
            complete = zd.eof
    except (zlib.error, RuntimeError, zstandard.ZstdError) as e:
        raise ValueError(f"{kind.name} body does not inflate: {e}") from None
    if limit is not None and len(out) > limit:
        raise ValueError(f"{kind.name} body inflates past {limit} bytes")
    if not complete:
        raise ValueError(f"{kind.name} body is truncated")
    return out


def _zstd_capped(body: bytes | bytearray | memoryview, cap: int) -> bytes:
    """At most ``cap`` bytes of a Zstandard frame's content (a truncated frame gives less)."""
    with zstandard.ZstdDecompressor().stream_reader(bytes(body)) as reader:
        return reader.read(cap)
