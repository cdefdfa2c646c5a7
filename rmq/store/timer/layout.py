"""Byte layouts of the timer store files, as RocketMQ 5.3.3 writes them.

All integers are big-endian (Java's ByteBuffer order).

``timerlog/<20-digit offset>`` -- mapped files of ``mappedFileSizeTimerLog``
bytes holding fixed 52-byte units (``TimerLog.UNIT_SIZE``)::

    0  i32 size          always 52
    4  i64 prevPos       timer-log offset of the slot's previous unit, -1 first
    12 i32 magic         1 default | 2 roll | 4 delete (valid when (m | 0xF) == 0xF)
    16 i64 writeTimeMs   the wheel's write time when the unit was appended
    24 i32 delay         delayed time - writeTimeMs
    28 i64 offsetPy      commit-log offset of the message parked in rmq_sys_wheel_timer
    36 i32 sizePy        its size
    40 i32 topicHash     Java String.hashCode of REAL_TOPIC (0 when absent)
    44 i64 reserved      0

A unit never straddles a file: when fewer than 52 + 16 bytes are left, a
16-byte blank ``i32 remaining | i64 0 | i32 BLANK_MAGIC`` ends the file.

``timerwheel`` -- 7 days of slots, twice (7 * 86400 * 2 slots of 32 bytes =
38,707,200 bytes, whatever the precision); slot index =
``timeMs / precisionMs % (2 * 604800)``::

    0  i64 time          timeMs / precisionMs of the slot (a stale slot holds another)
    8  i64 firstPos      timer-log offset of the slot's first unit
    16 i64 lastPos       ... of its last unit (the head of the prevPos chain)
    24 i32 num           units in the slot
    28 i32 magic         0 (unused)

``config/timercheck`` -- one 4096-byte page; 5.3.3 uses the first 56 bytes::

    0  i64 lastReadTimeMs        first slot not yet delivered
    8  i64 lastTimerLogFlushPos  timer-log offset known flushed
    16 i64 lastTimerQueueOffset  next rmq_sys_wheel_timer queue-0 entry to enqueue
    24 i64 masterTimerQueueOffset
    32 i64 stateVersion | 40 i64 timestamp | 48 i64 counter  (DataVersion)

rmq keeps its delivery marker past them, at byte 512, where 5.3.3 neither
reads nor writes (docs/store.md, "Timer delivery exactly once")::

    512 i32 'RMQT' | 516 i32 version 1 | 520 i32 active | 524 i32 0
    528 i64 markerReadTimeMs (slot in delivery, -1: an enqueue round)
    536 i64 markerPhyOffset  (commit-log max offset when that round began)

``config/timermetrics`` -- fastjson ``{"dataVersion":{...},"timingCount":
{topic:{"count":n,"timeStamp":ms}}}`` (TimerMetrics.TimerMetricsSerializeWrapper).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from rmq.common.timer import TIMER_TOPIC as TIMER_TOPIC

UNIT_SIZE = 52
UNIT_PRE_SIZE_FOR_MSG = 28
UNIT_PRE_SIZE_FOR_METRIC = 40
MIN_BLANK_LEN = 16


def _java_int(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


# ``0xBBCCDDEE ^ 1880681586 + 8``: Java adds before it xors
BLANK_MAGIC_CODE = _java_int(0xBBCCDDEE ^ (1880681586 + 8))

MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2

DAY_SECS = 24 * 3600
TIMER_WHEEL_TTL_DAY = 7
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS
TIMER_BLANK_SLOTS = 60
SLOT_SIZE = 32
WHEEL_LENGTH = SLOTS_TOTAL * 2 * SLOT_SIZE

CHECKPOINT_SIZE = 4096
CHECKPOINT_USED = 56
MARKER_AT = 512
MARKER_MAGIC = 0x524D5154  # "RMQT"

_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqi")
_SLOT = struct.Struct(">qqqii")
_CHECKPOINT = struct.Struct(">qqqqqqq")
_MARKER = struct.Struct(">iiiiqq")


class Unit(NamedTuple):
    """One timer-log unit, decoded."""

    size: int
    prev_pos: int
    magic: int
    write_time_ms: int
    delay: int
    offset_py: int
    size_py: int
    topic_hash: int
    reserved: int = 0

    @property
    def delayed_time_ms(self) -> int:
        return self.write_time_ms + self.delay


class Slot(NamedTuple):
    """One wheel slot; ``time_ms`` is already multiplied by the precision."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


EMPTY_SLOT = Slot(-1, -1, -1, 0, 0)


class CheckpointFields(NamedTuple):
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


class Marker(NamedTuple):
    """rmq's delivery marker (see the module docstring)."""

    active: bool
    read_time_ms: int
    phy_offset: int


def pack_unit(u: Unit) -> bytes:
    return _UNIT.pack(*u)


def unpack_unit(buf, pos: int = 0) -> Unit:
    return Unit(*_UNIT.unpack_from(buf, pos))


def iter_unit_fields(buf) -> Iterator[tuple]:
    """The raw fields of every whole unit in ``buf`` (a log file's bytes)."""
    return _UNIT.iter_unpack(buf[:len(buf) // UNIT_SIZE * UNIT_SIZE])


def pack_blank(remaining: int) -> bytes:
    return _BLANK.pack(remaining, 0, BLANK_MAGIC_CODE)


def is_magic_ok(magic: int) -> bool:
    return (magic | 0xF) == 0xF


def is_roll(magic: int) -> bool:
    return magic & MAGIC_ROLL != 0


def is_delete(magic: int) -> bool:
    return magic & MAGIC_DELETE != 0


def slot_index(time_ms: int, precision_ms: int) -> int:
    return time_ms // precision_ms % (SLOTS_TOTAL * 2)


def pack_slot(time_ms: int, precision_ms: int, first: int, last: int, num: int, magic: int) -> bytes:
    """A slot as stored: its time divided by the precision (5.3.3 keeps
    1000 ms stores readable that way)."""
    return _SLOT.pack(time_ms // precision_ms, first, last, num, magic)


def unpack_slot_raw(buf, pos: int) -> tuple[int, int, int, int, int]:
    """(stored time, first, last, num, magic)."""
    return _SLOT.unpack_from(buf, pos)


def pack_checkpoint(f: CheckpointFields) -> bytes:
    return _CHECKPOINT.pack(*f)


def unpack_checkpoint(buf) -> CheckpointFields:
    return CheckpointFields(*_CHECKPOINT.unpack_from(buf, 0))


def pack_marker(m: Marker) -> bytes:
    return _MARKER.pack(MARKER_MAGIC, 1, 1 if m.active else 0, 0, m.read_time_ms, m.phy_offset)


def unpack_marker(buf) -> Marker:
    magic, _version, active, _pad, read_ms, phy = _MARKER.unpack_from(buf, MARKER_AT)
    if magic != MARKER_MAGIC:
        return Marker(False, -1, -1)
    return Marker(bool(active), read_ms, phy)


def java_string_hash(s: str | None) -> int:
    """``String.hashCode`` over UTF-16 code units, as a signed int."""
    if s is None:
        return 0
    h = 0
    for unit in struct.unpack(f"<{len(s.encode('utf-16-le')) // 2}H", s.encode("utf-16-le")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return _java_int(h)
