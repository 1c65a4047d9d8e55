"""The Spark broker reader's pulls (read_range): unfiltered ranges are pulled as windows several
at once and handed on in queue order; a filtered range is pulled one answer at a time; an answer
that skips past its window is cut at the window's end. Against a fake broker with latency."""

from __future__ import annotations

import asyncio

import pytest

from pumice.client.message import PullResult, PullStatus
from pumice.client.mq_client_api import MQClientAPIImpl
from pumice.common.message_decoder import encode_record
from pumice.spark.options import BrokerReadOptions, OptionError

pytest.importorskip("pyspark")
from pumice.spark.broker_reader import BrokerPartition, read_range

ADDR = "10.0.0.1:10911"
QUEUE_END = 1000


def record(offset: int) -> bytes:
    return encode_record(body=b"m%d" % offset, topic="T", properties={"TAGS": "A" if offset % 2 else "B"},
                         queue_offset=offset)  # fmt: skip


class FakeBroker:
    """Answers a pull of [offset, offset + max_nums) after a delay; ``skip`` maps an offset to
    the offset its answer jumps to (entries whose records are gone), with the records after it."""

    def __init__(self, skip: dict[int, int] | None = None) -> None:
        self.in_flight = self.most_in_flight = self.pulls = 0
        self.skip = skip or {}

    async def pull(self, offset: int, max_nums: int, subscription: str) -> PullResult:
        self.pulls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.002)
        finally:
            self.in_flight -= 1
        if offset >= QUEUE_END:
            return PullResult(PullStatus.NO_NEW_MSG, offset, 0, QUEUE_END)
        first = self.skip.get(offset, offset)
        wanted = (lambda o: True) if subscription == "*" else (lambda o: o % 2 == 1)  # tag A
        found: list[int] = []
        o = first
        while o < QUEUE_END and len(found) < max_nums:  # as the broker: up to max_nums matches
            if wanted(o):
                found.append(o)
            o += 1
        if not found:
            return PullResult(PullStatus.NO_MATCHED_MSG, o, 0, QUEUE_END)
        return PullResult(PullStatus.FOUND, o, 0, QUEUE_END, raw_body=b"".join(record(x) for x in found))


def read(monkeypatch: pytest.MonkeyPatch, broker: FakeBroker, start: int, end: int, **options: str) -> list[int]:
    async def pull_message(self, addr, *, offset, max_nums, subscription, **kw):  # type: ignore[no-untyped-def]
        assert addr == ADDR
        return await broker.pull(offset, max_nums, subscription)

    monkeypatch.setattr(MQClientAPIImpl, "pull_message", pull_message)
    opts = BrokerReadOptions.parse({"namesrv": "127.0.0.1:9876", "topic": "T", **options})
    offsets: list[int] = []
    for batch in read_range(BrokerPartition("T", "b", 0, start, end, {0: ADDR}), opts):
        offsets += batch.column("queueOffset").to_pylist()
    return offsets


def test_unfiltered_windows_are_pulled_several_at_once_and_come_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = FakeBroker()
    assert read(monkeypatch, broker, 5, 905) == list(range(5, 905))
    assert broker.most_in_flight == 16  # the default pullsInFlight
    assert broker.pulls == 29  # 900 offsets, 32 a window: no pull past the range's end


def test_pulls_in_flight_one_pulls_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = FakeBroker()
    assert read(monkeypatch, broker, 0, 300, pullsInFlight="1") == list(range(300))
    assert broker.most_in_flight == 1


def test_a_filtered_read_goes_on_from_where_each_answer_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = FakeBroker()
    # each answer scans 64 offsets for 32 matches: windows of 32 offsets would overlap
    assert read(monkeypatch, broker, 0, 600, subExpression="A") == list(range(1, 600, 2))
    assert broker.most_in_flight == 1
    assert broker.pulls == 10


def test_an_answer_that_skips_past_its_window_is_cut_at_the_window_end(monkeypatch: pytest.MonkeyPatch) -> None:
    # the pull at 64 finds 64..67 gone and answers 68..99; the window [96, 128) answers 96.. itself
    broker = FakeBroker(skip={64: 68})
    got = read(monkeypatch, broker, 0, 256)
    assert got == [o for o in range(256) if not 64 <= o < 68]
    assert len(got) == len(set(got))


def test_a_queue_that_ends_early_ends_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = FakeBroker()
    assert read(monkeypatch, broker, 900, 1200) == list(range(900, 1000))


def test_pulls_in_flight_with_a_tag_filter_is_refused_by_name() -> None:
    with pytest.raises(OptionError, match="pullsInFlight applies to reads without a tag filter"):
        BrokerReadOptions.parse({"namesrv": "127.0.0.1:9876", "topic": "T", "subExpression": "A", "pullsInFlight": "4"})
