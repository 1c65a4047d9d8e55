"""A clock stepped back must neither hold delayed messages for the step nor release them early.

``test_delayed_messages_are_not_held_by_a_clock_stepped_back`` (issue 22, point 7): delayed
messages are stored with the real clock, then the broker is restarted with its clock an hour
back (libfaketime, Debian's ``faketime``; the monotonic clock is left alone). Their due times
now lie an hour plus their delay ahead, further than their level's delay: they must not wait
the hour (RocketMQ's ``correctDeliverTimestamp`` delivers them at once; Pumice within their
level's delay).

``test_a_small_step_back_does_not_release_long_delays`` (issue 30, point 8): the running
broker's clock steps back 5 s (libfaketime reading its offset from a file) right after 2-hour
and 10-second messages were stored. Upstream's correction released them all at once; the
10-second ones must come about 10 s after they were sent, the 2-hour ones not at all.
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
    """A cluster whose broker, once ``step`` is set, runs with its clock that far off; with
    ``step_file``, with the offset that file holds (re-read every second: ``step_to``)."""

    step: str | None = None

    def __init__(self, tmp: Path, live_steps: bool = False) -> None:
        self.step_file = tmp / "faketime-offset" if live_steps else None
        super().__init__(tmp)

    def start_broker(self):  # type: ignore[no-untyped-def]
        env = None
        if self.step is not None:
            env = {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": self.step, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        elif self.step_file is not None:
            self.step_file.write_text("+0\n")
            env = {"LD_PRELOAD": LIBFAKETIME, "FAKETIME_TIMESTAMP_FILE": str(self.step_file),
                   "FAKETIME_CACHE_DURATION": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}  # fmt: skip
        return start(["broker", "-c", str(self.tmp / "broker.conf")], "boot success", env)

    def step_to(self, offset: str) -> None:
        assert self.step_file is not None
        self.step_file.write_text(offset + "\n")


async def pull_all(c: RemotingClient, br: str, topic: str, have: int) -> list[bytes]:
    """The messages of ``topic``'s queue 0 from offset ``have`` (none when the topic is not there yet)."""
    r = await c.invoke(br, pull(topic, have, sys_flag=0), 10)  # not held: answered at once
    return [m.body for m in decode_messages(r.body)] if r.code == ResponseCode.SUCCESS else []


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


@pytest.mark.faults
def test_a_small_step_back_does_not_release_long_delays(tmp_path: Path) -> None:
    if not os.path.exists(LIBFAKETIME):
        pytest.skip(f"{LIBFAKETIME} is missing (Debian package faketime; .ci/run installs it)")
    cluster = SteppedCluster(tmp_path, live_steps=True)
    try:

        async def scenario() -> tuple[list[bytes], list[bytes], float]:
            c = RemotingClient()
            try:
                for topic, level, n in (("LongTopic", 18, 3), ("ShortTopic", 3, 3)):  # 2 h, 10 s
                    for i in range(n):
                        req = send(topic, b"%s-%d" % (topic.encode(), i), f"k{i}")
                        req.ext_fields["i"] += f"\x02DELAY\x01{level}"
                        r = await c.invoke(cluster.br, req)
                        assert r.code == ResponseCode.SUCCESS, r.remark
                sent = time.monotonic()
                cluster.step_to("-5")  # the broker reads it within 1 s
                short: list[bytes] = []
                long: list[bytes] = []
                deadline = sent + 25  # the 10 s ones are due 10 s after they were sent
                while len(short) < 3 and time.monotonic() < deadline:
                    short += await pull_all(c, cluster.br, "ShortTopic", len(short))
                    long += await pull_all(c, cluster.br, "LongTopic", len(long))
                    await asyncio.sleep(0.2)
                short_after = time.monotonic() - sent
                long += await pull_all(c, cluster.br, "LongTopic", len(long))
                return short, long, short_after
            finally:
                await c.close()

        short, long, short_after = asyncio.run(asyncio.wait_for(scenario(), 60))
        print(f"after a 5 s step back: the 10 s messages came {short_after:.1f} s after they were sent; "
              f"{len(long)} of 3 2-hour messages released")  # fmt: skip
        assert long == [], "2-hour messages released by a 5 s step back"
        assert short == [b"ShortTopic-%d" % i for i in range(3)], f"{len(short)} of 3 10-second messages delivered"
        # due 10 s after they were sent, at most the step (and the 1 s the broker takes to see it) later
        assert 8 <= short_after < 18, f"10-second messages delivered {short_after:.1f} s after they were sent"
    finally:
        cluster.close()
