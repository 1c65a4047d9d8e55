"""The transient store pool's resident memory over a long run (issue 30, point 6).

Its buffers, one CommitLog file each, are shared anonymous maps: the broker's ``RssShmem``.
It was on under SYNC_FLUSH too and never gave pages back, so shared memory grew with the
bytes written up to ``transientStorePoolSize`` (5) files: 5 GiB with 1 GiB files. Now
SYNC_FLUSH does not use it (RocketMQ's rule), and under ASYNC_FLUSH a buffer back in the
pool releases its pages: only the files being written hold one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, send

FILE = 4 << 20  # mappedFileSizeCommitLog
BODY = 512 << 10
FILES_WRITTEN = 10


def rss_shmem_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssShmem in /proc status")


@pytest.mark.parametrize(("flush", "bound_files"), [("SYNC_FLUSH", 0.5), ("ASYNC_FLUSH", 2.5)])
def test_pool_memory_stays_bounded_over_many_files(tmp_path: Path, flush: str, bound_files: float) -> None:
    cluster = Cluster(
        tmp_path,
        f"flushDiskType={flush}\ntransientStorePoolEnable=true\ntransientStorePoolSize=5\n"
        f"mapedFileSizeCommitLog={FILE}\ncommitIntervalCommitLog=50\n",
    )
    try:
        pid = cluster.broker.pid
        before = rss_shmem_mib(pid)
        peak = before

        async def write() -> None:
            nonlocal peak
            c = RemotingClient()
            try:
                for i in range(FILES_WRITTEN * FILE // BODY):
                    r = await c.invoke(cluster.br, send("PoolTopic", bytes([i % 251]) * BODY, f"k{i}"), timeout_s=10)
                    assert r.code == ResponseCode.SUCCESS, r.remark
                    peak = max(peak, rss_shmem_mib(pid))
            finally:
                await c.close()

        asyncio.run(asyncio.wait_for(write(), 120))
        after = rss_shmem_mib(pid)
        print(f"{flush}: broker RssShmem {before:.1f} MiB at start, peak {peak:.1f}, {after:.1f} after "
              f"{FILES_WRITTEN} files of {FILE >> 20} MiB")  # fmt: skip
        assert peak - before < bound_files * (FILE >> 20), f"RssShmem grew from {before:.1f} to {peak:.1f} MiB"
        assert cluster.broker.poll() is None
    finally:
        cluster.close()
