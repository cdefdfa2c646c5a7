"""Commit-log side of SQL92 filtering (``ExpressionMessageFilter.isMatchedByCommitLog``
and ``ExpressionForRetryMessageFilter`` of 4.9.8).

A pull's records are matched on their stored properties: only the property
string of each record is decoded (``MessageDecoder.decodeProperties``), the
selector is evaluated over it, and records that do not match are dropped.

With ``enableConsumeQueueExt`` and ``enableCalcFilterBitMap`` the consume
queue's ext units carry each message's bloom-filter bitmap of the groups it
matched when it was dispatched; ``BitmapFilter`` (the SQL92 half of
``ExpressionMessageFilter.isMatchedByConsumeQueue``) then skips entries whose
bitmap lacks the group's bits before any record is read.  A bloom filter may
say yes wrongly, never no, so the commit-log step still runs on what it keeps.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable

from rmq.common.message import PROPERTY_RETRY_TOPIC
from rmq.common.topics import RETRY_GROUP_TOPIC_PREFIX
from rmq.filter.bloom import BloomFilter, BloomFilterData
from rmq.filter.expression import BooleanExpression
from rmq.store.message_codec import MESSAGE_MAGIC_CODE, string_to_message_properties
from rmq.store.results import GetMessageResult, GetMessageStatus

_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
_SYSFLAG_AT = 36
_HOSTS_AT = 48  # BORNHOST follows BORNTIMESTAMP
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")

RecordFilter = Callable[[dict[str, str]], bool]


def record_properties(record: memoryview) -> dict[str, str] | None:
    """The properties of the stored record at the start of ``record`` (None
    when it is not a well-formed message record)."""
    n = len(record)
    if n < 91:
        return None
    size, magic = _HEAD.unpack_from(record, 0)
    if magic != MESSAGE_MAGIC_CODE or size > n or size < 91:
        return None
    (sys_flag,) = _INT.unpack_from(record, _SYSFLAG_AT)
    p = _HOSTS_AT + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
    (body_len,) = _INT.unpack_from(record, p)
    p += 4 + body_len
    if body_len < 0 or p + 3 > size:
        return None
    p += 1 + record[p]
    if p + 2 > size:
        return None
    (props_len,) = _SHORT.unpack_from(record, p)
    p += 2
    if props_len < 0 or p + props_len != size:
        return None
    return string_to_message_properties(record[p:p + props_len])


class BitmapFilter:
    """The consume-queue filter of a SQL92 subscription with bitmaps: called
    with a tags code it matches (nothing to go on); ``matches_unit`` decides on
    an entry's ext unit as 4.9.8 does: everything matches without a unit, for
    a message stored before the group's filter data was born, or with a bitmap
    of another length; otherwise the group's bloom bits must all be set."""

    __slots__ = ("bloom", "data", "born_time", "valid", "_masks")

    def __init__(self, bloom: BloomFilter, data: BloomFilterData, born_time: int) -> None:
        self.bloom, self.data, self.born_time = bloom, data, born_time
        self.valid = bloom.is_valid(data)
        # (byte, mask) of each of the group's bits: one test per bit per entry
        self._masks = tuple((p >> 3, 1 << (p & 7)) for p in data.bit_pos)

    def __call__(self, tags_code: int) -> bool:
        return True

    def matches_unit(self, tags_code: int | None, unit) -> bool:
        if unit is None or unit.store_timestamp <= self.born_time:
            return True
        bits = unit.bitmap
        if not bits or not self.valid or len(bits) * 8 != self.data.bit_num:
            return True
        for index, mask in self._masks:
            if not bits[index] & mask:
                return False
        return True


def expression_filter(compiled: BooleanExpression | None) -> RecordFilter | None:
    """The filter of a subscription's compiled selector; None (everything
    matches) when there is no compiled expression."""
    if compiled is None:
        return None
    return compiled.matches


def retry_filter(group: str, lookup: Callable[[str, str], BooleanExpression | None]
                 ) -> RecordFilter:
    """``filterSupportRetry``: a record of ``%RETRY%group`` is matched with the
    group's selector of its original topic (``RETRY_TOPIC`` property), looked
    up per record with ``lookup(topic, group)``; no selector -> it matches."""

    def matches(props: dict[str, str]) -> bool:
        compiled = lookup(props.get(PROPERTY_RETRY_TOPIC, ""), group)
        return compiled is None or compiled.matches(props)

    return matches


def retry_group(topic: str) -> str | None:
    """The group of a retry topic, None for any other topic."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic[len(RETRY_GROUP_TOPIC_PREFIX):]
    return None


def filter_result(result: GetMessageResult, record_filter: RecordFilter) -> None:
    """Drop the records of a found ``get_message`` result whose properties do
    not match; kept records that stay adjacent remain one view.  The queue
    offsets to continue from are unchanged; a result left empty becomes
    NO_MATCHED_MESSAGE.  A record whose properties cannot be read is
    evaluated over no properties (every property null), as 4.9.8 does."""
    if result.status is not GetMessageStatus.FOUND:
        return
    views: list[memoryview] = []
    run_offsets: list[int] = []
    run_counts: list[int] = []
    sizes = array("i")
    size_iter = iter(result.sizes)
    for run, first, count in zip(result.body_views, result.run_offsets, result.run_counts,
                                 strict=True):
        pos = 0
        segment_start = -1  # byte position of the current stretch of kept records
        for i in range(count):
            size = next(size_iter)
            record = run[pos:pos + size]
            keep = record_filter(record_properties(record) or {})
            record.release()
            if keep:
                if segment_start < 0:
                    segment_start = pos
                    run_offsets.append(first + i)
                    run_counts.append(0)
                run_counts[-1] += 1
                sizes.append(size)
            elif segment_start >= 0:
                views.append(run[segment_start:pos])
                segment_start = -1
            pos += size
        if segment_start >= 0:
            views.append(run[segment_start:pos])
        run.release()  # the kept slices stay valid
    result.body_views, result.run_offsets, result.run_counts = views, run_offsets, run_counts
    result.sizes = sizes
    result.buffer_total_size = sum(sizes)
    if not sizes:
        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
