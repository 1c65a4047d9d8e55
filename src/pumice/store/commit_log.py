"""CommitLog: the one append-only log that holds every message of every topic.

The log is a MappedFileQueue under ``commitlog/`` whose files are named by the offset of
their first byte (20 digits). Records use the format in ``message_decoder`` (RocketMQ 4.9).
A record never spans two files: when ``msgLen + 8`` would pass the end of the current file,
an 8-byte blank record (remaining size, 0xcbd43194) fills the file and the message goes to
the next one.

Appends are serialised by ``put_message_lock``. Everything that can be done before the lock
(topic and properties encoding, CRC, size checks, the records themselves) is; under the lock
the queue offset, physical offset and store time are patched into the batch with
``pack_into`` and it is copied into the map (or a transient pool buffer) in one go. A batch
never spans two files, and the file's write pointer moves once per batch, so a reader sees
whole batches. Flushing is the flush services' job (GroupCommitService, FlushRealTimeService,
CommitRealTimeService); recovery scans are here.

``topic_queue_table`` maps (topic, queueId) to the next logical offset of that queue.
PREPARED and ROLLBACK transaction records take offset 0 and do not advance it.
"""

from __future__ import annotations

import errno
import logging
import mmap
import multiprocessing
import os
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError

from pumice.common.java_hash import tags_code as _tags_code
from pumice.common.message import HostAddress, MessageExtBatch, MessageExtBrokerInner
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    QUEUE_OFFSET_OFFSET,
    STORE_TIMESTAMP_OFFSETS,
    Buffer,
    encode_batch_records,
    encode_record_parts,
    get_property,
    head_struct,
    java_properties_string,
    message_properties_to_string,
    pickup_store_timestamp,
)
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC
from pumice.native import NATIVE
from pumice.store.allocate_mapped_file_service import AllocateMappedFileService
from pumice.store.commit_real_time_service import CommitRealTimeService
from pumice.store.disk_io import StoreIOError
from pumice.store.dispatch_request import DispatchRequest
from pumice.store.flush_real_time_service import FlushRealTimeService
from pumice.store.group_commit_service import GroupCommitRequest, GroupCommitService
from pumice.store.mapped_file import OS_PAGE_SIZE, MappedFile, SelectMappedBufferResult
from pumice.store.mapped_file_queue import MappedFileQueue
from pumice.store.message_check import CheckResult, check_message_and_return_size, scan_records
from pumice.store.message_store_config import FlushDiskType, MessageStoreConfig, parse_delay_levels
from pumice.store.put_message_result import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)
from pumice.store.recovery_progress import RecoveryProgress
from pumice.store.store_checkpoint import StoreCheckpoint

log = logging.getLogger(__name__)
_native_encode_record = NATIVE.encode_record_bytes if NATIVE is not None else None

_BLANK = struct.Struct(">iI")
_TRAN_MASK = MessageSysFlag.TRANSACTION_MASK
_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_JAVA_INT = re.compile(r"[+-]?[0-9]{1,10}")
_DELAYABLE_TYPES = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
_NO_OFFSET_TYPES = (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_FD_LIMIT = (errno.EMFILE, errno.ENFILE)
_LONG = struct.Struct(">q")
_OFFSETS = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET (at QUEUE_OFFSET_OFFSET)


class _Illegal(Exception):
    def __init__(self, status: PutMessageStatus, remark: str) -> None:
        self.status = status
        self.remark = remark


def _create_failed(why: OSError | None) -> PutMessageResult:
    # a new object each time: callers may change a result's status
    if why is not None and why.errno in _DISK_FULL:
        return _space_refused(f"cannot create a CommitLog file: {why}")
    reason = f": {why}" if why is not None else ""
    if why is not None and why.errno in _FD_LIMIT:
        reason += " (the process is out of file descriptors; raise its limit, ulimit -n)"
    return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark=f"cannot create a CommitLog file{reason}")


def _space_refused(why: str) -> PutMessageResult:
    return PutMessageResult(
        PutMessageStatus.SERVICE_NOT_AVAILABLE,
        remark=f"the message store is not writeable (DISK_FULL): {why}; writes resume when space is freed",
    )


PARALLEL_SCAN_MIN_BYTES = 512 << 20


def _scan_file(args: tuple[str, int, bool]) -> tuple[int, int, bool]:
    """``scan_records`` over one whole CommitLog file, in a worker process."""
    path, size, check_crc = args
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
        return scan_records(mm, 0, size, check_crc)


_V6_FLAGS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG


def _host_flags(sys_flag: int, born_host: HostAddress, store_host: HostAddress) -> int:
    """``sys_flag`` with the IPv6 bits set from the hosts' address lengths (they size the record)."""
    sf = sys_flag & ~_V6_FLAGS
    if len(born_host[0]) == 16:
        sf |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store_host[0]) == 16:
        sf |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return sf


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class CommitLog:
    def __init__(
        self,
        config: MessageStoreConfig,
        allocate_service: AllocateMappedFileService | None,
        *,
        transient_pool: bool = False,
        on_io_error: Callable[[StoreIOError], None] = lambda e: None,
        on_commit_ok: Callable[[], None] = lambda: None,
        space_ok: Callable[[], bool] = lambda: True,
        on_committed: Callable[[], None] | None = None,
    ) -> None:
        """``on_io_error``: told of a failed reservation or sync (the store marks itself), on
        the failing thread; ``on_commit_ok``: every buffered append is in its file again after
        a failed write; ``space_ok``: the store's disk check, asked before each new chunk of a
        file is reserved (False, and the store marked full, past diskSpaceWarningLevelRatio);
        ``on_committed``: buffered appends reached their files (dispatch may read them)."""
        self.config = config
        self.on_io_error = on_io_error
        self.on_commit_ok = on_commit_ok
        self.space_ok = space_ok
        self.mapped_file_queue = MappedFileQueue(
            config.commit_log_dir, config.mapped_file_size_commit_log, allocate_service
        )
        self.put_message_lock = threading.Lock()
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.begin_time_in_lock = 0
        self._delay_levels = parse_delay_levels(config.message_delay_level)
        self.checkpoint: StoreCheckpoint | None = None
        self.recovery_progress: RecoveryProgress | None = None  # the start's scan (pumice.metrics reads it)
        self.flush_service: GroupCommitService | FlushRealTimeService = (
            GroupCommitService(
                self.mapped_file_queue,
                transient_pool,
                self.commit_caught_up,
                on_io_error,
                self.update_physic_checkpoint,
                on_committed,
            )
            if config.flush_disk_type is FlushDiskType.SYNC_FLUSH
            else FlushRealTimeService(config, self.mapped_file_queue, on_io_error, self.update_physic_checkpoint)
        )
        # appends go to transient pool buffers; committing them is CommitRealTimeService's job
        # under ASYNC_FLUSH and the group commit's (before each flush) under SYNC_FLUSH
        self.buffered = transient_pool
        self.commit_service = (
            CommitRealTimeService(
                config,
                self.mapped_file_queue,
                self.commit_caught_up,
                self.flush_service.wakeup,
                on_io_error,
                on_committed,
            )
            if transient_pool and config.flush_disk_type is FlushDiskType.ASYNC_FLUSH
            else None
        )
        self._topic_blobs: dict[str, bytes] = {}
        # (start, end, requests) of batches just appended: dispatch uses them instead of
        # parsing the same bytes back. Bounded; dispatch parses the log when one is missing.
        self.dispatch_hints: deque[tuple[int, int, list[DispatchRequest]]] = deque(maxlen=16384)

    # -- lifecycle ---------------------------------------------------------------------

    def load(self) -> bool:
        ok = self.mapped_file_queue.load()
        log.info("load commit log %s", "OK" if ok else "Failed")
        return ok

    def start(self) -> None:
        self.flush_service.start()
        if self.commit_service is not None:
            self.commit_service.start()

    def shutdown(self) -> None:
        """Commit and flush everything, then unmap (the services are stopped in that order)."""
        if self.commit_service is not None:
            self.commit_service.shutdown()
        try:
            if self.buffered:
                while not self.mapped_file_queue.commit(0):
                    pass
        except StoreIOError as e:
            self.on_io_error(e)
        self.flush_service.shutdown()
        try:
            for _ in range(len(self.mapped_file_queue.mapped_files) + 1):
                if self.mapped_file_queue.flush(0):
                    break
        except StoreIOError as e:
            self.on_io_error(e)
        self.update_physic_checkpoint()

    def close(self) -> None:
        """Unmap the files (after shutdown)."""
        self.mapped_file_queue.shutdown()

    def commit_caught_up(self) -> bool:
        """Every buffered append is written to its file; tells ``on_commit_ok`` then (a failed
        write is behind only once what it failed to write is in the file)."""
        mfq = self.mapped_file_queue
        if mfq.committed_where < mfq.get_max_wrote_position():
            return False
        self.on_commit_ok()
        return True

    def update_physic_checkpoint(self) -> None:
        ts = self.mapped_file_queue.store_timestamp
        if ts > 0 and self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = ts

    # -- flush -------------------------------------------------------------------------

    def handle_disk_flush(self, result: PutMessageResult, wait_store_msg_ok: bool) -> PutMessageResult:
        """SYNC_FLUSH: wait for the group commit to cover the data (FLUSH_DISK_TIMEOUT after
        ``syncFlushTimeout``). ASYNC_FLUSH: wake the commit or flush thread."""
        if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            if not wait_store_msg_ok:
                self.flush_service.wakeup()
                return result
            ok = timed_out = False
            fut = self.submit_flush_request(result)
            assert fut is not None
            try:
                ok = fut.result(timeout=self.config.sync_flush_timeout / 1000)
            except FutureTimeoutError:
                timed_out = True
            if not ok:
                log.error("do groupcommit, wait for flush failed, topic offset %s", result.append_message_result)
                result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
                result.remark = (
                    f"the data was not flushed to disk within syncFlushTimeout ({self.config.sync_flush_timeout} ms)"
                    if timed_out
                    else "the data could not be written or synced to disk (see the broker's log)"
                )
        else:
            self.wakeup_flush()
        return result

    def wakeup_flush(self) -> None:
        """ASYNC_FLUSH: nudge the commit (transient pool) or flush thread, unless the flush
        thread is timed (``flushCommitLogTimed``). It acts only once
        ``flushCommitLogLeastPages`` pages are unflushed, so it is woken only then: a wake per
        small put would cost a thread hand-off (and the GIL) for nothing."""
        if self.commit_service is not None:
            self.commit_service.wakeup()
            return
        if self.config.flush_disk_type is FlushDiskType.ASYNC_FLUSH:
            if self.config.flush_commit_log_timed:
                return  # it sleeps its interval, woken by nothing
            mfq = self.mapped_file_queue
            unflushed_pages = mfq.get_max_wrote_position() // OS_PAGE_SIZE - mfq.flushed_where // OS_PAGE_SIZE
            if unflushed_pages < self.config.flush_commit_log_least_pages:
                return
        self.flush_service.wakeup()

    def submit_flush_request(
        self, result: PutMessageResult, callback: Callable[[bool], None] | None = None
    ) -> Future[bool] | None:
        """Ask the group commit to cover this put (SYNC_FLUSH only). Without ``callback``,
        returns a future that turns True once the data is on disk; with one, ``callback(ok)``
        is called on the flush thread instead and None is returned."""
        amr = result.append_message_result
        assert amr is not None and isinstance(self.flush_service, GroupCommitService)
        request = GroupCommitRequest(amr.wrote_offset + amr.wrote_bytes, callback)
        self.flush_service.put_request(request)
        return request.future

    # -- delay levels ------------------------------------------------------------------

    @property
    def max_delay_level(self) -> int:
        return len(self._delay_levels)

    def delay_ms(self, level: int) -> int:
        return self._delay_levels[min(level, len(self._delay_levels)) - 1]

    # -- put ---------------------------------------------------------------------------

    def _rewrite_delay(self, msg: MessageExtBrokerInner) -> None:
        """A delayed message goes to SCHEDULE_TOPIC_XXXX, queue level-1, real topic kept. A
        DELAY that is not a Java int is refused (upstream's parseInt throws; it was stored
        undelayed, or at the top level)."""
        raw = msg.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL) or "0"
        if not _JAVA_INT.fullmatch(raw) or not -(2**31) <= int(raw) < 2**31:
            raise _Illegal(PutMessageStatus.MESSAGE_ILLEGAL, f"DELAY {raw[:32]!r} is not a delay level (an int)")
        level = min(int(raw), self.max_delay_level)
        if level <= 0 or msg.topic == RMQ_SYS_SCHEDULE_TOPIC:
            return
        if msg.sys_flag & _TRAN_MASK not in (
            MessageSysFlag.TRANSACTION_NOT_TYPE,
            MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        ):
            return
        props = dict(msg.properties)
        props[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        msg.properties = props
        msg.properties_string = java_properties_string(props)  # rebuilt as 4.9's CommitLog does: its HashMap's order
        msg.topic = RMQ_SYS_SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def _schedule_tags_code(self, req: DispatchRequest, store_ts: int) -> int:
        level = get_property(req.properties_string, MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if level and level.isdigit() and int(level) > 0:
            return store_ts + self.delay_ms(int(level))
        return req.tags_code

    def _topic_blob(self, topic: str) -> bytes:
        """TOPICLENGTH + TOPIC, cached per topic."""
        blob = self._topic_blobs.get(topic)
        if blob is None:
            tb = topic.encode()
            if len(tb) > MAX_TOPIC_LENGTH:
                raise _Illegal(PutMessageStatus.MESSAGE_ILLEGAL, f"topic is {len(tb)} bytes, the limit is 127")
            blob = bytes((len(tb),)) + tb
            if len(self._topic_blobs) < 100_000:
                self._topic_blobs[topic] = blob
        return blob

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return self.put_messages((msg,))

    def put_messages(self, msgs: Sequence[MessageExtBrokerInner], wait_flush: bool = True) -> PutMessageResult:
        """Append messages under one lock; all are checked first, so a bad one writes nothing.

        Each record is encoded before the lock into one batch buffer, with QUEUEOFFSET,
        PHYSICALOFFSET and STORETIMESTAMP left at 0; under the lock those three fields are
        patched in and the buffer is copied into the map. As in RocketMQ, a batch is never
        split: when it does not fit in the current file, the file is closed with a blank
        record and the whole batch goes to the next one.
        """
        if not msgs:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="no message to put")
        parts: list[bytes | Buffer] = []
        reqs: list[DispatchRequest] = []
        max_size = self.config.max_message_size
        max_len = self.config.mapped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH
        topic_blobs = self._topic_blobs
        native_encode = _native_encode_record
        start = 0
        try:
            for m in msgs:
                topic_blob = topic_blobs.get(m.topic) or self._topic_blob(m.topic)  # checks the producer's topic
                if MessageConst.PROPERTY_DELAY_TIME_LEVEL in m.properties:
                    self._rewrite_delay(m)
                    topic_blob = self._topic_blob(m.topic)
                ps = m.properties_string
                if ps is None:
                    ps = m.properties_string = message_properties_to_string(m.properties)
                pb = ps.encode()
                pl = len(pb)
                if pl > MAX_PROPERTIES_LENGTH:
                    raise _Illegal(PutMessageStatus.MESSAGE_ILLEGAL, f"properties are {pl} bytes, the limit is 32767")
                body = m.body
                bl = len(body)
                bh, sh = m.born_host, m.store_host
                sf = m.sys_flag = _host_flags(m.sys_flag, bh, sh)
                n = head_struct(sf).size + bl + len(topic_blob) + 2 + pl
                if n > max_size:
                    raise _Illegal(
                        PutMessageStatus.MESSAGE_ILLEGAL, f"message is {n} bytes, maxMessageSize is {max_size}"
                    )
                args = (topic_blob, body, pb, m.queue_id, m.flag, sf, m.born_timestamp, bh, sh, m.reconsume_times,
                        m.prepared_transaction_offset)  # fmt: skip
                # encode_record_bytes without its frame (a single send's one call): native, else the
                # twin's parts, joined with the batch's
                rec = native_encode(*args) if native_encode is not None else None
                if rec is not None:
                    parts.append(rec)
                else:
                    parts += encode_record_parts(*args)
                props = m.properties
                tags = props.get(_TAGS)
                reqs.append(
                    DispatchRequest(m.topic, m.queue_id, 0, n, _tags_code(tags) if tags else 0, 0, 0,
                                    props.get(_KEYS), props.get(_UNIQ), sf, m.prepared_transaction_offset, ps)
                )  # fmt: skip
                start += n
            if start > max_len:
                raise _Illegal(PutMessageStatus.MESSAGE_ILLEGAL, f"batch of {start} bytes does not fit in a file")
        except _Illegal as e:
            return PutMessageResult(e.status, remark=e.remark)
        wait = wait_flush and msgs[0].properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK) != "false"
        result, begin = self._put_blob(bytearray().join(parts), reqs, msgs[0].store_host, wait_flush, wait)
        if begin:
            for m in msgs:
                m.store_timestamp = begin
        return result

    def put_message_batch(self, batch: MessageExtBatch, wait_flush: bool = True) -> PutMessageResult:
        """Append the messages of one SEND_BATCH_MESSAGE, walking its body (the format is in
        ``message.MessageExtBatch``) straight into records, as RocketMQ's MessageExtBatchEncoder
        does: the checks of ``put_messages``, and no message object per message. Each
        message's properties get ``batch.properties_suffix`` (CLUSTER) appended.

        A malformed body, a message with a delay level, or a transactional sysFlag makes the
        batch MESSAGE_ILLEGAL and nothing is written (as in RocketMQ, whose client also refuses
        delayed batches).
        """
        raw_bytes = batch.body if type(batch.body) is bytes else bytes(batch.body)
        raw_len = len(raw_bytes)
        if not raw_len:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="the batch holds no message")
        if batch.sys_flag & _TRAN_MASK or batch.topic == RMQ_SYS_SCHEDULE_TOPIC:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark="a batch cannot be transactional nor scheduled"
            )
        max_size = self.config.max_message_size
        if raw_len > max_size:  # checked before the walk: a 16 MB body of empty records stalled the loop
            remark = f"the batch body is {raw_len} bytes, maxMessageSize is {max_size}"
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=remark)
        max_len = self.config.mapped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH
        topic, queue_id = batch.topic, batch.queue_id
        sh = batch.store_host
        sf = batch.sys_flag = _host_flags(batch.sys_flag, batch.born_host, sh)
        try:
            topic_blob = self._topic_blobs.get(topic) or self._topic_blob(topic)
            blob, records = encode_batch_records(
                raw_bytes, topic_blob, queue_id, sf, batch.born_timestamp, batch.born_host, sh,
                batch.reconsume_times, batch.properties_suffix, max_size,
            )  # fmt: skip
        except _Illegal as e:
            return PutMessageResult(e.status, remark=e.remark)
        except ValueError as e:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=str(e))
        if len(blob) > max_len:
            remark = f"batch of {len(blob)} bytes does not fit in a file"
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=remark)
        reqs = [
            DispatchRequest(topic, queue_id, 0, n, tags_code, 0, 0, keys, uniq, sf, 0, ps)
            for n, tags_code, keys, uniq, ps in records
        ]
        first_props = reqs[0].properties_string
        wait = wait_flush and get_property(first_props, MessageConst.PROPERTY_WAIT_STORE_MSG_OK) != "false"
        result, batch.store_timestamp = self._put_blob(blob, reqs, sh, wait_flush, wait, True)
        return result

    def _put_blob(
        self,
        blob: bytearray,
        reqs: list[DispatchRequest],
        store_host: HostAddress,
        wait_flush: bool,
        wait: bool,
        one_queue: bool = False,
    ) -> tuple[PutMessageResult, int]:
        """Append encoded records under the put lock; (result, store time or 0 on failure)."""
        with self.put_message_lock:
            begin = _now_ms()
            self.begin_time_in_lock = begin
            try:
                result = self._append_locked(blob, reqs, begin, store_host, one_queue)
            finally:
                self.begin_time_in_lock = 0
        if result.status is not PutMessageStatus.PUT_OK:
            return result, 0
        if wait_flush:
            result = self.handle_disk_flush(result, wait)
        return result, begin

    def _append_locked(
        self,
        blob: bytearray,
        reqs: list[DispatchRequest],
        store_ts: int,
        store_host: tuple[bytes, int],
        one_queue: bool = False,
    ) -> PutMessageResult:
        mfq = self.mapped_file_queue
        file_size = mfq.mapped_file_size
        mf = mfq.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                return _create_failed(mfq.last_create_error)
        pos = mf.wrote_position
        batch_start = mf.file_from_offset + pos
        total = len(blob)
        if pos + total + END_FILE_MIN_BLANK_LENGTH > file_size:
            # END_OF_FILE: blank the rest of this file; the whole batch goes to the next one.
            refused = self._reserve(mf, pos + 8)
            if refused is not None:
                return refused
            mf.close_with_blank(pos, _BLANK.pack(file_size - pos, BLANK_MAGIC_CODE))
            mf.store_timestamp = store_ts
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                return _create_failed(mfq.last_create_error)
            pos = mf.wrote_position
        # before anything changes: a put that cannot have its space changes nothing
        refused = self._reserve(mf, pos + total)
        if refused is not None:
            return refused
        base = mf.file_from_offset + pos
        table = self.topic_queue_table
        wrote_offsets: list[int] = []
        logics: list[int] = []
        start = 0
        if one_queue:  # a batch: one topic and queue, no transaction, no schedule topic
            r0 = reqs[0]
            key = (r0.topic, r0.queue_id)
            q0 = table.get(key, 0)
            table[key] = q0 + len(reqs)
            logics = list(range(q0, q0 + len(reqs)))
            ts_at = STORE_TIMESTAMP_OFFSETS[(r0.sys_flag >> 4) & 1]
            for qoff, req in enumerate(reqs, q0):
                phys = base + start
                _OFFSETS.pack_into(blob, start + QUEUE_OFFSET_OFFSET, qoff, phys)
                _LONG.pack_into(blob, start + ts_at, store_ts)
                start += req.msg_size
                wrote_offsets.append(phys)
                req.commit_log_offset = phys
                req.consume_queue_offset = qoff
                req.store_timestamp = store_ts
        for req in () if one_queue else reqs:
            phys = base + start
            sf = req.sys_flag
            if sf & _TRAN_MASK in _NO_OFFSET_TYPES:
                qoff = 0
            else:
                key = (req.topic, req.queue_id)
                qoff = table.get(key, 0)
                table[key] = qoff + 1
            _OFFSETS.pack_into(blob, start + QUEUE_OFFSET_OFFSET, qoff, phys)
            _LONG.pack_into(blob, start + STORE_TIMESTAMP_OFFSETS[(sf >> 4) & 1], store_ts)
            start += req.msg_size
            wrote_offsets.append(phys)
            logics.append(qoff)
            req.commit_log_offset = phys
            req.consume_queue_offset = qoff
            req.store_timestamp = store_ts
            if req.topic == RMQ_SYS_SCHEDULE_TOPIC:
                req.tags_code = self._schedule_tags_code(req, store_ts)
        mf.write_at(pos, blob)
        mf.store_timestamp = store_ts
        mf.wrote_position = pos + total
        self.dispatch_hints.append((batch_start, base + total, reqs))
        result = AppendMessageResult(
            AppendMessageStatus.PUT_OK,
            wrote_offset=wrote_offsets[0],
            wrote_bytes=len(blob),
            store_timestamp=store_ts,
            logics_offset=logics[0],
            msg_num=len(reqs),
            store_host=store_host,
            wrote_offsets=wrote_offsets,
            logics_offsets=logics,
        )
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def _reserve(self, mf: MappedFile, end: int) -> PutMessageResult | None:
        """Reserve ``mf`` up to ``end``, checking the disk first; a refusal when it cannot be."""
        if end <= mf.reserved:
            return None
        if not self.space_ok():
            return _space_refused(f"the disk holding {self.config.commit_log_dir} is past its warning level")
        try:
            mf.reserve(end)
        except StoreIOError as e:
            self.on_io_error(e)
            if e.disk_full:
                return _space_refused(str(e))
            if e.fd_limit:
                return PutMessageResult(
                    PutMessageStatus.SERVICE_NOT_AVAILABLE,
                    remark=f"{e}: the broker is out of file descriptors (raise its limit, ulimit -n)",
                )
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=f"CommitLog write refused: {e}")
        return None

    def append_data(self, start_offset: int, data: bytes | memoryview) -> bool:
        """A slave's append of replicated bytes (any record boundaries) at ``start_offset``,
        which must be where the log ends; the bytes never span two files (the master sends
        ranges of one file)."""
        with self.put_message_lock:
            mfq = self.mapped_file_queue
            mf = mfq.get_last_mapped_file_create(start_offset)
            if mf is None:
                log.error("create mapped file for replicated data at %d failed", start_offset)
                return False
            end = mf.file_from_offset + mf.wrote_position
            if end != start_offset:
                log.error("replicated data at %d does not continue the CommitLog, which ends at %d", start_offset, end)
                return False
            if self._reserve(mf, mf.wrote_position + len(data)) is not None:
                log.error("no space for replicated data at %d (%d bytes)", start_offset, len(data))
                return False
            return mf.append_message(data)

    def is_os_page_cache_busy(self) -> bool:
        begin = self.begin_time_in_lock
        return begin != 0 and _now_ms() - begin > self.config.os_page_cache_busy_timeout_mills

    # -- read --------------------------------------------------------------------------

    def get_min_offset(self) -> int:
        mf = self.mapped_file_queue.get_first_mapped_file()
        if mf is None:
            return -1
        return mf.file_from_offset if mf.available else self.roll_next_file(mf.file_from_offset)

    def get_max_offset(self) -> int:
        """End of the readable data. With the transient store pool that is also capped by
        ``committed_where``: a file written directly (pool empty) must not make data still
        waiting in an earlier file's buffer look readable."""
        mfq = self.mapped_file_queue
        if not self.buffered:
            return mfq.get_max_offset()
        return min(mfq.get_max_offset(), mfq.committed_where)

    def roll_next_file(self, offset: int) -> int:
        size = self.config.mapped_file_size_commit_log
        return offset + size - offset % size

    def find_mapped_file(self, offset: int) -> MappedFile | None:
        """The file holding ``offset`` (DLedger mode: an old CommitLog's below its end)."""
        return self.mapped_file_queue.find_mapped_file_by_offset(offset)

    def get_data(self, offset: int) -> SelectMappedBufferResult | None:
        """Everything readable from ``offset`` to the end of its file."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.config.mapped_file_size_commit_log)

    def get_message(self, offset: int, size: int) -> SelectMappedBufferResult | None:
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.config.mapped_file_size_commit_log, size)

    def get_message_at(self, offset: int) -> SelectMappedBufferResult | None:
        """The record starting at ``offset``, sized by its TOTALSIZE field."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset % self.config.mapped_file_size_commit_log
        if pos + 8 > mf.read_position:
            return None
        size, magic = _BLANK.unpack_from(mf.mmap, pos)
        if magic != MESSAGE_MAGIC_CODE or size <= 0:
            return None
        return mf.select_mapped_buffer(pos, size)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        if offset < self.get_min_offset():
            return -1
        sbr = self.get_message(offset, size)
        if sbr is None:
            return -1
        try:
            return pickup_store_timestamp(sbr.buffer)
        finally:
            sbr.release()

    def check_message_and_return_size(
        self, buf: memoryview | bytes, pos: int, limit: int, check_crc: bool = False
    ) -> CheckResult:
        return check_message_and_return_size(buf, pos, limit, check_crc, self.delay_ms)

    # -- recovery ----------------------------------------------------------------------

    def recover_normally(self) -> int:
        """After a clean stop: scan from the third-last file, truncate after the valid end."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            self.mapped_file_queue.flushed_where = self.mapped_file_queue.committed_where = 0
            return 0
        return self._recover_from(max(0, len(files) - 3), self.config.check_crc_on_recover, abnormal=False)

    def recover_abnormally(self, checkpoint: StoreCheckpoint) -> tuple[int, int]:
        """After a crash: start at the last file whose first record the checkpoint covers.

        Returns (valid end, offset to redo dispatch from). With no file at all, both are 0.
        """
        files = self.mapped_file_queue.mapped_files
        if not files:
            self.mapped_file_queue.flushed_where = self.mapped_file_queue.committed_where = 0
            return 0, -1
        index = len(files) - 1
        while index >= 0 and not self._is_mapped_file_matched_recover(files[index], checkpoint):
            index -= 1
        if index < 0:
            index = 0  # nothing is covered by the checkpoint: scan everything
        start = files[index].file_from_offset
        log.info("recover abnormally from %s", files[index].file_name)
        return self._recover_from(index, self.config.check_crc_on_recover, abnormal=True), start

    def _is_mapped_file_matched_recover(self, mf: MappedFile, checkpoint: StoreCheckpoint) -> bool:
        if _BLANK.unpack_from(mf.mmap, 0)[1] != MESSAGE_MAGIC_CODE:
            return False
        store_ts = pickup_store_timestamp(mf.mmap, 0)
        if store_ts == 0:
            return False
        if self.config.message_index_enable and self.config.message_index_safe:
            limit = checkpoint.get_min_timestamp_index()
        else:
            limit = checkpoint.get_min_timestamp()
        if store_ts <= limit:
            log.info("find check timestamp, %d %s", store_ts, mf.file_name)
            return True
        return False

    def _recover_from(self, index: int, check_crc: bool, abnormal: bool) -> int:
        """Scan files from ``index`` until a file does not end in a blank record; truncate there."""
        mfq = self.mapped_file_queue
        files = mfq.mapped_files
        size = self.config.mapped_file_size_commit_log
        progress = self.recovery_progress = RecoveryProgress(total_bytes=(len(files) - index) * size, what="CommitLog")
        end = files[index].file_from_offset
        records = 0
        todo = files[index:]
        pool = None
        if len(todo) >= 2 and len(todo) * size >= PARALLEL_SCAN_MIN_BYTES and (os.cpu_count() or 1) > 1:
            # Files never share a record, so they can be checked side by side; the scan is
            # CPU-bound Python, so that takes processes (one per core). fork starts them in
            # milliseconds; the workers only open, map and read one file each.
            ctx = multiprocessing.get_context("fork")
            pool = ProcessPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 1), mp_context=ctx)
        try:
            if pool is not None:
                results = pool.map(_scan_file, [(mf.file_name, size, check_crc) for mf in todo])
            else:
                results = (scan_records(mf.mmap, 0, size, check_crc) for mf in todo)
            for mf, (pos, n, blank) in zip(todo, results, strict=False):
                records += n
                end = mf.file_from_offset + pos
                progress.advance(size if blank else pos)
                if not blank:
                    break
                end = mf.file_from_offset + size
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            progress.close()
        valid_end = end
        holder = mfq.find_mapped_file_by_offset(valid_end)
        later = sum(1 for f in files if f.file_from_offset > valid_end)
        # after a crash whatever follows the valid end may be a torn record: say so loudly
        report = log.warning if abnormal else log.info
        if holder is not None and valid_end % size:
            report(
                "CommitLog valid data ends at %d (%d records scanned): clear the last %d bytes of %s, remove %d "
                "later file(s)", valid_end, records, size - valid_end % size, holder.file_name, later,
            )  # fmt: skip
        else:
            report("CommitLog valid data ends at %d (%d records scanned), remove %d later file(s)", valid_end,
                   records, later)  # fmt: skip
        mfq.flushed_where = mfq.committed_where = valid_end
        mfq.truncate_dirty_files(valid_end)
        return valid_end

    def iter_requests(self, start: int, end: int) -> list[DispatchRequest]:
        """Parse records in ``[start, end)`` (tools and tests)."""
        out: list[DispatchRequest] = []
        offset = start
        while offset < end:
            sbr = self.get_data(offset)
            if sbr is None:
                break
            try:
                pos = 0
                while pos < sbr.size:
                    req, n, ok = self.check_message_and_return_size(sbr.buffer, pos, sbr.size)
                    if ok and n > 0 and req is not None:
                        out.append(req)
                        pos += n
                    elif ok and n == 0:
                        offset = self.roll_next_file(offset)
                        break
                    else:
                        return out
                else:
                    offset = sbr.start_offset + sbr.size
            finally:
                sbr.release()
        return out
