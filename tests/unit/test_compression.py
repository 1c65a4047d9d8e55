"""pumice.compression: the sysFlag bits are MessageSysFlag's (4.9.8: COMPRESSED_FLAG 0x1,
COMPRESSION_LZ4_TYPE 0x100, ZSTD 0x200, ZLIB 0x300); the frames are the formats 4.9.8's
Lz4Compressor (an LZ4 frame) and ZstdCompressor (a Zstandard frame without a content size,
as a stream writes it) produce, made here by the reference libraries. (tests/interop reads
the Java client's own bodies.)"""

from __future__ import annotations

import zlib

import lz4.frame
import pytest
import zstandard

from pumice.compression import CompressionType, compression_type, decompress

BODY = bytes(range(256)) * 40 + b"tail"


def zstd_stream(data: bytes) -> bytes:
    c = zstandard.ZstdCompressor(level=5, write_content_size=False).compressobj()
    return c.compress(data) + c.flush()


FRAMES = {
    0x001: zlib.compress(BODY),  # before 4.9.8: no type bits, zlib
    0x301: zlib.compress(BODY, 9),
    0x101: lz4.frame.compress(BODY),
    0x201: zstd_stream(BODY),
}


def test_the_type_bits_are_message_sys_flags() -> None:
    assert [t.flag for t in CompressionType] == [0x100, 0x200, 0x300]
    assert compression_type(0x1) is CompressionType.ZLIB  # 4.9.7 and older
    assert compression_type(0x101 | 0x4) is CompressionType.LZ4  # other bits do not matter
    for bad in (0x401, 0x701):
        with pytest.raises(ValueError, match="unknown compression type"):
            compression_type(bad)


@pytest.mark.parametrize("sys_flag", sorted(FRAMES))
def test_each_type_inflates_and_bad_data_is_a_value_error(sys_flag: int) -> None:
    frame = FRAMES[sys_flag]
    assert decompress(frame, sys_flag) == BODY
    assert decompress(memoryview(frame), sys_flag, limit=len(BODY)) == BODY
    with pytest.raises(ValueError, match="past"):
        decompress(frame, sys_flag, limit=len(BODY) - 1)  # a bomb stops at the limit
    with pytest.raises(ValueError):
        decompress(frame[: len(frame) // 2], sys_flag)  # truncated
    with pytest.raises(ValueError):
        decompress(b"\x00not compressed at all\xff" * 3, sys_flag)
