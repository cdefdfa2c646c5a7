"""Count a topic's messages per time window and tag, and send the counts to another topic.

    python -m spark.pipelines.windowed_counts --namesrv 127.0.0.1:9876 \\
        --topic Orders --out-topic OrderCounts --window "1 minute" \\
        --checkpoint /data/order-counts-checkpoint

Windows are over the store time, closed once the watermark (the latest store
time seen minus ``--late``) passes them.  Each trigger sends one message per
window and tag that changed (output mode "update"): body = JSON
``{"topic", "tags", "windowStart", "windowEnd", "messages", "bytes"}``, keys =
``<windowStart>|<tags>``, so the last message of a key holds its final count.
"""

from __future__ import annotations

import sys

from pyspark.sql import functions as F

from spark.pipelines import common
from spark.pipelines.common import source, start, stream_parser


def parser():
    p = stream_parser("windowed_counts", __doc__.split("\n\n")[0])
    p.add_argument("--out-topic", required=True, help="topic the counts are sent to")
    p.add_argument("--window", default="1 minute", help="window length (default %(default)s)")
    p.add_argument("--late", default="1 minute",
                   help="how late a message may arrive and still count (default %(default)s)")
    return p


def counts(rows, window: str, late: str):
    """Messages and body bytes per (window, topic, tags), as messages to send."""
    agg = (rows.withWatermark("storeTimestamp", late)
           .groupBy(F.window("storeTimestamp", window).alias("w"), "topic",
                    F.coalesce("tags", F.lit("")).alias("tags"))
           .agg(F.count(F.lit(1)).alias("messages"), F.sum(F.length("body")).alias("bytes")))
    start_text = F.date_format("w.start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    body = F.to_json(F.struct("topic", "tags", start_text.alias("windowStart"),
                              F.date_format("w.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("windowEnd"),
                              "messages", "bytes"))
    return agg.select(body.alias("body"), F.concat_ws("|", start_text, "tags").alias("keys"),
                      F.when(F.col("tags") != "", F.col("tags")).alias("tags"))


def run(spark, args):
    """Start the job on ``spark``; returns the running query.

    Spark's Python data source sinks take append mode only, which would hold
    every window back until the watermark closes it; the changed windows of
    each trigger go out through ``foreachBatch`` and the batch sink instead."""
    out = counts(source(spark, args), args.window, args.late)

    def send(changed, batch_id: int) -> None:
        changed.write.format("rmq").option("namesrv", args.namesrv).option(
            "topic", args.out_topic).mode("append").save()

    return start(out.writeStream.outputMode("update").foreachBatch(send), args)


def main(argv: list[str] | None = None) -> int:
    return common.main(parser(), run, "rmq-windowed-counts", argv)


if __name__ == "__main__":
    sys.exit(main())
