"""Consumption through real rmq-namesrv and rmq-broker processes with the
pull responses built from runs of adjacent records and read by the client's
receive buffer: queues written interleaved (one record per run), in
batches (whole pulls as one run), with bodies large enough that responses
straddle and outgrow the client's buffer; every record comes back once, in
order, with its queue offset."""

from __future__ import annotations

import asyncio
import random

import pytest
import pytest_asyncio

from rmq.client import LitePullConsumer, Message, Producer, PullStatus
from rmq.testing.messaging import running_cluster

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(90)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("runs")) as c:
        yield c


def body(qid: int, i: int, size: int) -> bytes:
    """Incompressible (the producer compresses bodies over 4 KiB), so the
    records keep their size on the wire."""
    head = b"q%d-%d:" % (qid, i)
    return head + random.Random(qid * 1000 + i).randbytes(size - len(head))


async def read_queue(consumer: LitePullConsumer, mq, batch: int) -> list:
    got, offset = [], 0
    while True:
        result = await consumer.pull(mq, offset, batch)
        if result.status is not PullStatus.FOUND:
            return got
        assert result.messages and result.next_begin_offset > offset
        got.extend(result.messages)
        offset = result.next_begin_offset


async def test_interleaved_and_batched_records(cluster):
    topic = "TopicRuns"
    await cluster.create_topic(topic, 3)
    sizes = [100, 3000, 70_000]  # the last makes pulls bigger than the receive buffer
    async with Producer("pg_runs", client_config=cluster.client_config("runs-p")) as p:
        mqs = await p.fetch_publish_queues(topic)
        expected = {mq.queue_id: [] for mq in mqs}
        for i in range(60):  # one send per queue in turn: records of a queue never adjacent
            mq = mqs[i % 3]
            b = body(mq.queue_id, i, sizes[i % 2])
            await p.send(Message(topic, b), mq=mq)
            expected[mq.queue_id].append(b)
        for mq in mqs:  # then batches: long runs
            batch = [body(mq.queue_id, 100 + k, sizes[(k + mq.queue_id) % 3]) for k in range(40)]
            await p.send_batch([Message(topic, b) for b in batch], mq=mq)
            expected[mq.queue_id].extend(batch)
            big = body(mq.queue_id, 200, 600_000)  # one response past the buffer: it grows
            await p.send(Message(topic, big), mq=mq)
            expected[mq.queue_id].append(big)
    consumer = LitePullConsumer("cg_runs", client_config=cluster.client_config("runs-c"))
    await consumer.start()
    try:  # the queues read at once: responses queue up behind each other in the buffer
        results = await asyncio.gather(*(read_queue(consumer, mq, 32) for mq in mqs))
        for mq, got in zip(mqs, results, strict=True):
            assert [m.body for m in got] == expected[mq.queue_id]
            assert [m.queue_offset for m in got] == list(range(len(expected[mq.queue_id])))
            assert {m.queue_id for m in got} == {mq.queue_id}
    finally:
        await consumer.shutdown()
