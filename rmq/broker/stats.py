"""Broker statistics (RocketMQ ``BrokerStats`` and the parts of ``BrokerStatsManager``
the broker core reads).

The messaging processors count what they serve here (``inc_put``,
``inc_get``, ``record_disk_fall_behind_size``); the controller records the
totals every morning (``record``), reports them in GET_BROKER_RUNTIME_INFO
(msgPutTotalYesterdayMorning ... msgGetTotalTodayNow) and uses the
fall-behind sizes in protectBroker.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import deque

from rmq.common.logging import STATS_LOGGER_NAME

log = logging.getLogger(STATS_LOGGER_NAME)

TPS_WINDOW_S = 60


def ms_until_next_morning(now: dt.datetime | None = None) -> int:
    """``UtilAll.computeNextMorningTimeMillis`` minus now: local midnight ahead."""
    now = now or dt.datetime.now()
    tomorrow = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return int((tomorrow - now).total_seconds() * 1000)


class BrokerStats:
    def __init__(self) -> None:
        self.put_total = 0
        self.get_total = 0
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0
        self.topic_put: dict[str, int] = {}
        self.group_get: dict[str, int] = {}
        # "group@topic@queueId" -> bytes the consumer is behind on disk
        self.fall_behind: dict[str, int] = {}
        # group -> (monotonic second, messages) of the last TPS_WINDOW_S seconds
        self._group_gets: dict[str, deque[tuple[int, int]]] = {}

    def inc_put(self, topic: str, nums: int = 1) -> None:
        self.put_total += nums
        self.topic_put[topic] = self.topic_put.get(topic, 0) + nums

    def inc_get(self, group: str, topic: str, nums: int) -> None:
        self.get_total += nums
        key = f"{topic}@{group}"
        self.group_get[key] = self.group_get.get(key, 0) + nums
        window = self._group_gets.setdefault(group, deque())
        now = int(time.monotonic())
        if window and window[-1][0] == now:
            window[-1] = (now, window[-1][1] + nums)
        else:
            window.append((now, nums))
        self._prune(window, now)

    @staticmethod
    def _prune(window: deque[tuple[int, int]], now: int) -> None:
        while window and window[0][0] <= now - TPS_WINDOW_S:
            window.popleft()

    def group_get_tps(self, group: str) -> float:
        """Messages per second delivered to ``group`` over the last minute."""
        window = self._group_gets.get(group)
        if not window:
            return 0.0
        self._prune(window, int(time.monotonic()))
        return sum(n for _, n in window) / TPS_WINDOW_S

    def record_disk_fall_behind_size(self, group: str, topic: str, queue_id: int,
                                     fall_behind: int) -> None:
        self.fall_behind[f"{queue_id}@{topic}@{group}"] = fall_behind

    def groups_falling_behind(self, threshold: int) -> set[str]:
        return {key.split("@", 2)[2] for key, size in self.fall_behind.items() if size > threshold}

    def record(self) -> None:
        """The daily snapshot (run at local midnight)."""
        self.put_yesterday_morning = self.put_today_morning
        self.get_yesterday_morning = self.get_today_morning
        self.put_today_morning = self.put_total
        self.get_today_morning = self.get_total
        log.info("yesterday put message total: %d",
                 self.put_today_morning - self.put_yesterday_morning)
        log.info("yesterday get message total: %d",
                 self.get_today_morning - self.get_yesterday_morning)
