"""DataVersion: the (timestamp, counter) stamp of a broker's topic/subscription tables.

Mirrors ``org.apache.rocketmq.common.DataVersion``.  Brokers bump it on every
table change; the name server compares it with the last one a broker
registered to decide whether the topic data in a registration is new.  Two
versions are equal when both the timestamp and the counter are equal.

JSON shape (fastjson, alphabetical): ``{"counter":3,"timestamp":1700000000000}``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rmq.common import fastjson


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _as_int(value: Any, name: str) -> int:
    # fastjson reads numbers given as strings ("3") into long properties
    if isinstance(value, bool):
        raise ValueError(f"DataVersion.{name} is not a number: {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"DataVersion.{name} is not a number: {value!r}") from None


@dataclass(slots=True)
class DataVersion:
    timestamp: int = field(default_factory=_now_ms)
    counter: int = 0

    def next_version(self) -> None:
        """A change happened: new timestamp, counter + 1."""
        self.timestamp = _now_ms()
        self.counter += 1

    def assign_new_one(self, other: DataVersion) -> None:
        self.timestamp = other.timestamp
        self.counter = other.counter

    def to_json_obj(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json_obj())

    @classmethod
    def from_json_obj(cls, obj: Any) -> DataVersion:
        """Build from parsed JSON; missing properties keep Java's defaults."""
        if obj is None:
            return cls()
        if not isinstance(obj, dict):
            raise ValueError("DataVersion JSON is not an object")
        dv = cls()
        if obj.get("timestamp") is not None:
            dv.timestamp = _as_int(obj["timestamp"], "timestamp")
        if obj.get("counter") is not None:
            dv.counter = _as_int(obj["counter"], "counter")
        return dv

    @classmethod
    def decode(cls, data: bytes | memoryview | str) -> DataVersion:
        return cls.from_json_obj(fastjson.loads(data))
