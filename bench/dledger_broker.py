"""Send throughput and broker CPU per message of a broker on a three-node
DLedger group beside a single ASYNC_FLUSH master, with the same load in one
run: ``bench/producer.py`` (the rmq client, ``--inflight`` sync sends of
``--size`` bytes) against each; CPU per message is the master's (the
leader's) process CPU, and for the group also its two followers'.  The group
runs twice: with rmq's default (``enableBatchPush=true``: batches of entries
per push) and with 4.9.8's default (``enableBatchPush=false``: one push per
entry); beside each, the master's CPU per message as a multiple of the single
master's.

    .venv/bin/python -m bench.dledger_broker [--inflight 16] [--duration 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.modes import ROOT
from rmq.client.admin import MQAdmin
from rmq.testing.cluster import broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port

NAME = "RaftNode00"


def cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


async def master_and_topic(namesrv: str, ports: dict[str, int], queues: int) -> str:
    admin = MQAdmin(namesrv)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                addr = (await admin.cluster_info()).brokerAddrTable[NAME].brokerAddrs.get(0)
            except Exception:  # noqa: BLE001 - not registered yet
                addr = None
            if addr:
                await admin.create_topic(addr, "BenchTopic", queues, queues)
                await asyncio.sleep(1.0)  # the route reaches the name server
                return addr
            await asyncio.sleep(0.2)
        raise SystemExit("no master elected")
    finally:
        await admin.close()


def produce(namesrv: str, broker: str, pid: int, args) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.producer", "-n", namesrv, "--broker", broker,
         "--broker-pid", str(pid), "--inflight", str(args.inflight), "--size", str(args.size),
         "--duration", str(args.duration), "--mode", "compiled", "--no-half-rate", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=args.duration * 4 + 120)
    if out.returncode != 0:
        raise SystemExit(out.stdout[-2000:] + out.stderr[-2000:])
    return json.loads(out.stdout[out.stdout.index("{"):])["compiled"]


def group(tmp: Path, args, batch_push: bool) -> tuple[dict, float]:
    ns_port = free_port()
    namesrv = start_namesrv(tmp, ns_port)
    ids = ("n0", "n1", "n2")
    ports = {i: free_port(span=4) + 2 for i in ids}
    raft = {i: free_port() for i in ids}
    peers = ";".join(f"{i}-127.0.0.1:{raft[i]}" for i in ids)
    procs = {}
    try:
        for i in ids:
            conf = broker_conf(tmp, ports[i], "enableDLegerCommitLog=true\n"
                               f"dLegerGroup={NAME}\ndLegerPeers={peers}\ndLegerSelfId={i}\n"
                               f"mappedFileSizeCommitLog=268435456\nenableBatchPush={batch_push}\n",
                               name=NAME, store=f"s-{i}")
            procs[i] = RmqProcess("rmq.broker.startup", ["-c", conf, "-n", f"127.0.0.1:{ns_port}"],
                                  tmp / f"{i}.out", env={"ROCKETMQ_HOME": str(tmp)})
            procs[i].start(wait_for_port=ports[i])
        master = asyncio.run(master_and_topic(f"127.0.0.1:{ns_port}", ports, args.queues))
        leader = next(i for i in ids if master.endswith(f":{ports[i]}"))
        followers = [i for i in ids if i != leader]
        before = {i: cpu(procs[i].pid) for i in followers}
        r = produce(f"127.0.0.1:{ns_port}", master, procs[leader].pid, args)
        sent = max(1, r["requests"])
        follower_us = sum(cpu(procs[i].pid) - before[i] for i in followers) / sent * 1e6
        return r, follower_us
    finally:
        for p in procs.values():
            p.kill()
        namesrv.kill()


def single(tmp: Path, args) -> dict:
    ns_port = free_port()
    namesrv = start_namesrv(tmp, ns_port)
    port = free_port(span=4) + 2
    conf = broker_conf(tmp, port, "mappedFileSizeCommitLog=268435456\n", name="single",
                       store="single")
    broker = RmqProcess("rmq.broker.startup", ["-c", conf, "-n", f"127.0.0.1:{ns_port}"],
                        tmp / "single.out", env={"ROCKETMQ_HOME": str(tmp)})
    try:
        broker.start(wait_for_port=port)

        async def topic() -> None:
            admin = MQAdmin(f"127.0.0.1:{ns_port}")
            try:
                await admin.create_topic(f"127.0.0.1:{port}", "BenchTopic", args.queues,
                                         args.queues)
                await asyncio.sleep(1.0)
            finally:
                await admin.close()

        asyncio.run(topic())
        return produce(f"127.0.0.1:{ns_port}", f"127.0.0.1:{port}", broker.pid, args)
    finally:
        broker.kill()
        namesrv.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--queues", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for sub in ("single", "group", "batch"):
            (Path(tmp) / sub).mkdir()
        one = single(Path(tmp) / "single", args)
        three, follower_us = group(Path(tmp) / "group", args, True)
        single_push, single_push_us = group(Path(tmp) / "batch", args, False)
    print(f"{'broker':<30} {'msgs/s':>9} {'avg RT ms':>10} {'master CPU/msg':>15} "
          f"{'x single':>9} {'followers CPU/msg':>18}")
    base = max(one["broker_cpu_us_per_msg"], 1e-9)
    for name, r, extra in (("single master", one, "-"),
                           ("3-node DLedger group", three, f"{follower_us:.1f} µs"),
                           ("  with enableBatchPush=false", single_push,
                            f"{single_push_us:.1f} µs")):
        print(f"{name:<30} {r['msgs_per_s']:>9,.0f} {r['avg_rt_ms']:>10.2f} "
              f"{r['broker_cpu_us_per_msg']:>12.1f} µs {r['broker_cpu_us_per_msg'] / base:>8.1f}x "
              f"{extra:>18}")


if __name__ == "__main__":
    main()
