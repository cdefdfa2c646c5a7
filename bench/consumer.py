"""Consumer benchmark (in the spirit of RocketMQ's ``benchmark/consumer.sh``).

Fills a topic with ``--messages`` messages of ``--size`` bytes (batch sends),
then reads every queue from offset 0 with ``rmq.client.LitePullConsumer``
pulls (``--inflight`` queues pulled at once, ``--max-nums`` per pull) while the
data is in the page cache; prints per-second msgs/s, pull RT and the broker's
and the client's CPU per message.  Without ``-n`` it starts its own name
server and broker, compiled and then with the twins (RMQ_NO_EXTENSIONS=1).

    .venv/bin/python -m bench.consumer [--messages 200000] [--size 1024]
        [--queues 8] [--max-nums 32] [--mode both|compiled|twin] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from array import array

from bench.producer import (
    bench_cluster,
    cpu_seconds,
    create_bench_topic,
    own_cpu_seconds,
    percentile,
    run_worker,
)


async def fill(args: argparse.Namespace) -> None:
    from rmq.client import ClientConfig, Message, Producer

    async with Producer("bench_fill", client_config=ClientConfig(
            namesrv_addr=args.namesrv, client_ip="127.0.0.1", instance_name="fill")) as p:
        queues = await p.fetch_publish_queues(args.topic)
        body = b"x" * args.size
        per_batch = max(1, min(256, 3_000_000 // max(args.size, 1)))
        sent, i = 0, 0
        while sent < args.messages:
            n = min(per_batch, args.messages - sent)
            await p.send_batch([Message(args.topic, body) for _ in range(n)],
                               mq=queues[i % len(queues)])
            sent += n
            i += 1


async def consume(args: argparse.Namespace) -> dict:
    from rmq.client import ClientConfig, LitePullConsumer
    from rmq.client.message import PullStatus

    consumer = LitePullConsumer("bench_consumer", client_config=ClientConfig(
        namesrv_addr=args.namesrv, client_ip="127.0.0.1", instance_name="bench-c"))
    await consumer.start()
    queues = await consumer.fetch_queues(args.topic)
    state = {"msgs": 0, "bytes": 0, "pulls": 0}
    rts = array("d")
    stop_at = time.monotonic() + args.duration

    async def reader(mq) -> None:
        offset = 0
        while time.monotonic() < stop_at:
            begin = time.perf_counter()
            result = await consumer.pull(mq, offset, args.max_nums)
            rts.append((time.perf_counter() - begin) * 1000)
            state["pulls"] += 1
            if result.status is not PullStatus.FOUND:
                return
            offset = result.next_begin_offset
            state["msgs"] += len(result.messages)
            state["bytes"] += sum(len(m.body) for m in result.messages)

    async def ticker(done: asyncio.Event) -> None:
        last = 0
        while not done.is_set():
            try:
                await asyncio.wait_for(done.wait(), 1.0)
            except TimeoutError:
                pass
            print(f"TPS: {state['msgs'] - last:8d} msgs/s  pulls {state['pulls']}", flush=True)
            last = state["msgs"]

    broker0, own0, t0 = cpu_seconds(args.broker_pid), own_cpu_seconds(), time.monotonic()
    done = asyncio.Event()
    tick = asyncio.ensure_future(ticker(done))
    await asyncio.gather(*(reader(mq) for mq in queues))
    elapsed = time.monotonic() - t0
    done.set()
    await tick
    broker_cpu, own_cpu = cpu_seconds(args.broker_pid) - broker0, own_cpu_seconds() - own0
    await consumer.shutdown()
    msgs = max(state["msgs"], 1)
    return {"messages": state["msgs"], "msgs_per_s": state["msgs"] / elapsed,
            "mb_per_s": state["bytes"] / elapsed / 1e6, "avg_rt_ms": sum(rts) / max(len(rts), 1),
            "p99_rt_ms": percentile(rts, 0.99),
            "broker_cpu_us_per_msg": broker_cpu / msgs * 1e6 if args.broker_pid else None,
            "client_cpu_us_per_msg": own_cpu / msgs * 1e6}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--namesrv", help="use this name server (topic must be filled)")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--topic", default="BenchConsume")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--max-nums", type=int, default=32, help="messages per pull")
    ap.add_argument("--duration", type=float, default=30.0, help="upper bound of the read")
    ap.add_argument("--mode", choices=("both", "compiled", "twin"), default="both")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--broker-pid", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=("fill", "consume"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        import uvloop  # the client's loop, as every rmq entry point runs it

        if args.worker == "fill":
            uvloop.run(fill(args))
            print("{}")
        else:
            print(json.dumps(uvloop.run(consume(args))), flush=True)
        return 0
    script = "bench.consumer"
    modes = ["compiled", "twin"] if args.mode == "both" else [args.mode]
    results = {}
    for mode in modes:
        env = {"RMQ_NO_EXTENSIONS": "1"} if mode == "twin" else {}
        cluster = None
        if args.namesrv:
            namesrv, pid = args.namesrv, args.broker_pid
        else:
            cluster = bench_cluster(mode == "twin")
            create_bench_topic(cluster, args.topic, args.queues)
            namesrv, pid = cluster.namesrv_addr, cluster.broker.pid
        common = ["-n", namesrv, "--messages", str(args.messages), "--size", str(args.size),
                  "--topic", args.topic, "--max-nums", str(args.max_nums),
                  "--duration", str(args.duration)]
        if pid is not None:
            common += ["--broker-pid", str(pid)]
        try:
            if cluster is not None:
                print(f"== {mode}: filling {args.messages} x {args.size} B", flush=True)
                run_worker(script, ["fill", *common], env)
            print(f"== {mode}: consuming", flush=True)
            results[mode] = run_worker(script, ["consume", *common], env)
        finally:
            if cluster is not None:
                cluster.stop()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'run':<10} {'messages':>10} {'msgs/s':>11} {'MB/s':>8} {'pull avg ms':>12} "
          f"{'pull p99 ms':>12} {'broker us':>10} {'client us':>10}")
    for name, r in results.items():
        b = r["broker_cpu_us_per_msg"]
        print(f"{name:<10} {r['messages']:>10,} {r['msgs_per_s']:>11,.0f} {r['mb_per_s']:>8.1f} "
              f"{r['avg_rt_ms']:>12.3f} {r['p99_rt_ms']:>12.3f} "
              f"{(f'{b:.2f}' if b is not None else 'n/a'):>10} {r['client_cpu_us_per_msg']:>10.2f}")
    if len(results) == 2 and results["twin"]["msgs_per_s"]:
        print(f"compiled/twin throughput ratio: "
              f"{results['compiled']['msgs_per_s'] / results['twin']['msgs_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
