"""Broker statistics: RocketMQ 4.9.8's ``BrokerStats`` (daily totals) and
``BrokerStatsManager`` (every named statistics item, stats.log).

Puts are counted by the controller as the store dispatches each new message
(``inc_put``), gets by the pull processor for every pull it answers
(``inc_get``): the totals at once, the named items through pending tables
that ``fold`` adds into them every second and before every read -- one dict
update per event instead of several bucket updates; Java samples its own
items every 10 s, so the minute/hour/day figures keep their precision.
A put reaches the pending table one of three ways, with the same figures:
a single put through the store's arrival listener (``inc_put``); a reput
walk's runs, and the runs of a send lane's read that list their puts (a
held pull, the size histogram kept), through the store's runs listener
(``inc_put_runs``, compiled in ``rmq._fast.lane_runs``); the other runs of
a send lane's read in counters the lane keeps per queue (C counters on the
compiled lane's queues), added to the total as it counts and handed over
at each fold (``add_put_source``).  The store's reput has no counters of
its own: it sits below the broker and reaches these statistics only
through the runs listener, which is how it counts.

The items and their keys are 4.9.8's: TOPIC_PUT_NUMS / TOPIC_PUT_SIZE by
topic, QUEUE_PUT_NUMS / QUEUE_PUT_SIZE by ``topic@queueId`` and
QUEUE_GET_NUMS / QUEUE_GET_SIZE by ``topic@queueId@group`` (with
enableDetailStat), GROUP_GET_NUMS / GROUP_GET_SIZE / SNDBCK_PUT_NUMS by
``topic@group``, GROUP_GET_LATENCY by ``queueId@topic@group`` (``topic@group``
without detail), BROKER_PUT_NUMS / BROKER_GET_NUMS by cluster, the disk items
(GROUP_GET_FROM_DISK_* by ``topic@group``, BROKER_GET_FROM_DISK_* by cluster)
and the moment items GROUP_GET_FALL_SIZE / GROUP_GET_FALL_TIME by
``queueId@topic@group``.  4.9.8 declares the disk items but never counts them;
rmq counts a pull whose first message was beyond the memory a pull may read
from (the pull that ``suggestPullingFromSlave`` names).  The COMMERCIAL_*
items are known names that only 4.9.8's commercial hooks fill; here as there
they stay empty.  Every item answers VIEW_BROKER_STATS_DATA with
minute/hour/day snapshots and prints 4.9.8's stats.log lines.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable

from rmq.common.logging import STATS_LOGGER_NAME

log = logging.getLogger(STATS_LOGGER_NAME)

BUCKET_S = 10
DAY_S = 86400

QUEUE_PUT_NUMS = "QUEUE_PUT_NUMS"
QUEUE_PUT_SIZE = "QUEUE_PUT_SIZE"
QUEUE_GET_NUMS = "QUEUE_GET_NUMS"
QUEUE_GET_SIZE = "QUEUE_GET_SIZE"
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
GROUP_GET_FROM_DISK_NUMS = "GROUP_GET_FROM_DISK_NUMS"
GROUP_GET_FROM_DISK_SIZE = "GROUP_GET_FROM_DISK_SIZE"
BROKER_GET_FROM_DISK_NUMS = "BROKER_GET_FROM_DISK_NUMS"
BROKER_GET_FROM_DISK_SIZE = "BROKER_GET_FROM_DISK_SIZE"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
GROUP_GET_FALL_SIZE = "GROUP_GET_FALL_SIZE"
GROUP_GET_FALL_TIME = "GROUP_GET_FALL_TIME"
COMMERCIAL_SEND_TIMES = "COMMERCIAL_SEND_TIMES"
COMMERCIAL_SNDBCK_TIMES = "COMMERCIAL_SNDBCK_TIMES"
COMMERCIAL_RCV_TIMES = "COMMERCIAL_RCV_TIMES"
COMMERCIAL_RCV_EPOLLS = "COMMERCIAL_RCV_EPOLLS"
COMMERCIAL_SEND_SIZE = "COMMERCIAL_SEND_SIZE"
COMMERCIAL_RCV_SIZE = "COMMERCIAL_RCV_SIZE"
COMMERCIAL_PERM_FAILURES = "COMMERCIAL_PERM_FAILURES"

# the StatsItemSets of 4.9.8's BrokerStatsManager, in its order (QUEUE_* only with detail)
QUEUE_ITEMS = (QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE)
ITEM_NAMES = QUEUE_ITEMS + (
    TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY,
    SNDBCK_PUT_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS, GROUP_GET_FROM_DISK_NUMS,
    GROUP_GET_FROM_DISK_SIZE, BROKER_GET_FROM_DISK_NUMS, BROKER_GET_FROM_DISK_SIZE,
    COMMERCIAL_SEND_TIMES, COMMERCIAL_RCV_TIMES, COMMERCIAL_SEND_SIZE, COMMERCIAL_RCV_SIZE,
    COMMERCIAL_RCV_EPOLLS, COMMERCIAL_SNDBCK_TIMES, COMMERCIAL_PERM_FAILURES)
MOMENT_NAMES = (GROUP_GET_FALL_SIZE, GROUP_GET_FALL_TIME)
_WINDOWS = (("Minute", 60), ("Hour", 3600), ("Day", DAY_S))
# rocketmq_message_size buckets of RocketMQ 5 (bytes): 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB
SIZE_BUCKETS = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
SMALLEST_BUCKET = SIZE_BUCKETS[0]


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

    def times(self, window_s: int, now_s: float | None = None) -> int:
        now = time.monotonic() if now_s is None else now_s
        return sum(n for start, _v, n in self._buckets if start > now - window_s)

    def log_line(self, name: str, key: str, window: str, rt: bool = False,
                 now_s: float | None = None) -> str:
        """4.9.8's stats.log line of the item over the last minute/hour/day
        (``printAtMinutes`` ...; latency items print TIMES and AVGRT)."""
        seconds = dict(_WINDOWS)[window]
        ss = self.snapshot(seconds, now_s)
        if rt:
            detail = f"TIMES: {self.times(seconds, now_s)} AVGRT: {ss['avgpt']:.2f}"
        else:
            detail = f"SUM: {ss['sum']} TPS: {ss['tps']:.2f} AVGPT: {ss['avgpt']:.2f}"
        return f"[{name}] [{key}] Stats In One {window}, {detail}"


def ms_until_next_morning(now: dt.datetime | None = None) -> int:
    """``UtilAll.computeNextMorningTimeMillis`` minus now: local midnight ahead."""
    now = now or dt.datetime.now()
    tomorrow = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return int((tomorrow - now).total_seconds() * 1000)


class BrokerStats:
    """Daily totals and every named item (see the module docstring)."""

    # the fields each put's and each pop's count reads and sets slotted: the
    # compiled arrival notice (rmq._fast.arrival) and pop (rmq._fast.pop_queue's
    # count_get) read them at their slots, the send lane size_histograms every
    # read; the rest in the dict
    __slots__ = ("put_total", "_put_pending", "get_total", "_get_pending", "size_histograms",
                 "__dict__", "__weakref__")

    def __init__(self, cluster: str = "", detail: bool = True) -> None:
        self.cluster = cluster
        self.detail = detail  # enableDetailStat: the QUEUE_* items, latency per queue
        self.put_total = 0
        self.get_total = 0
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0
        # stats name -> key -> item (the names of ITEM_NAMES, made on first use)
        self.items: dict[str, dict[str, StatsItem]] = {}
        # GROUP_GET_FALL_SIZE / _TIME: "queueId@topic@group" -> last value
        self.moments: dict[str, dict[str, int]] = {name: {} for name in MOMENT_NAMES}
        # (topic, queueId) -> [messages, events, bytes] not yet folded, then, while
        # size_histograms are kept, messages per size bucket (folded into them)
        self._put_pending: dict[tuple[str, int], list[int]] = {}
        # (topic, group, queueId) -> [messages, bytes, pulls, latency ms, disk msgs, disk bytes]
        self._get_pending: dict[tuple[str, str, int], list[int]] = {}
        # monotonic totals for the Prometheus counters (folded like the items)
        self.in_totals: dict[str, list[int]] = {}  # topic -> [messages, bytes]
        self.out_totals: dict[tuple[str, str], list[int]] = {}  # (topic, group) -> same
        self.dlq_totals: dict[tuple[str, str], int] = {}  # (original topic, group) -> messages
        self.end_tx_totals: dict[tuple[str, bool], int] = {}  # (topic, committed) -> messages
        # topic -> messages per SIZE_BUCKETS bucket (+ one above), then the byte sum;
        # kept only while a metrics exporter reads them
        self.size_histograms: dict[str, list[int]] | None = None
        # who keeps put counts of its own until a fold (``add_put_source``)
        self._put_sources: list[Callable[[BrokerStats], None]] = []

    @property
    def fall_behind(self) -> dict[str, int]:
        return self.moments[GROUP_GET_FALL_SIZE]

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

    # ---- counting ------------------------------------------------------------------
    def inc_put(self, topic: str, queue_id: int = 0, nums: int = 1, size: int = 0,
                events: int = 1) -> None:
        """``events`` put requests (one batch, or several single sends served
        in one read) of ``nums`` messages, ``size`` bytes in the commit log."""
        self.put_total += nums
        self.add_pending_put(topic, queue_id, nums, size, events)

    def add_pending_put(self, topic: str, queue_id: int, nums: int, size: int,
                        events: int) -> None:
        """``inc_put`` without ``put_total``: for a put source (``add_put_source``),
        which adds to the total as it counts."""
        pending = self._put_pending.get((topic, queue_id))
        if pending is None:
            pending = self._put_pending[(topic, queue_id)] = \
                [0] * (3 if self.size_histograms is None else 4 + len(SIZE_BUCKETS))
        pending[0] += nums
        pending[1] += events
        pending[2] += size
        if len(pending) > 3:  # rocketmq_message_size: the event's messages by mean size
            mean = size // nums if nums else 0
            pending[3 if mean <= SMALLEST_BUCKET else 3 + bisect_left(SIZE_BUCKETS, mean)] += nums

    def add_put_source(self, source: Callable[[BrokerStats], None]) -> None:
        """``source(self)`` before every fold: a send lane keeps the put counts
        of its queues in counters of its own (a read then does no dict work
        per queue for them) and gives them here (``add_pending_put``) when
        the items are folded; it adds to ``put_total`` as it counts."""
        self._put_sources.append(source)

    def inc_put_runs(self, runs: list[tuple], counted: bool = False) -> None:
        """``inc_put`` for every run of a send lane's read or a reput walk
        (``RunQueue.summary`` tuples), or for every put of a run that lists
        them: one call for the read, not one per queue.  ``counted``: the
        runs that list no puts are counted already (by a put source)."""
        inc_put = self.inc_put
        for topic, queue_id, _qoff, _tags, _ts, nums, size, events, each in runs:
            if each is not None:
                for put in each:
                    inc_put(topic, queue_id, put[3], put[4], 1)
            elif not counted:
                inc_put(topic, queue_id, nums, size, events)

    def inc_dlq(self, group: str, topic: str) -> None:
        """A message a consumer sent back went to its group's DLQ."""
        key = (topic, group)
        self.dlq_totals[key] = self.dlq_totals.get(key, 0) + 1

    def inc_end_transaction(self, topic: str, committed: bool) -> None:
        key = (topic, committed)
        self.end_tx_totals[key] = self.end_tx_totals.get(key, 0) + 1

    def inc_get(self, group: str, topic: str, queue_id: int, nums: int, size: int = 0,
                latency_ms: int = 0, from_disk: bool = False) -> None:
        """One answered pull of ``nums`` messages, ``size`` bytes, ``latency_ms``
        spent in the broker; ``from_disk`` when its messages were beyond memory."""
        self.get_total += nums
        key = (topic, group, queue_id)
        pending = self._get_pending.get(key)
        if pending is None:
            pending = self._get_pending[key] = [0, 0, 0, 0, 0, 0]
        pending[0] += nums
        pending[1] += size
        pending[2] += 1
        pending[3] += latency_ms
        if from_disk:
            pending[4] += nums
            pending[5] += size

    def inc_send_back(self, group: str, topic: str) -> None:
        """A consumer sent a message back (CONSUMER_SEND_MSG_BACK)."""
        self._item(SNDBCK_PUT_NUMS, f"{topic}@{group}").add(1)

    def inc_queue_get(self, group: str, topic: str, queue_id: int, nums: int, size: int) -> None:
        """QUEUE_GET_NUMS / _SIZE of a queue read by the broker itself (4.9.8:
        the schedule service delivering a delay level)."""
        if self.detail:
            key = f"{topic}@{queue_id}@{group}"
            self._item(QUEUE_GET_NUMS, key).add(nums)
            self._item(QUEUE_GET_SIZE, key).add(size)

    def record_disk_fall_behind_size(self, group: str, topic: str, queue_id: int,
                                     fall_behind: int) -> None:
        self.moments[GROUP_GET_FALL_SIZE][f"{queue_id}@{topic}@{group}"] = fall_behind

    def record_disk_fall_behind_time(self, group: str, topic: str, queue_id: int,
                                     fall_behind_ms: int) -> None:
        self.moments[GROUP_GET_FALL_TIME][f"{queue_id}@{topic}@{group}"] = fall_behind_ms

    def groups_falling_behind(self, threshold: int) -> set[str]:
        return {key.split("@", 2)[2] for key, size in self.fall_behind.items() if size > threshold}

    # ---- folding -------------------------------------------------------------------
    def fold(self, now_s: float | None = None) -> None:
        """Add the pending counts to their items, in the bucket of ``now_s``."""
        second = int(time.monotonic() if now_s is None else now_s)
        start = second // BUCKET_S * BUCKET_S
        for source in self._put_sources:
            source(self)
        if self._put_pending:
            self._fold_puts(start)
        if self._get_pending:
            self._fold_gets(start)

    def _fold_puts(self, start: int) -> None:
        pending = self._put_pending
        self._put_pending = {}
        total = 0
        topics: dict[str, list[int]] = {}
        item = self._item
        histograms = self.size_histograms
        for (topic, qid), row in pending.items():
            nums, times, size = row[0], row[1], row[2]
            total += nums
            if histograms is not None and len(row) > 3:
                hist = histograms.get(topic)
                if hist is None:
                    hist = histograms[topic] = [0] * (len(SIZE_BUCKETS) + 2)
                for i in range(len(SIZE_BUCKETS) + 1):
                    hist[i] += row[3 + i]
                hist[-1] += size
            t = topics.get(topic)
            if t is None:
                topics[topic] = [nums, times, size]
            else:
                t[0] += nums
                t[1] += times
                t[2] += size
            if self.detail:
                key = f"{topic}@{qid}"
                item(QUEUE_PUT_NUMS, key).add_at(start, nums, times)
                item(QUEUE_PUT_SIZE, key).add_at(start, size, times)
        totals = self.in_totals
        for topic, (nums, times, size) in topics.items():
            item(TOPIC_PUT_NUMS, topic).add_at(start, nums, times)
            item(TOPIC_PUT_SIZE, topic).add_at(start, size, times)
            t = totals.get(topic)
            if t is None:
                totals[topic] = [nums, size]
            else:
                t[0] += nums
                t[1] += size
        item(BROKER_PUT_NUMS, self.cluster).add_at(start, total, 0)  # 4.9.8 adds the value only

    def _fold_gets(self, start: int) -> None:
        pending = self._get_pending
        self._get_pending = {}
        total = disk_nums = disk_size = 0
        item = self._item
        for (topic, group, qid), (nums, size, pulls, latency, d_nums, d_size) in pending.items():
            out = self.out_totals.get((topic, group))
            if out is None:
                self.out_totals[(topic, group)] = [nums, size]
            else:
                out[0] += nums
                out[1] += size
            key = f"{topic}@{group}"
            item(GROUP_GET_NUMS, key).add_at(start, nums, pulls)
            item(GROUP_GET_SIZE, key).add_at(start, size, pulls)
            item(GROUP_GET_LATENCY, f"{qid}@{key}" if self.detail else key).add_at(
                start, latency, pulls)
            if self.detail:
                qkey = f"{topic}@{qid}@{group}"
                item(QUEUE_GET_NUMS, qkey).add_at(start, nums, pulls)
                item(QUEUE_GET_SIZE, qkey).add_at(start, size, pulls)
            if d_nums:
                item(GROUP_GET_FROM_DISK_NUMS, key).add_at(start, d_nums, pulls)
                item(GROUP_GET_FROM_DISK_SIZE, key).add_at(start, d_size, pulls)
                disk_nums += d_nums
                disk_size += d_size
            total += nums
        item(BROKER_GET_NUMS, self.cluster).add_at(start, total, 0)
        if disk_nums:
            item(BROKER_GET_FROM_DISK_NUMS, self.cluster).add_at(start, disk_nums, 0)
            item(BROKER_GET_FROM_DISK_SIZE, self.cluster).add_at(start, disk_size, 0)

    # ---- reading -------------------------------------------------------------------
    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """``tpsGroupGetNums``: messages per second pulled by ``group`` from
        ``topic`` over the last minute."""
        item = self.get_stats_item(GROUP_GET_NUMS, f"{topic}@{group}")
        return item.snapshot(60)["tps"] if item is not None else 0.0

    # ---- deletions -----------------------------------------------------------------
    def on_topic_deleted(self, topic: str) -> None:
        """Forget a deleted topic's items (``onTopicDeleted``): the topic's own,
        those keyed ``topic@...`` and those with ``@topic@`` inside."""
        self.fold()
        prefix, infix = topic + "@", "@" + topic + "@"
        for name, table in self.items.items():
            if name in (BROKER_PUT_NUMS, BROKER_GET_NUMS, BROKER_GET_FROM_DISK_NUMS,
                        BROKER_GET_FROM_DISK_SIZE):
                continue
            for key in [k for k in table if k == topic or k.startswith(prefix) or infix in k]:
                del table[key]
        for table in self.moments.values():
            for key in [k for k in table if infix in k]:
                del table[key]

    def on_group_deleted(self, group: str) -> None:
        """Forget a deleted group's items (``onGroupDeleted``: keys ending in @group)."""
        self.fold()
        suffix = "@" + group
        for table in list(self.items.values()) + list(self.moments.values()):
            for key in [k for k in table if k.endswith(suffix)]:
                del table[key]

    # ---- stats.log -----------------------------------------------------------------
    def print_window(self, window: str) -> None:
        """Every item's line of ``window`` (Minute, Hour or Day) into stats.log."""
        self.fold()
        for name in ITEM_NAMES:
            for key, item in list(self.items.get(name, {}).items()):
                log.info("%s", item.log_line(name, key, window, rt=name == GROUP_GET_LATENCY))

    def print_moments(self) -> None:
        """The moment items' lines (4.9.8: every 5 minutes)."""
        for name in MOMENT_NAMES:
            for key, value in list(self.moments[name].items()):
                log.info("[%s] [%s] Stats Every 5 Minutes, Value: %d", name, key, value)

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



CREATE_BUCKETS_MS = (10, 100, 1000, 3000, 5000)


class ExecutionTimes:
    """How long topic or group creations took (5.3's
    ``rocketmq_topic_create_execution_time`` and
    ``rocketmq_consumer_group_create_execution_time``): rows of bucket counts
    (10, 100, 1000, 3000, 5000 ms, then above) and the sum, by label values."""

    def __init__(self, labels: tuple[str, ...]) -> None:
        self.labels = labels
        self.rows: dict[tuple[str, ...], list[int]] = {}

    def record(self, values: tuple[str, ...], elapsed_ms: int) -> None:
        row = self.rows.get(values)
        if row is None:
            row = self.rows[values] = [0] * (len(CREATE_BUCKETS_MS) + 2)
        row[bisect_left(CREATE_BUCKETS_MS, elapsed_ms)] += 1
        row[-1] += elapsed_ms
