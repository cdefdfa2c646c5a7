"""How a person reads the report's figures: sizes in binary units, counts with
thousands separators, rates with their unit, times as UTC dates, durations.
A missing value reads "–".  The raw figures stay in the tables and summary.json."""

from __future__ import annotations

import math

import pandas as pd

GIB = 2**30


def _missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def size(n) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB ... 2.3 TiB."""
    if _missing(n):
        return "–"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def count(n) -> str:
    if _missing(n):
        return "–"
    return f"{int(n):,}"


def rate(n, unit: str = "msg/s") -> str:
    if _missing(n):
        return "–"
    return f"{n:,.1f} {unit}" if n < 100 else f"{n:,.0f} {unit}"


def when(value) -> str:
    """A time as people read it: ISO date and time, UTC (epoch ms or ISO text in)."""
    if _missing(value):
        return "–"
    ts = pd.Timestamp(value, tz="UTC") if isinstance(value, str) else \
        pd.Timestamp(int(value), unit="ms", tz="UTC")
    return ts.strftime("%Y-%m-%d %H:%M UTC")


def days(value) -> str:
    if _missing(value):
        return "–"
    if value == "never" or (isinstance(value, float) and math.isinf(value)):
        return "never (levels off below the limit)"
    return f"{value:,.1f} days"


def duration(seconds) -> str:
    if _missing(seconds):
        return "–"
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.0f} min"
    return f"{seconds / 3600:,.1f} h" if seconds < 172800 else f"{seconds / 86400:,.1f} days"


_SETTING_UNITS = {
    "fileReservedTime": lambda v: f"{float(v):g} h",
    "diskMaxUsedSpaceRatio": lambda v: f"{float(v):g} %",
    "deleteWhen": lambda v: f"at {v} h (local time of the broker)",
    "mappedFileSizeCommitLog": size, "mappedFileSizeConsumeQueue": size,
    "maxHashSlotNum": count, "maxIndexNum": count,
    "flushConsumerOffsetInterval": lambda v: duration(float(v) / 1000),
}


def setting(key: str, value) -> str:
    """A broker setting as people read it (the raw value stays in the table)."""
    shown = _SETTING_UNITS.get(key)
    try:
        return shown(value) if shown else str(value)
    except (TypeError, ValueError):
        return str(value)
