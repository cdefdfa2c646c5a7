"""``spark.readStream.format("rmq")``: a micro-batch source over a running cluster.

An offset is a JSON object ``{topic: {brokerName: {queueId: offset}}}`` of
consume-queue offsets: the next message of each queue the query has not
read.  Spark writes each batch's end offset to the query's checkpoint before
the batch runs, so a restarted query plans the same batches again and goes
on from the last one: every message is read exactly once into a sink that
is itself idempotent (files, Delta, ...).

Each trigger asks the name server for the topics' queues again, so queues
added to a topic and brokers that join are picked up; a queue first seen
after the start is read from offset 0 (the start of the queue).  A queue
whose broker is down keeps its last offset until the broker is back (the
route drops it meanwhile), so a broker restart loses and repeats nothing.
``maxOffsetsPerTrigger`` caps a batch, shared among the queues in
proportion to their backlog; ``Trigger.AvailableNow`` reads what was there
when the query started and stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from rmq.client.message import MessageQueue, PullStatus
from spark.source import live
from spark.source.cluster import Cluster, run
from spark.source.options import EARLIEST, LATEST, SourceOptions

Offsets = dict[MessageQueue, int]


def nest(offsets: Offsets) -> dict:
    """``{topic: {broker: {queueId: offset}}}`` (string keys, as JSON wants)."""
    out: dict = {}
    for mq, off in sorted(offsets.items()):
        out.setdefault(mq.topic, {}).setdefault(mq.broker_name, {})[str(mq.queue_id)] = int(off)
    return out


def flatten(table: dict) -> Offsets:
    return {MessageQueue(t, b, int(q)): int(off)
            for t, brokers in table.items() for b, queues in brokers.items() for q, off in queues.items()}


def limit_rows(start: Offsets, end: Offsets, max_rows: int) -> Offsets:
    """``end`` cut so that at most ``max_rows`` messages lie between it and
    ``start``, each queue getting a share proportional to its backlog."""
    backlog = {mq: off - start.get(mq, 0) for mq, off in end.items() if off > start.get(mq, 0)}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    share = {mq: n * max_rows // total for mq, n in backlog.items()}
    left = max_rows - sum(share.values())
    for mq in sorted(backlog, key=lambda m: (share[m] - backlog[m], m))[:left]:
        share[mq] += 1
    out = dict(end)
    for mq, n in share.items():
        out[mq] = start.get(mq, 0) + n
    return out


class RmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.o = options
        self.until: Offsets | None = None  # Trigger.AvailableNow: the offsets at its start
        self.committed: Offsets | None = None  # what the group's offsets on the brokers say

    # --- offsets -----------------------------------------------------------------
    def initialOffset(self) -> dict:
        return nest(run(self._initial()))

    async def _initial(self) -> Offsets:
        o = self.o
        out: Offsets = {}
        async with Cluster(o.namesrv, o.group, o.request_timeout_ms) as c:
            for topic in o.topics:
                mqs = await c.queues(topic, strict=True)
                if not mqs:
                    continue  # not created yet: its queues are new when they appear
                lows, highs = await c.offsets(mqs, "min"), await c.offsets(mqs, "max")
                silent = sorted({mq.broker_name for mq in mqs if mq not in lows or mq not in highs})
                if silent:
                    raise RuntimeError(f"rmq: broker(s) {', '.join(silent)} of {topic} did not "
                                       "answer; the query cannot fix its starting offsets")
                if o.starting_timestamp is not None:
                    out.update(await _at_time(c, mqs, o.starting_timestamp, highs))
                    continue
                for mq in mqs:
                    want = _starting(o.starting_offsets, mq)
                    out[mq] = lows[mq] if want == EARLIEST else highs[mq] if want == LATEST else want
        return out

    async def _latest(self, start: Offsets) -> Offsets:
        """Max offsets now; queues the brokers do not report keep their ``start``."""
        o = self.o
        out = dict(start)
        async with Cluster(o.namesrv, o.group, o.request_timeout_ms) as c:
            for topic in o.topics:
                mqs = await c.queues(topic)
                for mq, off in (await c.offsets(mqs, "max")).items():
                    out[mq] = max(off, start.get(mq, 0))
        return out

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next batch.  Spark asks once the batch that ended at
        ``start`` is complete, also after the last batch of
        ``Trigger.AvailableNow`` (it calls ``commit`` later, and not for that
        one): with a ``group``, ``start`` becomes the group's consumer offsets
        here (``rmq-admin consumerProgress -g GROUP -t TOPIC`` shows the lag)."""
        begin = flatten(start)
        if self.o.commit_offsets and begin != self.committed:
            run(self._commit(begin))
            self.committed = begin
        end = run(self._latest(begin))
        if self.until is not None:
            end = {mq: max(begin.get(mq, 0), min(off, self.until.get(mq, begin.get(mq, 0))))
                   for mq, off in end.items()}
        if isinstance(limit, ReadMaxRows):
            end = limit_rows(begin, end, limit.max_rows)
        return nest(end)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.o.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.until = run(self._latest({}))

    # --- batches -----------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin = flatten(start)
        out: list[InputPartition] = []
        for mq, hi in sorted(flatten(end).items()):
            out += live.split(mq, begin.get(mq, 0), hi, self.o.max_messages_per_partition)
        return out

    def read(self, partition: live.LiveRange) -> Iterator[pa.RecordBatch]:
        return live.read_range(partition, self.o)

    async def _commit(self, offsets: Offsets) -> None:
        async with Cluster(self.o.namesrv, self.o.group, self.o.request_timeout_ms) as c:
            await c.commit(offsets)


def _starting(spec: str | dict, mq: MessageQueue) -> int:
    """EARLIEST, LATEST or an offset for ``mq`` (a JSON spec without the queue: earliest)."""
    if spec == "earliest":
        return EARLIEST
    if spec == "latest":
        return LATEST
    return int(spec.get(mq.topic, {}).get(mq.broker_name, {}).get(str(mq.queue_id), EARLIEST))


async def _at_time(c: Cluster, mqs: list[MessageQueue], timestamp_ms: int, highs: Offsets) -> Offsets:
    """The first offset of each queue stored at or after ``timestamp_ms``: the
    broker's search gives the nearest message, one pull tells on which side it is."""
    found = await c.offsets(mqs, "search", timestamp_ms)

    async def exact(mq: MessageQueue) -> int:
        off = found.get(mq, highs[mq])
        if off >= highs[mq]:
            return highs[mq]
        r = await c.consumer.pull(mq, off, 1)
        if r.status is PullStatus.FOUND and r.messages and r.messages[0].store_timestamp < timestamp_ms:
            return off + 1
        return off

    got = await asyncio.gather(*(exact(mq) for mq in mqs))
    return dict(zip(mqs, got, strict=True))
