"""Throughput of the ``rmq`` Spark data source beside the rmq consumer's own rate.

    .venv/bin/python -m bench.spark_source [--messages 200000] [--size 1024]
        [--queues 8] [--master local[2]] [--repeat 2]

Starts a name server and a broker (compiled), fills a topic with
``--messages`` messages of ``--size`` bytes, then on the same data:

* the rmq consumer: ``bench/consumer.py``'s pull loop (every queue at once,
  32 per pull), in its own process;
* the batch source over the broker's store directory, and over the cluster
  by pulls, each read whole into Spark's ``noop`` sink;
* the streaming source: one ``Trigger.AvailableNow`` query into ``noop``.

Each Spark figure is the best of ``--repeat`` runs (the first also starts
the Python workers).  Prints rows per second and wall seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

from bench.cluster import Cluster, create_topic
from bench.producer import run_worker
from bench.results import git_commit, markdown_table

CONSUMER = "bench.consumer"


def timed(action) -> float:
    t0 = time.monotonic()
    action()
    return time.monotonic() - t0


def spark_figures(args: argparse.Namespace, cluster: Cluster) -> dict[str, float]:
    from spark.job import make_session
    from spark.source import register

    spark = make_session(args.master, "rmq-source-bench", extra={"spark.driver.memory": "2g"})
    register(spark)
    ns = cluster.namesrv_addr

    def store_read() -> None:
        (spark.read.format("rmq").option("topic", args.topic).load(str(cluster.store_dir))
         .write.format("noop").mode("overwrite").save())

    def live_read() -> None:
        (spark.read.format("rmq").option("namesrv", ns).option("topic", args.topic).load()
         .write.format("noop").mode("overwrite").save())

    def stream_read() -> None:
        with tempfile.TemporaryDirectory() as ckpt:
            q = (spark.readStream.format("rmq").option("namesrv", ns).option("topic", args.topic)
                 .option("startingOffsets", "earliest").load().writeStream.format("noop")
                 .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
            q.awaitTermination()

    try:
        return {name: min(timed(fn) for _ in range(args.repeat))
                for name, fn in (("store files", store_read), ("live pulls", live_read),
                                 ("stream", stream_read))}
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--topic", default="BenchSpark")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    with Cluster() as cluster:
        asyncio.run(create_topic(cluster.broker_addr, cluster.namesrv_addr, args.topic, args.queues))
        common = ["-n", cluster.namesrv_addr, "--messages", str(args.messages), "--size",
                  str(args.size), "--topic", args.topic, "--broker-pid", str(cluster.broker_pid)]
        print(f"filling {args.messages:,} x {args.size} B into {args.queues} queues", flush=True)
        run_worker(CONSUMER, ["fill", *common], {})
        consumer = run_worker(CONSUMER, ["consume", *common, "--duration", "120"], {})
        assert consumer["messages"] == args.messages, consumer
        seconds = {"rmq consumer (pulls)": args.messages / consumer["msgs_per_s"]}
        seconds.update(spark_figures(args, cluster))
    rows = [(name, f"{args.messages / s:,.0f}", f"{s:.2f}") for name, s in seconds.items()]
    print(f"\ncommit {git_commit()}, {args.messages:,} messages of {args.size} B, "
          f"{args.queues} queues, Spark {args.master}")
    print(markdown_table(["reader", "rows/s", "seconds"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
