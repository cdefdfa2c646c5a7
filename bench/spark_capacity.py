"""Capacity job throughput: Spark on local[N] versus a plain numpy scan.

    .venv/bin/python -m bench.spark_capacity [--messages 20000000] [--master local[2]]
                                             [--commitlog-file-size BYTES] [--skip-spark]

Generates (once, cached under bench/out/) a store of ``--messages`` messages
with rmq's own store code, then in the same run:

* the numpy baseline: one process reads every consume queue file and every
  commit log file whole and decodes them with the same ``spark.storefmt``
  functions, then aggregates per queue and per minute with numpy;
* the Spark job: ``spark.capacity.run_report`` end to end (listing, decoding
  in executors, aggregation, report files).

It prints consume-queue entries (and commit log records) per second and wall
times for both, and the Spark/numpy wall-time ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from bench.modes import OUT_DIR
from spark import gen_store, storefmt


def ensure_store(root: str, messages: int, cl_size: int) -> None:
    """Generate the store once; a marker file says it is complete."""
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        print(f"using cached store {root}")
        return
    if os.path.exists(root):
        import shutil

        shutil.rmtree(root)
    spec = gen_store.GenSpec(messages=messages, hours=24, batch=128, commitlog_file_size=cl_size,
                             cq_file_size=6_000_000, index_slots=5_000_000, index_entries=20_000_000)
    for t in spec.topics:
        t.body_min, t.body_max = 64, 256
    t0 = time.monotonic()
    gen_store.generate(root, spec, keep_truth=False)
    print(f"generated {messages:,} messages in {time.monotonic() - t0:.1f}s")
    open(marker, "w").close()


def numpy_scan(root: str, cl_size: int) -> dict[str, float]:
    """Single-process scan of the same files with the same decoders."""
    t0 = time.monotonic()
    entries = 0
    queue_counts: dict[tuple[str, int], int] = {}
    cq_root = os.path.join(root, "consumequeue")
    for topic in sorted(os.listdir(cq_root)):
        for qid in sorted(os.listdir(os.path.join(cq_root, topic))):
            for name in sorted(os.listdir(os.path.join(cq_root, topic, qid))):
                start = storefmt.file_start(name)
                data = np.fromfile(os.path.join(cq_root, topic, qid, name), np.uint8)
                ent = storefmt.decode_cq(data, start, 6_000_000)
                entries += ent.phy.size
                queue_counts[(topic, int(qid))] = queue_counts.get((topic, int(qid)), 0) + ent.phy.size
    t_cq = time.monotonic() - t0
    records = 0
    minutes: dict[int, int] = {}
    cl_root = os.path.join(root, "commitlog")
    for name in sorted(os.listdir(cl_root)):
        data = np.fromfile(os.path.join(cl_root, name), np.uint8)
        rec = storefmt.walk_commitlog(data, int(name), cl_size)
        records += rec.pos.size
        m, c = np.unique(rec.fields["storeTimestamp"] // 60000, return_counts=True)
        for k, v in zip(m.tolist(), c.tolist(), strict=True):
            minutes[k] = minutes.get(k, 0) + v
    wall = time.monotonic() - t0
    return {"entries": entries, "records": records, "cq_seconds": t_cq, "wall": wall, "queues": len(queue_counts)}


def spark_run(root: str, master: str, out: str, reader: str) -> dict[str, float]:
    from spark.capacity import run_report
    from spark.job import BrokerInput, make_session
    from spark.report import Options

    t0 = time.monotonic()
    spark = make_session(master, "rmq-capacity-bench", extra={"spark.driver.memory": "6g"})
    t_session = time.monotonic() - t0
    try:
        t1 = time.monotonic()
        tables = run_report(spark, [BrokerInput("bench", root)], {}, Options(), out,
                            lambda msg: print(f"  [spark] {msg}", flush=True), reader)
        wall = time.monotonic() - t1
    finally:
        spark.stop()
    q = tables["queues"]
    return {"entries": int(q["entries"].sum()), "records": int(q["records"].sum()), "wall": wall,
            "session": t_session}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=20_000_000)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--commitlog-file-size", type=int, default=1 << 30)
    p.add_argument("--out", default=str(OUT_DIR))
    p.add_argument("--readers", default="arrow,binaryfile", help="Spark readers to run, comma-separated")
    p.add_argument("--skip-spark", action="store_true")
    args = p.parse_args()
    root = os.path.join(args.out, f"spark-store-{args.messages}-{args.commitlog_file_size}")
    ensure_store(root, args.messages, args.commitlog_file_size)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    print(f"store: {root} ({size / 2**30:.2f} GiB of files)")
    base = numpy_scan(root, args.commitlog_file_size)
    print(f"numpy scan (1 process): {base['entries']:,} CQ entries, {base['records']:,} records, "
          f"wall {base['wall']:.2f}s, {base['entries'] / base['wall']:,.0f} entries/s "
          f"(CQ part {base['cq_seconds']:.2f}s)")
    if args.skip_spark:
        return 0
    status = 0
    for reader in args.readers.split(","):
        sp = spark_run(root, args.master, os.path.join(args.out, f"spark-report-{reader}"), reader)
        print(f"spark {args.master} ({reader} reader): {sp['entries']:,} CQ entries, {sp['records']:,} records, "
              f"wall {sp['wall']:.2f}s (+{sp['session']:.1f}s session start), "
              f"{sp['entries'] / sp['wall']:,.0f} entries/s end to end; "
              f"spark / numpy wall time {sp['wall'] / base['wall']:.2f}x")
        if sp["entries"] != base["entries"] or sp["records"] != base["records"]:
            print("MISMATCH between the Spark job and the numpy scan", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
