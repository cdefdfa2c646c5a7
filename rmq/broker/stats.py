"""Broker statistics (RocketMQ ``BrokerStats`` and the parts of ``BrokerStatsManager``
the broker core reads).

Puts are counted by the controller as the store dispatches each new message
(``inc_put``), gets by the pull processor for every pull it answers
(``inc_get``): the totals at once, the named items through pending tables
that ``fold`` adds into them every second and before every read -- one dict
update per event instead of several bucket updates; Java samples its own
items every 10 s, so the minute/hour/day figures keep their precision.  The
pull processor also records the disk fall-behind sizes.  The controller
records the totals every morning (``record``), reports them in
GET_BROKER_RUNTIME_INFO (msgPutTotalYesterdayMorning ... msgGetTotalTodayNow)
and uses the fall-behind sizes in protectBroker.  The named ``StatsItem``s
(TOPIC_PUT_NUMS by topic, GROUP_GET_NUMS by ``topic@group``, BROKER_PUT_NUMS
by cluster, ...) answer VIEW_BROKER_STATS_DATA with minute/hour/day
snapshots.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import deque

from rmq.common.logging import STATS_LOGGER_NAME

log = logging.getLogger(STATS_LOGGER_NAME)

TPS_WINDOW_S = 60
BUCKET_S = 10
DAY_S = 86400

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"


class StatsItem:
    """Sums and counts of one key in 10 s buckets over the last day
    (``StatsItem``: value = what was added, times = how often)."""

    __slots__ = ("_buckets",)

    def __init__(self) -> None:
        self._buckets: deque[list[int]] = deque()  # [bucket start s, value, times]

    def add(self, value: int, times: int = 1, now_s: float | None = None) -> None:
        now = time.monotonic() if now_s is None else now_s
        self.add_at(int(now) // BUCKET_S * BUCKET_S, value, times)

    def add_at(self, start: int, value: int, times: int = 1) -> None:
        """Add to the bucket beginning at ``start`` (callers counting several items
        for one event compute it once)."""
        buckets = self._buckets
        if buckets:
            last = buckets[-1]
            if last[0] == start:
                last[1] += value
                last[2] += times
                return
        buckets.append([start, value, times])
        while buckets[0][0] <= start - DAY_S:
            buckets.popleft()

    def snapshot(self, window_s: int, now_s: float | None = None) -> dict[str, float | int]:
        """``{"avgpt", "sum", "tps"}`` over the last ``window_s`` seconds."""
        now = time.monotonic() if now_s is None else now_s
        total = times = 0
        for start, value, n in self._buckets:
            if start > now - window_s:
                total += value
                times += n
        return {"avgpt": total / times if times else 0.0, "sum": total,
                "tps": total / window_s}

    def broker_stats_data(self, now_s: float | None = None) -> dict[str, dict]:
        """The BrokerStatsData body of VIEW_BROKER_STATS_DATA."""
        return {"statsDay": self.snapshot(DAY_S, now_s), "statsHour": self.snapshot(3600, now_s),
                "statsMinute": self.snapshot(60, now_s)}


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
        self._topic_put: dict[str, StatsItem] = {}  # TOPIC_PUT_NUMS items by topic
        self._broker_put: StatsItem | None = None
        self._put_pending: dict[str, list[int]] = {}  # topic -> [value, times] not yet folded
        # (topic, group) -> [messages, bytes, pulls] not yet folded
        self._get_pending: dict[tuple[str, str], list[int]] = {}
        # "group@topic@queueId" -> bytes the consumer is behind on disk
        self.fall_behind: dict[str, int] = {}
        # group -> (monotonic second, messages) of the last TPS_WINDOW_S seconds
        self._group_gets: dict[str, deque[tuple[int, int]]] = {}
        # stats name -> key -> item
        self.items: dict[str, dict[str, StatsItem]] = {}
        self.cluster = ""

    def _item(self, name: str, key: str) -> StatsItem:
        table = self.items.setdefault(name, {})
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem()
        return item

    def get_stats_item(self, name: str, key: str) -> StatsItem | None:
        """The item, or None when nothing was ever counted under it."""
        self.fold()
        return self.items.get(name, {}).get(key)

    def inc_put(self, topic: str, nums: int = 1, size: int = 0) -> None:
        """One put event of ``nums`` messages (called once per stored message)."""
        self.put_total += nums
        pending = self._put_pending.get(topic)
        if pending is None:
            self._put_pending[topic] = [nums, 1]
        else:
            pending[0] += nums
            pending[1] += 1
        if size:
            self._item(TOPIC_PUT_SIZE, topic).add(size)

    def fold(self, now_s: float | None = None) -> None:
        """Add the pending counts to their items (and the gets to the groups'
        TPS windows), in the bucket of ``now_s``."""
        second = int(time.monotonic() if now_s is None else now_s)
        start = second // BUCKET_S * BUCKET_S
        if self._put_pending:
            self._fold_puts(start)
        if self._get_pending:
            self._fold_gets(start, second)

    def _fold_puts(self, start: int) -> None:
        """TOPIC_PUT_NUMS by topic and BROKER_PUT_NUMS."""
        pending = self._put_pending
        self._put_pending = {}
        value = times = 0
        for topic, (v, n) in pending.items():
            item = self._topic_put.get(topic)
            if item is None:
                item = self._topic_put[topic] = self._item(TOPIC_PUT_NUMS, topic)
            item.add_at(start, v, n)
            value += v
            times += n
        broker = self._broker_put
        if broker is None:
            broker = self._broker_put = self._item(BROKER_PUT_NUMS, self.cluster)
        broker.add_at(start, value, times)

    def inc_get(self, group: str, topic: str, nums: int, size: int = 0) -> None:
        """One answered pull of ``nums`` messages, ``size`` bytes."""
        self.get_total += nums
        pending = self._get_pending.get((topic, group))
        if pending is None:
            self._get_pending[(topic, group)] = [nums, size, 1]
        else:
            pending[0] += nums
            pending[1] += size
            pending[2] += 1

    def _fold_gets(self, start: int, second: int) -> None:
        """GROUP_GET_NUMS / GROUP_GET_SIZE by ``topic@group``, BROKER_GET_NUMS,
        and each group's TPS window (in the second of the fold)."""
        pending = self._get_pending
        self._get_pending = {}
        value = times = 0
        for (topic, group), (nums, size, pulls) in pending.items():
            key = f"{topic}@{group}"
            self._item(GROUP_GET_NUMS, key).add_at(start, nums, pulls)
            if size:
                self._item(GROUP_GET_SIZE, key).add_at(start, size, pulls)
            value += nums
            times += pulls
            window = self._group_gets.setdefault(group, deque())
            if window and window[-1][0] == second:
                window[-1] = (second, window[-1][1] + nums)
            else:
                window.append((second, nums))
            self._prune(window, second)
        self._item(BROKER_GET_NUMS, self.cluster).add_at(start, value, times)

    @staticmethod
    def _prune(window: deque[tuple[int, int]], now: int) -> None:
        while window and window[0][0] <= now - TPS_WINDOW_S:
            window.popleft()

    def group_get_tps(self, group: str) -> float:
        """Messages per second delivered to ``group`` over the last minute."""
        self.fold()
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
