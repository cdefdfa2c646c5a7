"""What one SYNC_FLUSH flush costs this machine's disk, with no broker in the way.

    .venv/bin/python -m bench.flush_floor [--sizes 1,4,16,64,256] [--threads 1,2]
                                          [--flushes 200] [--no-pin] [--json]

Group commit answers every send a flush covered at once, so a SYNC_FLUSH
broker with N sends in flight stores at most about N per flush, and the
flushes it can make in a second set its rate.  On the filesystem the
benchmarks' stores live on (``bench/out``), pinned to CPU 0 unless
``--no-pin``, this writes records into a file made as a flushed commit log
is (written, synced, mapped shared) and times ``msync`` of what each
write dirtied:

* by size: ``--flushes`` rounds of one write of each ``--sizes`` KiB and its
  msync -- whether a flush costs by the byte or by the call;
* by threads: ``--threads`` threads doing the same with the first size,
  each in its own part of the file -- whether flushes in parallel make more
  of them in a second (the device's cache flush may serialise them).

Prints the median and 90th percentile µs per msync and the flushes per
second of each case.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.cpu import pin_to_broker_cpus
from bench.modes import OUT_DIR

KiB = 1024
PAGE = mmap.PAGESIZE


def _flushes(mm: mmap.mmap, base: int, kib: int, count: int, out: list[float]) -> None:
    """``count`` rounds of one ``kib`` KiB write at the end of what is written
    (from ``base``) and the msync of the pages it touched; µs into ``out``."""
    record = b"r" * (kib * KiB)
    pos = base
    for _ in range(count):
        mm[pos:pos + len(record)] = record
        start = pos - pos % PAGE
        pos += len(record)
        t0 = time.perf_counter()
        mm.flush(start, -(-(pos - start) // PAGE) * PAGE)
        out.append((time.perf_counter() - t0) * 1e6)


def _case(mm: mmap.mmap, region: int, kib: int, threads: int, count: int) -> dict:
    times: list[list[float]] = [[] for _ in range(threads)]
    workers = [threading.Thread(target=_flushes, args=(mm, i * region, kib, count, times[i]))
               for i in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    every = sorted(t for per in times for t in per)
    return {"kib": kib, "threads": threads, "median_us": statistics.median(every),
            "p90_us": every[int(len(every) * 0.9)], "flushes_per_s": len(every) / elapsed}


def measure(sizes: list[int], threads: list[int], count: int) -> list[dict]:
    """Every case, in one file sized for the largest of them."""
    region = max(max(sizes) * KiB * count, PAGE)
    size = region * max(threads)
    size = -(-size // PAGE) * PAGE
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    cases = []
    with tempfile.TemporaryDirectory(prefix="flush-floor-", dir=OUT_DIR) as tmp:
        fd = os.open(Path(tmp) / "00000000000000000000", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            zeros = bytes(1 << 20)
            for pos in range(0, size, len(zeros)):  # blocks written and on disk,
                os.pwrite(fd, zeros[:size - pos], pos)  # as a flushed file's are
            os.fsync(fd)
            with mmap.mmap(fd, size) as mm:
                for kib in sizes:
                    cases.append(_case(mm, region, kib, 1, count))
                for n in threads:
                    if n > 1:
                        cases.append(_case(mm, region, sizes[0], n, count))
        finally:
            os.close(fd)
    return cases


def _positive_list(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v]
    if not values or min(values) <= 0:
        raise ValueError(text)
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16,64,256", help="KiB written per flush")
    ap.add_argument("--threads", default="1,2", help="flushing threads (first size)")
    ap.add_argument("--flushes", type=int, default=200, help="flushes per case and thread")
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin to CPU 0")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    try:
        sizes, threads = _positive_list(args.sizes), _positive_list(args.threads)
        if args.flushes <= 0:
            raise ValueError(args.flushes)
    except ValueError as exc:
        print(f"flush_floor.py: sizes, threads and flushes must be positive ({exc})",
              file=sys.stderr)
        return 2
    if args.pin:
        pin_to_broker_cpus()
    cases = measure(sizes, threads, args.flushes)
    if args.json:
        print(json.dumps({"cases": cases}))
        return 0
    print("KiB | threads | median µs/msync | p90 µs | flushes/s")
    for c in cases:
        print(f"{c['kib']:>4} | {c['threads']:>7} | {c['median_us']:>15,.0f} | "
              f"{c['p90_us']:>6,.0f} | {c['flushes_per_s']:>9,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
