"""Java's ``String.hashCode`` and the hashes RocketMQ derives from it.

RocketMQ hashes strings in three places that reach the disk:

* the ConsumeQueue ``tagsCode`` is ``(long) tags.hashCode()`` (sign-extended to 8 bytes);
* the IndexFile slot is ``abs(("topic#key").hashCode()) % hashSlotNum``, with
  ``Integer.MIN_VALUE`` mapped to 0 (``IndexFile.indexKeyHashMethod``);
* a stored properties string is written from a ``HashMap<String, String>``, so its pairs come
  in that map's iteration order (``hash_map_order``).

Java hashes UTF-16 code units, so a supplementary character counts as its two surrogates.
``index_key_hashes`` runs natively when ``pumice._native`` is built (a key with a lone
surrogate, which Rust strings cannot hold, goes to the twin).
"""

from __future__ import annotations

import struct
from functools import lru_cache
from operator import mul
from typing import TYPE_CHECKING, TypeVar

from pumice.native import NATIVE

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")
_native = NATIVE
_MASK32 = 0xFFFFFFFF
# 31**k mod 2**64 for every k a key can need; uint64 arithmetic wraps mod 2**64, and the
# low 32 bits of a wrapped sum are the low 32 bits of the true sum.
_MAX_UNITS = 1 << 16


@lru_cache(maxsize=1)
def _pow31() -> np.ndarray:
    import numpy as np  # only the batch path needs numpy: the client imports this module too

    return np.concatenate([np.ones(1, dtype=np.uint64), np.cumprod(np.full(_MAX_UNITS - 1, 31, dtype=np.uint64))])


def _utf16_units(s: str) -> list[int]:
    b = s.encode("utf-16-be", "surrogatepass")
    return list(struct.unpack(f">{len(b) // 2}H", b))


# 31**(_SHORT - 1 - i) mod 2**32 at i: the tail of length n weights n code units, so one
# sum(map(mul)) in C hashes a key (43 characters: 2.2 µs, against 3.5 µs for a Python loop)
_SHORT = 4096
_POW31_DESC = [pow(31, _SHORT - 1 - i, 1 << 32) for i in range(_SHORT)]


def _hash_units(units: bytes | list[int]) -> int:
    n = len(units)
    if n <= _SHORT:
        return sum(map(mul, units, _POW31_DESC[_SHORT - n :])) & _MASK32
    h = 0
    for c in units:
        h = (31 * h + c) & _MASK32
    return h


def java_string_hash(s: str) -> int:
    """``s.hashCode()`` as a signed 32-bit int."""
    h = _hash_units(s.encode() if s.isascii() else _utf16_units(s))
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=65536)
def tags_code(tags: str) -> int:
    """ConsumeQueue tagsCode of a TAGS value: ``(long) tags.hashCode()``; 0 for no tag."""
    return java_string_hash(tags) if tags else 0


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, with MIN_VALUE mapped to 0."""
    h = java_string_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


def index_key_hash_list(keys: list[str]) -> list[int]:
    """``index_key_hash`` of each key, as a list (a few keys: no numpy); native when built."""
    if _native is not None:
        got = _native.index_key_hashes(keys)
        if got is not None:
            return got
    return [index_key_hash(k) for k in keys]


def index_key_hashes(keys: list[str]) -> np.ndarray:
    """``index_key_hash`` for many keys (int64 array): natively when built
    (``pumice._native.index_key_hashes``, native/src/index_hash.rs), else by the twin."""
    import numpy as np

    if _native is not None:
        got = _native.index_key_hashes(keys)
        if got is not None:
            return np.array(got, dtype=np.int64)
    return index_key_hashes_pure(keys)


def index_key_hashes_pure(keys: list[str]) -> np.ndarray:
    """``index_key_hashes`` in one vectorised numpy pass: the native function's twin."""
    import numpy as np

    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    joined = "".join(keys)
    if joined.isascii():
        units = np.frombuffer(joined.encode(), dtype=np.uint8).astype(np.uint64)
        lengths = np.fromiter((len(k) for k in keys), dtype=np.int64, count=n)
    else:
        parts = [np.array(_utf16_units(k), dtype=np.uint64) for k in keys]
        units = np.concatenate(parts)
        lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=n)
    if lengths.max() >= _MAX_UNITS:
        return np.array([index_key_hash(k) for k in keys], dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # exponent of unit j inside its key = (end of key - 1) - j
    key_of_unit = np.repeat(np.arange(n), lengths)
    exps = (ends[key_of_unit] - 1) - np.arange(len(units))
    terms = units * _pow31()[exps]
    sums = np.zeros(n, dtype=np.uint64)
    nonempty = lengths > 0
    if nonempty.any():
        sums[nonempty] = np.add.reduceat(terms, starts[nonempty])
    h = (sums & np.uint64(_MASK32)).astype(np.int64)
    h = np.where(h >= (1 << 31), h - (1 << 32), h)
    out = np.abs(h)
    out[h == -(1 << 31)] = 0
    return out


@lru_cache(maxsize=4096)
def _spread(key: str) -> int:
    h = java_string_hash(key) & _MASK32
    return h ^ (h >> 16)  # HashMap.hash


def hash_map_order(keys: list[str]) -> list[str]:
    """The order in which a ``java.util.HashMap`` filled with ``keys`` (in this order) iterates
    them: by bucket ``hash & (capacity - 1)`` (capacity 16, doubled past three quarters full),
    then in insertion order (a resize keeps it). Maps of a few keys: a bucket of 8 or more would
    be a tree in Java."""
    mask = _hash_map_capacity(len(keys)) - 1
    return sorted(keys, key=lambda k: _spread(k) & mask)


def hash_map_order_by_hash(keys: list[T], hash_codes: list[int]) -> list[T]:
    """``hash_map_order`` of keys whose Java ``hashCode()`` values are ``hash_codes``."""
    mask = _hash_map_capacity(len(keys)) - 1
    buckets = [((h & _MASK32) ^ ((h & _MASK32) >> 16)) & mask for h in hash_codes]
    return [keys[i] for i in sorted(range(len(keys)), key=buckets.__getitem__)]


def _hash_map_capacity(size: int) -> int:
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity
