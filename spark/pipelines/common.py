"""What the pipelines share: the command line of a streaming job and its session."""

from __future__ import annotations

import argparse
import re
import sys

from spark.job import make_session
from spark.source import register


def stream_parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--namesrv", required=True, help="name server address(es), host:port;host:port")
    p.add_argument("--topic", required=True, help="topic(s) to read, comma-separated")
    p.add_argument("--checkpoint", required=True,
                   help="checkpoint directory (any Hadoop URI): where a restarted job goes on from")
    p.add_argument("--starting-offsets", default="earliest",
                   help="earliest, latest or a JSON object of queue offsets (default %(default)s); "
                        "only for a new checkpoint")
    p.add_argument("--group", help="consumer group whose offsets follow the job (rmq-admin "
                                   "consumerProgress shows its lag)")
    p.add_argument("--max-per-trigger", type=_positive_int,
                   help="at most this many messages per micro-batch")
    p.add_argument("--trigger", default="available-now", type=_trigger,
                   help="available-now (read what is there, then stop; default) or a processing "
                        "interval in seconds (run until stopped)")
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    return p


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a positive integer, got {text!r}")
    return int(text)


def _trigger(text: str) -> str:
    if text != "available-now":
        try:
            if float(text) <= 0:
                raise ValueError
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"available-now or a number of seconds above 0, got {text!r}") from None
    return text


def session(app: str, master: str | None):
    """A session for a job: ``master`` when given, else the one spark-submit set
    (the JVM's ``spark.master``; a plain ``python`` run gets ``local[*]``)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # the JVM first: its properties hold spark-submit's settings
    spark = make_session(master or SparkConf().get("spark.master", "local[*]"), app)
    register(spark)
    return spark


def source(spark, args: argparse.Namespace):
    """The job's input: a stream of the topics' messages."""
    reader = (spark.readStream.format("rmq").option("namesrv", args.namesrv)
              .option("topic", args.topic).option("startingOffsets", args.starting_offsets))
    if args.group:
        reader = reader.option("group", args.group)
    if args.max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_per_trigger))
    return reader.load()


def start(writer, args: argparse.Namespace):
    """Start the query with the job's trigger and checkpoint."""
    writer = writer.option("checkpointLocation", args.checkpoint)
    if args.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{float(args.trigger)} seconds")
    return writer.start()


def main(parser: argparse.ArgumentParser, run, app: str, argv: list[str] | None) -> int:
    """Parse the command line, run the job until its query ends, stop the session."""
    args = parser.parse_args(argv)
    spark = session(app, args.master)
    try:
        run(spark, args).awaitTermination()
    except Exception as e:  # the query failed: its cause on one line, not Spark's whole report
        print(f"{parser.prog}: {cause(e)}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


def cause(error: BaseException) -> str:
    """The line that says what went wrong: the data source's own ``rmq: ...``
    message when Spark's report carries one, else the report's first line."""
    text = str(error)
    found = re.findall(r"(rmq: [^\n]*)", text)
    return found[-1] if found else text.strip().splitlines()[0] if text.strip() else repr(error)
