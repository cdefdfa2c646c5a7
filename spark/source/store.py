"""Broker store directories as rows: plan queue ranges, read them.

A store is listed and classified with :mod:`spark.job`'s code (the same
layout rules, settings and broker naming as ``rmq-capacity``) through
:class:`spark.job.ArrowFs`, since the data source plans in a Python worker
without the session's JVM.  Planning decodes each selected queue's consume
queue files (:func:`spark.storefmt.decode_cq`, numpy), keeps the entries
whose commit log file still exists, applies the pushed-down bounds (a time
bound is a binary search over store times read from the records the
entries point at) and cuts each queue into ranges of at most
``maxMessagesPerPartition`` messages and ``maxBytesPerPartition`` bytes.

Reading a range re-reads its consume queue entries, fetches the records
from the commit log (adjacent records in one read; local files memory
mapped) and decodes them with the client's decoder, so the rows equal what
a pull of the same messages gives.  An entry whose record is missing or does
not match it (topic, queue, offset) is data loss: an error naming the file
and offset, or skipped with ``failOnDataLoss=false``.
"""

from __future__ import annotations

import bisect
import logging
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from rmq.client.codec import decode_messages
from rmq.client.exceptions import MessageDecodeError
from rmq.client.message import MessageExt
from rmq.common.topics import is_system_topic
from rmq.store import message_codec
from spark import storefmt
from spark.job import (
    ArrowFs,
    BrokerInput,
    _cq_file_size,
    classify,
    commitlog_dirs,
    infer_file_sizes,
    load_settings,
    name_from_store,
    open_input,
    read_file,
)
from spark.source.cluster import DataLossError
from spark.source.filters import Bounds
from spark.source.options import OptionError
from spark.source.rows import BATCH_ROWS, to_batch

log = logging.getLogger("rmq.spark")
MAX_GAP = 1 << 20  # records closer than this are fetched with one read


@dataclass(slots=True)
class QueueFiles:
    topic: str
    queue_id: int
    cq: list[tuple[int, str]]  # (file start in bytes, URI), by start


@dataclass(slots=True)
class Store:
    """One broker's store as listed: its commit log and consume queue files."""

    broker: str
    cl: list[tuple[int, str]]
    cq_file_size: int
    queues: list[QueueFiles] = field(default_factory=list)


class StoreRange(InputPartition):
    """Offsets ``[lo, hi)`` of one queue of one store, with the files they need."""

    def __init__(self, broker: str, topic: str, queue_id: int, lo: int, hi: int,
                 cq: list[tuple[int, str]], cl: list[tuple[int, str]], cq_file_size: int) -> None:
        super().__init__((broker, topic, queue_id, lo, hi))
        self.broker, self.topic, self.queue_id, self.lo, self.hi = broker, topic, queue_id, lo, hi
        self.cq, self.cl, self.cq_file_size = cq, cl, cq_file_size


# --------------------------------------------------------------------------- listing
def open_stores(paths: list[str]) -> list[Store]:
    fs = ArrowFs()
    stores = [_open_store(fs, p) for p in paths]
    for s, p in zip(stores, paths, strict=True):  # as rmq-capacity: a clash keeps the directory names
        if sum(x.broker == s.broker for x in stores) > 1:
            s.broker = posixpath.basename(fs.qualify(p).rstrip("/"))
    return stores


def _open_store(fs: ArrowFs, path: str) -> Store:
    root = fs.qualify(path)
    if not fs.is_dir(root):
        raise OptionError(f"rmq: store directory {path} does not exist")
    b = BrokerInput(posixpath.basename(root.rstrip("/")), root, named_by="directory")
    load_settings(fs, b, None)
    name_from_store(fs, b)
    cl_dirs = commitlog_dirs(fs, b)
    listed = fs.list_files(root)
    for d in cl_dirs:
        if not d.startswith(root.rstrip("/") + "/"):
            listed += fs.list_files(d)
    files = classify(b, listed, cl_dirs)
    infer_file_sizes(b, files)
    cl = sorted((f.start, f.path) for f in files if f.kind == "commitlog")
    by_queue: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for f in files:
        if f.kind == "consumequeue":
            by_queue.setdefault((f.topic, f.queue_id), []).append((f.start, f.path))
    queues = [QueueFiles(t, q, sorted(v)) for (t, q), v in sorted(by_queue.items())]
    return Store(b.name, cl, _cq_file_size(b.settings), queues)


# --------------------------------------------------------------------------- planning
def plan(stores: list[Store], bounds: Bounds, max_messages: int, max_bytes: int) -> list[StoreRange]:
    """The ranges a batch read covers (without explicit topics, every topic but
    the broker's own system topics)."""
    out: list[StoreRange] = []
    for s in stores:
        cl_min = s.cl[0][0] if s.cl else None
        for q in s.queues:
            if not bounds.wants(q.topic, s.broker, q.queue_id):
                continue
            if bounds.topics is None and is_system_topic(q.topic):
                continue
            if cl_min is None:
                continue
            out += _plan_queue(s, q, cl_min, bounds, max_messages, max_bytes)
    return out


def _entries(s: Store, q: QueueFiles) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Queue offsets, commit log offsets and sizes of every valid entry."""
    parts = [storefmt.decode_cq(read_file(uri), start, None) for start, uri in q.cq]
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    return (np.concatenate([p.queue_offset for p in parts]), np.concatenate([p.phy for p in parts]),
            np.concatenate([p.size.astype(np.int64) for p in parts]))


def _plan_queue(s: Store, q: QueueFiles, cl_min: int, bounds: Bounds, max_messages: int,
                max_bytes: int) -> list[StoreRange]:
    offsets, phy, size = _entries(s, q)
    keep = (phy >= cl_min) & (offsets >= bounds.offset_lo)
    if bounds.offset_hi is not None:
        keep &= offsets < bounds.offset_hi
    offsets, phy, size = offsets[keep], phy[keep], size[keep]
    if offsets.size and (bounds.time_lo_ms is not None or bounds.time_hi_ms is not None):
        with _CommitLog(s.cl) as log_files:
            i, j = _time_window(log_files, phy, size, bounds.time_lo_ms, bounds.time_hi_ms)
        offsets, phy, size = offsets[i:j], phy[i:j], size[i:j]
    out = []
    for i, j in chunks(size, max_messages, max_bytes):
        lo, hi = int(offsets[i]), int(offsets[j - 1]) + 1
        out.append(StoreRange(s.broker, q.topic, q.queue_id, lo, hi,
                              _covering(q.cq, lo * storefmt.CQ_UNIT, hi * storefmt.CQ_UNIT),
                              _covering(s.cl, int(phy[i:j].min()), int((phy[i:j] + size[i:j]).max())),
                              s.cq_file_size))
    return out


def chunks(size: np.ndarray, max_messages: int, max_bytes: int) -> list[tuple[int, int]]:
    """Index ranges ``[i, j)`` of at most ``max_messages`` entries and
    ``max_bytes`` bytes each (an entry larger than that gets a range of its own)."""
    cum = np.cumsum(size)
    out = []
    i, n = 0, int(size.size)
    while i < n:
        base = int(cum[i - 1]) if i else 0
        by_bytes = int(np.searchsorted(cum, base + max_bytes, side="right"))
        j = min(n, i + max_messages, max(by_bytes, i + 1))
        out.append((i, j))
        i = j
    return out


def _covering(files: list[tuple[int, str]], lo: int, hi: int) -> list[tuple[int, str]]:
    """The files (sorted by start) holding any byte of ``[lo, hi)``."""
    starts = [f[0] for f in files]
    first = max(0, bisect.bisect_right(starts, lo) - 1)
    last = bisect.bisect_left(starts, hi)
    return files[first:last]


def _time_window(log_files: _CommitLog, phy: np.ndarray, size: np.ndarray,
                 lo_ms: int | None, hi_ms: int | None) -> tuple[int, int]:
    """Entry indexes ``[i, j)`` whose store times can fall in ``[lo_ms, hi_ms]``:
    binary searches reading one record per step (store times grow along a queue)."""
    def time_at(k: int) -> int:
        t = log_files.store_time(int(phy[k]), int(size[k]))
        return t if t is not None else -1  # unreadable: searched past like 4.9.8 does

    def first(pred) -> int:
        a, b = 0, int(phy.size)
        while a < b:
            mid = (a + b) // 2
            if pred(time_at(mid)):
                b = mid
            else:
                a = mid + 1
        return a

    i = first(lambda t: t >= lo_ms) if lo_ms is not None else 0
    j = first(lambda t: t > hi_ms) if hi_ms is not None else int(phy.size)
    return i, max(i, j)


# --------------------------------------------------------------------------- reading
class _CommitLog:
    """Open commit log files of a read, looked up by physical offset."""

    def __init__(self, files: list[tuple[int, str]]) -> None:
        self.starts = [f[0] for f in files]
        self.uris = [f[1] for f in files]
        self.open: dict[int, pa.NativeFile] = {}

    def __enter__(self) -> _CommitLog:
        return self

    def __exit__(self, *exc) -> None:
        for f in self.open.values():
            f.close()

    def file_of(self, phy: int) -> tuple[int, pa.NativeFile] | None:
        k = bisect.bisect_right(self.starts, phy) - 1
        if k < 0:
            return None
        f = self.open.get(k)
        if f is None:
            f = self.open[k] = open_input(self.uris[k])
        return self.starts[k], f

    def read(self, phy: int, length: int) -> pa.Buffer | None:
        """``length`` bytes at ``phy``, None when no file holds all of them."""
        found = self.file_of(phy)
        if found is None:
            return None
        start, f = found
        if phy - start + length > f.size():
            return None
        return f.read_at(length, phy - start)

    def store_time(self, phy: int, size: int) -> int | None:
        buf = self.read(phy, size)
        if buf is None:
            return None
        scanned = message_codec.scan_record(memoryview(buf), 0, size, False)
        return scanned[7] if scanned[0] == message_codec.SCAN_MESSAGE else None


def read_range(p: StoreRange, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """The rows of one planned range, in queue order."""
    entries = _range_entries(p)
    with _CommitLog(p.cl) as log_files:
        for a in range(0, entries.phy.size, BATCH_ROWS):
            sl = slice(a, a + BATCH_ROWS)
            msgs = _records(log_files, p, entries.queue_offset[sl], entries.phy[sl],
                            entries.size[sl], fail_on_data_loss)
            if msgs:
                yield to_batch(msgs, p.broker)


def _range_entries(p: StoreRange) -> storefmt.CqEntries:
    parts = []
    for start, uri in p.cq:
        first = start // storefmt.CQ_UNIT
        lo, hi = max(p.lo, first), min(p.hi, first + p.cq_file_size // storefmt.CQ_UNIT)
        if lo >= hi:
            continue
        with open_input(uri) as f:
            raw = f.read_at((hi - lo) * storefmt.CQ_UNIT, (lo - first) * storefmt.CQ_UNIT)
        parts.append(storefmt.decode_cq(raw, lo * storefmt.CQ_UNIT, None))
    return storefmt.CqEntries(*(np.concatenate([getattr(e, k) for e in parts]) if parts else
                                np.empty(0, np.int64) for k in ("queue_offset", "phy", "size", "tags")))


def _records(log_files: _CommitLog, p: StoreRange, offsets: np.ndarray, phy: np.ndarray,
             size: np.ndarray, fail: bool) -> list[MessageExt]:
    """Decode the records the entries point at, checking each against its entry."""
    pieces: list = []
    order = np.argsort(phy, kind="stable")
    spans = _spans(phy[order], size[order], log_files.starts)
    raw: dict[int, memoryview] = {}
    for lo, hi in spans:
        buf = log_files.read(lo, hi - lo)
        if buf is not None:
            raw[lo] = memoryview(buf)
    span_starts = [lo for lo, _ in spans]
    for k in range(offsets.size):
        at, n = int(phy[k]), int(size[k])
        s = span_starts[bisect.bisect_right(span_starts, at) - 1]
        view = raw.get(s)
        pieces.append(view[at - s: at - s + n] if view is not None and at - s + n <= len(view) else None)
    if all(x is not None for x in pieces):
        try:
            msgs = decode_messages(b"".join(pieces), p.broker)
            if _match(msgs, p, offsets):
                return msgs
        except MessageDecodeError:
            pass
    return _one_by_one(pieces, p, offsets, fail)


def _spans(phy: np.ndarray, size: np.ndarray, file_starts: list[int]) -> list[tuple[int, int]]:
    """Byte ranges that cover the records (sorted by ``phy``), merging records
    less than MAX_GAP apart in the same commit log file."""
    out: list[tuple[int, int]] = []
    file_end = -1
    for at, n in zip(phy.tolist(), size.tolist(), strict=True):
        if out and at < file_end and at - out[-1][1] <= MAX_GAP:
            out[-1] = (out[-1][0], max(out[-1][1], at + n))
            continue
        out.append((at, at + n))
        k = bisect.bisect_right(file_starts, at)
        file_end = file_starts[k] if k < len(file_starts) else 1 << 62
    return out


def _match(msgs: list[MessageExt], p: StoreRange, offsets: np.ndarray) -> bool:
    return (len(msgs) == offsets.size and all(
        m.queue_offset == o and m.queue_id == p.queue_id and m.topic == p.topic
        for m, o in zip(msgs, offsets.tolist(), strict=True)))


def _one_by_one(pieces: list, p: StoreRange, offsets: np.ndarray, fail: bool) -> list[MessageExt]:
    out = []
    for piece, off in zip(pieces, offsets.tolist(), strict=True):
        try:
            got = decode_messages(bytes(piece), p.broker) if piece is not None else []
        except MessageDecodeError:
            got = []
        if len(got) == 1 and _match(got, p, np.array([off])):
            out.append(got[0])
            continue
        text = (f"rmq: {p.topic}@{p.broker}#{p.queue_id} offset {off}: the consume queue entry "
                f"points at a commit log record that is missing or does not match it")
        if fail:
            raise DataLossError(text + " (set failOnDataLoss=false to skip such entries)")
        log.warning("%s: skipped", text)
    return out
