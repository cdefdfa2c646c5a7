"""The put hook that parks timer messages (``HookUtils.handleScheduleMessage``
and ``transformTimerMessage`` of 5.3.3), run on single and batch puts
before the commit log sees them.

A message (or a batch, by its batch-level properties, as 5.3.3 runs the hook
on the MessageExtBatch) that is not a prepared/rolled-back transaction and
carries TIMER_DELIVER_MS, TIMER_DELAY_SEC or TIMER_DELAY_MS:

* with a DELAY level as well: the timer properties are dropped and the delay
  level wins (4.9.8 delay levels keep working as before);
* due in the future: TIMER_OUT_MS = the due time rounded down to
  ``timerPrecisionMs`` (one precision earlier when it is a multiple of it),
  REAL_TOPIC / REAL_QID set, and the message goes to ``rmq_sys_wheel_timer``
  queue 0; refused with WHEEL_TIMER_MSG_ILLEGAL past ``timerMaxDelaySec`` or
  when a value is not a Java long, WHEEL_TIMER_FLOW_CONTROL when its slot holds
  more than ``timerCongestNumEachSlot`` timers, WHEEL_TIMER_NOT_ENABLE without
  ``timerWheelEnable``;
* due now or in the past: stored under its own topic at once.

Unlike 5.3.3, a half (prepared) transactional message is never parked: 5.3.3
stores half messages with transaction type NOT and so parks them, losing the
commit's timer; here the committed copy is parked (docs/COMPATIBILITY.md).
"""

from __future__ import annotations

import random
import re
import time
from typing import Any

from rmq.common import message as mc
from rmq.common import timer as tm
from rmq.common.topics import TRANS_HALF_TOPIC
from rmq.store.message_codec import message_properties_to_string
from rmq.store.results import PutMessageStatus

_LONG = re.compile(r"[+-]?[0-9]+\Z")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_TIMER_PREFIX = "TIMER_"


def parse_java_long(text: str | None) -> int | None:
    """``Long.parseLong``: digits with an optional sign, in range; else None."""
    if text is None or not _LONG.match(text):
        return None
    v = int(text)
    return v if _LONG_MIN <= v <= _LONG_MAX else None


def _delay_level(props: dict[str, str]) -> int:
    try:
        return int(props.get(mc.PROPERTY_DELAY_TIME_LEVEL) or 0)
    except ValueError:
        return 0


def requested_due_ms(props: dict[str, str], now_ms: int) -> int | None:
    """The due time a sender asked for (TIMER_DELAY_SEC, then TIMER_DELAY_MS,
    then TIMER_DELIVER_MS, as 5.3.3 looks), None when it is not a number."""
    sec = props.get(tm.PROPERTY_TIMER_DELAY_SEC)
    if sec is not None:
        v = parse_java_long(sec)
        return None if v is None else now_ms + v * 1000
    ms = props.get(tm.PROPERTY_TIMER_DELAY_MS)
    if ms is not None:
        v = parse_java_long(ms)
        return None if v is None else now_ms + v
    return parse_java_long(props.get(tm.PROPERTY_TIMER_DELIVER_MS))


def round_due(deliver_ms: int, precision_ms: int) -> int:
    """HookUtils l. 201-205: a due time on a slot boundary belongs to the slot
    before, so its slot ends (and is delivered) exactly at the due time."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def is_congested(num: int, limit: int) -> bool:
    """``TimerMessageStore.isReject``."""
    if num <= limit:
        return False
    if num >= limit * 2:
        return True
    return random.randrange(1000) > 1000 * (num - limit) / (limit + 0.1)


class TimerPutHook:
    """Registered in ``DefaultMessageStore.put_message_hooks``; ``wheel`` (a
    TimerWheel, None when the wheel is off) answers the congestion check."""

    def __init__(self, config: Any, wheel: Any = None) -> None:
        self.config = config
        self.wheel = wheel

    def __call__(self, msg: Any) -> PutMessageStatus | None:
        props = msg.properties
        if not any(k.startswith(_TIMER_PREFIX) for k in props):
            return None
        tx = msg.sys_flag & mc.TRANSACTION_ROLLBACK_TYPE
        if tx not in (mc.TRANSACTION_NOT_TYPE, mc.TRANSACTION_COMMIT_TYPE) or \
                msg.topic in (tm.TIMER_TOPIC, TRANS_HALF_TOPIC):
            return None  # rolled, or a half message: its committed copy is parked
        if _delay_level(props) > 0:
            if any(props.pop(k, None) is not None for k in tm.REQUEST_PROPERTIES):
                msg.properties_string = message_properties_to_string(props)
            return None
        if tm.PROPERTY_TIMER_OUT_MS in props or not any(k in props for k in tm.REQUEST_PROPERTIES):
            return None
        if not self.config.timerWheelEnable:
            return PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
        return self._transform(msg, props)

    def _transform(self, msg: Any, props: dict[str, str]) -> PutMessageStatus | None:
        now = int(time.time() * 1000)
        deliver = requested_due_ms(props, now)
        if deliver is None:
            return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
        if deliver <= now:
            if tm.PROPERTY_TIMER_DEL_UNIQKEY in props:
                return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
            return None
        cfg = self.config
        if deliver - now > cfg.timerMaxDelaySec * 1000:
            return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
        deliver = round_due(deliver, cfg.timer_precision_ms())
        if self.wheel is not None and is_congested(self.wheel.get_num(deliver),
                                                   cfg.timerCongestNumEachSlot):
            return PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL
        props[tm.PROPERTY_TIMER_OUT_MS] = str(deliver)
        props[mc.PROPERTY_REAL_TOPIC] = msg.topic
        props[mc.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties_string = message_properties_to_string(props)
        msg.topic = tm.TIMER_TOPIC
        msg.queue_id = 0
        return None
