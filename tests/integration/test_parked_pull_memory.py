"""A client that parks many long-polling pulls and never reads: the broker's memory stays bounded.

Issue 22, finding 6: 200 pipelined PULL_MESSAGEs (suspendTimeoutMillis=120000) on one
connection that never reads, then one 4 MB message, took the broker's RssAnon from 28 to
810 MB (each woken pull copied the 4 MB body and queued it for a client that never reads).
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_codec import FrameDecoder, encode_bytes
from pumice.remoting.remoting_server import WRITE_HIGH_WATER
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, pull, send

PARKED = 200
BIG = 4_000_000


class BigMessageCluster(Cluster):
    """16 MiB CommitLog segments, so a 4 MB message fits."""

    def start_broker(self):
        conf = self.tmp / "broker.conf"
        conf.write_text(conf.read_text().replace("mapedFileSizeCommitLog=1048576", "mapedFileSizeCommitLog=16777216"))
        return super().start_broker()


def rss_anon_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc status")


def test_parked_pulls_on_a_client_that_never_reads_keep_memory_bounded(tmp_path: Path) -> None:
    cluster = BigMessageCluster(tmp_path)
    sock: socket.socket | None = None
    try:
        pid = cluster.broker.pid
        host, port = cluster.br.split(":")

        async def setup() -> None:
            c = RemotingClient()
            try:  # the topic exists, and queue 0 holds one small message
                r = await c.invoke(cluster.br, send("ParkTopic", b"small", "k0"))
                assert r.code == ResponseCode.SUCCESS, r.remark
            finally:
                await c.close()

        asyncio.run(asyncio.wait_for(setup(), 30))

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # buffer little on our side
        sock.connect((host, int(port)))
        frames = []
        for i in range(PARKED):
            req = pull("ParkTopic", 1, suspend_ms=120_000)
            req.opaque = 1000 + i
            frames.append(encode_bytes(req))
        sock.sendall(b"".join(frames))
        time.sleep(1.0)  # the broker parks them (loopback: milliseconds)
        before = rss_anon_mb(pid)

        async def big_then_serve() -> None:
            c = RemotingClient()
            try:
                r = await c.invoke(cluster.br, send("ParkTopic", b"B" * BIG, "big"), timeout_s=20.0)
                assert r.code == ResponseCode.SUCCESS, r.remark
                # other clients are served meanwhile: a send and a pull of it on another queue
                r = await c.invoke(cluster.br, send("ParkTopic", b"other", "k1", queue_id=1))
                assert r.code == ResponseCode.SUCCESS, r.remark
                for _ in range(50):  # dispatch runs behind the append
                    r = await c.invoke(cluster.br, pull("ParkTopic", 0, queue_id=1, sys_flag=0))
                    if r.code == ResponseCode.SUCCESS:
                        break
                    await asyncio.sleep(0.1)
                assert r.code == ResponseCode.SUCCESS, r.code
            finally:
                await c.close()

        asyncio.run(asyncio.wait_for(big_then_serve(), 60))
        peak = before
        deadline = time.monotonic() + 5.0  # every parked pull has woken well within this
        while time.monotonic() < deadline:
            peak = max(peak, rss_anon_mb(pid))
            time.sleep(0.05)
        print(f"broker RssAnon: {before:.0f} MB with {PARKED} parked pulls, peak {peak:.0f} MB after the message")
        assert peak - before < 200, f"RssAnon grew from {before:.0f} to {peak:.0f} MB"
        assert cluster.broker.poll() is None
        # every parked pull was answered: bodies up to the connection's reply budget, the
        # others a small PULL_RETRY_IMMEDIATELY at their own offset
        sock.settimeout(5)
        dec = FrameDecoder(64 * 1024 * 1024)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < PARKED and time.monotonic() < deadline:
            data = sock.recv(1 << 20)
            assert data, "the broker closed the connection"
            got += dec.feed(data)
        assert sorted(r.opaque for r in got) == [1000 + i for i in range(PARKED)]
        found = sum(r.code == ResponseCode.SUCCESS for r in got)
        assert 1 <= found <= WRITE_HIGH_WATER // BIG + 1, found
        assert sum(r.code == ResponseCode.PULL_RETRY_IMMEDIATELY for r in got) == PARKED - found
    finally:
        if sock is not None:
            sock.close()
        cluster.close()
