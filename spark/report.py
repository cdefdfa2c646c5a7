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

import base64
import html
import io
import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rmq.common import topics as systopics
from spark.job import ScanResult, StoreSettings

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
CQ_UNIT = 20
BUILTIN_GROUPS = {
    systopics.TOOLS_CONSUMER_GROUP, systopics.FILTERSRV_CONSUMER_GROUP,
    systopics.SELF_TEST_CONSUMER_GROUP, systopics.ONS_HTTP_PROXY_GROUP,
    systopics.CID_ONSAPI_PULL_GROUP, systopics.CID_ONSAPI_PERMISSION_GROUP,
    systopics.CID_ONSAPI_OWNER_GROUP,
}


@dataclass(slots=True)
class Options:
    retention_hours: float | None = None
    target_queue_rate: float = 1000.0
    top_topics: int = 5


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


def topic_figures(queues: pd.DataFrame, hours: pd.DataFrame, scan: ScanResult) -> pd.DataFrame:
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
    agg["firstStoreTimeUtc"] = agg["firstStoreTime"].map(_iso)
    agg["lastStoreTimeUtc"] = agg["lastStoreTime"].map(_iso)
    return agg.sort_values(keys).reset_index(drop=True)


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
            if (b.name, group) in seen or group in BUILTIN_GROUPS or group.startswith(systopics.CID_RMQ_SYS_PREFIX):
                continue
            rows.append((b.name, group, "", 0, 0, None, None, "no offsets"))
    groups = pd.DataFrame(rows, columns=["broker", "group", "topics", "lagMessages", "lagBytes",
                                         "consumeRatePerSec", "drainSeconds", "status"])
    groups["noConsumption"] = groups["status"].isin(["no offsets", "stalled"])
    return groups, lq


def disk_figures(scan: ScanResult, queues: pd.DataFrame, hours: pd.DataFrame, opts: Options) -> tuple[pd.DataFrame, pd.DataFrame]:
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
        h = hours[hours["broker"] == b.name].groupby("hour")[["messages", "bytes"]].sum() if len(hours) else None
        peak_day = float(((h["bytes"] + CQ_UNIT * h["messages"]).max()) * 24) if h is not None and len(h) else None
        m = scan.minutes[scan.minutes["broker"] == b.name] if len(scan.minutes) else scan.minutes
        if len(m):
            d = m.assign(day=m["minute"] // 1440).groupby("day")[["messages", "bytes"]].sum()
            for day, r in d.iterrows():
                daily_rows.append((b.name, _iso(day * DAY_MS)[:10], int(r["messages"]), int(r["bytes"]),
                                   int(r["bytes"] + CQ_UNIT * r["messages"])))
        ratio = s.max_used_ratio()
        retention = opts.retention_hours if opts.retention_hours is not None else float(s.fileReservedTime)
        n_queues = int((q["entries"] > 0).sum())
        index_file = 40 + s.maxHashSlotNum * 4 + s.maxIndexNum * 20
        idx_lengths = f[f["kind"] == "index"]["length"] if len(f) else []
        if len(idx_lengths):
            index_file = int(max(idx_lengths))
        cq_file = -(-s.mappedFileSizeConsumeQueue // CQ_UNIT) * CQ_UNIT

        msgs_in_window = msgs / (span_ms / HOUR_MS) * retention if span_ms > 0 else msgs
        index_files = max(1, math.ceil(msgs_in_window / max(1, s.maxIndexNum - 1)))
        fixed = 2 * s.mappedFileSizeCommitLog + n_queues * cq_file + index_files * index_file
        needed = {k: None if v is None else (v / 24.0 * retention + fixed) / ratio
                  for k, v in (("observed", growth_day), ("peak", peak_day))}
        until = {k: None if b.disk_size is None or not v else max(0.0, (ratio * b.disk_size - used) / v)
                 for k, v in (("observed", growth_day), ("peak", peak_day))}
        rows.append({
            "broker": b.name, "commitlogFileBytes": int(by_kind.get("commitlog", 0)),
            "consumequeueFileBytes": int(by_kind.get("consumequeue", 0)),
            "indexFileBytes": int(by_kind.get("index", 0)), "storeFileBytes": used,
            "messages": msgs, "messageBytes": data,
            "firstStoreTimeUtc": _iso(first), "lastStoreTimeUtc": _iso(last),
            "retentionHeldHours": span_ms / HOUR_MS, "fileReservedTime": s.fileReservedTime,
            "retentionBelowReserved": span_ms / HOUR_MS < s.fileReservedTime,
            "bytesPerDayObserved": growth_day, "bytesPerDayPeak": peak_day,
            "diskSize": b.disk_size, "diskMaxUsedSpaceRatio": ratio,
            "daysUntilRatioObserved": until["observed"], "daysUntilRatioPeak": until["peak"],
            "retentionHours": retention, "diskNeededObserved": needed["observed"],
            "diskNeededPeak": needed["peak"],
        })
    daily = pd.DataFrame(daily_rows, columns=["broker", "day", "messages", "messageBytes", "diskBytes"])
    return pd.DataFrame(rows), daily


def recommendations(topics: pd.DataFrame, disk: pd.DataFrame, opts: Options) -> pd.DataFrame:
    rows = []
    for r in topics.itertuples():
        if not r.messages:
            continue
        peak = float(r.peakMessagesPerSec) if pd.notna(r.peakMessagesPerSec) else 0.0
        need = max(1, math.ceil(peak / opts.target_queue_rate))
        rows.append((r.broker, "queues", r.topic, float(r.queues), float(need),
                     f"peak-hour rate {peak:.2f} msg/s / target {opts.target_queue_rate:g} msg/s per queue"))
    for r in disk.itertuples():
        if r.diskNeededPeak is None or pd.isna(r.diskNeededPeak):
            continue
        gib = math.ceil(r.diskNeededPeak / 2**30)
        rows.append((r.broker, "disk", "", float(r.diskSize) if r.diskSize else math.nan, float(gib * 2**30),
                     f"{r.retentionHours:g} h at the peak-hour growth, + 2 commit log files, consume queue "
                     f"and index files, kept under diskMaxUsedSpaceRatio {r.diskMaxUsedSpaceRatio:.0%}"))
    return pd.DataFrame(rows, columns=["broker", "kind", "topic", "current", "recommended", "basis"])


def build(scan: ScanResult, opts: Options) -> dict[str, pd.DataFrame]:
    """Every report table, by name."""
    queues = queue_figures(scan)
    minutes, hours = throughput(scan)
    topics = topic_figures(queues, hours, scan)
    groups, lag_queues = group_figures(scan, queues)
    disk, daily = disk_figures(scan, queues, hours, opts)
    brokers = queues.groupby("broker", as_index=False).agg(
        topics=("topic", "nunique"), queues=("queueId", "count"), messages=("messages", "sum"),
        bytes=("bytes", "sum"), firstStoreTime=("firstStoreTime", "min"), lastStoreTime=("lastStoreTime", "max"))
    issues = pd.DataFrame(scan.issues, columns=["broker", "issue"])
    for r in queues[~queues["consistent"] & (queues["messages"] > 0)].itertuples():
        issues.loc[len(issues)] = (r.broker, f"{r.topic}/{r.queueId}: {r.messages} consume queue entries on "
                                             f"disk but {r.records} commit log records")
    return {
        "brokers": brokers, "topics": topics, "queues": queues, "throughput_minute": minutes,
        "throughput_hour": hours, "groups": groups, "group_queues": lag_queues, "disk": disk,
        "disk_daily": daily, "recommendations": recommendations(topics, disk, opts),
        "index_files": scan.index_headers, "files": scan.files, "issues": issues,
    }


# --------------------------------------------------------------------------- output
def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def charts(tables: dict[str, pd.DataFrame], opts: Options) -> dict[str, bytes]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    topics, minutes, hours = tables["topics"], tables["throughput_minute"], tables["throughput_hour"]
    fig, ax = plt.subplots(figsize=(9, 4))
    top = topics.sort_values("messages", ascending=False).head(opts.top_topics)
    span_h = len(hours["hour"].unique()) if len(hours) else 0
    for r in top.itertuples():
        if span_h > 6:
            s = hours[(hours["broker"] == r.broker) & (hours["topic"] == r.topic)]
            ax.plot(s["hourUtc"], s["messagesPerSec"], label=f"{r.broker}/{r.topic}")
        else:
            s = minutes[(minutes["broker"] == r.broker) & (minutes["topic"] == r.topic)]
            ax.plot(s["minuteUtc"], s["messages"] / 60.0, label=f"{r.broker}/{r.topic}")
    ax.set_title(f"Throughput of the top {opts.top_topics} topics ({'hourly' if span_h > 6 else 'per minute'})")
    ax.set_ylabel("messages / s")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.autofmt_xdate()
    out["throughput"] = _png(fig)
    plt.close(fig)

    groups = tables["groups"]
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.35 * len(groups) + 1)))
    labels = [f"{r.broker}/{r.group}" for r in groups.itertuples()]
    ax.barh(labels, groups["lagMessages"].astype(float))
    ax.set_title("Consumer lag per group (messages)")
    out["lag"] = _png(fig)
    plt.close(fig)

    disk = tables["disk"]
    fig, ax = plt.subplots(figsize=(9, 4))
    days = np.arange(0, 91)
    for r in disk.itertuples():
        for label, per_day, style in (("observed", r.bytesPerDayObserved, "-"), ("peak", r.bytesPerDayPeak, "--")):
            if per_day is not None and pd.notna(per_day):
                ax.plot(days, (r.storeFileBytes + per_day * days) / 2**30, style, label=f"{r.broker} {label} growth")
        if r.diskSize:
            ax.axhline(r.diskSize * r.diskMaxUsedSpaceRatio / 2**30, color="red", lw=0.8,
                       label=f"{r.broker} diskMaxUsedSpaceRatio")
    ax.set_xlabel("days from the last store time")
    ax.set_ylabel("GiB (no cleanup)")
    ax.set_title("Disk projection")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    out["disk"] = _png(fig)
    plt.close(fig)
    return out


_SECTIONS = [
    ("Brokers", "brokers", None), ("Topics", "topics", "throughput"), ("Queues", "queues", None),
    ("Consumer groups", "groups", "lag"), ("Lag per queue", "group_queues", None),
    ("Disk", "disk", "disk"), ("Bytes per day", "disk_daily", None),
    ("Recommendations", "recommendations", None), ("Index files", "index_files", None),
    ("Problems found in the store files", "issues", None),
]


def write(tables: dict[str, pd.DataFrame], pngs: dict[str, bytes], out_dir: str, opts: Options,
          max_rows: int = 200) -> str:
    """Write report.html, tables/*.parquet|csv and charts/*.png; returns the HTML path."""
    os.makedirs(os.path.join(out_dir, "tables"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "charts"), exist_ok=True)
    for name, df in tables.items():
        clean = df.copy()
        for c in clean.columns:
            if clean[c].dtype == object:
                clean[c] = clean[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else v)
        clean.to_parquet(os.path.join(out_dir, "tables", f"{name}.parquet"), index=False)
        clean.to_csv(os.path.join(out_dir, "tables", f"{name}.csv"), index=False)
    for name, data in pngs.items():
        with open(os.path.join(out_dir, "charts", f"{name}.png"), "wb") as fh:
            fh.write(data)
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>rmq capacity report</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style></head><body>",
             "<h1>rmq capacity report</h1>", "<h2>Assumptions</h2><ul>"]
    for line in (__doc__ or "").split("* ")[1:]:
        parts.append(f"<li>{html.escape(' '.join(line.split()))}</li>")
    parts.append(f"<li>Target per-queue rate {opts.target_queue_rate:g} msg/s; requested retention "
                 f"{'fileReservedTime' if opts.retention_hours is None else f'{opts.retention_hours:g} h'}.</li></ul>")
    for title, name, chart in _SECTIONS:
        df = tables[name]
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if chart:
            parts.append(f"<img alt='{chart}' src='data:image/png;base64,{base64.b64encode(pngs[chart]).decode()}'>")
        more = f" (first {max_rows} of {len(df)}; all rows in tables/{name}.csv)" if len(df) > max_rows else ""
        parts.append(f"<p>{len(df)} rows{more}</p>")
        parts.append(df.head(max_rows).to_html(index=False, na_rep="", float_format=lambda v: f"{v:,.2f}"))
    parts.append("</body></html>")
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(parts))
    return path
