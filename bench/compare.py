"""The same send load against rmq and a reference RocketMQ-compatible broker, in one run.

    .venv/bin/python -m bench.compare --ref-namesrv HOST:PORT --ref-broker HOST:PORT
        [--ref-pid PID] [--inflight 1,16,64] [--size 1024] [--duration 5] [--sdk] [--no-pin]

For each in-flight count it runs bench/producer.py's load (a separate load
process; by default plain SEND_MESSAGE_V2 frames on one connection, ``--sdk``
for rmq's client) against the reference broker and then against an rmq broker
it starts itself (compiled build, ASYNC_FLUSH, fresh store on free loopback
ports), and prints the table of issue-style figures: msgs/s, broker CPU per
message and average RT of each.  The reference's CPU is read only when its
process runs on this machine and ``--ref-pid`` names it.  Both brokers must
already have (or auto-create) ``--topic``; the script creates it with
UPDATE_AND_CREATE_TOPIC on both.

Unless ``--no-pin``, each broker is pinned to CPU 0 and the load to CPU 1
(sched_setaffinity; on a one-CPU machine nothing is pinned), so the broker's
CPU per message is not blurred by the load generator competing for its core.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from bench.cluster import create_topic
from bench.producer import bench_cluster, create_bench_topic, run_worker
from bench.results import git_commit, markdown_table

PRODUCER = "bench.producer"


def pin(pid: int | None, cpu: int) -> bool:
    """Pin ``pid`` (and its threads) to one CPU when the machine has two or more."""
    if pid is None or (os.cpu_count() or 1) < 2:
        return False
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})
    except (OSError, ValueError):
        return False
    return True


def load_args(args: argparse.Namespace, namesrv: str, broker: str, pid: int | None,
              inflight: int) -> list[str]:
    out = ["-n", namesrv, "--inflight", str(inflight), "--size", str(args.size),
           "--topic", args.topic, "--queues", str(args.queues), "--duration", str(args.duration)]
    if pid is not None:
        out += ["--broker-pid", str(pid)]
    if not args.sdk:
        out += ["--raw", "--broker", broker]
    return out


def run_load(args: argparse.Namespace, namesrv: str, broker: str, pid: int | None,
             inflight: int) -> dict:
    env = {"RMQ_LOAD_CPU": "1"} if not args.no_pin and (os.cpu_count() or 1) >= 2 else {}
    return run_worker(PRODUCER, load_args(args, namesrv, broker, pid, inflight), env)


def table(rows: list[dict]) -> str:
    def cpu(v):
        return f"{v:.1f} µs" if v is not None else "n/a"
    return markdown_table(
        ["in flight", "reference msgs/s", "rmq msgs/s", "reference broker CPU/msg",
         "rmq broker CPU/msg", "avg RT reference / rmq"],
        [[r["inflight"], f"{r['ref']['msgs_per_s']:,.0f}", f"{r['rmq']['msgs_per_s']:,.0f}",
          cpu(r["ref"].get("broker_cpu_us_per_msg")), cpu(r["rmq"].get("broker_cpu_us_per_msg")),
          f"{r['ref']['avg_rt_ms']:.3f} / {r['rmq']['avg_rt_ms']:.3f} ms"] for r in rows])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref-namesrv", required=True, help="the reference's name server")
    ap.add_argument("--ref-broker", required=True, help="the reference broker's address")
    ap.add_argument("--ref-pid", type=int, help="the reference broker's pid (for its CPU)")
    ap.add_argument("--inflight", default="1,16,64", help="comma-separated in-flight counts")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--topic", default="BenchTopic")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--sdk", action="store_true", help="rmq's client instead of raw frames")
    ap.add_argument("--no-pin", action="store_true", help="leave CPU placement to the kernel")
    args = ap.parse_args(argv)
    try:
        args.inflights = [int(x) for x in args.inflight.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--inflight: comma-separated whole numbers, not {args.inflight!r}")
    if not args.inflights or min(args.inflights) < 1:
        ap.error("--inflight: at least one count, each >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cluster = bench_cluster(False, {"flushDiskType": "ASYNC_FLUSH"})
    try:
        create_bench_topic(cluster, args.topic, args.queues)
        asyncio.run(create_topic(args.ref_broker, args.ref_namesrv, args.topic, args.queues))
        if not args.no_pin:
            pin(cluster.broker.pid, 0)
            pin(args.ref_pid, 0)
        rows = []
        for n in args.inflights:
            print(f"== {n} in flight: reference {args.ref_broker}", flush=True)
            ref = run_load(args, args.ref_namesrv, args.ref_broker, args.ref_pid, n)
            print(f"== {n} in flight: rmq {cluster.broker_addr}", flush=True)
            mine = run_load(args, cluster.namesrv_addr, cluster.broker_addr, cluster.broker.pid, n)
            rows.append({"inflight": n, "ref": ref, "rmq": mine})
    finally:
        cluster.stop()
    print(f"\n{args.size} B sends, {args.duration:g} s each, "
          f"{'rmq client' if args.sdk else 'raw frames'}, commit {git_commit()}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
