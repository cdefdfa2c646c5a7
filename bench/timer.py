"""Timer messages: how fast the broker takes them into the wheel, and how late
it delivers them when 10,000 fall due every second.

    .venv/bin/python -m bench.timer [--enqueue 50000] [--rate 10000] [--seconds 5]
                                    [--precision 1000] [--json]

One fresh rmq broker (compiled build, ASYNC_FLUSH) with ``timerPrecisionMs``:

* ``enqueue``: ``--enqueue`` timers due in 10 minutes are sent in batches of
  100 (one due time per batch); the figure is timers per second from the first
  send until the broker's ``rocketmq_timer_enqueue_total`` counts them all
  (sending included, so it is a lower bound of the wheel's own rate);
* ``delivery``: ``--rate`` timers due per second for ``--seconds`` seconds, one
  batch per due millisecond (``TIMER_DELIVER_MS``), sent before the first is
  due; every delivered message is read back and its lag is its store time
  under the real topic minus its TIMER_DELIVER_MS.  Percentiles in ms; the
  aim is 0 <= lag <= precision.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import urllib.request

from bench.cluster import Cluster, create_topic
from bench.stats import percentile
from rmq.client import (
    ClientConfig,
    LitePullConsumer,
    Message,
    MessageQueue,
    Producer,
    PullStatus,
)
from rmq.testing.procs import free_port


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def scrape_total(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{"))


async def send_batches(p: Producer, topic: str, plan: list[tuple[int, int]], window: int = 64) -> None:
    """``plan``: (due ms, count) per batch, sent ``window`` at a time."""
    async def one(due: int, count: int) -> None:
        await p.send_batch([Message(topic, b"t" * 64, deliver_time_ms=due) for _ in range(count)])
    for i in range(0, len(plan), window):
        await asyncio.gather(*(one(d, c) for d, c in plan[i:i + window]))


async def enqueue_rate(c: Cluster, prom: int, n: int) -> dict:
    await create_topic(c.broker_addr, c.namesrv_addr, "TimerEnq", 1)
    cc = ClientConfig(namesrv_addr=c.namesrv_addr, client_ip="127.0.0.1", instance_name="enq")
    due = now_ms() + 600_000
    t0 = time.monotonic()
    async with Producer("pg_timer_enq", client_config=cc) as p:
        await send_batches(p, "TimerEnq", [(due + i, 100) for i in range(n // 100)])
    sent_s = time.monotonic() - t0
    while scrape_total(prom, "rocketmq_timer_enqueue_total") < n:
        await asyncio.sleep(0.05)
    total_s = time.monotonic() - t0
    return {"timers": n, "send_s": round(sent_s, 2), "enqueued_s": round(total_s, 2),
            "enqueue_msgs_per_s": round(n / total_s)}


async def delivery_lag(c: Cluster, rate: int, seconds: int) -> dict:
    await create_topic(c.broker_addr, c.namesrv_addr, "TimerLag", 1)
    cc = ClientConfig(namesrv_addr=c.namesrv_addr, client_ip="127.0.0.1", instance_name="lag")
    n = rate * seconds
    per_ms = max(1, rate // 1000)
    start = now_ms() + 5000 + n // 5  # time to send them all first
    plan = [(start + i, per_ms) for i in range(n // per_ms)]
    async with Producer("pg_timer_lag", client_config=cc) as p:
        await send_batches(p, "TimerLag", plan)
    assert now_ms() < start, "sending took longer than planned: lower --rate or --seconds"
    await asyncio.sleep((start + seconds * 1000 + 3000 - now_ms()) / 1000)
    reader = LitePullConsumer("cg_timer_lag", client_config=cc, auto_commit=False)
    lags: list[int] = []
    mq = MessageQueue("TimerLag", "broker-bench", 0)
    offset = 0
    try:
        while len(lags) < n:
            r = await reader.pull(mq, offset, 32)
            if r.status is not PullStatus.FOUND:
                break
            for m in r.messages:
                lags.append(m.store_timestamp - int(m.properties["TIMER_DELIVER_MS"]))
            offset = r.next_begin_offset
    finally:
        await reader.instance.remoting.close()
    lags.sort()
    return {"due_per_s": rate, "seconds": seconds, "delivered": len(lags), "expected": n,
            "early": sum(1 for x in lags if x < 0),
            "lag_ms": {q: percentile(lags, q) for q in (0, 50, 90, 99, 99.9, 100)}}


async def main_async(args) -> dict:
    prom = free_port()
    conf = {"timerPrecisionMs": str(args.precision), "metricsExporterType": "PROM",
            "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": str(prom)}
    with Cluster(broker_conf=conf) as c:
        return {"precision_ms": args.precision,
                "enqueue": await enqueue_rate(c, prom, args.enqueue),
                "delivery": await delivery_lag(c, args.rate, args.seconds)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--enqueue", type=int, default=50_000)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--precision", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    doc = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(doc, indent=1))
        return
    e, d = doc["enqueue"], doc["delivery"]
    print(f"timerPrecisionMs={doc['precision_ms']}")
    print(f"enqueue: {e['timers']} timers in {e['enqueued_s']} s (sent in {e['send_s']} s): "
          f"{e['enqueue_msgs_per_s']} msgs/s")
    q = d["lag_ms"]
    print(f"delivery at {d['due_per_s']}/s for {d['seconds']} s: {d['delivered']}/{d['expected']} "
          f"delivered, {d['early']} early; lag ms p0 {q[0]} p50 {q[50]} p90 {q[90]} p99 {q[99]} "
          f"p99.9 {q[99.9]} max {q[100]}")


if __name__ == "__main__":
    main()
