"""TimerMessageStore: timer messages held in the wheel and put back on their topic when due
(RocketMQ 5.3.3's TimerMessageStore; docs/v5/timer.md).

A timer message is stored first in ``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS (its due
slot's time), REAL_TOPIC and REAL_QID (the broker's send path does that:
``pumice.broker.timer_message_hook``). Three threads then move it on:

- enqueue (TimerEnqueueGetService and TimerEnqueuePutService): follows that queue from
  ``currQueueOffset``; a message whose time is before the wheel's write time is put back at
  once (TIMER_ENQUEUE_MS = Long.MAX_VALUE), any other gets a ``timerlog`` unit chained into its
  ``timerwheel`` slot (one beyond the roll window, 2 days, goes into a slot at the window's end
  with the ROLL magic and is put back into the timer topic then, to be enqueued again); the
  write time follows the clock (the precision's multiple at or below it) and never goes back.
- dequeue (TimerDequeueGetService and the get/put message services): while the read time is
  before the write time, reads the read time's slot, walks its units backwards, puts each
  message back on REAL_TOPIC/REAL_QID (same body, flags, born time and hosts, UNIQ_KEY: the
  same message id) with TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS added, then moves the read time
  one slot on. Only a broker that delivers (a master) dequeues.
- flush (TimerFlushService): every ``timerFlushIntervalMs`` (1 s) the timerlog, the wheel, the
  ``timercheck`` checkpoint and ``timermetrics``.

A slot is read only once the write time has passed it, and the send path files a message
in the slot at or below its time minus one precision step when that is exact, so nothing is
put back before its time; it is late by up to one precision step plus the threads' pace. A
clock stepped back stops the write time (it never goes back): slots after it wait until the
clock reaches it again, so nothing held is released early; a step forward releases every slot
up to the new time at once.

Recovery (``load``) follows 5.3.3: the timerlog is scanned from one file before the
checkpoint's flushed position (a unit with a bad size or magic ends it) and every unit's slot
is pointed at it again; the queue offset is the last unit's message's plus one, capped by the
checkpoint's; the read time is the checkpoint's. What was delivered after the last checkpoint
(at most ``timerFlushIntervalMs`` earlier) is delivered again after a crash: at least once.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from pumice.common.java_hash import java_string_hash
from pumice.common.message import MessageExt, MessageExtBrokerInner
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import java_properties_string
from pumice.store.message_store import DefaultMessageStore
from pumice.store.message_store_config import BrokerRole
from pumice.store.put_message_result import PutMessageStatus
from pumice.store.service_thread import ServiceThread
from pumice.store.timer.timer_checkpoint import TimerCheckpoint
from pumice.store.timer.timer_log import (
    BLANK,
    BLANK_MAGIC_CODE,
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    UNIT,
    UNIT_SIZE,
    TimerLog,
    is_magic_ok,
)
from pumice.store.timer.timer_metrics import TimerMetrics
from pumice.store.timer.timer_wheel import IGNORE, TimerWheel

UNIT_HEAD = BLANK  # a unit's first 16 bytes: size, prevPos, magic

log = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
LONG_MAX = 2**63 - 1
DAY_SECS = 24 * 3600
TIMER_WHEEL_TTL_DAY = 7
TIMER_BLANK_SLOTS = 60
ENQUEUE_BATCH = 32  # messages enqueued between two moves of the write time
CLEAN_TIMER_LOG_INTERVAL_S = 30.0


def now_ms() -> int:
    """The store's clock: CommitLog store timestamps are read the same way."""
    return time.time_ns() // 1_000_000


def build_delete_key(real_topic: str, uniq_key: str) -> str:
    return f"{real_topic}+{uniq_key}"


class _Loop(ServiceThread):
    """A service thread that calls ``step`` and sleeps ``idle_s`` when it did nothing."""

    def __init__(self, name: str, step: Callable[[], bool], idle_s: float) -> None:
        super().__init__(name)
        self._step = step
        self._idle_s = idle_s

    def run(self) -> None:
        while not self.stopped:
            try:
                busy = self._step()
            except Exception:
                log.exception("%s failed; retrying", self.name)
                busy = False
                self.wait_for_running(0.05)
            if not busy:
                self.wait_for_running(self._idle_s)


class TimerMessageStore:
    def __init__(self, store: DefaultMessageStore, clock: Callable[[], int] | None = None) -> None:
        config = store.config
        self.store = store
        self.config = config
        self._clock = clock if clock is not None else now_ms
        self.precision_ms = config.timer_precision_ms
        self.slots_total = TIMER_WHEEL_TTL_DAY * DAY_SECS
        root = config.store_path_root_dir
        self.timer_wheel = TimerWheel(TimerWheel.path(root), self.slots_total, self.precision_ms)
        self.timer_log = TimerLog(TimerLog.path(root), config.mapped_file_size_timer_log)
        self.checkpoint = TimerCheckpoint(TimerCheckpoint.path_in(root))
        self.metrics = TimerMetrics(TimerMetrics.path_in(root))
        rws = config.timer_roll_window_slot
        blank_limit = self.slots_total - TIMER_BLANK_SLOTS
        self.roll_window_slots = blank_limit if rws > blank_limit or rws < 2 else rws
        self.curr_read_time_ms = 0
        self.curr_write_time_ms = 0
        self.commit_read_time_ms = 0
        self.curr_queue_offset = 0
        self.commit_queue_offset = 0
        self._last_commit = (0, 0)
        self.should_running_dequeue = False
        self._threads: list[ServiceThread] = []
        self._running = False
        self._closed = False
        self._last_clean = 0.0

    def _now_ms(self) -> int:
        return self._clock()

    def _format(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    # -- load and recovery -------------------------------------------------------------------

    def load(self) -> bool:
        ok = self.timer_log.load()
        ok = ok and self.metrics.load()
        if ok:
            self.recover()
        return ok

    def recover(self) -> None:
        q = self.timer_log.mapped_file_queue
        last_flush = self.checkpoint.last_timer_log_flush_pos
        last = q.get_last_mapped_file()
        if last is not None:
            last_flush -= last.file_size
        process_offset = self._recover_and_revise(max(0, last_flush), True)
        q.flushed_where = q.committed_where = process_offset
        queue_offset = self._revise_queue_offset(process_offset)
        curr = self.checkpoint.last_timer_queue_offset if queue_offset == -1 else queue_offset + 1
        curr = min(curr, self.checkpoint.master_timer_queue_offset)
        cq = self.store.get_consume_queue(TIMER_TOPIC, 0)
        if cq is not None:
            lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            if curr < lo or curr > hi:
                log.warning("Timer currQueueOffset:%d is outside the queue's %d..%d", curr, lo, hi)
                curr = min(max(curr, lo), hi)
        self.curr_queue_offset = curr
        read = self.checkpoint.last_read_time_ms
        oldest = self._format(self._now_ms()) - (self.slots_total - TIMER_BLANK_SLOTS) * self.precision_ms
        self.curr_read_time_ms = max(read, oldest)
        min_first = self.timer_wheel.check_phy_pos(self.curr_read_time_ms, process_offset)
        if min_first < process_offset:
            log.warning("Timer recheck because of minFirst:%d processOffset:%d", min_first, process_offset)
            self._recover_and_revise(min_first, False)
        log.info("Timer recover ok currReadTimeMs:%d currQueueOffset:%d checkQueueOffset:%d processOffset:%d",
                 self.curr_read_time_ms, curr, self.checkpoint.last_timer_queue_offset, process_offset)  # fmt: skip
        self.commit_read_time_ms = self.curr_read_time_ms
        self.commit_queue_offset = self.curr_queue_offset
        self.prepare_checkpoint()

    def _recover_and_revise(self, begin_offset: int, check: bool) -> int:
        """Point every unit's slot at it from the file holding ``begin_offset`` on; with
        ``check``, the first unit with a bad size or magic ends the log (cut there). Returns the
        offset after the last good unit."""
        q = self.timer_log.mapped_file_queue
        files = q.mapped_files
        if not files:
            return 0
        index = 0
        for i in range(len(files) - 1, -1, -1):
            if begin_offset >= files[i].file_from_offset:
                index = i
                break
        check_offset = files[index].file_from_offset
        for mf in files[index:]:
            size = mf.file_size if check else mf.read_position
            pos, stop = 0, False
            while pos < size:
                if pos + 16 > size:
                    stop = True
                    break
                unit_size, _prev, magic = UNIT_HEAD.unpack_from(mf.mmap, pos)
                if magic == BLANK_MAGIC_CODE:
                    break
                if pos + UNIT_SIZE > size or (check and (not is_magic_ok(magic) or unit_size != UNIT_SIZE)):
                    stop = True
                    break
                fields = UNIT.unpack_from(mf.mmap, pos)
                if unit_size == UNIT_SIZE and is_magic_ok(magic):
                    self.timer_wheel.revise_slot(fields[3] + fields[4], IGNORE, mf.file_from_offset + pos, True)
                pos += UNIT_SIZE
            check_offset = mf.file_from_offset + pos
            if stop:
                break
        if check:
            q.truncate_dirty_files(check_offset)
        return check_offset

    def _revise_queue_offset(self, process_offset: int) -> int:
        """The timer queue offset of the last unit's message (checked against the queue), or -1."""
        if process_offset < UNIT_SIZE:
            return -1
        unit = self.timer_log.read_unit(process_offset - UNIT_SIZE)
        if unit is None or unit[0] != UNIT_SIZE or not is_magic_ok(unit[2]):
            return -1
        offset_py, size_py = unit[5], unit[6]
        msg = self.store.look_message_by_offset(offset_py)
        if msg is None:
            return -1
        cq = self.store.get_consume_queue(TIMER_TOPIC, msg.queue_id)
        if cq is None:
            return msg.queue_offset
        tmp = msg.queue_offset
        for _ in range(20000):
            if tmp < 0:
                break
            entry = cq.get_entry(tmp)
            if entry is not None and entry[0] == offset_py and entry[1] == size_py:
                return tmp
            tmp -= 1
        return msg.queue_offset

    # -- life cycle --------------------------------------------------------------------------

    def start(self, should_running_dequeue: bool, threads: bool = True) -> None:
        """Start the enqueue, dequeue and flush threads; only a broker that delivers dequeues.
        ``threads=False``: the caller drives ``enqueue``, ``dequeue`` and ``flush`` (tests)."""
        self.should_running_dequeue = should_running_dequeue
        if self._running or self._closed:
            return
        self._maybe_move_write_time()
        if not threads:
            self._running = True
            return
        idle = max(0.01, 0.1 * self.precision_ms / 1000)
        self._threads = [
            _Loop("TimerEnqueueService", self.enqueue, idle),
            _Loop("TimerDequeueService", lambda: self.dequeue() != -1, idle),
            _Loop("TimerFlushService", self._flush_step, self.config.timer_flush_interval_ms / 1000),
        ]
        self._running = True
        for t in self._threads:
            t.start()
        log.info("Timer start ok currReadTimeMs:%d queueOffset:%d", self.curr_read_time_ms, self.curr_queue_offset)

    def stop(self) -> None:
        """Stop the threads (a master becoming a slave) and write the checkpoint."""
        self._running = False
        for t in self._threads:
            t.shutdown(10)
        self._threads = []
        if not self._closed:
            self._flush_step()  # with the master's offsets: the dequeue flag still says so
        self.should_running_dequeue = False

    def shutdown(self) -> None:
        if self._closed:
            return
        self.stop()
        self._closed = True
        self.timer_log.shutdown()
        self.timer_wheel.shutdown()
        self.checkpoint.shutdown()

    def _maybe_move_write_time(self) -> None:
        now = self._format(self._now_ms())
        if self.curr_write_time_ms < now:
            self.curr_write_time_ms = now

    # -- enqueue -----------------------------------------------------------------------------

    def enqueue(self) -> bool:
        """Take the timer queue's next messages into the wheel; True when any were taken."""
        if self.config.timer_stop_enqueue or not self._running:
            return False
        cq = self.store.get_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            self._maybe_move_write_time()
            return False
        lo = cq.get_min_offset_in_queue()
        if self.curr_queue_offset < lo:
            log.warning("Timer currQueueOffset:%d is smaller than minOffsetInQueue:%d", self.curr_queue_offset, lo)
            self.curr_queue_offset = lo
        end = cq.get_max_offset_in_queue()
        if not self.should_running_dequeue:  # a slave: up to what the master enqueued (isRunningEnqueue)
            end = min(end, self.checkpoint.master_timer_queue_offset)
        taken = 0
        while self._running and taken < ENQUEUE_BATCH and self.curr_queue_offset < end:
            offset = self.curr_queue_offset
            entry = cq.get_entry(offset)
            if entry is None:
                break
            phy, size, _ = entry
            msg = self.store.look_message_by_offset(phy)
            if msg is None:
                log.warning("Fail to read timer message at offsetPy:%d sizePy:%d; skipped", phy, size)
            elif not self._put_to_wheel(phy, size, msg):
                break  # the timerlog or the store refused: the same message again on the next pass
            taken += 1
            self.curr_queue_offset = offset + 1
        self.commit_queue_offset = self.curr_queue_offset
        self._maybe_move_write_time()
        return taken > 0

    def _put_to_wheel(self, offset_py: int, size_py: int, msg: MessageExt) -> bool:
        raw = msg.properties.get(TIMER_OUT_MS, "")
        try:
            delayed = int(raw)
        except ValueError:
            log.error("timer message at %d has TIMER_OUT_MS %r, not a time; skipped", offset_py, raw[:32])
            return True
        if self.should_running_dequeue and delayed < self.curr_write_time_ms:
            return self._put_back(msg, LONG_MAX, roll=False)  # due already: never enqueued
        return self.do_enqueue(offset_py, size_py, delayed, msg)

    def do_enqueue(self, offset_py: int, size_py: int, delayed: int, msg: MessageExt) -> bool:
        """Append the message's unit to the timerlog and chain it into its slot."""
        write_time = self.curr_write_time_ms
        p, rws = self.precision_ms, self.roll_window_slots
        magic = MAGIC_DEFAULT
        if delayed - write_time >= rws * p:  # beyond the roll window: held at its end, then again
            magic |= MAGIC_ROLL
            if delayed - write_time - rws * p < rws // 3 * p:
                delayed = write_time + rws // 2 * p
            else:
                delayed = write_time + rws * p
        is_delete = TIMER_DEL_UNIQKEY in msg.properties
        if is_delete:
            magic |= MAGIC_DELETE
        real_topic = msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC)
        slot = self.timer_wheel.get_slot(delayed)
        unit = UNIT.pack(UNIT_SIZE, slot.last_pos, magic, write_time, delayed - write_time, offset_py, size_py,
                         java_string_hash(real_topic) if real_topic is not None else 0, 0)  # fmt: skip
        try:
            pos = self.timer_log.append(unit)
        except OSError as e:
            log.error("cannot append to the timerlog: %s", e)
            return False
        if pos == -1:
            return False
        self.timer_wheel.put_slot(delayed, pos if slot.first_pos == -1 else slot.first_pos, pos,
                                  slot.num - 1 if is_delete else slot.num + 1, slot.magic)  # fmt: skip
        self._add_metric(msg, -1 if is_delete else 1)
        return True

    def _add_metric(self, msg: MessageExt, value: int) -> None:
        topic = msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC)
        if topic is None or msg.properties.get(TIMER_ENQUEUE_MS) == str(LONG_MAX):
            return
        self.metrics.add_and_get(topic, value)

    # -- dequeue -----------------------------------------------------------------------------

    def dequeue(self) -> int:
        """Deliver the read time's slot: -1 when there is nothing to read yet, 0 for empty
        slots skipped, 1 for a slot delivered."""
        if self.config.timer_stop_dequeue or not self.should_running_dequeue or not self._running:
            return -1
        read, write = self.curr_read_time_ms, self.curr_write_time_ms
        if read >= write:
            return -1
        nxt = self.timer_wheel.next_slot_time(read, write)
        if nxt != read:  # empty slots: moved over at once
            self.curr_read_time_ms = self.commit_read_time_ms = nxt
            return 0
        slot = self.timer_wheel.get_slot(read)
        if slot.time_ms == -1:
            self._move_read_time()
            return 0
        units: list[tuple[int, ...]] = []
        pos, seen = slot.last_pos, 0
        while pos != -1 and seen <= slot.num + 1_000_000:
            unit = self.timer_log.read_unit(pos)
            if unit is None:
                break
            units.append(unit)
            pos = unit[1]
            seen += 1
        if not units:
            log.warning("dequeue time:%d but read nothing from timerLog", read)
        units.reverse()  # enqueue order
        deletes: set[str] = set()
        for u in units:
            if u[2] & MAGIC_DELETE and not u[2] & MAGIC_ROLL:
                m = self.store.look_message_by_offset(u[5])
                if m is not None and TIMER_DEL_UNIQKEY in m.properties:
                    deletes.add(m.properties[TIMER_DEL_UNIQKEY])
        for u in units:
            magic, enqueue_time, offset_py = u[2], u[3], u[5]
            if magic & MAGIC_DELETE and not magic & MAGIC_ROLL:
                continue
            msg = self.store.look_message_by_offset(offset_py)
            if msg is None:
                log.warning("Fail to read timer message at offsetPy:%d; skipped", offset_py)
                continue
            uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            real_topic = msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC, "")
            if uniq is not None and deletes and build_delete_key(real_topic, uniq) in deletes:
                continue
            self._add_metric(msg, -1)
            if not self._put_back(msg, enqueue_time, roll=bool(magic & MAGIC_ROLL)):
                return -1  # stopped before it was stored: this slot again after a restart
        self._move_read_time()
        return 1

    def _move_read_time(self) -> None:
        self.curr_read_time_ms += self.precision_ms
        self.commit_read_time_ms = self.curr_read_time_ms

    def _put_back(self, msg: MessageExt, enqueue_time: int, roll: bool) -> bool:
        """Store the message on its real topic and queue (a roll: in the timer topic again),
        retried until the store takes it; False only when stopped first."""
        props = dict(msg.properties)
        if enqueue_time != -1:
            props[TIMER_ENQUEUE_MS] = str(enqueue_time)
        if roll:
            props[TIMER_ROLL_TIMES] = str(int(props.get(TIMER_ROLL_TIMES, "0") or 0) + 1)
        props[TIMER_DEQUEUE_MS] = str(self._now_ms())
        stored = java_properties_string(props)  # 5.3.3 writes the map before it drops REAL_TOPIC/REAL_QID
        inner_props = dict(props)
        if roll:
            topic, queue_id = msg.topic, msg.queue_id
        else:
            topic = inner_props.pop(MessageConst.PROPERTY_REAL_TOPIC, "")
            raw_qid = inner_props.pop(MessageConst.PROPERTY_REAL_QUEUE_ID, "0")
            queue_id = int(raw_qid) if raw_qid.lstrip("-").isdigit() else 0
            if not topic:
                log.warning("timer message %s has no REAL_TOPIC; dropped", props.get("UNIQ_KEY"))
                return True
        inner = MessageExtBrokerInner(
            topic=topic, body=msg.body, queue_id=queue_id, flag=msg.flag, properties=inner_props,
            sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
            store_host=msg.store_host, reconsume_times=msg.reconsume_times, properties_string=stored,
        )  # fmt: skip
        delay = 0.05
        while True:
            r = self.store.put_messages((inner,), wait_flush=False)
            if r.status is PutMessageStatus.PUT_OK:
                self.store.flush_future(r)  # SYNC_FLUSH: queued; delivery does not wait for it
                return True
            if r.status is PutMessageStatus.MESSAGE_ILLEGAL or r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED:
                log.warning("timer message %s refused by the store (%s %s); dropped", props.get("UNIQ_KEY"),
                            r.status.name, r.remark)  # fmt: skip
                return True
            log.warning("put timer message %s to %s: %s %s; retrying", props.get("UNIQ_KEY"), topic, r.status.name,
                        r.remark)  # fmt: skip
            if not self._running or self.store.config.broker_role is BrokerRole.SLAVE:
                return False
            time.sleep(delay)
            delay = min(1.0, delay * 2)

    # -- checkpoint and flush ----------------------------------------------------------------

    def take_master_checkpoint(self, body: bytes) -> None:
        """A slave: the master's GET_TIMER_CHECK_POINT answer (SlaveSynchronize.syncTimerCheckPoint):
        its read time (this store's too, so its flush writes it back) and queue offset, which
        caps the enqueue, with its dataVersion. ValueError when the body is not a checkpoint."""
        read, _, _, master_offset, state_version, timestamp, counter = TimerCheckpoint.decode(body)
        cp = self.checkpoint
        cp.last_read_time_ms, cp.master_timer_queue_offset = read, master_offset
        cp.state_version, cp.timestamp, cp.counter = state_version, timestamp, counter
        if not self.should_running_dequeue:  # syncLastReadTimeMs
            self.curr_read_time_ms = self.commit_read_time_ms = read

    def prepare_checkpoint(self) -> None:
        cp = self.checkpoint
        cp.last_timer_log_flush_pos = self.timer_log.mapped_file_queue.flushed_where
        cp.last_read_time_ms = self.commit_read_time_ms
        if self.should_running_dequeue:
            cp.master_timer_queue_offset = self.commit_queue_offset
            if (self.commit_read_time_ms, self.commit_queue_offset) != self._last_commit:
                cp.update_data_version(0)
                self._last_commit = (self.commit_read_time_ms, self.commit_queue_offset)
        cp.last_timer_queue_offset = min(self.commit_queue_offset, cp.master_timer_queue_offset)

    def flush(self) -> None:
        self._flush_step()

    def _flush_step(self) -> bool:
        self.prepare_checkpoint()
        self.timer_log.flush()
        self.timer_wheel.flush()
        self.checkpoint.flush()
        self.metrics.persist()
        if time.monotonic() - self._last_clean >= CLEAN_TIMER_LOG_INTERVAL_S:
            self._last_clean = time.monotonic()
            self.clean_timer_log()
        return False

    def clean_timer_log(self) -> int:
        """Delete timerlog files (never the last) whose last unit's message is below the
        CommitLog's first offset (deleteExpiredFileByOffsetForTimerLog); how many went."""
        q = self.timer_log.mapped_file_queue
        min_py = self.store.get_min_phy_offset()
        gone = []
        last_unit = self.timer_log.file_size - (self.timer_log.file_size - 16) % UNIT_SIZE - 16 - UNIT_SIZE
        for mf in q.mapped_files[:-1]:
            fields = UNIT.unpack_from(mf.mmap, last_unit) if last_unit >= 0 else None
            if fields is None or fields[0] != UNIT_SIZE or fields[5] >= min_py:
                break
            gone.append(mf)
        for mf in gone:
            mf.destroy(60_000)
        q.delete_expired_file(gone)
        return len(gone)

    # -- figures -----------------------------------------------------------------------------

    def dequeue_behind_messages(self) -> int:
        return self.timer_wheel.all_num(self.curr_read_time_ms)

    def congest_num(self, deliver_time_ms: int) -> int:
        return self.timer_wheel.get_slot(deliver_time_ms).num

    def is_reject(self, deliver_time_ms: int) -> bool:
        """Flow control of a full slot (timerCongestNumEachSlot; never at its default)."""
        limit = self.config.timer_congest_num_each_slot
        n = self.congest_num(deliver_time_ms)
        if n <= limit:
            return False
        if n >= limit * 2:
            return True
        return random.randrange(1000) > 1000 * (n - limit) / (limit + 0.1)
