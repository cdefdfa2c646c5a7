"""Copy topics into Parquet, partitioned by day (UTC, of the store time) and topic.

    python -m spark.pipelines.topic_to_parquet --namesrv 127.0.0.1:9876 \\
        --topic Orders,Payments --out /data/rmq --checkpoint /data/rmq-checkpoint

Every message lands in ``OUT/date=YYYY-MM-DD/topic=T/`` exactly once, also
when the job is stopped and started again with the same checkpoint: Spark's
file sink commits each micro-batch with the source offsets it read.
"""

from __future__ import annotations

import sys

from pyspark.sql import functions as F

from spark.pipelines import common
from spark.pipelines.common import source, start, stream_parser


def parser():
    p = stream_parser("topic_to_parquet", __doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (any Hadoop URI)")
    return p


def run(spark, args):
    """Start the job on ``spark``; returns the running query."""
    rows = source(spark, args).withColumn("date", F.to_date("storeTimestamp"))
    writer = rows.writeStream.format("parquet").option("path", args.out).partitionBy("date", "topic")
    return start(writer, args)


def main(argv: list[str] | None = None) -> int:
    return common.main(parser(), run, "rmq-topic-to-parquet", argv)


if __name__ == "__main__":
    sys.exit(main())
