"""The send path's routing of timer messages (RocketMQ 5.3.3's HookUtils.handleScheduleMessage
for timer messages, and its answers in SendMessageProcessor).

A message (not a half message: its commit is stored as it was) is a timer message when it has

=====================  ==============================================================
property               delivery time
=====================  ==============================================================
``TIMER_DELAY_SEC``    now + the value in seconds (checked first)
``TIMER_DELAY_MS``     now + the value in ms
``TIMER_DELIVER_MS``   the value, ms since the epoch (the 5.x clients' ``setDeliverTimeMs``)
``__STARTDELIVERTIME`` the value, ms since the epoch (4.x users' property; Pumice's own: 5.3.3
                       stores such a message at once)
=====================  ==============================================================

and no DELAY level (a DELAY level wins: the timer properties are dropped, as in 5.3.3). A time
in the future goes to ``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS (the slot: the time
floored to ``timerPrecisionMs``, one step less when it is a multiple, so the slot is read no
earlier than the time), REAL_TOPIC and REAL_QID, its properties string rebuilt in Java's
HashMap order. A time now or past is stored on its topic at once, properties untouched.

Refusals, as 5.3.3 answers them:

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

from pumice.common.message import MessageExtBrokerInner
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import java_properties_string
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_config import MessageStoreConfig

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
_JAVA_LONG = re.compile(r"[+-]?\d{1,19}")


def _java_long(raw: str) -> int:
    if not _JAVA_LONG.fullmatch(raw) or not -(2**63) <= int(raw) < 2**63:
        raise ValueError(raw)
    return int(raw)


def is_timer_message(props: dict[str, str]) -> bool:
    return any(p in props for p in TIMER_PROPERTIES)


def route_timer_message(
    msg: MessageExtBrokerInner,
    config: MessageStoreConfig,
    timer_store: TimerMessageStore | None,
    now_ms: int | None = None,
) -> tuple[int, str] | None:
    """Route ``msg`` (changed in place) if it is a timer message; a refusal as (response code,
    remark), or None to store it."""
    props = msg.properties
    if msg.topic == TIMER_TOPIC or TIMER_OUT_MS in props or not is_timer_message(props):
        return None
    level = props.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
    if level is not None and level.strip().lstrip("+").isdigit() and int(level) > 0:
        msg.properties = {k: v for k, v in props.items() if k not in TIMER_PROPERTIES[:3]}
        msg.properties_string = java_properties_string(msg.properties)
        return None
    if not config.timer_wheel_enable:
        return ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false"
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000  # the store's clock
    illegal = (
        ResponseCode.MESSAGE_ILLEGAL,
        f"timer message illegal, the delay time should not be bigger than the max delay "
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
        return ResponseCode.SYSTEM_ERROR, (
            f"timer message is under flow control, max num limit is {n * 2} or the current value is greater than "
            f"{n} and less than {n * 2}, trigger random flow control"
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
