"""Filters Spark pushes into a batch read, turned into queue and offset bounds.

``topic``, ``brokerName`` and ``queueId`` (=, IN) pick queues exactly, and
``queueOffset`` ranges are exact: Spark need not check them again.
``storeTimestamp`` ranges narrow each queue by a binary search over its
consume queue (store files) or SEARCH_OFFSET_BY_TIMESTAMP (live), which
assumes store times grow along a queue as the broker writes them; Spark still
applies the time filter to the rows, so the bounds only have to be wide
enough, never exact.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)


@dataclass(slots=True)
class Bounds:
    """What a batch read must cover; None = no restriction.  Offsets are a
    half-open ``[offset_lo, offset_hi)``, times inclusive milliseconds."""

    topics: set[str] | None = None
    brokers: set[str] | None = None
    queue_ids: set[int] | None = None
    offset_lo: int = 0
    offset_hi: int | None = None
    time_lo_ms: int | None = None
    time_hi_ms: int | None = None

    def wants(self, topic: str, broker: str, queue_id: int) -> bool:
        return ((self.topics is None or topic in self.topics)
                and (self.brokers is None or broker in self.brokers)
                and (self.queue_ids is None or queue_id in self.queue_ids))

    def restrict(self, name: str, values: Iterable) -> None:
        """Intersect the set ``name`` with ``values``."""
        new = set(values)
        old = getattr(self, name)
        setattr(self, name, new if old is None else old & new)

    def empty(self) -> bool:
        return (self.topics == set() or self.brokers == set() or self.queue_ids == set()
                or (self.offset_hi is not None and self.offset_hi <= self.offset_lo)
                or (self.time_lo_ms is not None and self.time_hi_ms is not None
                    and self.time_hi_ms < self.time_lo_ms))


_SETS = {"topic": ("topics", str), "brokerName": ("brokers", str), "queueId": ("queue_ids", int)}


def _millis(value: object) -> float | None:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp() * 1000
    return None


def push(bounds: Bounds, filters: list[Filter]) -> Iterator[Filter]:
    """Fold what ``filters`` allow into ``bounds``; yield those Spark must still apply."""
    for f in filters:
        column = f.attribute[0] if len(f.attribute) == 1 else None
        value = getattr(f, "value", None)
        if column in _SETS and isinstance(f, EqualTo | In):
            name, kind = _SETS[column]
            values = value if isinstance(f, In) else [value]
            if all(isinstance(v, kind) for v in values):
                bounds.restrict(name, values)
                continue
        elif column == "queueOffset" and isinstance(value, int) and _offset_bound(bounds, f, value):
            continue
        elif column == "storeTimestamp":
            _time_bound(bounds, f, _millis(value))
        yield f


def _offset_bound(bounds: Bounds, f: Filter, v: int) -> bool:
    if isinstance(f, GreaterThan | GreaterThanOrEqual | EqualTo):
        bounds.offset_lo = max(bounds.offset_lo, v + 1 if isinstance(f, GreaterThan) else v)
    if isinstance(f, LessThan | LessThanOrEqual | EqualTo):
        hi = v if isinstance(f, LessThan) else v + 1
        bounds.offset_hi = hi if bounds.offset_hi is None else min(bounds.offset_hi, hi)
    return isinstance(f, GreaterThan | GreaterThanOrEqual | EqualTo | LessThan | LessThanOrEqual)


def _time_bound(bounds: Bounds, f: Filter, ms: float | None) -> None:
    if ms is None:
        return
    if isinstance(f, GreaterThan | GreaterThanOrEqual | EqualTo):
        lo = math.floor(ms)
        bounds.time_lo_ms = lo if bounds.time_lo_ms is None else max(bounds.time_lo_ms, lo)
    if isinstance(f, LessThan | LessThanOrEqual | EqualTo):
        hi = math.ceil(ms)
        bounds.time_hi_ms = hi if bounds.time_hi_ms is None else min(bounds.time_hi_ms, hi)
