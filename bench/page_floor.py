"""What a commit log's new pages cost this machine, by the way they are made.

    .venv/bin/python -m bench.page_floor [--mib 256] [--rounds 3] [--pause 6] [--no-pin] [--json]

A commit log grows into page-cache pages nobody used before, and on this
machine kind (a virtual machine whose host takes freed guest memory back:
free page reporting) such pages cost the writer's CPU whatever the writer
is.  How the page comes into the page cache matters too.  With no broker in
the way, on the filesystem the benchmarks' stores live on (``bench/out``),
pinned to CPU 0 (the broker's CPU in ``bench/run.py``) unless ``--no-pin``,
each way writes ``--mib`` MiB of 1 KiB records into a new file, created
reserved (``posix_fallocate``) and mapped shared, as rmq creates a commit-log
file:

* ``fault``: the records straight into the mapping -- every new page is a
  write fault (what an appender pays with nothing done ahead);
* ``populate``: ``madvise(MADV_POPULATE_WRITE)`` of the range first, then the
  records (rmq with ``rmqZeroFillAheadEnable=false``: the allocation thread
  does this ahead of the appends);
* ``zero_pwrite``: zeros written with ``pwrite`` 512 KiB at a time first,
  then the records (rmq's default: the appender keeps zeros ahead of itself);
* ``resident``: the records once more over pages already there (the copy
  and the loop alone).

Each figure is CPU time of this process (user + system) per 1 KiB, the
preparation and the records together, the median of ``--rounds`` (a pause
of ``--pause`` s before each way, so that memory the last way freed is the
host's again).  ``bench/run.py``'s broker CPU per message includes what its
commit log pays here.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.cpu import pin_to_broker_cpus
from bench.modes import OUT_DIR

RECORD = 1024
ZERO_CHUNK = 512 * 1024
MADV_POPULATE_WRITE = 23  # Linux 5.14+
REPORTING = Path("/sys/module/page_reporting/parameters")
WAYS = ("fault", "populate", "zero_pwrite", "resident")


def _records(mm: mmap.mmap, size: int) -> None:
    record = b"r" * RECORD
    for pos in range(0, size, RECORD):
        mm[pos:pos + RECORD] = record


def _prepare(way: str, mm: mmap.mmap, fd: int, size: int) -> None:
    if way == "populate":
        mm.madvise(MADV_POPULATE_WRITE, 0, size)
    elif way == "zero_pwrite":
        zeros = bytes(ZERO_CHUNK)
        for pos in range(0, size, ZERO_CHUNK):
            os.pwrite(fd, zeros, pos)
    elif way == "resident":
        _records(mm, size)


def one_way(way: str, size: int) -> float:
    """µs of CPU per KiB for writing ``size`` bytes of records the way ``way``."""
    with tempfile.TemporaryDirectory(prefix="page-floor-", dir=OUT_DIR) as tmp:
        fd = os.open(Path(tmp) / "00000000000000000000", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, size)
            os.posix_fallocate(fd, 0, size)
            with mmap.mmap(fd, size) as mm:
                t0 = time.process_time()
                if way == "resident":
                    _prepare(way, mm, fd, size)  # not counted: the pages are made here
                    t0 = time.process_time()
                else:
                    _prepare(way, mm, fd, size)
                _records(mm, size)
                return (time.process_time() - t0) / (size / 1024) * 1e6
        finally:
            os.close(fd)


def reporting() -> dict[str, str]:
    """The kernel's free page reporting settings, when it has them."""
    if not REPORTING.is_dir():
        return {}
    return {p.name: p.read_text().strip() for p in sorted(REPORTING.iterdir()) if p.is_file()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="MiB written per way and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=6.0, help="seconds before each way")
    ap.add_argument("--no-pin", dest="pin", action="store_false")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if args.mib < 1 or args.rounds < 1 or args.pause < 0:
        print("page_floor: --mib and --rounds must be at least 1, --pause not negative",
              file=sys.stderr)
        return 2
    if args.pin:
        pin_to_broker_cpus()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[float]] = {w: [] for w in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            time.sleep(args.pause)
            runs[way].append(one_way(way, args.mib << 20))
    med = {w: statistics.median(v) for w, v in runs.items()}
    result = {"mib": args.mib, "rounds": args.rounds, "us_per_kib": med, "runs": runs,
              "page_reporting": reporting()}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"CPU µs per 1 KiB record, new pages made and written ({args.mib} MiB a way, "
          f"median of {args.rounds}; all runs in brackets):")
    for w in WAYS:
        print(f"  {w:12s} {med[w]:6.2f}  [{', '.join(f'{x:.2f}' for x in runs[w])}]")
    if result["page_reporting"]:
        print("free page reporting: " + ", ".join(f"{k}={v}" for k, v in
                                                  result["page_reporting"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
