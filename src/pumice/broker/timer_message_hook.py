"""The timer routing of every put (RocketMQ 5.3.3's HookUtils.handleScheduleMessage, a put hook
of the store: SEND_MESSAGE, SEND_BATCH_MESSAGE, the message an END_TRANSACTION commit puts,
CONSUMER_SEND_MSG_BACK's copy, the reply messages stored), and its answers.

A message is a timer message when it has

=====================  ==============================================================
property               delivery time
=====================  ==============================================================
``TIMER_DELAY_SEC``    now + the value in seconds (checked first)
``TIMER_DELAY_MS``     now + the value in ms
``TIMER_DELIVER_MS``   the value, ms since the epoch (the 5.x clients' ``setDeliverTimeMs``)
``__STARTDELIVERTIME`` the value, ms since the epoch (4.x users' property; Pumice's own: 5.3.3
                       stores such a message at once)
=====================  ==============================================================

and no DELAY level (a DELAY level wins: the timer properties are dropped, as in 5.3.3; so a
send-back's copy into a retry topic keeps its level). A time in the future goes to
``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS (the slot: the time floored to
``timerPrecisionMs``, one step less when it is a multiple, so the slot is read no earlier than
the time), REAL_TOPIC and REAL_QID, its properties string rebuilt in Java's HashMap order. A
time now or past is stored on its topic at once, properties untouched.

Which puts (5.3.3 routes transaction types NOT and COMMIT):

===========================  ====================================================================
put                          routing
===========================  ====================================================================
a half message               held as it is (the time counts from the commit; 5.3.3's half has
                             type NOT, so it goes through the wheel itself, its REAL_TOPIC lost)
a commit (END_TRANSACTION)   routed: due its delay after the commit
a rolled back / prepared     not routed (never delivered)
type without a half
a batch                      routed as a whole by the batch's own properties (the request's,
                             appended to each message); a timer property on a message inside
                             is refused MESSAGE_ILLEGAL unless the batch has one (5.3.3 stores
                             such a message at once, its time ignored)
===========================  ====================================================================

Refusals, as 5.3.3 answers them (its PutMessageStatus; ``remark`` is the answer's):

========================================  ================  =================================================
case                                      response code     remark
========================================  ================  =================================================
a value that is not a Java long           MESSAGE_ILLEGAL   timer message illegal, the delay time should not
later than now + ``timerMaxDelaySec``     (13)              be bigger than the max delay %dms; or if set del
                                                            msg, the delay time should be bigger than the
                                                            current time
``timerWheelEnable=false``                SYSTEM_ERROR (1)  accurate timer message is not enabled,
                                                            timerWheelEnable is false
the slot holds over                       SYSTEM_ERROR (1)  timer message is under flow control, …
``timerCongestNumEachSlot``
========================================  ================  =================================================
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from pumice.common.message import MessageExtBatch, MessageExtBrokerInner
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import (
    batch_properties_holding,
    java_properties_string,
    string_to_message_properties,
)
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.common.mix_all import RMQ_SYS_TRANS_HALF_TOPIC
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_config import MessageStoreConfig
from pumice.store.put_message_result import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from pumice.store.timer.timer_message_store import TimerMessageStore

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
START_DELIVER_TIME = "__STARTDELIVERTIME"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
TIMER_PROPERTIES = (TIMER_DELAY_SEC, TIMER_DELAY_MS, TIMER_DELIVER_MS, START_DELIVER_TIME)
_TIMER_NAMES = frozenset(TIMER_PROPERTIES)
_JAVA_LONG = re.compile(r"[+-]?\d{1,19}")
_TRAN_MASK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE  # the two transaction type bits
_ROUTED_TYPES = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
# each refusal's response code (5.3.3's SendMessageProcessor.handlePutMessageResult)
REFUSAL_CODES = {
    PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL: ResponseCode.SYSTEM_ERROR,
    PutMessageStatus.WHEEL_TIMER_NOT_ENABLE: ResponseCode.SYSTEM_ERROR,
}
# every timer property name holds one of these: what a batch's properties are searched for
_NEEDLES = (b"TIMER_DEL", START_DELIVER_TIME.encode())


def _java_long(raw: str) -> int:
    if not _JAVA_LONG.fullmatch(raw) or not -(2**63) <= int(raw) < 2**63:
        raise ValueError(raw)
    return int(raw)


def is_timer_message(props: dict[str, str]) -> bool:
    return not _TIMER_NAMES.isdisjoint(props)  # every put asks: 0.15 µs, against 0.84 for any() over the names


def route_timer_message(
    msg: MessageExtBrokerInner,
    config: MessageStoreConfig,
    timer_store: TimerMessageStore | None,
    now_ms: int | None = None,
) -> tuple[int, str] | None:
    """Route ``msg`` (changed in place) if it is a timer message; a refusal as (response code,
    remark), or None to store it."""
    refused = route(msg, config, timer_store, now_ms)
    return None if refused is None else (REFUSAL_CODES[refused.status], refused.remark)


def route(
    msg: MessageExtBrokerInner,
    config: MessageStoreConfig,
    timer_store: TimerMessageStore | None,
    now_ms: int | None = None,
) -> PutMessageResult | None:
    """``route_timer_message`` with the refusal as the put's result."""
    props = msg.properties
    if msg.topic == TIMER_TOPIC or not is_timer_message(props):
        return None
    level = props.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
    if level is not None and level.strip().lstrip("+").isdigit() and int(level) > 0:
        msg.properties = {k: v for k, v in props.items() if k not in TIMER_PROPERTIES[:3]}
        msg.properties_string = java_properties_string(msg.properties)
        return None
    if TIMER_OUT_MS in props:  # routed already (a delivered timer message, sent back say)
        return None
    if not config.timer_wheel_enable:
        return PutMessageResult(
            PutMessageStatus.WHEEL_TIMER_NOT_ENABLE,
            remark="accurate timer message is not enabled, timerWheelEnable is false",
        )
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000  # the store's clock
    illegal = PutMessageResult(
        PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
        remark=f"timer message illegal, the delay time should not be bigger than the max delay "
        f"{config.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger than the "
        "current time",
    )
    try:
        if TIMER_DELAY_SEC in props:
            deliver_ms = now + _java_long(props[TIMER_DELAY_SEC]) * 1000
        elif TIMER_DELAY_MS in props:
            deliver_ms = now + _java_long(props[TIMER_DELAY_MS])
        elif TIMER_DELIVER_MS in props:
            deliver_ms = _java_long(props[TIMER_DELIVER_MS])
        else:
            deliver_ms = _java_long(props[START_DELIVER_TIME])
    except ValueError:
        return illegal
    if deliver_ms <= now:
        return illegal if TIMER_DEL_UNIQKEY in props else None
    if deliver_ms - now > config.timer_max_delay_sec * 1000:
        return illegal
    p = config.timer_precision_ms
    deliver_ms = deliver_ms - p if deliver_ms % p == 0 else deliver_ms // p * p
    if timer_store is not None and timer_store.is_reject(deliver_ms):
        n = config.timer_congest_num_each_slot
        return PutMessageResult(
            PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL,
            remark=(
                f"timer message is under flow control, max num limit is {n * 2} or the current value is greater "
                f"than {n} and less than {n * 2}, trigger random flow control"
            ),
        )
    new_props = dict(props)
    new_props[TIMER_OUT_MS] = str(deliver_ms)
    new_props[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
    new_props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties = new_props
    msg.properties_string = java_properties_string(new_props)
    msg.topic = TIMER_TOPIC
    msg.queue_id = 0
    return None


class TimerMessageHook:
    """The store's put hook (``DefaultMessageStore.put_message_hooks``): routes a timer message
    (see the module docstring) or refuses the put."""

    def __init__(self, config: MessageStoreConfig, timer_store: TimerMessageStore | None) -> None:
        self.config = config
        self.timer_store = timer_store

    def __call__(self, msg: MessageExtBrokerInner | MessageExtBatch) -> PutMessageResult | None:
        if msg.sys_flag & _TRAN_MASK not in _ROUTED_TYPES or msg.topic == RMQ_SYS_TRANS_HALF_TOPIC:
            return None
        if isinstance(msg, MessageExtBatch):
            return self._route_batch(msg)
        if not is_timer_message(msg.properties):
            return None
        return route(msg, self.config, self.timer_store)

    def _route_batch(self, batch: MessageExtBatch) -> PutMessageResult | None:
        props = string_to_message_properties(batch.properties_suffix) if batch.properties_suffix else {}
        if is_timer_message(props):  # the batch's own: every message goes by it
            inner = MessageExtBrokerInner(topic=batch.topic, body=b"", queue_id=batch.queue_id, properties=props,
                                          sys_flag=batch.sys_flag)  # fmt: skip
            refused = route(inner, self.config, self.timer_store)
            if refused is not None:
                return refused
            batch.topic, batch.queue_id = inner.topic, inner.queue_id
            batch.properties_suffix = inner.properties_string or ""
            return None
        found = batch_timer_property(batch.body)
        if found is None:
            return None
        index, name = found
        return PutMessageResult(
            PutMessageStatus.MESSAGE_ILLEGAL,
            remark=(
                f"message {index} of the batch has the timer property {name}, which is honoured only on the batch "
                "itself (the request's properties, which apply to every message of it): send that message alone, "
                "or give the batch the time"
            ),
        )


def batch_timer_property(body: bytes | bytearray | memoryview) -> tuple[int, str] | None:
    """The first message of a SEND_BATCH_MESSAGE body (see ``MessageExtBatch``) with a timer
    property: (its index, the property's name), or None."""
    for index, start, end in batch_properties_holding(body, _NEEDLES):
        props = string_to_message_properties(bytes(body[start:end]).decode("utf-8", "replace"))
        for name in TIMER_PROPERTIES:
            if name in props:
                return index, name
    return None
