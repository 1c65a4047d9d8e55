"""BloomFilter: RocketMQ 4.9's filter bloom filter (``org.apache.rocketmq.filter.util``).

Each consumer (``group#topic``) of an SQL92 subscription owns ``k`` bit positions in an
``m``-bit map; the dispatcher sets a consumer's bits in a message's map when the consumer's
expression matches the message (CommitLogDispatcherCalcBitMap), and a pull skips a message
whose map lacks any of its consumer's bits without reading the CommitLog.

Sizes, for an error rate ``f`` % (1..99) and ``n`` expected consumers
(``maxErrorRateOfBloomFilter`` 20 and ``expectConsumerNumUseFilter`` 32 by default: k 3, m 112):

=====  ========================================================================
k      ``ceil(log(f / 100) / log(0.5))``
m      ``ceil(n * log2(100 / f) * log2(e))``, rounded up to a multiple of 8
=====  ========================================================================

Positions of a string (Kirsch and Mitzenmacher, "Less Hashing, Same Performance"):
``h`` = the first 8 bytes, little-endian, of MurmurHash3 x64 128 (seed 0) of its UTF-8;
``h1`` = the low 32 bits of ``h``, ``h2`` the high, both as Java ints; position ``i`` (1..k) is
``c % m`` for ``c = int32(h1 + i * h2)``, bit-inverted when negative.

The bit map as bytes (BitsArray): bit ``p`` is ``1 << (p % 8)`` of byte ``p // 8``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mmh3


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


@dataclass(frozen=True)
class BloomFilterData:
    """A consumer's bit positions and the map size they belong to (4.9's JSON: bitNum, bitPos)."""

    bit_pos: tuple[int, ...]
    bit_num: int

    def to_json(self) -> dict[str, object]:
        return {"bitNum": self.bit_num, "bitPos": list(self.bit_pos)}

    @classmethod
    def from_json(cls, data: object) -> BloomFilterData | None:
        if not isinstance(data, dict) or not isinstance(data.get("bitPos"), list):
            return None
        return cls(tuple(int(p) for p in data["bitPos"]), int(data.get("bitNum", 0)))


class BloomFilter:
    def __init__(self, f: int, n: int) -> None:
        if f < 1 or f >= 100:
            raise ValueError("f must be greater or equal than 1 and less than 100")
        if n < 1:
            raise ValueError("n must be greater than 0")
        self.f, self.n = f, n
        error_rate = f / 100.0
        self.k = math.ceil(math.log(error_rate) / math.log(0.5))
        m = math.ceil(n * (math.log(1 / error_rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        self.m = 8 * math.ceil(m / 8.0)

    def __repr__(self) -> str:
        return f"BloomFilter(f={self.f}, n={self.n}, k={self.k}, m={self.m})"

    def calc_bit_positions(self, s: str) -> tuple[int, ...]:
        h = mmh3.hash64(s.encode("utf-8", "replace"), 0, True, True)[0]
        h1, h2 = _int32(h), _int32(h >> 32)
        out = []
        for i in range(1, self.k + 1):
            c = _int32(h1 + i * h2)
            out.append((~c if c < 0 else c) % self.m)
        return tuple(out)

    def generate(self, s: str) -> BloomFilterData:
        return BloomFilterData(self.calc_bit_positions(s), self.m)

    def is_valid(self, data: BloomFilterData | None) -> bool:
        return data is not None and data.bit_num == self.m and len(data.bit_pos) == self.k

    def new_bits(self) -> bytearray:
        return bytearray(self.m // 8)

    @staticmethod
    def hash_to(data: BloomFilterData, bits: bytearray) -> None:
        for p in data.bit_pos:
            bits[p >> 3] |= 1 << (p & 7)

    @staticmethod
    def is_hit(data: BloomFilterData, bits: bytes | memoryview) -> bool:
        return all(bits[p >> 3] & (1 << (p & 7)) for p in data.bit_pos)
