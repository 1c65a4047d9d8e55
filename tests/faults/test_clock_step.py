"""A clock stepped back must not hold delayed messages for the step (issue 22, point 7).

Delayed messages are stored with the real clock, then the broker is restarted with its clock
an hour back (libfaketime, Debian's ``faketime``; the monotonic clock is left alone). Their due
times now lie an hour plus their delay ahead, further than their level's delay: RocketMQ's
``correctDeliverTimestamp`` delivers them at once, and so must Pumice (it held them the hour).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from pumice.client.message import decode_messages
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, pull, send, start, stop

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
TOPIC = "ClockTopic"
N = 20


class SteppedCluster(Cluster):
    """A cluster whose broker, once ``step`` is set, runs with its clock that far off."""

    step: str | None = None

    def start_broker(self):  # type: ignore[no-untyped-def]
        env = None
        if self.step is not None:
            env = {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": self.step, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        return start(["broker", "-c", str(self.tmp / "broker.conf")], "boot success", env)


@pytest.mark.faults
def test_delayed_messages_are_not_held_by_a_clock_stepped_back(tmp_path: Path) -> None:
    if not os.path.exists(LIBFAKETIME):
        pytest.skip(f"{LIBFAKETIME} is missing (Debian package faketime; .ci/run installs it)")
    cluster = SteppedCluster(tmp_path)
    try:

        async def produce() -> None:
            c = RemotingClient()
            try:
                for i in range(N):
                    req = send(TOPIC, b"delayed-%02d" % i, f"k{i}")
                    req.ext_fields["i"] += "\x02DELAY\x013"  # level 3: 10 s
                    r = await c.invoke(cluster.br, req)
                    assert r.code == ResponseCode.SUCCESS, r.remark
            finally:
                await c.close()

        asyncio.run(asyncio.wait_for(produce(), 30))
        stop(cluster.broker)
        cluster.step = "-1h"
        cluster.broker = cluster.start_broker()

        async def consume() -> list[bytes]:
            got: list[bytes] = []
            c = RemotingClient()
            deadline = time.monotonic() + 25  # 10 s of delay would do; an hour's hold fails
            try:
                while len(got) < N and time.monotonic() < deadline:
                    r = await c.invoke(cluster.br, pull(TOPIC, len(got), suspend_ms=1000), 10)
                    if r.code == ResponseCode.SUCCESS:
                        got += [m.body for m in decode_messages(r.body)]
                    else:
                        await asyncio.sleep(0.2)
            finally:
                await c.close()
            return got

        t0 = time.monotonic()
        got = asyncio.run(asyncio.wait_for(consume(), 60))
        assert got == [b"delayed-%02d" % i for i in range(N)], f"{len(got)} of {N} delivered"
        assert time.monotonic() - t0 < 20
    finally:
        cluster.close()
