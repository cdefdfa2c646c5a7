"""Topic administration at scale: topics created one by one, then routed.

Against a fresh name server and broker, ``--topics`` topics of ``--queues``
queues are created one after the other with UPDATE_AND_CREATE_TOPIC (the
next request is sent when the previous one is answered, as ``mqadmin
updateTopic`` in a loop does).  Reported per step of the table's growth
(``--steps``): topics/s, the broker's and the name server's CPU per topic
(user + system of the process); then the route lookup latency
(GET_ROUTEINFO_BY_TOPIC on the name server, p50/p99 over ``--lookups``
random topics) and the broker's memory.

    .venv/bin/python -m bench.topics --topics 10000 [--queues 8] [--steps 4]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time

from bench.cluster import Cluster
from bench.cpu import cpu_seconds, proc_status
from bench.modes import mode_env
from bench.stats import latency_summary
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand


def _create(topic: str, queues: int) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false"})


async def _measure(cluster: Cluster, topics: int, queues: int, steps: int,
                   lookups: int) -> dict:
    client = RemotingClient()
    broker_pid, ns_pid = cluster.broker_pid, cluster.namesrv.pid
    rows = []
    names = [f"BenchAdminTopic_{i:06d}" for i in range(topics)]
    try:
        edges = [topics * (k + 1) // steps for k in range(steps)]
        done = 0
        for edge in edges:
            b0, n0, t0 = cpu_seconds(broker_pid), cpu_seconds(ns_pid), time.perf_counter()
            for name in names[done:edge]:
                resp = await client.invoke(cluster.broker_addr, _create(name, queues), 30_000)
                if resp.code != 0:
                    raise RuntimeError(f"creating {name}: {resp.code} {resp.remark}")
            wall = time.perf_counter() - t0
            n = edge - done
            rows.append({"from": done, "to": edge, "topics_per_s": n / wall,
                         "broker_cpu_ms_per_topic": (cpu_seconds(broker_pid) - b0) / n * 1e3,
                         "namesrv_cpu_ms_per_topic": (cpu_seconds(ns_pid) - n0) / n * 1e3})
            done = edge
        # the last registrations reach the name server asynchronously
        deadline = time.monotonic() + 60
        while True:
            route = await client.invoke(cluster.namesrv_addr, RemotingCommand.create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": names[-1]}), 10_000)
            if route.code == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        rnd = random.Random(1)
        times = []
        for _ in range(lookups):
            t0 = time.perf_counter()
            route = await client.invoke(cluster.namesrv_addr, RemotingCommand.create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": rnd.choice(names)}), 10_000)
            times.append(time.perf_counter() - t0)
            if route.code != 0:
                raise RuntimeError(f"no route: {route.code} {route.remark}")
    finally:
        await client.close()
    total_cpu = sum(r["broker_cpu_ms_per_topic"] * (r["to"] - r["from"]) for r in rows)
    total_wall = sum((r["to"] - r["from"]) / r["topics_per_s"] for r in rows)
    return {"topics": topics, "queues": queues, "steps": rows,
            "topics_per_s": topics / total_wall, "broker_cpu_ms_per_topic": total_cpu / topics,
            "lookup": latency_summary(times),
            "broker_rss_mib": proc_status(broker_pid).get("VmRSS", 0) / 2**20}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--mode", default="compiled", choices=["compiled", "twin"])
    args = ap.parse_args(argv)
    if args.topics < args.steps or args.steps < 1:
        print("topics: --topics must be at least --steps (>= 1)", file=sys.stderr)
        return 2
    with Cluster(env=mode_env(args.mode)) as cluster:
        r = asyncio.run(_measure(cluster, args.topics, args.queues, args.steps, args.lookups))
    print(f"{r['topics']} topics of {r['queues']} queues, one by one: "
          f"{r['topics_per_s']:.0f} topics/s, broker CPU {r['broker_cpu_ms_per_topic']:.2f} ms "
          f"per topic; route lookup p50 {r['lookup']['p50_ms']:.3f} ms "
          f"p99 {r['lookup']['p99_ms']:.3f} ms; broker RSS {r['broker_rss_mib']:.0f} MiB")
    print("| topics | topics/s | broker CPU ms/topic | name server CPU ms/topic |")
    print("|---|---|---|---|")
    for s in r["steps"]:
        print(f"| {s['from']}..{s['to']} | {s['topics_per_s']:.0f} | "
              f"{s['broker_cpu_ms_per_topic']:.2f} | {s['namesrv_cpu_ms_per_topic']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
