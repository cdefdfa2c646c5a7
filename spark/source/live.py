"""A running cluster as rows: plan queue ranges from the brokers' offsets,
read each range with pulls.

The planner asks the name server for the topics' readable queues and each
queue's broker for its min and max offset; pushed-down time bounds become
SEARCH_OFFSET_BY_TIMESTAMP calls (the broker's binary search over its
consume queue).  Each queue's ``[min, max)`` as of planning is cut into
ranges of at most ``maxMessagesPerPartition`` messages, so a batch read is a
snapshot: messages sent while it runs are not in it.  A streaming read plans
the same :class:`LiveRange` partitions between two checkpointed offsets.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from rmq.client.message import MessageExt, MessageQueue
from spark.source.cluster import Cluster, pulled, run
from spark.source.filters import Bounds
from spark.source.options import SourceOptions
from spark.source.rows import BATCH_ROWS, drop_pull_properties, to_batch


class LiveRange(InputPartition):
    """Offsets ``[lo, hi)`` of one queue, read by pulls."""

    def __init__(self, topic: str, broker: str, queue_id: int, lo: int, hi: int) -> None:
        super().__init__((topic, broker, queue_id, lo, hi))
        self.topic, self.broker, self.queue_id, self.lo, self.hi = topic, broker, queue_id, lo, hi


def split(mq: MessageQueue, lo: int, hi: int, max_messages: int) -> list[LiveRange]:
    return [LiveRange(mq.topic, mq.broker_name, mq.queue_id, a, min(hi, a + max_messages))
            for a in range(lo, hi, max_messages)]


def plan(o: SourceOptions, bounds: Bounds) -> list[LiveRange]:
    return run(_plan(o, bounds))


async def _plan(o: SourceOptions, bounds: Bounds) -> list[LiveRange]:
    out: list[LiveRange] = []
    async with Cluster(o.namesrv, o.group, o.request_timeout_ms) as c:
        for topic in o.topics:
            if bounds.topics is not None and topic not in bounds.topics:
                continue
            mqs = await c.queues(topic, strict=True)
            if not mqs:
                raise RuntimeError(f"rmq: no broker at {o.namesrv} serves topic {topic}")
            mqs = [mq for mq in mqs if bounds.wants(topic, mq.broker_name, mq.queue_id)]
            lows = await c.offsets(mqs, "min")
            highs = await c.offsets(mqs, "max")
            silent = sorted({mq.broker_name for mq in mqs if mq not in lows or mq not in highs})
            if silent:
                raise RuntimeError(f"rmq: broker(s) {', '.join(silent)} of topic {topic} "
                                   "did not answer for their queue offsets")
            if bounds.time_lo_ms is not None:  # nearest to the bound: never after the first match
                lows = _tighter(lows, await c.offsets(mqs, "search", bounds.time_lo_ms), max)
            if bounds.time_hi_ms is not None:  # nearest to just after it, kept
                found = await c.offsets(mqs, "search", bounds.time_hi_ms + 1)
                highs = _tighter(highs, {mq: off + 1 for mq, off in found.items()}, min)
            for mq in mqs:
                lo = max(lows[mq], bounds.offset_lo)
                hi = highs[mq] if bounds.offset_hi is None else min(highs[mq], bounds.offset_hi)
                out += split(mq, lo, hi, o.max_messages_per_partition)
    return out


def _tighter(base: dict[MessageQueue, int], found: dict[MessageQueue, int], pick) -> dict:
    return {mq: pick(off, found[mq]) if mq in found else off for mq, off in base.items()}


def read_range(p: LiveRange, o: SourceOptions) -> Iterator[pa.RecordBatch]:
    """The rows of one range, pulled in order, handed on in batches of BATCH_ROWS."""
    mq = MessageQueue(p.topic, p.broker, p.queue_id)
    pending: list[MessageExt] = []
    for msgs in pulled(o.namesrv, o.group, o.request_timeout_ms, mq, p.lo, p.hi,
                       o.pull_batch_size, o.fail_on_data_loss, o.retry_timeout_ms):
        drop_pull_properties(msgs)
        pending += msgs
        if len(pending) >= BATCH_ROWS:
            yield to_batch(pending, p.broker)
            pending = []
    if pending:
        yield to_batch(pending, p.broker)
