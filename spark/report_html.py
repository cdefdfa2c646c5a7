"""report.html, summary.json, the charts and the table files of a capacity report.

The page is for a person deciding what to do: the summary and the
recommendations first, then one section per broker (folded when there are
many), everything in units people read (UTC times, KiB..TiB, rates with their
unit, thousands separators).  The raw figures stay in ``tables/*.parquet|csv``
and ``summary.json``.  Tables fit a 1280 px window: long ones show their first
rows and fold the rest, headers stay in view, a click on a header sorts (a
few lines of script shipped in the page; nothing is fetched from elsewhere).
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from spark.job import ScanResult
from spark.units import GIB, count, days, duration, rate, size, when

SHOWN_ROWS = 15  # rows of a table shown before the rest is folded
FOLD_BROKERS = 3  # more brokers than this: each broker's section starts folded
TOP_TOPICS = 5


def esc(text) -> str:
    return html.escape("" if text is None else str(text))


# --------------------------------------------------------------------------- tables
Column = tuple[str, str, Callable[[object], str]]  # header, source column, formatter


def table(df: pd.DataFrame, columns: Sequence[Column], caption: str = "",
          csv: str | None = None) -> str:
    """A sortable table of ``df``: the first SHOWN_ROWS rows, the rest folded
    behind a button.  Each cell carries its raw value for sorting."""
    if df.empty:
        return f"<p class='none'>{esc(caption or 'Nothing to show')}: none.</p>"
    head = "".join(f"<th>{esc(h)}</th>" for h, _, _ in columns)
    body = []
    for i, (_, row) in enumerate(df.iterrows()):
        cells = []
        for _, col, fmt in columns:
            raw = row[col]
            key = raw if isinstance(raw, (int, float, np.integer, np.floating)) and not pd.isna(raw) \
                else str(raw)
            text = fmt(raw)
            short = " class='n'" if len(text) <= 12 else ""  # "1,234.5 MiB" stays on one line
            cells.append(f"<td{short} data-v='{esc(key)}'>{esc(text)}</td>")
        cls = " class='more'" if i >= SHOWN_ROWS else ""
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    more = ""
    if len(df) > SHOWN_ROWS:
        more = (f"<button class='unfold' type='button'>show all {len(df):,} rows</button>")
    where = f" All columns: <code>tables/{esc(csv)}.csv</code>." if csv else ""
    cap = f"<caption>{esc(caption)} ({len(df):,} rows).{where}</caption>" if caption else ""
    return (f"<div class='table'><table class='sortable folded'>{cap}<thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{more}</div>")


def cards(items: Sequence[tuple[str, str, str]]) -> str:
    """Headline figures: (label, value, note)."""
    out = [f"<div class='card'><div class='label'>{esc(label)}</div><div class='value'>{esc(value)}</div>"
           f"<div class='note'>{esc(note)}</div></div>" for label, value, note in items]
    return f"<div class='cards'>{''.join(out)}</div>"


def bullet_list(items: Sequence[str], cls: str) -> str:
    if not items:
        return ""
    return f"<ul class='{cls}'>" + "".join(f"<li>{esc(x)}</li>" for x in items) + "</ul>"


# --------------------------------------------------------------------------- charts
def _figure(width: float = 8.0, height: float = 3.2):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(figsize=(width, height))


def _save(plt, fig, path: str) -> None:
    fig.savefig(path, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)


def throughput_chart(minutes: pd.DataFrame, hours: pd.DataFrame, topics: pd.DataFrame,
                     path: str) -> bool:
    """Messages per second of the broker's busiest topics over time."""
    if topics.empty or not topics["messages"].sum():
        return False
    plt, fig, ax = _figure()
    span_h = minutes["minute"].nunique() / 60 if len(minutes) else 0
    for r in topics.sort_values("messages", ascending=False).head(TOP_TOPICS).itertuples():
        if span_h > 6:
            s = hours[hours["topic"] == r.topic]
            ax.plot(s["hourUtc"], s["messagesPerSec"], label=r.topic)
        else:
            s = minutes[minutes["topic"] == r.topic]
            ax.plot(s["minuteUtc"], s["messages"] / 60.0, label=r.topic)
    ax.set_title(f"Busiest topics, {'hourly' if span_h > 6 else 'per-minute'} averages")
    ax.set_ylabel("messages / s")
    ax.set_xlabel("time (UTC)")
    ax.legend(fontsize=7, loc="upper left")
    fig.autofmt_xdate()
    _save(plt, fig, path)
    return True


def disk_chart(d: pd.Series, path: str) -> bool:
    """Disk use from now on at the observed and the peak growth, with the band of
    the hourly (daily) variation, levelling off where retention deletes as much
    as arrives; the diskMaxUsedSpaceRatio limit when the disk size is known."""
    if d["bytesPerDayObserved"] is None or pd.isna(d["bytesPerDayObserved"]):
        return False
    plt, fig, ax = _figure()
    used = float(d["storeFileBytes"])
    hold = float(d["fileReservedTime"]) + 24.0

    def curve(per_day: float, t: np.ndarray, steady: float) -> np.ndarray:
        return np.minimum(used + per_day * t, max(used, steady)) / GIB

    horizon = max(30.0, 1.5 * hold / 24.0)
    for key in ("Observed", "Peak"):
        left = d[f"daysUntilRatio{key}"]
        if left is not None and not pd.isna(left) and not math.isinf(left):
            horizon = max(horizon, min(365.0, 1.3 * float(left)))
    t = np.linspace(0, horizon, 200)
    fixed = float(d["steadyBytesObserved"]) - float(d["bytesPerDayObserved"]) / 24 * hold

    def steady(per_day: float) -> float:
        return per_day / 24 * hold + fixed

    if d["bytesPerDayLow"] is not None and not pd.isna(d["bytesPerDayLow"]):
        lo, hi = float(d["bytesPerDayLow"]), float(d["bytesPerDayHigh"])
        ax.fill_between(t, curve(lo, t, steady(lo)), curve(hi, t, steady(hi)), alpha=0.2,
                        label="10th-90th percentile of the hourly/daily growth")
    ax.plot(t, curve(float(d["bytesPerDayObserved"]), t, float(d["steadyBytesObserved"])),
            label=f"observed growth ({size(d['bytesPerDayObserved'])}/day)")
    ax.plot(t, curve(float(d["bytesPerDayPeak"]), t, float(d["steadyBytesPeak"])), "--",
            label=f"peak growth ({size(d['bytesPerDayPeak'])}/day)")
    title = f"Disk use ahead (retention {d['fileReservedTime']} h + a day until deleteWhen)"
    if d["diskSize"] and not pd.isna(d["diskSize"]):
        limit = float(d["diskSize"]) * float(d["diskMaxUsedSpaceRatio"])
        top = max(float(d["steadyBytesPeak"]), used, float(d["bytesPerDayHigh"] or 0) / 24 * hold)
        if limit <= 3 * top:
            ax.axhline(limit / GIB, color="red", lw=1,
                       label=f"diskMaxUsedSpaceRatio {float(d['diskMaxUsedSpaceRatio']):.0%} of the disk")
        else:  # drawn, the limit would flatten every curve against the axis
            title += f"\nlimit ({float(d['diskMaxUsedSpaceRatio']):.0%} of the disk) at {size(limit)}, " \
                     "far above"
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("days from the last message")
    ax.set_ylabel("GiB on disk")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="lower right")
    _save(plt, fig, path)
    return True


def lag_chart(groups: pd.DataFrame, path: str) -> bool:
    g = groups[groups["lagMessages"] > 0]
    if g.empty:
        return False
    g = g.sort_values("lagMessages").tail(20)
    plt, fig, ax = _figure(height=max(2.0, 0.35 * len(g) + 1))
    ax.barh(g["group"], g["lagMessages"].astype(float))
    ax.set_title("Consumer groups behind (the 20 furthest)")
    ax.set_xlabel("messages behind")
    ax.set_ylabel("group")
    _save(plt, fig, path)
    return True


# --------------------------------------------------------------------------- page
STYLE = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232b;background:#f6f7f9}
main{max-width:1240px;margin:0 auto;padding:16px 20px}
h1{font-size:24px;margin:8px 0}h2{font-size:19px;margin:28px 0 8px}h3{font-size:16px;margin:18px 0 6px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:10px;margin:8px 0}
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:8px 12px}
.card .label{font-size:12px;color:#5b6470}.card .value{font-size:18px;font-weight:600}
.card .note{font-size:12px;color:#5b6470}
ul.warn li{color:#8a4b00}ul.todo li{font-weight:500}
.table{margin:6px 0 14px;max-height:540px;overflow-y:auto;background:#fff;border:1px solid #dde1e6}
table{border-collapse:collapse;width:100%;font-size:13px;table-layout:auto}
caption{text-align:left;padding:4px 8px;color:#5b6470;font-size:12px}
th{position:sticky;top:0;background:#eef1f4;cursor:pointer;text-align:left;padding:4px 8px;
   border-bottom:1px solid #c9ced5}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
td{padding:3px 8px;border-bottom:1px solid #eceff2;overflow-wrap:anywhere}
td.n{white-space:nowrap}
table.folded tr.more{display:none}
button.unfold{margin:4px 8px;font-size:12px}
details.broker{background:#fff;border:1px solid #dde1e6;border-radius:6px;margin:10px 0;padding:4px 14px}
details.broker>summary{font-size:17px;font-weight:600;cursor:pointer;padding:6px 0}
img{max-width:100%;height:auto}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:10px}
code{font-size:12px}p.none{color:#5b6470}
"""

SCRIPT = """
document.querySelectorAll('button.unfold').forEach(function (b) {
  b.addEventListener('click', function () {
    var t = b.previousElementSibling; t.classList.toggle('folded');
    b.textContent = t.classList.contains('folded') ? b.dataset.more || b.textContent : 'fold';
  });
  b.dataset.more = b.textContent;
});
document.querySelectorAll('table.sortable th').forEach(function (th, i) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var asc = !th.classList.contains('asc');
    th.parentNode.querySelectorAll('th').forEach(function (h) { h.classList.remove('asc', 'desc'); });
    th.classList.add(asc ? 'asc' : 'desc');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r, k) {
      body.appendChild(r); r.classList.toggle('more', k >= SHOWN);
    });
  });
});
""".replace("SHOWN", str(SHOWN_ROWS))


def _fleet(summary: dict) -> str:
    f = summary["fleet"]
    peak = f["peak"]
    soon = f["soonestFull"]
    items = [
        ("Brokers", count(f["brokers"]), f"{f['brokersWithWarnings']} with warnings"),
        ("Messages stored", count(f["messages"]), size(f["messageBytes"]) + " of message data"),
        ("On disk", size(f["storeBytes"]), "all store files"),
        ("Data window", _span(f["windowStart"], f["windowEnd"]),
         f"{when(f['windowStart'])} to {when(f['windowEnd'])}"),
        ("Busiest minute", rate(peak["messagesPerSec"]),
         f"{size(peak['bytesPerSec'])}/s at {when(peak['time'])}" if peak["time"] else "–"),
        ("Soonest full (peak growth)", days(soon["daysAtPeak"]) if soon else _never(summary),
         soon["broker"] if soon else ("every store levels off below its limit"
                                      if _never(summary) == "never" else "needs --disk-size")),
        ("Consumer groups at risk", count(f["groupsAtRisk"]), "stalled, or draining slower than filling"),
        ("Recommendations", count(f["recommendations"]), "listed below"),
    ]
    return cards(items)


def _span(start: str | None, end: str | None) -> str:
    if not start or not end:
        return "–"
    return duration((pd.Timestamp(end) - pd.Timestamp(start)).total_seconds())


def _never(summary: dict) -> str:
    """"never" when every broker's disk size is known and each levels off, else "–"."""
    full = [b["daysUntilFull"]["peak"] for b in summary["brokers"]]
    return "never" if full and all(x == "never" for x in full) else "–"


def _broker_row(b: dict) -> dict:
    return {"broker": b["name"], "window": b["window"]["hours"], "messages": b["messages"],
            "store": b["storeBytes"], "peak": b["peak"]["messagesPerSec"],
            "growth": b["growthBytesPerDay"]["observed"], "growthPeak": b["growthBytesPerDay"]["peak"],
            "full": b["daysUntilFull"]["peak"], "risk": len(b["groupsAtRisk"]),
            "todo": len(b["recommendations"]), "warn": len(b["warnings"])}


def _days_key(v):
    return math.inf if v == "never" else (math.nan if v is None else v)


def fleet_table(summary: dict) -> str:
    rows = pd.DataFrame([_broker_row(b) for b in summary["brokers"]])
    rows["full"] = rows["full"].map(_days_key)
    return table(rows, [
        ("Broker", "broker", str), ("Data window", "window", lambda h: duration(h * 3600)),
        ("Messages", "messages", count), ("On disk", "store", size),
        ("Busiest minute", "peak", rate), ("Growth / day", "growth", size),
        ("Peak growth / day", "growthPeak", size), ("Until full (peak)", "full", days),
        ("Groups at risk", "risk", count), ("Actions", "todo", count), ("Warnings", "warn", count),
    ], "Brokers")


def broker_section(b: dict, scan: ScanResult, tables: dict[str, pd.DataFrame], out_dir: str,
                   fold: bool) -> str:
    name = b["name"]

    def mine(t: str) -> pd.DataFrame:
        df = tables[t]
        return df[df["broker"] == name] if len(df) else df

    slug = "".join(c if c.isalnum() else "_" for c in name)
    parts = [f"<details class='broker' id='broker-{esc(slug)}'{'' if fold else ' open'}>",
             f"<summary>{esc(name)} <small>(named by {esc(b['namedBy'])})</small></summary>"]
    g, peak = b["growthBytesPerDay"], b["peak"]
    bt, bq = b["busiestTopic"], b["busiestQueue"]
    parts.append(cards([
        ("Data window", duration(b["window"]["hours"] * 3600),
         f"{when(b['window']['start'])} to {when(b['window']['end'])}"),
        ("Until diskMaxUsedSpaceRatio", days(b["daysUntilFull"]["observed"]),
         f"at the peak growth: {days(b['daysUntilFull']['peak'])}" if b["diskSize"]
         else "needs --disk-size"),
        ("Growth per day", size(g["observed"]), f"peak {size(g['peak'])}, band {size(g['low'])} to "
                                                 f"{size(g['high'])}"),
        ("Busiest minute", rate(peak["messagesPerSec"]),
         f"{size(peak['bytesPerSec'])}/s at {when(peak['time'])}" if peak["time"] else "–"),
        ("Busiest topic", bt["topic"] if bt else "–", f"{count(bt['messages'])} messages" if bt else ""),
        ("Busiest queue", f"{bq['topic']} / {bq['queueId']}" if bq else "–",
         f"{count(bq['messages'])} messages" if bq else ""),
        ("On disk", size(b["storeBytes"]), f"{count(b['messages'])} messages, "
                                           f"{size(b['messageBytes'])} of data"),
        ("Disk", size(b["diskSize"]) if b["diskSize"] else "unknown",
         f"limit {b['diskMaxUsedSpaceRatio']:.0%} (diskMaxUsedSpaceRatio)"),
    ]))
    parts.append(bullet_list(b["warnings"], "warn"))
    if b["recommendations"]:
        parts.append("<h3>What to change</h3>")
        parts.append(bullet_list([f"{r['action']} ({r['basis']})" for r in b["recommendations"]],
                                 "todo"))
    if b["groupsAtRisk"]:
        parts.append("<h3>Groups at risk</h3>")
        parts.append(bullet_list([f"{r['group']}: {r['risk']}" for r in b["groupsAtRisk"]], "warn"))
    charts = []
    disk = mine("disk")
    for kind, draw in (
            ("throughput", lambda p: throughput_chart(mine("throughput_minute"), mine("throughput_hour"),
                                                       mine("topics"), p)),
            ("disk", lambda p: not disk.empty and disk_chart(disk.iloc[0], p)),
            ("lag", lambda p: lag_chart(mine("groups"), p))):
        rel = f"charts/{slug}-{kind}.png"
        if draw(os.path.join(out_dir, rel)):
            charts.append(f"<img loading='lazy' alt='{esc(name)} {kind}' src='{esc(rel)}'>")
    if charts:
        parts.append(f"<div class='charts'>{''.join(charts)}</div>")
    topics = mine("topics")
    parts.append("<h3>Topics</h3>")
    parts.append(table(topics.sort_values("messages", ascending=False), [
        ("Topic", "topic", str), ("Queues", "queues", count), ("Messages", "messages", count),
        ("Data", "bytes", size), ("Avg size", "avgSize", size), ("p99 size", "p99Size", size),
        ("Busiest minute", "peakMinuteMessagesPerSec", rate), ("at", "peakMinute", when),
        ("Queue skew", "queueSkew", lambda v: "–" if pd.isna(v) else f"{v:,.2f}x"),
        ("Last message", "lastStoreTime", when),
    ], "Topics by messages", "topics"))
    queues = mine("queues")
    full = queues[queues["messages"] > 0]
    empty = queues[queues["messages"] == 0]
    parts.append("<h3>Queues</h3>")
    parts.append(table(full.sort_values("messages", ascending=False), [
        ("Topic", "topic", str), ("Queue", "queueId", count), ("Messages", "messages", count),
        ("Data", "bytes", size), ("p99 size", "p99Size", size), ("Max offset", "maxOffset", count),
        ("First message", "firstStoreTime", when), ("Last message", "lastStoreTime", when),
    ], "Queues holding messages", "queues"))
    if len(empty):
        parts.append(f"<p class='none'>{len(empty):,} empty queues of {empty['topic'].nunique():,} "
                     f"topics folded (all in <code>tables/queues.csv</code>).</p>")
    groups = mine("groups")
    parts.append("<h3>Consumer groups</h3>")
    parts.append(table(groups.sort_values("lagMessages", ascending=False), [
        ("Group", "group", str), ("Topics", "topics", str), ("Behind", "lagMessages", count),
        ("Behind (data)", "lagBytes", size), ("Consumes", "consumeRatePerSec", rate),
        ("Topics fill", "fillRatePerSec", rate), ("Drains in", "drainSeconds", duration),
        ("Status", "status", str),
    ], "Consumer groups by lag", "groups"))
    parts.append("<h3>Settings the figures rest on</h3>")
    parts.append(table(mine("settings"), [("Setting", "setting", str), ("Value", "reads", str),
                                          ("Source", "source", str)], "", "settings"))
    issues = mine("issues")
    if len(issues):
        parts.append("<h3>Problems found in the store files</h3>")
        parts.append(table(issues, [("Problem", "issue", str)], "Problems", "issues"))
    parts.append("</details>")
    return "\n".join(parts)


def render(scan: ScanResult, tables: dict[str, pd.DataFrame], summary: dict, out_dir: str) -> str:
    fleet_recs = [f"{b['name']}: {r['action']} ({r['basis']})" for b in summary["brokers"]
                  for r in b["recommendations"]]
    fold = len(summary["brokers"]) > FOLD_BROKERS
    opts = summary["options"]
    retention = "fileReservedTime" if opts["retentionHours"] is None else f"{opts['retentionHours']:g} h"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>rmq capacity report</title><style>{STYLE}</style></head><body><main>",
        "<h1>rmq capacity report</h1>",
        f"<p>{summary['fleet']['brokers']} broker(s), generated {esc(when(summary['generated']))}. "
        f"Target {rate(opts['targetQueueRate'])} a queue at the busiest minute; disk sized for "
        f"{esc(retention)} of retention. Raw figures: <code>summary.json</code>, <code>tables/</code>.</p>",
        "<section id='summary'><h2>Summary</h2>", _fleet(summary), "</section>",
        "<section id='recommendations'><h2>Recommendations</h2>",
        bullet_list(fleet_recs, "todo") or "<p class='none'>Nothing to change.</p>", "</section>",
    ]
    if len(summary["brokers"]) > 1:
        parts += ["<section id='fleet'><h2>Brokers</h2>", fleet_table(summary), "</section>"]
    parts.append("<section id='brokers'><h2>Per broker</h2>")
    by_name = {b.name: b for b in scan.brokers}
    for b in summary["brokers"]:
        parts.append(broker_section(b, scan, tables, out_dir, fold) if b["name"] in by_name else "")
    parts.append("</section>")
    parts.append("<section id='method'><h2>How the figures are made</h2><ul>")
    from spark import report

    for line in (report.__doc__ or "").split("* ")[1:]:
        parts.append(f"<li>{esc(' '.join(line.split()))}</li>")
    parts.append("</ul></section>")
    parts.append(f"</main><script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)


def write(scan: ScanResult, tables: dict[str, pd.DataFrame], summary: dict, out_dir: str) -> str:
    """tables/*.parquet|csv, charts/*.png, summary.json and report.html; the page's path."""
    os.makedirs(os.path.join(out_dir, "tables"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "charts"), exist_ok=True)
    for name, df in tables.items():
        clean = df.copy()
        for c in clean.columns:
            if clean[c].dtype == object:
                clean[c] = clean[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v))
                                        else v)
        clean.to_parquet(os.path.join(out_dir, "tables", f"{name}.parquet"), index=False)
        clean.to_csv(os.path.join(out_dir, "tables", f"{name}.csv"), index=False)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2, allow_nan=False, default=_json_default)
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(scan, tables, summary, out_dir))
    return path


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return None if math.isnan(value) else float(value)
    return str(value)
