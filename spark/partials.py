"""Per-file partial aggregates, computed where the file is decoded.

An executor never ships one row per message back to Spark: each consume
queue or commit log file is decoded with :mod:`spark.storefmt` and reduced
with numpy/pandas to a few rows that merge by sum / min / max across files
(map-side combine).  All kinds share one schema (``AGG_SCHEMA``) so the whole
scan is a single Spark job over the store files:

=====  ==============================  ==============================================
kind   key columns                     values
=====  ==============================  ==============================================
q      topic, queueId                  c entries, c2 entries on disk, b bytes on disk,
                                       lo/hi min/max queue offset, lo2 min on-disk offset
s      topic, queueId, key = size      c entries on disk with that size
l      topic, queueId, grp = group     c entries at/after the committed offset, b bytes
r      topic, queueId                  c records, b bytes, lo/hi store time,
                                       lo2/hi2 born time, x max reconsume times
m      topic, key = minute             c records, b bytes
i      issue                           lo = offset in the file (file start for CQ files)
=====  ==============================  ==============================================
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from spark import storefmt

SUMS = ("c", "c2", "b", "b2")
MINS = ("lo", "lo2")
MAXS = ("hi", "hi2", "x")
AGG_SCHEMA = pa.schema(
    [("kind", pa.string()), ("broker", pa.string()), ("topic", pa.string()), ("queueId", pa.int32()),
     ("key", pa.int64()), ("grp", pa.string()), ("issue", pa.string())]
    + [(n, pa.int64()) for n in SUMS + MINS + MAXS]
)
KEYS = ("kind", "broker", "topic", "queueId", "key", "grp", "issue")


def _frame(kind: str, broker: str, cols: dict) -> pd.DataFrame:
    n = len(next(iter(cols.values()))) if cols else 0
    df = pd.DataFrame(cols)
    df["kind"] = kind
    df["broker"] = broker
    for name in AGG_SCHEMA.names:
        if name not in df.columns:
            df[name] = None
    return df[AGG_SCHEMA.names] if n else df[AGG_SCHEMA.names].iloc[:0]


def issue(broker: str, topic: str | None, where: int, text: str) -> pd.DataFrame:
    return _frame("i", broker, {"topic": [topic], "lo": [where], "issue": [text]})


def consume_queue(buf, broker: str, topic: str, qid: int, start: int, expected: int | None,
                  cl_min: int | None, committed: list[tuple[str, int]], label: str) -> list[pd.DataFrame]:
    """Partials of one consume queue file; ``committed`` = (group, offset) for this queue."""
    ent = storefmt.decode_cq(buf, start, expected)
    out = [issue(broker, topic, start, f"{label}: {text}") for text in ent.issues]
    if not ent.phy.size:
        return out
    on_disk = ent.phy >= (cl_min if cl_min is not None else np.iinfo(np.int64).max)
    size = ent.size.astype(np.int64)
    qo = ent.queue_offset
    out.append(_frame("q", broker, {
        "topic": [topic], "queueId": [qid], "c": [qo.size], "c2": [int(on_disk.sum())],
        "b": [int(size[on_disk].sum())], "lo": [int(qo.min())], "hi": [int(qo.max())],
        "lo2": [int(qo[on_disk].min()) if on_disk.any() else None]}))
    sizes, counts = np.unique(size[on_disk], return_counts=True)
    out.append(_frame("s", broker, {"topic": topic, "queueId": qid, "key": sizes, "c": counts}))
    if committed:
        groups = [g for g, _ in committed]
        lag = [qo >= off for _, off in committed]
        out.append(_frame("l", broker, {
            "topic": topic, "queueId": qid, "grp": groups,
            "c": [int(m.sum()) for m in lag], "b": [int(size[m].sum()) for m in lag]}))
    return out


def commit_log(buf, broker: str, start: int, expected: int | None, label: str) -> list[pd.DataFrame]:
    """Partials of one commit log file (messages that enter a consume queue)."""
    rec = storefmt.walk_commitlog(buf, start, expected)
    out = [issue(broker, None, where, f"{label} at offset {where}: {text}") for where, text in rec.issues]
    f = rec.fields
    tx = f["sysFlag"] & storefmt.TX_MASK if rec.pos.size else np.empty(0, np.int64)
    keep = (tx != storefmt.TX_PREPARED) & (tx != storefmt.TX_ROLLBACK)
    if not keep.any():
        return out
    df = pd.DataFrame({
        "t": rec.topic_index[keep], "queueId": f["queueId"][keep], "size": rec.total_size[keep],
        "store": f["storeTimestamp"][keep], "born": f["bornTimestamp"][keep],
        "reconsume": f["reconsumeTimes"][keep]})
    names = np.asarray(rec.topics, dtype=object)
    g = df.groupby(["t", "queueId"], sort=False).agg(
        c=("size", "size"), b=("size", "sum"), lo=("store", "min"), hi=("store", "max"),
        lo2=("born", "min"), hi2=("born", "max"), x=("reconsume", "max")).reset_index()
    g["topic"] = names[g["t"].to_numpy()]
    out.append(_frame("r", broker, {k: g[k] for k in ("topic", "queueId", "c", "b", "lo", "hi", "lo2", "hi2", "x")}))
    df["key"] = df["store"] // 60000
    m = df.groupby(["t", "key"], sort=False).agg(c=("size", "size"), b=("size", "sum")).reset_index()
    m["topic"] = names[m["t"].to_numpy()]
    out.append(_frame("m", broker, {k: m[k] for k in ("topic", "key", "c", "b")}))
    return out


def to_batches(frames: list[pd.DataFrame]) -> list[pa.RecordBatch]:
    frames = [f for f in frames if len(f)]
    if not frames:
        return []
    df = pd.concat(frames, ignore_index=True)
    return pa.Table.from_pandas(df, schema=AGG_SCHEMA, preserve_index=False).combine_chunks().to_batches()
