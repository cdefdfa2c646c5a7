"""What an idle name server and broker cost: CPU per second and wake-ups.

Starts ``rmq-namesrv`` and ``rmq-broker`` on free loopback ports with the
defaults (``bench.cluster``), lets them settle, then measures for
``--seconds`` with nothing sent: each process's CPU in milliseconds a second,
the broker's per thread, and its voluntary context switches a second (each
one a sleep ended by a timer or a wake-up: what a periodic task costs beyond
its own work).  A broker run as a service sits idle most of its life; its
timers are the whole of its cost then.

    .venv/bin/python -m bench.idle_cpu [--seconds 20] [--settle 5]
"""

from __future__ import annotations

import argparse
import os
import time

from bench.cluster import Cluster
from bench.cpu import ThreadCpuWindow, cpu_seconds


def wakeups(pid: int) -> int:
    """Voluntary context switches of every thread of ``pid`` so far."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except OSError:  # a thread that ended meanwhile
            pass
    return total


def measure(cluster: Cluster, seconds: float) -> tuple[dict[str, float], dict[str, float], float]:
    """(ms a second per process, ms a second per broker thread, broker
    wake-ups a second) over ``seconds``."""
    pids = {"broker": cluster.broker_pid, "namesrv": cluster.namesrv.pid}
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    threads = ThreadCpuWindow(cluster.broker_pid)
    threads.begin()
    woke = wakeups(cluster.broker_pid)
    time.sleep(seconds)
    woke = wakeups(cluster.broker_pid) - woke
    per_thread = threads.end()
    procs = {name: (cpu_seconds(pid) - before[name]) * 1000 / seconds
             for name, pid in pids.items()}
    return procs, {k: v * 1000 / seconds for k, v in per_thread.items() if v > 0}, \
        woke / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds after the broker's port answers before measuring")
    args = ap.parse_args()
    with Cluster() as cluster:
        time.sleep(args.settle)
        procs, threads, woke = measure(cluster, args.seconds)
    print(f"idle for {args.seconds:g} s, nothing sent")
    print("| process | CPU ms/s |\n|---|---|")
    for name, ms in procs.items():
        print(f"| {name} | {ms:.2f} |")
    print("broker threads (ms/s): " + ", ".join(
        f"{name} {ms:.2f}" for name, ms in sorted(threads.items(), key=lambda kv: -kv[1])))
    print(f"broker wake-ups/s: {woke:.0f}")


if __name__ == "__main__":
    main()
