"""What the Prometheus exporter costs the broker (metricsExporterType=PROM).

1. Counting: the broker counts every put and pull in ``BrokerStats`` whether or
   not the exporter is on; with it on, puts also fill the message-size
   histogram and each request is timed for rocketmq_rpc_latency.  Measured per message as the broker calls it (one ``inc_put`` per
   stored message, one ``inc_get`` per pull of 32, ``fold`` once a second),
   exporter off and on, in one run.
2. A scrape: the text of ``--series`` topic/group series (messages and bytes
   in and out, the size histogram) made by the broker's collector, from the
   statistics to the bytes, written by rmq's ``render`` and, for comparison in
   the same run, by prometheus_client's ``generate_latest`` (same bytes).

    .venv/bin/python -m bench.metrics_cost [--messages N] [--series N]
"""

from __future__ import annotations

import argparse
import time
from time import perf_counter

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from rmq.broker.metrics import BrokerCollector
from rmq.broker.stats import BrokerStats
from rmq.common.metrics_text import render
from rmq.remoting.rpc_latency import SUCCESS, RpcLatency


def count(messages: int, exporter: bool) -> float:
    """µs of CPU per message for counting ``messages`` puts and their pulls;
    with the exporter on, each single send and each pull is also timed for
    rocketmq_rpc_latency as the remoting service times it (two clock reads
    and a record)."""
    stats = BrokerStats("C")
    latency = None
    if exporter:
        stats.size_histograms = {}
        latency = RpcLatency()
    topics = [f"T{i}" for i in range(8)]
    start = time.process_time()
    for i in range(messages):
        if latency is not None:
            began = perf_counter()
        stats.inc_put(topics[i & 7], i & 3, 1, 1100)
        if latency is not None:
            latency.record_since(began, 310, 0, SUCCESS)
        if i & 31 == 31:
            stats.inc_get("g", topics[i & 7], i & 3, 32, 35200, 0, False)
            if latency is not None:
                latency.record_since(began, 11, 0, SUCCESS)
        if i & 0x3FFF == 0:
            stats.fold()
    stats.fold()
    return (time.process_time() - start) / messages * 1e6


class _Traffic(Collector):
    """The collector's per-topic/group families over a prepared BrokerStats."""

    def __init__(self, stats: BrokerStats) -> None:
        self.stats = stats
        self.inner = BrokerCollector.__new__(BrokerCollector)
        self.inner.base = ("C", "broker", "broker-a")

    def collect(self):
        return self.inner._traffic(self.stats)


def scrape(series: int) -> tuple[float, int]:
    stats = BrokerStats("C")
    stats.size_histograms = {}
    for i in range(series):
        topic = f"Topic{i // 4}"
        stats.inc_put(topic, 0, 1, 1000)
        stats.inc_get(f"group{i % 4}", topic, 0, 1, 1000)
    stats.fold()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Traffic(stats))
    reference = generate_latest(registry)
    best = {"render": float("inf"), "generate_latest": float("inf")}
    for _ in range(5):
        for name, writer in (("render", render), ("generate_latest", generate_latest)):
            start = time.perf_counter()
            text = writer(registry)
            best[name] = min(best[name], time.perf_counter() - start)
            assert text == reference, f"{name} differs from prometheus_client"
    return best["render"] * 1000, best["generate_latest"] * 1000, len(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--series", type=int, default=10_000, help="topic/group pairs")
    args = ap.parse_args()
    off = min(count(args.messages, False) for _ in range(3))
    on = min(count(args.messages, True) for _ in range(3))
    print(f"counting per message: exporter off {off:.3f} µs, on {on:.3f} µs, "
          f"added {on - off:.3f} µs")
    ms, reference_ms, size = scrape(args.series)
    print(f"scrape of {args.series} topic/group series ({args.series // 4} topics): "
          f"{ms:.1f} ms (prometheus_client's generate_latest: {reference_ms:.1f} ms), "
          f"{size / 1024:.0f} KiB of text")


if __name__ == "__main__":
    main()
