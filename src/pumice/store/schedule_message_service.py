"""ScheduleMessageService: delayed delivery through SCHEDULE_TOPIC_XXXX.

A message put with the DELAY property (level 1–18 by default: "1s 5s 10s 30s 1m 2m 3m 4m 5m
6m 7m 8m 9m 10m 20m 30m 1h 2h") is stored in SCHEDULE_TOPIC_XXXX, queue ``level - 1``, with
its real topic and queue in REAL_TOPIC and REAL_QID; its ConsumeQueue tagsCode is the time
it is due. This service walks each level's queue in order and, for every entry that is due,
puts the message again on its real topic and queue (not delayed again, its own TAGS hash as
tagsCode; the stored copy keeps every property, DELAY, REAL_TOPIC and REAL_QID too, as 4.9's
``messageTimeup`` stores the original properties string), then moves that level's offset on.
A due time further ahead than the level's delay was computed by a clock that has since been
stepped back. RocketMQ's ``correctDeliverTimestamp`` delivers such a message at once, so a step
of a few seconds released 2-hour messages stored in those seconds. Here the first such entry a
level meets sets that level's cap, the time it was seen plus the level's delay, and every entry
stored by then is due at the cap or at its own due time, whichever comes first: never before
its real due time (it was stored before the cap was set), and at most one level's delay late
after a long step. Entries stored later keep their own due times.

Progress is kept in ``config/delayOffset.json`` (``{"offsetTable": {"<level>": offset}}``),
written atomically every ``flushDelayOffsetInterval`` (10 s) and at shutdown, so after a
restart delivery resumes where it stopped (a message may be delivered twice, never lost).
"""

from __future__ import annotations

import logging
import os
import threading
import time

import orjson

from pumice.common.atomic_file import atomic_write
from pumice.common.message import MessageExtBrokerInner
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import message_properties_to_string
from pumice.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC
from pumice.common.save_retry import SaveRetry
from pumice.store.consume_queue_ext import is_ext_addr
from pumice.store.message_store import DefaultMessageStore
from pumice.store.put_message_result import PutMessageStatus

log = logging.getLogger(__name__)

DELAY_FOR_A_WHILE_S = 0.1
FLUSH_DELAY_OFFSET_INTERVAL_S = 10.0
MAX_PER_LEVEL_AND_TICK = 1024


def decode_offset_table(raw: bytes) -> dict[int, int]:
    """delay level → offset from a ``delayOffset.json`` document; ValueError if it is not one."""
    try:
        table = orjson.loads(raw).get("offsetTable", {})
        return {int(k): int(v) for k, v in table.items()}
    except (ValueError, AttributeError, TypeError) as e:  # orjson.JSONDecodeError is a ValueError
        raise ValueError(f"not a delay offset document: {e}") from None


class ScheduleMessageService:
    def __init__(self, store: DefaultMessageStore, path: str | None = None) -> None:
        self.store = store
        self.path = path or os.path.join(store.config.config_dir, "delayOffset.json")
        self.levels = store.commit_log.max_delay_level
        self.offset_table: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._dirty = False
        self._save_retry = SaveRetry(self.path)
        # level -> (cap, end): entries below queue offset ``end`` are due by ``cap`` (a clock step back)
        self._step_caps: dict[int, tuple[int, int]] = {}

    # -- offsets -----------------------------------------------------------------------

    def load(self) -> bool:
        """The file, else its .bak; True when one was read or neither exists (a fresh store).
        False when what exists cannot be read: starting from zero would deliver every
        delayed message again, so the broker refuses to start (as upstream)."""
        bad = False
        for p in (self.path, self.path + ".bak"):
            try:
                with open(p, "rb") as f:
                    self.offset_table = decode_offset_table(f.read())
                if bad:
                    log.warning("%s is corrupt; loaded %s instead", self.path, p)
                return True
            except FileNotFoundError:
                continue
            except ValueError as e:
                log.error("cannot read %s: %s", p, e)
                bad = True
        return not bad

    def correct_delay_offset(self) -> None:
        """Each level's offset inside its queue's [min, max] (upstream's correctDelayOffset):
        an offset past the end stalled its level until the queue got there."""
        for level, offset in list(self.offset_table.items()):
            cq = self.store.get_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1)
            lo, hi = (cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()) if cq is not None else (0, 0)
            correct = min(max(offset, lo), hi)
            if correct != offset:
                log.error("correct delay offset of level %d from %d to %d (queue %d..%d)", level, offset, correct, lo,
                          hi)  # fmt: skip
                self.offset_table[level] = correct
                self._dirty = True

    def encode(self) -> bytes:
        """The ``delayOffset.json`` document of the table in memory (GET_ALL_DELAY_OFFSET)."""
        return orjson.dumps({"offsetTable": {str(k): v for k, v in sorted(self.offset_table.items())}})

    def take_master_copy(self, raw: bytes) -> None:
        """A slave's copy of its master's ``delayOffset.json`` (SlaveSynchronize): replace the
        table and persist. ValueError, and nothing changed, if ``raw`` is not such a document."""
        self.offset_table = decode_offset_table(raw)
        self.persist()

    def persist(self) -> bool:
        """Save the table; False when the save failed (a full disk): the table stays dirty and
        the delivery thread saves it again once its back-off has passed (SaveRetry), while
        delivery goes on (a crash meanwhile delivers again what the file does not record)."""
        try:
            atomic_write(self.path, self.encode())
        except OSError as e:
            self._dirty = True
            self._save_retry.failed(e)
            return False
        self._dirty = False
        self._save_retry.saved()
        return True

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> None:
        """Load (RuntimeError, naming the file, when it cannot be read), correct, deliver."""
        if not self.load():
            raise RuntimeError(f"cannot read {self.path} nor its .bak: fix or remove it")
        self.correct_delay_offset()
        self._stop.clear()  # a DLedger node stops and starts it again with each role change
        self._thread = threading.Thread(target=self._run, name="ScheduleMessageService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self.persist()

    def _run(self) -> None:
        last_flush = time.monotonic()
        while not self._stop.wait(DELAY_FOR_A_WHILE_S):
            try:
                self.deliver_due()
            except Exception:
                log.exception("ScheduleMessageService delivery failed")
            if self._save_retry.due() or (
                self._dirty and time.monotonic() - last_flush >= FLUSH_DELAY_OFFSET_INTERVAL_S
            ):
                last_flush = time.monotonic()
                self.persist()

    # -- delivery ----------------------------------------------------------------------

    def deliver_due(self, now_ms: int | None = None) -> int:
        """Put every due message back on its real topic; returns how many were delivered."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        delivered = 0
        for level in range(1, self.levels + 1):
            cq = self.store.get_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1)
            if cq is None:
                continue
            offset = max(self.offset_table.get(level, 0), cq.get_min_offset_in_queue())
            end = cq.get_max_offset_in_queue()
            latest = now + self.store.commit_log.delay_ms(level)
            for _ in range(MAX_PER_LEVEL_AND_TICK):
                if offset >= end:
                    break
                entry = cq.get_entry(offset)
                if entry is None:
                    break
                phy, size, deliver_at = entry
                if is_ext_addr(deliver_at):  # its ConsumeQueueExt unit is gone: 4.9 counts from the store time
                    log.error(
                        "[BUG] can't find consume queue extend file content! addr=%d, offsetPy=%d", deliver_at, phy
                    )
                    deliver_at = self.store.commit_log.pickup_store_timestamp(
                        phy, size
                    ) + self.store.commit_log.delay_ms(level)
                step_cap = self._step_caps.get(level)
                if step_cap is not None and offset >= step_cap[1]:
                    del self._step_caps[level]  # stored after the cap was set: its own time
                    step_cap = None
                if step_cap is None and deliver_at > latest:
                    # further ahead than its level: stored under a clock since stepped back
                    step_cap = self._step_caps[level] = (latest, end)
                if step_cap is not None:
                    deliver_at = min(deliver_at, step_cap[0])
                if deliver_at > now:
                    break

                if not self._deliver(phy):
                    break  # the store refused: try again on the next tick
                offset += 1
                delivered += 1
            if offset != self.offset_table.get(level, 0):
                self.offset_table[level] = offset
                self._dirty = True
        return delivered

    def _deliver(self, phy: int) -> bool:
        m = self.store.look_message_by_offset(phy)
        if m is None:
            log.warning("delayed message at %d is gone; skip it", phy)
            return True
        props = dict(m.properties)
        real_topic = props.get(MessageConst.PROPERTY_REAL_TOPIC)
        real_qid = props.get(MessageConst.PROPERTY_REAL_QUEUE_ID)
        props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)  # not delayed again...
        if not real_topic or real_qid is None or not real_qid.lstrip("-").isdigit():
            log.warning("delayed message at %d has no real topic; skip it", phy)
            return True
        inner = MessageExtBrokerInner(
            topic=real_topic, body=m.body, queue_id=int(real_qid), flag=m.flag, properties=props,
            sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host, store_host=m.store_host,
            reconsume_times=m.reconsume_times, prepared_transaction_offset=m.prepared_transaction_offset,
            # ...but stored with every property it had, DELAY, REAL_TOPIC and REAL_QID too, as 4.9's
            # messageTimeup writes the original properties string (consumers and traces read them)
            properties_string=message_properties_to_string(m.properties),
        )  # fmt: skip
        r = self.store.put_messages((inner,), wait_flush=False)
        if r.status is not PutMessageStatus.PUT_OK:
            log.warning("deliver delayed message at %d to %s failed: %s %s", phy, real_topic, r.status.name, r.remark)
            return False
        self.store.flush_future(r)  # SYNC_FLUSH: queue the flush; delivery does not wait for it
        return True
