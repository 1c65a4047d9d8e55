"""UniqKeyGenerator.next_id without a lock (issue 33): the same ids as the layout's reference
encoding (``struct`` packing, as the generator wrote them before), and unique across threads."""

from __future__ import annotations

import datetime as dt
import struct
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.client.message_id import UniqKeyGenerator, month_start_ms, parse_uniq_key


def reference_id(ip: bytes, pid: int, instance_hash: int, now_ms: int, start_ms: int, counter: int) -> str:
    """MessageClientIDSetter's 16 bytes: ip, pid (short), hash, (int) ms since the month start,
    (short) counter, printed as upper-case hex."""
    diff = (now_ms - start_ms + 2**31) % 2**32 - 2**31
    raw = struct.pack(">4sHIiH", ip, pid & 0xFFFF, instance_hash & 0xFFFFFFFF, diff, counter & 0xFFFF)
    return raw.hex().upper()


_2020 = int(dt.datetime(2020, 1, 1).timestamp() * 1000)
_2040 = int(dt.datetime(2040, 1, 1).timestamp() * 1000)


@settings(max_examples=50, deadline=None)
@given(
    ip=st.binary(min_size=4, max_size=4),
    pid=st.integers(0, 2**31 - 1),
    instance_hash=st.integers(0, 2**32 - 1),
    times=st.lists(st.integers(_2020, _2040), min_size=1, max_size=8),
    skip=st.sampled_from([0, 1, 2, 65_535]),
)
def test_ids_match_the_reference_layout(ip: bytes, pid: int, instance_hash: int, times: list[int], skip: int) -> None:
    gen = UniqKeyGenerator(ip=ip, pid=pid, instance_hash=instance_hash)
    for _ in range(skip):  # the counter past a wrap
        gen.next_id(times[0])
    counter = skip
    start = month_start_ms(times[0])
    for now in times:
        # a later month moves the start; an earlier time keeps it (a negative diff), as Java
        if now >= month_start_ms(start + 32 * 86_400_000):
            start = month_start_ms(now)
        got = gen.next_id(now)
        assert got == reference_id(ip, pid, instance_hash, now, start, counter)
        assert parse_uniq_key(got).counter == counter & 0xFFFF
        counter += 1


def test_ids_are_unique_across_threads() -> None:
    gen = UniqKeyGenerator(ip=b"\x0a\x00\x00\x01", pid=7, instance_hash=9)
    now = int(dt.datetime(2024, 5, 6).timestamp() * 1000)
    out: list[list[str]] = [[] for _ in range(8)]

    def run(i: int) -> None:
        out[i].extend(gen.next_id(now) for _ in range(8000))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ids = [i for part in out for i in part]
    assert len(ids) == 64_000 and len(set(ids)) == 64_000
