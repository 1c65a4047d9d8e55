"""ConsumerManageProcessor over a real store and a real ConsumerOffsetManager."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from pumice.broker.consumer_manage_processor import ConsumerManageProcessor
from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.remoting.remoting_command import MissingFieldError, RemotingCommand
from pumice.remoting.response_code import ResponseCode
from pumice.store import DefaultMessageStore, MessageExtBrokerInner
from pumice.store import message_store as message_store_module
from tests.helpers.fakes import FakeChannel
from tests.helpers.store import small_config
from tests.helpers.waiting import wait_dispatched


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DefaultMessageStore]:
    s = DefaultMessageStore(small_config(str(tmp_path / "s")))
    s.load()
    s.start()
    yield s
    s.shutdown()


def call(proc: ConsumerManageProcessor, code: int, **fields: object) -> RemotingCommand:
    return asyncio.run(proc.process_request(FakeChannel(), RemotingCommand(code=code, ext_fields=fields)))  # type: ignore[arg-type]


def fill(store: DefaultMessageStore, n: int, queue_id: int = 0) -> None:
    for _ in range(n):
        r = store.put_message(MessageExtBrokerInner(topic="T", body=b"x" * 1000, queue_id=queue_id))
        assert r.is_ok()
    wait_dispatched(store)


def test_a_new_group_starts_at_0_only_while_the_first_message_is_in_memory(
    store: DefaultMessageStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = ConsumerManageProcessor(store, ConsumerOffsetManager(str(tmp_path / "offsets.json")))
    fill(store, 10)
    r = call(proc, 14, consumerGroup="G", topic="T", queueId=0)
    assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"offset": 0})  # 10 KB behind: in memory
    # a machine whose accessMessageInMemoryMaxRatio (40%) of RAM is 4,000 bytes: the first
    # message lies ~10 KB behind the CommitLog's end, on disk as far as the rule goes
    monkeypatch.setattr(message_store_module, "_TOTAL_PHYSICAL_MEMORY", 10_000)
    r = call(proc, 14, consumerGroup="G", topic="T", queueId=0)
    assert r.code == ResponseCode.QUERY_NOT_FOUND  # the client then applies consumeFromWhere
    r = call(proc, 14, consumerGroup="G", topic="T", queueId=1)  # an empty queue: nothing to replay
    assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"offset": 0})
    fill(store, 2, queue_id=1)  # its first message is recent
    r = call(proc, 14, consumerGroup="G", topic="T", queueId=1)
    assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"offset": 0})
    call(proc, 15, consumerGroup="G", topic="T", queueId=0, commitOffset=7)
    r = call(proc, 14, consumerGroup="G", topic="T", queueId=0)
    assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"offset": 7})  # a committed offset wins


@pytest.mark.parametrize(
    "fields",
    [{"queueId": "18446744073709551616"}, {"queueId": str(2**31)}, {"commitOffset": "9223372036854775808"}],
    ids=["queue-id-past-long", "queue-id-past-int", "offset-past-long"],
)
def test_an_offset_commit_out_of_java_range_is_refused_and_persisting_goes_on(
    store: DefaultMessageStore, tmp_path: Path, fields: dict[str, str]
) -> None:
    """Such a commit was stored; orjson could not write its key, so consumerOffset.json was
    never written again and every later commit was lost at restart."""
    path = tmp_path / "offsets.json"
    offsets = ConsumerOffsetManager(str(path))
    proc = ConsumerManageProcessor(store, offsets)
    request = {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "1"} | fields
    with pytest.raises(MissingFieldError, match=r"out of the (int|long) range"):
        call(proc, 15, **request)
    assert offsets.offset_table == {}
    assert call(proc, 15, consumerGroup="G", topic="T", queueId="0", commitOffset="77").code == ResponseCode.SUCCESS
    offsets.persist()
    assert orjson.loads(path.read_bytes()) == {"offsetTable": {"T@G": {"0": 77}}}


@pytest.mark.parametrize("code", [14, 15, 29, 30, 31, 32])
def test_a_missing_queue_id_is_an_error_not_queue_0(store: DefaultMessageStore, tmp_path: Path, code: int) -> None:
    """queueId is @CFNotNull in each of these headers upstream; read as 0, a request without
    it answered (or committed) for queue 0."""
    offsets = ConsumerOffsetManager(str(tmp_path / "offsets.json"))
    proc = ConsumerManageProcessor(store, offsets)
    fields = {"consumerGroup": "G", "topic": "T", "commitOffset": "5", "timestamp": "0"}
    with pytest.raises(MissingFieldError, match="queueId"):
        call(proc, code, **fields)
    assert offsets.offset_table == {}
