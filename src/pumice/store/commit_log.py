"""CommitLog: the one append-only log that holds every message of every topic.

The log is a MappedFileQueue under ``commitlog/`` whose files are named by the offset of
their first byte (20 digits). Records use the format in ``message_decoder`` (RocketMQ 4.9).
A record never spans two files: when ``msgLen + 8`` would pass the end of the current file,
an 8-byte blank record (remaining size, 0xcbd43194) fills the file and the message goes to
the next one.

Appends are serialised by ``put_message_lock``. Everything that can be done before the lock
(topic and properties encoding, CRC, size checks) is; under the lock a batch is encoded
straight into the map with ``pack_into`` and slice assignment, and the file's write
pointer moves once per batch, so a reader sees whole batches.

``topic_queue_table`` maps (topic, queueId) to the next logical offset of that queue.
PREPARED and ROLLBACK transaction records take offset 0 and do not advance it.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Sequence

from pumice.store.allocate_mapped_file_service import AllocateMappedFileService
from pumice.store.dispatch_request import DispatchRequest
from pumice.store.mapped_file import MappedFile, SelectMappedBufferResult
from pumice.store.mapped_file_queue import MappedFileQueue
from pumice.store.message import SCHEDULE_TOPIC, MessageConst, MessageExtBrokerInner, MessageSysFlag
from pumice.store.message_decoder import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    CheckResult,
    check_message_and_return_size,
    crc32,
    head_struct,
    message_properties_to_string,
    pickup_store_timestamp,
)
from pumice.store.message_store_config import MessageStoreConfig, parse_delay_levels
from pumice.store.put_message_result import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)

log = logging.getLogger(__name__)

_BLANK = struct.Struct(">iI")
_SHORT = struct.Struct(">H")
_TRAN_MASK = MessageSysFlag.TRANSACTION_MASK
_NO_OFFSET_TYPES = (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Prepared:
    """A message encoded as far as it can be before the lock."""

    __slots__ = ("body", "body_crc", "key", "msg", "msg_len", "props", "topic", "tran")

    def __init__(self, msg: MessageExtBrokerInner, topic: bytes, props: bytes, msg_len: int) -> None:
        self.msg = msg
        self.topic = topic
        self.props = props
        self.body = msg.body
        self.body_crc = crc32(msg.body)
        self.msg_len = msg_len
        self.key = (msg.topic, msg.queue_id)
        self.tran = msg.sys_flag & _TRAN_MASK


class CommitLog:
    def __init__(self, config: MessageStoreConfig, allocate_service: AllocateMappedFileService | None) -> None:
        self.config = config
        self.mapped_file_queue = MappedFileQueue(
            config.commit_log_dir, config.mapped_file_size_commit_log, allocate_service
        )
        self.put_message_lock = threading.Lock()
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.begin_time_in_lock = 0
        self.confirm_offset = -1
        self._delay_levels = parse_delay_levels(config.message_delay_level)

    # -- lifecycle ---------------------------------------------------------------------

    def load(self) -> bool:
        ok = self.mapped_file_queue.load()
        log.info("load commit log %s", "OK" if ok else "Failed")
        return ok

    def shutdown(self) -> None:
        self.mapped_file_queue.flush(0)
        self.mapped_file_queue.shutdown()

    # -- delay levels ------------------------------------------------------------------

    @property
    def max_delay_level(self) -> int:
        return len(self._delay_levels)

    def delay_ms(self, level: int) -> int:
        return self._delay_levels[min(level, len(self._delay_levels)) - 1]

    # -- put ---------------------------------------------------------------------------

    def _prepare(self, msg: MessageExtBrokerInner) -> _Prepared | PutMessageResult:
        tran = msg.sys_flag & _TRAN_MASK
        if tran in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
            level = msg.delay_time_level
            if level > 0 and msg.topic != SCHEDULE_TOPIC:
                level = min(level, self.max_delay_level)
                props = dict(msg.properties)
                props[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
                props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
                props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
                msg.properties = props
                msg.properties_string = None
                msg.topic = SCHEDULE_TOPIC
                msg.queue_id = level - 1
        topic = msg.topic.encode()
        if len(topic) > MAX_TOPIC_LENGTH:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark=f"topic is {len(topic)} bytes, the limit is 127"
            )
        ps = msg.properties_string
        if ps is None:
            ps = msg.properties_string = message_properties_to_string(msg.properties)
        props = ps.encode()
        if len(props) > MAX_PROPERTIES_LENGTH:
            return PutMessageResult(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                remark=f"properties are {len(props)} bytes, the limit is 32767",
            )
        body_len = len(msg.body)
        if body_len > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"message body is {body_len} bytes, maxMessageSize is {self.config.max_message_size}",
            )
        born_v6 = len(msg.born_host[0]) == 16
        store_v6 = len(msg.store_host[0]) == 16
        sf = msg.sys_flag & ~(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
        if born_v6:
            sf |= MessageSysFlag.BORNHOST_V6_FLAG
        if store_v6:
            sf |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
        msg.sys_flag = sf
        msg_len = head_struct(sf).size + body_len + 1 + len(topic) + 2 + len(props)
        if msg_len + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"message of {msg_len} bytes does not fit in a CommitLog file",
            )
        return _Prepared(msg, topic, props, msg_len)

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return self.put_messages((msg,))

    def put_messages(self, msgs: Sequence[MessageExtBrokerInner]) -> PutMessageResult:
        """Append messages under one lock; all are checked first, so a bad one writes nothing."""
        prepared: list[_Prepared] = []
        for m in msgs:
            p = self._prepare(m)
            if isinstance(p, PutMessageResult):
                return p
            prepared.append(p)
        if not prepared:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="no message to put")
        with self.put_message_lock:
            begin = _now_ms()
            self.begin_time_in_lock = begin
            try:
                return self._append_locked(prepared, begin)
            finally:
                self.begin_time_in_lock = 0

    def _append_locked(self, prepared: list[_Prepared], store_ts: int) -> PutMessageResult:
        mfq = self.mapped_file_queue
        file_size = mfq.mapped_file_size
        mf = mfq.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                log.error("create mapped file1 error")
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark="cannot create CommitLog file")
        table = self.topic_queue_table
        buf = memoryview(mf.mmap)
        pos = mf.wrote_position
        base = mf.file_from_offset
        wrote_offsets: list[int] = []
        logics: list[int] = []
        total = 0
        for p in prepared:
            n = p.msg_len
            if pos + n + END_FILE_MIN_BLANK_LENGTH > file_size:
                # END_OF_FILE: blank the rest of this file and continue in the next one.
                _BLANK.pack_into(buf, pos, file_size - pos, BLANK_MAGIC_CODE)
                mf.store_timestamp = store_ts
                mf.wrote_position = file_size
                buf.release()
                mf = mfq.get_last_mapped_file_create(0)
                if mf is None:
                    log.error("create mapped file2 error")
                    return PutMessageResult(
                        PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark="cannot create CommitLog file"
                    )
                buf = memoryview(mf.mmap)
                pos = mf.wrote_position
                base = mf.file_from_offset
            msg = p.msg
            key = p.key
            qoff = table.get(key, 0)
            if p.tran in _NO_OFFSET_TYPES:
                rec_qoff = 0
            else:
                rec_qoff = qoff
                table[key] = qoff + 1
            phys = base + pos
            sf = msg.sys_flag
            head = head_struct(sf)
            body = p.body
            blen = len(body)
            head.pack_into(
                buf, pos, n, MESSAGE_MAGIC_CODE, p.body_crc, msg.queue_id, msg.flag, rec_qoff, phys, sf,
                msg.born_timestamp, msg.born_host[0], msg.born_host[1], store_ts, msg.store_host[0],
                msg.store_host[1], msg.reconsume_times, msg.prepared_transaction_offset, blen,
            )  # fmt: skip
            q = pos + head.size
            buf[q : q + blen] = body
            q += blen
            t = p.topic
            tl = len(t)
            buf[q] = tl
            buf[q + 1 : q + 1 + tl] = t
            q += 1 + tl
            pr = p.props
            pl = len(pr)
            _SHORT.pack_into(buf, q, pl)
            buf[q + 2 : q + 2 + pl] = pr
            pos += n
            total += n
            msg.store_timestamp = store_ts
            wrote_offsets.append(phys)
            logics.append(rec_qoff)
        buf.release()
        mf.store_timestamp = store_ts
        mf.wrote_position = pos
        first = prepared[0].msg
        result = AppendMessageResult(
            AppendMessageStatus.PUT_OK,
            wrote_offset=wrote_offsets[0],
            wrote_bytes=total,
            store_timestamp=store_ts,
            logics_offset=logics[0],
            msg_num=len(prepared),
            store_host=first.store_host,
            wrote_offsets=wrote_offsets,
            logics_offsets=logics,
        )
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

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
        return self.mapped_file_queue.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        size = self.config.mapped_file_size_commit_log
        return offset + size - offset % size

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

    # -- recovery (normal: scan the last 3 files) --------------------------------------

    def recover_normally(self, max_phy_offset_of_consume_queue: int) -> int:
        """Find the end of valid data and truncate after it; returns that offset."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            self.mapped_file_queue.flushed_where = self.mapped_file_queue.committed_where = 0
            return 0
        index = max(0, len(files) - 3)
        process_offset = self._scan_valid(files, index, self.config.check_crc_on_recover)
        mfq = self.mapped_file_queue
        mfq.flushed_where = mfq.committed_where = process_offset
        mfq.truncate_dirty_files(process_offset)
        return process_offset

    def _scan_valid(self, files: list[MappedFile], index: int, check_crc: bool) -> int:
        size = self.config.mapped_file_size_commit_log
        mf = files[index]
        process_offset = mf.file_from_offset
        file_offset = 0
        while True:
            _, n, ok = check_message_and_return_size(mf.mmap, file_offset, size, check_crc)
            if ok and n > 0:
                file_offset += n
            elif ok and n == 0:
                index += 1
                if index >= len(files):
                    log.info("recover last 3 physics file over, last mapped file %s", mf.file_name)
                    break
                mf = files[index]
                process_offset = mf.file_from_offset
                file_offset = 0
            else:
                log.info("recover physics file end, %s pos=%d", mf.file_name, file_offset)
                break
        return process_offset + file_offset

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
