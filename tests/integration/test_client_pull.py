"""``rmq.client.LitePullConsumer`` against real rmq-namesrv and rmq-broker
processes: assigned queues with poll, seek and commit; subscribe mode with
rebalancing between two members of a group."""

from __future__ import annotations

import collections

import pytest
import pytest_asyncio

from rmq.client import LitePullConsumer, Message, MessageQueue, Producer, PullStatus
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("pull")) as c:
        yield c


async def fill(c: Cluster, topic: str, per_queue: int, queues: int = 4) -> None:
    await c.create_topic(topic, queues)
    async with Producer(f"pg_{topic}", client_config=c.client_config(f"fill-{topic}")) as p:
        mqs = await p.fetch_publish_queues(topic)
        for mq in mqs:
            await p.send_batch([Message(topic, b"q%d-%d" % (mq.queue_id, i), tags=f"T{i % 2}")
                                for i in range(per_queue)], mq=mq)


async def committed(c: Cluster, group: str, mq: MessageQueue) -> int:
    r = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id)})
    return int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1


async def poll_all(consumer: LitePullConsumer, want: int, timeout_ms: int = 500,
                   rounds: int = 40) -> list:
    out: list = []
    for _ in range(rounds):
        out.extend(await consumer.poll(timeout_ms))
        if len(out) >= want:
            break
    return out


async def test_assign_poll_seek_commit(cluster):
    topic, group = "TopicAssign", "cg_assign"
    await fill(cluster, topic, 10)
    c = LitePullConsumer(group, client_config=cluster.client_config("assign"), auto_commit=False)
    mqs = await c.fetch_queues(topic)
    assert [mq.queue_id for mq in mqs] == [0, 1, 2, 3]
    mine = mqs[:2]
    c.assign(mine)
    await c.start()
    try:
        got = await poll_all(c, 20)
        assert len(got) == 20 and {m.queue_id for m in got} == {0, 1}
        per_queue = collections.defaultdict(list)
        for m in got:
            per_queue[m.queue_id].append(m.queue_offset)
        assert all(offs == list(range(10)) for offs in per_queue.values())
        assert await c.poll(200) == []  # nothing more in the assigned queues
        # nothing committed until commit() (a group with no offset that can still
        # read the queue's first message is answered 0, as 4.9.8 does)
        assert await committed(cluster, group, mine[0]) == 0
        await c.commit()
        assert [await committed(cluster, group, mq) for mq in mqs] == [10, 10, 0, 0]
        assert await c.committed(mine[0]) == 10
        # seek back: the same messages again, from the new position
        c.seek(mine[0], 7)
        again = await poll_all(c, 3)
        assert [(m.queue_id, m.queue_offset) for m in again] == [(0, 7), (0, 8), (0, 9)]
        await c.seek_to_begin(mine[1])
        assert [m.queue_offset for m in await poll_all(c, 10)] == list(range(10))
        await c.seek_to_end(mine[1])
        assert await c.poll(200) == []
        c.seek(mine[0], 4)
        await c.commit()
        assert await committed(cluster, group, mine[0]) == 4
        # one raw pull with a tag expression: the broker and the client filter by tag
        r = await c.pull(mqs[3], 0, 32, expression="T1")
        assert r.status is PullStatus.FOUND and r.next_begin_offset == 10
        assert [m.body for m in r.messages] == [b"q3-%d" % i for i in range(1, 10, 2)]
        assert (await c.pull(mqs[3], 10)).status is PullStatus.NO_NEW_MSG
        r = await c.pull(mqs[3], 1000)
        # far past the end of a queue whose min offset is 0: moved back to 0 (4.9.8)
        assert r.status is PullStatus.OFFSET_ILLEGAL and r.next_begin_offset == 0
        assert (r.min_offset, r.max_offset) == (0, 10)
    finally:
        await c.shutdown()


async def test_auto_commit_on_shutdown(cluster):
    topic, group = "TopicAuto", "cg_auto"
    await fill(cluster, topic, 5, queues=2)
    c = LitePullConsumer(group, client_config=cluster.client_config("auto"))
    c.assign(await c.fetch_queues(topic))
    await c.start()
    try:
        assert len(await poll_all(c, 10)) == 10
    finally:
        await c.shutdown()
    for q in (0, 1):
        assert await committed(cluster, group, MessageQueue(topic, "broker-a", q)) == 5


async def test_subscribe_mode_rebalances_between_members(cluster):
    topic, group = "TopicLiteSub", "cg_litesub"
    await fill(cluster, topic, 6)
    first = LitePullConsumer(group, client_config=cluster.client_config("lite-1"))
    first.subscribe(topic, "*")
    await first.start()
    second = LitePullConsumer(group, client_config=cluster.client_config("lite-2"))
    second.subscribe(topic, "*")
    try:
        assert {mq.queue_id for mq in first.owned_queues()} == {0, 1, 2, 3}
        await second.start()

        def split() -> bool:
            a = {mq.queue_id for mq in first.owned_queues()}
            b = {mq.queue_id for mq in second.owned_queues()}
            return len(a) == 2 and len(b) == 2 and not a & b

        await wait_until(split, 10)
        got_a = await poll_all(first, 12)
        got_b = await poll_all(second, 12)
        assert len(got_a) == len(got_b) == 12
        assert {m.queue_id for m in got_a}.isdisjoint({m.queue_id for m in got_b})
        bodies = {m.body for m in got_a + got_b}
        assert bodies == {b"q%d-%d" % (q, i) for q in range(4) for i in range(6)}
    finally:
        await second.shutdown()
        await first.shutdown()
