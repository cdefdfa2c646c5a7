"""Producer benchmark (in the spirit of RocketMQ's ``benchmark/producer.sh``).

Sends ``--size``-byte messages (or batches of ``--batch``) with ``--inflight``
synchronous sends outstanding through ``rmq.client.Producer`` for
``--duration`` seconds, printing per-second TPS, average and p99 RT and
failures, then the totals with the broker's CPU per message (psutil on the
broker pid) and the client's own CPU per message.

``--raw`` sends plain SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request frames on
one bare connection (``RawRequests``/``RawConnection`` of bench/raw.py: no
client SDK, no route lookups, no per-message id, header or command objects) so that the broker's CPU per message is measured with as
little client work as possible sharing the cores.  ``--flush SYNC_FLUSH``
starts the broker with that flush disk type (group commit).

Without ``-n`` it starts its own rmq-namesrv and rmq-broker on free loopback
ports with a fresh store, once with the compiled extensions and once with the
pure-Python twins (broker and client both run with RMQ_NO_EXTENSIONS=1), and
prints both with the compiled/twin ratio.  For single-message sends it then
repeats the run at half the measured peak rate (``--rate``) to report the p99
there.

    .venv/bin/python -m bench.producer [--inflight 64] [--size 1024] [--batch 1]
        [--topic BenchTopic] [--queues 8] [--duration 5] [--mode both|compiled|twin]
        [--raw] [--flush ASYNC_FLUSH|SYNC_FLUSH] [-n host:port [--broker host:port]] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from array import array

from bench.cluster import Cluster, create_topic
from bench.modes import ROOT, mode_env
from bench.raw import RawConnection, RawRequests
from rmq.client.message import Message


# ---- cluster ---------------------------------------------------------------------
def bench_cluster(twin: bool, broker_conf: dict[str, str] | None = None) -> Cluster:
    """A started throw-away ``bench.cluster.Cluster`` running the twins or the
    compiled build."""
    return Cluster(env=mode_env("twin" if twin else "compiled"),
                   broker_conf=dict(broker_conf or {})).start()


def create_bench_topic(cluster: Cluster, topic: str, queues: int) -> None:
    asyncio.run(create_topic(cluster.broker_addr, cluster.namesrv_addr, topic, queues))


def run_worker(module: str, args: list[str], env: dict) -> dict:
    """Run the load in a subprocess (so the twins can be forced) and read the
    JSON summary it prints last; its per-second lines pass through."""
    full_env = {**os.environ, **env}
    proc = subprocess.run([sys.executable, "-m", module, "--worker", *args], env=full_env,
                          stdout=subprocess.PIPE, text=True, check=False, cwd=ROOT)
    lines = proc.stdout.strip().splitlines()
    for line in lines[:-1]:
        print("   ", line, flush=True)
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker failed with exit code {proc.returncode}")
    return json.loads(lines[-1])


def cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def own_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def percentile(values: array, p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


# ---- load ------------------------------------------------------------------------
class RawSender:
    """``bench.raw.RawRequests`` on one ``RawConnection``: the broker's work
    with as little client work as possible sharing the cores."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.addr = args.broker
        self.conn: RawConnection | None = None
        self.requests = RawRequests(args.topic, b"x" * args.size, args.batch, args.queues,
                                    broker_name="broker-a")

    async def send(self, n: int) -> None:
        if self.conn is None:
            self.conn = await RawConnection.open(self.addr)
        resp = await self.conn.send(*self.requests.frame(n))
        if resp.code != 0:
            raise RuntimeError(f"send failed: {resp.code} {resp.remark}")

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


class SdkSender:
    """Sends through ``rmq.client.Producer`` (what applications use)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from rmq.client import ClientConfig, Producer

        self.producer = Producer("bench_producer", client_config=ClientConfig(
            namesrv_addr=args.namesrv, client_ip="127.0.0.1", instance_name="bench"))
        self.topic = args.topic
        self.body = b"x" * args.size
        self.batch = args.batch
        self.queues: list = []

    async def start(self) -> None:
        await self.producer.start()
        self.queues = await self.producer.fetch_publish_queues(self.topic)

    async def send(self, n: int) -> None:
        mq = self.queues[n % len(self.queues)]
        if self.batch == 1:
            await self.producer.send(Message(self.topic, self.body), mq=mq)
        else:
            await self.producer.send_batch([Message(self.topic, self.body)
                                            for _ in range(self.batch)], mq=mq)

    async def close(self) -> None:
        await self.producer.shutdown()


async def produce(args: argparse.Namespace) -> dict:
    if args.raw:
        sender_obj: RawSender | SdkSender = RawSender(args)
    else:
        sender_obj = SdkSender(args)
        await sender_obj.start()
    rts = array("d")
    state = {"ok": 0, "failed": 0, "msgs": 0}
    per_msg = args.batch
    stop_at = time.monotonic() + args.duration
    interval = args.inflight / args.rate * per_msg if args.rate else 0.0
    send = sender_obj.send

    async def sender(i: int) -> None:
        # senders start spread over one interval, so a rate-limited run is a
        # steady stream of sends rather than bursts of all of them at once
        next_at = time.monotonic() + i * interval / args.inflight
        if interval:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        n = i
        while time.monotonic() < stop_at:
            begin = time.perf_counter()
            try:
                await send(n)
                state["ok"] += 1
                state["msgs"] += per_msg
            except Exception:
                state["failed"] += 1
            n += args.inflight
            rts.append((time.perf_counter() - begin) * 1000)
            if interval:
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)

    async def ticker() -> None:
        last_msgs, last_n = 0, 0
        while time.monotonic() < stop_at:
            await asyncio.sleep(1.0)
            window = rts[last_n:]
            last_n = len(rts)
            avg = sum(window) / len(window) if window else 0.0
            print(f"TPS: {state['msgs'] - last_msgs:8d} msgs/s  avg RT {avg:6.3f} ms  "
                  f"p99 RT {percentile(window, 0.99):6.3f} ms  failed {state['failed']}",
                  flush=True)
            last_msgs = state["msgs"]

    broker_cpu0, own_cpu0, t0 = cpu_seconds(args.broker_pid), own_cpu_seconds(), time.monotonic()
    await asyncio.gather(ticker(), *(sender(i) for i in range(args.inflight)))
    elapsed = time.monotonic() - t0
    broker_cpu, own_cpu = cpu_seconds(args.broker_pid) - broker_cpu0, own_cpu_seconds() - own_cpu0
    await sender_obj.close()
    msgs = max(state["msgs"], 1)
    return {
        "msgs_per_s": state["msgs"] / elapsed, "mb_per_s": state["msgs"] * args.size / elapsed / 1e6,
        "requests": state["ok"], "failed": state["failed"],
        "avg_rt_ms": sum(rts) / len(rts) if rts else 0.0,
        "p99_rt_ms": percentile(rts, 0.99),
        "broker_cpu_us_per_msg": broker_cpu / msgs * 1e6 if args.broker_pid else None,
        "client_cpu_us_per_msg": own_cpu / msgs * 1e6,
    }


# ---- orchestration ----------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--namesrv", help="use this name server instead of starting one")
    ap.add_argument("--inflight", type=int, default=64, help="sends outstanding at once")
    ap.add_argument("--size", type=int, default=1024, help="message body bytes")
    ap.add_argument("--batch", type=int, default=1, help="messages per send (batch send)")
    ap.add_argument("--topic", default="BenchTopic")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=0.0, help="target msgs/s (0 = as fast as possible)")
    ap.add_argument("--raw", action="store_true",
                    help="plain remoting requests instead of the client SDK")
    ap.add_argument("--broker", help="broker address for --raw with -n (default: started one)")
    ap.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                    help="flushDiskType of the broker this script starts")
    ap.add_argument("--quick", action="store_true", help="short run: 2 s, no half-rate run")
    ap.add_argument("--mode", choices=("both", "compiled", "twin"), default="both")
    ap.add_argument("--no-half-rate", action="store_true",
                    help="skip the p99 run at half the peak rate")
    ap.add_argument("--broker-pid", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    return ap.parse_args(argv)


def worker_args(args: argparse.Namespace, namesrv: str, pid: int | None, rate: float,
                broker: str | None) -> list[str]:
    out = ["-n", namesrv, "--queues", str(args.queues), "--inflight", str(args.inflight), "--size", str(args.size),
           "--batch", str(args.batch), "--topic", args.topic, "--duration", str(args.duration),
           "--rate", str(rate)]
    if pid is not None:
        out += ["--broker-pid", str(pid)]
    if args.raw:
        out += ["--raw", "--broker", broker or ""]
    return out


def describe(name: str, r: dict) -> str:
    broker = r.get("broker_cpu_us_per_msg")
    broker_text = f"{broker:7.2f}" if broker is not None else "    n/a"
    return (f"{name:<22} {r['msgs_per_s']:>11,.0f} {r['mb_per_s']:>8.1f} {r['avg_rt_ms']:>8.3f} "
            f"{r['p99_rt_ms']:>8.3f} {r['failed']:>7d} {broker_text:>10} "
            f"{r['client_cpu_us_per_msg']:>10.2f}")


HEADER = (f"{'run':<22} {'msgs/s':>11} {'MB/s':>8} {'avg ms':>8} {'p99 ms':>8} {'failed':>7} "
          f"{'broker us':>10} {'client us':>10}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.duration = min(args.duration, 2.0)
        args.no_half_rate = True
    if args.raw and args.namesrv and not args.broker:
        raise SystemExit("--raw with -n needs --broker host:port")
    if args.worker:
        import uvloop  # as every rmq entry point and the suite's load process

        if os.environ.get("RMQ_LOAD_CPU"):  # bench/compare.py keeps the load off the broker's core
            os.sched_setaffinity(0, {int(os.environ["RMQ_LOAD_CPU"])})
        print(json.dumps(uvloop.run(produce(args))), flush=True)
        return 0
    script = "bench.producer"
    modes = ["compiled", "twin"] if args.mode == "both" else [args.mode]
    results: dict[str, dict] = {}
    for mode in modes:
        env = {"RMQ_NO_EXTENSIONS": "1"} if mode == "twin" else {}
        if args.namesrv:
            cluster = None
            namesrv, pid, broker = args.namesrv, args.broker_pid, args.broker
        else:
            cluster = bench_cluster(mode == "twin", {"flushDiskType": args.flush})
            create_bench_topic(cluster, args.topic, args.queues)
            namesrv, pid, broker = cluster.namesrv_addr, cluster.broker.pid, cluster.broker_addr
        try:
            print(f"== {mode}: {args.inflight} in flight, {args.size} B x {args.batch}"
                  f"{', raw' if args.raw else ''}, {args.flush}", flush=True)
            peak = run_worker(script, worker_args(args, namesrv, pid, args.rate, broker), env)
            results[mode] = peak
            if args.batch == 1 and not args.rate and not args.no_half_rate:
                half = peak["msgs_per_s"] / 2
                print(f"== {mode}: at half the peak rate ({half:,.0f} msgs/s)", flush=True)
                results[f"{mode} @half"] = run_worker(
                    script, worker_args(args, namesrv, pid, half, broker), env)
        finally:
            if cluster is not None:
                cluster.stop()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(HEADER)
    for name, r in results.items():
        print(describe(name, r))
    if "compiled" in results and "twin" in results and results["twin"]["msgs_per_s"]:
        print(f"compiled/twin throughput ratio: "
              f"{results['compiled']['msgs_per_s'] / results['twin']['msgs_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
