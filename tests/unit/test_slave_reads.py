"""Following suggestWhichBrokerId to a slave and back, in the client (pull_kernel) and in
the Spark broker reader (read_range), against fake brokers: one master M and one slave S."""

from __future__ import annotations

import asyncio
import types

import pytest

from pumice.client.client_instance import MQClientInstance
from pumice.client.exceptions import MQBrokerError, RemotingConnectError
from pumice.client.message import MessageQueue, PullResult, PullStatus
from pumice.client.mq_client_api import MQClientAPIImpl
from pumice.client.subscription import build_subscription
from pumice.remoting.response_code import ResponseCode
from pumice.spark.options import BrokerReadOptions

try:  # the Spark reader needs the spark extra; the client's tests below run without it
    from pumice.spark.broker_reader import BrokerPartition, read_range
except ImportError:
    BrokerPartition = read_range = None  # type: ignore[assignment,misc]

needs_spark = pytest.mark.skipif(read_range is None, reason="needs the spark extra: pip install -e '.[spark]'")

M, S = "10.0.0.1:10911", "10.0.0.2:10911"
COMMIT_FLAG = 1


def options() -> BrokerReadOptions:
    return BrokerReadOptions.parse({"namesrv": "127.0.0.1:9876", "topic": "T"})


# -- the Spark reader -------------------------------------------------------------------------


def read_with(monkeypatch: pytest.MonkeyPatch, answer, end: int = 320) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """read_range of queue offsets [0, end) against fake brokers: ``answer(addr, offset,
    max_nums)`` returns a PullResult or raises. Returns the pulls each broker got."""
    calls = {M: 0, S: 0}

    async def pull_message(self, addr, *, offset, max_nums, **kw):  # type: ignore[no-untyped-def]
        calls[addr] += 1
        return answer(addr, offset, max_nums)

    monkeypatch.setattr(MQClientAPIImpl, "pull_message", pull_message)
    assert list(read_range(BrokerPartition("T", "b", 0, 0, end, {0: M, 1: S}), options())) == []
    return calls


@needs_spark
def test_spark_a_slave_that_failed_is_not_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(addr: str, offset: int, max_nums: int) -> PullResult:
        if addr == S:
            raise RemotingConnectError("connect timed out", addr)
        # the master: nothing matches here, 32 offsets on; to a slow reader it says "go to 1"
        return PullResult(PullStatus.NO_MATCHED_MSG, offset + max_nums, 0, 10_000, suggest_which_broker_id=1)

    # a dead slave costs one connect timeout, not one per master pull
    assert read_with(monkeypatch, answer, end=3200) == {M: 100, S: 1}


@needs_spark
def test_spark_a_slaves_min_offset_is_not_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    # a slave with offsetCheckInSlave that lacks old files answers with its own min offset
    def answer(addr: str, offset: int, max_nums: int) -> PullResult:
        if addr == S:
            return PullResult(PullStatus.OFFSET_ILLEGAL, 5000, 5000, 6000, suggest_which_broker_id=0)
        return PullResult(PullStatus.NO_MATCHED_MSG, offset + max_nums, 0, 6000, suggest_which_broker_id=1)

    # the master walked the whole range; the slave's answers moved nothing
    assert read_with(monkeypatch, answer)[M] == 10


@needs_spark
def test_spark_an_odd_suggestion_means_the_master(monkeypatch: pytest.MonkeyPatch) -> None:
    sent_to: list[str] = []

    async def invoke_ok(self, addr, code, ext=None, body=b"", timeout_s=None, ok=()):  # type: ignore[no-untyped-def]
        sent_to.append(addr)
        off = int(ext["queueOffset"])
        return types.SimpleNamespace(
            code=ResponseCode.PULL_NOT_FOUND,
            ext_fields={
                "nextBeginOffset": str(off + 32),
                "minOffset": "0",
                "maxOffset": "9999",
                "suggestWhichBrokerId": "slave-1",
            },
            body=b"",
        )

    monkeypatch.setattr(MQClientAPIImpl, "invoke_ok", invoke_ok)
    list(read_range(BrokerPartition("T", "b", 0, 0, 64, {0: M, 1: S}), options()))
    assert sent_to and set(sent_to) == {M}


# -- the client -------------------------------------------------------------------------------


def _instance() -> MQClientInstance:
    inst = MQClientInstance("127.0.0.1:9876", client_ip="127.0.0.1")
    inst.broker_addr_table["b"] = {0: M, 1: S}
    return inst


def _pull(inst: MQClientInstance, group: str, commit: int | None = 5) -> PullResult:
    async def go() -> PullResult:
        return await inst.pull_kernel(MessageQueue("T", "b", 0), build_subscription("T", "*"), group=group, offset=0,
                                      max_nums=32, commit_offset=commit, suspend_ms=None, timeout_s=1)  # fmt: skip

    return asyncio.run(go())


def test_client_suggestions_are_kept_per_group_and_commits_never_go_to_a_slave(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = _instance()
    seen: list[tuple[str, str, bool]] = []

    async def pull_message(addr, *, group, sys_flag, **kw):  # type: ignore[no-untyped-def]
        seen.append((group, addr, bool(sys_flag & COMMIT_FLAG)))
        # the master sends the slow group A to the slave; B is up to date
        return PullResult(PullStatus.NO_NEW_MSG, kw["offset"], 0, 10, suggest_which_broker_id=1 if group == "A" else 0)

    monkeypatch.setattr(inst.api, "pull_message", pull_message)
    for group in ("A", "B", "A", "B"):
        _pull(inst, group)
    assert seen == [("A", M, True), ("B", M, True), ("A", S, False), ("B", M, True)]


def test_client_goes_back_to_the_master_after_a_slave_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = _instance()
    sent_to: list[str] = []

    async def pull_message(addr, **kw):  # type: ignore[no-untyped-def]
        sent_to.append(addr)
        if addr == S:
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, "store getMessage return null", addr)
        return PullResult(PullStatus.NO_NEW_MSG, kw["offset"], 0, 10, suggest_which_broker_id=1)

    monkeypatch.setattr(inst.api, "pull_message", pull_message)
    for _ in range(6):
        try:
            _pull(inst, "G")
        except MQBrokerError:
            pass
    assert sent_to == [M, S, M, S, M, S]  # the master may send it back; a failure never sticks


@pytest.mark.parametrize(("sent", "broker_id"), [("2", 2), ("0", 0), ("-1", 0), ("slave-1", 0), (None, 0), ("", 0)])
def test_suggest_which_broker_id_parsing(monkeypatch: pytest.MonkeyPatch, sent: str | None, broker_id: int) -> None:
    async def invoke_ok(self, addr, code, ext=None, body=b"", timeout_s=None, ok=()):  # type: ignore[no-untyped-def]
        fields = {"nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}
        if sent is not None:
            fields["suggestWhichBrokerId"] = sent
        return types.SimpleNamespace(code=ResponseCode.PULL_NOT_FOUND, ext_fields=fields, body=b"")

    monkeypatch.setattr(MQClientAPIImpl, "invoke_ok", invoke_ok)

    async def go() -> PullResult:
        return await MQClientAPIImpl().pull_message(
            M, group="G", topic="T", queue_id=0, offset=0, max_nums=1, sys_flag=0
        )

    assert asyncio.run(go()).suggest_which_broker_id == broker_id


def test_a_suggested_slave_id_that_is_gone_falls_to_the_next_id_then_the_master() -> None:
    inst = _instance()
    inst.broker_addr_table["b"] = {0: M, 2: S}  # no slave 1 deployed, slave 2 is
    assert inst.find_broker_addr("b", 1) == S
    assert inst.find_broker_addr("b", 1, only_this_broker=False) == S
    assert inst.find_broker_addr("b", 3) is None
    assert inst.find_broker_addr("b", 3, only_this_broker=False) == M
    assert inst.find_broker_addr("b", 0) == M


@needs_spark
def test_spark_reads_on_from_a_slave_when_the_master_goes_down(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(addr: str, offset: int, max_nums: int) -> PullResult:
        if addr == M:
            raise RemotingConnectError("connection refused", addr)
        return PullResult(PullStatus.NO_MATCHED_MSG, offset + max_nums, 0, 6000, suggest_which_broker_id=0)

    # the slave's suggestion of the failed master is not followed
    assert read_with(monkeypatch, answer) == {M: 1, S: 10}


@needs_spark
def test_spark_raises_when_master_and_slave_are_down(monkeypatch: pytest.MonkeyPatch) -> None:
    async def pull_message(self, addr, **kw):  # type: ignore[no-untyped-def]
        raise RemotingConnectError("connection refused", addr)

    monkeypatch.setattr(MQClientAPIImpl, "pull_message", pull_message)
    with pytest.raises(RemotingConnectError):
        list(read_range(BrokerPartition("T", "b", 0, 0, 320, {0: M, 1: S}), options()))


@needs_spark
def test_spark_a_masters_own_error_is_not_read_around(monkeypatch: pytest.MonkeyPatch) -> None:
    async def pull_message(self, addr, **kw):  # type: ignore[no-untyped-def]
        if addr == M:
            raise MQBrokerError(ResponseCode.TOPIC_NOT_EXIST, "topic[T] not exist", addr)
        raise AssertionError("the slave must not be asked")

    monkeypatch.setattr(MQClientAPIImpl, "pull_message", pull_message)
    with pytest.raises(MQBrokerError):
        list(read_range(BrokerPartition("T", "b", 0, 0, 320, {0: M, 1: S}), options()))
