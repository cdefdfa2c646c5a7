"""Capacity figures from the scan's small tables, and the report files.

Every figure is computed here on the driver with pandas from aggregates the
Spark job returned (per queue, per message size, per minute), so each one has
a single definition that the tests check against the generator's ground truth:

* messages / bytes of a queue: consume queue entries whose commit log data is
  still on disk, bytes = record sizes (TOTALSIZE); p99 = linear interpolation
  (numpy's default) over those sizes;
* store times, throughput per minute / hour, peak hour: commit log store
  timestamps of the messages that enter a consume queue (UTC buckets);
* queue skew of a topic: busiest queue / mean over its queues (topics.json
  queue count, empty queues included);
* lag: max offset - committed offset; lag bytes = sizes of the entries at or
  after the committed offset; consume rate = offset progress between
  consumerOffset.json and its .bak (one flushConsumerOffsetInterval apart);
* disk growth counts record bytes + 20 consume-queue bytes per message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rmq.common import topics as systopics
from rmq.common.java import is_builtin_group
from rmq.store.consume_queue import ROOM_MAX, ROOM_MIN
from spark.job import ScanResult, StoreSettings
from spark.units import duration, setting, when

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
CQ_UNIT = 20


@dataclass(slots=True)
class Options:
    retention_hours: float | None = None
    target_queue_rate: float = 1000.0


def percentile_from_hist(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """Exact linear-interpolated percentile of a value histogram (numpy 'linear')."""
    order = np.argsort(values)
    values, counts = values[order].astype(float), counts[order].astype(np.int64)
    n = int(counts.sum())
    if n == 0:
        return math.nan
    cum = np.cumsum(counts)
    h = (n - 1) * q / 100.0
    lo, hi = math.floor(h), math.ceil(h)
    v_lo = values[np.searchsorted(cum, lo, side="right")]
    v_hi = values[np.searchsorted(cum, hi, side="right")]
    return float(v_lo + (h - lo) * (v_hi - v_lo))


def _p99(hist: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    rows = []
    for key, g in hist.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append((*key, percentile_from_hist(g["size"].to_numpy(), g["count"].to_numpy(), 99)))
    return pd.DataFrame(rows, columns=[*keys, "p99Size"])


def _counts(col: pd.Series) -> pd.Series:
    """A count column after an outer or left merge: missing rows count 0.
    Through the nullable Int64 dtype, so an empty (object) column converts
    without pandas' silent-downcasting path."""
    return col.astype("Int64").fillna(0).astype("int64")


def _iso(ms) -> str | None:
    if ms is None or (isinstance(ms, float) and math.isnan(ms)) or pd.isna(ms):
        return None
    return pd.Timestamp(int(ms), unit="ms", tz="UTC").isoformat()


def _topic_table(scan: ScanResult) -> pd.DataFrame:
    rows = []
    for b in scan.brokers:
        table = (scan.configs.get(b.name, {}).get("topics.json") or {}).get("topicConfigTable", {}) or {}
        for name, tc in table.items():
            rows.append((b.name, name, int(tc.get("writeQueueNums", 0)), int(tc.get("readQueueNums", 0)),
                         int(tc.get("perm", 6))))
    return pd.DataFrame(rows, columns=["broker", "topic", "writeQueueNums", "readQueueNums", "perm"])


def queue_figures(scan: ScanResult) -> pd.DataFrame:
    keys = ["broker", "topic", "queueId"]
    q = scan.cq_queues.copy()
    if not len(q):
        q = pd.DataFrame(columns=keys + ["entries", "messages", "bytes", "minOffsetAll", "lastOffset", "minOffset"])
    q["maxOffset"] = q["lastOffset"].astype("Int64") + 1
    q["expiredEntries"] = q["entries"] - q["messages"]
    q = q.drop(columns=["lastOffset", "minOffsetAll"])
    tcfg = _topic_table(scan)
    known = []
    for r in tcfg.itertuples():
        for qid in range(max(r.writeQueueNums, r.readQueueNums)):
            known.append((r.broker, r.topic, qid))
    if known:
        q = q.merge(pd.DataFrame(known, columns=keys), on=keys, how="outer")
    for c in ("entries", "messages", "bytes", "expiredEntries"):
        q[c] = _counts(q[c])
    q["avgSize"] = np.where(q["messages"] > 0, q["bytes"] / q["messages"].where(q["messages"] > 0, 1), np.nan)
    if len(scan.size_hist):
        q = q.merge(_p99(scan.size_hist, keys), on=keys, how="left")
    else:
        q["p99Size"] = np.nan
    cl_cols = ["records", "firstStoreTime", "lastStoreTime", "firstBornTime", "lastBornTime", "maxReconsumeTimes"]
    cl = scan.cl_queues[keys + cl_cols] if len(scan.cl_queues) else pd.DataFrame(columns=keys + cl_cols)
    q = q.merge(cl, on=keys, how="left")
    q["records"] = _counts(q["records"])
    q["consistent"] = q["records"] == q["messages"]
    q["firstStoreTimeUtc"] = q["firstStoreTime"].map(_iso)
    q["lastStoreTimeUtc"] = q["lastStoreTime"].map(_iso)
    return q.sort_values(keys).reset_index(drop=True)


def throughput(scan: ScanResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    m = scan.minutes.copy()
    if not len(m):
        cols = ["broker", "topic", "messages", "bytes"]
        return pd.DataFrame(columns=cols + ["minute", "minuteUtc"]), pd.DataFrame(columns=cols + ["hour", "hourUtc"])
    m["minuteUtc"] = pd.to_datetime(m["minute"] * 60000, unit="ms", utc=True)
    m["hour"] = m["minute"] // 60
    h = m.groupby(["broker", "topic", "hour"], as_index=False)[["messages", "bytes"]].sum()
    h["hourUtc"] = pd.to_datetime(h["hour"] * HOUR_MS, unit="ms", utc=True)
    h["messagesPerSec"] = h["messages"] / 3600.0
    h["bytesPerSec"] = h["bytes"] / 3600.0
    m = m.drop(columns=["hour"]).sort_values(["broker", "topic", "minute"]).reset_index(drop=True)
    return m, h.sort_values(["broker", "topic", "hour"]).reset_index(drop=True)


def topic_figures(queues: pd.DataFrame, hours: pd.DataFrame, minutes: pd.DataFrame,
                  scan: ScanResult) -> pd.DataFrame:
    keys = ["broker", "topic"]
    agg = queues.groupby(keys, as_index=False).agg(
        queues=("queueId", "count"), messages=("messages", "sum"), bytes=("bytes", "sum"),
        firstStoreTime=("firstStoreTime", "min"), lastStoreTime=("lastStoreTime", "max"),
        busiestQueueMessages=("messages", "max"), meanQueueMessages=("messages", "mean"))
    agg["avgSize"] = np.where(agg["messages"] > 0, agg["bytes"] / agg["messages"].where(agg["messages"] > 0, 1), np.nan)
    agg["queueSkew"] = np.where(agg["meanQueueMessages"] > 0,
                                agg["busiestQueueMessages"] / agg["meanQueueMessages"].where(agg["meanQueueMessages"] > 0, 1),
                                np.nan)
    if len(scan.size_hist):
        th = scan.size_hist.groupby(keys + ["size"], as_index=False)["count"].sum()
        agg = agg.merge(_p99(th, keys), on=keys, how="left")
    else:
        agg["p99Size"] = np.nan
    if len(hours):
        idx = hours.groupby(keys)["messages"].idxmax()
        peak = hours.loc[idx, keys + ["hour", "messages", "bytes"]].rename(
            columns={"hour": "peakHour", "messages": "peakHourMessages", "bytes": "peakHourBytes"})
        agg = agg.merge(peak, on=keys, how="left")
        agg["peakHourUtc"] = agg["peakHour"].map(lambda x: _iso(x * HOUR_MS) if pd.notna(x) else None)
        agg["peakMessagesPerSec"] = agg["peakHourMessages"] / 3600.0
        agg["peakBytesPerSec"] = agg["peakHourBytes"] / 3600.0
    else:
        for c in ("peakHour", "peakHourMessages", "peakHourBytes", "peakHourUtc", "peakMessagesPerSec",
                  "peakBytesPerSec"):
            agg[c] = np.nan
    agg = agg.merge(minute_peaks(minutes), on=keys, how="left")
    agg["firstStoreTimeUtc"] = agg["firstStoreTime"].map(_iso)
    agg["lastStoreTimeUtc"] = agg["lastStoreTime"].map(_iso)
    return agg.sort_values(keys).reset_index(drop=True)


def minute_peaks(minutes: pd.DataFrame) -> pd.DataFrame:
    """Per topic the busiest minute: its start and its rates.  Queue advice
    rests on it, not on an hour's average (an hour that holds a burst, or
    only a few minutes of data, averages the peak away)."""
    cols = ["broker", "topic", "peakMinute", "peakMinuteMessagesPerSec", "peakMinuteBytesPerSec"]
    if not len(minutes):
        return pd.DataFrame(columns=cols)
    idx = minutes.groupby(["broker", "topic"])["messages"].idxmax()
    peak = minutes.loc[idx, ["broker", "topic", "minute", "messages", "bytes"]]
    return pd.DataFrame({"broker": peak["broker"], "topic": peak["topic"],
                         "peakMinute": peak["minute"] * 60_000,
                         "peakMinuteMessagesPerSec": peak["messages"] / 60.0,
                         "peakMinuteBytesPerSec": peak["bytes"] / 60.0})


def group_figures(scan: ScanResult, queues: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    keys = ["broker", "topic", "queueId"]
    off = scan.offsets.copy()
    lq = off.merge(queues[keys + ["maxOffset"]], on=keys, how="left")
    lq["maxOffset"] = _counts(lq["maxOffset"])
    lq["lagMessages"] = (lq["maxOffset"] - lq["offset"]).clip(lower=0).astype("int64")
    lag = scan.lag if len(scan.lag) else pd.DataFrame(columns=["broker", "topic", "group", "queueId", "lagBytes"])
    lq = lq.merge(lag[["broker", "topic", "group", "queueId", "lagBytes"]],
                  on=["broker", "topic", "group", "queueId"], how="left")
    lq["lagBytes"] = _counts(lq["lagBytes"])
    lq["progress"] = lq["offset"] - lq["previousOffset"]
    lq = lq.sort_values(["broker", "group", "topic", "queueId"]).reset_index(drop=True)

    interval = {b.name: b.settings.flushConsumerOffsetInterval / 1000.0 for b in scan.brokers}
    rows = []
    seen = set()
    for (broker, group), g in lq.groupby(["broker", "group"], sort=True):
        seen.add((broker, group))
        known = g["previousOffset"].notna()
        rate = float(g.loc[known, "progress"].sum()) / interval[broker] if known.any() else None
        lag_m, lag_b = int(g["lagMessages"].sum()), int(g["lagBytes"].sum())
        drain = lag_m / rate if rate and rate > 0 else None
        if lag_m == 0:
            status = "caught up"
        elif rate is None:
            status = "lagging, rate unknown"
        elif rate <= 0:
            status = "stalled"
        else:
            status = "consuming"
        rows.append((broker, group, ",".join(sorted(set(g["topic"]))), lag_m, lag_b, rate, drain, status))
    for b in scan.brokers:
        subs = (scan.configs.get(b.name, {}).get("subscriptionGroup.json") or {}).get("subscriptionGroupTable", {}) or {}
        for group in sorted(subs):
            if (b.name, group) in seen or is_builtin_group(group):
                continue
            rows.append((b.name, group, "", 0, 0, None, None, "no offsets"))
    groups = pd.DataFrame(rows, columns=["broker", "group", "topics", "lagMessages", "lagBytes",
                                         "consumeRatePerSec", "drainSeconds", "status"])
    groups["noConsumption"] = groups["status"].isin(["no offsets", "stalled"])
    return groups, lq


def growth_rates(minutes: pd.DataFrame, first: float, last: float, days: bool = False) -> np.ndarray:
    """Disk growth per day (record bytes + 20 consume-queue bytes a message) of
    each hour (or day) with data, its bytes divided by the part of it that the
    data window covers: a window of six minutes is six minutes of traffic,
    not an hour of it."""
    if not len(minutes):
        return np.array([])
    unit = DAY_MS if days else HOUR_MS
    g = minutes.assign(b=minutes["minute"] * 60_000 // unit).groupby("b")[["messages", "bytes"]].sum()
    begin = g.index.to_numpy(dtype=np.int64) * unit
    cover = np.minimum(begin + unit, last) - np.maximum(begin, first)
    cover = np.clip(cover, 60_000, unit).astype(float)
    return (g["bytes"] + CQ_UNIT * g["messages"]).to_numpy(dtype=float) / (cover / DAY_MS)


def _band(minutes: pd.DataFrame, first: float, last: float) -> tuple[float, float] | None:
    """The spread of daily growth: 10th-90th percentile of the per-day rates
    with three days of data or more, else of the per-hour ones."""
    rates = growth_rates(minutes, first, last, days=(last - first) >= 3 * DAY_MS)
    if len(rates) < 2:
        return None
    return float(np.percentile(rates, 10)), float(np.percentile(rates, 90))


def _days_until(limit: float | None, used: int, steady: float | None, per_day: float | None):
    """Days until ``limit``: None without a disk size or a growth figure, inf
    when the store levels off below it (retention deletes as fast as it grows)."""
    if limit is None or not per_day or steady is None:
        return None
    if steady <= limit:
        return math.inf
    return max(0.0, (limit - used) / per_day)


@dataclass(slots=True)
class _Footprint:
    """What a broker's store holds besides the commit log data."""

    settings: StoreSettings
    queues: int
    index_file: int
    msgs_per_hour: float | None
    msgs: int

    def fixed(self, hold_h: float) -> float:
        """Two commit log files (the one being written and the one made ahead),
        the room each queue's consume queue file holds past its entries, the
        index files of ``hold_h`` hours of messages.

        The entries are in the growth (20 bytes a message).  Consume queue
        files are sparse (4.9.8's; rmq's are written within reserved blocks
        that grow by half of what they hold, ``ROOM_MAX`` at most): past its
        entries a queue's file holds the rest of a page, or up to half of its
        entries more.  Counted as a page a queue, or half of a queue's share
        of the held entries when that is more, never more than a file."""
        s = self.settings
        in_window = self.msgs_per_hour * hold_h if self.msgs_per_hour else self.msgs
        index_files = max(1, math.ceil(in_window / max(1, s.maxIndexNum - 1)))
        cq_file = -(-s.mappedFileSizeConsumeQueue // CQ_UNIT) * CQ_UNIT
        share = in_window * CQ_UNIT / max(1, self.queues)
        ahead = min(cq_file, max(ROOM_MIN, min(ROOM_MAX, share / 2)))
        return 2 * s.mappedFileSizeCommitLog + self.queues * ahead + index_files * self.index_file

    def level(self, per_day: float | None, hold_h: float) -> float | None:
        """Bytes held once ``hold_h`` hours of data are kept."""
        return None if per_day is None else per_day / 24.0 * hold_h + self.fixed(hold_h)


def disk_figures(scan: ScanResult, queues: pd.DataFrame, opts: Options
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per broker: what is stored, how fast it grows (observed: over the whole
    window; peak: the busiest hour, scaled to the part of it the window covers;
    low/high: the spread of the hourly or daily rates) and where that leads.
    The store keeps ``fileReservedTime`` hours of commit log and deletes what
    expired at the next ``deleteWhen`` (once a day), so it levels off at
    growth x (fileReservedTime + 24 h) plus the files it always holds; the
    days until ``diskMaxUsedSpaceRatio`` count to that level (inf: it levels
    off below the limit)."""
    files = scan.files
    rows, daily_rows = [], []
    for b in scan.brokers:
        s: StoreSettings = b.settings
        f = files[files["broker"] == b.name] if len(files) else files
        by_kind = f.groupby("kind")["length"].sum().to_dict() if len(f) else {}
        used = int(sum(by_kind.values()))
        q = queues[queues["broker"] == b.name]
        msgs, data = int(q["messages"].sum()), int(q["bytes"].sum())
        first, last = q["firstStoreTime"].min(), q["lastStoreTime"].max()
        span_ms = float(last - first) if pd.notna(first) and pd.notna(last) else 0.0
        growth_day = (data + CQ_UNIT * msgs) / (span_ms / DAY_MS) if span_ms > 0 else None
        m = scan.minutes[scan.minutes["broker"] == b.name] if len(scan.minutes) else scan.minutes
        peak_day = band = None
        if growth_day is not None and len(m):
            peak_day = max(float(growth_rates(m, first, last).max()), growth_day)
            band = _band(m, first, last)
        if len(m):
            d = m.assign(day=m["minute"] // 1440).groupby("day")[["messages", "bytes"]].sum()
            for day, r in d.iterrows():
                daily_rows.append((b.name, _iso(day * DAY_MS)[:10], int(r["messages"]), int(r["bytes"]),
                                   int(r["bytes"] + CQ_UNIT * r["messages"])))
        ratio = s.max_used_ratio()
        limit = ratio * b.disk_size if b.disk_size else None
        retention = opts.retention_hours if opts.retention_hours is not None else float(s.fileReservedTime)
        n_queues = int((q["entries"] > 0).sum())
        index_file = 40 + s.maxHashSlotNum * 4 + s.maxIndexNum * 20
        idx_lengths = f[f["kind"] == "index"]["length"] if len(f) else []
        if len(idx_lengths):
            index_file = int(max(idx_lengths))
        footprint = _Footprint(s, n_queues, index_file,
                               msgs / (span_ms / HOUR_MS) if span_ms > 0 else None, msgs)
        level = footprint.level
        held = s.fileReservedTime + 24.0
        steady = {k: level(v, held) for k, v in (("observed", growth_day), ("peak", peak_day))}
        needed = {k: None if v is None else level(v, retention + 24.0) / ratio
                  for k, v in (("observed", growth_day), ("peak", peak_day))}
        rows.append({
            "broker": b.name, "commitlogFileBytes": int(by_kind.get("commitlog", 0)),
            "consumequeueFileBytes": int(by_kind.get("consumequeue", 0)),
            "indexFileBytes": int(by_kind.get("index", 0)), "storeFileBytes": used,
            "messages": msgs, "messageBytes": data,
            "firstStoreTime": first, "lastStoreTime": last,
            "firstStoreTimeUtc": _iso(first), "lastStoreTimeUtc": _iso(last),
            "windowHours": span_ms / HOUR_MS, "shortWindow": span_ms < DAY_MS,
            "retentionHeldHours": span_ms / HOUR_MS, "fileReservedTime": s.fileReservedTime,
            "retentionBelowReserved": span_ms / HOUR_MS < s.fileReservedTime,
            "bytesPerDayObserved": growth_day, "bytesPerDayPeak": peak_day,
            "bytesPerDayLow": band[0] if band else None, "bytesPerDayHigh": band[1] if band else None,
            "steadyBytesObserved": steady["observed"], "steadyBytesPeak": steady["peak"],
            "diskSize": b.disk_size, "diskMaxUsedSpaceRatio": ratio,
            "daysUntilRatioObserved": _days_until(limit, used, steady["observed"], growth_day),
            "daysUntilRatioPeak": _days_until(limit, used, steady["peak"], peak_day),
            "retentionHours": retention, "diskNeededObserved": needed["observed"],
            "diskNeededPeak": needed["peak"],
        })
    daily = pd.DataFrame(daily_rows, columns=["broker", "day", "messages", "messageBytes", "diskBytes"])
    return pd.DataFrame(rows), daily


SKEWED = 2.0  # busiest queue over the mean queue of a topic that calls for a rebalance


def groups_at_risk(groups: pd.DataFrame, topics: pd.DataFrame, disk: pd.DataFrame) -> pd.DataFrame:
    """Adds each group's fill rate (messages/s its topics got over the window)
    and whether it is at risk: stalled with a backlog, or draining slower
    than its topics fill."""
    span = dict(zip(disk["broker"], disk["windowHours"] * 3600.0, strict=True)) if len(disk) else {}
    msgs = {(r.broker, r.topic): r.messages for r in topics.itertuples()}
    fill, risk = [], []
    for r in groups.itertuples():
        secs = span.get(r.broker) or 0.0
        n = sum(msgs.get((r.broker, t), 0) for t in r.topics.split(",") if t)
        rate = n / secs if secs > 0 else None
        fill.append(rate)
        if r.status == "stalled":
            risk.append(f"stalled with {r.lagMessages:,} messages behind")
        elif r.status == "consuming" and rate and r.consumeRatePerSec is not None and \
                r.consumeRatePerSec < rate:
            risk.append(f"drains {r.consumeRatePerSec:,.1f} msg/s, its topics fill {rate:,.1f} msg/s")
        else:
            risk.append("")
    return groups.assign(fillRatePerSec=fill, risk=risk, atRisk=[bool(x) for x in risk])


def recommendations(topics: pd.DataFrame, groups: pd.DataFrame, disk: pd.DataFrame,
                    opts: Options) -> pd.DataFrame:
    """What to change, each with the figure that calls for it: queue counts
    from the busiest minute (never cut on less than a day of data), skewed
    queues, the disk for the retention asked for, idle and lagging groups."""
    rows = []
    short = {r.broker: bool(r.shortWindow) for r in disk.itertuples()}
    for r in topics.itertuples():
        if not r.messages or systopics.is_system_topic(r.topic):
            continue
        peak = float(r.peakMinuteMessagesPerSec) if pd.notna(r.peakMinuteMessagesPerSec) else 0.0
        need = max(1, math.ceil(peak / opts.target_queue_rate))
        basis = (f"busiest minute {_iso(r.peakMinute)}: {peak:,.1f} msg/s; target "
                 f"{opts.target_queue_rate:,g} msg/s a queue")
        if need > r.queues:
            rows.append((r.broker, "queues", r.topic, float(r.queues), float(need),
                         f"raise {r.topic} from {r.queues} to {need} queues", basis))
        elif need < r.queues and not short.get(r.broker, True):
            rows.append((r.broker, "queues", r.topic, float(r.queues), float(need),
                         f"{r.topic} could do with {need} queues instead of {r.queues}", basis))
        if r.queues > 1 and r.messages >= 100 and pd.notna(r.queueSkew) and r.queueSkew >= SKEWED:
            rows.append((r.broker, "rebalance", r.topic, float(r.queueSkew), 1.0,
                         f"rebalance {r.topic}: its busiest queue holds {r.queueSkew:.1f}x the mean",
                         "producers choosing queues by a skewed key, or a queue selector"))
    for r in groups.itertuples():
        if r.status == "no offsets":
            rows.append((r.broker, "idle-group", r.group, math.nan, math.nan,
                         f"delete idle group {r.group}",
                         "subscription group with no committed offsets"))
        elif r.atRisk:
            rows.append((r.broker, "lagging-group", r.group, float(r.lagMessages), 0.0,
                         f"add consumers to {r.group}", r.risk))
    for r in disk.itertuples():
        if r.diskNeededPeak is None or pd.isna(r.diskNeededPeak):
            continue
        gib = math.ceil(r.diskNeededPeak / 2**30)
        current = float(r.diskSize) if r.diskSize else math.nan
        if not r.diskSize or gib * 2**30 > r.diskSize:
            rows.append((r.broker, "disk", "", current, float(gib * 2**30),
                         f"{gib:,} GiB of disk for {r.retentionHours:g} h of retention",
                         f"peak growth {r.bytesPerDayPeak / 2**30:,.2f} GiB/day kept "
                         f"{r.retentionHours:g} h + a day until deleteWhen, two commit log files, "
                         f"consume queue and index files, under diskMaxUsedSpaceRatio "
                         f"{r.diskMaxUsedSpaceRatio:.0%}"))
    return pd.DataFrame(rows, columns=["broker", "kind", "target", "current", "recommended",
                                       "action", "basis"])


SETTINGS_USED = ("fileReservedTime", "diskMaxUsedSpaceRatio", "deleteWhen", "mappedFileSizeCommitLog",
                 "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum",
                 "flushConsumerOffsetInterval")


def settings_table(scan: ScanResult) -> pd.DataFrame:
    """Every broker setting the figures rest on, its value and where it came from."""
    rows = [(b.name, key, str(getattr(b.settings, key)), setting(key, getattr(b.settings, key)),
             b.source(key)) for b in scan.brokers for key in SETTINGS_USED]
    return pd.DataFrame(rows, columns=["broker", "setting", "value", "reads", "source"])


def build(scan: ScanResult, opts: Options) -> dict[str, pd.DataFrame]:
    """Every report table, by name."""
    queues = queue_figures(scan)
    minutes, hours = throughput(scan)
    topics = topic_figures(queues, hours, minutes, scan)
    groups, lag_queues = group_figures(scan, queues)
    disk, daily = disk_figures(scan, queues, opts)
    groups = groups_at_risk(groups, topics, disk)
    brokers = queues.groupby("broker", as_index=False).agg(
        topics=("topic", "nunique"), queues=("queueId", "count"), messages=("messages", "sum"),
        bytes=("bytes", "sum"), firstStoreTime=("firstStoreTime", "min"), lastStoreTime=("lastStoreTime", "max"))
    named = pd.DataFrame([(b.name, b.named_by) for b in scan.brokers], columns=["broker", "namedBy"])
    brokers = named.merge(brokers, on="broker", how="left")
    issues = pd.DataFrame(scan.issues, columns=["broker", "issue"])
    for r in queues[~queues["consistent"] & (queues["messages"] > 0)].itertuples():
        issues.loc[len(issues)] = (r.broker, f"{r.topic}/{r.queueId}: {r.messages} consume queue entries on "
                                             f"disk but {r.records} commit log records")
    return {
        "brokers": brokers, "topics": topics, "queues": queues, "throughput_minute": minutes,
        "throughput_hour": hours, "groups": groups, "group_queues": lag_queues, "disk": disk,
        "disk_daily": daily, "recommendations": recommendations(topics, groups, disk, opts),
        "settings": settings_table(scan),
        "index_files": scan.index_headers, "files": scan.files, "issues": issues,
    }


# --------------------------------------------------------------------------- summary
KEY_SETTINGS = ("fileReservedTime", "diskMaxUsedSpaceRatio", "deleteWhen")


def _days(value) -> float | str | None:
    """A days-until figure for JSON: None unknown, "never" when the store levels off."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return "never" if math.isinf(value) else float(value)


def _num(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _peak(minutes: pd.DataFrame) -> dict:
    """The busiest minute of ``minutes`` (summed over its topics)."""
    if not len(minutes):
        return {"messagesPerSec": None, "bytesPerSec": None, "time": None}
    per = minutes.groupby("minute")[["messages", "bytes"]].sum()
    minute = int(per["messages"].idxmax())
    return {"messagesPerSec": float(per.loc[minute, "messages"]) / 60.0,
            "bytesPerSec": float(per.loc[minute, "bytes"]) / 60.0, "time": _iso(minute * 60_000)}


def broker_summary(b, tables: dict[str, pd.DataFrame]) -> dict:
    """The headline figures of one broker, its warnings and what to change."""
    name = b.name
    disk = tables["disk"].set_index("broker").loc[name]
    topics = tables["topics"][tables["topics"]["broker"] == name]
    queues = tables["queues"][tables["queues"]["broker"] == name]
    groups = tables["groups"][tables["groups"]["broker"] == name]
    recs = tables["recommendations"][tables["recommendations"]["broker"] == name]
    minutes = tables["throughput_minute"]
    minutes = minutes[minutes["broker"] == name] if len(minutes) else minutes
    warnings = []
    if disk["messages"] and disk["shortWindow"]:
        warnings.append(f"only {duration(disk['windowHours'] * 3600)} of data "
                        f"({when(disk['firstStoreTime'])} to {when(disk['lastStoreTime'])}): rates and "
                        f"growth are extrapolated from it, and no daily cycle is in it")
    if not b.disk_size:
        warnings.append(f"days until the disk fills need its size: --disk-size {name}=SIZE (e.g. 500G)")
    for key in KEY_SETTINGS:
        if b.source(key).startswith("4.9.8 default"):
            warnings.append(f"{key}={getattr(b.settings, key)} assumed (4.9.8's default): no config in "
                            f"the store sets it; --broker-conf {name}=FILE gives the broker's own")
    if b.named_by == "directory":
        warnings.append("named after its directory: no brokerName found in the store's config")
    issues = tables["issues"][tables["issues"]["broker"] == name]
    if len(issues):
        warnings.append(f"{len(issues)} problem(s) found in the store files (see Problems)")
    busiest_topic = topics.sort_values("messages", ascending=False).head(1)
    busiest_queue = queues.sort_values("messages", ascending=False).head(1)
    return {
        "name": name, "namedBy": b.named_by,
        "window": {"start": disk["firstStoreTimeUtc"], "end": disk["lastStoreTimeUtc"],
                   "hours": float(disk["windowHours"]), "short": bool(disk["shortWindow"])},
        "messages": int(disk["messages"]), "messageBytes": int(disk["messageBytes"]),
        "storeBytes": int(disk["storeFileBytes"]), "diskSize": b.disk_size,
        "diskMaxUsedSpaceRatio": float(disk["diskMaxUsedSpaceRatio"]),
        "growthBytesPerDay": {k: _num(disk[f"bytesPerDay{k.title()}"])
                              for k in ("observed", "peak", "low", "high")},
        "steadyBytes": {"observed": _num(disk["steadyBytesObserved"]),
                        "peak": _num(disk["steadyBytesPeak"])},
        "daysUntilFull": {"observed": _days(disk["daysUntilRatioObserved"]),
                          "peak": _days(disk["daysUntilRatioPeak"])},
        "peak": _peak(minutes),
        "busiestTopic": None if busiest_topic.empty else {
            "topic": busiest_topic.iloc[0]["topic"], "messages": int(busiest_topic.iloc[0]["messages"])},
        "busiestQueue": None if busiest_queue.empty or not busiest_queue.iloc[0]["messages"] else {
            "topic": busiest_queue.iloc[0]["topic"], "queueId": int(busiest_queue.iloc[0]["queueId"]),
            "messages": int(busiest_queue.iloc[0]["messages"])},
        "groupsAtRisk": [{"group": r.group, "risk": r.risk} for r in groups.itertuples() if r.atRisk],
        "recommendations": [{"kind": r.kind, "target": r.target, "action": r.action, "basis": r.basis}
                            for r in recs.itertuples()],
        "warnings": warnings,
        "settings": {key: {"value": str(getattr(b.settings, key)), "source": b.source(key)}
                     for key in SETTINGS_USED},
    }


def summary(scan: ScanResult, tables: dict[str, pd.DataFrame], opts: Options) -> dict:
    """The headline figures for the fleet and each broker (report.html's top
    and summary.json): what a planner reads first, and what alerting checks."""
    brokers = [broker_summary(b, tables) for b in scan.brokers]
    known = [(b["daysUntilFull"]["peak"], b["name"]) for b in brokers
             if isinstance(b["daysUntilFull"]["peak"], float)]
    soonest = min(known) if known else None
    starts = [b["window"]["start"] for b in brokers if b["window"]["start"]]
    ends = [b["window"]["end"] for b in brokers if b["window"]["end"]]
    return {
        "generated": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds"),
        "options": {"targetQueueRate": opts.target_queue_rate, "retentionHours": opts.retention_hours},
        "fleet": {
            "brokers": len(brokers), "messages": sum(b["messages"] for b in brokers),
            "messageBytes": sum(b["messageBytes"] for b in brokers),
            "storeBytes": sum(b["storeBytes"] for b in brokers),
            "windowStart": min(starts) if starts else None, "windowEnd": max(ends) if ends else None,
            "peak": _peak(tables["throughput_minute"]),
            "soonestFull": None if soonest is None else {"broker": soonest[1], "daysAtPeak": soonest[0]},
            "groupsAtRisk": sum(len(b["groupsAtRisk"]) for b in brokers),
            "recommendations": sum(len(b["recommendations"]) for b in brokers),
            "brokersWithWarnings": sum(1 for b in brokers if b["warnings"]),
        },
        "brokers": brokers,
    }
