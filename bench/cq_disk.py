"""What a broker's consume queues hold on disk under the Java benchmark
Producer's load (``bench.java_frames``: its frames round the 1,024 queues of
``BenchmarkTest``), beside the broker's CPU a message.

    .venv/bin/python -m bench.cq_disk [--seconds 5] [--inflight 16] [--size 1024]
        [--rounds 1]

A consume queue's files are sparse and written within their reserved blocks
(``ConsumeQueue.make_room``).  Each round starts a fresh broker, makes the
queues' files with a priming run (``bench.java_frames.prime_spec``), runs the
measured load, then reads every consume-queue file of the store and prints:

* ``entries``: the entries the files hold (their valid bytes / 20);
* ``on disk``: the blocks the files hold (``st_blocks``);
* ``4.9.8``: what 4.9.8's sparse files would hold for the same entries, the
  pages they were written to (each file's entries rounded up to 4 KiB);
* ``whole``: what the files held when each was reserved whole when made (the
  files times their size), as rmq did before;
* the load's rate and the broker's CPU a message (``bench.load``).
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
from pathlib import Path

from bench.cluster import Cluster
from bench.cpu import LOAD_CPU
from bench.java_frames import load_spec, prime_spec
from bench.load import load_in_subprocess
from bench.modes import mode_env
from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE, cq_valid_bytes
from rmq.store.mapped_file import OS_PAGE_SIZE

MiB = 1024 * 1024


def queue_files(store: Path) -> list[Path]:
    root = store / "consumequeue"
    return sorted(p for p in root.glob("*/*/*") if p.name.isdigit())


def footprint(store: Path) -> dict:
    """The consume-queue files of ``store``: how many, their entries, their
    blocks on disk, 4.9.8's sparse pages for those entries, and their size."""
    files = queue_files(store)
    entries = on_disk = paged = size = 0
    for path in files:
        st = path.stat()
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            valid = cq_valid_bytes(mm, 0, len(mm))  # (reads the pages up to the first hole)
        entries += valid // CQ_STORE_UNIT_SIZE
        on_disk += st.st_blocks * 512
        paged += -(-valid // OS_PAGE_SIZE) * OS_PAGE_SIZE
        size += st.st_size
    return {"files": len(files), "entries": entries, "on_disk": on_disk, "java_498": paged,
            "whole": size}


def one_round(args) -> dict:
    env = mode_env("compiled")
    with Cluster(env=env, pin=True) as cluster:
        prime = prime_spec(cluster.namesrv_addr, cluster.broker_addr, args.prime, args.size)
        load_in_subprocess(prime, env, cpu=LOAD_CPU)
        spec = load_spec(cluster.namesrv_addr, cluster.broker_addr, args.seconds, args.size,
                         args.inflight, broker_pid=cluster.broker_pid)
        r = load_in_subprocess(spec, env, cpu=LOAD_CPU)
        r.update(footprint(cluster.store_dir))
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cq_disk", description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--prime", type=float, default=2.0, help="seconds of the priming run")
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args(argv)
    rows = [one_round(args) for _ in range(args.rounds)]
    print(f"# bench.cq_disk: Java Producer's frames, {args.inflight} in flight, "
          f"{args.size} B, {args.seconds:g} s (+{args.prime:g} s priming), cpus {os.cpu_count()}")
    print("| round | msgs/s | broker CPU µs/msg | files | entries | on disk MiB | "
          "4.9.8 MiB | whole MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        print(f"| {i} | {r.get('msgs_per_s', 0):,.0f} | {r.get('broker_cpu_us_per_msg', 0):.1f} | "
              f"{r['files']:,} | {r['entries']:,} | {r['on_disk'] / MiB:,.1f} | "
              f"{r['java_498'] / MiB:,.1f} | {r['whole'] / MiB:,.1f} |")
    if len(rows) > 1:
        print(f"median broker CPU µs/msg "
              f"{statistics.median(r.get('broker_cpu_us_per_msg', 0) for r in rows):.1f}")
    return 0 if all(r.get("msgs_per_s") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
