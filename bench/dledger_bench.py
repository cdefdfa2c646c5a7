"""DLedger append throughput and CPU per append: a three-node group beside a
single node (a group of one: no replication), each node its own process on
loopback, 1 KiB appends from ``--inflight`` concurrent appenders through the
DLedger client, in one run.

    .venv/bin/python -m bench.dledger_bench [--appends N] [--inflight 1,16,64]

CPU per append is the node processes' user+system time (psutil) over the
acknowledged appends: the leader's, and the followers' together.  The client
runs on the same two cores, so the rate is the group's and the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time

import psutil

from bench.modes import ROOT
from rmq.dledger.client import DLedgerClient

TIMING = ["--heartbeat-ms", "1000", "--data-file-size", str(64 * 1024 * 1024),
          "--index-file-size", str(32 * 1024 * 1024)]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_group(tmp: str, size: int) -> tuple[str, dict[str, subprocess.Popen]]:
    ids = [f"n{i}" for i in range(size)]
    ports = {i: free_port() for i in ids}
    peers = ";".join(f"{i}-127.0.0.1:{ports[i]}" for i in ids)
    procs = {}
    for i in ids:
        procs[i] = subprocess.Popen(
            [sys.executable, "-m", "rmq.dledger.startup", "--group", "g", "--id", i,
             "--peers", peers, "--store-base-dir", tmp, *TIMING],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return peers, procs


def cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


async def measure(peers: str, procs: dict[str, subprocess.Popen], appends: int,
                  inflight: int) -> tuple[float, float, float]:
    client = DLedgerClient("g", peers, timeout_ms=5000)
    try:
        deadline = time.monotonic() + 30
        while (leader := await client.find_leader()) is None:
            if time.monotonic() > deadline:
                raise SystemExit("no leader elected")
            await asyncio.sleep(0.1)
        for _ in range(200):  # warm up
            await client.append(os.urandom(1024))
        body = os.urandom(1024)
        before = {i: cpu(p.pid) for i, p in procs.items()}
        done = 0

        async def appender(count: int) -> None:
            nonlocal done
            for _ in range(count):
                await client.append(body)
                done += 1

        start = time.perf_counter()
        await asyncio.gather(*(appender(appends // inflight) for _ in range(inflight)))
        elapsed = time.perf_counter() - start
        used = {i: cpu(p.pid) - before[i] for i, p in procs.items()}
        leader_us = used[leader] / done * 1e6
        followers_us = sum(v for i, v in used.items() if i != leader) / done * 1e6
        return done / elapsed, leader_us, followers_us
    finally:
        await client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=20000)
    ap.add_argument("--inflight", default="1,16,64")
    args = ap.parse_args()
    levels = [int(x) for x in args.inflight.split(",")]
    print(f"{'group':<10} {'in flight':>9} {'appends/s':>10} {'leader CPU/append':>18} "
          f"{'followers CPU/append':>21}")
    for size in (1, 3):
        with tempfile.TemporaryDirectory() as tmp:
            peers, procs = start_group(tmp, size)
            try:
                time.sleep(1.0)
                for inflight in levels:
                    count = args.appends if inflight > 1 else max(1, args.appends // 4)
                    rate, leader_us, followers_us = asyncio.run(
                        measure(peers, procs, count, inflight))
                    label = "single" if size == 1 else "3 nodes"
                    print(f"{label:<10} {inflight:>9} {rate:>10,.0f} {leader_us:>15.1f} µs "
                          f"{followers_us:>18.1f} µs", flush=True)
            finally:
                for p in procs.values():
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    main()
