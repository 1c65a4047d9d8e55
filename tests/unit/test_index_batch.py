"""The vectorised IndexFile.put_batch writes exactly what repeated putKey calls write."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.store.index_file import IndexFile


def _scalar(path: str, items: list[tuple[int, int, int]]) -> bytes:
    f = IndexFile(path, 7, 64)
    for h, phy, ts in items:
        if f.index_count >= f.index_num:
            break
        f._put_one(h, phy, ts)
    if items:
        f._write_header()
    data = bytes(f.mapped_file.mmap)
    f.close()
    return data


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(
        st.tuples(
            st.integers(0, 2**31 - 1),
            st.integers(0, 2**40),
            st.integers(1_700_000_000_000, 1_700_000_100_000),
        ),
        max_size=80,
    ),
    cut=st.integers(1, 40),
    data=st.data(),
)
def test_put_batch_matches_scalar_put_key(tmp_path_factory, items, cut, data) -> None:
    items = sorted(items, key=lambda t: t[2])  # store times grow with the CommitLog
    d = tmp_path_factory.mktemp("idx")
    expected = _scalar(str(d / "10000000000000000"), items)
    f = IndexFile(str(d / "20000000000000000"), 7, 64)
    rest = items
    while rest:
        chunk, rest = rest[:cut], rest[cut:]
        arr = np.array(chunk, dtype=np.int64).reshape(-1, 3)
        n = f.put_batch(arr[:, 0], arr[:, 1], arr[:, 2])
        if n < len(chunk):
            break
    got = bytes(f.mapped_file.mmap)
    f.close()
    assert got == expected
