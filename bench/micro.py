"""Hot-path micro-benchmarks: every compiled function against its pure-Python
twin, both imported explicitly in this one process (``compiled_or_none``), so
the ratio is measured under the same load at the same moment.

Each item is timed timeit-style: the statement runs ``number`` times per
repeat (``number`` chosen so a repeat takes ~``--repeat-ms``), best of
``--repeats``; an item takes well under a second for both sides together.
Stateful items (appends, index puts) get fresh buffers for every repeat.
The table gives ns per call, the twin/compiled ratio and whether it reaches
the 5x aim of the performance issue.

An item whose work is mostly one system call (forcing a mapped range to
disk) also times a *floor*: the same kernel work issued bare, with no code of
either build around it.  twin / floor is then the best ratio any compiled side
could reach; when that ceiling is under 5x the item is reported as
kernel-bound instead of yes/no, with the floor beside it.

    .venv/bin/python -m bench.micro [--quick] [--only WORD[,WORD]] [--json PATH] [--dir DIR]

``--json PATH`` writes ``{"compiled": {key: ns}, "twin": {key: ns}, "items": [...]}``
(what ``bench/run.py`` reads for its "micro" section).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rmq._fast import compiled_or_none
from rmq.store.message_codec import SCAN_MESSAGE

AIM = 5.0
KiB = 1024
MiB = 1 << 20

# SEND_MESSAGE_V2 ext fields as the C++ client sends them (13 fields)
V2_EXT = {"a": "please_rename_unique_group_name", "b": "BenchmarkTest", "c": "TBW102",
          "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
          "i": "UNIQ_KEY\x017F0000010B3C18B4AAC2A9F3E10000\x02WAIT\x01true\x02TAGS\x01TagA",
          "j": "0", "k": "false", "m": "false", "n": "broker-a"}
HOST = ("127.0.0.1", 10911)


# --- what one item is ----------------------------------------------------------------
@dataclass(slots=True)
class Timed:
    """One side of an item ready to time: ``stmt`` runs with ``ns`` as globals;
    ``reset`` (if any) runs before every repeat and gets ``number``."""

    stmt: str
    ns: dict
    reset: Callable[[int], None] | None = None


@dataclass(slots=True)
class Item:
    key: str
    op: str
    input: str
    twin: Callable[[int], Timed]
    compiled: Callable[[int], Timed] | None
    note: str = ""
    floor: Callable[[int], Timed] | None = None  # the kernel work alone (see the module doc)


def _fn(module: str, name: str):
    """The compiled function ``name`` of rmq._fast.<module>, or None."""
    mod = compiled_or_none(module)
    return getattr(mod, name) if mod is not None else None


def _pair(twin, comp, factory) -> tuple[Callable[[int], Timed], Callable[[int], Timed] | None]:
    """(twin builder, compiled builder or None) from one factory(fn, number)."""
    return (lambda n: factory(twin, n)), (None if comp is None else (lambda n: factory(comp, n)))


# --- inputs ----------------------------------------------------------------------------
def _records(count: int, body_size: int, topic: bytes = b"BenchTopic", queue_id: int = 3,
             keys: bool = True) -> bytes:
    """``count`` stored records of one topic/queue, consecutive offsets, as a
    commit log would hold them (written by the twin writer)."""
    from rmq.common.message_id import socket_address_bytes
    from rmq.store import message_codec as codec

    host = socket_address_bytes(HOST)
    out = bytearray()
    for i in range(count):
        props = {"TAGS": "TagA", "WAIT": "true"}
        if keys:
            props["UNIQ_KEY"] = f"7F0000010B3C18B4AAC2A9F3{i:08X}"
        p = codec.message_properties_to_string(props).encode()
        size = codec._record_size(0, body_size, len(topic), len(p))
        rec = bytearray(size)
        codec._write_record(rec, 0, queue_id, 0, i, len(out), 0, 1_700_000_000_000, host,
                            1_700_000_000_001, host, 0, 0, bytes([i & 0xFF]) * body_size, topic, p)
        out += rec
    return bytes(out)


def _wire_batch(count: int, size: int) -> bytes:
    """A SEND_BATCH_MESSAGE body of ``count`` messages of ``size`` bytes."""
    from rmq.store.message_codec import message_properties_to_string

    out = bytearray()
    body = b"b" * size
    for i in range(count):
        p = message_properties_to_string({"UNIQ_KEY": f"{i:032X}", "TAGS": "TagA"}).encode()
        n = 20 + len(body) + 2 + len(p)
        out += struct.pack(">iiiii", n, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
    return bytes(out)


# --- the items ---------------------------------------------------------------------------
def remoting_items() -> list[Item]:
    from rmq.remoting import codec

    items = []
    enc_c, dec_c = _fn("remoting_codec", "encode"), _fn("remoting_codec", "decode")
    for stype, name in ((0, "JSON"), (1, "ROCKETMQ")):
        def enc(f, n, s=stype):
            return Timed("f(310, 0, 409, 123456, 0, None, ext, s, 0)", {"f": f, "ext": V2_EXT, "s": s})

        frame = codec.py_encode(310, 0, 409, 123456, 0, None, V2_EXT, stype, 0)[4:]

        def dec(f, n, fr=frame):
            return Timed("f(fr)", {"f": f, "fr": fr})

        items.append(Item(f"remoting_encode_{name.lower()}", "remoting frame encode",
                          f"{name}, SEND_MESSAGE_V2 header (13 fields)",
                          *_pair(codec.py_encode, enc_c, enc)))
        items.append(Item(f"remoting_decode_{name.lower()}", "remoting frame decode",
                          f"{name}, {len(frame) - 4} B V2 header", *_pair(codec.py_decode, dec_c, dec)))
    one = codec.py_encode(310, 0, 409, 123456, 0, None, V2_EXT, 1, KiB) + b"x" * KiB
    many = one * 64

    def frames(f, n):
        return Timed("f(buf, 0, end, 16777216)", {"f": f, "buf": many, "end": len(many)})

    items.append(Item("remoting_decode_frames_64", "decode_frames", "64 ROCKETMQ V2 frames + 1 KiB bodies",
                      *_pair(codec.py_decode_frames, _fn("remoting_codec", "decode_frames"), frames)))
    return items


def store_codec_items() -> list[Item]:
    from rmq.common.message_id import socket_address_bytes
    from rmq.store import message_codec as codec

    host = socket_address_bytes(HOST)
    body = os.urandom(KiB)
    props = codec.message_properties_to_string(
        {"UNIQ_KEY": "7F0000010B3C18B4AAC2A9F3E1000000", "TAGS": "TagA", "WAIT": "true"}).encode()
    items = []

    def single(f, n):
        return Timed("f(buf, 64, 3, 0, 77, 123456, 0, 1700000000000, host, 1700000000001, host, 0, 0, "
                     "body, b'BenchTopic', props)",
                     {"f": f, "buf": bytearray(4 * KiB), "host": host, "body": body, "props": props})

    items.append(Item("record_encode_1k", "store record encode", "1 KiB body, 3 properties",
                      *_pair(codec._write_record, _fn("store_codec", "write_record"), single)))
    wire = _wire_batch(32, KiB)
    total, count = codec._batch_size(wire, 0, 10, 0)

    def batch(f, n):
        return Timed("f(buf, 0, wire, 3, 0, 1700000000000, host, 1700000000001, host, 0, b'BenchTopic', "
                     "b'', 100, 5000, sizes)",
                     {"f": f, "buf": bytearray(total + 64), "wire": wire, "host": host,
                      "sizes": codec.new_sizes_array(count)})

    items.append(Item("record_encode_batch_32x1k", "store batch encode", "32 x 1 KiB SEND_BATCH body",
                      *_pair(codec._write_batch, _fn("store_codec", "write_batch"), batch)))

    def bsize(f, n):
        return Timed("f(wire, 0, 10, 0)", {"f": f, "wire": wire})

    items.append(Item("batch_size_32x1k", "store batch validate (batch_size)", "32 x 1 KiB SEND_BATCH body",
                      *_pair(codec._batch_size, _fn("store_codec", "batch_size"), bsize)))
    log = _records(256, KiB)

    def scan(f, n):
        if _scan_all(f, log, len(log)) != len(log):
            raise RuntimeError("the record scan stopped before the end of the records")
        return Timed("scan_all(f, log, end)", {"f": f, "log": log, "end": len(log), "scan_all": _scan_all})

    items.append(Item("record_scan_256x1k", "record decode/scan (recovery, CRC on)",
                      "256 x 1 KiB records, one scan_record call each",
                      *_pair(codec._scan_record, _fn("store_codec", "scan_record"), scan)))
    return items


def _scan_all(scan, buf, end: int) -> int:
    """What recovery does with a commit-log file: scan record after record."""
    pos = 0
    while pos < end:
        r = scan(buf, pos, end, True)
        if r[0] != SCAN_MESSAGE:
            break
        pos += r[1]
    return pos


def crc_items() -> list[Item]:
    """BODYCRC of a record body.  The twin is zlib.crc32 (C already); the
    compiled side is rmq._fast.crc32 when built."""
    from rmq.store import message_codec as codec

    items = []
    comp = _fn("crc32", "body_crc")
    for size in (KiB, 4 * KiB):
        data = os.urandom(size + 1)[1:]  # an unaligned start, as a body inside a record

        def crc(f, n, d=data):
            return Timed("f(d)", {"f": f, "d": d})

        items.append(Item(f"crc32_{size // KiB}k", "record CRC32 (masked)", f"{size // KiB} KiB body",
                          *_pair(codec.body_crc, comp, crc),
                          note="" if comp else "no compiled module: both sides would be zlib"))
    return items


def cq_items() -> list[Item]:
    from rmq.store import consume_queue as cqm

    items = []

    def write(f, n):
        return Timed("f(buf, 400, 123456789, 1100, 77)", {"f": f, "buf": memoryview(bytearray(6_000_000))})

    items.append(Item("cq_write", "consume-queue entry write", "one 20-byte entry into a mapped-file view",
                      *_pair(cqm._cq_write, _fn("store_cq", "cq_write"), write)))
    entries = 300_000  # a default consume-queue file
    full = bytearray(20 * entries)
    for i in range(entries):
        cqm._ENTRY.pack_into(full, 20 * i, i * 1100, 1100, 77)
    view = memoryview(full)

    def valid(f, n):
        return Timed("f(v, 0, end)", {"f": f, "v": view, "end": len(full)})

    items.append(Item("cq_valid_bytes_300k", "consume-queue valid-bytes scan", "300,000 entries (one file)",
                      *_pair(cqm._cq_valid_bytes, _fn("store_cq", "cq_valid_bytes"), valid)))
    return items


def index_items() -> list[Item]:
    from rmq.store import index as idx

    items = []

    def put(f, n):
        slots, max_index = 50_000, n + 16
        ns = {"f": f, "slots": slots, "mi": max_index}

        def reset(number: int) -> None:
            ns["buf"] = bytearray(idx.index_file_size(slots, max_index))

        reset(n)
        return Timed("f(buf, slots, mi, 1787656574, 123456, 1700000000000)", ns, reset)

    items.append(Item("index_put", "index put", "one key, 50,000 slots",
                      *_pair(idx._index_put, _fn("store_index", "index_put"), put)))

    def khash(f, n):
        return Timed("f(k)", {"f": f, "k": "BenchTopic#7F0000010B3C18B4AAC2A9F3E1000000"})

    items.append(Item("index_key_hash", "index key hash", "topic#UNIQ_KEY (43 chars)",
                      *_pair(idx._key_hash, _fn("store_index", "key_hash"), khash)))
    return items


def dispatch_items() -> list[Item]:
    from rmq.store import dispatch as dm
    from rmq.store import index as idx

    log = _records(32, KiB, queue_id=3)

    def run(f, n):
        slots, max_index = 5_000, 32 * n + 64
        ns = {"f": f, "log": log, "end": len(log), "slots": slots, "mi": max_index}

        def reset(number: int) -> None:
            ns["cq"] = bytearray(20 * 64)
            ns["ib"] = bytearray(idx.index_file_size(slots, max_index))

        reset(n)
        return Timed("f(log, 0, end, b'BenchTopic', 3, cq, 0, 0, -1, ib, slots, mi)", ns, reset)

    return [Item("dispatch_run_32x1k", "bulk dispatch (CQ + index)", "32 x 1 KiB records with UNIQ_KEY",
                 *_pair(dm._dispatch_run, _fn("store_dispatch", "dispatch_run"), run))]


def mapped_items(work_dir: str) -> list[Item]:
    from rmq.store import mapped_file as mfm

    items = []
    file_size = 64 * MiB
    for label, size in (("128 B", 128), ("1 MiB", MiB)):
        data = os.urandom(size)

        def append(f, n, d=data, tag=label):
            path = os.path.join(work_dir, f"{abs(hash((tag, id(f)))):020d}")
            mf = mfm.MappedFile(path, file_size)
            state = {"pos": 0}
            ns = {"f": f, "append_sync": _append_sync, "mf": mf, "d": d, "state": state}
            return Timed("append_sync(f, mf, d, state)", ns)

        def bare(n, d=data, tag=label):
            path = os.path.join(work_dir, f"{abs(hash((tag, 'floor'))):020d}")
            mf = mfm.MappedFile(path, file_size)
            ns = {"v": mf.view, "fd": mf.fd, "d": d, "sync": os.fdatasync, "n": len(d),
                  "cap": file_size - len(d)}

            def reset(number: int) -> None:
                ns["at"] = [0]

            reset(n)
            return Timed("q = at[0]; v[q:q + n] = d; sync(fd); at[0] = q + n if q + n <= cap else 0",
                         ns, reset)

        key = "mmap_append_msync_" + ("128b" if size == 128 else "1m")
        items.append(Item(key, "mmap append + flush of the range", f"{label} appended, then forced",
                          *_pair(mfm._sync_range, _fn("store_mapped", "sync_range"), append),
                          note="the twin fdatasyncs the file, the compiled side msyncs the range",
                          floor=bare))

    def busy(f, n):
        begin = time.time_ns() // 1_000_000 - 500  # a put holding the lock: the clock is read
        return Timed("f(begin, 1000)", {"f": f, "begin": begin})

    items.append(Item("page_cache_busy", "page-cache-busy check", "lock held 500 ms, clock read",
                      *_pair(mfm._page_cache_busy, _fn("store_mapped", "page_cache_busy"), busy)))
    return items


def _append_sync(sync, mf, data, state) -> None:
    """Copy ``data`` into the mapping at the write position and force it
    (wrapping to the start at the end of the file)."""
    pos = state["pos"]
    n = len(data)
    if pos + n > mf.file_size:
        pos = 0
    mf.view[pos:pos + n] = data
    sync(mf.mm, mf.fd, pos, pos + n)
    state["pos"] = pos + n


def send_items() -> list[Item]:
    from rmq.common.message_id import socket_address_bytes
    from rmq.store import message_codec as codec
    from rmq.store import single_put as sp
    from rmq.store.results import msg_id_host_hex

    items = []

    def props(f, n):
        return Timed("f(text, 'DefaultCluster')", {"f": f, "text": V2_EXT["i"]})

    items.append(Item("send_properties", "send_fast fast_send_properties", "UNIQ_KEY, WAIT, TAGS",
                      *_pair(codec._fast_send_properties, _fn("send_fast", "fast_send_properties"),
                             props)))
    host = socket_address_bytes(HOST)
    stored = codec._send_properties(V2_EXT["i"], "DefaultCluster")[1]

    def single(f, n):
        ns = {"f": f, "host": host, "body": os.urandom(KiB), "props": stored, "hh": msg_id_host_hex(HOST),
              "buf": memoryview(bytearray(8 * KiB)), "cq": memoryview(bytearray(200))}
        return Timed("f(buf, 64, 8192, 4194304, 3, 0, 77, 123456, 0, 1700000000000, host, "
                     "1700000000001, host, 0, body, b'BenchTopic', props, cq, 40, 12345, hh)", ns)

    items.append(Item("single_put_1k", "single put (record + CQ entry + msg id)", "1 KiB body",
                      *_pair(sp._append_single, _fn("store_put", "append_single"), single)))
    return items


def client_items() -> list[Item]:
    from rmq.client import codec as cc

    body = _records(32, KiB)

    def dec(f, n):
        return Timed("f(body, 'broker-a', 0, 1000)", {"f": f, "body": body})

    return [Item("client_decode_32x1k", "client pull-body decode", "32 x 1 KiB records",
                 *_pair(cc._decode_messages, _fn("client_codec", "decode_messages"), dec))]


def all_items(work_dir: str) -> list[Item]:
    return (remoting_items() + store_codec_items() + crc_items() + cq_items() + index_items()
            + dispatch_items() + mapped_items(work_dir) + send_items() + client_items())


# --- timing --------------------------------------------------------------------------------
def calibrate(build: Callable[[int], Timed], repeat_s: float) -> tuple[int, float]:
    """A ``number`` of calls filling ~``repeat_s``, and the ns per call seen so far."""
    number = 1
    while True:
        t = _one(build(number), number)
        if t >= repeat_s / 4 or number >= 1 << 24:
            return number, t / number * 1e9
        number = max(number * 2, min(1 << 24, int(number * repeat_s / max(t, 1e-7))))


def _one(timed: Timed, number: int) -> float:
    if timed.reset is not None:
        timed.reset(number)
    return timeit.Timer(timed.stmt, globals=timed.ns).timeit(number)


def time_pair(sides: list[Callable[[int], Timed]], repeat_s: float, repeats: int) -> list[float]:
    """Best ns per call of each side.  The sides' repeats alternate, so a burst
    of load from other processes hits both rather than one."""
    plan = [calibrate(build, repeat_s) for build in sides]
    best = [ns for _, ns in plan]
    for _ in range(repeats - 1):
        for i, (build, (number, _ns)) in enumerate(zip(sides, plan, strict=True)):
            best[i] = min(best[i], _one(build(number), number) / number * 1e9)
    return best


def measure(items: list[Item], repeat_s: float, repeats: int) -> list[dict]:
    rows = []
    for it in items:
        sides = [it.twin] + ([it.compiled] if it.compiled is not None else [])
        times = time_pair(sides + ([it.floor] if it.floor is not None else []), repeat_s, repeats)
        row = {"key": it.key, "op": it.op, "input": it.input, "note": it.note,
               "twin_ns": times[0], "compiled_ns": None, "ratio": None, "meets_5x": None,
               "floor_ns": None, "ceiling": None}
        if it.compiled is not None:
            row["compiled_ns"] = times[1]
            row["ratio"] = row["twin_ns"] / row["compiled_ns"]
            row["meets_5x"] = row["ratio"] >= AIM
        if it.floor is not None:
            row["floor_ns"] = times[-1]
            row["ceiling"] = row["twin_ns"] / row["floor_ns"]
            if _is_kernel_bound(row):
                row["meets_5x"] = None  # no build can: the kernel's time is the figure
        rows.append(row)
        print(_line(row), flush=True)
    return rows


# --- output ----------------------------------------------------------------------------------
HEAD = f"{'operation':<40} {'input':<44} {'twin ns':>11} {'compiled ns':>12} {'ratio':>7}  5x"


def _ns(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def _is_kernel_bound(r: dict) -> bool:
    return r.get("ceiling") is not None and r["ceiling"] < AIM


def verdict(r: dict) -> str:
    """yes / no against the 5x aim, "kernel-bound" when the floor rules it out."""
    if _is_kernel_bound(r):
        return f"kernel-bound (floor {_ns(r['floor_ns'])} ns, ceiling {r['ceiling']:.2f}x)"
    return "-" if r["meets_5x"] is None else ("yes" if r["meets_5x"] else "no")


def kernel_bound(rows: list[dict]) -> list[str]:
    return [r["key"] for r in rows if _is_kernel_bound(r)]


def _line(r: dict) -> str:
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.1f}x"
    met = verdict(r)
    return (f"{r['op'][:40]:<40} {r['input'][:44]:<44} {_ns(r['twin_ns']):>11} "
            f"{_ns(r['compiled_ns']):>12} {ratio:>7}  {met}")


def document(rows: list[dict]) -> dict:
    return {"compiled": {r["key"]: r["compiled_ns"] for r in rows if r["compiled_ns"] is not None},
            "twin": {r["key"]: r["twin_ns"] for r in rows}, "unit": "ns per call",
            "items": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter repeats (smoke run)")
    ap.add_argument("--repeats", type=int, default=7, help="best of N repeats (default 7)")
    ap.add_argument("--repeat-ms", type=float, default=25.0, help="time per repeat (default 25 ms)")
    ap.add_argument("--only", help="comma-separated words: items whose key contains one of them")
    ap.add_argument("--dir", help="where the mapped test files go (default: a temp dir)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.repeat_ms = min(args.repeats, 3), min(args.repeat_ms, 10.0)
    if args.repeats < 1 or args.repeat_ms <= 0:
        ap.error("--repeats and --repeat-ms must be positive")
    work = tempfile.mkdtemp(prefix="rmq-micro-", dir=args.dir)
    try:
        items = all_items(work)
        if args.only:
            words = args.only.split(",")
            items = [it for it in items if any(w in it.key for w in words)]
        print(HEAD)
        rows = measure(items, args.repeat_ms / 1000, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    missing = [r["key"] for r in rows if r["compiled_ns"] is None]
    below = [r["key"] for r in rows if r["meets_5x"] is False]
    bound = kernel_bound(rows)
    code = len(rows) - len(bound)
    print(f"\n{code - len(missing) - len(below)} of {code} code-bound items at >= {AIM:g}x; "
          f"below: {', '.join(below) or 'none'}; no compiled side: {', '.join(missing) or 'none'}; "
          f"kernel-bound: {', '.join(bound) or 'none'}")
    if args.json:
        Path(args.json).write_text(json.dumps(document(rows), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
