"""Transactional messages, RocketMQ 4.9's design (TransactionalMessageBridge,
TransactionalMessageServiceImpl, the check listeners and TransactionalMessageCheckService).

A producer sends a half message (property TRAN_MSG "true", PGROUP its group). It is stored in
``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its sysFlag's transaction type cleared and its topic
and queue in REAL_TOPIC / REAL_QID, so no consumer of its topic sees it. END_TRANSACTION then
commits it (a new record in its real topic, sysFlag COMMIT, the half's properties string kept
as 4.9 keeps it) or rolls it back; either writes an op record:

==========================  =========================================================
op record field             value
==========================  =========================================================
topic                       ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, queue = the half's queue (0)
tags                        ``d`` (REMOVETAG)
body                        the half message's queue offset, decimal ASCII
born/store host             the broker's address; UNIQ_KEY a new id
==========================  =========================================================

The check (every ``transactionCheckInterval`` ms on a master) reads the half queue from the
system group ``CID_RMQ_SYS_TRANS``'s offset, skips halves with an op record, and asks a live
producer of the half's group (CHECK_TRANSACTION_STATE, oneway, the half re-encoded under its
real topic as the body) about each half older than ``transactionTimeOut`` (or its
CHECK_IMMUNITY_TIME_IN_SECONDS), after first storing the half again at the queue's end
(TRANSACTION_CHECK_TIMES counts the checks). After ``transactionCheckMax`` checks, or past
``fileReservedTime``, a half goes to ``TRANS_CHECK_MAX_TIME_TOPIC`` instead. The group's
offsets in both queues are committed as the check goes, so progress survives restarts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.topic_config_manager import TopicConfigManager
from pumice.client.message_id import UniqKeyGenerator
from pumice.common.message import HostAddress, MessageExt, MessageExtBrokerInner
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import decode_message, java_properties_string
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.common.mix_all import (
    CID_SYS_RMQ_TRANS,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.store.get_message_result import GetMessageStatus
from pumice.store.message_store_api import MessageStore
from pumice.store.put_message_result import PutMessageResult, PutMessageStatus

log = logging.getLogger(__name__)

REMOVE_TAG = "d"
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
MAX_PROCESS_TIME_LIMIT_MS = 60_000
# how many ended transactions END_TRANSACTION remembers, to store each commit once (~10 MB)
ENDED_TRANSACTIONS_KEPT = 100_000
_TRAN_PROPS = (MessageConst.PROPERTY_REAL_TOPIC, MessageConst.PROPERTY_REAL_QUEUE_ID)


def _with_transaction_type(sys_flag: int, tran_type: int) -> int:
    return (sys_flag & ~MessageSysFlag.TRANSACTION_MASK) | tran_type


def _long(value: str | None, default: int = -1) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


@dataclass
class _Pulled:
    status: GetMessageStatus
    next_begin_offset: int
    messages: list[MessageExt]


class TransactionalMessageService:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        store_host: HostAddress,
        store_addr: str,
        send_check: Callable[[MessageExt], None] | None = None,
    ) -> None:
        self.store = store
        # asks a producer of the half's group about it (CHECK_TRANSACTION_STATE); None: nobody
        self.send_check = send_check
        self.topics = topics
        self.offsets = offsets
        self.store_host = store_host
        self.store_addr = store_addr
        self._uniq = UniqKeyGenerator(ip=store_host[0] if len(store_host[0]) == 4 else None)
        # transactions ended here lately, by (producer group, the half's UNIQ_KEY): the check
        # re-puts a half before it asks, so one transaction has several copies, and a slow answer
        # to one check meets the next check's; each COMMIT would store the message again
        self._ended: OrderedDict[tuple[str, str], str] = OrderedDict()

    # -- the half message ------------------------------------------------------------------

    def prepare_message(self, msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
        """``msg`` made into its half form (parseHalfMessageInner), in place. A delay level is
        dropped, as the Java client drops it: a half is never delayed."""
        msg.properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        msg.properties[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
        msg.properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.sys_flag = _with_transaction_type(msg.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
        msg.topic, msg.queue_id = RMQ_SYS_TRANS_HALF_TOPIC, 0
        msg.properties_string = java_properties_string(msg.properties)  # as 4.9 rebuilds it: its HashMap's order
        if self.topics.select_topic_config(RMQ_SYS_TRANS_HALF_TOPIC) is None:
            self.topics.create_topic_in_send_message_back_method(RMQ_SYS_TRANS_HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        return msg

    def find_half(self, commit_log_offset: int) -> MessageExt | None:
        """The half message at ``commit_log_offset``; None when the record there is not one."""
        try:
            m = self.store.look_message_by_offset(commit_log_offset)
        except ValueError:
            return None
        return m if m is not None and m.topic == RMQ_SYS_TRANS_HALF_TOPIC else None

    @staticmethod
    def check_prepare_message(
        half: MessageExt | None, group: str, queue_offset: int, commit_log_offset: int
    ) -> str | None:
        """Why END_TRANSACTION may not end ``half`` (4.9's remarks), or None."""
        if half is None:
            return "Find prepared transaction message failed"
        if half.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP) != group:
            return "The producer group wrong"
        if half.queue_offset != queue_offset:
            return "The transaction state table offset wrong"
        if half.commit_log_offset != commit_log_offset:
            return "The commit log offset wrong"
        return None

    @staticmethod
    def _transaction_key(half: MessageExt) -> tuple[str, str] | None:
        uniq = half.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return (half.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP, ""), uniq) if uniq else None

    def ended_as(self, half: MessageExt) -> str | None:
        """COMMIT or ROLLBACK when another copy of ``half``'s transaction was ended lately."""
        key = self._transaction_key(half)
        return self._ended.get(key) if key is not None else None

    def mark_ended(self, half: MessageExt, how: str) -> None:
        key = self._transaction_key(half)
        if key is not None:
            self._ended[key] = how
            self._ended.move_to_end(key)
            while len(self._ended) > ENDED_TRANSACTIONS_KEPT:
                self._ended.popitem(last=False)

    def unmark_ended(self, half: MessageExt) -> None:
        """The end could not be stored: a later END_TRANSACTION may try again."""
        key = self._transaction_key(half)
        if key is not None:
            self._ended.pop(key, None)

    @staticmethod
    def end_message_transaction(half: MessageExt, commit_log_offset: int) -> MessageExtBrokerInner:
        """The committed message: the half in its real topic and queue, sysFlag COMMIT. Its
        properties string is the half's, as 4.9 writes it before it clears REAL_TOPIC,
        REAL_QID and TRAN_MSG from the map (consumers see all three)."""
        props = half.properties
        real_qid = _long(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID), 0)
        return MessageExtBrokerInner(
            topic=props.get(MessageConst.PROPERTY_REAL_TOPIC, ""), body=half.body, queue_id=real_qid,
            flag=half.flag, properties={k: v for k, v in props.items() if k not in _TRAN_PROPS},
            sys_flag=_with_transaction_type(half.sys_flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE),
            born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
            reconsume_times=half.reconsume_times, prepared_transaction_offset=commit_log_offset,
            properties_string=java_properties_string(props),
        )  # fmt: skip

    def op_message(self, half: MessageExt) -> MessageExtBrokerInner:
        """The op record that marks ``half`` done (addRemoveTagInTransactionOp)."""
        if self.topics.select_topic_config(RMQ_SYS_TRANS_OP_HALF_TOPIC) is None:
            self.topics.create_topic_in_send_message_back_method(RMQ_SYS_TRANS_OP_HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        now = int(time.time() * 1000)
        props = {
            MessageConst.PROPERTY_TAGS: REMOVE_TAG,
            MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: self._uniq.next_id(now),
        }
        return MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_OP_HALF_TOPIC, body=str(half.queue_offset).encode(), queue_id=half.queue_id,
            properties=props, born_timestamp=now, born_host=self.store_host, store_host=self.store_host,
        )  # fmt: skip

    def _put(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        r = self.store.put_messages((msg,), wait_flush=False)
        if r.status is PutMessageStatus.PUT_OK:
            self.store.flush_future(r)  # SYNC_FLUSH: queue the flush; the check does not wait for it
        else:
            log.error("put of %s queue %d failed: %s %s", msg.topic, msg.queue_id, r.status.name, r.remark)
        return r

    # -- the check ---------------------------------------------------------------------------

    def _pull(self, topic: str, queue_id: int, offset: int, nums: int) -> _Pulled:
        r = self.store.get_message(CID_SYS_RMQ_TRANS, topic, queue_id, offset, nums)
        if r is None:
            return _Pulled(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, offset, [])
        try:
            msgs = [decode_message(b) for b in r.buffers]
        finally:
            r.release()
        for m, queue_offset in zip(msgs, r.queue_offsets, strict=False):
            m.queue_offset = queue_offset
        return _Pulled(r.status, r.next_begin_offset, msgs)

    def _consume_offset(self, topic: str, queue_id: int) -> int:
        offset = self.offsets.query_offset(CID_SYS_RMQ_TRANS, topic, queue_id)
        if offset >= 0:
            return offset
        return max(self.store.get_min_offset_in_queue(topic, queue_id), 0)  # -1: no such queue yet

    def _commit_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit_offset(self.store_addr, CID_SYS_RMQ_TRANS, topic, queue_id, offset)

    def _fill_op_remove_map(
        self, remove: dict[int, int], queue_id: int, op_offset: int, min_offset: int, done: list[int]
    ) -> _Pulled:
        """Read up to 32 op records from ``op_offset``: half offset → op offset for the halves
        still ahead (``remove``), and the op offsets of halves already behind (``done``)."""
        pulled = self._pull(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, op_offset, 32)
        if pulled.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                             GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.MESSAGE_WAS_REMOVING,
                             GetMessageStatus.NO_MATCHED_LOGIC_QUEUE):  # fmt: skip
            log.warning("op offset %d of queue %d is illegal (%s): move on", op_offset, queue_id, pulled.status.name)
            self._commit_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, pulled.next_begin_offset)
            return pulled
        for op in pulled.messages:
            half_offset = _long(op.body.decode("ascii", "replace"))
            if op.tags != REMOVE_TAG:
                log.error("an op record with tags %r at %d: not %r", op.tags, op.queue_offset, REMOVE_TAG)
            elif half_offset < min_offset:
                done.append(op.queue_offset)
            else:
                remove[half_offset] = op.queue_offset
        return pulled

    def check(self, transaction_timeout_ms: int, check_max: int, file_reserved_time_h: int) -> None:
        """One pass over the half queue (TransactionalMessageServiceImpl.check): ``send_check``
        for each half to ask about, ``discard_message`` for each checked too often."""
        tc = self.topics.select_topic_config(RMQ_SYS_TRANS_HALF_TOPIC)
        if tc is None:
            return
        for queue_id in range(tc.read_queue_nums):
            try:
                self._check_queue(queue_id, transaction_timeout_ms, check_max, file_reserved_time_h)
            except Exception:
                log.exception("transaction check of half queue %d failed", queue_id)

    def _resolve_half(self, m: MessageExt) -> None:
        if self.send_check is None:
            log.warning("no producer can be asked about half message %s: nothing sends checks", m.msg_id)
            return
        try:
            self.send_check(m)
        except Exception:
            log.exception("send check message of %s failed", m.msg_id)

    def _check_queue(self, queue_id: int, timeout_ms: int, check_max: int, file_reserved_time_h: int) -> None:
        start_ms = int(time.time() * 1000)
        half_offset = self._consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id)
        op_offset = self._consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            return
        done: list[int] = []
        remove: dict[int, int] = {}
        pulled = self._fill_op_remove_map(remove, queue_id, op_offset, half_offset, done)
        misses = 1
        new_offset = i = half_offset
        while int(time.time() * 1000) - start_ms <= MAX_PROCESS_TIME_LIMIT_MS:
            if i in remove:
                done.append(remove.pop(i))
            else:
                got = self._pull(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, i, 1)
                if not got.messages:
                    misses += 1
                    if misses > 2 or got.status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                                                    GetMessageStatus.OFFSET_OVERFLOW_ONE):  # fmt: skip
                        break
                    i = new_offset = got.next_begin_offset  # a hole (expired files): go on from there
                    continue
                m = got.messages[0]
                if self._need_discard(m, check_max) or self._need_skip(m, file_reserved_time_h):
                    self.discard_message(m)
                    new_offset = i = i + 1
                    continue
                if m.store_timestamp >= start_ms:  # stored after this pass began
                    break
                age = int(time.time() * 1000) - m.born_timestamp
                immunity = timeout_ms
                immunity_s = m.properties.get(PROPERTY_CHECK_IMMUNITY_TIME)
                if immunity_s is not None:
                    immunity = _long(immunity_s)
                    immunity = timeout_ms if immunity == -1 else immunity * 1000
                    if age < immunity and self._check_prepare_queue_offset(remove, done, m):
                        new_offset = i = i + 1
                        continue
                elif 0 <= age < immunity:
                    break
                ops = pulled.messages
                need_check = (
                    (not ops and age > immunity)
                    or (bool(ops) and ops[-1].born_timestamp - start_ms > timeout_ms)
                    or age <= -1
                )
                if need_check:
                    renewed = self._put_back(m)
                    if renewed is None:
                        break  # the put failed (a full disk?): the next pass tries this half again
                    self._resolve_half(renewed)
                else:
                    # more op records first: this half may have one further on
                    pulled = self._fill_op_remove_map(remove, queue_id, pulled.next_begin_offset, half_offset, done)
                    continue
            new_offset = i = i + 1
        if new_offset != half_offset:
            self._commit_offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, new_offset)
        old_op = self._consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id)
        new_op = old_op
        for off in sorted(done):
            if off != new_op:
                break
            new_op += 1
        if new_op != old_op:
            self._commit_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, new_op)

    @staticmethod
    def _need_discard(m: MessageExt, check_max: int) -> bool:
        times = m.properties.get(PROPERTY_CHECK_TIMES)
        n = 1
        if times is not None:
            n = _long(times)
            if n >= check_max:
                return True
            n += 1
        m.properties[PROPERTY_CHECK_TIMES] = str(n)
        return False

    @staticmethod
    def _need_skip(m: MessageExt, file_reserved_time_h: int) -> bool:
        if int(time.time() * 1000) - m.born_timestamp > file_reserved_time_h * 3600 * 1000:
            log.info("half message %s is older than fileReservedTime: skip it", m.msg_id)
            return True
        return False

    def _check_prepare_queue_offset(self, remove: dict[int, int], done: list[int], m: MessageExt) -> bool:
        prepared = m.properties.get(PROPERTY_PREPARED_QUEUE_OFFSET)
        if prepared is None:
            return self._put_immunity_back(m)
        offset = _long(prepared)
        if offset == -1:
            return False
        if offset in remove:
            done.append(remove.pop(offset))
            return True
        return self._put_immunity_back(m)

    def _renew(self, m: MessageExt) -> MessageExtBrokerInner:
        return MessageExtBrokerInner(
            topic=m.topic, body=m.body, queue_id=m.queue_id, flag=m.flag, properties=dict(m.properties),
            sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host, store_host=m.store_host,
            reconsume_times=m.reconsume_times,
        )  # fmt: skip

    def _put_immunity_back(self, m: MessageExt) -> bool:
        inner = self._renew(m)
        inner.properties.setdefault(PROPERTY_PREPARED_QUEUE_OFFSET, str(m.queue_offset))
        return self._put(inner).status is PutMessageStatus.PUT_OK

    def _put_back(self, m: MessageExt) -> MessageExt | None:
        """Store the half again at the queue's end (putBackHalfMsgQueue); the copy, as stored."""
        r = self._put(self._renew(m))
        amr = r.append_message_result
        if r.status is not PutMessageStatus.PUT_OK or amr is None:
            return None
        m.queue_offset, m.commit_log_offset, m.msg_id = amr.logics_offset, amr.wrote_offset, amr.msg_id
        return m

    def resume_check(self, commit_log_offset: int) -> str | None:
        """RESUME_CHECK_HALF_MESSAGE: the half at ``commit_log_offset`` (one in the half queue, or
        one the check discarded into TRANS_CHECK_MAX_TIME_TOPIC) stored again in the half queue
        with TRANSACTION_CHECK_TIMES 0, so its producer is asked about it again. None when done;
        else why not (4.9 re-puts any record it finds there, whatever its topic)."""
        try:
            m = self.store.look_message_by_offset(commit_log_offset)
        except ValueError:
            m = None
        if m is None:
            return f"no message at CommitLog offset {commit_log_offset}"
        if m.topic not in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC):
            return f"the message at CommitLog offset {commit_log_offset} is in {m.topic}, not a half message"
        inner = self._renew(m)
        inner.topic, inner.queue_id = RMQ_SYS_TRANS_HALF_TOPIC, 0
        inner.properties[PROPERTY_CHECK_TIMES] = "0"
        if self._put(inner).status is not PutMessageStatus.PUT_OK:
            return "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed."
        log.info("Put message back to RMQ_SYS_TRANS_HALF_TOPIC. real topic=%s",
                 m.properties.get(MessageConst.PROPERTY_REAL_TOPIC))  # fmt: skip
        return None

    def discard_message(self, m: MessageExt) -> None:
        """A half checked too often (or too old) goes to TRANS_CHECK_MAX_TIME_TOPIC (4.9's
        DefaultTransactionalMessageCheckListener.resolveDiscardMsg)."""
        if self.topics.select_topic_config(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC) is None:
            self.topics.create_topic_in_send_message_back_method(
                RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE
            )
        log.info(
            "half message %s reached transactionCheckMax: discard it into %s",
            m.msg_id,
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        )
        inner = self._renew(m)
        inner.topic, inner.queue_id = RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0
        self._put(inner)


class TransactionalMessageCheckService:
    """The master's check thread: a pass every ``interval_ms`` (transactionCheckInterval)."""

    def __init__(self, service: TransactionalMessageService, settings: Callable[[], tuple[int, int, int, int]]) -> None:
        self.service = service
        self.settings = settings  # (interval ms, timeout ms, check max, fileReservedTime h), read live
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="TransactionalMessageCheckService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            interval_ms = self.settings()[0]
            self._stop.wait(max(interval_ms, 1) / 1000)
            if self._stop.is_set():
                break
            _, timeout_ms, check_max, reserved_h = self.settings()
            try:
                self.service.check(timeout_ms, check_max, reserved_h)
            except Exception:  # the thread goes on: the next pass tries again
                log.exception("transaction check failed")
