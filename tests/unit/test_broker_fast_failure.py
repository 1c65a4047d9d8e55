"""BrokerFastFailure over a real RemotingServer: requests waiting for a busy pool's worker are
answered SYSTEM_BUSY with 4.9's remarks once they have waited too long (or at once for sends
while the page cache is busy), and are never run after that."""

from __future__ import annotations

import asyncio
import time

from pumice.broker.broker_fast_failure import BrokerFastFailure
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import ProcessorPool, RemotingServer
from pumice.remoting.response_code import ResponseCode


class Blocking:
    """Answers SUCCESS once ``release`` is set; counts what it ran."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.ran: list[int] = []

    async def process_request(self, channel: object, request: RemotingCommand) -> RemotingCommand:
        self.ran.append(request.opaque)
        await self.release.wait()
        return request.make_response(ResponseCode.SUCCESS)


def scenario(busy: bool, settings: tuple[bool, int, int, int]) -> tuple[list[RemotingCommand], list[int]]:
    async def main() -> tuple[list[RemotingCommand], list[int]]:
        proc = Blocking()
        pools = {"send": ProcessorPool("send", 1, 100, track_waiting=True)}
        server = RemotingServer("127.0.0.1", 0)
        server.register_processor(10, proc, pools["send"])
        await server.start()
        fast = BrokerFastFailure(pools, lambda: settings, lambda: busy)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            calls = [asyncio.create_task(client.invoke(addr, RemotingCommand(code=10), 10)) for _ in range(3)]
            await asyncio.sleep(0.3)  # the first runs; two wait for the one worker
            fast.clean_expired_request()
            await asyncio.sleep(0.1)
            proc.release.set()
            answers = await asyncio.gather(*calls)
            return answers, [len(proc.ran)]
        finally:
            await client.close()
            await server.close()

    return asyncio.run(asyncio.wait_for(main(), 30))


def test_requests_that_waited_too_long_are_answered_busy_and_never_run() -> None:
    answers, ran = scenario(busy=False, settings=(True, 200, 5000, 31000))
    codes = sorted(a.code for a in answers)
    assert codes == [ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY, ResponseCode.SYSTEM_BUSY]
    busy = [a.remark for a in answers if a.code == ResponseCode.SYSTEM_BUSY]
    assert all(r.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ")
               for r in busy), busy  # fmt: skip
    assert ran == [1]  # the two answered were not run when the worker came free


def test_young_requests_wait_unless_the_page_cache_is_busy_or_it_is_off() -> None:
    answers, ran = scenario(busy=False, settings=(True, 10_000, 5000, 31000))
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 3 and ran == [3]
    answers, ran = scenario(busy=True, settings=(True, 10_000, 5000, 31000))
    busy = [a.remark for a in answers if a.code == ResponseCode.SYSTEM_BUSY]
    assert len(busy) == 2 and all(r.startswith("[PCBUSY_CLEAN_QUEUE]broker busy") for r in busy) and ran == [1]
    answers, ran = scenario(busy=True, settings=(False, 0, 0, 0))  # brokerFastFailureEnable=false
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 3 and ran == [3]


def test_the_cleaner_sleeps_while_nothing_waits_and_answers_a_request_that_starts_waiting() -> None:
    """4.9 cleans every 10 ms; an idle broker's loop woke 100 times a second for it. ``run``
    looks only while a request waits for a worker, and then still every 10 ms."""

    async def main() -> tuple[int, list[RemotingCommand], float]:
        proc = Blocking()
        pools = {"send": ProcessorPool("send", 1, 100, track_waiting=True)}
        server = RemotingServer("127.0.0.1", 0)
        server.register_processor(10, proc, pools["send"])
        await server.start()
        looks: list[int] = []

        def settings() -> tuple[bool, int, int, int]:
            looks.append(1)
            return (True, 100, 5000, 31000)

        fast = BrokerFastFailure(pools, settings, lambda: False)
        cleaner = asyncio.create_task(fast.run())
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            await asyncio.sleep(0.5)
            idle_looks = len(looks)
            t0 = time.monotonic()
            calls = [asyncio.create_task(client.invoke(addr, RemotingCommand(code=10), 10)) for _ in range(2)]
            busy = await asyncio.wait_for(asyncio.shield(calls[1]), 5)  # the second waits for the one worker
            took = time.monotonic() - t0
            proc.release.set()
            first = await calls[0]
            return idle_looks, [first, busy], took
        finally:
            cleaner.cancel()
            await client.close()
            await server.close()

    idle_looks, answers, took = asyncio.run(asyncio.wait_for(main(), 30))
    assert idle_looks <= 2  # 50 in half a second when it polled every 10 ms
    assert [a.code for a in answers] == [ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY]
    assert answers[1].remark.startswith("[TIMEOUT_CLEAN_QUEUE]")
    assert took < 1.0  # answered soon after its 100 ms in the queue


def test_with_fast_failure_off_the_waiting_list_keeps_only_what_still_waits() -> None:
    # brokerFastFailureEnable=false: requests that waited and then ran leave the list at the next
    # tick (they stayed for ever: the list grew with every request that ever waited, and the
    # cleaner never slept again)
    async def main() -> tuple[int, int]:
        proc = Blocking()
        pool = ProcessorPool("send", 1, 100, track_waiting=True)
        server = RemotingServer("127.0.0.1", 0)
        server.register_processor(10, proc, pool)
        await server.start()
        fast = BrokerFastFailure({"send": pool}, lambda: (False, 200, 5000, 31000), lambda: False)
        cleaner = asyncio.create_task(fast.run())
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            calls = [asyncio.create_task(client.invoke(addr, RemotingCommand(code=10), 10)) for _ in range(5)]
            await asyncio.sleep(0.3)  # one runs, four wait
            assert pool.waiting is not None
            waiting_then = len(pool.waiting)
            proc.release.set()
            answers = await asyncio.gather(*calls)
            assert all(a.code == ResponseCode.SUCCESS for a in answers)
            await asyncio.sleep(0.2)  # a tick or more
            return waiting_then, len(pool.waiting)
        finally:
            cleaner.cancel()
            await client.close()
            await server.close()

    waiting_then, waiting_after = asyncio.run(asyncio.wait_for(main(), 30))
    assert waiting_then == 4
    assert waiting_after == 0
