"""Vectorized decoders for the RocketMQ 4.9.8 store files (numpy only, no Spark).

Formats (../shared/spec/STORE_FORMAT.md; every integer big-endian, signed):

Consume queue entry, 20 bytes (section 5)::

    0  long  commit log physical offset
    8  int   message size (= the record's TOTALSIZE)
    12 long  tagsCode
    size <= 0 or offset < 0 ends the valid data; (0, 0x7FFFFFFF, 0) is the
    pre-blank filler and is skipped.

Commit log message record (section 2.2); BH/SH = born/store host length,
8 bytes for IPv4, 20 when sysFlag has 0x10 / 0x20::

    0  int  TOTALSIZE          4  int  MAGIC 0xDAA320A7   8  int  BODYCRC
    12 int  QUEUEID            16 int  FLAG               20 long QUEUEOFFSET
    28 long PHYSICALOFFSET     36 int  SYSFLAG            40 long BORNTIMESTAMP
    48 BORNHOST (BH)           48+BH long STORETIMESTAMP   56+BH STOREHOST (SH)
    56+BH+SH int RECONSUMETIMES   60+BH+SH long PREPARED TX OFFSET
    68+BH+SH int BODYLENGTH, body, byte TOPICLENGTH, topic, short PROPSLENGTH, props
    TOTALSIZE = 72 + BH + SH + body + 1 + topic + 2 + props

A file ends with a blank record (int size, int 0xCBD43194) or with zeros.

Commit log files are walked the way the store's own recovery does, but
vectorized: every position holding the message magic is a candidate, a
candidate is a record when its stored PHYSICALOFFSET is its own offset and its
lengths add up to TOTALSIZE, and the chain of records is followed from the
file start by ``start + TOTALSIZE``; the chain is only visited in Python where
it breaks (corruption, end of data), never per record.

Index file header, 40 bytes (section 7.1): begin/end timestamp, begin/end
physical offset (longs), hashSlotCount, indexCount (ints).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

CQ_UNIT = 20
MESSAGE_MAGIC = b"\xda\xa3\x20\xa7"
BLANK_MAGIC = b"\xcb\xd4\x31\x94"
FILLER_SIZE = 0x7FFFFFFF
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20
TX_MASK = 0x0C
TX_PREPARED = 0x04
TX_ROLLBACK = 0x0C
MIN_RECORD = 91
INDEX_HEADER_SIZE = 40

_CQ_DTYPE = np.dtype([("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")])
_INDEX_HEADER = np.dtype(
    [("beginTimestamp", ">i8"), ("endTimestamp", ">i8"), ("beginPhyOffset", ">i8"),
     ("endPhyOffset", ">i8"), ("hashSlotCount", ">i4"), ("indexCount", ">i4")]
)


def file_start(name: str) -> int | None:
    """Start offset encoded in a 20-digit data file name, None for other names."""
    return int(name) if len(name) == 20 and name.isdigit() else None


# --------------------------------------------------------------------------- consume queue
@dataclass(slots=True)
class CqEntries:
    """Valid entries of one consume queue file, as parallel arrays."""

    queue_offset: np.ndarray
    phy: np.ndarray
    size: np.ndarray
    tags: np.ndarray
    issues: list[str] = field(default_factory=list)


def decode_cq(buf: bytes | memoryview | np.ndarray, start: int, expected_size: int | None) -> CqEntries:
    """Decode one consume queue file whose name (byte offset) is ``start``.

    Scanning stops at the first entry with size <= 0 or offset < 0 (section
    5.3); fillers are skipped.  A length that is not the configured file size
    or not a multiple of 20 is reported: the file was truncated or damaged.
    """
    raw = np.frombuffer(buf, dtype=np.uint8)
    issues = []
    if expected_size is not None and raw.size != expected_size:
        issues.append(f"consume queue file is {raw.size} bytes, expected {expected_size} (truncated)")
    elif raw.size % CQ_UNIT:
        issues.append(f"consume queue file length {raw.size} is not a multiple of 20")
    n = raw.size // CQ_UNIT
    arr = raw[: n * CQ_UNIT].view(_CQ_DTYPE)
    phy = arr["phy"].astype(np.int64)
    size = arr["size"].astype(np.int32)
    tags = arr["tags"].astype(np.int64)
    bad = np.flatnonzero((size <= 0) | (phy < 0))
    end = int(bad[0]) if bad.size else n
    keep = np.arange(end)
    keep = keep[~((phy[:end] == 0) & (size[:end] == FILLER_SIZE) & (tags[:end] == 0))]
    return CqEntries(start // CQ_UNIT + keep.astype(np.int64), phy[keep], size[keep], tags[keep], issues)


# --------------------------------------------------------------------------- commit log
def _record_dtype(bhl: int, shl: int) -> np.dtype:
    """Fixed part of a record (up to BODYLENGTH) for one host-length combination."""
    return np.dtype({
        "names": ["totalSize", "queueId", "queueOffset", "physicalOffset", "sysFlag",
                  "bornTimestamp", "storeTimestamp", "reconsumeTimes", "bodyLength"],
        "formats": [">i4", ">i4", ">i8", ">i8", ">i4", ">i8", ">i8", ">i4", ">i4"],
        "offsets": [0, 12, 20, 28, 36, 40, 48 + bhl, 56 + bhl + shl, 68 + bhl + shl],
        "itemsize": 72 + bhl + shl,
    })


_HOST_COMBOS = [(8, 8), (20, 8), (8, 20), (20, 20)]
_RECORD_DTYPES = {c: _record_dtype(*c) for c in _HOST_COMBOS}
_FIELDS = ("queueId", "queueOffset", "sysFlag", "bornTimestamp", "storeTimestamp",
           "reconsumeTimes", "bodyLength")


def _magic_positions(raw: np.ndarray, magic: bytes) -> np.ndarray:
    """Record starts ``p`` (int64) whose bytes p+4..p+7 equal ``magic``."""
    if raw.size < 8:
        return np.empty(0, np.int64)
    p = np.flatnonzero(raw[4 : raw.size - 3] == magic[0])
    for k in range(1, 4):
        p = p[raw[p + 4 + k] == magic[k]]
    return p.astype(np.int64)


def _be_int(raw: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Signed big-endian ints of ``width`` bytes at ``pos`` (positions in bounds)."""
    v = np.zeros(pos.size, np.int64)
    for k in range(width):
        v = (v << 8) | raw[pos + k]
    sign = np.int64(1) << (8 * width - 1)
    return np.where(v >= sign, v - (sign << 1), v)


@dataclass(slots=True)
class Records:
    """Message records of one commit log file, as parallel arrays."""

    pos: np.ndarray
    total_size: np.ndarray
    fields: dict[str, np.ndarray]
    topic_index: np.ndarray
    topics: list[str]
    issues: list[tuple[int, str]] = field(default_factory=list)
    data_end: int = 0


def _candidates(raw: np.ndarray, seg_start: int) -> tuple[np.ndarray, np.ndarray, dict, np.ndarray, np.ndarray]:
    """Positions that hold a self-consistent record, with their decoded fields."""
    pos = _magic_positions(raw, MESSAGE_MAGIC)
    n_raw = raw.size
    if pos.size:
        pos = pos[pos + MIN_RECORD <= n_raw]
    total = _be_int(raw, pos, 4) if pos.size else np.empty(0, np.int64)
    ok = (total >= MIN_RECORD) & (pos + total <= n_raw)
    pos, total = pos[ok], total[ok]
    sys_flag = _be_int(raw, pos + 36, 4) if pos.size else np.empty(0, np.int64)
    bhl = np.where(sys_flag & BORNHOST_V6, 20, 8)
    shl = np.where(sys_flag & STOREHOST_V6, 20, 8)
    fixed = 72 + bhl + shl
    ok = total >= fixed + 3
    out = {name: np.zeros(pos.size, np.int64) for name in _FIELDS + ("physicalOffset",)}
    windows = sliding_window_view(raw, 112) if n_raw >= 112 else None
    for combo in _HOST_COMBOS:
        sel = np.flatnonzero(ok & (bhl == combo[0]) & (shl == combo[1]))
        if not sel.size:
            continue
        dt = _RECORD_DTYPES[combo]
        if windows is not None and bool(np.all(pos[sel] + 112 <= n_raw)):
            block = windows[pos[sel], : dt.itemsize]
        else:
            block = sliding_window_view(raw, dt.itemsize)[pos[sel]]
        rec = np.ascontiguousarray(block).view(dt).ravel()
        for name in _FIELDS + ("physicalOffset",):
            out[name][sel] = rec[name]
    body = out["bodyLength"]
    ok &= (out["physicalOffset"] == seg_start + pos) & (body >= 0) & (body <= total - fixed - 3)
    topic_len_pos = np.where(ok, pos + fixed + body, 0)
    topic_len = np.where(ok, raw[topic_len_pos].astype(np.int8).astype(np.int64), 0)
    ok &= (topic_len > 0) & (fixed + body + 1 + topic_len + 2 <= total)
    props_pos = np.where(ok, topic_len_pos + 1 + topic_len, 0)
    props_len = np.where(ok, _be_int(raw, props_pos, 2), 0)
    ok &= fixed + body + 1 + topic_len + 2 + props_len == total
    keep = np.flatnonzero(ok)
    return pos[keep], total[keep], {k: v[keep] for k, v in out.items()}, topic_len_pos[keep] + 1, topic_len[keep]


def _follow_chain(raw: np.ndarray, pos: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, list[tuple[int, str]], int]:
    """Indexes of ``pos`` reachable from the file start, and the breaks met.

    Consecutive candidates that chain (end of one = start of the next) are
    taken as whole runs; Python only runs once per break.
    """
    n = pos.size
    end = pos + total
    breaks = np.flatnonzero(end[:-1] != pos[1:]) if n > 1 else np.empty(0, np.int64)
    runs: list[tuple[int, int]] = []
    issues: list[tuple[int, str]] = []
    at = 0
    while True:
        i = int(np.searchsorted(pos, at))
        if i < n and pos[i] == at:
            b = int(np.searchsorted(breaks, i))
            j = int(breaks[b]) if b < breaks.size else n - 1
            runs.append((i, j + 1))
            at = int(end[j])
            continue
        if at + 8 <= raw.size and raw[at + 4 : at + 8].tobytes() == BLANK_MAGIC:
            break
        rest = pos[i:] if i < n else pos[:0]
        if at >= raw.size or not raw[at : at + 8].any():
            if rest.size == 0:
                break
            issues.append((at, f"zero-filled gap of {int(rest[0]) - at} bytes before further records"))
        elif rest.size == 0:
            issues.append((at, "unreadable record; rest of the file ignored"))
            break
        else:
            issues.append((at, f"unreadable record; {int(rest[0]) - at} bytes skipped"))
        at = int(rest[0])
    if not runs:
        return np.empty(0, np.int64), issues, at
    idx = np.concatenate([np.arange(a, b) for a, b in runs])
    return idx, issues, at


def walk_commitlog(buf: bytes | memoryview | np.ndarray, seg_start: int, expected_size: int | None) -> Records:
    """All message records of one commit log file named ``seg_start``."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    pre_issues: list[tuple[int, str]] = []
    if expected_size is not None and raw.size != expected_size:
        pre_issues.append((seg_start + raw.size, f"commit log file is {raw.size} bytes, expected {expected_size} (truncated)"))
    pos, total, fields, topic_pos, topic_len = _candidates(raw, seg_start)
    idx, issues, data_end = _follow_chain(raw, pos, total)
    pos, total, topic_pos, topic_len = pos[idx], total[idx], topic_pos[idx], topic_len[idx]
    fields = {k: v[idx] for k, v in fields.items()}
    topic_index, topics = _topic_ids(raw, topic_pos, topic_len)
    return Records(pos, total, fields, topic_index, topics,
                   pre_issues + [(seg_start + p, t) for p, t in issues], data_end)


def _topic_ids(raw: np.ndarray, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Dictionary-encode the topic strings: one index per record, few strings."""
    index = np.zeros(start.size, np.int32)
    topics: list[str] = []
    for L in np.unique(length):
        sel = np.flatnonzero(length == L)
        mat = np.ascontiguousarray(sliding_window_view(raw, int(L))[start[sel]])
        uniq, inv = np.unique(mat.view(f"V{int(L)}").ravel(), return_inverse=True)
        index[sel] = len(topics) + inv.astype(np.int32).ravel()
        topics.extend(bytes(u).decode("utf-8", "replace") for u in uniq)
    return index, topics


# --------------------------------------------------------------------------- index
def index_header(buf: bytes) -> dict[str, int] | None:
    """The 40-byte IndexHeader, or None when the file is shorter than that."""
    if len(buf) < INDEX_HEADER_SIZE:
        return None
    rec = np.frombuffer(buf[:INDEX_HEADER_SIZE], _INDEX_HEADER)[0]
    return {name: int(rec[name]) for name in _INDEX_HEADER.names}
