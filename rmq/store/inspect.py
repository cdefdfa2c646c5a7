"""``python -m rmq.store.inspect STORE_DIR``: print and validate a store.

Reads the files read-only (no lock, works on a live or a copied store):
commit log files (names, sizes, every record with its CRC, queue offsets per
topic/queue), consume queues (every entry must point at a record of the same
topic, queue, size and queue offset), index headers, checkpoint and abort.
A store whose commit log is DLedger's (4.9.8 with ``enableDLegerCommitLog``:
``dledger-<selfId>/data`` and ``/index``) is read entry by entry instead: each
entry header and index unit is checked and the message inside each body is
read as a commit-log record at ``entry pos + 48``.
Exit status: 0 valid, 1 corruption found, 2 not a store / bad arguments.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field
from typing import NamedTuple

from rmq.common import message as mc
from rmq.common.properties import ConfigError, load_properties
from rmq.store import message_codec as codec
from rmq.store.consume_queue import FILLER_SIZE

_ENTRY = struct.Struct(">qiq")
_CHECKPOINT = struct.Struct(">qqq")
_INDEX_HEADER = struct.Struct(">qqqqii")
# DLedger 0.3.1.2's files, read here from their format as the commit log and consume-queue
# files are, independently of the code that writes them: an entry header
# (magic size index term pos channel chainCrc bodyCrc bodySize, then the body), the
# 32-byte index unit (magic pos size index term), and the blank that ends a data file
_DL_HEADER = struct.Struct(">iiqqqiiii")
_DL_BODY_OFFSET = _DL_HEADER.size  # 48
_DL_INDEX_UNIT = struct.Struct(">iqiqq")
_DL_MAGIC = 1
_DL_BLANK_MAGIC = -1


class _DLedgerEntry(NamedTuple):
    magic: int
    size: int
    index: int
    term: int
    pos: int


def _dledger_entry(view, offset: int) -> _DLedgerEntry | None:
    """The entry header at ``offset``; None unless a whole entry lies there."""
    if len(view) - offset < _DL_BODY_OFFSET:
        return None
    magic, size, index, term, pos, _channel, _chain, _crc, body_size = \
        _DL_HEADER.unpack_from(view, offset)
    if body_size < 0 or body_size + _DL_BODY_OFFSET != size or offset + size > len(view):
        return None
    return _DLedgerEntry(magic, size, index, term, pos)


@dataclass
class Report:
    commit_log_files: list[str] = field(default_factory=list)
    commit_log_file_size: int = 0
    min_offset: int = 0
    max_offset: int = 0
    messages: int = 0
    queues: dict[str, dict] = field(default_factory=dict)
    consume_queues: dict[str, dict] = field(default_factory=dict)
    index_files: list[dict] = field(default_factory=list)
    checkpoint: dict | None = None
    abort_present: bool = False
    dledger: dict | None = None  # selfId, entries, indexes, terms and committed index
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _map(path: str):
    size = os.path.getsize(path)
    if size == 0:
        return None
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)


def _numbered(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []


def _bad_record(rep: Report, view, start: int, pos: int, r: tuple, fsize: int) -> None:
    """A bad record followed by a valid one is corruption in the middle; one
    that is not is the torn tail of a write cut by a crash (recovery ends the
    log there and later appends overwrite it)."""
    what = "CRC error" if r[0] == codec.SCAN_CRC_ERROR else "corrupt record (size mismatch)"
    nxt = pos + r[1]
    if 0 < r[1] and nxt < fsize and codec.scan_record(view, nxt, fsize, False)[0] in (codec.SCAN_MESSAGE,
                                                                                        codec.SCAN_BLANK):
        rep.errors.append(f"{what} at physical offset {start + pos}, valid records follow")
    else:
        rep.warnings.append(f"{what} at physical offset {start + pos} at the end of the data "
                            "(a write cut short by a crash; recovery ends the log there)")


def _account(rep: Report, records: dict[int, tuple], next_qoff: dict[tuple[str, int], int],
             r: tuple, at: int) -> None:
    """Count one scanned message found at physical offset ``at``: its queue
    offset must follow the previous one of its queue."""
    _, size, topic, qid, qoff, phy, sys_flag = r[:7]
    if phy != at:
        rep.errors.append(f"record at {at} says physical offset {phy}")
    tx = sys_flag & mc.TRANSACTION_ROLLBACK_TYPE
    if tx in (mc.TRANSACTION_NOT_TYPE, mc.TRANSACTION_COMMIT_TYPE):
        key = (topic, qid)
        expect = next_qoff.get(key)
        if expect is not None and qoff != expect:
            rep.errors.append(f"{topic}/{qid}: queue offset {qoff} at {phy}, expected {expect}")
        next_qoff[key] = qoff + 1
        q = rep.queues.setdefault(f"{topic}/{qid}", {"messages": 0, "bytes": 0, "first": qoff})
        q["messages"] += 1
        q["bytes"] += size
        q["last"] = qoff
        records[phy] = (topic, qid, qoff, size)
    rep.messages += 1


def _scan_commit_log(root: str, rep: Report, check_crc: bool) -> dict[int, tuple]:
    """Walk every record; returns phy offset -> (topic, queue id, queue offset, size)."""
    d = os.path.join(root, "commitlog")
    names = _numbered(d)
    rep.commit_log_files = names
    records: dict[int, tuple] = {}
    if not names:
        return records
    sizes = {os.path.getsize(os.path.join(d, n)) for n in names}
    if len(sizes) != 1:
        rep.errors.append(f"commit log files have different sizes: {sorted(sizes)}")
        return records
    fsize = rep.commit_log_file_size = sizes.pop()
    rep.min_offset = int(names[0])
    for a, b in zip(names, names[1:], strict=False):
        if int(b) - int(a) != fsize:
            rep.errors.append(f"commit log files {a} and {b} are not contiguous")
    next_qoff: dict[tuple[str, int], int] = {}
    ended = False
    end_offset = rep.min_offset
    for name in names:
        start = int(name)
        mm = _map(os.path.join(d, name))
        view = memoryview(mm)
        try:
            if ended:
                if codec.scan_record(view, 0, fsize, False)[0] != codec.SCAN_END:
                    rep.errors.append(f"commit log file {name} has data after the end of valid data at {end_offset}")
                continue
            pos = 0
            while True:
                r = codec.scan_record(view, pos, fsize, check_crc)
                st = r[0]
                if st == codec.SCAN_MESSAGE:
                    _account(rep, records, next_qoff, r, start + pos)
                    pos += r[1]
                elif st == codec.SCAN_BLANK:
                    if r[1] != fsize - pos:
                        rep.errors.append(f"blank record at {start + pos} has length {r[1]}, expected {fsize - pos}")
                    pos = fsize
                    break
                else:
                    if st in (codec.SCAN_CRC_ERROR, codec.SCAN_SIZE_MISMATCH):
                        _bad_record(rep, view, start, pos, r, fsize)
                    ended = True
                    break
            end_offset = start + pos
        finally:
            view.release()
            mm.close()
    rep.max_offset = end_offset
    return records


def _dledger_dir(root: str) -> str | None:
    """The ``dledger-<selfId>`` directory of a DLedger store, if any."""
    found = sorted(n for n in os.listdir(root) if n.startswith("dledger-")
                   and os.path.isdir(os.path.join(root, n, "data")))
    return os.path.join(root, found[0]) if found else None


def _scan_dledger(ddir: str, rep: Report, check_crc: bool) -> dict[int, tuple]:
    """Walk every DLedger entry and the message in it; phy -> (topic, queue, qoff, size)."""
    data = os.path.join(ddir, "data")
    names = _numbered(data)
    rep.commit_log_files = names
    info: dict = {"selfId": os.path.basename(ddir)[len("dledger-"):], "entries": 0,
                  "beginIndex": -1, "endIndex": -1, "lastTerm": -1}
    rep.dledger = info
    records: dict[int, tuple] = {}
    _read_dledger_meta(ddir, info)
    if not names:
        return records
    fsize = rep.commit_log_file_size = os.path.getsize(os.path.join(data, names[0]))
    rep.min_offset = rep.max_offset = int(names[0])
    units = _index_units(os.path.join(ddir, "index"))
    next_qoff: dict[tuple[str, int], int] = {}
    for name in names:
        start = int(name)
        mm = _map(os.path.join(data, name))
        view = memoryview(mm) if mm is not None else memoryview(b"")
        try:
            pos = 0
            while pos + 8 <= len(view):
                if int.from_bytes(view[pos:pos + 4], "big", signed=True) == _DL_BLANK_MAGIC:
                    pos = fsize
                    break
                entry = _dledger_entry(view, pos)
                if entry is None or entry.size <= _DL_BODY_OFFSET or entry.magic != _DL_MAGIC:
                    break
                _check_entry(rep, info, units, entry, start + pos)
                r = codec.scan_record(view, pos + _DL_BODY_OFFSET, pos + entry.size, check_crc)
                if r[0] == codec.SCAN_MESSAGE and r[1] == entry.size - _DL_BODY_OFFSET:
                    _account(rep, records, next_qoff, r, start + pos + _DL_BODY_OFFSET)
                else:
                    rep.errors.append(f"entry {entry.index} at {start + pos} holds no whole message")
                pos += entry.size
            rep.max_offset = start + pos
            if pos < fsize and name != names[-1]:
                rep.errors.append(f"DLedger data file {name} ends at {pos} without a blank")
        finally:
            view.release()
            if mm is not None:
                mm.close()
    if info["endIndex"] >= 0 and units is not None and len(units) > info["endIndex"] + 1:
        rep.warnings.append(f"DLedger index has {len(units) - info['endIndex'] - 1} unit(s) past "
                            "the last entry (recovery truncates them)")
    return records


def _check_entry(rep: Report, info: dict, units: list | None, entry: _DLedgerEntry, at: int) -> None:
    if entry.pos != at:
        rep.errors.append(f"DLedger entry {entry.index} at {at} says pos {entry.pos}")
    if info["endIndex"] >= 0 and entry.index != info["endIndex"] + 1:
        rep.errors.append(f"DLedger entry {entry.index} at {at} follows {info['endIndex']}")
    if entry.term < info["lastTerm"]:
        rep.errors.append(f"DLedger entry {entry.index} has term {entry.term} after "
                          f"{info['lastTerm']}")
    if units is not None:
        k = entry.index - units[0][3] if units else -1
        unit = units[k] if 0 <= k < len(units) else None
        if unit != (entry.magic, at, entry.size, entry.index, entry.term):
            rep.errors.append(f"DLedger index unit of entry {entry.index} is {unit}")
    if info["beginIndex"] < 0:
        info["beginIndex"] = entry.index
    info["endIndex"], info["lastTerm"] = entry.index, entry.term
    info["entries"] += 1


def _index_units(d: str) -> list[tuple] | None:
    """Every written DLedger index unit, in order (None without an index)."""
    names = _numbered(d)
    if not names:
        return None
    units: list[tuple] = []
    for name in names:
        mm = _map(os.path.join(d, name))
        if mm is None:
            continue
        try:
            size = _DL_INDEX_UNIT.size
            for k in range(0, len(mm) - size + 1, size):
                unit = _DL_INDEX_UNIT.unpack_from(mm, k)
                if unit[0] != _DL_MAGIC:
                    return units
                units.append(unit)
        finally:
            mm.close()
    return units


def _read_dledger_meta(ddir: str, info: dict) -> None:
    for file, keys in (("checkpoint", ("committedIndex", "endIndex")),
                       ("currterm", ("currTerm", "voteLeader"))):
        try:
            props = load_properties(os.path.join(ddir, file))
        except ConfigError:
            continue
        for key in keys:
            if key in props:
                info[key if key != "endIndex" else "checkpointEndIndex"] = props[key]


def _scan_consume_queues(root: str, rep: Report, records: dict[int, tuple]) -> None:
    base = os.path.join(root, "consumequeue")
    if not os.path.isdir(base):
        return
    for topic in sorted(os.listdir(base)):
        for qdir in _numbered(os.path.join(base, topic)):
            d = os.path.join(base, topic, qdir)
            names = _numbered(d)
            info = {"files": len(names), "entries": 0, "min": None, "max": 0}
            rep.consume_queues[f"{topic}/{qdir}"] = info
            done = False
            for name in names:
                mm = _map(os.path.join(d, name))
                if mm is None:
                    continue
                try:
                    for j, (off, size, _tags) in enumerate(_ENTRY.iter_unpack(mm[: len(mm) - len(mm) % 20])):
                        if off < 0 or size <= 0:
                            done = True
                            break
                        logical = (int(name) + j * 20) // 20
                        info["max"] = logical + 1
                        if size == FILLER_SIZE:
                            continue
                        if info["min"] is None:
                            info["min"] = logical
                        info["entries"] += 1
                        if off < rep.min_offset:
                            continue  # points at deleted commit log data
                        rec = records.get(off)
                        if rec is None:
                            if off + size <= rep.max_offset:
                                rep.errors.append(f"consume queue {topic}/{qdir} entry {logical} points at {off}, "
                                                  "where no record starts")
                            else:
                                rep.warnings.append(f"consume queue {topic}/{qdir} entry {logical} is beyond the "
                                                    "commit log end (recovery truncates it)")
                        elif rec != (topic, int(qdir), logical, size):
                            rep.errors.append(f"consume queue {topic}/{qdir} entry {logical} does not match the "
                                              f"record at {off}: {rec}")
                finally:
                    mm.close()
                if done:
                    break
    for key, q in rep.queues.items():
        cq = rep.consume_queues.get(key)
        if cq is None or cq["max"] < q["last"] + 1:
            rep.warnings.append(f"consume queue {key} is behind the commit log (dispatch rebuilds it at start)")


def _read_meta(root: str, rep: Report) -> None:
    cp = os.path.join(root, "checkpoint")
    if os.path.exists(cp):
        with open(cp, "rb") as f:
            data = f.read(24)
        if len(data) == 24:
            p, lg, ix = _CHECKPOINT.unpack(data)
            rep.checkpoint = {"physicMsgTimestamp": p, "logicsMsgTimestamp": lg, "indexMsgTimestamp": ix}
        else:
            rep.errors.append("checkpoint file is shorter than 24 bytes")
    rep.abort_present = os.path.exists(os.path.join(root, "abort"))
    idir = os.path.join(root, "index")
    for name in _numbered(idir):
        with open(os.path.join(idir, name), "rb") as f:
            data = f.read(40)
        if len(data) < 40:
            rep.errors.append(f"index file {name} is truncated")
            continue
        bt, et, bp, ep, slots, count = _INDEX_HEADER.unpack(data)
        rep.index_files.append({"name": name, "beginTimestamp": bt, "endTimestamp": et, "beginPhyOffset": bp,
                                "endPhyOffset": ep, "hashSlotCount": slots, "indexCount": count})


def inspect_store(root: str, check_crc: bool = True) -> Report:
    rep = Report()
    ddir = _dledger_dir(root)
    records = _scan_dledger(ddir, rep, check_crc) if ddir is not None and \
        not _numbered(os.path.join(root, "commitlog")) else _scan_commit_log(root, rep, check_crc)
    _scan_consume_queues(root, rep, records)
    _read_meta(root, rep)
    return rep


def _print(rep: Report, out) -> None:
    w = out.write
    w(f"commit log: {len(rep.commit_log_files)} file(s) of {rep.commit_log_file_size} bytes, "
      f"offsets [{rep.min_offset}, {rep.max_offset}), {rep.messages} record(s)\n")
    if rep.dledger is not None:
        w("DLedger: " + ", ".join(f"{k}={v}" for k, v in rep.dledger.items()) + "\n")
    if rep.checkpoint:
        w("checkpoint: " + ", ".join(f"{k}={v}" for k, v in rep.checkpoint.items()) + "\n")
    w(f"abort file: {'present (last shutdown was not clean)' if rep.abort_present else 'absent'}\n")
    w(f"index files: {len(rep.index_files)}" + "".join(
        f"\n  {f['name']} entries={max(0, f['indexCount'] - 1)} phy=[{f['beginPhyOffset']}, {f['endPhyOffset']}]"
        for f in rep.index_files) + "\n")
    w(f"{'queue':<40} {'messages':>10} {'bytes':>12} {'cq entries':>10} {'cq min':>8} {'cq max':>8}\n")
    for key in sorted(set(rep.queues) | set(rep.consume_queues)):
        q = rep.queues.get(key, {})
        cq = rep.consume_queues.get(key, {})
        w(f"{key:<40} {q.get('messages', 0):>10} {q.get('bytes', 0):>12} {cq.get('entries', 0):>10} "
          f"{cq.get('min') if cq.get('min') is not None else '-':>8} {cq.get('max', '-'):>8}\n")
    for m in rep.warnings:
        w(f"WARNING: {m}\n")
    for m in rep.errors:
        w(f"ERROR: {m}\n")
    w("store is valid\n" if not rep.errors else f"store is CORRUPT: {len(rep.errors)} error(s)\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rmq.store.inspect", description=__doc__.splitlines()[0])
    ap.add_argument("store_dir")
    ap.add_argument("--no-crc", action="store_true", help="skip body CRC checks")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.store_dir):
        print(f"not a directory: {args.store_dir}", file=sys.stderr)
        return 2
    if not os.path.isdir(os.path.join(args.store_dir, "commitlog")) and \
            not os.path.isdir(os.path.join(args.store_dir, "consumequeue")) and \
            _dledger_dir(args.store_dir) is None:
        print(f"not a store directory (no commitlog/, consumequeue/ or dledger-*/): {args.store_dir}",
              file=sys.stderr)
        return 2
    rep = inspect_store(args.store_dir, not args.no_crc)
    if args.json:
        print(json.dumps(rep.__dict__, indent=1, default=str))
    else:
        _print(rep, sys.stdout)
    return 1 if rep.errors else 0


if __name__ == "__main__":
    sys.exit(main())

