"""TimerMetrics: ``config/timermetrics``, pending timers per real topic as
5.3.3 persists them (fastjson of TimerMetricsSerializeWrapper:
``{"dataVersion":{...},"timingCount":{topic:{"count":n,"timeStamp":ms}}}``)."""

from __future__ import annotations

import time
from typing import Any

from rmq.common import fastjson
from rmq.common.config_manager import ConfigManager, parse_json, pretty_dumps

# 5.3.3's TimerMetrics.timerDist: the upper bounds (seconds from now) of the
# buckets of ``rocketmq_timer_message_snapshot`` (5 s, 1 min, 5 min, 15 min,
# 1 h, 4 h, 8 h, 24 h)
TIMER_DIST_S = (5, 60, 300, 900, 3600, 14400, 28800, 86400)


def timer_distribution(wheel: Any, precision_ms: int, now: int) -> list[tuple[int, int]]:
    """(bound, timers) per bucket of ``TIMER_DIST_S``: the ``num`` of the wheel
    slots from ``now`` (floored to the precision) up to the bound, each bucket
    starting where the one before ends, as 5.3.3's gauge callback sums them
    when it is read. A timer of a slot already past (due, being delivered)
    is in no bucket; one rolled (due beyond ``timerRollWindowSlot``) counts
    where it sits in the wheel."""
    start = now // precision_ms * precision_ms
    out = []
    before = 0
    for bound in TIMER_DIST_S:
        upto = bound * 1000 // precision_ms
        out.append((bound, wheel.count_ahead(start + before * precision_ms, upto - before)))
        before = upto
    return out


class TimerMetrics(ConfigManager):
    def __init__(self, path: str) -> None:
        self.path = path
        self.timing_count: dict[str, list[int]] = {}  # topic -> [count, timeStamp]
        self.data_version: dict[str, Any] = {"counter": 0, "stateVersion": 0,
                                              "timestamp": int(time.time() * 1000)}

    def config_file_path(self) -> str:
        return self.path

    def add(self, topic: str | None, value: int) -> None:
        if topic is None:
            return
        entry = self.timing_count.get(topic)
        if entry is None:
            entry = self.timing_count[topic] = [0, int(time.time() * 1000)]
        entry[0] += value

    def count(self, topic: str) -> int:
        entry = self.timing_count.get(topic)
        return entry[0] if entry else 0

    def encode(self, pretty: bool = False) -> str:
        obj = {"dataVersion": self.data_version,
               "timingCount": {t: {"count": c, "timeStamp": ts}
                               for t, (c, ts) in self.timing_count.items()}}
        return pretty_dumps(obj) if pretty else fastjson.dumps(obj).decode("utf-8")

    def decode(self, text: str) -> None:
        obj = parse_json(text) or {}
        for topic, m in (obj.get("timingCount") or {}).items():
            self.timing_count[topic] = [int(m.get("count", 0)), int(m.get("timeStamp", 0))]
        dv = obj.get("dataVersion")
        if isinstance(dv, dict):
            self.data_version.update(dv)
