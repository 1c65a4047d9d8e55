"""A failed sync of a store file (issue 18, point 4b): never acknowledged, never forgotten.

RocketMQ 4.9 logs a failed ``force()`` and moves ``flushedPosition`` on. Pumice keeps the
flushed position (of the file and of its queue) where the disk last confirmed, marks
FLUSH_FAILED in the store's RunningFlags (``runningFlags`` in GET_BROKER_RUNTIME_INFO), logs
one ERROR line naming the file, the offsets that may not be on disk and the OS error, answers
the SYNC_FLUSH waiters FLUSH_DISK_TIMEOUT and refuses later puts with SERVICE_NOT_AVAILABLE.

Recovery: the mark holds until a restart, even once syncs succeed again. After a failed
fsync Linux marks the pages it could not write clean (or drops them), so a later sync that
succeeds says nothing about them; a restart recovers from the files (the abort file stays).
These tests show the store staying put with the fault gone, then a restart that serves every
acknowledged message and takes (and syncs) writes again. Faults come from ``disk_io.FAULTS``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from collections.abc import Iterator

import pytest

from pumice.broker.admin_broker_processor import AdminBrokerProcessor
from pumice.broker.broker_config import BrokerConfig
from pumice.broker.consumer_manager import ConsumerManager
from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.send_message_processor import SendMessageProcessor
from pumice.broker.subscription_group_manager import SubscriptionGroupManager
from pumice.broker.topic_config_manager import TopicConfig, TopicConfigManager
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_server import ProcessorPool, RemotingServer
from pumice.remoting.response_code import ResponseCode
from pumice.store import DefaultMessageStore, FlushDiskType, MessageExtBrokerInner, PutMessageStatus
from pumice.store.disk_io import FAULTS, StoreIOError
from pumice.store.mapped_file import MappedFile, offset_to_file_name
from pumice.store.message_store_config import MessageStoreConfig
from pumice.store.running_flags import FLUSH_FAILED_BIT
from tests.helpers.store import opened, read_queue, small_config
from tests.helpers.waiting import wait_dispatched, wait_until

STILL_S = 0.3  # with the fault gone: ~30 group commits (10 ms), several ASYNC flushes (10 ms)


@pytest.fixture(autouse=True)
def no_faults_left() -> Iterator[None]:
    FAULTS.clear()
    yield
    FAULTS.clear()


def msg(i: int, queue_id: int = 0) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic="T", body=b"f%05d" % i * 30, queue_id=queue_id, properties={"KEYS": f"k{i}"})


def sync_config(root: str) -> MessageStoreConfig:
    return small_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=5000)


def async_config(root: str) -> MessageStoreConfig:
    return small_config(
        root,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        flush_interval_commit_log=10,
        flush_commit_log_thorough_interval=50,
    )


def tb_depth(e: BaseException) -> int:
    n, tb = 0, e.__traceback__
    while tb is not None:
        n, tb = n + 1, tb.tb_next
    return n


def sync_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and "msync" in r.getMessage()]


# -- MappedFile and its queue ------------------------------------------------------------------


def test_a_failed_sync_keeps_the_flushed_position_and_names_the_range(tmp_path) -> None:
    base = 65536
    mf = MappedFile(str(tmp_path / offset_to_file_name(base)), 65536)
    try:
        mf.append_message(b"a" * 5000)
        assert mf.flush(0) == 5000
        mf.append_message(b"b" * 3000)
        FAULTS.fail("msync", errno.EIO)
        with pytest.raises(StoreIOError) as e:
            mf.flush(0)
        assert mf.flushed_position == 5000
        text = str(e.value)
        assert mf.file_name in text and os.strerror(errno.EIO) in text
        assert f"[{base + 5000}, {base + 8000})" in text and "[5000, 8000)" in text
        assert e.value.errno == errno.EIO and e.value.op == "msync"
        # the fault is gone: the file still refuses to flush (sticky), and names the same range
        FAULTS.clear()
        raised = []
        for _ in range(30):
            with pytest.raises(StoreIOError) as again:
                mf.flush(0)
            raised.append(again.value)
        assert mf.flushed_position == 5000
        assert all(str(r) == text for r in raised)
        # each raise is a new exception: one kept object raised again would chain its traceback for ever
        assert len({id(r) for r in raised}) == len(raised)
        assert tb_depth(raised[-1]) == tb_depth(raised[0])
        assert mf.io_error is not None and mf.io_error.__traceback__ is None
    finally:
        mf.destroy(0)


def test_a_failed_force_names_the_whole_file(tmp_path) -> None:
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 8192)
    try:
        mf.append_message(b"x" * 100)
        FAULTS.fail("msync", errno.EIO, times=1)
        with pytest.raises(StoreIOError, match=r"\[0, 8192\)"):
            mf.force()
        with pytest.raises(StoreIOError, match=r"\[0, 8192\)"):
            mf.force()  # the fault is spent; the file still refuses
    finally:
        mf.destroy(0)


# -- the store -------------------------------------------------------------------------------


def test_sync_flush_failure_refuses_logs_once_and_holds_until_a_restart(tmp_path, caplog) -> None:
    cfg = sync_config(str(tmp_path / "s"))
    caplog.set_level(logging.ERROR)
    with opened(cfg) as s:
        mfq = s.commit_log.mapped_file_queue
        acked = []
        for i in range(5):
            r = s.put_message(msg(i))
            assert r.status is PutMessageStatus.PUT_OK
            acked.append(msg(i).body)
        synced = mfq.flushed_where
        assert synced == s.commit_log.get_max_offset()
        FAULTS.fail("msync", errno.EIO, match="/commitlog/")
        t0 = time.monotonic()
        r = s.put_message(msg(5))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT, r  # stored, not durable: never PUT_OK
        assert time.monotonic() - t0 < 2.0  # told at once, not after syncFlushTimeout
        assert s.running_flags.flag_bits & FLUSH_FAILED_BIT
        assert not s.running_flags.is_writeable()
        assert mfq.flushed_where == synced
        mf = mfq.find_mapped_file_by_offset(synced)
        assert mf is not None and mf.flushed_position == synced - mf.file_from_offset
        refused = s.put_message(msg(6))
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "FLUSH_FAILED" in refused.remark and "restart" in refused.remark
        stored = r.append_message_result
        assert s.commit_log.get_max_offset() == stored.wrote_offset + stored.wrote_bytes  # nothing appended

        # the fault goes away: the store does not forget (a sync that succeeds now proves nothing)
        FAULTS.clear()
        time.sleep(STILL_S)
        assert s.running_flags.is_flush_failed() and mfq.flushed_where == synced
        assert s.put_message(msg(7)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert s.commit_log.flush_service._thread.is_alive()
        wait_dispatched(s)
        assert read_queue(s, "T", 0)[:5] == acked  # reads go on
        lines = sync_errors(caplog)
        assert len(lines) == 1, lines  # one line, though the group commit retried every 10 ms
        assert mf.file_name in lines[0] and os.strerror(errno.EIO) in lines[0]
        assert f"[{synced}, " in lines[0] and "restart" in lines[0]
    assert os.path.exists(cfg.abort_path)  # the next start recovers from the files

    with opened(cfg) as s2:
        assert not s2.last_exit_ok and s2.running_flags.describe() == "OK"
        ok = s2.put_message(msg(8))
        assert ok.status is PutMessageStatus.PUT_OK  # SYNC_FLUSH: synced before it was acknowledged
        amr = ok.append_message_result
        assert s2.commit_log.mapped_file_queue.flushed_where >= amr.wrote_offset + amr.wrote_bytes
        wait_dispatched(s2)
        bodies = read_queue(s2, "T", 0)
        assert bodies[:5] == acked and bodies[-1] == msg(8).body
        assert amr.logics_offset == len(bodies) - 1  # no gap before it


def test_async_flush_failure_keeps_what_was_acknowledged(tmp_path) -> None:
    cfg = async_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        mfq = s.commit_log.mapped_file_queue
        assert s.put_message(msg(0)).status is PutMessageStatus.PUT_OK
        wait_until(lambda: mfq.flushed_where == s.commit_log.get_max_offset(), 3.0, "the first flush")
        synced = mfq.flushed_where
        FAULTS.fail("msync", errno.EIO, match="/commitlog/")
        # ASYNC_FLUSH acknowledges before the flush: these are in the page cache only (one put, so
        # no flush can fail between them; with nothing new to flush, no sync is tried)
        assert s.put_messages([msg(1), msg(2), msg(3)]).status is PutMessageStatus.PUT_OK
        acked = [msg(i).body for i in range(4)]
        wait_until(lambda: s.running_flags.is_flush_failed(), 3.0, "the failed flush marked")
        assert mfq.flushed_where == synced < s.commit_log.get_max_offset()
        assert s.put_message(msg(9)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        FAULTS.clear()
        time.sleep(STILL_S)
        assert s.running_flags.is_flush_failed() and mfq.flushed_where == synced
        wait_dispatched(s)
        assert read_queue(s, "T", 0) == acked
    with opened(cfg) as s2:
        assert s2.running_flags.describe() == "OK"
        assert s2.put_message(msg(10)).status is PutMessageStatus.PUT_OK
        end = s2.commit_log.get_max_offset()
        wait_until(lambda: s2.commit_log.mapped_file_queue.flushed_where == end, 3.0, "a flush over the new data")
        wait_dispatched(s2)
        assert read_queue(s2, "T", 0) == [*acked, msg(10).body]


def test_a_consume_queue_sync_failure_marks_the_store_and_keeps_its_flushed_where(tmp_path) -> None:
    cfg = small_config(
        str(tmp_path / "s"), flush_disk_type=FlushDiskType.ASYNC_FLUSH, flush_interval_consume_queue=10,
        flush_consume_queue_least_pages=0,
    )  # fmt: skip
    with opened(cfg) as s:
        assert s.put_message(msg(0)).status is PutMessageStatus.PUT_OK
        wait_dispatched(s)
        cq = s.find_consume_queue("T", 0)
        wait_until(lambda: cq.mapped_file_queue.flushed_where > 0, 3.0, "the first ConsumeQueue flush")
        cq_synced = cq.mapped_file_queue.flushed_where
        FAULTS.fail("msync", errno.EIO, match="/consumequeue/")
        assert s.put_message(msg(1)).status is PutMessageStatus.PUT_OK
        wait_until(lambda: s.running_flags.is_flush_failed(), 3.0, "the failed ConsumeQueue flush marked")
        assert cq.mapped_file_queue.flushed_where == cq_synced
        r = s.put_message(msg(2))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "FLUSH_FAILED" in r.remark
    with opened(cfg) as s2:  # recovery rebuilds the queue from the CommitLog
        assert s2.running_flags.describe() == "OK"
        assert s2.put_message(msg(3)).status is PutMessageStatus.PUT_OK
        wait_dispatched(s2)
        assert read_queue(s2, "T", 0) == [msg(0).body, msg(1).body, msg(3).body]


def test_runtime_info_shows_the_flush_failure(tmp_path) -> None:
    cfg = sync_config(str(tmp_path / "s"))
    with opened(cfg) as s:
        d = cfg.config_dir
        proc = AdminBrokerProcessor(
            s, TopicConfigManager(f"{d}/topics.json", "b", "c"), SubscriptionGroupManager(f"{d}/groups.json"),
            ConsumerOffsetManager(f"{d}/offsets.json"), ConsumerManager(), BrokerConfig(), cfg, lambda: None,
        )  # fmt: skip
        assert proc.runtime_info()["runningFlags"] == "OK"
        FAULTS.fail("msync", errno.EIO, match="/commitlog/")
        assert s.put_message(msg(0)).status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert proc.runtime_info()["runningFlags"] == "FLUSH_FAILED"


# -- through the broker's send processor --------------------------------------------------------


class Topics:
    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return TopicConfig(topic, 4, 4) if topic == "T" else None

    def is_order_topic(self, topic: str) -> bool:
        return False

    def create_topic_in_send_message_method(self, *args: object) -> None:
        return None

    def unsaved_topic_cause(self, topic: str) -> str | None:
        return None

    def retry_persist(self) -> bool | None:
        return None


def send(key: str) -> RemotingCommand:
    return RemotingCommand(code=10, body=key.encode() * 10, ext_fields={
        "producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4, "queueId": 0,
        "sysFlag": 0, "bornTimestamp": str(int(time.time() * 1000)), "flag": 0,
        "properties": f"KEYS\x01{key}\x02WAIT\x01true\x02",
    })  # fmt: skip


def test_a_send_is_answered_flush_disk_timeout_then_service_not_available(tmp_path) -> None:
    store = DefaultMessageStore(sync_config(str(tmp_path / "s")))
    assert store.load()
    store.start()

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)
        proc = SendMessageProcessor(store, Topics(), store_host="127.0.0.1:10911", cluster_name="DefaultCluster")
        server.register_processor(10, proc, ProcessorPool("send", 4, 100))
        await server.start()
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        try:
            r = await client.invoke(addr, send("before"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            FAULTS.fail("msync", errno.EIO, match="/commitlog/")
            r = await client.invoke(addr, send("during"))
            assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT, (r.code, r.remark)  # not SEND_OK
            r = await client.invoke(addr, send("refused"))
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "FLUSH_FAILED" in (r.remark or ""), r.remark
            FAULTS.clear()
            await asyncio.sleep(STILL_S)
            r = await client.invoke(addr, send("still"))
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "restart" in (r.remark or ""), r.remark
        finally:
            await client.close()
            await server.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        store.shutdown()
